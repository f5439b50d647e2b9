//! # lprag-core
//!
//! The small, stable contract crate of lprag: the data types that flow through a graph-RAG
//! pipeline ([`Document`] → [`Chunk`] → [`Embeddings`] → [`LinkGraph`] → [`ScoredChunk`]),
//! the traits users implement to plug in their own components ([`Chunker`],
//! [`QueryGenerator`], [`Encoder`], [`LinkPredictor`], [`Retriever`]), one error type
//! ([`Error`], which tells transient failures from permanent ones), the contracts of sparse
//! relevance ([`SparseEncoder`]) and triple extraction ([`TripleExtractor`]), where a
//! corpus' chunks and vectors live ([`ChunkStore`]), documents read in blocks
//! ([`DocumentSource`]), and small
//! shared helpers ([`dot`], [`cosine`], [`blocking`]). The implementations live in the
//! sibling crates: offline text components in `lprag-text`, LLM-backed ones in `lprag-llm`,
//! burn models in `lprag-model`.
//!
//! No burn, HTTP or petgraph type appears in this crate's API, so third-party backends can
//! depend on it alone.
//!
//! A `Chunker` and an `Encoder` written against this crate alone, run end to end:
//! `cargo run -p lprag-core --example custom_parts` (`examples/custom_parts.rs`).
#![warn(missing_docs)]

#[cfg(feature = "ndarray")]
mod array;
pub mod dirs;
mod embeddings;
mod error;
pub mod extract;
mod filter;
mod live;
mod query;
mod rerank;
mod source;
pub mod sparse;
mod store;
mod task;
mod traits;
mod types;

pub use embeddings::{cosine, dot, Embeddings, RowStorage};
pub use error::{Error, Result};
pub use extract::{Extraction, Triple, TripleExtractor};
pub use filter::{Filter, MAX_FILTER_DEPTH};
pub use live::{LiveIndex, UpsertReport};
pub use query::{check_query, check_query_len, DEFAULT_MAX_QUERY_BYTES};
pub use rerank::{check_rerank_scores, Reranker};
pub use source::{read_all_documents, DocumentBlocks, DocumentSource};
pub use sparse::{SparseEncoder, SparseIndex, SparseVector};
pub use store::{check_store_ids, check_store_query, ChunkBatch, ChunkStore, StoreVersion};
pub use task::{blocking, panic_message};
pub use traits::{
    check_score_args, Chunker, Encoder, LinkPredictor, LinkScorer, NoProgress, Progress,
    QueryGenerator, Retriever, ScoreContext, TrainReport, RETRIEVE_BATCH_CONCURRENCY,
};
pub use types::{
    Chunk, ChunkId, Document, EdgeKind, LinkEdge, LinkGraph, Provenance, ScoredChunk, Selection,
    SyntheticQuery, DOCUMENT_HASH_KEY, VOLATILE_METADATA,
};
