//! Tests of LeSeGR: propagation, the lite and host gates, the step limit, resumable
//! training and learning from the graph.

use super::*;

#[test]
fn propagation_by_hand() {
    // 0 → 1 ← 2, one layer. h0 = (0.5, 0.2, 0.8), δ = (2, 1, 1.5), α(0→1) = 0.5,
    // α(2→1) = 1.
    let g = InEdges::from_edges(3, &[(0, 1), (2, 1)]).unwrap();
    let h0 = [0.5, 0.2, 0.8];
    let delta = [2.0, 1.0, 1.5];
    let alpha = [0.5, 1.0];
    let all = [0, 1, 2];
    let h = propagate(&h0, &delta, &g, &alpha, 1, &all);
    // node 1: (1·0.2 + 2·0.5·0.5 + 1.5·1·0.8) / 3 = (0.2 + 0.5 + 1.2) / 3
    assert!((h[1] - 1.9 / 3.0).abs() < 1e-6);
    // nodes without in-edges: the self loop alone, α_ii = 1 → δ_i·h_i / 1
    assert!((h[0] - 1.0).abs() < 1e-6);
    assert!((h[2] - 1.2).abs() < 1e-6);
    // δ = 0 on a neighbour gates its message off entirely; α = 0 too.
    let h = propagate(&h0, &[2.0, 1.0, 0.0], &g, &alpha, 1, &all);
    assert!((h[1] - 0.7 / 3.0).abs() < 1e-6);
    let h = propagate(&h0, &delta, &g, &[0.0, 0.0], 1, &all);
    assert!((h[1] - 0.2 / 3.0).abs() < 1e-6);
    // Two layers: node 1 sees node 0 and 2 after their own first layer.
    let h2 = propagate(&h0, &delta, &g, &alpha, 2, &all);
    let expect = (1.0 * (1.9 / 3.0) + 2.0 * 0.5 * 1.0 + 1.5 * 1.0 * 1.2) / 3.0;
    assert!((h2[1] - expect).abs() < 1e-6);
}

#[test]
fn restricted_propagation_is_exact_on_the_ball_centre() {
    // A chain 0 → 1 → 2 → 3 → 4 plus 4 → 0; two layers; score node 3.
    let g = InEdges::from_edges(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]).unwrap();
    let h0 = [0.3, -0.2, 0.9, 0.4, 0.1];
    let delta = [1.0, 1.5, 1.2, 1.0, 2.0];
    let alpha = [0.7, 0.4, 0.9, 0.2, 0.5];
    let all: Vec<u32> = (0..5).collect();
    let full = propagate(&h0, &delta, &g, &alpha, 2, &all);
    let ball = g.in_ball(&[3], 2);
    assert_eq!(ball, vec![1, 2, 3]);
    // Outside the ball h = 0.
    let mut masked = h0;
    masked[0] = 0.0;
    masked[4] = 0.0;
    let part = propagate(&masked, &delta, &g, &alpha, 2, &ball);
    assert!((part[3] - full[3]).abs() < 1e-7);
}

#[test]
fn lite_alpha_is_clamped_cosine() {
    let emb = Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.6, 0.8], vec![-1.0, 0.0]]).unwrap();
    let g = InEdges::from_edges(3, &[(0, 1), (2, 1), (0, 2)]).unwrap();
    // Edge order by destination: (0→1), (2→1), (0→2).
    let a = lite_alpha(&emb, &g);
    assert!((a[0] - 0.6).abs() < 1e-6);
    assert_eq!(a[1], 0.0);
    assert_eq!(a[2], 0.0);
}

#[test]
fn transform_query_is_a_row_major_product() {
    let w = LesegrWeights {
        alpha: vec![],
        transform: vec![1.0, 2.0, 3.0, 4.0],
        dim: 2,
        gate: LesegrGate {
            dim: 2,
            layers: vec![],
        },
    };
    assert_eq!(w.transform_query(&[1.0, 1.0]), vec![3.0, 7.0]);
}

/// `n` unit vectors in 2-d, `step` radians apart: the rows and their matrix.
fn circle(n: usize, step: f32) -> (Vec<Vec<f32>>, Embeddings) {
    let rows: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            let a = i as f32 * step;
            vec![a.cos(), a.sin()]
        })
        .collect();
    let x = Embeddings::from_rows(2, &rows).unwrap();
    (rows, x)
}

