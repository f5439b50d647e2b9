//! Where a corpus' chunks live: their records, vectors, cached representations and the
//! nearest-chunk search, behind one trait.
//!
//! A [`ChunkStore`] is what a query and a training step read. `lprag-graph`'s
//! `MemoryStore` keeps everything in RAM; `lprag-lance`'s `LanceStore` keeps it in a
//! versioned Lance table on disk that other processes can read. Chunk ids are dense: a store of `n` chunks
//! holds ids `0..n`, and [`ChunkStore::append`] gives the next ones.
//!
//! Every handle reads one [`ChunkStore::version`]: a write makes a new version whole, and
//! a handle sees it only after [`ChunkStore::refresh`], so a reader never sees part of an
//! update.

use std::fmt::Debug;
use std::ops::Range;

use async_trait::async_trait;

use crate::{Chunk, ChunkId, Embeddings, Error, Filter, Result};

/// A version of a [`ChunkStore`]: every write makes a new, larger one.
pub type StoreVersion = u64;

/// Chunks to add to a [`ChunkStore`]: records, their vectors and, where the store keeps
/// them, their cached representations (one row per chunk, in order).
#[derive(Debug, Clone)]
pub struct ChunkBatch {
    /// The records. Their [`Chunk::id`] is ignored: the store numbers them.
    pub chunks: Vec<Chunk>,
    /// One vector per chunk, as wide as [`ChunkStore::dim`].
    pub vectors: Embeddings,
    /// One representation per chunk, as wide as [`ChunkStore::representation_dim`]; `None`
    /// leaves them empty (a store without representations refuses `Some`).
    pub representations: Option<Embeddings>,
}

impl ChunkBatch {
    /// A batch of chunks and their vectors, without representations.
    pub fn new(chunks: Vec<Chunk>, vectors: Embeddings) -> Self {
        Self {
            chunks,
            vectors,
            representations: None,
        }
    }

    /// Check the batch against a store's widths: one vector (and representation) per
    /// chunk, of the store's widths.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] naming the part that disagrees, or
    /// [`Error::InvalidInput`] for representations given to a store without them.
    pub fn check(&self, dim: usize, representation_dim: Option<usize>) -> Result<()> {
        let n = self.chunks.len();
        check_matrix("batch vectors", &self.vectors, n, dim)?;
        match (&self.representations, representation_dim) {
            (None, _) => Ok(()),
            (Some(r), Some(rd)) => check_matrix("batch representations", r, n, rd),
            (Some(_), None) => Err(Error::InvalidInput {
                location: "batch representations".into(),
                message: "this store keeps no representations".into(),
            }),
        }
    }
}

fn check_matrix(location: &str, m: &Embeddings, rows: usize, dim: usize) -> Result<()> {
    if m.rows() != rows {
        return Err(Error::DimensionMismatch {
            location: format!("{location} (rows, one per chunk)"),
            expected: rows,
            actual: m.rows(),
        });
    }
    if m.dim() != dim {
        return Err(Error::DimensionMismatch {
            location: format!("{location} (width)"),
            expected: dim,
            actual: m.dim(),
        });
    }
    Ok(())
}

/// Where a corpus' chunks live (see the module docs): records, vectors, cached
/// representations and the nearest-chunk search with a [`Filter`] the store evaluates
/// itself (in its engine, where it has one).
///
/// Implementations are `Send + Sync` and cheap to share behind an `Arc`; reads take `&self`
/// and may run concurrently. The trait assumes no local file: a store may be a remote
/// service.
#[async_trait]
pub trait ChunkStore: Send + Sync + Debug {
    /// Width of the chunk vectors.
    fn dim(&self) -> usize;

    /// Width of the cached representations, `None` for a store without them.
    fn representation_dim(&self) -> Option<usize>;

    /// The version this handle reads.
    fn version(&self) -> StoreVersion;

    /// How many chunks the version this handle reads holds (ids `0..len`).
    fn len(&self) -> usize;

    /// Whether the version this handle reads holds no chunk.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of `ids`, in the order asked (an id may repeat).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an id at or past [`ChunkStore::len`]; the store's own
    /// failures as [`Error::Backend`].
    async fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>>;

    /// The vectors of `ids`, one row each, in the order asked.
    ///
    /// # Errors
    /// As [`ChunkStore::chunks`].
    async fn vectors(&self, ids: &[ChunkId]) -> Result<Embeddings>;

