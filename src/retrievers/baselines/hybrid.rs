//! Reciprocal-rank fusion of dense and BM25 retrieval.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Chunker, Document, Encoder, Error, Filter, Result, Retriever, ScoredChunk,
    Selection,
};
use serde::{Deserialize, Serialize};

use super::{
    admitted, passage_chunks, prepare, Bm25Config, Bm25Retriever, DenseConfig, DenseRetriever,
    Prepared,
};
use crate::retrievers::common::{
    begin_update, build_from, embed_all, input_setters, BuildInputs, DefaultEncoder, Docs,
    Renumbered,
};
use crate::UpdateReport;

/// Parameters of [`HybridRetriever`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RrfConfig {
    /// The rank offset `k` of RRF (Cormack et al., 2009). Default 60.
    pub k: f64,
    /// How many chunks to take from each retriever before fusing (more when the caller
    /// asks for more). Default 100.
    pub candidates: usize,
    /// The longest query, in bytes of UTF-8, that `retrieve` answers; a longer one is
    /// [`Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`].
    pub max_query_bytes: usize,
}

impl Default for RrfConfig {
    fn default() -> Self {
        Self {
            k: 60.0,
            candidates: 100,
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl RrfConfig {
    /// Check the numbers: `k` finite and `≥ 0`, `candidates ≥ 1`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if !(self.k.is_finite() && self.k >= 0.0) {
            return Err(Error::invalid(
                "RrfConfig.k",
                format!("must be finite and >= 0, got {}", self.k),
            ));
        }
        if self.candidates == 0 {
            return Err(Error::invalid("RrfConfig.candidates", "must be at least 1"));
        }
        Ok(())
    }
}

/// Version of the file written by [`HybridRetriever::save`].
pub const HYBRID_FORMAT_VERSION: u32 = 1;
const HYBRID_FILE: &str = "hybrid.json";
/// Where a save may write (its file and nothing else of the directory).
const HYBRID_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a hybrid (dense + BM25) index", HYBRID_FILE);

/// The hybrid's own settings in its saved file (beside the dense part's).
#[derive(Serialize, Deserialize)]
struct HybridSettings {
    rrf: RrfConfig,
    bm25: Bm25Config,
}

/// Assembles a [`HybridRetriever`]: `HybridRetriever::builder().encoder(e).build(&docs)`.
pub struct HybridRetrieverBuilder {
    inputs: BuildInputs,
    config: RrfConfig,
    bm25: Bm25Config,
}

impl HybridRetrieverBuilder {
    input_setters!(RrfConfig);

    /// The BM25 part's parameters (default [`Bm25Config::default`]; its
    /// `max_query_bytes` is the fusion's, [`RrfConfig::max_query_bytes`]).
    pub fn bm25_config(mut self, config: Bm25Config) -> Self {
        self.bm25 = config;
        self
    }

    /// Chunk the documents once (metadata inherited, content hashes recorded), then index
    /// the chunks twice: embedded for the dense part, fitted for BM25.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad configuration; [`Error::EmptyCorpus`] when no
    /// document produced a chunk; the errors of the chunker and the encoder.
    pub async fn build(self, documents: &[Document]) -> Result<HybridRetriever> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(HybridRetriever);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<HybridRetriever> {
        self.config.validate()?;
        let bm25_config = Bm25Config {
            max_query_bytes: self.config.max_query_bytes,
            ..self.bm25
        };
        bm25_config.validate()?;
        let Prepared {
            chunks,
            texts,
            encoder,
            origin,
            progress,
        } = prepare(&self.inputs, documents).await?;
        let mut vectors = embed_all(&*encoder, &texts, "embed chunks", &*progress).await?;
        vectors.normalize();
        let chunks = Arc::new(chunks);
        let dense = DenseRetriever::from_parts(chunks.clone(), vectors, encoder, origin);
        let bm25 = Bm25Retriever::fitted(chunks, bm25_config).await?;
        HybridRetriever::from_parts(dense, bm25, self.config)
    }
}

/// Hybrid retrieval by reciprocal-rank fusion (RRF) of a [`DenseRetriever`] and a
/// [`Bm25Retriever`] over the same chunks: each part ranks the chunks, and a chunk's fused
/// score is `Σ_parts 1 / (k + rank)` with 1-based ranks (a part that did not return the
/// chunk adds nothing).
///
/// Each part is asked for `max(candidates, requested k)` chunks ([`RrfConfig`]); with
/// [`Selection::Threshold`] the threshold applies to the fused score (at most
/// `2 / (k + 1)`). Equal fused scores are ordered by the best rank any part gave, then by
/// chunk id. With a [`Filter`], both parts rank the admitted chunks only, so a top-k of
/// admitted chunks is never cut short by chunks the filter rejects.
///
/// The two parts share one chunk list; clones are cheap and independent, and an update
/// changes both parts at once (see [`DenseRetriever`] and [`Bm25Retriever`] for what each
/// does).
#[derive(Clone)]
pub struct HybridRetriever {
    dense: DenseRetriever,
    bm25: Bm25Retriever,
    config: RrfConfig,
}

impl std::fmt::Debug for HybridRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridRetriever")
            .field("dense", &self.dense)
            .field("bm25", &self.bm25.config())
            .field("config", &self.config)
            .finish()
    }
}