#[test]
fn the_host_gate_equals_the_mlp_on_each_difference_across_blocks() {
    // More rows and edges than one block of 4,096, so every block boundary is crossed.
    let (_, x) = circle(5000, 0.37);
    let gate = LesegrGate {
        dim: 2,
        layers: vec![
            GateLayer {
                weight: vec![0.5, -1.0, 0.3, 0.8, 0.2, -0.6],
                bias: vec![0.1, -0.2, 0.05],
                d_out: 3,
            },
            GateLayer {
                weight: vec![1.5, -0.7, 0.9],
                bias: vec![-0.3],
                d_out: 1,
            },
        ],
    };
    let edges: Vec<(u32, u32)> = (0..9000u32)
        .map(|e| (e % 5000, (e * 7 + 3) % 5000))
        .collect();
    let got = gate.alpha(&x, &edges).unwrap();
    let layers: Vec<Dense> = gate.layers.iter().map(GateLayer::dense).collect();
    assert_eq!(got.len(), edges.len());
    for (k, &(s, t)) in edges.iter().enumerate() {
        let diff: Vec<f32> = x
            .row(t as usize)
            .iter()
            .zip(x.row(s as usize))
            .map(|(a, b)| a - b)
            .collect();
        let z = mlp(&layers, &diff, 2)[0];
        let want = 1.0 / (1.0 + (-z).exp());
        assert!(
            (got[k] - want).abs() < 1e-6,
            "edge {k}: {} vs {want}",
            got[k]
        );
    }
}

#[test]
fn the_step_limit_cuts_the_epoch_that_reaches_it() {
    let (rows, x) = circle(6, 0.9);
    let g = InEdges::from_edges(6, &[(0, 3), (1, 4), (2, 5)]).unwrap();
    // 20 examples in batches of 4: 5 steps per epoch without validation.
    let examples: Vec<LesegrExample> = (0..20u32)
        .map(|i| LesegrExample {
            query: rows[(i % 3) as usize].clone(),
            delta_excess: vec![],
            positives: vec![i % 3 + 3],
        })
        .collect();
    let run = |max_steps, validation_fraction| {
        let cfg = LesegrTrainConfig {
            epochs: 4,
            max_steps,
            batch_size: 4,
            validation_fraction,
            ..LesegrTrainConfig::default()
        };
        let device = Device::flex();
        train_lesegr(&x, &g, &examples, &cfg, &device, &lprag_core::NoProgress)
            .unwrap()
            .1
    };
    let r = run(7, 0.0);
    assert_eq!((r.steps, r.epochs_run), (7, 2));
    assert!(r.stopped_at_max_steps);
    assert_eq!(r.train_loss.len(), 2);
    // A limit at an epoch's end stops there; the cut epoch is still validated.
    let r = run(10, 0.0);
    assert_eq!((r.steps, r.epochs_run), (10, 2));
    let r = run(3, 0.1);
    assert_eq!((r.steps, r.epochs_run, r.val_loss.len()), (3, 1, 1));
    // No limit: every epoch runs in full.
    let r = run(0, 0.0);
    assert_eq!((r.steps, r.epochs_run), (20, 4));
    assert!(!r.stopped_at_max_steps);
    // Progress: one update per epoch, one tick per step.
    let counts = crate::training::test_support::Counts::default();
    let cfg = LesegrTrainConfig {
        epochs: 3,
        max_steps: 7,
        batch_size: 4,
        validation_fraction: 0.0,
        ..LesegrTrainConfig::default()
    };
    train_lesegr(&x, &g, &examples, &cfg, &Device::flex(), &counts).unwrap();
    assert_eq!(counts.get(), (2, 7));
}

#[test]
fn a_killed_training_resumes_after_its_last_epoch() {
    use crate::training::test_support::DieAfter;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let (x, _, g, examples) = neighbour_task();
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let train = |epochs, progress: &dyn Progress, checkpoints| {
        let cfg = LesegrTrainConfig {
            epochs,
            batch_size: 4,
            learning_rate: 1e-2,
            validation_fraction: 0.2,
            patience: 100,
            ..LesegrTrainConfig::default()
        };
        train_lesegr_resumable(&x, &g, &examples, &cfg, &device, progress, checkpoints)
    };
    let (reference_w, reference) = train(6, &lprag_core::NoProgress, None).unwrap();
    assert_eq!(reference.epochs_run, 6);

    let crash = catch_unwind(AssertUnwindSafe(|| {
        train(6, &DieAfter("train lesegr", 3), Some(dir.path()))
    }));
    assert!(crash.is_err(), "the run was killed");
    assert!(dir.path().join("train-state.json").is_file());

    // Epochs 1–3 come from the checkpoint; 4–6 are trained now from the saved weights
    // and AdamW moments with the same per-epoch shuffles: the uninterrupted run's.
    let (w, report) = train(6, &lprag_core::NoProgress, Some(dir.path())).unwrap();
    assert_eq!((report.epochs_run, report.train_loss.len()), (6, 6));
    assert_eq!(report.steps, reference.steps);
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert!(
        close(&report.train_loss, &reference.train_loss),
        "{report:?} vs {reference:?}"
    );
    assert!(close(&report.val_loss, &reference.val_loss));
    assert!(close(&w.alpha, &reference_w.alpha) && close(&w.transform, &reference_w.transform));

    // Finished: the same call returns the saved result without training an epoch.
    let (again, report2) = train(6, &DieAfter("train lesegr", 1), Some(dir.path())).unwrap();
    assert_eq!(report2.train_loss, report.train_loss);
    assert_eq!(report2.best_epoch, report.best_epoch);
    assert!(close(&again.alpha, &w.alpha) && close(&again.transform, &w.transform));

    // Another configuration starts afresh (its first epoch is reported, and dies).
    let crash = catch_unwind(AssertUnwindSafe(|| {
        train(7, &DieAfter("train lesegr", 1), Some(dir.path()))
    }));
    assert!(
        crash.is_err(),
        "a different run does not reuse the checkpoint"
    );
}

