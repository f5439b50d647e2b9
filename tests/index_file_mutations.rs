//! A brief random run of the `index_files` fuzz harness (`fuzz/loaders/`): every index
//! kind opened from its committed fixture with one JSON file mutated structurally, then
//! queried. No panic, no NaN score, hits best first. The coverage-guided runs of the same
//! harness (millions of inputs) are by hand; docs/reliability.md has the commands.

// The harness names its mutator `crate::mutate`: it is declared in tests/integration.rs.
use crate::mutate;

#[path = "../fuzz/loaders/harness/index_files.rs"]
mod index_files;

use index_files::{Harness, Outcome};

#[test]
fn mutated_index_files_give_errors_or_sound_answers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let harness = Harness::new(&root);
    let mut state = 0x1db7_a5e5_u64;
    let (mut opened, mut rejected) = (0, 0);
    for _ in 0..3000 {
        match harness.run(&mutate::seeded_input(&mut state)) {
            Outcome::Opened => opened += 1,
            Outcome::Rejected => rejected += 1,
            Outcome::Skipped => {}
        }
    }
    // Both paths are exercised: some mutations are caught by the loaders, others load
    // (a changed text, a harmless number) and must then answer soundly.
    assert!(
        opened > 100 && rejected > 100,
        "opened {opened}, rejected {rejected}"
    );
    eprintln!("3000 inputs: {opened} opened and answered, {rejected} refused");
}

/// Replays one input (a fuzzer artifact): `LPRAG_FUZZ_INPUT=<file> cargo test --test
/// index_file_mutations -- --ignored replay` (with `LPRAG_FUZZ_KEEP=<file>` to keep the
/// mutated index file).
#[test]
#[ignore = "replays the input named by LPRAG_FUZZ_INPUT"]
fn replay() {
    let Some(input) = std::env::var_os("LPRAG_FUZZ_INPUT") else {
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let harness = Harness::new(&root);
    let outcome = harness.run(&std::fs::read(input).expect("read the input"));
    eprintln!("{outcome:?}");
}
