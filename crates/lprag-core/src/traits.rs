//! The pluggable components of a graph-RAG pipeline.
//!
//! Every trait is object-safe: `Arc<dyn Encoder>`, `Box<dyn LinkPredictor>` and friends
//! work, so backends can be chosen at run time. I/O-bound components (chunkers, query
//! generators, encoders, retrievers — they may call an LLM or a remote service) are `async`;
//! [`LinkPredictor`] is synchronous because training and scoring are CPU/GPU bound: async
//! callers run it on a blocking thread (`tokio::task::spawn_blocking`), as `LpRag` does.

use std::path::Path;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{
    Chunk, ChunkId, Document, Embeddings, Filter, LinkGraph, Result, ScoredChunk, Selection,
    SyntheticQuery,
};

/// Splits documents into chunks (LP-RAG §3.1: atomic statements).
#[async_trait]
pub trait Chunker: Send + Sync {
    /// A short name for logs and saved manifests.
    fn name(&self) -> &str;

    /// Chunk every document. Chunk ids are positions in the returned list, starting at 0,
    /// in document order. A document that yields no chunk is skipped; a corpus that yields
    /// none at all is [`crate::Error::EmptyCorpus`].
    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>>;

    /// What determines this chunker's output beyond its name (its settings; for an LLM
    /// chunker the model, prompt and sampling settings), as a string. A build's work
    /// directory keys its chunk stage by it, so a changed setting rechunks instead of
    /// reusing another setting's chunks. `None` (the default): the name alone.
    fn fingerprint(&self) -> Option<String> {
        None
    }
}

/// Writes synthetic queries for batches of chunks (LP-RAG §3.2, Appendix A.2).
#[async_trait]
pub trait QueryGenerator: Send + Sync {
    /// A short name for logs and saved manifests.
    fn name(&self) -> &str;

    /// What determines this generator's queries beyond its name (settings, seed; for an
    /// LLM writer the model, prompt and sampling settings), as a string. A build's work
    /// directory keys its query stage by it. `None` (the default): the name alone.
    fn fingerprint(&self) -> Option<String> {
        None
    }

    /// Write queries for each batch; `batches[i]` lists chunk ids of `chunks`. Every
    /// returned query links to chunks of the batch it was written for.
    async fn generate(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>>;
}

/// Turns texts into fixed-size vectors.
#[async_trait]
pub trait Encoder: Send + Sync {
    /// A short name, also stored with saved indices so a mismatch can be detected.
    fn name(&self) -> &str;

    /// Width of every vector this encoder returns.
    fn dimension(&self) -> usize;

    /// Embed a batch of texts: one row per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Embeddings>;

    /// A fingerprint of what the encoder computes beyond its name and width (weights,
    /// fitted tables, configuration), recorded in saved indexes and compared on load so
    /// that an encoder with the same name but other weights is refused instead of
    /// ranking garbage. `None` (the default) skips the check.
    fn fingerprint(&self) -> Option<String> {
        None
    }

    /// Embed queries — the user's, and the synthetic queries that stand in for them at
    /// index time. Models trained with instructions (e5's `"query: "` / `"passage: "`,
    /// bge's query instruction) embed queries and documents differently; the provided
    /// method calls [`Encoder::embed`], as a symmetric model wants.
    async fn embed_queries(&self, texts: &[String]) -> Result<Embeddings> {
        self.embed(texts).await
    }

    /// Whether [`Encoder::embed_queries`] differs from [`Encoder::embed`] (a cache must
    /// then keep the two apart). `false` (the default) for symmetric encoders; implement
    /// it together with `embed_queries`.
    fn embeds_queries_apart(&self) -> bool {
        false
    }

    /// The longest input, in this encoder's own tokens (special tokens and any document
    /// prefix included), that it embeds whole; longer inputs are cut. `None` (the
    /// default): no limit. The pipelines split longer chunks of their default chunker to
    /// fit, and warn with counts when a chunker of yours made chunks that will be cut.
    fn max_input_tokens(&self) -> Option<usize> {
        None
    }

    /// Tokens `text` takes when embedded as a document (before any cut), for encoders
    /// with [`Encoder::max_input_tokens`]; `None` (the default) when unknown.
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }

    /// Embed one text (provided: calls [`Encoder::embed`]).
    async fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        let e = self.embed(&[text.to_string()]).await?;
        if e.rows() != 1 {
            return Err(crate::Error::DimensionMismatch {
                location: format!("encoder '{}' output rows for one text", self.name()),
                expected: 1,
                actual: e.rows(),
            });
        }
        Ok(e.row(0).to_vec())
    }
}