impl HybridRetriever {
    /// A builder with the defaults: the default chunker
    /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)) and encoder
    /// ([`DefaultEncoder::choose`]), [`RrfConfig::default`], [`Bm25Config::default`].
    pub fn builder() -> HybridRetrieverBuilder {
        HybridRetrieverBuilder {
            inputs: BuildInputs::default(),
            config: RrfConfig::default(),
            bm25: Bm25Config::default(),
        }
    }

    /// Fuse `dense` and `bm25`, which must index equal chunk lists (they share one
    /// afterwards).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad configuration or parts over other chunks.
    pub fn from_parts(
        dense: DenseRetriever,
        mut bm25: Bm25Retriever,
        config: RrfConfig,
    ) -> Result<Self> {
        config.validate()?;
        if !Arc::ptr_eq(&dense.chunks, &bm25.chunks) {
            if dense.chunks != bm25.chunks {
                return Err(Error::invalid(
                    "HybridRetriever::from_parts",
                    "the dense and BM25 parts index other chunks",
                ));
            }
            bm25.chunks = dense.chunks.clone();
        }
        let dense = dense.with_config(DenseConfig {
            max_query_bytes: config.max_query_bytes,
        });
        Ok(Self {
            dense,
            bm25,
            config,
        })
    }

    /// Dense (flat cosine with `encoder`) + BM25 (default parameters) over whole passages
    /// ([`passage_chunks`]), fused with the default [`RrfConfig`].
    ///
    /// # Errors
    /// Those of [`DenseRetriever::from_chunks`] and [`Bm25Retriever::from_chunks`].
    pub async fn dense_bm25(docs: &[Document], encoder: Arc<dyn Encoder>) -> Result<Self> {
        let chunks = passage_chunks(docs)?;
        let dense = DenseRetriever::from_chunks(chunks, encoder).await?;
        let bm25 = Bm25Retriever::fitted(dense.chunks.clone(), Bm25Config::default()).await?;
        Self::from_parts(dense, bm25, RrfConfig::default())
    }

    /// The dense part.
    pub fn dense(&self) -> &DenseRetriever {
        &self.dense
    }

    /// The BM25 part.
    pub fn bm25(&self) -> &Bm25Retriever {
        &self.bm25
    }

    /// The fusion parameters.
    pub fn config(&self) -> &RrfConfig {
        &self.config
    }

    /// The encoder of the dense part.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        self.dense.encoder()
    }

    /// The default encoder the builder chose (recorded so that [`HybridRetriever::open`]
    /// can rebuild it); `None` when an encoder was given.
    pub fn default_encoder(&self) -> Option<&DefaultEncoder> {
        self.dense.default_encoder()
    }

    async fn search(
        &self,
        query: &str,
        selection: Selection,
        admitted: Option<&[bool]>,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        selection.validate()?;
        let depth = match selection {
            Selection::TopK(k) | Selection::ThresholdTopK { k, .. } => {
                k.max(self.config.candidates)
            }
            Selection::Threshold(_) => self.config.candidates,
        };
        let parts = [
            self.dense
                .rank(query, Selection::TopK(depth), admitted)
                .await?,
            self.bm25.rank(query, Selection::TopK(depth), admitted)?,
        ];
        let chunks = &self.dense.chunks;
        let out = rrf(&parts, self.config.k)
            .into_iter()
            .map(|(id, score)| ScoredChunk {
                chunk: chunks[id].clone(),
                score: score as f32,
            })
            .collect();
        Ok(selection.apply(out, |s| s.score))
    }

    /// Remove the chunks of `remove` (document ids), add `add`: new chunks embedded for
    /// the dense part, BM25 refitted.
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
            &self.dense.chunks,
            (remove, add),
            chunker,
            &self.dense.encoder,
            "HybridRetriever update",
        )
        .await?;
        report.chunks = chunks.len();
        let chunks = Arc::new(chunks);
        let dense = self.dense.updated(chunks.clone(), &kept, first_new).await?;
        laps.lap(&mut report, "embed");
        let bm25 = Bm25Retriever::fitted(chunks, *self.bm25.config()).await?;
        laps.lap(&mut report, "index");
        self.dense = dense;
        self.bm25 = bm25;
        Ok(report)
    }

    /// Write the index to `dir/hybrid.json` atomically (a temporary file, then a rename):
    /// the chunks, their embeddings and both configurations (BM25 is refitted on open).
    /// `dir` must be new, empty, or hold a hybrid index; its other files are left alone.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` holds something else; I/O errors.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let settings = HybridSettings {
            rrf: self.config,
            bm25: *self.bm25.config(),
        };
        let saved = self.dense.saved(HYBRID_FORMAT_VERSION, &settings);
        DenseRetriever::write(dir.as_ref(), &HYBRID_DIR, HYBRID_FILE, &saved)
    }

    /// Read an index written by [`HybridRetriever::save`]; `encoder` must be the one it was
    /// built with (checked by name, dimension and fingerprint).
    ///
    /// # Errors
    /// I/O and format errors of the file; [`Error::InvalidInput`] for another encoder.
    pub fn load(dir: impl AsRef<Path>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::read(dir.as_ref(), Some(encoder))
    }

    /// Read an index written by [`HybridRetriever::save`] that was built with the default
    /// encoder, rebuilding that encoder.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom encoder (use
    /// [`HybridRetriever::load`]); those of [`HybridRetriever::load`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::read(dir.as_ref(), None)
    }

    fn read(dir: &Path, encoder: Option<Arc<dyn Encoder>>) -> Result<Self> {
        let path = dir.join(HYBRID_FILE);
        let (dense, settings): (_, HybridSettings) =
            DenseRetriever::read(&path, HYBRID_FORMAT_VERSION, encoder, "HybridRetriever")?;
        let bad = |e: Error| Error::format(&path, e.to_string());
        let bm25 = Bm25Retriever::from_shared(dense.chunks.clone(), settings.bm25).map_err(bad)?;
        Self::from_parts(dense, bm25, settings.rrf).map_err(bad)
    }
}

