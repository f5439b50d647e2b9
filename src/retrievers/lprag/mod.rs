//! The LP-RAG pipeline: documents → chunks → embeddings → chunk graph → synthetic queries →
//! trained link predictor → ranked chunks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Document, EdgeKind, Embeddings, Encoder, Error, Filter, LinkEdge, LinkGraph,
    LinkPredictor, LinkScorer, Progress, QueryGenerator, Result, Retriever, ScoreContext,
    ScoredChunk, Selection, SyntheticQuery, TrainReport, RETRIEVE_BATCH_CONCURRENCY,
};
use lprag_graph::{BridgeConfig, ChunkGraph, ColumnIndex, IvfIndex, IvfParams, KnnBackend};
use lprag_llm::{ChatModel, LlmChunker, LlmQueryGenerator, OnUnparseable, StageUsage, TokenMeter};
use lprag_model::peg::{peg_predictor, restore_peg};
use lprag_model::seal::{restore_seal, seal_predictor};
use lprag_model::vgae::{restore_vgae, vgae_predictor};
use lprag_model::{
    ComputeDevice, GnnLinkPredictor, InferenceMode, ModelConfig, PegConfig, SealConfig,
    TrainConfig, VgaeConfig,
};
use lprag_text::HeuristicQueryGenerator;
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{
    blocking, check_fingerprint, check_version, embed_all, embed_queries, embed_queries_into,
    embed_query, fit_to_encoder, input_setters, labelled_queries, BuildInputs, DefaultEncoder,
    Labelled,
};
use crate::workdir::{keep_embeddings, StageKey, WorkDir};

pub(crate) mod update;

/// Version of the on-disk index layout written by [`LpRag::save`].
pub const INDEX_FORMAT_VERSION: u32 = 1;

const MANIFEST: &str = "manifest.json";
const CHUNKS: &str = "chunks.json";
const QUERIES: &str = "queries.json";
const GRAPH: &str = "graph.bin";
const PREDICTOR_DIR: &str = "predictor";
const KNN: &str = "knn.bin";

/// Where [`LpRag::save`] may write: an `LpRag` index is replaced whole, so the directory
/// must hold nothing but an index's files.
pub(crate) const INDEX_DIR: lprag_core::dirs::DirSpec = lprag_core::dirs::DirSpec {
    kind: "an LpRag index",
    marker: MANIFEST,
    marker_key: Some("format_version"),
    owns: Some(|name| [MANIFEST, CHUNKS, QUERIES, GRAPH, PREDICTOR_DIR, KNN].contains(&name)),
};

/// Default [`LpRagConfig::candidate_pool`]: the 20 nearest chunks and their graph
/// neighbours are scored.
pub const DEFAULT_CANDIDATE_POOL: usize = 20;

/// Default [`LpRagConfig::column_scan_from`]: indexes of 200,000 chunks or more read the
/// chunk embeddings column-wise in the exact candidate scan.
pub const DEFAULT_COLUMN_SCAN_FROM: usize = 200_000;

/// Settings of the LP-RAG pipeline.
///
/// The default keeps the paper's graph (mutual k-NN with k = 5) and NCN's Table 8
/// optimiser settings but departs from the paper where a field says so, each measured in
/// `docs/benchmarks.md`: bridge edges beside the k-NN edges, a dense residual with a
/// correction penalty in the model, training on query–chunk targets with early stopping
/// and a step limit, the query joined to its 3 nearest chunks, and a candidate pool
/// instead of scoring every chunk. [`LpRagConfig::paper`] is LP-RAG as published.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LpRagConfig {
    /// k of the mutual k-NN chunk graph.
    pub knn_k: usize,
    /// Exact or HNSW neighbour search.
    pub knn_backend: KnnBackend,
    /// Bridge edges added beside mutual k-NN (title mentions, same-document neighbours).
    pub bridges: BridgeConfig,
    /// Seed of A.2 batch sampling.
    pub seed: u64,
    /// Which built-in link predictor is trained when no custom one is given (default:
    /// [`BuiltinPredictor::Gnn`], the [`GnnLinkPredictor`] of [`LpRagConfig::model`]).
    pub predictor: BuiltinPredictor,
    /// The link predictor's architecture (used by [`BuiltinPredictor::Gnn`]).
    pub model: ModelConfig,
    /// The link predictor's training (used when no custom predictor is given).
    pub train: TrainConfig,
    /// Candidate stage: score only the query's `P` most cosine-similar chunks (one exact
    /// scan, shared with the query's join under [`InferenceMode::JoinTopK`]) plus, with
    /// [`LpRagConfig::candidate_neighbours`], their chunk-graph neighbours. `None` scores
    /// every chunk, as the paper does (exhaustive; the cost of the pair decoder then grows
    /// with the corpus). Default [`DEFAULT_CANDIDATE_POOL`], which departs from the paper's
    /// exhaustive scoring for speed; `docs/benchmarks.md` ("LP-RAG at scale") measures the
    /// recall it costs.
    pub candidate_pool: Option<usize>,
    /// Add the chunk-graph neighbours of the pool's chunks to the candidates (a chunk
    /// reached through a bridge or k-NN edge can outrank its dense score).
    pub candidate_neighbours: bool,
    /// Where the candidate stage finds the query's nearest chunks (the pool and the
    /// join): `None` (default) scans every chunk exactly; `Some(params)` searches an
    /// inverted-file index over the chunk embeddings ([`IvfIndex`]: k-means lists, the
    /// `probes` nearest lists scanned), which is made when the index is built, opened or
    /// updated (seeded, so the same every time; about 1.5 s at 100,000 chunks). Approximate:
    /// a nearest chunk in a list that is not probed is missed. It suits semantic
    /// embeddings, which cluster; `docs/benchmarks.md` ("Candidate index") measures the
    /// recall it costs with MiniLM and with the hashing encoder, whose features do not
    /// cluster well.
    pub candidate_index: Option<IvfParams>,
    /// From this many chunks on, the exact candidate scan reads a column-wise copy of the
    /// chunk embeddings ([`ColumnIndex`]: unit-normalised, 16-bit, built when the index is
    /// built, opened or updated) instead of the rows: the same nearest chunks to the bit
    /// (the quantised scores are within a proven bound of the exact ones, and every chunk
    /// that could be among the nearest is scored again exactly), read faster because a
    /// query reads only the columns where it is non-zero (a hashing encoder's query: about
    /// 5 % of them), in half the bytes, on every core. Costs `2 · chunks · dim` bytes (half
    /// the embeddings'). `Some(0)` always, `None` never. Default
    /// `Some(`[`DEFAULT_COLUMN_SCAN_FROM`]`)`; not used under
    /// [`LpRagConfig::candidate_index`], whose lists are scanned as rows.
    pub column_scan_from: Option<usize>,
    /// The longest query, in bytes of UTF-8, that `retrieve`, `retrieve_filtered` and
    /// `retrieve_batch` embed; a longer one is [`Error::InvalidInput`] before any work.
    /// Default [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an
    /// encoder's 512-token window). Change it on a built or opened index with
    /// [`LpRag::set_max_query_bytes`].
    pub max_query_bytes: usize,
}

/// The built-in link predictors an [`LpRag`] can train by itself (a custom one goes to
/// [`LpRagBuilder::predictor`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BuiltinPredictor {
    /// [`GnnLinkPredictor`] with [`LpRagConfig::model`] (NCN, GAE or MLP) and
    /// [`LpRagConfig::train`].
    #[default]
    Gnn,
    /// VGAE ([`lprag_model::Vgae`], LP-RAG Table 6) on
    /// [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor), trained with
    /// [`LpRagConfig::train`] ([`TrainConfig::paper_vgae`] for Table 8's values).
    Vgae(VgaeConfig),
    /// PEG ([`lprag_model::Peg`], LP-RAG Table 6: GCN layers whose messages are weighted by
    /// the distance of Laplacian-eigenmap encodings) on
    /// [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor), trained with
    /// [`LpRagConfig::train`] ([`TrainConfig::paper_peg`] for Table 8's values).
    Peg(PegConfig),
    /// SEAL ([`lprag_model::Seal`], LP-RAG Table 6: a GCN on each pair's DRNL-labelled
    /// enclosing subgraph) on [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor),
    /// trained with [`LpRagConfig::train`] ([`TrainConfig::paper_seal`] for Table 8's
    /// values).
    Seal(SealConfig),
}

impl BuiltinPredictor {
    /// Check the chosen model's sizes (see [`ModelConfig::validate`]).
    pub fn validate(&self, model: &ModelConfig) -> Result<()> {
        match self {
            BuiltinPredictor::Gnn => model.validate(),
            BuiltinPredictor::Vgae(c) => c.validate(),
            BuiltinPredictor::Peg(c) => c.validate(),
            BuiltinPredictor::Seal(c) => c.validate(),
        }
    }

