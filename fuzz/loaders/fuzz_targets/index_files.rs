#![no_main]
//! Every index kind opened from its committed fixture with one JSON file mutated
//! structurally, then queried (harness/index_files.rs).

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../harness/mutate.rs"]
mod mutate;

#[path = "../harness/index_files.rs"]
mod index_files;

fn harness() -> &'static index_files::Harness {
    static H: OnceLock<index_files::Harness> = OnceLock::new();
    H.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/v1");
        index_files::Harness::new(&root)
    })
}

fuzz_target!(|data: &[u8]| {
    harness().run(data);
});