super::updates!(HybridRetriever, "HybridRetriever");

/// Reciprocal-rank fusion of ranked `(chunk, score)` lists: `(chunk, Σ 1 / (k + rank))`,
/// best first; equal sums by the best rank, then by chunk id.
fn rrf(parts: &[Vec<(ChunkId, f64)>], k: f64) -> Vec<(ChunkId, f64)> {
    // chunk id → (fused score, best rank)
    let mut fused: HashMap<ChunkId, (f64, usize)> = HashMap::new();
    for hits in parts {
        for (r, &(id, _)) in hits.iter().enumerate() {
            let rank = r + 1;
            let e = fused.entry(id).or_insert((0.0, rank));
            e.0 += 1.0 / (k + rank as f64);
            e.1 = e.1.min(rank);
        }
    }
    let mut ranked: Vec<(ChunkId, f64, usize)> =
        fused.into_iter().map(|(id, (s, r))| (id, s, r)).collect();
    ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    ranked.into_iter().map(|(id, s, _)| (id, s)).collect()
}

#[async_trait]
impl Retriever for HybridRetriever {
    fn name(&self) -> &str {
        "hybrid"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        self.search(query, selection, None).await
    }

    /// Both parts rank the admitted chunks only (the filter applies inside their scans).
    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        let mask = admitted(&self.dense.chunks, filter)?;
        self.search(query, selection, mask.as_deref()).await
    }

    fn chunks(&self) -> &[Chunk] {
        &self.dense.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuses_ranks_hand_computed() {
        let p1 = vec![(0, 0.9), (1, 0.5), (2, 0.1)];
        let p2 = vec![(2, 3.0), (0, 2.0), (3, 1.0)];
        let fused = rrf(&[p1, p2], 60.0);
        // 0: 1/61 + 1/62; 2: 1/63 + 1/61; 1: 1/62; 3: 1/63
        let ids: Vec<usize> = fused.iter().map(|h| h.0).collect();
        assert_eq!(ids, vec![0, 2, 1, 3]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-12);
        // Equal sums: the better best rank first, then the lower id.
        let fused = rrf(&[vec![(5, 1.0), (4, 0.5)], vec![(4, 1.0), (5, 0.5)]], 60.0);
        assert_eq!(fused[0].0, 4);
    }
}
