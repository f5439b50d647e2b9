//! # lprag-eval
//!
//! A benchmark harness for graph-RAG retrievers on real multi-hop QA data, by the
//! HippoRAG / GFM-RAG evaluation protocol.
//!
//! - [`datasets`]: loaders for the HippoRAG file family (MuSiQue, HotpotQA, 2Wiki),
//!   MultiHop-RAG and a generic JSONL format, with errors that name file, record and
//!   field;
//! - [`metrics`]: passage Recall@k, SQuAD exact match and token F1 (max over aliases),
//!   latency percentiles, token counts;
//! - [`baselines`]: [`lprag_core::Retriever`]s for comparison: exact flat cosine search
//!   ([`baselines::DenseRetriever`]), Okapi BM25 ([`baselines::Bm25Retriever`], scoring
//!   like `rank_bm25`) and reciprocal-rank fusion ([`baselines::HybridRetriever`]);
//! - [`registry`]: retrievers and encoders by name ([`registry::build_retriever`]);
//! - [`harness`]: runs questions through retrievers, ranking **passages** by the best
//!   score of any of their chunks;
//! - [`report`]: results as a Markdown table or JSON.
//!
//! The `lprag-eval` binary wraps it all:
//! `lprag-eval retrieval --dataset DIR --retriever dense,bm25,hybrid [--json OUT]`.
//!
//! ```
//! use std::sync::Arc;
//! use lprag_core::{Document, NoProgress};
//! use lprag_eval::datasets::{Dataset, DatasetFormat, Question};
//! use lprag_eval::harness::{run_retrieval, EvalOptions};
//! use lprag_eval::registry::{build_encoder, EncoderKind};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let corpus = vec![
//!     Document::new("0", "Warsaw", "Warsaw is the capital of Poland, on the Vistula."),
//!     Document::new("1", "Marie Curie", "Marie Curie was born in Warsaw."),
//!     Document::new("2", "Paris", "Paris is the capital of France."),
//! ];
//! let question = Question {
//!     id: "q1".into(),
//!     question: "Which river flows through Marie Curie's birthplace?".into(),
//!     answers: vec!["Vistula".into()],
//!     gold: vec![0, 1],
//!     grades: vec![],
//!     unmatched_gold: vec![],
//!     metadata: Default::default(),
//! };
//! let ds = Dataset {
//!     name: "toy".into(), format: DatasetFormat::Jsonl, corpus,
//!     questions: vec![question], duplicates_dropped: 0,
//! };
//! let encoder = build_encoder(EncoderKind::Hashing, &ds.corpus, None).unwrap();
//! let names = vec!["bm25".to_string(), "dense".to_string()];
//! let report = run_retrieval(&ds, &names, encoder, "hashing", &EvalOptions::default(), &NoProgress)
//!     .await
//!     .unwrap();
//! assert_eq!(report.results[0].recall[&10], 1.0); // 3 passages: everything is in the top 10
//! println!("{}", report.to_markdown());
//! # });
//! ```
#![warn(missing_docs)]

pub mod baselines;
pub mod cache;
pub mod cli;
pub mod datasets;
mod error;
pub mod harness;
pub mod live_bench;
pub mod metrics;
pub mod qa;
pub mod registry;
pub mod report;
pub mod scale;
#[cfg(test)]
mod test_support;
pub mod trec;

pub use error::{Error, Result};
