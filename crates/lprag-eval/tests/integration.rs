//! This crate's integration tests, one binary: each module is one area (a file beside
//! this one), so the test build links the crate's dependencies once instead of once per
//! file. Run one area with `cargo test --test integration <module>::`.

/// The fuzz harnesses' mutator, which they name `crate::mutate`.
#[path = "../../../fuzz/loaders/harness/mutate.rs"]
mod mutate;

mod dataset_mutations;
mod metric_properties;
mod trec;
