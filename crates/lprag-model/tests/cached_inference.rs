//! The cached inference path (`LinkPredictor::score`) gives the same logits as a forward
//! pass over the whole graph (`GnnLinkPredictor::score_full_graph`), for every predictor
//! kind, aggregation, depth and inference mode, on a graph with weighted similarity edges,
//! bridges and isolated chunks.

use lprag_core::{LinkGraph, LinkPredictor, NoProgress};
use lprag_model::{
    Aggregation, Decoder, GnnLinkPredictor, InferenceMode, ModelConfig, PredictorKind, TrainConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{graph, CHUNKS, DIM};

fn models() -> Vec<ModelConfig> {
    let m = |kind, aggregation, layers, residual| ModelConfig {
        kind,
        aggregation,
        hidden: 16,
        layers,
        residual,
    };
    use Aggregation::{Gcn, Sage};
    use PredictorKind::{Gae, Mlp, Ncn};
    vec![
        m(Ncn, Sage, 1, true),
        m(Ncn, Gcn, 1, false),
        m(Ncn, Sage, 2, false),
        m(Ncn, Gcn, 3, true),
        m(Gae(Decoder::Dot), Gcn, 1, false),
        m(Gae(Decoder::Dot), Sage, 2, false),
        m(Gae(Decoder::Hadamard), Sage, 1, true),
        m(Gae(Decoder::Hadamard), Gcn, 2, false),
        m(Mlp, Sage, 2, true),
    ]
}

/// The tests' two-epoch training with `mode`'s inference.
fn two_epochs(mode: InferenceMode) -> TrainConfig {
    TrainConfig {
        epochs: 2,
        batch_size: 16,
        learning_rate: 0.02,
        inference: mode,
        ..TrainConfig::default()
    }
}

/// `model` trained on `g` by [`two_epochs`].
fn fitted(model: &ModelConfig, mode: InferenceMode, g: &LinkGraph) -> GnnLinkPredictor {
    let mut p = GnnLinkPredictor::new(model.clone(), two_epochs(mode));
    p.fit(g, &NoProgress).unwrap();
    p
}

/// `n` random query vectors drawn from `seed`.
fn queries(seed: u64, n: usize) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..DIM).map(|_| rng.random::<f32>() - 0.4).collect())
        .collect()
}

/// The largest absolute difference between `a` and `b` (which must be as long).
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max)
}

/// Every chunk, in an order whose first ones are a query's join.
fn nearest(n: usize) -> Vec<usize> {
    (0..n).map(|i| (i * 7 + 5) % n).collect()
}

