//! lprag-model's integration tests, one binary: each module is one area (a file beside this
//! one), so the test build links against burn once instead of once per file. Run one area
//! with `cargo test -p lprag-model --test integration <module>::`, e.g.
//! `cargo test -p lprag-model --test integration checkpoints::`.

mod common;

mod burn_checkpoints;
mod cached_inference;
mod checkpoints;
mod concurrent_training;
mod link_model;
mod predictors;
mod saved_formats;
mod step_graph;
