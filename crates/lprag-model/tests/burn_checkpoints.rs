//! `BurnLinkPredictor::with_checkpoints`: a run killed after an epoch resumes there, a
//! finished run is not repeated, another configuration starts afresh.

use std::panic::{catch_unwind, AssertUnwindSafe};

use lprag_core::{LinkPredictor, NoProgress};
use lprag_model::burn::module::Module;
use lprag_model::burn::nn::{Linear, LinearConfig};
use lprag_model::burn::tensor::{Device, Tensor};
use lprag_model::{BurnLinkPredictor, GraphBatch, LinkModel, Pairs, TrainConfig};

use crate::common::{graph, DieAfter};

#[derive(Module, Debug)]
struct Sage1 {
    this: Linear,
    nbr: Linear,
}

impl LinkModel for Sage1 {
    fn hops(&self) -> usize {
        1
    }
    fn encode(&self, x: Tensor<2>, g: &GraphBatch) -> Tensor<2> {
        self.this.forward(x.clone()) + self.nbr.forward(g.mean(x))
    }
    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
        pairs.dot(h)
    }
}

fn sage1(d: usize, device: &Device) -> Sage1 {
    Sage1 {
        this: LinearConfig::new(d, 8).init(device),
        nbr: LinearConfig::new(d, 8).init(device),
    }
}

fn config(epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        batch_size: 16,
        learning_rate: 0.01,
        validation_fraction: 0.2,
        patience: 100,
        ..TrainConfig::default()
    }
}

#[test]
fn a_killed_burn_run_resumes_after_its_last_epoch() {
    let g = graph();
    let dir = tempfile::tempdir().unwrap();
    let make = |epochs| BurnLinkPredictor::new("sage1", config(epochs), sage1);

    let reference = make(6).fit(&g, &NoProgress).unwrap();
    assert_eq!(reference.epochs_run, 6);

    let mut killed = make(6).with_checkpoints(dir.path());
    let crash = catch_unwind(AssertUnwindSafe(|| killed.fit(&g, &DieAfter(3))));
    assert!(crash.is_err(), "the run was killed");
    assert!(dir.path().join("train-state.json").is_file());

    let mut resumed = make(6).with_checkpoints(dir.path());
    let report = resumed.fit(&g, &NoProgress).unwrap();
    assert_eq!(report.epochs_run, 6);
    // Epochs 1–3 from the checkpoint, 4–6 trained from its weights and Adam moments with
    // the same per-epoch draws: every epoch is the uninterrupted run's.
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert!(
        close(&report.train_loss, &reference.train_loss),
        "{report:?} vs {reference:?}"
    );
    assert!(
        close(&report.val_loss, &reference.val_loss),
        "{report:?} vs {reference:?}"
    );

    // Finished: returned at once (the first epoch would be reported, and die).
    let mut again = make(6).with_checkpoints(dir.path());
    let report2 = again.fit(&g, &DieAfter(1)).unwrap();
    assert_eq!(report2.train_loss, report.train_loss);
    let q = g.features.row(g.num_chunks).to_vec();
    let all: Vec<usize> = (0..g.num_chunks).collect();
    let (a, b) = (
        resumed.score(&q, &all).unwrap(),
        again.score(&q, &all).unwrap(),
    );
    assert!(
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-6),
        "{a:?} vs {b:?}"
    );

    // Another configuration starts afresh.
    let mut other = make(7).with_checkpoints(dir.path());
    let crash = catch_unwind(AssertUnwindSafe(|| other.fit(&g, &DieAfter(1))));
    assert!(
        crash.is_err(),
        "a different run does not reuse the checkpoint"
    );
}
