//! # lprag-core
//!
//! The small, stable contract crate of lprag: the data types that flow through a graph-RAG
//! pipeline ([`Document`] → [`Chunk`] → [`Embeddings`] → [`LinkGraph`] → [`ScoredChunk`]),
//! the traits users implement to plug in their own components ([`Chunker`],
//! [`QueryGenerator`], [`Encoder`], [`LinkPredictor`], [`Retriever`]), one error type
//! ([`Error`]), and the offline defaults that need no LLM and no downloaded weights
//! ([`SentenceChunker`], [`PassageChunker`], [`HeuristicQueryGenerator`],
//! [`HashingEncoder`], [`CooccurrenceExtractor`] behind [`TripleExtractor`]) and sparse
//! relevance ([`Bm25`] behind [`SparseEncoder`]).
//!
//! No burn, HTTP or petgraph type appears in this crate's API, so third-party backends can
//! depend on it alone.
//!
//! ```
//! use lprag_core::{Chunker, Document, SentenceChunker};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let docs = vec![Document::new("d1", "Paris", "Paris is the capital of France. It has 2.1 million people.")];
//! let chunks = SentenceChunker::default().chunk(&docs).await.unwrap();
//! assert_eq!(chunks.len(), 2);
//! assert_eq!(chunks[1].provenance.document_id, "d1");
//! # });
//! ```
#![warn(missing_docs)]

mod chunker;
mod embeddings;
mod error;
pub mod extract;
mod filter;
mod hashing;
mod querygen;
pub mod sparse;
mod traits;
mod types;

pub use chunker::{PassageChunker, SentenceChunker, SentenceChunkerConfig};
pub use embeddings::{cosine, Embeddings};
pub use error::{Error, Result};
pub use extract::{CooccurrenceConfig, CooccurrenceExtractor, Extraction, Triple, TripleExtractor};
pub use filter::{Filter, MAX_FILTER_DEPTH};
pub use hashing::{HashingEncoder, HashingEncoderConfig, HashingIdf};
pub use querygen::{HeuristicQueryGenerator, HeuristicQueryGeneratorConfig};
pub use sparse::{
    bm25_tokens, Bm25, Bm25Config, Bm25Index, SparseEncoder, SparseIndex, SparseVector,
};
pub use traits::{
    check_score_args, Chunker, Encoder, LinkPredictor, LinkScorer, NoProgress, Progress,
    QueryGenerator, Retriever, ScoreContext, TrainReport, RETRIEVE_BATCH_CONCURRENCY,
};
pub use types::{
    Chunk, ChunkId, Document, EdgeKind, LinkEdge, LinkGraph, Provenance, ScoredChunk, Selection,
    SyntheticQuery,
};