#[test]
fn cached_scores_equal_the_full_graph_forward_pass() {
    let g = graph();
    let queries = queries(5, 4);
    let all: Vec<usize> = (0..CHUNKS).collect();
    let mut checked = 0;
    for model in models() {
        for mode in [
            InferenceMode::JoinTopK(3),
            InferenceMode::JoinTopK(CHUNKS + 4),
            InferenceMode::JoinAll,
            InferenceMode::Isolated,
        ] {
            let train = TrainConfig {
                epochs: 3,
                batch_size: 16,
                learning_rate: 0.02,
                correction_penalty: 0.0,
                inference: mode,
                ..TrainConfig::default()
            };
            let mut p = GnnLinkPredictor::new(model.clone(), train);
            p.fit(&g, &NoProgress).unwrap();
            for q in &queries {
                let fast = p.score(q, &all).unwrap();
                let full = p.score_full_graph(q, &all).unwrap();
                let diff = max_diff(&fast, &full);
                assert!(
                    diff <= 1e-4,
                    "{model:?} {mode:?}: max |cached − full| = {diff}\n{fast:?}\n{full:?}"
                );
                // The scores are not all equal (a constant model would pass trivially).
                let spread = full.iter().copied().fold(f32::MIN, f32::max)
                    - full.iter().copied().fold(f32::MAX, f32::min);
                assert!(spread > 1e-3, "{model:?} {mode:?}: flat scores");
                // A subset of candidates, in another order, gets the same logits.
                let some = [29, 3, 17, 0];
                let sub = p.score(q, &some).unwrap();
                for (k, &c) in some.iter().enumerate() {
                    assert!((sub[k] - fast[c]).abs() <= 1e-5);
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, models().len() * 4 * queries.len());
}

#[test]
fn nearest_chunks_from_the_caller_give_the_same_join() {
    let g = graph();
    let train = TrainConfig {
        epochs: 2,
        batch_size: 16,
        inference: InferenceMode::JoinTopK(3),
        ..TrainConfig::default()
    };
    let mut p = GnnLinkPredictor::new(ModelConfig::default(), train);
    p.fit(&g, &NoProgress).unwrap();
    let q: Vec<f32> = (0..DIM).map(|i| (i as f32 * 0.7).sin()).collect();
    // The caller's search, best first by cosine.
    let f = &g.features;
    let cos = |i: usize| {
        let r = f.row(i);
        let n = r.iter().map(|v| v * v).sum::<f32>().sqrt();
        r.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>() / n
    };
    let mut order: Vec<usize> = (0..CHUNKS).collect();
    order.sort_by(|&a, &b| cos(b).total_cmp(&cos(a)));
    let all: Vec<usize> = (0..CHUNKS).collect();
    let plain = p.score(&q, &all).unwrap();
    let near = p.score_near(&q, &order[..5], &all).unwrap();
    assert_eq!(plain, near);
    // Another join changes the scores of the chunks it touches.
    let other = p.score_near(&q, &order[10..15], &all).unwrap();
    assert_ne!(plain, other);
    // Out-of-range ids are errors, not panics.
    assert!(p.score_near(&q, &[CHUNKS], &all).is_err());
}

/// More chunks than one block of the cached encoder (8,192 nodes): the blocked pass over
/// every chunk gives the full-graph logits too.
#[test]
fn cached_scores_equal_the_full_graph_on_a_graph_larger_than_one_block() {
    use lprag_core::{EdgeKind, Embeddings, LinkEdge};
    const N: usize = 8192 * 2 + 77;
    const D: usize = 8;
    let mut rng = StdRng::seed_from_u64(3);
    let mut rows: Vec<Vec<f32>> = (0..N)
        .map(|_| (0..D).map(|_| rng.random::<f32>() - 0.4).collect())
        .collect();
    let mut edges: Vec<LinkEdge> = (0..N as u32 - 1)
        .filter(|i| i % 50 != 0)
        .map(|i| LinkEdge {
            a: i,
            b: i + 1,
            weight: 0.3 + 0.6 * rng.random::<f32>(),
            kind: EdgeKind::Similarity,
        })
        .collect();
    // Links across block boundaries.
    for (a, b) in [(10, 9000), (8191, 8192), (100, N as u32 - 1)] {
        edges.push(LinkEdge {
            a,
            b,
            weight: 1.0,
            kind: EdgeKind::Bridge,
        });
    }
    for c in (0..N as u32).step_by(97) {
        let q = rows.len() as u32;
        rows.push(rows[c as usize].iter().map(|v| v + 0.1).collect());
        edges.push(LinkEdge {
            a: q,
            b: c,
            weight: 1.0,
            kind: EdgeKind::QueryChunk,
        });
    }
    let g = LinkGraph {
        features: Embeddings::from_rows(D, &rows).unwrap(),
        num_chunks: N,
        edges,
    };
    let all: Vec<usize> = (0..N).collect();
    let q: Vec<f32> = (0..D).map(|_| rng.random::<f32>() - 0.4).collect();
    for (kind, aggregation, layers) in [
        (PredictorKind::Ncn, Aggregation::Sage, 2),
        (PredictorKind::Gae(Decoder::Dot), Aggregation::Gcn, 1),
    ] {
        let model = ModelConfig {
            kind,
            aggregation,
            hidden: 8,
            layers,
            residual: false,
        };
        let train = TrainConfig {
            epochs: 1,
            correction_penalty: 0.0,
            ..TrainConfig::default()
        };
        let mut p = GnnLinkPredictor::new(model.clone(), train);
        p.fit(&g, &NoProgress).unwrap();
        let fast = p.score(&q, &all).unwrap();
        let full = p.score_full_graph(&q, &all).unwrap();
        let diff = max_diff(&fast, &full);
        assert!(diff <= 1e-4, "{model:?}: max |cached − full| = {diff}");
    }
}

/// [`GnnRowScorer`] reading a query's rows from a store gives the logits of the predictor
/// that holds every row, for every kind, aggregation and depth, and reads fewer rows than
/// there are chunks where the query's neighbourhood is small.
#[test]
fn rows_read_from_a_store_score_as_the_held_rows() {
    use lprag_core::{Chunk, ChunkBatch, ChunkStore, Embeddings, Provenance};
    use lprag_graph::MemoryStore;
    use lprag_model::GnnRowScorer;

    let g = graph();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let queries = queries(9, 3);
    let all: Vec<usize> = (0..CHUNKS).collect();
    let mut fewer = 0;
    for model in models() {
        for mode in [
            InferenceMode::JoinTopK(3),
            InferenceMode::JoinTopK(CHUNKS + 4),
            InferenceMode::Isolated,
        ] {
            let p = fitted(&model, mode, &g);
            let dir = tempfile::tempdir().unwrap();
            p.save(dir.path()).unwrap();
            let rd = LinkPredictor::stored_representation_dim(&p).unwrap();
            let store = MemoryStore::new(DIM, Some(rd)).unwrap();
            let chunks: Vec<Chunk> = (0..CHUNKS)
                .map(|i| {
                    let prov = Provenance {
                        document_id: format!("d{i}"),
                        title: String::new(),
                        span: 0..1,
                    };
                    Chunk::new(i, format!("chunk {i}"), prov)
                })
                .collect();
            let vectors =
                Embeddings::new(DIM, g.features.leading_rows(CHUNKS).as_slice().to_vec()).unwrap();
            let mut batch = ChunkBatch::new(chunks, vectors);
            batch.representations =
                Some(LinkPredictor::stored_representations(&p, 0..CHUNKS).unwrap());
            rt.block_on(store.append(batch)).unwrap();
            let scorer = GnnRowScorer::from_dir(dir.path(), CHUNKS, &g.edges).unwrap();
            assert_eq!(scorer.representation_dim(), rd);
            // The stored representations are recomputed from the store's vectors.
            let ids = [0, 5, 17, 29];
            let need = scorer.representation_rows_needed(&ids).unwrap();
            let vectors = rt.block_on(store.vectors(&need)).unwrap();
            let again = scorer
                .recompute_representations(&ids, need, vectors)
                .unwrap();
            let stored = rt.block_on(store.representations(&ids)).unwrap().unwrap();
            let diff = max_diff(again.as_slice(), stored.as_slice());
            assert!(
                diff <= 1e-4,
                "{model:?} {mode:?}: recomputed rows differ by {diff}"
            );
            for q in &queries {
                // Any order of every chunk: the first three (or all) are the join.
                let nearest = nearest(CHUNKS);
                let held = p.score_near(q, &nearest, &all).unwrap();
                let rows = rt.block_on(scorer.fetch(&store, &nearest, &all)).unwrap();
                let read = scorer.score(&rows, q, &nearest, &all).unwrap();
                let diff = max_diff(&held, &read);
                assert!(
                    diff <= 1e-4,
                    "{model:?} {mode:?}: max |held − read| = {diff}"
                );
                // A few candidates read only their own rows' share.
                let some = [3, 17];
                let rows = rt.block_on(scorer.fetch(&store, &nearest, &some)).unwrap();
                let sub = scorer.score(&rows, q, &nearest, &some).unwrap();
                for (k, &c) in some.iter().enumerate() {
                    assert!((sub[k] - held[c]).abs() <= 1e-4, "{model:?} {mode:?}");
                }
                let (f, r) = rows.counts();
                if f < CHUNKS && r < CHUNKS {
                    fewer += 1;
                }
                // Rows fetched for two candidates do not score every chunk (each candidate's
                // features are read).
                if f < CHUNKS {
                    assert!(scorer.score(&rows, q, &nearest, &all).is_err());
                }
            }
        }
    }
    assert!(fewer > 0, "every query read every chunk's rows");
    // A predictor that joins every chunk is refused, naming why.
    let train = TrainConfig {
        epochs: 1,
        inference: InferenceMode::JoinAll,
        ..TrainConfig::default()
    };
    let mut p = GnnLinkPredictor::new(ModelConfig::default(), train);
    p.fit(&g, &NoProgress).unwrap();
    let dir = tempfile::tempdir().unwrap();
    p.save(dir.path()).unwrap();
    let err = GnnRowScorer::from_dir(dir.path(), CHUNKS, &g.edges).unwrap_err();
    assert!(err.to_string().contains("JoinAll"), "{err}");
}

/// A predictor restored with its cached representations given (saved and read back, on
/// the heap or memory-mapped) scores as the predictor that computed them, for every kind,
/// aggregation and depth (deeper models' layers lie side by side in a row), and refuses
/// rows of another shape.
#[test]
fn representations_given_back_score_as_the_computed_ones() {
    use lprag_core::{Embeddings, Error};
    use lprag_model::burn::tensor::Device;

    let g = graph();
    let queries = queries(13, 3);
    let all: Vec<usize> = (0..CHUNKS).collect();
    for model in models() {
        for mode in [
            InferenceMode::JoinTopK(3),
            InferenceMode::JoinAll,
            InferenceMode::Isolated,
        ] {
            let p = fitted(&model, mode, &g);
            assert!(!p.representations_mapped());
            let dir = tempfile::tempdir().unwrap();
            p.save(dir.path()).unwrap();
            let rd = LinkPredictor::stored_representation_dim(&p).unwrap();
            let rows = LinkPredictor::stored_representations(&p, 0..CHUNKS).unwrap();
            let file = dir.path().join("reps.bin");
            lprag_graph::save_feature_rows(rd, rows.as_slice(), &file).unwrap();
            let mapped = lprag_graph::map_feature_rows(&file, rd).unwrap();
            assert!(mapped.is_stored());
            for (given, is_mapped) in [(mapped, true), (rows.clone(), false)] {
                let q = GnnLinkPredictor::from_dir_on_graph_with_representations(
                    dir.path(),
                    &g,
                    given,
                    Device::flex(),
                )
                .unwrap();
                assert_eq!(q.representations_mapped(), is_mapped, "{model:?} {mode:?}");
                let again = LinkPredictor::stored_representations(&q, 0..CHUNKS).unwrap();
                assert_eq!(again.as_slice(), rows.as_slice(), "{model:?} {mode:?}");
                for query in &queries {
                    let nearest = nearest(CHUNKS);
                    let want = p.score_near(query, &nearest, &all).unwrap();
                    let got = q.score_near(query, &nearest, &all).unwrap();
                    let diff = max_diff(&want, &got);
                    assert!(diff <= 1e-5, "{model:?} {mode:?}: max |diff| = {diff}");
                }
            }
            // Rows of another width, or not one per chunk, are refused.
            let narrow = Embeddings::new(1, vec![0.0; CHUNKS]).unwrap();
            let short = Embeddings::new(rd, rows.as_slice()[rd..].to_vec()).unwrap();
            for bad in [narrow, short] {
                let err = GnnLinkPredictor::from_dir_on_graph_with_representations(
                    dir.path(),
                    &g,
                    bad,
                    Device::flex(),
                )
                .unwrap_err();
                assert!(
                    matches!(err, Error::DimensionMismatch { .. }),
                    "{model:?} {mode:?}: {err}"
                );
            }
            // The weights' checksum changes with the weights.
            let before = GnnLinkPredictor::weights_checksum(dir.path()).unwrap();
            let mut other = GnnLinkPredictor::new(
                model.clone(),
                TrainConfig {
                    epochs: 1,
                    seed: 99,
                    ..TrainConfig::default()
                },
            );
            other.fit(&g, &NoProgress).unwrap();
            let dir2 = tempfile::tempdir().unwrap();
            other.save(dir2.path()).unwrap();
            assert_ne!(
                before,
                GnnLinkPredictor::weights_checksum(dir2.path()).unwrap()
            );
        }
    }
}

/// A predictor keeping its cached representations in a file (streamed there for one
/// layer and the MLP, written after computing for deeper models) maps them and scores as
/// the predictor holding them, after training and after `attach`, which rewrites the file.
#[test]
fn representations_kept_in_a_file_score_as_the_held_ones() {
    let g = graph();
    let query = queries(21, 1).remove(0);
    let all: Vec<usize> = (0..CHUNKS).collect();
    let order = nearest(CHUNKS);
    let close = |a: &[f32], b: &[f32], what: &str| {
        let diff = max_diff(a, b);
        assert!(diff <= 1e-5, "{what}: max |diff| = {diff}");
    };
    for model in models() {
        for mode in [InferenceMode::JoinTopK(3), InferenceMode::JoinAll] {
            let train = two_epochs(mode);
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("reps.bin");
            let mut held = GnnLinkPredictor::new(model.clone(), train.clone());
            let mut kept =
                GnnLinkPredictor::new(model.clone(), train).with_representations_file(&file);
            held.fit(&g, &NoProgress).unwrap();
            kept.fit(&g, &NoProgress).unwrap();
            let what = format!("{model:?} {mode:?}");
            assert!(kept.representations_mapped() && !held.representations_mapped());
            assert!(file.is_file(), "{what}");
            let rows = |p: &GnnLinkPredictor| {
                LinkPredictor::stored_representations(p, 0..CHUNKS)
                    .unwrap()
                    .as_slice()
                    .to_vec()
            };
            close(&rows(&kept), &rows(&held), &what);
            close(
                &kept.score_near(&query, &order, &all).unwrap(),
                &held.score_near(&query, &order, &all).unwrap(),
                &what,
            );
            // Attached to a graph with one chunk fewer: computed again into the file.
            let mut smaller = g.clone();
            smaller.features = g.features.select(&(1..g.num_nodes()).collect::<Vec<_>>());
            smaller.num_chunks -= 1;
            smaller.edges = g
                .edges
                .iter()
                .filter(|e| e.a > 0 && e.b > 0)
                .map(|e| lprag_core::LinkEdge {
                    a: e.a - 1,
                    b: e.b - 1,
                    ..*e
                })
                .collect();
            held.attach(&smaller).unwrap();
            kept.attach(&smaller).unwrap();
            assert!(kept.representations_mapped());
            let n = CHUNKS - 1;
            let rows_n = |p: &GnnLinkPredictor| {
                LinkPredictor::stored_representations(p, 0..n)
                    .unwrap()
                    .as_slice()
                    .to_vec()
            };
            close(&rows_n(&kept), &rows_n(&held), &what);
            let some: Vec<usize> = (0..n).collect();
            let near = nearest(n);
            close(
                &kept.score_near(&query, &near, &some).unwrap(),
                &held.score_near(&query, &near, &some).unwrap(),
                &what,
            );
        }
    }
}
