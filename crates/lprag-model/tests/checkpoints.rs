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

/// Records the warnings it hears.
#[derive(Default)]
struct Warnings(std::sync::Mutex<Vec<String>>);

impl lprag_core::Progress for Warnings {
    fn warn(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_string());
    }
}

/// A checkpoint that cannot be read whole — a corrupt state file, a set whose weights
/// were damaged or are missing — is reported and never trusted: the run trains from the
/// start and ends where an uninterrupted run ends.
#[test]
fn a_damaged_checkpoint_is_recomputed_with_a_warning_never_a_hard_stop() {
    let g = graph();
    let mut plain = GnnLinkPredictor::new(ModelConfig::default(), config(4));
    let reference = plain.fit(&g, &NoProgress).unwrap();
    type Damage = (&'static str, fn(&std::path::Path));
    let damages: [Damage; 3] = [
        ("corrupt state", |dir| {
            std::fs::write(dir.join("train-state.json"), b"{\"key\": \"0123").unwrap();
        }),
        ("damaged weights", |dir| {
            let set = current_set(dir);
            let path = set.join("current.bpk");
            let mut bytes = std::fs::read(&path).unwrap();
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0xff;
            std::fs::write(&path, bytes).unwrap();
        }),
        ("missing set", |dir| {
            std::fs::remove_dir_all(current_set(dir)).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let mut killed =
            GnnLinkPredictor::new(ModelConfig::default(), config(4)).with_checkpoints(dir.path());
        let crash = catch_unwind(AssertUnwindSafe(|| killed.fit(&g, &DieAfter(2))));
        assert!(crash.is_err(), "{what}: the run was killed");
        damage(dir.path());
        let warnings = Warnings::default();
        let mut resumed =
            GnnLinkPredictor::new(ModelConfig::default(), config(4)).with_checkpoints(dir.path());
        let report = resumed.fit(&g, &warnings).unwrap();
        let heard = warnings.0.lock().unwrap().clone();
        assert!(
            heard
                .iter()
                .any(|w| w.contains("unusable") && w.contains("from the start")),
            "{what}: {heard:?}"
        );
        assert_eq!(report.epochs_run, 4, "{what}");
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(
            close(&report.train_loss, &reference.train_loss),
            "{what}: trained from the start: {report:?} vs {reference:?}"
        );
    }
}

/// The set `train-state.json` names.
fn current_set(dir: &std::path::Path) -> std::path::PathBuf {
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("train-state.json")).unwrap()).unwrap();
    dir.join(state["set"].as_str().expect("a committed set"))
}

/// Checkpoints go only where a training's files are: a directory of the user's is refused
/// untouched, and a directory another training holds is busy.
#[test]
fn checkpoints_refuse_a_users_directory_and_a_held_one() {
    let g = graph();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my-notes.txt"), "mine").unwrap();
    let mut p =
        GnnLinkPredictor::new(ModelConfig::default(), config(2)).with_checkpoints(dir.path());
    let e = p.fit(&g, &NoProgress).unwrap_err();
    assert!(
        matches!(e, lprag_core::Error::ForeignDirectory { .. }),
        "{e:?}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing was written"
    );

    let held = tempfile::tempdir().unwrap();
    let _lock = lprag_core::dirs::DirLock::acquire(held.path(), "training").unwrap();
    let mut p =
        GnnLinkPredictor::new(ModelConfig::default(), config(2)).with_checkpoints(held.path());
    let e = p.fit(&g, &NoProgress).unwrap_err();
    assert!(matches!(e, lprag_core::Error::Busy { .. }), "{e:?}");
}

/// After every epoch the directory holds one committed set: the state, its set and the
/// marker; superseded sets are gone.
#[test]
fn each_epoch_is_one_committed_set() {
    let g = graph();
    let dir = tempfile::tempdir().unwrap();
    let mut p =
        GnnLinkPredictor::new(ModelConfig::default(), config(3)).with_checkpoints(dir.path());
    p.fit(&g, &NoProgress).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], "checkpoints.json");
    assert!(names[1].starts_with("set-"), "{names:?}");
    assert_eq!(names[2], "train-state.json");
    let set = current_set(dir.path());
    for f in ["current.bpk", "best.bpk", "optimizer.bpk"] {
        assert!(set.join(f).is_file(), "{f} in {}", set.display());
    }
}