/// Eight chunks on a circle, edges i → i + 4, and five copies of each query c_i whose
/// gold chunk is its neighbour c_{i+4}: `(x, edges, graph, examples)`.
fn neighbour_task() -> (Embeddings, Vec<(u32, u32)>, InEdges, Vec<LesegrExample>) {
    let (rows, x) = circle(8, 0.7);
    let edges: Vec<(u32, u32)> = (0..4).map(|i| (i, i + 4)).collect();
    let g = InEdges::from_edges(8, &edges).unwrap();
    let examples = (0..4u32)
        .flat_map(|i| {
            let q = rows[i as usize].clone();
            (0..5).map(move |_| LesegrExample {
                query: q.clone(),
                delta_excess: vec![(i, 1.0)],
                positives: vec![i + 4],
            })
        })
        .collect();
    (x, edges, g, examples)
}

#[test]
fn training_learns_to_use_the_graph() {
    // Eight chunks in 2-d; gold chunk g of a query is the *neighbour* of the chunk the
    // query looks like: edges i → i+4, queries equal to c_i, gold c_{i+4}, whose own
    // embedding is orthogonal-ish. Dense alone ranks the wrong chunk; the learned
    // transform and gates must move mass along the edges.
    let (x, edges, g, examples) = neighbour_task();
    let cfg = LesegrTrainConfig {
        epochs: 15,
        batch_size: 4,
        learning_rate: 1e-2,
        validation_fraction: 0.0,
        ..LesegrTrainConfig::default()
    };
    let (w, report) = train_lesegr(
        &x,
        &g,
        &examples,
        &cfg,
        &Device::flex(),
        &lprag_core::NoProgress,
    )
    .unwrap();
    assert_eq!(report.epochs_run, 15);
    let first = report.train_loss[0];
    let last = *report.train_loss.last().unwrap();
    assert!(last < first, "loss {first} -> {last}");
    assert_eq!(w.alpha.len(), 4);
    assert!(w.alpha.iter().all(|a| (0.0..=1.0).contains(a)));
    assert_eq!(w.transform.len(), 4);

    // The exported gate network reproduces the exported gates on the host, and gates
    // an edge the training graph did not have.
    let host = w.gate.alpha(&x, &edges).unwrap();
    for (a, b) in host.iter().zip(&w.alpha) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    // … and equals σ(MLP(c_t − c_s)) evaluated on each difference directly.
    let layers: Vec<Dense> = w.gate.layers.iter().map(GateLayer::dense).collect();
    let diffs: Vec<f32> = edges
        .iter()
        .flat_map(|&(s, t)| {
            let (s, t) = (x.row(s as usize), x.row(t as usize));
            t.iter().zip(s).map(|(a, b)| a - b).collect::<Vec<_>>()
        })
        .collect();
    for (z, a) in mlp(&layers, &diffs, 2).iter().zip(&host) {
        assert!((1.0 / (1.0 + (-z).exp()) - a).abs() < 1e-6);
    }
    let new_edge = w.gate.alpha(&x, &[(5, 1)]).unwrap();
    assert!(new_edge[0] > 0.0 && new_edge[0] < 1.0);
    let err = w.gate.alpha(&x, &[(0, 8)]).unwrap_err().to_string();
    assert!(err.contains("0 -> 8"), "{err}");
    let mut broken = w.gate.clone();
    broken.layers[0].bias.pop();
    assert!(broken
        .alpha(&x, &edges)
        .unwrap_err()
        .to_string()
        .contains("layer 0"));

    // Bad input is refused with the example named.
    let bad = vec![LesegrExample {
        query: vec![1.0, 0.0],
        delta_excess: vec![],
        positives: vec![9],
    }];
    let err = train_lesegr(&x, &g, &bad, &cfg, &Device::flex(), &lprag_core::NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("example 0") && err.contains("chunk 9"),
        "{err}"
    );
}