    /// The untrained predictor for `config`, checkpointing under `work_dir/train` where
    /// it can.
    pub(crate) fn make(
        config: &LpRagConfig,
        work_dir: Option<&Path>,
        device: ComputeDevice,
    ) -> Result<Box<dyn LinkPredictor>> {
        config.predictor.validate(&config.model)?;
        let device = device.to_burn()?;
        Ok(match config.predictor {
            BuiltinPredictor::Gnn => {
                let p = GnnLinkPredictor::with_device(
                    config.model.clone(),
                    config.train.clone(),
                    device,
                );
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Vgae(v) => {
                let p = vgae_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Peg(v) => {
                let p = peg_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Seal(v) => {
                let p = seal_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
        })
    }

    /// Restore the predictor `config` describes from `dir`, on `graph`.
    fn restore(
        config: &LpRagConfig,
        dir: &Path,
        graph: &LinkGraph,
        device: ComputeDevice,
    ) -> Result<Arc<dyn LinkPredictor>> {
        Ok(Arc::from(Self::make_restored(config, dir, graph, device)?))
    }

    /// [`BuiltinPredictor::restore`], boxed (so it can still be attached elsewhere).
    fn make_restored(
        config: &LpRagConfig,
        dir: &Path,
        graph: &LinkGraph,
        device: ComputeDevice,
    ) -> Result<Box<dyn LinkPredictor>> {
        config
            .predictor
            .validate(&config.model)
            .map_err(|e| Error::format(dir, e.to_string()))?;
        let device = device.to_burn()?;
        Ok(match config.predictor {
            BuiltinPredictor::Gnn => Box::new(GnnLinkPredictor::from_dir_on(dir, device)?),
            BuiltinPredictor::Vgae(v) => Box::new(restore_vgae(dir, graph, v, device)?),
            BuiltinPredictor::Peg(v) => Box::new(restore_peg(dir, graph, v, device)?),
            BuiltinPredictor::Seal(v) => Box::new(restore_seal(dir, graph, v, device)?),
        })
    }
}

impl LpRagConfig {
    /// LP-RAG as published, with NCN (§3, Table 8): mutual k-NN with k = 5 and no other
    /// chunk edges, the paper's NCN ([`ModelConfig::ncn`]: no residual) trained as
    /// [`TrainConfig::paper_ncn`] says (loss over every edge, 100 epochs, no penalty, no
    /// early stopping), the query joined to **all** chunks at inference and every chunk
    /// scored (no candidate pool). Retrieve with `Selection::Threshold(0.5)` for the
    /// paper's τ = 0.5.
    ///
    /// Not part of a configuration: the paper chunks and writes its questions with an LLM
    /// (GPT-4o-mini; use [`LpRagBuilder::llm`], n_B = 2 questions per A.2 batch is the
    /// query writers' default) and embeds with Contriever (pass it with
    /// [`LpRagBuilder::encoder`]; the default encoder is all-MiniLM-L6-v2).
    pub fn paper() -> Self {
        Self {
            knn_k: 5,
            bridges: BridgeConfig::none(),
            model: ModelConfig::ncn(),
            train: TrainConfig::paper_ncn(),
            candidate_pool: None,
            candidate_neighbours: false,
            ..Self::default()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's VGAE (Table 6; Table 8: 2 layers, hidden
    /// 32, learning rate 1e-2, weight decay 1e-4, 400 epochs).
    pub fn paper_vgae() -> Self {
        Self {
            predictor: BuiltinPredictor::Vgae(VgaeConfig::default()),
            train: TrainConfig::paper_vgae(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's PEG (Table 6; Table 8: 2 layers, hidden 32,
    /// learning rate 1e-2, weight decay 1e-4, 400 epochs; 32 eigenvectors, which the
    /// paper does not give).
    pub fn paper_peg() -> Self {
        Self {
            predictor: BuiltinPredictor::Peg(PegConfig::default()),
            train: TrainConfig::paper_peg(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's SEAL (Table 6; Table 8: 3 layers, hidden 32,
    /// learning rate 1e-4, weight decay 1e-8, 50 epochs; 1-hop enclosing subgraphs as in
    /// SEAL, at most 100 new nodes per hop, which the paper does not give).
    pub fn paper_seal() -> Self {
        Self {
            predictor: BuiltinPredictor::Seal(SealConfig::default()),
            train: TrainConfig::paper_seal(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's MLP baseline (Table 6; Table 8: 2 layers,
    /// hidden 1000, learning rate 1e-3, weight decay 5e-4, 1,000 epochs).
    pub fn paper_mlp() -> Self {
        Self {
            model: ModelConfig::paper_mlp(),
            train: TrainConfig::paper_mlp(),
            ..Self::paper()
        }
    }
}

impl Default for LpRagConfig {
    fn default() -> Self {
        Self {
            knn_k: lprag_graph::DEFAULT_K,
            knn_backend: KnnBackend::default(),
            bridges: BridgeConfig::default(),
            seed: 42,
            predictor: BuiltinPredictor::Gnn,
            model: ModelConfig::default(),
            train: TrainConfig::default(),
            candidate_pool: Some(DEFAULT_CANDIDATE_POOL),
            candidate_neighbours: true,
            candidate_index: None,
            column_scan_from: Some(DEFAULT_COLUMN_SCAN_FROM),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

/// What indexing produced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexStats {
    /// Documents given.
    pub documents: usize,
    /// Chunks made.
    pub chunks: usize,
    /// Synthetic queries written.
    pub queries: usize,
    /// Of [`IndexStats::queries`], the labelled questions given to
    /// [`LpRagBuilder::labelled`] or [`LpRagBuilder::labelled_only`].
    #[serde(default)]
    pub labelled_queries: usize,
    /// Chunk–chunk edges (mutual k-NN and bridges).
    pub chunk_edges: usize,
    /// Of those, bridge edges.
    #[serde(default)]
    pub bridge_edges: usize,
    /// Chunks with no mutual k-NN neighbour.
    pub isolated_chunks: usize,
    /// Query–chunk edges.
    pub query_edges: usize,
    /// Seconds per stage: chunk, embed, graph, queries, train.
    pub seconds: Vec<(String, f64)>,
    /// The training report.
    pub train: TrainReport,
    /// Warnings raised while indexing (for example the encoder fallback).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// LLM calls and tokens per stage (`"chunking"`, `"queries"`) when the index was built
    /// with [`LpRagBuilder::llm`]; empty otherwise.
    #[serde(default)]
    pub llm_usage: BTreeMap<String, StageUsage>,
    /// Stages loaded from [`LpRagBuilder::work_dir`] instead of computed (`"chunk"`,
    /// `"embed"`, `"graph"`, `"queries"`, `"query-embed"`).
    #[serde(default)]
    pub reused_stages: Vec<String>,
}

/// Forwards to another [`Progress`] and keeps a copy of every warning.
struct RecordingProgress {
    inner: Arc<dyn Progress>,
    warnings: std::sync::Mutex<Vec<String>>,
}

impl RecordingProgress {
    fn new(inner: Arc<dyn Progress>) -> Self {
        Self {
            inner,
            warnings: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Progress for RecordingProgress {
    fn start(&self, stage: &str, total: Option<u64>) {
        self.inner.start(stage, total);
    }
    fn update(&self, stage: &str, done: u64, message: &str) {
        self.inner.update(stage, done, message);
    }
    fn tick(&self, stage: &str, message: &str) {
        self.inner.tick(stage, message);
    }
    fn finish(&self, stage: &str) {
        self.inner.finish(stage);
    }
    fn warn(&self, message: &str) {
        self.inner.warn(message);
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message.to_string());
    }
}

/// Assembles an [`LpRag`] retriever; every component has an offline default.
///
/// The default chunker keeps documents whole (split only where one exceeds the encoder's
/// input). The paper's atomic chunks come from an LLM that rewrites statements to stand
/// alone; the offline [`lprag_text::SentenceChunker`] cuts sentences as written ("She was
/// born in …"), which loses the subject, and measured 3–4 points below whole passages on
/// MuSiQue-100 (`docs/benchmarks.md`). Pass `Arc::new(SentenceChunker::default())` to
/// [`LpRagBuilder::chunker`] to index sentences.
#[derive(Default)]
pub struct LpRagBuilder {
    inputs: BuildInputs,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    llm: Option<Arc<dyn ChatModel>>,
    llm_on_unparseable: OnUnparseable,
    model: Option<ModelChoice>,
    labelled: Labelled,
    labelled_only: bool,
    config: LpRagConfig,
    work_dir: Option<PathBuf>,
    device: ComputeDevice,
}

impl LpRagBuilder {
    input_setters!();

    /// Use this query generator (default: [`HeuristicQueryGenerator`]).
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Index with an LLM, as the paper does: [`LlmChunker`] (C-PROMPT atomic statements)
    /// and [`LlmQueryGenerator`] (S-PROMPT questions per A.2 batch) replace the offline
    /// defaults, unless [`LpRagBuilder::chunker`] / [`LpRagBuilder::query_generator`]
    /// chose others. Tokens per stage land in [`IndexStats::llm_usage`].
    ///
    /// Wrap the model in a [`CachedChat`](lprag_llm::CachedChat) so an interrupted build
    /// resumes without paying again:
    ///
    /// ```no_run
    /// # async fn run(docs: Vec<lprag::Document>) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use lprag::llm::{CachedChat, OpenAiChat, OpenAiConfig};
    /// let config = OpenAiConfig::from_env().ok_or("set LPRAG_LLM_MODEL")?;
    /// let model = CachedChat::open(Arc::new(OpenAiChat::new(config)?), "llm-cache")?;
    /// let rag = lprag::LpRag::builder().llm(Arc::new(model)).build(&docs).await?;
    /// println!("{:?}", rag.stats().llm_usage);
    /// # Ok(()) }
    /// ```
    ///
    /// A weak model does not abort the build: a document (or batch) whose answer cannot be
    /// parsed, even after the model is asked once more, is chunked by the offline
    /// [`lprag_text::SentenceChunker`] (or gets [`HeuristicQueryGenerator`] questions) instead;
    /// [`IndexStats::llm_usage`]'s `fallbacks` counts them per stage and
    /// [`IndexStats::warnings`] says so. [`LpRagBuilder::llm_on_unparseable`] with
    /// [`OnUnparseable::Fail`] fails the build instead.
    pub fn llm(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.llm = Some(model);
        self
    }

    /// What the LLM chunker and query writer made by [`LpRagBuilder::llm`] do with an
    /// answer they cannot parse: fall back to the offline component for that item
    /// (default) or fail the build ([`OnUnparseable::Fail`], strict mode).
    pub fn llm_on_unparseable(mut self, policy: OnUnparseable) -> Self {
        self.llm_on_unparseable = policy;
        self
    }

    /// Use a custom link predictor instead of the [`GnnLinkPredictor`] built from
    /// [`LpRagConfig::model`] and [`LpRagConfig::train`]; it is trained with
    /// [`LinkPredictor::fit`] on the index's graph. Reopen the saved index with
    /// [`LpRag::load_with`]. Replaces an earlier [`LpRagBuilder::scorer`].
    pub fn predictor(mut self, predictor: Box<dyn LinkPredictor>) -> Self {
        self.model = Some(ModelChoice::Predictor(predictor));
        self
    }

    /// Rank with a training-free [`LinkScorer`] instead of a trained link predictor: the
    /// index is built as usual (chunks, embeddings, chunk graph, synthetic queries) but
    /// nothing is trained, and every query is scored by `scorer` with the index's graph in
    /// its [`ScoreContext`]. Reopen the saved index with [`LpRag::load_with_scorer`].
    /// Replaces an earlier [`LpRagBuilder::predictor`].
    ///
    /// If the scorer does not read the synthetic queries, skip writing them (and their
    /// LLM calls) with `.labelled_only(Vec::new())`.
    pub fn scorer(mut self, scorer: impl LinkScorer + 'static) -> Self {
        self.model = Some(ModelChoice::Scorer(Arc::new(scorer)));
        self
    }

    /// Train and score the built-in predictor on `device` (default
    /// [`ComputeDevice::Cpu`]; a GPU needs the `cuda` or `wgpu` cargo feature, checked
    /// before anything is computed). Reopen the index on a device with [`LpRag::open_on`]
    /// or [`LpRag::load_on`]. A custom predictor chooses its own device.
    pub fn device(mut self, device: ComputeDevice) -> Self {
        self.device = device;
        self
    }

    /// Transfer (LP-RAG B.3): reuse the built-in predictor trained for the index saved in
    /// `index_dir` (another corpus) on this corpus without training it again. The new index
    /// is chunked, embedded and linked as usual; no synthetic queries are written (nothing
    /// is trained), and the predictor is attached to the new chunk graph with
    /// [`LinkPredictor::attach`]. The new index takes the saved index's predictor
    /// configuration ([`LpRagConfig::predictor`], `model`, `train`), so [`LpRag::open`]
    /// reopens it. The encoder must be the one the saved index was built with (name and
    /// dimension are checked before anything else is done).
    ///
    /// Replaces an earlier [`LpRagBuilder::predictor`] or [`LpRagBuilder::scorer`].
    pub fn transfer_from(mut self, index_dir: impl Into<PathBuf>) -> Self {
        self.model = Some(ModelChoice::Transfer(index_dir.into()));
        self
    }

    /// Supervised mode: real `(question, gold document ids)` pairs — a query log — become
    /// query nodes linked to every chunk of their gold documents, **in addition to** the
    /// synthetic queries. Unknown document ids are an error naming the pair.
    pub fn labelled(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self.labelled_only = false;
        self
    }

    /// Supervised mode with the labelled pairs **instead of** synthetic queries (no query
    /// generator runs).
    pub fn labelled_only(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self.labelled_only = true;
        self
    }

    /// Replace the whole configuration.
    pub fn config(mut self, config: LpRagConfig) -> Self {
        self.config = config;
        self
    }

    /// Keep each finished stage (chunks, chunk embeddings, chunk graph, synthetic
    /// queries, query embeddings) in `dir`, and reuse the stages found there; the built-in
    /// predictor also checkpoints every training epoch in `dir/train` (see
    /// [`GnnLinkPredictor::with_checkpoints`]) and resumes from it. A build
    /// that was interrupted, or is repeated with a changed later stage (say, another
    /// [`TrainConfig`]), starts after the last stage whose inputs are unchanged.
    ///
    /// A stage is reused only when its key matches: a hash of the documents (for the
    /// chunks) or of the previous stage's output, the component's
    /// [`name`](Chunker::name) (chunker, encoder and its dimension, query generator) and
    /// the configuration fields the stage reads. Settings held inside a custom
    /// component are not part of its name: clear the directory after changing them.
    /// [`IndexStats::reused_stages`] lists what was loaded. Files are written atomically
    /// and an unreadable one is recomputed with a warning. With an LLM, also wrap it in
    /// [`CachedChat`](lprag_llm::CachedChat) so a stage interrupted half-way keeps the
    /// answers it already paid for.
    pub fn work_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_dir = Some(dir.into());
        self
    }

    /// Index `documents`: chunk, embed, build the chunk graph, write synthetic queries and
    /// train the link predictor.
    pub async fn build(self, documents: &[Document]) -> Result<LpRag> {
        use tracing::Instrument;
        let span = tracing::info_span!("lprag.build", documents = documents.len());
        self.build_traced(documents).instrument(span).await
    }

    /// [`LpRagBuilder::build`] inside its span; every stage gets a child span.
    async fn build_traced(self, documents: &[Document]) -> Result<LpRag> {
        let LpRagBuilder {
            inputs,
            query_generator,
            llm,
            llm_on_unparseable,
            model,
            labelled,
            labelled_only,
            config,
            work_dir,
            device,
        } = self;
        let progress = inputs.progress();
        let (chunker_set, mut chunker) = (inputs.chunker.is_some(), inputs.chunker());
        let encoder = inputs.encoder;
        let query_generator_set = query_generator.is_some();
        let mut query_generator = query_generator.unwrap_or_else(|| {
            Arc::new(HeuristicQueryGenerator::default()) as Arc<dyn QueryGenerator>
        });
        if documents.is_empty() {
            return Err(Error::EmptyCorpus("no documents were given".into()));
        }
        if config.knn_k == 0 {
            return Err(Error::invalid("LpRagConfig.knn_k", "must be at least 1"));
        }
        // The device is checked before anything is paid for.
        device.to_burn()?;
        let meter = Arc::new(TokenMeter::new());
        // The LLM components warn (fallbacks) through this; their warnings go to
        // `progress` and into the stats.
        let llm_progress = Arc::new(RecordingProgress::new(progress.clone()));
        if let Some(model) = &llm {
            if !chunker_set {
                chunker = Arc::new(
                    LlmChunker::new(model.clone())
                        .with_meter(meter.clone())
                        .with_progress(llm_progress.clone())
                        .on_unparseable(llm_on_unparseable),
                );
            }
            if !query_generator_set {
                query_generator = Arc::new(
                    LlmQueryGenerator::new(model.clone())
                        .with_meter(meter.clone())
                        .with_progress(llm_progress.clone())
                        .on_unparseable(llm_on_unparseable),
                );
            }
        }
        let mut stats = IndexStats {
            documents: documents.len(),
            ..IndexStats::default()
        };
        let mut clock = Instant::now();
        // One span per stage, open from its start to its end (an OpenTelemetry layer
        // reports its duration); the stages run in this order.
        let stage_span = |name: &str| tracing::info_span!("stage", name);
        let mut stage = stage_span("chunk");
        let mut lap = |stats: &mut IndexStats, name: &str| {
            let seconds = clock.elapsed().as_secs_f64();
            stats.seconds.push((name.to_string(), seconds));
            tracing::info!(parent: &stage, seconds, "stage finished");
            let next = match name {
                "chunk" => "embed",
                "embed" => "graph",
                "graph" => "queries",
                "queries" => "train",
                _ => "done",
            };
            stage = stage_span(next);
            clock = Instant::now();
        };

        let work = work_dir.as_deref().map(WorkDir::open).transpose()?;
        let warned = std::sync::Mutex::new(Vec::<String>::new());
        let warn = |m: String| {
            progress.warn(&m);
            warned.lock().unwrap_or_else(|p| p.into_inner()).push(m);
        };
        let mut reused: Vec<String> = Vec::new();

        // 1. Chunks.
        let chunk_key = match &work {
            Some(_) => StageKey::of_json(documents)?.then(&[
                chunker.name().as_bytes(),
                chunker.fingerprint().unwrap_or_default().as_bytes(),
            ]),
            None => StageKey(0),
        };
        let cached = work
            .as_ref()
            .and_then(|w| w.load_json::<Vec<Chunk>>("chunks", chunk_key, &warn))
            .filter(|c| {
                // Chunk ids are positions: a duplicate or out-of-range id is damage.
                let ok = c.iter().enumerate().all(|(i, c)| c.id == i);
                if !ok {
                    warn(
                        "work directory: chunks.json has chunk ids that are not their \
                          positions; recomputing"
                            .into(),
                    );
                }
                ok
            });
        let mut chunks = match cached {
            Some(c) => {
                reused.push("chunk".into());
                c
            }
            None => {
                let mut c = chunker.chunk(documents).await?;
                Chunk::inherit_metadata(&mut c, documents);
                if let Some(w) = &work {
                    w.save_json("chunks", chunk_key, &c)?;
                }
                c
            }
        };
        // Also on chunks reused from a work directory written before hashes were kept.
        Chunk::stamp_document_hashes(&mut chunks, documents);
        if chunks.is_empty() {
            return Err(Error::EmptyCorpus("no document produced a chunk".into()));
        }
        stats.chunks = chunks.len();
        // Checked now, before anything is paid for (and mapped again below if chunks are
        // split to fit the encoder).
        let labelled_pairs = labelled;
        let mut labelled = labelled_queries(&chunks, &labelled_pairs)?;
        lap(&mut stats, "chunk");

        // 2. Chunk embeddings (choosing the default encoder first when none was given).
        let mut texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
        let (encoder, default_encoder) = match encoder {
            Some(e) => (e, None),
            None => {
                let t = texts.clone();
                let (spec, enc, warning) = blocking(move || DefaultEncoder::choose(&t)).await?;
                if let Some(w) = warning {
                    progress.warn(&w);
                    stats.warnings.push(w);
                }
                (enc, Some(spec))
            }
        };
        let (fitted, warning) = fit_to_encoder(chunks, documents, &encoder, chunker.name()).await?;
        chunks = fitted;
        if let Some(w) = warning {
            progress.warn(&w);
            stats.warnings.push(w);
        }
        if chunks.len() != stats.chunks {
            stats.chunks = chunks.len();
            texts = chunks.iter().map(Chunk::embedding_text).collect();
            labelled = labelled_queries(&chunks, &labelled_pairs)?;
        }
        // The encoder's name, width, fingerprint and query mode: another encoder (or the
        // same one with other weights or fitted tables) recomputes from here on.
        let emb_key = stage_key(&work, || chunks_key(&chunks)).then(&[
            encoder.name().as_bytes(),
            &(encoder.dimension() as u64).to_le_bytes(),
            encoder.fingerprint().unwrap_or_default().as_bytes(),
            &[u8::from(encoder.embeds_queries_apart())],
        ]);
        let cached = work
            .as_ref()
            .and_then(|w| w.load_embeddings("chunk-embeddings", emb_key, chunks.len(), &warn));
        let chunk_emb = match cached {
            Some(e) => {
                reused.push("embed".into());
                e
            }
            None => {
                let e = embed_all(&*encoder, &texts, "embed chunks", &*progress).await?;
                keep_embeddings(work.as_ref(), "chunk-embeddings", emb_key, e)?
            }
        };
        drop(texts);
        lap(&mut stats, "embed");
        // A transferred predictor: its index's manifest is checked now, before the graph and
        // the rest are paid for; its predictor configuration becomes this index's.
        let mut config = config;
        let transfer = match &model {
            Some(ModelChoice::Transfer(dir)) => {
                let manifest = read_manifest(dir)?;
                if manifest.predictor_source != PredictorSource::Builtin {
                    return Err(Error::invalid(
                        "LpRagBuilder::transfer_from",
                        format!(
                            "the index in {} was built with the custom predictor or scorer \
                             '{}'; restore it yourself and pass it to LpRagBuilder::predictor",
                            dir.display(),
                            manifest.predictor
                        ),
                    ));
                }
                if manifest.encoder != encoder.name() || manifest.dimension != encoder.dimension() {
                    return Err(Error::invalid(
                        "LpRagBuilder::transfer_from (encoder)",
                        format!(
                            "the index in {} was built with encoder '{}' ({} dims), this build \
                             uses '{}' ({} dims)",
                            dir.display(),
                            manifest.encoder,
                            manifest.dimension,
                            encoder.name(),
                            encoder.dimension()
                        ),
                    ));
                }
                config.predictor = manifest.config.predictor;
                config.model = manifest.config.model.clone();
                config.train = manifest.config.train.clone();
                Some((dir.clone(), manifest))
            }
            _ => None,
        };

        // 3. Mutual k-NN chunk graph and A.2 batches.
        let (k, backend, seed) = (config.knn_k, config.knn_backend, config.seed);
        let graph_key = emb_key.then(&[
            &(k as u64).to_le_bytes(),
            &StageKey::of_json(&backend)?.0.to_le_bytes(),
            &StageKey::of_json(&config.bridges)?.0.to_le_bytes(),
        ]);
        let cached = work
            .as_ref()
            .and_then(|w| w.load_json::<Vec<LinkEdge>>("chunk-graph", graph_key, &warn))
            .filter(|edges| {
                edges
                    .iter()
                    .all(|e| (e.a as usize) < chunks.len() && (e.b as usize) < chunks.len())
            });
        let rows = chunk_emb.rows();
        let mut knn_lists = None;
        let (edges, chunk_emb) = match cached {
            Some(edges) => {
                reused.push("graph".into());
                (edges, chunk_emb)
            }
            None => {
                // The embeddings and chunks move to the blocking thread and back (no copy).
                let bridges = config.bridges;
                let (edges, emb, back, lists) = blocking(move || {
                    let lists = lprag_graph::knn(&chunk_emb, k, &backend)?;
                    let mut edges = lprag_graph::mutual_edges_of(&lists)?;
                    edges.extend(lprag_graph::bridge_edges(&chunks, &edges, &bridges)?);
                    Ok((edges, chunk_emb, chunks, lists))
                })
                .await?;
                chunks = back;
                knn_lists = Some(Arc::new(lists));
                if let Some(w) = &work {
                    w.save_json("chunk-graph", graph_key, &edges)?;
                }
                (edges, emb)
            }
        };
        let n_bridges = edges.iter().filter(|e| e.kind == EdgeKind::Bridge).count();
        let (edges, batches, isolated) = blocking(move || {
            let graph = ChunkGraph::from_edges(rows, &edges)?;
            let batches = lprag_graph::sample_batches(&graph, seed);
            let isolated = graph.isolated_count();
            Ok((edges, batches, isolated))
        })
        .await?;
        stats.chunk_edges = edges.len();
        stats.bridge_edges = n_bridges;
        stats.isolated_chunks = isolated;
        lap(&mut stats, "graph");

        // 4. Synthetic queries, linked to their batch; labelled questions, linked to their
        //    gold documents' chunks.
        let query_key = graph_key.then(&[
            &seed.to_le_bytes(),
            query_generator.name().as_bytes(),
            query_generator.fingerprint().unwrap_or_default().as_bytes(),
        ]);
        let mut queries = if labelled_only || transfer.is_some() {
            Vec::new()
        } else {
            let cached = work
                .as_ref()
                .and_then(|w| w.load_json::<Vec<SyntheticQuery>>("queries", query_key, &warn))
                .filter(|q| {
                    let ok = q
                        .iter()
                        .all(|q| q.chunk_ids.iter().all(|&c| c < chunks.len()));
                    if !ok {
                        warn(
                            "work directory: queries.json links a chunk that does not \
                              exist; recomputing"
                                .into(),
                        );
                    }
                    ok
                });
            match cached {
                Some(q) => {
                    reused.push("queries".into());
                    q
                }
                None => {
                    let q = query_generator.generate(&chunks, &batches).await?;
                    if let Some(w) = &work {
                        w.save_json("queries", query_key, &q)?;
                    }
                    q
                }
            }
        };
        stats.labelled_queries = labelled.len();
        queries.extend(labelled);
        let qtexts: Vec<String> = queries.iter().map(|q| q.text.clone()).collect();
        let qtexts_key = match &work {
            Some(_) => StageKey::of_json(&qtexts)?,
            None => StageKey(0),
        };
        let qemb_key = emb_key.then(&[&qtexts_key.0.to_le_bytes()]);
        // The graph's node features: the chunk rows, then the query rows, in one buffer
        // (query embeddings are appended to it, not kept beside it; a cached copy is read
        // straight into it and a fresh one saved from it).
        let (nc, dim) = (chunk_emb.rows(), chunk_emb.dim());
        let mut features = chunk_emb.into_vec();
        let cached = work.as_ref().is_some_and(|w| {
            w.append_embeddings(
                "query-embeddings",
                qemb_key,
                qtexts.len(),
                dim,
                &mut features,
                &warn,
            )
        });
        if cached {
            reused.push("query-embed".into());
        } else if !qtexts.is_empty() {
            features.reserve_exact(qtexts.len() * dim);
            embed_queries_into(
                &*encoder,
                &qtexts,
                "embed queries",
                &*progress,
                &mut features,
            )
            .await?;
            if let Some(w) = &work {
                w.save_rows("query-embeddings", qemb_key, dim, &features[nc * dim..])?;
            }
        }
        drop(qtexts);
        let features = Embeddings::new(dim, features)?;
        let graph = lprag_graph::link_graph_from_features(features, nc, &edges, &queries)?;
        stats.queries = queries.len();
        stats.query_edges = graph.edges.len() - edges.len();
        lap(&mut stats, "queries");

        // 5. Train the link predictor on a blocking thread (a training-free scorer is
        //    only given the graph).
        let graph = Arc::new(graph);
        let search = Arc::new(ChunkSearch::for_config(&graph, &config)?);
        let (predictor, source): (Arc<dyn LinkPredictor>, PredictorSource) = match model {
            Some(ModelChoice::Scorer(scorer)) => (
                Arc::new(ScorerPredictor {
                    scorer,
                    graph: graph.clone(),
                    search: search.clone(),
                }),
                PredictorSource::Scorer,
            ),
            Some(ModelChoice::Transfer(_)) => {
                let (dir, manifest) = transfer.expect("checked above");
                let graph = graph.clone();
                let predictor = blocking(move || {
                    let source_graph = lprag_graph::load_link_graph(dir.join(GRAPH))?;
                    let mut p = BuiltinPredictor::make_restored(
                        &manifest.config,
                        &dir.join(PREDICTOR_DIR),
                        &source_graph,
                        device,
                    )?;
                    p.attach(&graph)?;
                    Ok(p)
                })
                .await?;
                (Arc::from(predictor), PredictorSource::Builtin)
            }
            choice => {
                let (mut predictor, source) = match choice {
                    Some(ModelChoice::Predictor(p)) => (p, PredictorSource::Custom),
                    _ => (
                        BuiltinPredictor::make(&config, work_dir.as_deref(), device)?,
                        PredictorSource::Builtin,
                    ),
                };
                let graph = graph.clone();
                let progress = progress.clone();
                let (predictor, report) = blocking(move || {
                    let report = predictor.fit(&graph, &*progress)?;
                    Ok((predictor, report))
                })
                .await?;
                stats.train = report;
                (Arc::from(predictor), source)
            }
        };
        lap(&mut stats, "train");
        stats.llm_usage = meter.snapshot();
        stats.reused_stages = reused;
        stats.warnings.extend(llm_progress.take_warnings());
        stats
            .warnings
            .extend(warned.into_inner().unwrap_or_else(|p| p.into_inner()));

        Ok(LpRag {
            chunks,
            queries,
            search,
            graph,
            encoder,
            default_encoder,
            predictor,
            source,
            config,
            stats,
            knn: knn_lists,
            device,
        })
    }
}

/// The ranking model a builder was given.
enum ModelChoice {
    Predictor(Box<dyn LinkPredictor>),
    Scorer(Arc<dyn LinkScorer>),
    /// The built-in predictor of a saved index, attached without training.
    Transfer(PathBuf),
}

/// Which kind of ranking model an index was built with (recorded in its manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PredictorSource {
    /// The built-in [`GnnLinkPredictor`] ([`LpRag::open`], [`LpRag::load`]).
    #[default]
    Builtin,
    /// A custom [`LinkPredictor`] ([`LpRag::load_with`]).
    Custom,
    /// A training-free [`LinkScorer`] ([`LpRag::load_with_scorer`]).
    Scorer,
}

impl PredictorSource {
    /// How to reopen an index built with this kind of model.
    fn how_to_load(self) -> &'static str {
        match self {
            PredictorSource::Builtin => "LpRag::open or LpRag::load",
            PredictorSource::Custom => "LpRag::load_with",
            PredictorSource::Scorer => "LpRag::load_with_scorer",
        }
    }
}

/// A [`LinkScorer`] as the index's [`LinkPredictor`]: it shares the index's graph and
/// adjacency lists and has nothing to train or save.
struct ScorerPredictor {
    scorer: Arc<dyn LinkScorer>,
    graph: Arc<LinkGraph>,
    search: Arc<ChunkSearch>,
}

impl ScorerPredictor {
    fn check(&self, query: &[f32], candidates: &[ChunkId]) -> Result<()> {
        lprag_core::check_score_args(
            &format!("LinkScorer '{}'", self.scorer.name()),
            self.graph.features.dim(),
            self.graph.num_chunks,
            query,
            candidates,
        )
    }
}

impl LinkPredictor for ScorerPredictor {
    fn name(&self) -> &str {
        self.scorer.name()
    }

    /// Nothing to train: the scorer takes `graph` as its graph.
    fn fit(&mut self, graph: &LinkGraph, _progress: &dyn Progress) -> Result<TrainReport> {
        self.attach(graph)?;
        Ok(TrainReport::default())
    }

    fn attach(&mut self, graph: &LinkGraph) -> Result<()> {
        graph.validate()?;
        self.search = Arc::new(ChunkSearch::new(graph));
        self.graph = Arc::new(graph.clone());
        Ok(())
    }

    fn copies_on_attach(&self) -> bool {
        true
    }

    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        let mut copy = ScorerPredictor {
            scorer: self.scorer.clone(),
            graph: self.graph.clone(),
            search: self.search.clone(),
        };
        Some(
            copy.attach(graph)
                .map(|()| Box::new(copy) as Box<dyn LinkPredictor>),
        )
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.score_near(query, &[], candidates)
    }

    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        self.check(query, candidates)?;
        let ctx = ScoreContext::new(&self.graph, &self.search.neighbours, nearest);
        let logits = self.scorer.score(&ctx, query, candidates)?;
        if logits.len() != candidates.len() {
            return Err(Error::DimensionMismatch {
                location: format!("LinkScorer '{}' (logits)", self.scorer.name()),
                expected: candidates.len(),
                actual: logits.len(),
            });
        }
        Ok(logits)
    }

    /// A scorer keeps no state of its own: only its name is written.
    fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("scorer.json");
        let body = serde_json::json!({ "scorer": self.scorer.name() }).to_string();
        std::fs::write(&path, body).map_err(|e| Error::io(&path, e))
    }
}

/// The LP-RAG retriever: chunks ranked by a link predictor trained on a graph of chunks
/// and synthetic queries.
///
/// `LpRag` is `Send + Sync` and cheap to share behind an `Arc`; [`Retriever::retrieve`]
/// runs the model on a blocking thread. A clone shares the graph, the embeddings and the
/// model with the original and copies the chunk and query lists; an update of the clone
/// leaves the original as it was ([`crate::Live`] serves one while updating the other).
#[derive(Clone)]
pub struct LpRag {
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) queries: Vec<SyntheticQuery>,
    pub(crate) graph: Arc<LinkGraph>,
    pub(crate) encoder: Arc<dyn Encoder>,
    pub(crate) default_encoder: Option<DefaultEncoder>,
    pub(crate) predictor: Arc<dyn LinkPredictor>,
    pub(crate) source: PredictorSource,
    pub(crate) search: Arc<ChunkSearch>,
    pub(crate) config: LpRagConfig,
    pub(crate) stats: IndexStats,
    /// The chunks' k-NN lists behind the mutual k-NN edges, kept for incremental updates
    /// (`None` when the graph stage was reused from a work directory or the index was
    /// saved without them; the first update computes them).
    pub(crate) knn: Option<Arc<KnnLists>>,
    /// Where the built-in predictor trains and scores (for [`LpRag::retrain`]).
    pub(crate) device: ComputeDevice,
}

/// Each chunk's k nearest chunks, `(chunk, cosine)` best first.
pub(crate) type KnnLists = Vec<Vec<(u32, f32)>>;

/// What the candidate stage reads: inverse norms of the chunk embeddings, the chunk
/// graph's neighbour lists and, when configured, an inverted-file index of the chunks or
/// their column-wise copy.
#[derive(Debug)]
pub(crate) struct ChunkSearch {
    inv_norms: Vec<f32>,
    neighbours: Vec<Vec<u32>>,
    ivf: Option<IvfIndex>,
    columns: Option<ColumnIndex>,
}

impl ChunkSearch {
    /// The search over `graph`'s chunks, with the inverted-file index or the column-wise
    /// copy `config` asks for.
    pub(crate) fn for_config(graph: &LinkGraph, config: &LpRagConfig) -> Result<Self> {
        let mut search = Self::new(graph);
        if let Some(params) = &config.candidate_index {
            search.ivf = Some(IvfIndex::build_prefix(
                &graph.features,
                graph.num_chunks,
                params,
            )?);
        } else if config
            .column_scan_from
            .is_some_and(|from| graph.num_chunks >= from.max(1))
        {
            search.columns = Some(ColumnIndex::build(&graph.features, &search.inv_norms)?);
        }
        Ok(search)
    }

    /// The search over `graph`'s chunks by exact scans.
    pub(crate) fn new(graph: &LinkGraph) -> Self {
        let nc = graph.num_chunks;
        let mut neighbours = vec![Vec::new(); nc];
        for e in &graph.edges {
            if (e.a as usize) < nc && (e.b as usize) < nc && e.a != e.b {
                neighbours[e.a as usize].push(e.b);
                neighbours[e.b as usize].push(e.a);
            }
        }
        Self {
            inv_norms: lprag_graph::inverse_norms(&graph.features, nc),
            neighbours,
            ivf: None,
            columns: None,
        }
    }
}

impl std::fmt::Debug for LpRag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LpRag")
            .field("chunks", &self.chunks.len())
            .field("queries", &self.queries.len())
            .field("encoder", &self.encoder.name())
            .field("predictor", &self.predictor.name())
            .finish()
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format_version: u32,
    encoder: String,
    /// [`Encoder::fingerprint`] of the encoder the index was built with (absent in indexes
    /// saved before it existed, and for encoders without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    encoder_fingerprint: Option<String>,
    dimension: usize,
    predictor: String,
    #[serde(default)]
    predictor_source: PredictorSource,
    #[serde(default)]
    default_encoder: Option<DefaultEncoder>,
    config: LpRagConfig,
    stats: IndexStats,
}

impl LpRag {
    /// A builder with the offline defaults.
    pub fn builder() -> LpRagBuilder {
        LpRagBuilder::default()
    }

    /// The indexed chunks.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The synthetic queries written at index time.
    pub fn synthetic_queries(&self) -> &[SyntheticQuery] {
        &self.queries
    }

    /// The training graph (chunks, synthetic queries and their edges).
    pub fn graph(&self) -> &LinkGraph {
        &self.graph
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &LpRagConfig {
        &self.config
    }

    /// What indexing produced and how long each stage took.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The link predictor.
    pub fn predictor(&self) -> &Arc<dyn LinkPredictor> {
        &self.predictor
    }

    /// The encoder that embeds chunks and queries.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// The built-in encoder choice, when no encoder was given to the builder.
    pub fn default_encoder(&self) -> Option<&DefaultEncoder> {
        self.default_encoder.as_ref()
    }

    /// Change the candidate stage without rebuilding (see
    /// [`LpRagConfig::candidate_pool`]): `None` scores every chunk.
    pub fn set_candidates(&mut self, pool: Option<usize>, neighbours: bool) {
        self.config.candidate_pool = pool;
        self.config.candidate_neighbours = neighbours;
    }

    /// Change where the candidate stage finds the nearest chunks (see
    /// [`LpRagConfig::candidate_index`]) without rebuilding: `Some` makes the
    /// inverted-file index now, `None` goes back to exact scans. Saved with the index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for invalid [`IvfParams`] (the index is left as it was).
    pub fn set_candidate_index(&mut self, index: Option<IvfParams>) -> Result<()> {
        self.set_search(LpRagConfig {
            candidate_index: index,
            ..self.config.clone()
        })
    }

    /// Change [`LpRagConfig::column_scan_from`] without rebuilding (the column-wise copy is
    /// made now when the index is that large, or dropped). Saved with the index; the
    /// nearest chunks do not change, only how fast they are found.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for chunk embeddings with a non-finite value (the index is
    /// left as it was).
    pub fn set_column_scan_from(&mut self, from: Option<usize>) -> Result<()> {
        self.set_search(LpRagConfig {
            column_scan_from: from,
            ..self.config.clone()
        })
    }

    /// Set [`LpRagConfig::max_query_bytes`], the longest query (UTF-8 bytes) this index
    /// embeds.
    pub fn set_max_query_bytes(&mut self, max_bytes: usize) {
        self.config.max_query_bytes = max_bytes;
    }

    /// Make the candidate search `config` asks for, then keep `config` (unchanged on error).
    fn set_search(&mut self, config: LpRagConfig) -> Result<()> {
        self.search = Arc::new(ChunkSearch::for_config(&self.graph, &config)?);
        self.config = config;
        Ok(())
    }

    /// Whether the exact candidate scan reads the column-wise copy of the chunk embeddings
    /// (see [`LpRagConfig::column_scan_from`]).
    pub fn scans_columns(&self) -> bool {
        self.search.columns.is_some()
    }

    /// Rank chunks for an already embedded query (the encoder's vector).
    pub async fn retrieve_embedded(
        &self,
        query: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        self.rank_embedded(query, selection, None).await
    }

    /// [`LpRag::retrieve_embedded`] over the chunks `filter` admits (see
    /// [`Retriever::retrieve_filtered`]).
    pub async fn retrieve_embedded_filtered(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        filter.validate()?;
        let filter = (!filter.is_all()).then(|| filter.clone());
        self.rank_embedded(query, selection, filter).await
    }

    /// The ranking behind every `retrieve` method: the candidate stage (restricted to the
    /// admitted chunks under a filter; the query still joins its nearest chunks of the
    /// whole corpus, as the model was trained), then the predictor.
    async fn rank_embedded(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: Option<Filter>,
    ) -> Result<Vec<ScoredChunk>> {
        use tracing::Instrument;
        let span = tracing::info_span!(
            "lprag.retrieve",
            pool = ?self.config.candidate_pool,
            filtered = filter.is_some(),
            candidates = tracing::field::Empty,
        );
        self.rank_traced(query, selection, filter)
            .instrument(span)
            .await
    }

    async fn rank_traced(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: Option<Filter>,
    ) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        let allowed: Option<Vec<bool>> =
            filter.map(|f| self.chunks.iter().map(|c| f.matches(c)).collect());
        let (graph, search, predictor) = (
            self.graph.clone(),
            self.search.clone(),
            self.predictor.clone(),
        );
        let (pool, neighbours) = (self.config.candidate_pool, self.config.candidate_neighbours);
        let join = match self.config.train.inference {
            InferenceMode::JoinTopK(k) => k,
            _ => 0,
        };
        let span = tracing::Span::current();
        let ranked = blocking(move || {
            let (nearest, candidates) = candidates(
                &graph,
                &search,
                &query,
                pool,
                neighbours,
                join,
                allowed.as_deref(),
            );
            span.record("candidates", candidates.len());
            let logits = predictor.score_near(&query, &nearest, &candidates)?;
            let mut ranked: Vec<(ChunkId, f32)> = candidates.into_iter().zip(logits).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Ok(ranked)
        })
        .await?;
        let scored: Vec<ScoredChunk> = ranked
            .into_iter()
            .map(|(c, l)| ScoredChunk {
                chunk: self.chunks[c].clone(),
                score: sigmoid(l),
            })
            .collect();
        Ok(selection.apply(scored, |s| s.score))
    }

    /// Save the whole index (chunks, queries, graph with embeddings, trained model) under
    /// `dir`, atomically and durably: everything is written to a uniquely named sibling
    /// directory, synced to disk, and swapped in for `dir` in one step (an atomic exchange
    /// on Linux; elsewhere two renames with a brief window), so a crash leaves the old
    /// index or the new one, concurrent saves do not collide, and a reader always finds
    /// one.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` exists and is neither empty nor an `LpRag`
    /// index (a manifest and only an index's files): nothing is written then.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        INDEX_DIR.check(dir)?;
        let staged = crate::durable::staging_dir(dir)?;
        let tmp = staged.path().to_path_buf();
        let write_json = |name: &str, value: &dyn erased::Json| -> Result<()> {
            let path = tmp.join(name);
            let bytes = value
                .to_json()
                .map_err(|e| Error::format(&path, e.to_string()))?;
            std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))
        };
        write_json(
            MANIFEST,
            &Manifest {
                format_version: INDEX_FORMAT_VERSION,
                encoder: self.encoder.name().to_string(),
                encoder_fingerprint: self.encoder.fingerprint(),
                dimension: self.encoder.dimension(),
                predictor: self.predictor.name().to_string(),
                predictor_source: self.source,
                default_encoder: self.default_encoder.clone(),
                config: self.config.clone(),
                stats: self.stats.clone(),
            },
        )?;
        write_json(CHUNKS, &self.chunks)?;
        write_json(QUERIES, &self.queries)?;
        lprag_graph::save_link_graph(&self.graph, tmp.join(GRAPH))?;
        if let Some(lists) = &self.knn {
            lprag_graph::save_knn_lists(lists, tmp.join(KNN))?;
        }
        self.predictor.save(&tmp.join(PREDICTOR_DIR))?;
        crate::durable::replace_dir(staged, dir, &INDEX_DIR)
    }

    /// Whether [`LpRag::save`] may write into `dir` now: it does not exist, is empty, or is
    /// an `LpRag` index holding nothing else. Call it before a long build whose result
    /// goes there, so that a refused directory costs nothing (`save` checks again).
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] naming `dir` and what was found in it.
    pub fn check_save_dir(dir: impl AsRef<Path>) -> Result<()> {
        INDEX_DIR.check(dir.as_ref())
    }

    /// Load an index saved by [`LpRag::save`] that was built with the default encoder and
    /// the built-in [`GnnLinkPredictor`], rebuilding the encoder from the index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom encoder (use
    /// [`LpRag::load`] and pass it); the errors of [`LpRag::load`] otherwise.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_on(dir, ComputeDevice::Cpu)
    }

    /// [`LpRag::open`] with the built-in predictor scoring on `device`.
    pub fn open_on(dir: impl AsRef<Path>, device: ComputeDevice) -> Result<Self> {
        let dir = dir.as_ref();
        device.to_burn()?;
        let manifest = read_manifest(dir)?;
        if manifest.predictor_source != PredictorSource::Builtin {
            return Err(Error::invalid(
                "LpRag::open",
                format!(
                    "the index in {} was built with the custom predictor or scorer '{}'; \
                     load it with {}",
                    dir.display(),
                    manifest.predictor,
                    manifest.predictor_source.how_to_load()
                ),
            ));
        }
        let Some(spec) = manifest.default_encoder else {
            return Err(Error::invalid(
                "LpRag::open",
                format!(
                    "the index in {} was built with the custom encoder '{}'; load it with \
                     LpRag::load(dir, encoder)",
                    dir.display(),
                    manifest.encoder
                ),
            ));
        };
        let chunks: Vec<Chunk> = read_json(&dir.join(CHUNKS))?;
        let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
        Self::load_on(dir, spec.rebuild(&texts)?, device)
    }

    /// Load an index saved by [`LpRag::save`] whose predictor is the built-in
    /// [`GnnLinkPredictor`]. `encoder` must be the encoder the index was built with (its name
    /// and dimension are checked).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom predictor or scorer
    /// (the message names the loader to use); I/O and format errors of the index files.
    pub fn load(dir: impl AsRef<Path>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::load_on(dir, encoder, ComputeDevice::Cpu)
    }

    /// [`LpRag::load`] with the built-in predictor scoring on `device`.
    pub fn load_on(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        device: ComputeDevice,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(dir, encoder, "LpRag::load", &[PredictorSource::Builtin])?;
        let predictor = BuiltinPredictor::restore(
            &parts.manifest.config,
            &dir.join(PREDICTOR_DIR),
            &parts.graph,
            device,
        )?;
        Ok(parts.finish(predictor, device))
    }

    /// Load an index saved by [`LpRag::save`] that was built with a custom
    /// [`LinkPredictor`] ([`LpRagBuilder::predictor`]) or the built-in one. `restore`
    /// rebuilds the predictor from the directory its [`LinkPredictor::save`] wrote and the
    /// index's graph; its name must be the one recorded in the index. For example, the
    /// built-in predictor on a device of your choice:
    ///
    /// ```no_run
    /// # fn run(encoder: std::sync::Arc<dyn lprag::Encoder>) -> lprag::Result<()> {
    /// use lprag::{GnnLinkPredictor, LinkPredictor, LpRag};
    /// let rag = LpRag::load_with("index", encoder, |dir, _graph| {
    ///     // ComputeDevice::Cuda(0) or Wgpu(0) with the `cuda` / `wgpu` feature
    ///     let device = lprag::ComputeDevice::Cpu.to_burn()?;
    ///     Ok(Box::new(GnnLinkPredictor::from_dir_on(dir, device)?) as Box<dyn LinkPredictor>)
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Those of [`LpRag::load`], and whatever `restore` returns.
    pub fn load_with(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        restore: impl FnOnce(&Path, &LinkGraph) -> Result<Box<dyn LinkPredictor>>,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(
            dir,
            encoder,
            "LpRag::load_with",
            &[PredictorSource::Custom, PredictorSource::Builtin],
        )?;
        let predictor = restore(&dir.join(PREDICTOR_DIR), &parts.graph)?;
        if predictor.name() != parts.manifest.predictor {
            return Err(Error::invalid(
                "LpRag::load_with (predictor)",
                format!(
                    "the index was built with the predictor '{}', the restored one is '{}'",
                    parts.manifest.predictor,
                    predictor.name()
                ),
            ));
        }
        Ok(parts.finish(Arc::from(predictor), ComputeDevice::Cpu))
    }

    /// Load an index saved by [`LpRag::save`] that was built with the training-free
    /// [`LinkScorer`] `scorer` ([`LpRagBuilder::scorer`]); its name must match the one
    /// recorded in the index.
    ///
    /// # Errors
    /// Those of [`LpRag::load`], and [`Error::InvalidInput`] for another scorer's name.
    pub fn load_with_scorer(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        scorer: impl LinkScorer + 'static,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(
            dir,
            encoder,
            "LpRag::load_with_scorer",
            &[PredictorSource::Scorer],
        )?;
        if scorer.name() != parts.manifest.predictor {
            return Err(Error::invalid(
                "LpRag::load_with_scorer",
                format!(
                    "the index was built with the scorer '{}', not '{}'",
                    parts.manifest.predictor,
                    scorer.name()
                ),
            ));
        }
        let predictor = Arc::new(ScorerPredictor {
            scorer: Arc::new(scorer),
            graph: parts.graph.clone(),
            search: parts.search.clone(),
        });
        Ok(parts.finish(predictor, ComputeDevice::Cpu))
    }
}

/// An index read from disk, before its ranking model is restored.
struct Parts {
    manifest: Manifest,
    chunks: Vec<Chunk>,
    queries: Vec<SyntheticQuery>,
    graph: Arc<LinkGraph>,
    search: Arc<ChunkSearch>,
    encoder: Arc<dyn Encoder>,
    knn: Option<Arc<KnnLists>>,
}

impl Parts {
    /// Read and check everything but the predictor for `loader`; the index must have been
    /// built with a model of an `accepted` kind.
    fn read(
        dir: &Path,
        encoder: Arc<dyn Encoder>,
        loader: &str,
        accepted: &[PredictorSource],
    ) -> Result<Self> {
        let manifest = read_manifest(dir)?;
        if !accepted.contains(&manifest.predictor_source) {
            return Err(Error::invalid(
                format!("{loader} (predictor)"),
                format!(
                    "the index in {} was built with the {} '{}'; load it with {}",
                    dir.display(),
                    match manifest.predictor_source {
                        PredictorSource::Builtin => "built-in predictor",
                        PredictorSource::Custom => "custom predictor",
                        PredictorSource::Scorer => "training-free scorer",
                    },
                    manifest.predictor,
                    manifest.predictor_source.how_to_load()
                ),
            ));
        }
        if manifest.encoder != encoder.name() || manifest.dimension != encoder.dimension() {
            return Err(Error::invalid(
                "LpRag::load (encoder)",
                format!(
                    "index was built with encoder '{}' ({} dims) but '{}' ({} dims) was given",
                    manifest.encoder,
                    manifest.dimension,
                    encoder.name(),
                    encoder.dimension()
                ),
            ));
        }
        check_fingerprint(
            "LpRag::load (encoder)",
            manifest.encoder_fingerprint.as_deref(),
            &*encoder,
        )?;
        let chunks: Vec<Chunk> = read_json(&dir.join(CHUNKS))?;
        let queries: Vec<SyntheticQuery> = read_json(&dir.join(QUERIES))?;
        let graph = lprag_graph::load_link_graph(dir.join(GRAPH))?;
        if graph.num_chunks != chunks.len() {
            return Err(Error::format(
                dir.join(GRAPH),
                format!(
                    "graph has {} chunks, chunks.json has {}",
                    graph.num_chunks,
                    chunks.len()
                ),
            ));
        }
        // The k-NN lists are optional (indexes saved before incremental updates have
        // none; the first update computes them), but a file that is there must be sound.
        let knn_path = dir.join(KNN);
        let knn = if knn_path.exists() {
            let lists = lprag_graph::load_knn_lists(&knn_path)?;
            if lists.len() != chunks.len() {
                return Err(Error::format(
                    knn_path,
                    format!("{} k-NN lists for {} chunks", lists.len(), chunks.len()),
                ));
            }
            Some(Arc::new(lists))
        } else {
            None
        };
        let search = Arc::new(ChunkSearch::for_config(&graph, &manifest.config)?);
        Ok(Self {
            manifest,
            chunks,
            queries,
            search,
            graph: Arc::new(graph),
            encoder,
            knn,
        })
    }

    fn finish(self, predictor: Arc<dyn LinkPredictor>, device: ComputeDevice) -> LpRag {
        LpRag {
            chunks: self.chunks,
            queries: self.queries,
            search: self.search,
            graph: self.graph,
            encoder: self.encoder,
            default_encoder: self.manifest.default_encoder,
            predictor,
            source: self.manifest.predictor_source,
            config: self.manifest.config,
            stats: self.manifest.stats,
            knn: self.knn,
            device,
        }
    }
}

/// The manifest of the index in `dir`, its format version checked.
/// `key()` when there is a work directory (keys hash whole stages), else a placeholder.
fn stage_key(work: &Option<WorkDir>, key: impl FnOnce() -> StageKey) -> StageKey {
    match work {
        Some(_) => key(),
        None => StageKey(0),
    }
}

/// The key of a list of chunks (their ids, texts and provenance).
fn chunks_key(chunks: &[Chunk]) -> StageKey {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(chunks.len());
    for c in chunks {
        let mut p = Vec::with_capacity(c.text.len() + c.provenance.title.len() + 32);
        p.extend_from_slice(&(c.id as u64).to_le_bytes());
        for s in [&c.text, &c.provenance.title, &c.provenance.document_id] {
            p.extend_from_slice(&(s.len() as u64).to_le_bytes());
            p.extend_from_slice(s.as_bytes());
        }
        p.extend_from_slice(&(c.provenance.span.start as u64).to_le_bytes());
        p.extend_from_slice(&(c.provenance.span.end as u64).to_le_bytes());
        parts.push(p);
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    StageKey::of(&refs)
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    check_version(&path, &bytes, "format_version", INDEX_FORMAT_VERSION)?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(&path, e.to_string()))?;
    if manifest.format_version != INDEX_FORMAT_VERSION {
        return Err(Error::format(
            dir.join(MANIFEST),
            format!(
                "index format version {}, this build reads version {INDEX_FORMAT_VERSION}",
                manifest.format_version
            ),
        ));
    }
    Ok(manifest)
}

mod erased {
    /// Object-safe JSON serialisation for the save helper.
    pub trait Json {
        fn to_json(&self) -> serde_json::Result<Vec<u8>>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> serde_json::Result<Vec<u8>> {
            serde_json::to_vec(self)
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))
}

/// The query's nearest chunks (best first; as many as the pool and the join need) and the
/// chunks to score: the pool plus its graph neighbours, or every chunk.
fn candidates(
    graph: &LinkGraph,
    search: &ChunkSearch,
    query: &[f32],
    pool: Option<usize>,
    neighbours: bool,
    join: usize,
    allowed: Option<&[bool]>,
) -> (Vec<ChunkId>, Vec<ChunkId>) {
    let n = graph.num_chunks;
    let pool = pool.filter(|&p| p < n).map(|p| p.max(1));
    let nearest_where = |m: usize, keep: &(dyn Fn(usize) -> bool + Sync)| -> Vec<ChunkId> {
        if let Some(ivf) = &search.ivf {
            // Too few admitted chunks in the probed lists (a selective filter): scan all.
            match ivf.search(&graph.features, query, m, keep) {
                Ok(hits) if hits.len() >= m.min(n) => {
                    return hits.into_iter().map(|(i, _)| i as ChunkId).collect()
                }
                _ => {}
            }
        }
        let hits = match &search.columns {
            Some(columns) => {
                columns.nearest_where(&graph.features, &search.inv_norms, query, m, keep)
            }
            None => lprag_graph::nearest_by_cosine_where(
                &graph.features,
                &search.inv_norms,
                query,
                m,
                keep,
            ),
        };
        hits.into_iter().map(|(i, _)| i as ChunkId).collect()
    };
    let (nearest, pool_nearest) = match allowed {
        // One scan serves both the join and the pool.
        None => {
            let nearest = nearest_where(pool.unwrap_or(0).max(join), &|_| true);
            let p = pool.unwrap_or(0).min(nearest.len());
            let pooled = nearest[..p].to_vec();
            (nearest, pooled)
        }
        // The join stays the whole corpus's nearest chunks; the pool is the admitted ones'.
        Some(ok) => (
            nearest_where(join, &|_| true),
            nearest_where(pool.unwrap_or(0), &|i| ok[i]),
        ),
    };
    let admitted = |i: usize| allowed.is_none_or(|ok| ok[i]);
    let candidates = match pool {
        Some(_) => {
            let mut c: Vec<ChunkId> = pool_nearest;
            if neighbours {
                for i in 0..c.len() {
                    c.extend(
                        search.neighbours[c[i]]
                            .iter()
                            .map(|&j| j as ChunkId)
                            .filter(|&j| admitted(j)),
                    );
                }
            }
            c.sort_unstable();
            c.dedup();
            c
        }
        None => (0..n).filter(|&i| admitted(i)).collect(),
    };
    (nearest, candidates)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[async_trait]
impl Retriever for LpRag {
    fn name(&self) -> &str {
        "lprag"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, self.config.max_query_bytes)?;
        if query.trim().is_empty() {
            return Err(Error::invalid("LpRag::retrieve (query)", "query is empty"));
        }
        let q = embed_query(&*self.encoder, query).await?;
        self.retrieve_embedded(q, selection).await
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, self.config.max_query_bytes)?;
        if query.trim().is_empty() {
            return Err(Error::invalid("LpRag::retrieve (query)", "query is empty"));
        }
        selection.validate()?;
        filter.validate()?;
        let q = embed_query(&*self.encoder, query).await?;
        self.retrieve_embedded_filtered(q, selection, filter).await
    }

    /// All queries are embedded in one encoder call, then ranked on blocking threads.
    async fn retrieve_batch(
        &self,
        queries: &[String],
        selection: Selection,
    ) -> Result<Vec<Vec<ScoredChunk>>> {
        selection.validate()?;
        for q in queries {
            lprag_core::check_query_len(q, self.config.max_query_bytes)?;
        }
        if let Some(i) = queries.iter().position(|q| q.trim().is_empty()) {
            return Err(Error::invalid(
                format!("LpRag::retrieve_batch (query {i})"),
                "query is empty",
            ));
        }
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = embed_queries(&*self.encoder, queries).await?;
        let mut out = Vec::with_capacity(queries.len());
        for group in vectors.chunks(RETRIEVE_BATCH_CONCURRENCY) {
            let running: Vec<_> = group
                .iter()
                .map(|v| self.rank_embedded(v.clone(), selection, None))
                .collect();
            out.extend(futures::future::try_join_all(running).await?);
        }
        Ok(out)
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_version_reads_the_version_before_the_body() {
        let p = Path::new("/x.json");
        assert!(check_version(p, br#"{"a":[1,2],"version":1,"b":{}}"#, "version", 1).is_ok());
        let err = check_version(p, br#"{"a":[1,2],"version":3}"#, "version", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("format version 3"), "{err}");
        assert!(check_version(p, br#"{"a":1}"#, "version", 1).is_ok());
        assert!(check_version(p, b"[1,2]", "version", 1).is_err());
    }
}
