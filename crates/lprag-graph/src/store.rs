//! [`MemoryStore`]: the in-memory [`ChunkStore`], the chunks, vectors and representations
//! an index holds in RAM, searched by the exact scan of [`crate::nearest_by_cosine_where`].

use std::ops::Range;
use std::sync::RwLock;

use async_trait::async_trait;
use lprag_core::{
    check_store_ids, check_store_query, Chunk, ChunkBatch, ChunkId, ChunkStore, Embeddings, Error,
    Filter, Result, StoreVersion,
};

use crate::kernels::{inverse_norms, nearest_by_cosine_where};

/// The in-memory [`ChunkStore`]: records, vectors and (optionally) representations in
/// RAM, nearest chunks by an exact scan (ties to the lower id), filters evaluated with
/// [`Filter::matches`].
///
/// Every clone of an `Arc<MemoryStore>` is one handle: an append is seen by all of them
/// at once, as one new version. A reader never sees part of a batch (the store's lock is
/// held while a batch is added).
#[derive(Debug)]
pub struct MemoryStore {
    dim: usize,
    representation_dim: Option<usize>,
    inner: RwLock<Inner>,
}

#[derive(Debug)]
struct Inner {
    version: StoreVersion,
    chunks: Vec<Chunk>,
    vectors: Embeddings,
    inv_norms: Vec<f32>,
    /// One row per chunk when the store keeps representations; rows of chunks appended
    /// without them are zeros, and `has_representation` says which.
    representations: Option<Embeddings>,
    has_representation: Vec<bool>,
}

impl MemoryStore {
    /// An empty store of `dim`-wide vectors, keeping `representation_dim`-wide
    /// representations when it is `Some`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a width of 0.
    pub fn new(dim: usize, representation_dim: Option<usize>) -> Result<Self> {
        if dim == 0 || representation_dim == Some(0) {
            return Err(Error::InvalidInput {
                location: "MemoryStore::new".into(),
                message: "vector and representation widths must be at least 1".into(),
            });
        }
        Ok(Self {
            dim,
            representation_dim,
            inner: RwLock::new(Inner {
                version: 0,
                chunks: Vec::new(),
                vectors: Embeddings::empty(dim),
                inv_norms: Vec::new(),
                representations: representation_dim.map(Embeddings::empty),
                has_representation: Vec::new(),
            }),
        })
    }

    /// A store holding `batch` as its first version (version 1); chunks are renumbered
    /// `0..n`.
    ///
    /// # Errors
    /// Those of [`MemoryStore::new`] and [`ChunkBatch::check`].
    pub fn from_batch(batch: ChunkBatch) -> Result<Self> {
        let rep_dim = batch.representations.as_ref().map(Embeddings::dim);
        let store = Self::new(batch.vectors.dim(), rep_dim)?;
        store.append_now(batch)?;
        Ok(store)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // A panic while the lock was held left no partial batch (appends build every
        // part before they take it), so a poisoned lock still guards a whole version.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn append_now(&self, batch: ChunkBatch) -> Result<Range<ChunkId>> {
        batch.check(self.dim, self.representation_dim)?;
        let n = batch.chunks.len();
        let norms = inverse_norms(&batch.vectors, n);
        let zeros = match (self.representation_dim, &batch.representations) {
            (Some(rd), None) => Some(Embeddings::new(rd, vec![0.0; n * rd])?),
            _ => None,
        };
        let has = batch.representations.is_some();
        let mut w = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let start = w.chunks.len();
        // Every width was checked above, so none of these extends can fail half-way.
        w.vectors.extend(&batch.vectors)?;
        if let Some(all) = w.representations.as_mut() {
            if let Some(r) = batch.representations.as_ref().or(zeros.as_ref()) {
                all.extend(r)?;
            }
        }
        w.chunks
            .extend(batch.chunks.into_iter().enumerate().map(|(i, mut c)| {
                c.id = start + i;
                c
            }));
        w.inv_norms.extend(norms);
        w.has_representation.extend(std::iter::repeat_n(has, n));
        w.version += 1;
        Ok(start..start + n)
    }
}

#[async_trait]
impl ChunkStore for MemoryStore {
    fn dim(&self) -> usize {
        self.dim
    }

    fn representation_dim(&self) -> Option<usize> {
        self.representation_dim
    }

    fn version(&self) -> StoreVersion {
        self.read().version
    }

    fn len(&self) -> usize {
        self.read().chunks.len()
    }

