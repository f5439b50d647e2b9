//! Exact flat cosine search.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, Chunker, Document, Embeddings, Encoder, Error, Filter, Result, Retriever, ScoredChunk,
    Selection,
};
use serde::{Deserialize, Serialize};

use super::{
    admitted, check_chunks, check_saved_dense, check_saved_encoder, passage_chunks, prepare,
    read_index, select, EncoderOrigin, Prepared, SavedDense, SavedDenseRef,
};
use crate::retrievers::common::{
    begin_update, build_from, check_finite, embed_all, embed_query, extend_embeddings,
    input_setters, save_json_atomic, BuildInputs, DefaultEncoder, Docs, Renumbered,
};
use crate::UpdateReport;

/// Parameters of [`DenseRetriever`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DenseConfig {
    /// The longest query, in bytes of UTF-8, that `retrieve` embeds; a longer one is
    /// [`Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`].
    pub max_query_bytes: usize,
}

impl Default for DenseConfig {
    fn default() -> Self {
        Self {
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

/// Version of the file written by [`DenseRetriever::save`].
pub const DENSE_FORMAT_VERSION: u32 = 1;
const DENSE_FILE: &str = "dense.json";
/// Where a save may write (its file and nothing else of the directory).
const DENSE_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a dense index", DENSE_FILE);

/// Assembles a [`DenseRetriever`]: `DenseRetriever::builder().encoder(e).build(&docs)`.
pub struct DenseRetrieverBuilder {
    inputs: BuildInputs,
    config: DenseConfig,
}

impl DenseRetrieverBuilder {
    input_setters!(DenseConfig);

    /// Chunk the documents (metadata inherited, content hashes recorded), embed the chunks
    /// and L2-normalise the rows.
    ///
    /// # Errors
    /// [`Error::EmptyCorpus`] when no document produced a chunk; the errors of the chunker
    /// and the encoder.
    pub async fn build(self, documents: &[Document]) -> Result<DenseRetriever> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(DenseRetriever);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<DenseRetriever> {
        let Prepared {
            chunks,
            texts,
            encoder,
            origin,
            progress,
        } = prepare(&self.inputs, documents).await?;
        let mut vectors = embed_all(&*encoder, &texts, "embed chunks", &*progress).await?;
        vectors.normalize();
        Ok(
            DenseRetriever::from_parts(Arc::new(chunks), vectors, encoder, origin)
                .with_config(self.config),
        )
    }
}

/// Dense retrieval by exact (brute-force) cosine similarity: the "naive RAG" baseline.
///
/// At build time every chunk's [`Chunk::embedding_text`] is embedded with the encoder and
/// the rows are L2-normalised; a query is embedded with the same encoder
/// ([`Encoder::embed_queries`]) and scored against every row by a dot product (= cosine
/// similarity, in `[-1, 1]`). Cost per query: one encoder call plus `chunks × dimension`
/// multiply-adds; no approximation, so it is the reference any approximate index is
/// measured against. With a [`Filter`], only the admitted rows are scored.
///
/// Scoring runs inside the `async fn` without `spawn_blocking`: at benchmark sizes (up to
/// ~10⁵ chunks × 10³ dimensions) it takes milliseconds.
///
/// Clones are cheap (chunks, embeddings and encoder are shared) and independent: an
/// update builds new chunk and embedding lists and leaves other clones as they were.
#[derive(Clone)]
pub struct DenseRetriever {
    pub(super) chunks: Arc<Vec<Chunk>>,
    /// L2-normalised, one row per chunk (shared by clones: [`Embeddings`] is an `Arc`).
    vectors: Embeddings,
    pub(super) encoder: Arc<dyn Encoder>,
    origin: EncoderOrigin,
    config: DenseConfig,
}

impl std::fmt::Debug for DenseRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseRetriever")
            .field("chunks", &self.chunks.len())
            .field("dimension", &self.vectors.dim())
            .field("encoder", &self.encoder.name())
            .field("config", &self.config)
            .finish()
    }
}

impl DenseRetriever {
    /// Texts per [`Encoder::embed`] call in [`DenseRetriever::from_chunks`].
    pub const BATCH: usize = 512;

