//! A brief random run of the `index_files` fuzz harness (`fuzz/loaders/`): every index
//! kind opened from its committed fixture with one JSON file mutated structurally, then
//! queried. No panic, no NaN score, hits best first. The coverage-guided runs of the same
//! harness (millions of inputs) are by hand; docs/reliability.md has the commands.

#[path = "../fuzz/loaders/harness/mutate.rs"]
mod mutate;

#[path = "../fuzz/loaders/harness/index_files.rs"]
mod index_files;

use index_files::{Harness, Outcome};

/// splitmix64: reproducible input bytes without a dependency.
fn bytes(state: &mut u64) -> Vec<u8> {
    let mut next = || {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let len = 8 + (next() % 120) as usize;
    (0..len).map(|_| next() as u8).collect()
}

#[test]
fn mutated_index_files_give_errors_or_sound_answers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let harness = Harness::new(&root);
    let mut state = 0x1db7_a5e5_u64;
    let (mut opened, mut rejected) = (0, 0);
    for _ in 0..3000 {
        match harness.run(&bytes(&mut state)) {
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
