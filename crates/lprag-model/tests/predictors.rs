//! Behaviour of the burn link predictors on toy graphs whose answers are known.

use lprag_core::{EdgeKind, Embeddings, Error, LinkEdge, LinkGraph, LinkPredictor, NoProgress};
use lprag_model::{
    Aggregation, Decoder, GnnLinkPredictor, InferenceMode, ModelConfig, Negatives, PredictorKind,
    TrainConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 16;
const CLUSTERS: usize = 4;
const PER_CLUSTER: usize = 6;

fn noisy(center: &[f32], rng: &mut StdRng, scale: f32) -> Vec<f32> {
    center
        .iter()
        .map(|c| c + scale * (rng.random::<f32>() - 0.5))
        .collect()
}

/// 24 chunks in 4 clusters (chunk–chunk edges inside a cluster), 3 synthetic queries per
/// chunk, each a noisy copy of its chunk and linked to it.
fn toy_graph(seed: u64) -> (LinkGraph, Vec<Vec<f32>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let centers: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|c| {
            (0..DIM)
                .map(|d| if d % CLUSTERS == c { 1.0 } else { 0.0 })
                .collect()
        })
        .collect();
    let mut rows = Vec::new();
    for center in &centers {
        for _ in 0..PER_CLUSTER {
            rows.push(noisy(center, &mut rng, 0.8));
        }
    }
    let nc = rows.len();
    let mut edges = Vec::new();
    for c in 0..CLUSTERS {
        for i in 0..PER_CLUSTER {
            for j in i + 1..PER_CLUSTER {
                if (i + j) % 2 == 1 {
                    edges.push(LinkEdge {
                        a: (c * PER_CLUSTER + i) as u32,
                        b: (c * PER_CLUSTER + j) as u32,
                        weight: 0.8,
                        kind: EdgeKind::Similarity,
                    });
                }
            }
        }
    }
    let chunk_rows = rows.clone();
    for (chunk, row) in chunk_rows.iter().enumerate().take(nc) {
        for _ in 0..3 {
            let q = rows.len() as u32;
            rows.push(noisy(row, &mut rng, 0.3));
            edges.push(LinkEdge {
                a: q,
                b: chunk as u32,
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
    }
    let graph = LinkGraph {
        features: Embeddings::from_rows(DIM, &rows).unwrap(),
        num_chunks: nc,
        edges,
    };
    (graph, chunk_rows)
}

fn fast_train(inference: InferenceMode) -> TrainConfig {
    TrainConfig {
        epochs: 40,
        learning_rate: 0.01,
        batch_size: 32,
        inference,
        patience: 40,
        ..TrainConfig::default()
    }
}

fn small(kind: PredictorKind, aggregation: Aggregation) -> ModelConfig {
    ModelConfig {
        kind,
        aggregation,
        hidden: 32,
        layers: 1,
        residual: false,
    }
}

fn ranking(p: &GnnLinkPredictor, q: &[f32], n: usize) -> Vec<usize> {
    let cands: Vec<usize> = (0..n).collect();
    let s = p.score(q, &cands).unwrap();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| s[b].total_cmp(&s[a]));
    idx
}

/// Fraction of test queries (fresh noisy copies of a chunk) whose chunk's cluster holds the
/// top-ranked chunk.
fn cluster_hit_rate(p: &GnnLinkPredictor, chunks: &[Vec<f32>], seed: u64) -> f32 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hits = 0;
    for (i, c) in chunks.iter().enumerate() {
        let q = noisy(c, &mut rng, 0.3);
        let top = ranking(p, &q, chunks.len())[0];
        if top / PER_CLUSTER == i / PER_CLUSTER {
            hits += 1;
        }
    }
    hits as f32 / chunks.len() as f32
}

#[test]
fn ncn_learns_the_toy_task_in_every_inference_mode() {
    let (graph, chunks) = toy_graph(1);
    for mode in [
        InferenceMode::JoinTopK(3),
        InferenceMode::JoinAll,
        InferenceMode::Isolated,
    ] {
        let mut p = GnnLinkPredictor::new(
            small(PredictorKind::Ncn, Aggregation::Sage),
            fast_train(mode),
        );
        let report = p.fit(&graph, &NoProgress).unwrap();
        assert!(report.epochs_run > 0);
        let first = report.train_loss[0];
        let last = *report.train_loss.last().unwrap();
        assert!(last < first * 0.8, "{mode:?}: loss {first} -> {last}");
        let rate = cluster_hit_rate(&p, &chunks, 7);
        assert!(rate >= 0.75, "{mode:?}: cluster hit rate {rate}");
    }
}

/// The "query washed out" pitfall: with the query joined to every chunk, two different
/// queries must still get clearly different rankings.
#[test]
fn join_all_inference_keeps_queries_apart() {
    let (graph, chunks) = toy_graph(2);
    let mut p = GnnLinkPredictor::new(
        small(PredictorKind::Ncn, Aggregation::Sage),
        fast_train(InferenceMode::JoinAll),
    );
    p.fit(&graph, &NoProgress).unwrap();
    let a = ranking(&p, &chunks[0], chunks.len());
    let b = ranking(&p, &chunks[2 * PER_CLUSTER], chunks.len());
    let top_a: Vec<usize> = a[..PER_CLUSTER].to_vec();
    let top_b: Vec<usize> = b[..PER_CLUSTER].to_vec();
    let overlap = top_a.iter().filter(|x| top_b.contains(x)).count();
    assert!(
        overlap <= 1,
        "top-6 of two far-apart queries overlap in {overlap}: {top_a:?} {top_b:?}"
    );
    assert!(
        a[0] < PER_CLUSTER,
        "query from cluster 0 ranks {} first",
        a[0]
    );
    assert!(
        (2 * PER_CLUSTER..3 * PER_CLUSTER).contains(&b[0]),
        "query from cluster 2 ranks {} first",
        b[0]
    );
}

#[test]
fn gae_and_mlp_train_and_rank() {
    let (graph, chunks) = toy_graph(3);
    for (kind, agg) in [
        (PredictorKind::Gae(Decoder::Hadamard), Aggregation::Gcn),
        (PredictorKind::Gae(Decoder::Dot), Aggregation::Sage),
        (PredictorKind::Mlp, Aggregation::Sage),
    ] {
        let mut train = fast_train(InferenceMode::JoinTopK(3));
        train.mask_targets = false;
        train.negatives = Negatives::Degree(0.75);
        let mut p = GnnLinkPredictor::new(small(kind, agg), train);
        p.fit(&graph, &NoProgress).unwrap();
        let rate = cluster_hit_rate(&p, &chunks, 9);
        assert!(rate >= 0.6, "{kind:?}/{agg:?}: cluster hit rate {rate}");
    }
}

#[test]
fn training_is_reproducible_for_a_seed() {
    let (graph, chunks) = toy_graph(4);
    let cfg = || {
        GnnLinkPredictor::new(
            small(PredictorKind::Ncn, Aggregation::Sage),
            TrainConfig {
                epochs: 5,
                ..fast_train(InferenceMode::JoinTopK(3))
            },
        )
    };
    let (mut a, mut b) = (cfg(), cfg());
    let ra = a.fit(&graph, &NoProgress).unwrap();
    let rb = b.fit(&graph, &NoProgress).unwrap();
    assert_eq!(ra.train_loss, rb.train_loss);
    let cands: Vec<usize> = (0..chunks.len()).collect();
    assert_eq!(
        a.score(&chunks[5], &cands).unwrap(),
        b.score(&chunks[5], &cands).unwrap()
    );
}

#[test]
fn residual_model_starts_at_dense_ranking() {
    let (graph, chunks) = toy_graph(5);
    let mut cfg = small(PredictorKind::Ncn, Aggregation::Sage);
    cfg.residual = true;
    let mut p = GnnLinkPredictor::new(
        cfg,
        TrainConfig {
            epochs: 1,
            learning_rate: 0.0,
            ..fast_train(InferenceMode::JoinTopK(3))
        },
    );
    p.fit(&graph, &NoProgress).unwrap();
    let q = &chunks[3];
    let by_model = ranking(&p, q, chunks.len());
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let cos = |a: &[f32]| a.iter().zip(q).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(q));
    let mut by_cos: Vec<usize> = (0..chunks.len()).collect();
    by_cos.sort_by(|&a, &b| cos(&chunks[b]).total_cmp(&cos(&chunks[a])));
    assert_eq!(by_model, by_cos);
}

