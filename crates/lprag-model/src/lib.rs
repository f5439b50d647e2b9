//! # lprag-model
//!
//! Link predictors for LP-RAG, trained with [burn](https://burn.dev): **NCN** (Neural
//! Common Neighbor), a **GAE** (GCN or SAGE encoder with a dot or Hadamard decoder) and an
//! **MLP** baseline, all behind [`lprag_core::LinkPredictor`] as [`GnnLinkPredictor`], which
//! is one engine ([`BurnLinkPredictor`]) serving the built-in network with its fast paths
//! (full-graph training steps, an exact cache of chunk representations) as overrides.
//! Training is BCE with negative sampling and Adam, seeded, with progress reporting and
//! early stopping on held-out synthetic queries; inference joins the user query to the chunk
//! graph per [`InferenceMode`].
//!
//! Custom models: a burn module implementing [`LinkModel`] (encode nodes, decode pairs) or
//! [`PairModel`] (score each pair from the graph batch) is trained and served by
//! [`BurnLinkPredictor`]. LP-RAG's other Table 6 predictors are built that way:
//! [`vgae`], [`peg`] (with Laplacian positional encodings) and [`seal`] (DRNL-labelled
//! enclosing subgraphs).
//!
//! burn types stay inside this crate: the public API speaks `lprag_core` types, plus
//! [`burn::tensor::Device`] for callers who choose a GPU.
#![warn(missing_docs)]

pub mod bert;
mod cached;
mod checkpoint;
mod config;
mod context;
mod dense;
mod device;
mod early_stop;
pub mod gfm;
mod gnn;
mod host;
pub mod lesegr;
mod link_model;
mod net;
pub mod peg;
mod positional;
pub mod seal;
mod seeding;
mod shared;
mod training;
pub mod vgae;
mod weights;

pub use bert::SentenceEncoder;
/// The burn version this crate is built on, for writing a [`LinkModel`] (`#[derive(Module)]`
/// finds it through `use lprag_model::burn;`).
pub use burn;
pub use burn::tensor::Device;
pub use config::{
    Aggregation, Decoder, InferenceMode, ModelConfig, Negatives, PredictorKind, StepGraph, Targets,
    TrainConfig, MAX_HIDDEN, MAX_LAYERS,
};
pub use device::ComputeDevice;
pub use gnn::{FetchedRows, GnnLinkPredictor, GnnRowScorer, PREDICTOR_FORMAT_VERSION};
pub use link_model::{
    BurnLinkPredictor, GraphBatch, LinkModel, ModelInit, PairModel, Pairs,
    BURN_PREDICTOR_FORMAT_VERSION,
};
pub use peg::{Peg, PegConfig};
pub use seal::{Seal, SealConfig};
pub use vgae::{Vgae, VgaeConfig};
