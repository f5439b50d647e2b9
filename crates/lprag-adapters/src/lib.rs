//! Adapters from any lprag [`Retriever`](lprag_core::Retriever) to the retrieval traits of
//! other Rust RAG frameworks, so an LP-RAG index (or any peer retriever) drops into an
//! application built on them.
//!
//! - [`rig::RigIndex`] (feature `rig`): rig-core's `VectorStoreIndex`: `top_n` returns
//!   each hit's chunk as the document, `top_n_ids` its chunk id; rig's threshold and
//!   `Eq`/`And`/`Or` filters map onto lprag's [`Selection`](lprag_core::Selection) and
//!   [`Filter`](lprag_core::Filter).
//! - [`swiftide::SwiftideRetriever`] (feature `swiftide`): swiftide-core's `Retrieve`, for
//!   the default `SimilaritySingleEmbedding` strategy and for [`swiftide::LpragSearch`],
//!   which carries an lprag selection and filter.
//! - [`fastembed::FastembedEncoder`] (feature `fastembed`): a fastembed (ONNX Runtime)
//!   text-embedding model as an lprag [`Encoder`](lprag_core::Encoder), for users who
//!   want ONNX models beside the burn encoder of `lprag-model`.
//!
//! The features are off by default: name the framework you use
//! (`lprag-adapters = { version = "0.1", features = ["rig"] }`). Of lprag's crates it
//! depends on `lprag-core` only, so any retriever works: `LpRag` and the peers from `lprag`, a
//! baseline, or your own.

#![warn(missing_docs)]

#[cfg(feature = "rig")]
pub mod rig;

#[cfg(feature = "swiftide")]
pub mod swiftide;

#[cfg(feature = "fastembed")]
pub mod fastembed;
