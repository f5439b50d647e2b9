//! Per-epoch training checkpoints: a run killed after an epoch resumes there.

use std::panic::{catch_unwind, AssertUnwindSafe};

use lprag_core::{LinkPredictor, NoProgress};
use lprag_model::{GnnLinkPredictor, ModelConfig, TrainConfig};

use crate::common::{graph, DieAfter};

fn config(epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        batch_size: 16,
        validation_fraction: 0.2,
        patience: 100,
        ..TrainConfig::default()
    }
}

fn scores(p: &GnnLinkPredictor) -> Vec<f32> {
    let g = graph();
    let q = g.features.row(g.num_chunks).to_vec();
    p.score(&q, &(0..g.num_chunks).collect::<Vec<_>>()).unwrap()
}

#[test]
fn a_killed_run_resumes_after_its_last_epoch_and_a_finished_run_is_not_repeated() {
    let g = graph();
    let dir = tempfile::tempdir().unwrap();

    // Uninterrupted, no checkpoints: the reference.
    let mut plain = GnnLinkPredictor::new(ModelConfig::default(), config(6));
    let reference = plain.fit(&g, &NoProgress).unwrap();
    assert_eq!(reference.epochs_run, 6);

    // Killed after epoch 3.
    let mut killed =
        GnnLinkPredictor::new(ModelConfig::default(), config(6)).with_checkpoints(dir.path());
    let crash = catch_unwind(AssertUnwindSafe(|| killed.fit(&g, &DieAfter(3))));
    assert!(crash.is_err(), "the run was killed");
    assert!(dir.path().join("train-state.json").is_file());

    // Resumed: epochs 1–3 come from the checkpoint; 4–6 are trained now from its weights
    // and Adam moments with the same per-epoch draws, so every epoch is the reference's.
    let mut resumed =
        GnnLinkPredictor::new(ModelConfig::default(), config(6)).with_checkpoints(dir.path());
    let report = resumed.fit(&g, &NoProgress).unwrap();
    assert_eq!(report.epochs_run, 6);
    assert_eq!(report.train_loss.len(), 6);
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert!(
        close(&report.train_loss, &reference.train_loss),
        "{report:?} vs {reference:?}"
    );
    assert!(
        close(&report.val_loss, &reference.val_loss),
        "{report:?} vs {reference:?}"
    );
    let resumed_scores = scores(&resumed);
    assert!(
        close(&resumed_scores, &scores(&plain)),
        "the resumed model is the uninterrupted one"
    );

    // Finished: a new fit returns the saved result without training.
    let mut again =
        GnnLinkPredictor::new(ModelConfig::default(), config(6)).with_checkpoints(dir.path());
    let report2 = again.fit(&g, &DieAfter(1)).unwrap();
    assert_eq!(report2.train_loss, report.train_loss);
    assert_eq!(report2.best_epoch, report.best_epoch);
    let again_scores = scores(&again);
    for (a, b) in again_scores.iter().zip(&resumed_scores) {
        assert!(
            (a - b).abs() < 1e-6,
            "{again_scores:?} vs {resumed_scores:?}"
        );
    }

    // Another configuration starts afresh (its first epoch would be reported, and dies).
    let mut other =
        GnnLinkPredictor::new(ModelConfig::default(), config(7)).with_checkpoints(dir.path());
    let crash = catch_unwind(AssertUnwindSafe(|| other.fit(&g, &DieAfter(1))));
    assert!(
        crash.is_err(),
        "a different run does not reuse the checkpoint"
    );
}
