//! Trainings running at the same time in one process end with the weights their seeds give
//! when each runs alone: parameters are drawn inside one seeded, locked section, and
//! VGAE's noise comes from the training step's own seed, not from burn's process-wide
//! generator.

use std::sync::Barrier;
use std::thread;

use lprag_core::{LinkPredictor, NoProgress};
use lprag_model::vgae::vgae_predictor;
use lprag_model::{GnnLinkPredictor, ModelConfig, TrainConfig, VgaeConfig};

use crate::common::graph;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Ncn,
    Vgae,
}

fn config(seed: u64) -> TrainConfig {
    TrainConfig {
        epochs: 3,
        batch_size: 16,
        validation_fraction: 0.2,
        patience: 100,
        seed,
        ..TrainConfig::default()
    }
}

/// Train one predictor and score every chunk against the first synthetic query.
fn train(kind: Kind, seed: u64) -> Vec<f32> {
    let g = graph();
    let mut p: Box<dyn LinkPredictor> = match kind {
        Kind::Ncn => Box::new(GnnLinkPredictor::new(ModelConfig::default(), config(seed))),
        Kind::Vgae => Box::new(vgae_predictor(VgaeConfig { hidden: 8 }, config(seed))),
    };
    p.fit(&g, &NoProgress).unwrap();
    let q = g.features.row(g.num_chunks).to_vec();
    p.score(&q, &(0..g.num_chunks).collect::<Vec<_>>()).unwrap()
}

#[test]
fn concurrent_trainings_match_each_run_alone() {
    let jobs = [
        (Kind::Ncn, 1),
        (Kind::Ncn, 2),
        (Kind::Vgae, 3),
        (Kind::Vgae, 4),
    ];
    let alone: Vec<Vec<f32>> = jobs.iter().map(|&(k, s)| train(k, s)).collect();
    assert_ne!(alone[0], alone[1], "the seed decides the weights");
    assert_ne!(alone[2], alone[3], "the seed decides the weights");
    for round in 0..3 {
        let start = Barrier::new(jobs.len());
        let together: Vec<Vec<f32>> = thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|&(k, seed)| {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        train(k, seed)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
            assert_eq!(a, b, "round {round}: {:?} seed {}", jobs[i].0, jobs[i].1);
        }
    }
}
