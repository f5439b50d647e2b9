//! Tests of GFM-RAG: parameter bounds, document ranking, edge checks, message reach,
//! training, resumable training, the host forward and the weights.

use super::*;
use lprag_core::NoProgress;

#[test]
fn min_parameters_bounds_the_network_from_below() {
    use burn::module::Module;
    for (hidden, layers, d_in) in [(8, 2, 64), (16, 1, 8), (4, 3, 12)] {
        let cfg = GfmModelConfig { hidden, layers };
        let device = Device::default();
        // Under the generator's lock: no seeded test's draws are disturbed.
        let net = crate::seeding::seeded(&device, 0, || GfmNet::new(d_in, &cfg, &device));
        let actual = net.num_params() as u128;
        let bound = cfg.min_parameters(d_in);
        assert!(
            bound <= actual && bound * 10 >= actual * 8,
            "{bound} vs {actual}"
        );
    }
}

#[test]
fn documents_rank_by_inverse_document_frequency_of_top_entities() {
    // Entities 0..4 with relevance; T = 3 keeps entities 2 (0.9), 0 (0.8), 3 (0.5).
    let relevance = [0.8, 0.1, 0.9, 0.5];
    // df: e0 in docs {0, 1}; e1 in {2}; e2 in {1}; e3 in {0, 1, 2, 3}.
    let mentions = vec![vec![0, 1], vec![2], vec![1], vec![0, 1, 2, 3]];
    let r = rank_documents(&relevance, &mentions, 3);
    // doc1: 1/2 + 1/1 + 1/4 = 1.75; doc0: 1/2 + 1/4 = 0.75; doc2, doc3: 1/4 each,
    // tie broken by relevance sum (both 0.5), then id.
    assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 0, 2, 3]);
    assert!((r[0].1 - 1.75).abs() < 1e-6 && (r[1].1 - 0.75).abs() < 1e-6);
    // e1 (only in doc 2) is outside the top 3, so it adds nothing.
    assert!((r[2].1 - 0.25).abs() < 1e-6);
    // T = 1: only e2 → doc 1 alone.
    assert_eq!(rank_documents(&relevance, &mentions, 1), vec![(1, 1.0)]);
}