/// Receives progress reports from long jobs (indexing, training).
///
/// All methods have empty defaults; implement the ones you need. Implementations must be
/// cheap: they are called from inner loops.
pub trait Progress: Send + Sync {
    /// A stage starts; `total` is the number of steps when known.
    fn start(&self, _stage: &str, _total: Option<u64>) {}
    /// `done` steps of the stage are finished; `message` is a short status (e.g. a loss).
    fn update(&self, _stage: &str, _done: u64, _message: &str) {}
    /// Work inside the stage's current step went on (for example a training step inside
    /// an epoch, when the stage counts epochs); `message` says where, e.g.
    /// `epoch 3: step 140 of 282`. Called often, without a change of `done`; the default
    /// ignores it. [`update`](Progress::update) stays the stage's step count.
    fn tick(&self, _stage: &str, _message: &str) {}
    /// The stage is finished.
    fn finish(&self, _stage: &str) {}
    /// Something the user should know about (a fallback was taken, input was skipped).
    /// The default emits a `tracing` warning (target `lprag`) when the application has
    /// installed a global `tracing` subscriber, else writes one line to standard error, so
    /// a warning is never lost silently; override it to route warnings elsewhere.
    fn warn(&self, message: &str) {
        if tracing::dispatcher::has_been_set() {
            tracing::warn!(target: "lprag", "{message}");
        } else {
            eprintln!("warning: {message}");
        }
    }
}

/// A [`Progress`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// What a training run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Epochs actually run (fewer than configured when stopped early).
    pub epochs_run: usize,
    /// Epoch whose weights were kept (best validation score).
    pub best_epoch: usize,
    /// Mean training loss per epoch.
    pub train_loss: Vec<f32>,
    /// Validation loss per evaluation (empty when no validation split was used).
    pub val_loss: Vec<f32>,
    /// `true` when early stopping ended training.
    pub stopped_early: bool,
    /// Optimisation steps run (over all epochs).
    #[serde(default)]
    pub steps: usize,
    /// `true` when the step limit (`max_steps` of the built-in trainer) ended training.
    #[serde(default)]
    pub stopped_at_max_steps: bool,
    /// Wall-clock seconds spent training.
    pub seconds: f64,
}

/// A model that scores links between a query and chunks (LP-RAG §3.4), trained on the
/// index's graph.
///
/// Five methods are required: train on a [`LinkGraph`] ([`LinkPredictor::fit`]), or take a
/// graph without training ([`LinkPredictor::attach`]), score a query vector against
/// candidate chunks, save, and a name. Restoring is a constructor of the implementation's
/// own (`LpRag::load_with` passes it the predictor's directory and the index's graph), so
/// loading needs no half-built `&mut self`. [`LinkPredictor::score_batch`] and
/// [`LinkPredictor::score_near`] have provided defaults that implementations may override
/// with faster paths.
///
/// A scorer that needs no training implements [`LinkScorer`] instead: two methods.
pub trait LinkPredictor: Send + Sync {
    /// A short name (for example `"ncn"`).
    fn name(&self) -> &str;

    /// Train on `graph` (chunks, synthetic queries and their edges). Afterwards the model
    /// scores queries against the chunks of this graph.
    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> Result<TrainReport>;

    /// Use `graph`'s chunks as the inference graph without training (transfer of a trained
    /// model to another corpus, LP-RAG B.3). Query nodes of `graph` are ignored.
    fn attach(&mut self, graph: &LinkGraph) -> Result<()>;

    /// Link logits φ(q, c) for each candidate chunk id, in order; higher is more likely a
    /// link, and σ(φ) ≥ 0.5 means "predicted link".
    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>>;

    /// Logits for several queries (one row of `queries` each) against the same candidates.
    fn score_batch(&self, queries: &Embeddings, candidates: &[ChunkId]) -> Result<Vec<Vec<f32>>> {
        queries.iter().map(|q| self.score(q, candidates)).collect()
    }

