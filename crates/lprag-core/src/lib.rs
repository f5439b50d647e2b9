//! # lprag-core
//!
//! The small, stable contract crate of lprag: the data types that flow through a graph-RAG
//! pipeline ([`Document`] → [`Chunk`] → [`Embeddings`] → [`LinkGraph`] → [`ScoredChunk`]),
//! the traits users implement to plug in their own components ([`Chunker`],
//! [`QueryGenerator`], [`Encoder`], [`LinkPredictor`], [`Retriever`]), one error type
//! ([`Error`], which tells transient failures from permanent ones), the contracts of sparse
//! relevance ([`SparseEncoder`]) and triple extraction ([`TripleExtractor`]), and small
//! shared helpers ([`dot`], [`cosine`], [`blocking`]). The implementations live in the
//! sibling crates: offline text components in `lprag-text`, LLM-backed ones in `lprag-llm`,
//! burn models in `lprag-model`.
//!
//! No burn, HTTP or petgraph type appears in this crate's API, so third-party backends can
//! depend on it alone.
//!
//! ```
//! use async_trait::async_trait;
//! use lprag_core::{Chunk, Chunker, Document, Provenance, Result};
//!
//! /// One chunk per line.
//! struct Lines;
//!
//! #[async_trait]
//! impl Chunker for Lines {
//!     fn name(&self) -> &str {
//!         "lines"
//!     }
//!     async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
//!         let mut out = Vec::new();
//!         for d in documents {
//!             let mut start = 0;
//!             for line in d.text.split_inclusive('\n') {
//!                 let span = start..start + line.trim_end().len();
//!                 start += line.len();
//!                 let provenance = Provenance {
//!                     document_id: d.id.clone(),
//!                     title: d.title.clone(),
//!                     span,
//!                 };
//!                 out.push(Chunk::new(out.len(), line.trim_end(), provenance));
//!             }
//!         }
//!         Ok(out)
//!     }
//! }
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let docs = vec![Document::new("d1", "Paris", "Paris is in France.\nIt has 2.1 million people.")];
//! let chunks = Lines.chunk(&docs).await.unwrap();
//! assert_eq!(chunks.len(), 2);
//! assert_eq!(chunks[1].provenance.document_id, "d1");
//! # });
//! ```
#![warn(missing_docs)]

mod embeddings;
mod error;
pub mod extract;
mod filter;
pub mod sparse;
mod task;
mod traits;
mod types;

pub use embeddings::{cosine, dot, Embeddings};
pub use error::{Error, Result};
pub use extract::{Extraction, Triple, TripleExtractor};
pub use filter::{Filter, MAX_FILTER_DEPTH};
pub use sparse::{SparseEncoder, SparseIndex, SparseVector};
pub use task::{blocking, panic_message};
pub use traits::{
    check_score_args, Chunker, Encoder, LinkPredictor, LinkScorer, NoProgress, Progress,
    QueryGenerator, Retriever, ScoreContext, TrainReport, RETRIEVE_BATCH_CONCURRENCY,
};
pub use types::{
    Chunk, ChunkId, Document, EdgeKind, LinkEdge, LinkGraph, Provenance, ScoredChunk, Selection,
    SyntheticQuery,
};
