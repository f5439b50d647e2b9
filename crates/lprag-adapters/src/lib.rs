//! lprag in the Rust RAG ecosystem, both ways: any lprag [`Retriever`](lprag_core::Retriever)
//! serves the retrieval traits of rig and swiftide, a live lprag index takes their writes,
//! and their models serve lprag.
//!
//! - `rig` (feature `rig`): `rig::RigIndex` is rig-core's `VectorStoreIndex` (a rig
//!   agent's dynamic context) and, over a [`LiveIndex`](lprag_core::LiveIndex), its
//!   `InsertDocuments`; `rig::RigEncoder`, `rig::RigChat` and `rig::RigReranker` make
//!   rig's embedding, completion and rerank models lprag's `Encoder`, `ChatModel` and
//!   `Reranker`.
//! - `swiftide` (feature `swiftide`): `swiftide::SwiftideRetriever` is swiftide-core's
//!   `Retrieve` step; `swiftide::LpragPersist` is the `Persist` storage of a swiftide
//!   indexing pipeline, writing its nodes into a live lprag index.
//! - `fastembed` (feature `fastembed`): a fastembed (ONNX Runtime) text-embedding model
//!   as an lprag [`Encoder`](lprag_core::Encoder), its `TextRerank` as a
//!   [`Reranker`](lprag_core::Reranker).
//!
//! The features are off by default: name the framework you use
//! (`lprag-adapters = { version = "0.1", features = ["rig"] }`). Of lprag's crates it
//! depends on `lprag-core` (and `lprag-llm` with `rig`), so any retriever works: `LpRag`
//! and the peers from `lprag`, a baseline, or your own; the facade's `lprag::Live` is the
//! [`LiveIndex`](lprag_core::LiveIndex) the write paths take.

#![warn(missing_docs)]

#[cfg(any(feature = "rig", feature = "swiftide"))]
mod source;
#[cfg(any(feature = "rig", feature = "swiftide"))]
pub use source::IndexSource;

#[cfg(feature = "rig")]
pub mod rig;

#[cfg(feature = "swiftide")]
pub mod swiftide;

#[cfg(feature = "fastembed")]
pub mod fastembed;