/// Rankings by the trained residual model and by plain cosine, for every chunk as query.
fn residual_vs_cosine(penalty: f32) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let (graph, chunks) = toy_graph(5);
    let mut cfg = small(PredictorKind::Ncn, Aggregation::Sage);
    cfg.residual = true;
    let mut p = GnnLinkPredictor::new(
        cfg,
        TrainConfig {
            correction_penalty: penalty,
            ..fast_train(InferenceMode::JoinTopK(3))
        },
    );
    p.fit(&graph, &NoProgress).unwrap();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let (mut model, mut dense) = (Vec::new(), Vec::new());
    for q in &chunks {
        let cos =
            |a: &[f32]| a.iter().zip(q).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(q));
        let mut by_cos: Vec<usize> = (0..chunks.len()).collect();
        by_cos.sort_by(|&a, &b| cos(&chunks[b]).total_cmp(&cos(&chunks[a])));
        model.push(ranking(&p, q, chunks.len())[..5].to_vec());
        dense.push(by_cos[..5].to_vec());
    }
    (model, dense)
}

#[test]
fn correction_penalty_keeps_the_dense_ranking() {
    // Without the penalty, training reorders some top-5 lists; with a heavy one it may not.
    let (free, dense) = residual_vs_cosine(0.0);
    assert_ne!(
        free, dense,
        "training should change some ranking on the toy graph"
    );
    let (held, dense) = residual_vs_cosine(1000.0);
    assert_eq!(held, dense);
}

