//! A user-written burn model behind `BurnLinkPredictor`: trained by the library's trainer,
//! scored on each query's neighbourhood exactly as a full-graph pass scores it, saved and
//! restored.

use lprag_core::{Error, LinkPredictor, NoProgress};
use lprag_model::burn::module::Module;
use lprag_model::burn::nn::{Linear, LinearConfig};
use lprag_model::burn::tensor::activation::relu;
use lprag_model::burn::tensor::{Device, Tensor};
use lprag_model::{BurnLinkPredictor, GraphBatch, InferenceMode, LinkModel, Pairs, TrainConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{graph, CHUNKS, DIM};

/// Two GraphSAGE-mean layers and a Hadamard decoder.
#[derive(Module, Debug)]
struct Sage2 {
    self1: Linear,
    nbr1: Linear,
    self2: Linear,
    nbr2: Linear,
    out: Linear,
}

impl LinkModel for Sage2 {
    fn hops(&self) -> usize {
        2
    }
    fn encode(&self, x: Tensor<2>, g: &GraphBatch) -> Tensor<2> {
        let h = relu(self.self1.forward(x.clone()) + self.nbr1.forward(g.mean(x)));
        self.self2.forward(h.clone()) + self.nbr2.forward(g.mean(h))
    }
    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
        let [p, _] = [pairs.len(), 0];
        self.out.forward(pairs.hadamard(h)).reshape([p])
    }
}

fn sage2(d_in: usize, device: &Device) -> Sage2 {
    let l = |a, b| LinearConfig::new(a, b).init(device);
    Sage2 {
        self1: l(d_in, 16),
        nbr1: l(d_in, 16),
        self2: l(16, 16),
        nbr2: l(16, 16),
        out: l(16, 1),
    }
}

/// One GCN layer with a dot decoder (exercises the GCN degrees).
#[derive(Module, Debug)]
struct Gcn1 {
    layer: Linear,
}

impl LinkModel for Gcn1 {
    fn hops(&self) -> usize {
        1
    }
    fn encode(&self, x: Tensor<2>, g: &GraphBatch) -> Tensor<2> {
        self.layer.forward(g.gcn(x))
    }
    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
        pairs.dot(h)
    }
}

fn gcn1(d_in: usize, device: &Device) -> Gcn1 {
    Gcn1 {
        layer: LinearConfig::new(d_in, 16).init(device),
    }
}

fn train(mode: InferenceMode) -> TrainConfig {
    TrainConfig {
        epochs: 4,
        batch_size: 16,
        learning_rate: 0.02,
        inference: mode,
        validation_fraction: 0.2,
        ..TrainConfig::default()
    }
}

fn queries() -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(5);
    (0..3)
        .map(|_| (0..DIM).map(|_| rng.random::<f32>() - 0.4).collect())
        .collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-4, "{what}: max abs difference {worst}");
}

/// The scores are not one constant (an equality of two constant outputs proves nothing).
fn assert_spread(scores: &[f32], what: &str) {
    let (lo, hi) = scores
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi - lo > 1e-4, "{what}: every chunk scores {lo}..{hi}");
}

#[test]
fn neighbourhood_scores_equal_the_full_graph_pass_for_every_mode() {
    let g = graph();
    let all: Vec<usize> = (0..CHUNKS).collect();
    let some = [0usize, 5, 17, 23, 25, 29];
    for mode in [
        InferenceMode::JoinTopK(3),
        InferenceMode::JoinAll,
        InferenceMode::Isolated,
    ] {
        let mut a = BurnLinkPredictor::new("sage2", train(mode), sage2);
        let report = a.fit(&g, &NoProgress).unwrap();
        assert_eq!(report.epochs_run, report.train_loss.len());
        assert!(!report.val_loss.is_empty(), "{report:?}");
        let mut b = BurnLinkPredictor::new("gcn1", train(mode), gcn1);
        b.fit(&g, &NoProgress).unwrap();
        // Every chunk's representation is kept: candidates farther than `hops` from the
        // chunks a query joins are scored from it, the rest re-encoded (isolated chunks
        // 24..30 and most of the chain are far from any three joined chunks here).
        assert!(a.caches_representations() && b.caches_representations());
        for q in queries() {
            for p in [&a as &dyn LinkPredictor, &b] {
                let what = format!("{} {mode:?}", p.name());
                let full = if p.name() == "sage2" {
                    a.score_full_graph(&q, &all).unwrap()
                } else {
                    b.score_full_graph(&q, &all).unwrap()
                };
                assert_close(&p.score(&q, &all).unwrap(), &full, &what);
                let sub: Vec<f32> = some.iter().map(|&c| full[c]).collect();
                assert_close(&p.score(&q, &some).unwrap(), &sub, &what);
            }
        }
    }
}

#[test]
fn training_lowers_the_loss_and_queries_differ() {
    let g = graph();
    let mut p = BurnLinkPredictor::new(
        "sage2",
        TrainConfig {
            epochs: 30,
            validation_fraction: 0.0,
            ..train(InferenceMode::JoinTopK(3))
        },
        sage2,
    );
    let r = p.fit(&g, &NoProgress).unwrap();
    assert_eq!(r.epochs_run, 30);
    assert!(
        r.train_loss[29] < r.train_loss[0],
        "{} → {}",
        r.train_loss[0],
        r.train_loss[29]
    );
    let all: Vec<usize> = (0..CHUNKS).collect();
    let q = queries();
    assert_ne!(p.score(&q[0], &all).unwrap(), p.score(&q[1], &all).unwrap());
}