#[test]
fn edges_are_checked() {
    let err = KgEdges::new(2, 1, &[(0, 0, 1), (0, 0, 2)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("edge 1") && err.contains("(0, 0, 2)"), "{err}");
    let err = KgEdges::new(2, 1, &[(0, 1, 1)]).unwrap_err().to_string();
    assert!(err.contains("relation 1"), "{err}");
}

fn toy() -> (KgEdges, Embeddings) {
    // A chain 0 → 1 → 2 → 3 (and inverses, relation 1), entity 4 isolated.
    let e = [
        (0, 0, 1),
        (1, 0, 2),
        (2, 0, 3),
        (1, 1, 0),
        (2, 1, 1),
        (3, 1, 2),
    ];
    let edges = KgEdges::new(5, 2, &e).unwrap();
    let rel = Embeddings::from_rows(3, &[vec![1.0, 0.0, 0.5], vec![0.0, 1.0, 0.5]]).unwrap();
    (edges, rel)
}

#[test]
fn messages_only_reach_entities_within_l_hops() {
    // With zero boundary outside the query entity, an entity's state depends on the
    // query only if a path of ≤ L edges leads to it from a query entity: changing the
    // query changes entity 1's score for L = 1 but not entity 3's (3 hops away).
    let (edges, rel) = toy();
    let cfg = GfmModelConfig {
        hidden: 8,
        layers: 1,
    };
    let m = GfmModel::new(edges, rel, cfg, 7, &Device::default()).unwrap();
    let a = m.score(&[1.0, 0.0, 0.0], &[0]).unwrap();
    let b = m.score(&[0.0, 1.0, 0.3], &[0]).unwrap();
    assert_eq!(a.len(), 5);
    // Entity 3 (three hops away) and the isolated entity 4 get no message: they see
    // the query only through the score MLP's query input, so they score alike.
    assert!((a[3] - a[4]).abs() < 1e-6 && (b[3] - b[4]).abs() < 1e-6);
    // The 1-hop neighbour gets a query-dependent message on top.
    assert!(((a[1] - b[1]) - (a[4] - b[4])).abs() > 1e-6, "{a:?} {b:?}");
    // Query entities out of range and wrong widths are typed errors.
    assert!(m.score(&[1.0, 0.0], &[0]).is_err());
    assert!(m.score(&[1.0, 0.0, 0.0], &[5]).is_err());
}

#[test]
fn training_learns_to_reach_the_target_through_the_graph() {
    // Query entity 0; target 2 (two hops); hiding nothing. After training the target
    // outranks every other non-query entity.
    let (edges, rel) = toy();
    let cfg = GfmModelConfig {
        hidden: 16,
        layers: 2,
    };
    let mut m = GfmModel::new(edges, rel, cfg, 1, &Device::default()).unwrap();
    let ex = GfmExample {
        query: vec![1.0, 0.2, 0.0],
        query_entities: vec![0],
        targets: vec![2],
        hidden_edges: vec![],
    };
    let tc = GfmTrainConfig {
        epochs: 60,
        learning_rate: 1e-2,
        negatives: 3,
        ..GfmTrainConfig::default()
    };
    let report = m
        .train(std::slice::from_ref(&ex), &tc, "train gfm", &NoProgress)
        .unwrap();
    assert!(report.train_loss.last().unwrap() < &report.train_loss[0]);
    let p = m.score(&ex.query, &ex.query_entities).unwrap();
    for other in [1, 3, 4] {
        assert!(p[2] > p[other], "{p:?}");
    }
    // Bad examples are rejected before any tensor is built.
    let bad = GfmExample {
        hidden_edges: vec![99],
        ..ex.clone()
    };
    assert!(m.train(&[bad], &tc, "t", &NoProgress).is_err());
    let none = GfmExample {
        targets: vec![],
        ..ex
    };
    assert!(m.train(&[none], &tc, "t", &NoProgress).is_err());
}

#[test]
fn a_killed_training_resumes_after_its_last_epoch() {
    use crate::training::test_support::DieAfter;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let cfg = GfmModelConfig {
        hidden: 8,
        layers: 2,
    };
    let examples: Vec<GfmExample> = (0..12u32)
        .map(|k| GfmExample {
            query: vec![1.0, 0.1 * k as f32, 0.0],
            query_entities: vec![k % 2],
            targets: vec![k % 2 + 2],
            hidden_edges: vec![],
        })
        .collect();
    let tc = GfmTrainConfig {
        epochs: 6,
        batch_size: 2,
        learning_rate: 1e-2,
        negatives: 2,
        validation_fraction: 0.25,
        patience: 100,
        ..GfmTrainConfig::default()
    };
    let model = |seed| {
        let (edges, rel) = toy();
        GfmModel::new(edges, rel, cfg.clone(), seed, &Device::default()).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let stage = "pretrain gfm";
    let resumable = |m: &mut GfmModel, progress: &dyn Progress| {
        m.train_resumable(&examples, &tc, stage, progress, Some(dir.path()))
    };
    let mut plain = model(5);
    let reference = plain.train(&examples, &tc, stage, &NoProgress).unwrap();
    assert_eq!(reference.epochs_run, 6);

    let crash = catch_unwind(AssertUnwindSafe(|| {
        resumable(&mut model(5), &DieAfter(stage, 3))
    }));
    assert!(crash.is_err(), "the run was killed");

    // Epochs 1–3 from the checkpoint, 4–6 now from the saved weights and AdamW moments
    // with the same per-epoch draws: the uninterrupted run's losses and model.
    let mut resumed = model(5);
    let report = resumable(&mut resumed, &NoProgress).unwrap();
    assert_eq!(report.epochs_run, 6);
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert!(
        close(&report.train_loss, &reference.train_loss),
        "{report:?} vs {reference:?}"
    );
    assert!(close(&report.val_loss, &reference.val_loss));
    let q = [1.0, 0.3, 0.0];
    assert!(close(
        &plain.score(&q, &[0]).unwrap(),
        &resumed.score(&q, &[0]).unwrap()
    ));

    // Finished: returned at once, with the same model.
    let mut again = model(5);
    let report2 = resumable(&mut again, &DieAfter(stage, 1)).unwrap();
    assert_eq!(report2.train_loss, report.train_loss);
    assert!(close(
        &again.score(&q, &[0]).unwrap(),
        &resumed.score(&q, &[0]).unwrap()
    ));

    // Other starting weights (another seed) start afresh.
    let crash = catch_unwind(AssertUnwindSafe(|| {
        resumable(&mut model(6), &DieAfter(stage, 1))
    }));
    assert!(
        crash.is_err(),
        "other starting weights do not reuse the checkpoint"
    );
}

#[test]
fn host_forward_matches_the_burn_module() {
    let (edges, rel) = toy();
    let cfg = GfmModelConfig {
        hidden: 8,
        layers: 3,
    };
    let mut m = GfmModel::new(edges, rel, cfg, 11, &Device::default()).unwrap();
    let check = |m: &GfmModel| {
        for (q, ents) in [
            (vec![0.3, -0.2, 0.9], vec![0u32]),
            (vec![1.0, 0.5, 0.1], vec![1, 4]),
            (vec![0.2, 0.2, 0.2], vec![]),
        ] {
            let a = m.score(&q, &ents).unwrap();
            let b = m.score_on_device(&q, &ents).unwrap();
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
            }
        }
    };
    check(&m);
    // And after training moved the weights (the host copy is refreshed).
    let ex = GfmExample {
        query: vec![1.0, 0.0, 0.0],
        query_entities: vec![0],
        targets: vec![3],
        hidden_edges: vec![2],
    };
    let tc = GfmTrainConfig {
        epochs: 3,
        learning_rate: 1e-2,
        negatives: 2,
        ..GfmTrainConfig::default()
    };
    m.train(&[ex], &tc, "t", &NoProgress).unwrap();
    check(&m);
}

#[test]
fn weights_round_trip() {
    let (edges, rel) = toy();
    let cfg = GfmModelConfig {
        hidden: 8,
        layers: 2,
    };
    let m = GfmModel::new(
        edges.clone(),
        rel.clone(),
        cfg.clone(),
        3,
        &Device::default(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfm.bpk");
    m.save_weights(&path).unwrap();
    let mut other = GfmModel::new(edges, rel, cfg, 4, &Device::default()).unwrap();
    let q = [0.3, 0.1, 0.9];
    assert_ne!(m.score(&q, &[1]).unwrap(), other.score(&q, &[1]).unwrap());
    other.load_weights(&path).unwrap();
    assert_eq!(m.score(&q, &[1]).unwrap(), other.score(&q, &[1]).unwrap());
}
