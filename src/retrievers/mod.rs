//! The five retrievers, one module each, built the same way (a builder with the shared
//! `chunker`, `encoder` and `progress` setters, then `build(&documents)`), saved and
//! reopened the same way, and sharing the helpers of `common`:
//!
//! - `lprag`: LP-RAG ([`crate::LpRag`]), retrieval as link prediction on a chunk–query graph;
//! - [`qcg`]: QCG-RAG, a query-centric graph of Doc2Query questions;
//! - [`lesegr`]: CG-RAG's LeSeGR scorer over a citation-style chunk graph;
//! - [`g2`]: G²RAG, hierarchical clustering into communities;
//! - [`gfm`]: GFM-RAG, a query-dependent GNN over a knowledge graph;
//! - [`baselines`]: dense, BM25 and hybrid (RRF) baselines, built, updated and saved the
//!   same way.

pub mod baselines;
pub(crate) mod common;
pub mod g2;
pub mod gfm;
pub mod lesegr;
pub(crate) mod lprag;
pub mod qcg;