#[test]
fn save_restore_and_typed_errors() {
    let g = graph();
    let mut p = BurnLinkPredictor::new("gcn1", train(InferenceMode::JoinTopK(3)), gcn1);
    let q = queries().remove(0);
    assert!(matches!(p.score(&q, &[0]), Err(Error::NotReady(_))));
    p.fit(&g, &NoProgress).unwrap();
    let dir = tempfile::tempdir().unwrap();
    p.save(dir.path()).unwrap();
    let r = BurnLinkPredictor::restore(dir.path(), &g, gcn1).unwrap();
    assert_eq!(r.name(), "gcn1");
    assert!(r.caches_representations(), "rebuilt on restore");
    let all: Vec<usize> = (0..CHUNKS).collect();
    assert_eq!(p.score(&q, &all).unwrap(), r.score(&q, &all).unwrap());

    // Attaching a graph of another width keeps nothing half-valid.
    let narrow = lprag_core::LinkGraph {
        features: lprag_core::Embeddings::new(3, vec![1.0; 6]).unwrap(),
        num_chunks: 2,
        edges: Vec::new(),
    };
    let mut r2 = BurnLinkPredictor::restore(dir.path(), &g, gcn1).unwrap();
    assert!(matches!(
        r2.attach(&narrow),
        Err(Error::DimensionMismatch { .. })
    ));
    // …and the predictor still scores on its old graph.
    assert_eq!(r2.score(&q, &all).unwrap(), r.score(&q, &all).unwrap());

    // Weights that do not fit the model, a wrong width, bad queries and candidates.
    let err = BurnLinkPredictor::restore(dir.path(), &g, sage2).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(matches!(
        r.score(&[1.0; 3], &[0]),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(r.score(&q, &[CHUNKS]).is_err());
    let mut nan = q.clone();
    nan[0] = f32::NAN;
    assert!(r.score(&nan, &[0]).is_err());
    std::fs::write(
        dir.path().join("burn-predictor.json"),
        b"{\"format_version\":99}",
    )
    .unwrap();
    let err = BurnLinkPredictor::restore(dir.path(), &g, gcn1).unwrap_err();
    assert!(err.to_string().contains("format version"), "{err}");
}

#[test]
fn peg_scores_the_neighbourhood_like_the_full_graph_and_restores_its_encodings() {
    use lprag_model::peg::{peg_predictor, restore_peg};
    use lprag_model::PegConfig;
    let g = graph();
    let all: Vec<usize> = (0..CHUNKS).collect();
    let config = PegConfig {
        positional_dim: 6,
        hidden: 8,
        ..PegConfig::default()
    };
    for mode in [
        InferenceMode::JoinTopK(3),
        InferenceMode::JoinAll,
        InferenceMode::Isolated,
    ] {
        let mut p = peg_predictor(config, train(mode));
        p.fit(&g, &NoProgress).unwrap();
        assert!(p.caches_representations());
        for q in queries() {
            let full = p.score_full_graph(&q, &all).unwrap();
            assert_close(&p.score(&q, &all).unwrap(), &full, &format!("peg {mode:?}"));
            assert_spread(&full, &format!("peg {mode:?}"));
            let some = [0usize, 5, 17, 23, 25, 29];
            let sub: Vec<f32> = some.iter().map(|&c| full[c]).collect();
            assert_close(
                &p.score(&q, &some).unwrap(),
                &sub,
                &format!("peg {mode:?} some"),
            );
        }
        let dir = tempfile::tempdir().unwrap();
        p.save(dir.path()).unwrap();
        let r = restore_peg(dir.path(), &g, config, lprag_model::Device::flex()).unwrap();
        let q = queries().remove(0);
        assert_eq!(p.score(&q, &all).unwrap(), r.score(&q, &all).unwrap());
    }
}

#[test]
fn seal_scores_the_neighbourhood_like_the_full_graph_and_restores() {
    use lprag_model::seal::{restore_seal, seal_predictor};
    use lprag_model::SealConfig;
    let g = graph();
    let all: Vec<usize> = (0..CHUNKS).collect();
    // A cap small enough to bind under JoinAll (the query then has every chunk as a
    // neighbour), so the sample must also agree between the two paths.
    let config = SealConfig {
        max_nodes_per_hop: Some(6),
        ..SealConfig::default()
    };
    for mode in [
        InferenceMode::JoinTopK(3),
        InferenceMode::JoinAll,
        InferenceMode::Isolated,
    ] {
        let mut p = seal_predictor(config, train(mode));
        p.fit(&g, &NoProgress).unwrap();
        assert!(
            !p.caches_representations(),
            "a pair-level model has no node rows"
        );
        for q in queries() {
            let full = p.score_full_graph(&q, &all).unwrap();
            assert_close(
                &p.score(&q, &all).unwrap(),
                &full,
                &format!("seal {mode:?}"),
            );
            assert_spread(&full, &format!("seal {mode:?}"));
            let some = [0usize, 5, 17, 23, 25, 29];
            let sub: Vec<f32> = some.iter().map(|&c| full[c]).collect();
            assert_close(
                &p.score(&q, &some).unwrap(),
                &sub,
                &format!("seal {mode:?} some"),
            );
        }
        let dir = tempfile::tempdir().unwrap();
        p.save(dir.path()).unwrap();
        let r = restore_seal(dir.path(), &g, config, lprag_model::Device::flex()).unwrap();
        let q = queries().remove(0);
        assert_eq!(p.score(&q, &all).unwrap(), r.score(&q, &all).unwrap());
    }
}