    /// [`LinkPredictor::score`] given the query's nearest chunks by cosine similarity, best
    /// first, as the caller's own search found them: a predictor that joins the query to its
    /// nearest chunks can use them instead of searching the corpus again. `nearest` may be
    /// shorter than the predictor needs; then it searches itself. The default ignores it.
    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        let _ = nearest;
        self.score(query, candidates)
    }

    /// Persist the trained model (weights, configuration, and whatever of the attached
    /// graph it keeps) under `dir`, which the caller creates.
    fn save(&self, dir: &Path) -> Result<()>;

    /// A copy of this predictor attached to `graph` (as [`LinkPredictor::attach`] would
    /// attach it), `self` left as it is: queries keep being scored by `self` while an index
    /// update prepares the copy, and the copy replaces it when the update is done. The
    /// built-in predictors share their trained weights with the copy.
    ///
    /// `None` (the default) when the predictor cannot be copied: an update then needs the
    /// predictor to itself and attaches it in place (`&mut`, no query meanwhile).
    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        let _ = graph;
        None
    }

    /// Whether [`LinkPredictor::attach_copy`] returns a copy (checked before an update
    /// pays for anything). Implementations that override `attach_copy` return `true`.
    fn copies_on_attach(&self) -> bool {
        false
    }

    /// Width of the per-chunk rows this predictor can hand a [`crate::ChunkStore`] to score
    /// from there ([`LinkPredictor::stored_representations`]); `None` (the default) for a
    /// predictor that scores only with its rows in memory.
    fn stored_representation_dim(&self) -> Option<usize> {
        None
    }

    /// Whether this predictor's per-chunk rows (the built-in GNN's cached
    /// representations) are read through a memory map of a file rather than held on the
    /// heap; `false` by default.
    fn representations_mapped(&self) -> bool {
        false
    }

    /// The per-chunk rows of the chunks `range` that a store keeps for this predictor
    /// (for the built-in GNN: its cached layer outputs), one row per chunk,
    /// [`LinkPredictor::stored_representation_dim`] wide.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] by default (the predictor keeps none) and for a range
    /// past the chunks.
    fn stored_representations(&self, range: std::ops::Range<usize>) -> Result<Embeddings> {
        Err(crate::Error::invalid(
            format!("LinkPredictor '{}'", self.name()),
            format!(
                "keeps no per-chunk rows for a store (chunks {}..{} asked)",
                range.start, range.end
            ),
        ))
    }
}

/// What a [`LinkScorer`] sees of the index when it scores one query.
///
/// Marked `#[non_exhaustive]` so that fields can be added without breaking scorers; build
/// one with [`ScoreContext::new`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ScoreContext<'a> {
    /// The index's graph: chunk nodes `0..num_chunks` (features: the chunk embeddings),
    /// then the synthetic query nodes, with chunk–chunk and query–chunk edges.
    pub graph: &'a LinkGraph,
    /// Chunk–chunk adjacency: `neighbours[c]` lists the chunks sharing an edge with chunk
    /// `c` (mutual k-NN and bridges), one entry per edge. Length `graph.num_chunks`.
    pub neighbours: &'a [Vec<u32>],
    /// The query's most cosine-similar chunks, best first, as the candidate stage found
    /// them; empty when every chunk is scored without a candidate stage.
    pub nearest: &'a [ChunkId],
}

impl<'a> ScoreContext<'a> {
    /// A context over `graph` with its chunk adjacency lists and the query's `nearest`
    /// chunks.
    pub fn new(graph: &'a LinkGraph, neighbours: &'a [Vec<u32>], nearest: &'a [ChunkId]) -> Self {
        Self {
            graph,
            neighbours,
            nearest,
        }
    }

    /// The feature row (embedding) of chunk `c`, or `None` when `c` is not a chunk.
    pub fn chunk_features(&self, c: ChunkId) -> Option<&'a [f32]> {
        (c < self.graph.num_chunks).then(|| self.graph.features.row(c))
    }
}

/// Check the arguments of a scoring call, for implementations of [`LinkPredictor::score`]
/// and [`LinkScorer::score`]: `query` is `dim` wide and finite, and every candidate is a
/// chunk id below `num_chunks`. `location` names the caller in the error
/// ([`crate::Error::DimensionMismatch`] or [`crate::Error::InvalidInput`]).
pub fn check_score_args(
    location: &str,
    dim: usize,
    num_chunks: usize,
    query: &[f32],
    candidates: &[ChunkId],
) -> Result<()> {
    if query.len() != dim {
        return Err(crate::Error::DimensionMismatch {
            location: format!("{location} (query vector)"),
            expected: dim,
            actual: query.len(),
        });
    }
    if query.iter().any(|x| !x.is_finite()) {
        return Err(crate::Error::invalid(
            format!("{location} (query vector)"),
            "query vector has a non-finite value",
        ));
    }
    if let Some(&bad) = candidates.iter().find(|&&c| c >= num_chunks) {
        return Err(crate::Error::invalid(
            format!("{location} (candidates)"),
            format!("chunk id {bad} out of range: the graph has {num_chunks} chunks"),
        ));
    }
    Ok(())
}

