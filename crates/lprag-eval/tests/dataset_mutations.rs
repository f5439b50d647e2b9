//! A brief random run of the `datasets` fuzz harness (`fuzz/loaders/`): small datasets of
//! every format with one file mutated (structurally for JSON, by line for JSONL and TSV).
//! Whatever loads is consistent. The coverage-guided runs of the same harness (millions
//! of inputs) are by hand; docs/reliability.md has the commands.

// The harness names its mutator `crate::mutate`: it is declared in tests/integration.rs.
use crate::mutate;

#[path = "../../../fuzz/loaders/harness/datasets.rs"]
mod datasets;

use datasets::{Harness, Outcome};

#[test]
fn mutated_datasets_give_errors_or_consistent_datasets() {
    let harness = Harness::new();
    let mut state = 0xda7a_5e75_u64;
    let (mut loaded, mut rejected) = (0, 0);
    for _ in 0..3000 {
        match harness.run(&mutate::seeded_input(&mut state)) {
            Outcome::Loaded => loaded += 1,
            Outcome::Rejected => rejected += 1,
            Outcome::Skipped => {}
        }
    }
    assert!(
        loaded > 100 && rejected > 100,
        "loaded {loaded}, rejected {rejected}"
    );
    eprintln!("3000 inputs: {loaded} loaded and consistent, {rejected} refused");
}