    async fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let r = self.read();
        check_store_ids(ids, r.chunks.len())?;
        Ok(ids.iter().map(|&i| r.chunks[i].clone()).collect())
    }

    async fn vectors(&self, ids: &[ChunkId]) -> Result<Embeddings> {
        let r = self.read();
        check_store_ids(ids, r.chunks.len())?;
        Ok(r.vectors.select(ids))
    }

    async fn representations(&self, ids: &[ChunkId]) -> Result<Option<Embeddings>> {
        let r = self.read();
        check_store_ids(ids, r.chunks.len())?;
        match &r.representations {
            Some(all) if ids.iter().all(|&i| r.has_representation[i]) => Ok(Some(all.select(ids))),
            _ => Ok(None),
        }
    }

    async fn nearest(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
    ) -> Result<Vec<(ChunkId, f32)>> {
        check_store_query(query, self.dim)?;
        filter.validate()?;
        let r = self.read();
        let q_norm = lprag_core::dot(query, query).sqrt();
        let hits = if filter.is_all() {
            nearest_by_cosine_where(&r.vectors, &r.inv_norms, query, k, &|_| true)
        } else {
            let chunks = &r.chunks;
            nearest_by_cosine_where(&r.vectors, &r.inv_norms, query, k, &|i| {
                filter.matches(&chunks[i])
            })
        };
        let scale = if q_norm > 0.0 { 1.0 / q_norm } else { 0.0 };
        Ok(hits
            .into_iter()
            .map(|(i, s)| (i as ChunkId, s * scale))
            .collect())
    }

    async fn append(&self, batch: ChunkBatch) -> Result<Range<ChunkId>> {
        self.append_now(batch)
    }

    async fn refresh(&self) -> Result<StoreVersion> {
        Ok(self.read().version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{cosine, Provenance};

    fn chunk(doc: &str, lang: &str) -> Chunk {
        let mut c = Chunk::new(
            99,
            format!("from {doc}"),
            Provenance {
                document_id: doc.into(),
                title: String::new(),
                span: 0..4,
            },
        );
        c.metadata.insert("lang".into(), lang.into());
        c
    }

    fn batch() -> ChunkBatch {
        let vectors = Embeddings::from_rows(
            3,
            &[
                vec![1.0, 0.0, 0.0],
                vec![0.9, 0.1, 0.0],
                vec![0.0, 1.0, 0.0],
                vec![0.0, 0.0, 2.0],
            ],
        )
        .unwrap();
        ChunkBatch::new(
            vec![
                chunk("a", "en"),
                chunk("b", "de"),
                chunk("c", "en"),
                chunk("d", "fr"),
            ],
            vectors,
        )
    }

    #[tokio::test]
    async fn reads_what_was_appended_and_numbers_it() {
        let store = MemoryStore::new(3, None).unwrap();
        assert_eq!((store.len(), store.version()), (0, 0));
        assert_eq!(store.append(batch()).await.unwrap(), 0..4);
        assert_eq!(store.append(batch()).await.unwrap(), 4..8);
        assert_eq!((store.len(), store.version()), (8, 2));
        let got = store.chunks(&[5, 0]).await.unwrap();
        assert_eq!(
            (got[0].id, got[0].provenance.document_id.as_str()),
            (5, "b")
        );
        assert_eq!(got[1].id, 0);
        let v = store.vectors(&[6, 1]).await.unwrap();
        assert_eq!(v.row(0), &[0.0, 1.0, 0.0]);
        assert_eq!(v.row(1), &[0.9, 0.1, 0.0]);
        assert_eq!(store.vector_block(2..4).await.unwrap().rows(), 2);
        assert!(store.chunks(&[8]).await.is_err());
        assert!(store.vector_block(7..9).await.is_err());
        assert_eq!(store.representations(&[0]).await.unwrap(), None);
    }

    #[tokio::test]
    async fn nearest_is_the_exact_cosine_ranking_with_the_filter() {
        let store = MemoryStore::from_batch(batch()).unwrap();
        let q = [2.0, 0.2, 0.0];
        let hits = store.nearest(&q, 3, &Filter::All).await.unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.0).collect();
        assert_eq!(ids, vec![1, 0, 2]);
        let v = store.vectors(&[1]).await.unwrap();
        assert!((hits[0].1 - cosine(&q, v.row(0))).abs() < 1e-6);
        let en = store
            .nearest(&q, 3, &Filter::eq("lang", "en"))
            .await
            .unwrap();
        assert_eq!(en.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 2]);
        let docs = store
            .nearest(&q, 5, &Filter::Documents(vec!["d".into()]))
            .await
            .unwrap();
        assert_eq!(docs.iter().map(|h| h.0).collect::<Vec<_>>(), vec![3]);
        assert!(store.nearest(&[1.0], 1, &Filter::All).await.is_err());
    }

    #[tokio::test]
    async fn representations_are_kept_per_batch() {
        let store = MemoryStore::new(3, Some(2)).unwrap();
        let mut with = batch();
        with.representations =
            Some(Embeddings::new(2, (0..8).map(|x| x as f32).collect()).unwrap());
        store.append(with).await.unwrap();
        store.append(batch()).await.unwrap();
        let r = store.representations(&[3, 1]).await.unwrap().unwrap();
        assert_eq!((r.row(0), r.row(1)), (&[6.0, 7.0][..], &[2.0, 3.0][..]));
        assert_eq!(store.representations(&[1, 4]).await.unwrap(), None);
        let mut wrong = batch();
        wrong.representations = Some(Embeddings::new(3, vec![0.0; 12]).unwrap());
        assert!(store.append(wrong).await.is_err());
        assert_eq!(store.len(), 8, "a refused batch writes nothing");
    }
}