/// A link scorer that needs no training: the small required core of a retrieval model.
///
/// Implement [`LinkScorer::name`] and [`LinkScorer::score`]; `LpRagBuilder::scorer` builds
/// an index around it (chunks, embeddings, graph, synthetic queries; no training) and
/// `LpRag::load_with_scorer` reopens the saved index. The scorer is stateless with respect
/// to the index: everything it reads arrives in the [`ScoreContext`].
pub trait LinkScorer: Send + Sync {
    /// A short name, recorded in saved indexes and checked when they are reopened.
    fn name(&self) -> &str;

    /// Link logits for each candidate chunk id, in order (higher ranks first; σ(logit) is
    /// the score a [`crate::Selection::Threshold`] compares). `query` is the encoder's
    /// vector of the user query, as wide as the graph's features.
    fn score(
        &self,
        ctx: &ScoreContext<'_>,
        query: &[f32],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>>;
}

/// Anything that answers a text query with ranked chunks.
#[async_trait]
pub trait Retriever: Send + Sync {
    /// A short name (for example `"lprag"`, `"dense"`).
    fn name(&self) -> &str;

    /// Rank chunks for `query`, best first, keeping those `selection` admits.
    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>>;

    /// Every chunk the retriever can return (empty for one that reads its records from a
    /// store per query; [`Retriever::num_chunks`] counts them then).
    fn chunks(&self) -> &[Chunk];

    /// How many chunks the retriever ranks: [`Retriever::chunks`]'s length unless the
    /// records are read from a store.
    fn num_chunks(&self) -> usize {
        self.chunks().len()
    }

    /// [`Retriever::retrieve`] over the chunks `filter` admits: the filter is applied
    /// before `selection` truncates, so `TopK(k)` returns `k` admitted chunks when the
    /// retriever ranks that many.
    ///
    /// The provided method ranks every chunk the retriever would return and filters that
    /// list; retrievers with a candidate stage (`LpRag`) override it to draw their
    /// candidates from the admitted chunks only.
    ///
    /// # Errors
    /// Those of [`Retriever::retrieve`], and [`crate::Error::InvalidInput`] for an
    /// invalid `selection` or `filter`.
    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        filter.validate()?;
        if filter.is_all() {
            return self.retrieve(query, selection).await;
        }
        let everything = Selection::TopK(self.chunks().len().max(1));
        let ranked = self.retrieve(query, everything).await?;
        let kept = ranked
            .into_iter()
            .filter(|s| filter.matches(&s.chunk))
            .collect();
        Ok(selection.apply(kept, |s| s.score))
    }

    /// [`Retriever::retrieve`] for many queries, results in query order. The provided
    /// method runs up to [`RETRIEVE_BATCH_CONCURRENCY`] queries at once; retrievers that
    /// can share work between queries (one encoder batch for all of them) override it.
    ///
    /// # Errors
    /// The first error of any query.
    async fn retrieve_batch(
        &self,
        queries: &[String],
        selection: Selection,
    ) -> Result<Vec<Vec<ScoredChunk>>> {
        selection.validate()?;
        let mut out = Vec::with_capacity(queries.len());
        for group in queries.chunks(RETRIEVE_BATCH_CONCURRENCY) {
            let mut running = Vec::with_capacity(group.len());
            for q in group {
                running.push(self.retrieve(q.as_str(), selection));
            }
            out.extend(futures::future::try_join_all(running).await?);
        }
        Ok(out)
    }
}

/// How many queries the provided [`Retriever::retrieve_batch`] runs at once.
pub const RETRIEVE_BATCH_CONCURRENCY: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    /// An encoder that returns no rows at all (a broken remote service, say).
    struct Empty;

    #[async_trait]
    impl Encoder for Empty {
        fn name(&self) -> &str {
            "empty"
        }
        fn dimension(&self) -> usize {
            4
        }
        async fn embed(&self, _texts: &[String]) -> Result<Embeddings> {
            Ok(Embeddings::empty(4))
        }
    }

    #[test]
    fn embed_one_of_an_encoder_that_returns_no_row_is_an_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt.block_on(Empty.embed_one("x")).unwrap_err();
        assert!(
            matches!(
                err,
                crate::Error::DimensionMismatch {
                    expected: 1,
                    actual: 0,
                    ..
                }
            ),
            "{err}"
        );
    }
}