    /// The vectors of the chunks `range` (a block of a streamed scan).
    ///
    /// # Errors
    /// As [`ChunkStore::chunks`], for a range that ends past [`ChunkStore::len`].
    async fn vector_block(&self, range: Range<ChunkId>) -> Result<Embeddings> {
        let ids: Vec<ChunkId> = range.collect();
        self.vectors(&ids).await
    }

    /// The cached representations of `ids`, one row each, in the order asked; `None` when
    /// the store keeps none, or when any of these chunks has none.
    ///
    /// # Errors
    /// As [`ChunkStore::chunks`].
    async fn representations(&self, ids: &[ChunkId]) -> Result<Option<Embeddings>>;

    /// The (up to) `k` chunks `filter` admits nearest to `query` by cosine, nearest first,
    /// as `(id, cosine)`. An exact store breaks ties to the lower id; an approximate one
    /// (an ANN index) may miss some of the exact answer.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a query of another width, [`Error::InvalidInput`]
    /// for an invalid filter, and the store's own failures.
    async fn nearest(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
    ) -> Result<Vec<(ChunkId, f32)>>;

    /// Add `batch` as one new version and move this handle to it; the new chunks get the
    /// ids `len..len + batch.chunks.len()`, returned.
    ///
    /// # Errors
    /// [`ChunkBatch::check`]'s errors (nothing is written), and the store's own failures;
    /// a store that other writers change meanwhile may refuse with [`Error::InvalidInput`].
    async fn append(&self, batch: ChunkBatch) -> Result<Range<ChunkId>>;

    /// Move this handle to the newest version (what other handles and processes wrote);
    /// returns it.
    ///
    /// # Errors
    /// The store's own failures.
    async fn refresh(&self) -> Result<StoreVersion>;
}

/// Check a query against a store's width: the shared check of [`ChunkStore::nearest`].
///
/// # Errors
/// [`Error::DimensionMismatch`] when `query` is not `dim` wide.
pub fn check_store_query(query: &[f32], dim: usize) -> Result<()> {
    if query.len() != dim {
        return Err(Error::DimensionMismatch {
            location: "store query vector".into(),
            expected: dim,
            actual: query.len(),
        });
    }
    Ok(())
}

/// Check ids against a store's length: the shared check of [`ChunkStore::chunks`] and
/// its siblings.
///
/// # Errors
/// [`Error::InvalidInput`] naming the first id at or past `len`.
pub fn check_store_ids(ids: &[ChunkId], len: usize) -> Result<()> {
    if let Some((at, id)) = ids.iter().enumerate().find(|(_, &id)| id >= len) {
        return Err(Error::InvalidInput {
            location: format!("chunk ids[{at}]"),
            message: format!("chunk {id} is not in the store ({len} chunks)"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Provenance;

    fn chunk(i: usize) -> Chunk {
        Chunk::new(
            i,
            format!("text {i}"),
            Provenance {
                document_id: format!("d{i}"),
                title: String::new(),
                span: 0..1,
            },
        )
    }

    #[test]
    fn a_batch_is_checked_against_the_store_widths() {
        let v = Embeddings::new(3, vec![0.0; 6]).unwrap();
        let ok = ChunkBatch::new(vec![chunk(0), chunk(1)], v.clone());
        assert!(ok.check(3, None).is_ok());
        assert!(matches!(
            ok.check(4, None),
            Err(Error::DimensionMismatch {
                expected: 4,
                actual: 3,
                ..
            })
        ));
        let short = ChunkBatch::new(vec![chunk(0)], v.clone());
        assert!(matches!(
            short.check(3, None),
            Err(Error::DimensionMismatch {
                expected: 1,
                actual: 2,
                ..
            })
        ));
        let mut with_reps = ok.clone();
        with_reps.representations = Some(Embeddings::new(2, vec![0.0; 4]).unwrap());
        assert!(with_reps.check(3, Some(2)).is_ok());
        assert!(matches!(
            with_reps.check(3, Some(5)),
            Err(Error::DimensionMismatch {
                expected: 5,
                actual: 2,
                ..
            })
        ));
        assert!(matches!(
            with_reps.check(3, None),
            Err(Error::InvalidInput { .. })
        ));
    }

    #[test]
    fn ids_and_queries_are_checked() {
        assert!(check_store_ids(&[0, 2, 1], 3).is_ok());
        let err = check_store_ids(&[0, 3], 3).unwrap_err().to_string();
        assert!(err.contains("ids[1]") && err.contains("chunk 3"), "{err}");
        assert!(check_store_query(&[0.0; 4], 4).is_ok());
        assert!(check_store_query(&[0.0; 3], 4).is_err());
    }
}