    /// A builder with the defaults: the default chunker
    /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)) and encoder
    /// ([`DefaultEncoder::choose`]).
    pub fn builder() -> DenseRetrieverBuilder {
        DenseRetrieverBuilder {
            inputs: BuildInputs::default(),
            config: DenseConfig::default(),
        }
    }

    /// Index whole passages (one chunk per document, see [`passage_chunks`]).
    ///
    /// # Errors
    /// Those of [`passage_chunks`] and [`DenseRetriever::from_chunks`].
    pub async fn build(docs: &[Document], encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::from_chunks(passage_chunks(docs)?, encoder).await
    }

    /// Index the given chunks (ids must be their positions). Embeds
    /// [`Chunk::embedding_text`] in batches of [`DenseRetriever::BATCH`].
    ///
    /// # Errors
    /// [`Error::EmptyCorpus`] without chunks, [`Error::InvalidInput`] when an id is not its
    /// position; the encoder's errors, and [`Error::DimensionMismatch`] when its output
    /// has the wrong shape.
    pub async fn from_chunks(chunks: Vec<Chunk>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        check_chunks(&chunks, "dense")?;
        let mut vectors = Embeddings::empty(encoder.dimension().max(1));
        for batch in chunks.chunks(Self::BATCH) {
            let texts: Vec<String> = batch.iter().map(Chunk::embedding_text).collect();
            let e = encoder.embed(&texts).await?;
            if e.rows() != texts.len() {
                return Err(Error::DimensionMismatch {
                    location: format!("encoder {} rows", encoder.name()),
                    expected: texts.len(),
                    actual: e.rows(),
                });
            }
            vectors.extend(&e)?;
        }
        Self::from_embeddings(chunks, vectors, encoder)
    }

    /// Use precomputed chunk embeddings (one row per chunk, made by `encoder`; they are
    /// L2-normalised here).
    ///
    /// # Errors
    /// Those of [`DenseRetriever::from_chunks`] for the chunks,
    /// [`Error::DimensionMismatch`] when the rows or width do not fit, and
    /// [`Error::InvalidInput`] for a non-finite value.
    pub fn from_embeddings(
        chunks: Vec<Chunk>,
        mut vectors: Embeddings,
        encoder: Arc<dyn Encoder>,
    ) -> Result<Self> {
        check_chunks(&chunks, "dense")?;
        if vectors.rows() != chunks.len() {
            return Err(Error::DimensionMismatch {
                location: "DenseRetriever embeddings rows".into(),
                expected: chunks.len(),
                actual: vectors.rows(),
            });
        }
        if vectors.dim() != encoder.dimension() {
            return Err(Error::DimensionMismatch {
                location: format!("DenseRetriever embeddings vs encoder {}", encoder.name()),
                expected: encoder.dimension(),
                actual: vectors.dim(),
            });
        }
        if let Some(i) = vectors.as_slice().iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(
                "DenseRetriever embeddings",
                format!("a non-finite value in row {}", i / vectors.dim().max(1)),
            ));
        }
        vectors.normalize();
        Ok(Self {
            chunks: Arc::new(chunks),
            vectors,
            encoder,
            origin: EncoderOrigin::default(),
            config: DenseConfig::default(),
        })
    }

    /// An index from its parts (`vectors` normalised already).
    pub(super) fn from_parts(
        chunks: Arc<Vec<Chunk>>,
        vectors: Embeddings,
        encoder: Arc<dyn Encoder>,
        origin: EncoderOrigin,
    ) -> Self {
        Self {
            chunks,
            vectors,
            encoder,
            origin,
            config: DenseConfig::default(),
        }
    }

    /// This index with another configuration.
    pub fn with_config(mut self, config: DenseConfig) -> Self {
        self.config = config;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &DenseConfig {
        &self.config
    }

    /// The encoder of chunks and queries.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// The default encoder the builder chose (recorded so that [`DenseRetriever::open`]
    /// can rebuild it); `None` when an encoder was given.
    pub fn default_encoder(&self) -> Option<&DefaultEncoder> {
        self.origin.default.as_ref()
    }

    /// The L2-normalised chunk embeddings, one row per chunk.
    pub fn embeddings(&self) -> &Embeddings {
        &self.vectors
    }

    /// Cosine similarity of a query vector to every chunk, in chunk order.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when `query` is not as wide as the embeddings.
    pub fn scores(&self, query: &[f32]) -> Result<Vec<f32>> {
        self.scores_where(query, None)
    }

    /// [`DenseRetriever::scores`] of the `admitted` chunks only (the others score 0).
    fn scores_where(&self, query: &[f32], admitted: Option<&[bool]>) -> Result<Vec<f32>> {
        if query.len() != self.vectors.dim() {
            return Err(Error::DimensionMismatch {
                location: "DenseRetriever query vector".into(),
                expected: self.vectors.dim(),
                actual: query.len(),
            });
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let score = |i: usize, row: &[f32]| {
            if admitted.is_none_or(|m| m[i]) {
                lprag_core::dot(row, query) * inv
            } else {
                0.0
            }
        };
        let d = self.vectors.dim().max(1);
        let rows = self.vectors.as_slice();
        if self.vectors.rows() < lprag_graph::PARALLEL_SCAN_FROM {
            return Ok(rows
                .chunks_exact(d)
                .enumerate()
                .map(|(i, row)| score(i, row))
                .collect());
        }
        // Large indexes: blocks of rows on rayon's threads, in row order.
        use rayon::prelude::*;
        const BLOCK: usize = 4_096;
        let mut scores = vec![0.0f32; self.vectors.rows()];
        scores
            .par_chunks_mut(BLOCK)
            .zip(rows.par_chunks(BLOCK * d))
            .enumerate()
            .for_each(|(b, (out, block))| {
                for (j, (o, row)) in out.iter_mut().zip(block.chunks_exact(d)).enumerate() {
                    *o = score(b * BLOCK + j, row);
                }
            });
        Ok(scores)
    }

    /// The chunks `selection` keeps among the `admitted` ones, as `(chunk id, cosine)`,
    /// best first. The query is not checked here (the callers do).
    pub(super) async fn rank(
        &self,
        query: &str,
        selection: Selection,
        admitted: Option<&[bool]>,
    ) -> Result<Vec<(usize, f64)>> {
        selection.validate()?;
        let q = embed_query(&*self.encoder, query).await?;
        let scores: Vec<f64> = self
            .scores_where(&q, admitted)?
            .into_iter()
            .map(f64::from)
            .collect();
        select(&scores, selection, admitted)
    }

    async fn search(
        &self,
        query: &str,
        selection: Selection,
        admitted: Option<&[bool]>,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        Ok(self
            .rank(query, selection, admitted)
            .await?
            .into_iter()
            .map(|(i, s)| ScoredChunk {
                chunk: self.chunks[i].clone(),
                score: s as f32,
            })
            .collect())
    }

    /// This index over the chunks of an update (`chunks`: the kept ones, whose old ids are
    /// `kept`, then the new ones from `first_new`): the kept rows as they are, the new
    /// chunks embedded and normalised.
    pub(super) async fn updated(
        &self,
        chunks: Arc<Vec<Chunk>>,
        kept: &[usize],
        first_new: usize,
    ) -> Result<Self> {
        let origin = self.origin.before_update(&self.chunks).await?;
        let vectors = extend_embeddings(
            &self.vectors,
            kept,
            &*self.encoder,
            &chunks[first_new..],
            true,
        )
        .await?;
        Ok(Self {
            chunks,
            vectors,
            encoder: self.encoder.clone(),
            origin,
            config: self.config,
        })
    }

    /// Remove the chunks of `remove` (document ids), add `add`.
    async fn apply(
        &mut self,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
    ) -> Result<UpdateReport> {
        let (
            Renumbered {
                chunks,
                kept,
                first_new,
                ..
            },
            mut report,
            mut laps,
        ) = begin_update(
            &self.chunks,
            (remove, add),
            chunker,
            &self.encoder,
            "DenseRetriever update",
        )
        .await?;
        report.chunks = chunks.len();
        let next = self.updated(Arc::new(chunks), &kept, first_new).await?;
        laps.lap(&mut report, "embed");
        *self = next;
        Ok(report)
    }

    /// The saved form of this index, with `config` as its settings.
    pub(super) fn saved<'a, C>(&'a self, version: u32, config: &'a C) -> SavedDenseRef<'a, C> {
        SavedDenseRef {
            version,
            encoder: self.encoder.name(),
            encoder_fingerprint: self.encoder.fingerprint(),
            default_encoder: self.origin.default.as_ref(),
            hashing_idf: self.origin.idf.as_deref(),
            config,
            chunks: &self.chunks,
            embeddings: &self.vectors,
        }
    }

    /// Write `saved` as `dir/file` under `spec` (checked finite first).
    pub(super) fn write<C: Serialize>(
        dir: &Path,
        spec: &lprag_core::dirs::DirSpec,
        file: &str,
        saved: &SavedDenseRef<'_, C>,
    ) -> Result<()> {
        check_finite(dir, file, "embeddings", saved.embeddings.as_slice())?;
        let _lock = crate::durable::open_for_save(spec, dir)?;
        save_json_atomic(dir, file, saved)
    }

    /// Read `path` (format `version`) and build the index with `encoder`, or, without one,
    /// the recorded default encoder (`who` names the type in errors). Returns the saved
    /// settings too.
    pub(super) fn read<C: serde::de::DeserializeOwned>(
        path: &Path,
        version: u32,
        encoder: Option<Arc<dyn Encoder>>,
        who: &str,
    ) -> Result<(Self, C)> {
        let saved: SavedDense<C> = read_index(path, version)?;
        check_saved_dense(path, &saved, version)?;
        let encoder = match encoder {
            Some(e) => e,
            None => EncoderOrigin::rebuild(path, &saved, who)?,
        };
        check_saved_encoder(path, &saved, &*encoder)?;
        let SavedDense {
            default_encoder,
            hashing_idf,
            config,
            chunks,
            embeddings,
            ..
        } = saved;
        Ok((
            Self {
                chunks: Arc::new(chunks),
                vectors: embeddings,
                encoder,
                origin: EncoderOrigin {
                    default: default_encoder,
                    idf: hashing_idf.map(Arc::new),
                },
                config: DenseConfig::default(),
            },
            config,
        ))
    }

    /// Write the index to `dir/dense.json` atomically (a temporary file, then a rename).
    /// `dir` must be new, empty, or hold a dense index; the directory's other files are
    /// left alone.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` holds something else; I/O errors.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let saved = self.saved(DENSE_FORMAT_VERSION, &self.config);
        Self::write(dir.as_ref(), &DENSE_DIR, DENSE_FILE, &saved)
    }

    /// Read an index written by [`DenseRetriever::save`]; `encoder` must be the one it was
    /// built with (checked by name, dimension and fingerprint).
    ///
    /// # Errors
    /// I/O and format errors of the file; [`Error::InvalidInput`] for another encoder.
    pub fn load(dir: impl AsRef<Path>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        let path = dir.as_ref().join(DENSE_FILE);
        let (me, config) =
            Self::read(&path, DENSE_FORMAT_VERSION, Some(encoder), "DenseRetriever")?;
        Ok(me.with_config(config))
    }

    /// Read an index written by [`DenseRetriever::save`] that was built with the default
    /// encoder, rebuilding that encoder.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom encoder (use
    /// [`DenseRetriever::load`]); those of [`DenseRetriever::load`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().join(DENSE_FILE);
        let (me, config) = Self::read(&path, DENSE_FORMAT_VERSION, None, "DenseRetriever")?;
        Ok(me.with_config(config))
    }
}

super::updates!(DenseRetriever, "DenseRetriever");

#[async_trait]
impl Retriever for DenseRetriever {
    fn name(&self) -> &str {
        "dense"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        self.search(query, selection, None).await
    }

    /// Scores the admitted chunks only (the filter applies inside the scan).
    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        let mask = admitted(&self.chunks, filter)?;
        self.search(query, selection, mask.as_deref()).await
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}