#[test]
fn negative_correction_penalty_is_rejected() {
    let (graph, _) = toy_graph(5);
    let mut p = GnnLinkPredictor::new(
        ModelConfig::default(),
        TrainConfig {
            correction_penalty: -1.0,
            ..fast_train(InferenceMode::JoinTopK(3))
        },
    );
    let e = p.fit(&graph, &NoProgress).unwrap_err();
    assert!(e.to_string().contains("correction_penalty"), "{e}");
}

#[test]
fn save_load_round_trip_and_errors() {
    let (graph, chunks) = toy_graph(6);
    let mut p = GnnLinkPredictor::new(
        small(PredictorKind::Ncn, Aggregation::Sage),
        TrainConfig {
            epochs: 3,
            ..fast_train(InferenceMode::JoinTopK(3))
        },
    );
    let cands: Vec<usize> = (0..chunks.len()).collect();
    assert!(matches!(
        p.score(&chunks[0], &cands),
        Err(Error::NotReady(_))
    ));
    p.fit(&graph, &NoProgress).unwrap();
    let dir = tempfile::tempdir().unwrap();
    p.save(dir.path()).unwrap();
    let q = p.score(&chunks[1], &cands).unwrap();
    let loaded = GnnLinkPredictor::from_dir(dir.path()).unwrap();
    let r = loaded.score(&chunks[1], &cands).unwrap();
    for (x, y) in q.iter().zip(&r) {
        assert!((x - y).abs() < 1e-5, "{x} vs {y}");
    }

    // Wrong query width, out-of-range candidate, NaN query: typed errors.
    assert!(matches!(
        loaded.score(&[1.0; 3], &cands),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(matches!(
        loaded.score(&chunks[0], &[999]),
        Err(Error::InvalidInput { .. })
    ));
    let mut nan = chunks[0].clone();
    nan[0] = f32::NAN;
    assert!(matches!(
        loaded.score(&nan, &cands),
        Err(Error::InvalidInput { .. })
    ));

    // A format-version mismatch names the file.
    let meta = dir.path().join("burn-predictor.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replace("\"format_version\": 1", "\"format_version\": 99"),
    )
    .unwrap();
    let err = GnnLinkPredictor::from_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("burn-predictor.json") && err.to_string().contains("99"),
        "{err}"
    );

    // Missing weights.
    std::fs::write(&meta, text).unwrap();
    std::fs::remove_file(dir.path().join("weights.bpk")).unwrap();
    assert!(GnnLinkPredictor::from_dir(dir.path()).is_err());
}

