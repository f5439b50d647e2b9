#![no_main]
//! lprag-eval's dataset loaders on mutated datasets of every format
//! (harness/datasets.rs).

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../harness/mutate.rs"]
mod mutate;

#[path = "../harness/datasets.rs"]
mod datasets;

fn harness() -> &'static datasets::Harness {
    static H: OnceLock<datasets::Harness> = OnceLock::new();
    H.get_or_init(datasets::Harness::new)
}

fuzz_target!(|data: &[u8]| {
    harness().run(data);
});
