//! # lprag
//!
//! Graph-based retrieval-augmented generation for Rust. Its heart is **LP-RAG**: retrieval
//! cast as inductive link prediction on a graph of atomic chunks and synthetic queries,
//! with a GNN link predictor trained in [burn](https://burn.dev) on CPU or GPU.
//!
//! This facade re-exports the workspace crates and wires them into one retriever,
//! [`LpRag`]:
//!
//! ```no_run
//! use lprag::{Document, LpRag, Retriever, Selection};
//!
//! # async fn run() -> lprag::Result<()> {
//! let docs = vec![
//!     Document::new("1", "Marie Curie", "Marie Curie was born in Warsaw. She won two Nobel Prizes."),
//!     Document::new("2", "Warsaw", "Warsaw is the capital of Poland. It lies on the Vistula."),
//! ];
//! let rag = LpRag::builder().build(&docs).await?; // offline defaults: no LLM, no weights
//! for hit in rag.retrieve("Which river flows through Curie's birthplace?", Selection::TopK(3)).await? {
//!     println!("{:.3}  {}", hit.score, hit.chunk.text);
//! }
//! # Ok(()) }
//! ```
//!
//! The crates:
//! - [`core`] (`lprag-core`): types, traits, errors, offline defaults;
//! - [`graph`] (`lprag-graph`): mutual k-NN, chunk–query graphs, sampling, CSR;
//! - [`model`] (`lprag-model`): burn link predictors (NCN, GAE, MLP), the LeSeGR scorer and
//!   GFM-RAG's query-dependent GNN;
//! - [`llm`] (`lprag-llm`): LLM backends and prompts;
//! - [`load`] (`lprag-load`): a user's files (Markdown, text, HTML, JSON/JSONL, PDF) as
//!   documents.
//!
//! [`Reranked`] puts a [`Reranker`] (such as the BERT [`CrossEncoder`]) after any
//! retriever. [`Live`] serves an index while it is updated, [`sync`] brings one in line with the
//! current documents by content hash (module [`live`]).
//!
//! The top level is the user API: documents, the retrievers with their builders and
//! settings, the traits a component implements, updates and serving. What a custom
//! component is built from (burn link-predictor engines and models, the scorer's context)
//! lives in [`extend`].
#![warn(missing_docs)]

mod cpu;
mod durable;
pub mod live;
mod progress;
mod report;
pub mod rerank;
mod retrievers;
mod workdir;

pub use retrievers::baselines;
pub use retrievers::{g2, gfm, lesegr, qcg};

pub use lprag_core as core;
pub use lprag_graph as graph;
pub use lprag_llm as llm;
/// The loaders: a user's files as documents ([`lprag_load`]).
pub use lprag_load as load;
pub use lprag_model as model;
pub use lprag_text as text;

pub use baselines::{
    Bm25Config, Bm25Retriever, Bm25RetrieverBuilder, DenseConfig, DenseRetriever,
    DenseRetrieverBuilder, HybridRetriever, HybridRetrieverBuilder, RrfConfig,
};
pub use g2::{
    ClusterDistance, Community, G2Config, G2Explanation, G2Hit, G2Rag, G2RagBuilder, G2Source,
    G2Stats, MergeOrder, OutlierPolicy,
};
pub use gfm::{GfmConfig, GfmRag, GfmRagBuilder, GfmScores, GfmStats};
pub use lesegr::{LesegrConfig, LesegrRag, LesegrRagBuilder, LesegrVariant};
pub use live::{sync, sync_from, Live, SyncPlan, SyncReport, Updatable, UpdateInputs};
pub use lprag_core::{
    Chunk, ChunkBatch, ChunkId, ChunkStore, Chunker, Document, DocumentSource, Embeddings, Encoder,
    Error, Filter, LinkGraph, LinkPredictor, LinkScorer, LiveIndex, NoProgress, Progress,
    QueryGenerator, Reranker, Result, Retriever, ScoredChunk, Selection, SyntheticQuery,
    TrainReport, UpsertReport, DEFAULT_MAX_QUERY_BYTES, DOCUMENT_HASH_KEY,
};
pub use lprag_graph::MemoryStore;
pub use lprag_load::{DirSource, JsonLinesSource};
pub use lprag_model::bert::{CrossEncoder, SentenceEncoder};
pub use lprag_model::{
    Aggregation, ComputeDevice, Decoder, InferenceMode, ModelConfig, Negatives, PegConfig,
    PredictorKind, SealConfig, Targets, TrainConfig, VgaeConfig,
};

/// Extension points: what a custom link predictor or scorer is built from. Implement
/// [`LinkScorer`] (training-free, reads a [`ScoreContext`](extend::ScoreContext)) or [`LinkPredictor`]
/// directly; for a trained GNN in burn, implement [`LinkModel`](extend::LinkModel) (or [`PairModel`](extend::PairModel)) and
/// serve it with [`BurnLinkPredictor`](extend::BurnLinkPredictor), which trains it like the built-in models
/// (`examples/custom_gnn.rs`, `examples/custom_scorer.rs`).
pub mod extend {
    pub use lprag_core::{LinkPredictor, LinkScorer, ScoreContext};
    pub use lprag_model::{
        BurnLinkPredictor, GnnLinkPredictor, GraphBatch, LinkModel, PairModel, Pairs, Peg, Seal,
        Vgae,
    };
}
/// The core the four peer retrievers share: [`QcgRag`], [`LesegrRag`], [`GfmRag`] and
/// [`G2Rag`] are each a [`Peer`](peer::Peer) of their state, and `Peer`'s methods (`save`,
/// `load`, `add_documents`, …) and trait implementations (`Retriever`, `Updatable`) are
/// theirs. [`PeerState`](peer::PeerState) and [`PeerUpdate`](peer::PeerUpdate) are
/// named here for reading those signatures; they are sealed (their supertrait is private),
/// implemented by the four peers' states only.
pub mod peer {
    pub use crate::retrievers::common::{Peer, PeerState, PeerUpdate};
}
pub use lprag_text::{
    BoundedPassageChunker, HashingEncoder, HashingEncoderConfig, HeuristicQueryGenerator,
    PassageChunker, SentenceChunker, TokenChunker,
};
pub use progress::StderrProgress;
pub use qcg::{QcgConfig, QcgRag, QcgRagBuilder};
pub use report::Report;
pub use rerank::{Reranked, DEFAULT_RERANK_CANDIDATES};
pub use retrievers::common::{DefaultEncoder, Labelled, ParentScoring};
pub use retrievers::lprag::update::UpdateReport;
pub use retrievers::lprag::{
    choose_anchor, Anchor, AnchorSelection, AnswerOptions, BuiltinPredictor, IndexStats, LpRag,
    LpRagBuilder, LpRagConfig, QueryProfile, StoreWrite, ANCHOR_SIGNIFICANCE, ANCHOR_WEIGHTS,
    DEFAULT_CANDIDATE_POOL, DEFAULT_COLUMN_SCAN_FROM, INDEX_FORMAT_VERSION, STORE_WRITE_BATCH,
};
