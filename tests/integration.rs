//! lprag's integration tests, one binary: each module is one area (a file beside this
//! one), so the test build compiles and links against burn once instead of once per file.
//! Run one area with `cargo test --test integration <module>::`, e.g.
//! `cargo test --test integration qcg::`. `tracing.rs` is a binary of its own: it installs a
//! subscriber and reads back the spans, which tests running beside it in one process
//! would disturb (tracing caches per call site whether anyone listens).

mod common;
/// The examples' bundled corpus.
#[path = "../examples/data/mini_corpus.rs"]
mod mini_corpus;
/// The fuzz harnesses' mutator, which they name `crate::mutate`.
#[path = "../fuzz/loaders/harness/mutate.rs"]
mod mutate;

mod answer_only;
mod bad_encoder;
mod baselines;
mod candidate_index;
mod chunk_limits;
mod chunk_store;
mod concurrency;
mod crash_consistency;
mod custom_predictor;
mod data_safety;
mod device_parity;
mod ecosystem;
mod filters;
mod fixtures;
mod g2;
mod gfm;
mod index_file_mutations;
mod lesegr;
mod live;
mod pipeline;
mod qcg;
mod ranking;
mod real_llm;
mod rerank;
mod selection;
mod streamed_build;
mod updates;
mod work_dir;