#[test]
fn one_chunk_graph_trains_nothing_but_scores() {
    let graph = LinkGraph {
        features: Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.9, 0.1]]).unwrap(),
        num_chunks: 1,
        edges: vec![LinkEdge {
            a: 1,
            b: 0,
            weight: 1.0,
            kind: EdgeKind::QueryChunk,
        }],
    };
    let mut p = GnnLinkPredictor::new(ModelConfig::ncn(), TrainConfig::default());
    let report = p.fit(&graph, &NoProgress).unwrap();
    assert_eq!(report.epochs_run, 0);
    assert_eq!(p.score(&[1.0, 0.0], &[0]).unwrap().len(), 1);
}

#[test]
fn bad_graphs_are_typed_errors() {
    let graph = LinkGraph {
        features: Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap(),
        num_chunks: 2,
        edges: vec![LinkEdge {
            a: 0,
            b: 5,
            weight: 1.0,
            kind: EdgeKind::Similarity,
        }],
    };
    let mut p = GnnLinkPredictor::new(ModelConfig::ncn(), TrainConfig::default());
    let err = p.fit(&graph, &NoProgress).unwrap_err();
    assert!(err.to_string().contains("edges[0]"), "{err}");
}

#[test]
fn max_steps_cuts_training_short_mid_epoch() {
    let (g, _) = toy_graph(9);
    let base = TrainConfig {
        epochs: 6,
        batch_size: 8,
        validation_fraction: 0.2,
        patience: 100,
        max_steps: 0,
        ..TrainConfig::default()
    };
    // No limit: every epoch runs, all of its batches.
    let mut p = GnnLinkPredictor::new(small(PredictorKind::Mlp, Aggregation::Sage), base.clone());
    let full = p.fit(&g, &NoProgress).unwrap();
    assert_eq!(full.epochs_run, 6);
    assert!(!full.stopped_at_max_steps);
    assert_eq!(full.steps % 6, 0, "{full:?}");
    let per_epoch = full.steps / 6;
    assert!(
        per_epoch >= 2,
        "the toy graph needs several batches per epoch"
    );

    // A limit two and a half epochs in: three epochs run, the third cut short, and its
    // validation still counts.
    let limit = 2 * per_epoch + per_epoch / 2;
    let mut p = GnnLinkPredictor::new(
        small(PredictorKind::Mlp, Aggregation::Sage),
        TrainConfig {
            max_steps: limit,
            ..base.clone()
        },
    );
    let cut = p.fit(&g, &NoProgress).unwrap();
    assert_eq!(cut.steps, limit, "{cut:?}");
    assert_eq!(cut.epochs_run, 3, "{cut:?}");
    assert_eq!(cut.val_loss.len(), 3);
    assert!(cut.stopped_at_max_steps && !cut.stopped_early, "{cut:?}");
    assert!((1..=3).contains(&cut.best_epoch));

    // A limit the epochs never reach changes nothing.
    let mut p = GnnLinkPredictor::new(
        small(PredictorKind::Mlp, Aggregation::Sage),
        TrainConfig {
            max_steps: full.steps + 1,
            ..base
        },
    );
    let free = p.fit(&g, &NoProgress).unwrap();
    assert_eq!((free.epochs_run, free.steps), (6, full.steps));
    assert!(!free.stopped_at_max_steps);
}
