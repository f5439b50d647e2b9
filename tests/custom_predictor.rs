//! Custom ranking models written outside the crate, through public API only: a
//! training-free `LinkScorer` and a trainable `LinkPredictor`, each built into an `LpRag`,
//! saved and reopened.

use std::path::Path;
use std::sync::Arc;

use lprag::extend::ScoreContext;
use lprag::{
    ChunkId, Embeddings, Error, HashingEncoder, LinkGraph, LinkPredictor, LinkScorer, LpRag,
    NoProgress, Progress, Retriever, Selection, TrainReport,
};

use crate::common;
use common::corpus;

fn encoder() -> Arc<HashingEncoder> {
    Arc::new(HashingEncoder::default())
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        dot / n
    } else {
        0.0
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Cosine plus a bonus per chunk-graph neighbour: reads the graph through the context.
struct DegreeBonus;

impl LinkScorer for DegreeBonus {
    fn name(&self) -> &str {
        "degree-bonus"
    }

    fn score(
        &self,
        ctx: &ScoreContext<'_>,
        query: &[f32],
        candidates: &[ChunkId],
    ) -> lprag::Result<Vec<f32>> {
        Ok(candidates
            .iter()
            .map(|&c| {
                let x = ctx.chunk_features(c).expect("a chunk id");
                4.0 * cosine(query, x) + 0.25 * ctx.neighbours[c].len() as f32 - 1.0
            })
            .collect())
    }
}

/// The logits `DegreeBonus` should give, computed from the index's graph directly.
fn expected_degree_bonus(graph: &LinkGraph, query: &[f32]) -> Vec<f32> {
    let nc = graph.num_chunks;
    let mut degree = vec![0usize; nc];
    for e in &graph.edges {
        let (a, b) = (e.a as usize, e.b as usize);
        if a < nc && b < nc && a != b {
            degree[a] += 1;
            degree[b] += 1;
        }
    }
    (0..nc)
        .map(|c| 4.0 * cosine(query, graph.features.row(c)) + 0.25 * degree[c] as f32 - 1.0)
        .collect()
}

#[tokio::test]
async fn a_training_free_scorer_ranks_saves_and_reopens() {
    let docs = corpus();
    let rag = LpRag::builder()
        .encoder(encoder())
        .scorer(DegreeBonus)
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.predictor().name(), "degree-bonus");
    assert_eq!(rag.stats().train.epochs_run, 0, "nothing is trained");
    assert!(
        rag.stats().queries > 0,
        "synthetic queries are still written"
    );

    let question = "Which river flows through Warsaw?";
    let hits = rag.retrieve(question, Selection::TopK(100)).await.unwrap();
    assert_eq!(hits.len(), docs.len(), "every chunk is a candidate here");
    let q = rag.encoder().embed_one(question).await.unwrap();
    let expected = expected_degree_bonus(rag.graph(), &q);
    for hit in &hits {
        let want = sigmoid(expected[hit.chunk.id]);
        assert!((hit.score - want).abs() < 1e-5, "{} vs {want}", hit.score);
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    // The built-in loaders refuse it and name the right one.
    let msg = LpRag::open(&path).unwrap_err().to_string();
    assert!(msg.contains("load_with_scorer"), "{msg}");
    let msg = LpRag::load(&path, encoder()).unwrap_err().to_string();
    assert!(msg.contains("load_with_scorer"), "{msg}");
    // Opening to answer only serves the built-in GNN.
    let only = lprag::AnswerOptions {
        encoder: Some(encoder()),
        ..Default::default()
    };
    let msg = LpRag::open_to_answer(&path, only)
        .await
        .unwrap_err()
        .to_string();
    assert!(msg.contains("load_with_scorer"), "{msg}");
    struct Other;
    impl LinkScorer for Other {
        fn name(&self) -> &str {
            "other"
        }
        fn score(&self, _: &ScoreContext<'_>, _: &[f32], c: &[ChunkId]) -> lprag::Result<Vec<f32>> {
            Ok(vec![0.0; c.len()])
        }
    }
    let err = LpRag::load_with_scorer(&path, encoder(), Other).unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert!(err.to_string().contains("degree-bonus"), "{err}");

    let reopened = LpRag::load_with_scorer(&path, encoder(), DegreeBonus).unwrap();
    let again = reopened
        .retrieve(question, Selection::TopK(100))
        .await
        .unwrap();
    let ids =
        |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
    assert_eq!(ids(&hits), ids(&again));
}

#[tokio::test]
async fn a_scorer_that_returns_the_wrong_number_of_logits_is_an_error() {
    struct Short;
    impl LinkScorer for Short {
        fn name(&self) -> &str {
            "short"
        }
        fn score(&self, _: &ScoreContext<'_>, _: &[f32], _: &[ChunkId]) -> lprag::Result<Vec<f32>> {
            Ok(vec![1.0])
        }
    }
    let rag = LpRag::builder()
        .encoder(encoder())
        .scorer(Short)
        .labelled_only(Vec::new())
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(rag.stats().queries, 0, "no synthetic queries were written");
    let err = rag
        .retrieve("Warsaw", Selection::TopK(2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DimensionMismatch { .. }), "{err}");
    assert!(err.to_string().contains("short"), "{err}");
}

/// A trainable predictor written outside the crate: `logit = a·cos(q, c) + b`, with `a` and
/// `b` fitted by logistic regression on the graph's query–chunk edges against uniformly
/// drawn negative chunks.
struct LearnedCosine {
    a: f32,
    b: f32,
    steps: usize,
    chunks: Option<Embeddings>,
}

impl LearnedCosine {
    fn new(steps: usize) -> Self {
        Self {
            a: 0.0,
            b: 0.0,
            steps,
            chunks: None,
        }
    }

    /// The constructor `LpRag::load_with` calls.
    fn restore(dir: &Path, graph: &LinkGraph) -> lprag::Result<Box<dyn LinkPredictor>> {
        let path = dir.join("params.json");
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let (a, b): (f32, f32) =
            serde_json::from_slice(&bytes).map_err(|e| Error::format(&path, e.to_string()))?;
        let mut p = LearnedCosine {
            a,
            b,
            steps: 0,
            chunks: None,
        };
        p.attach(graph)?;
        Ok(Box::new(p))
    }
}

impl LinkPredictor for LearnedCosine {
    fn name(&self) -> &str {
        "learned-cosine"
    }

    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> lprag::Result<TrainReport> {
        self.attach(graph)?;
        let nc = graph.num_chunks;
        // (cosine, label) pairs: every query–chunk edge, and one negative chunk per edge.
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let mut pairs = Vec::new();
        for e in &graph.edges {
            let (q, c) = match (e.a as usize, e.b as usize) {
                (a, b) if a >= nc && b < nc => (a, b),
                (a, b) if b >= nc && a < nc => (b, a),
                _ => continue,
            };
            let qx = graph.features.row(q);
            pairs.push((cosine(qx, graph.features.row(c)), 1.0f32));
            pairs.push((cosine(qx, graph.features.row(next() % nc)), 0.0));
        }
        if pairs.is_empty() {
            return Err(Error::EmptyCorpus(
                "no query–chunk edges to learn from".into(),
            ));
        }
        let mut losses = Vec::new();
        progress.start("learned-cosine", Some(self.steps as u64));
        for step in 0..self.steps {
            let (mut ga, mut gb, mut loss) = (0.0f32, 0.0f32, 0.0f32);
            for &(x, y) in &pairs {
                let p = sigmoid(self.a * x + self.b);
                ga += (p - y) * x;
                gb += p - y;
                loss -= y * p.max(1e-7).ln() + (1.0 - y) * (1.0 - p).max(1e-7).ln();
            }
            let n = pairs.len() as f32;
            self.a -= 2.0 * ga / n;
            self.b -= 2.0 * gb / n;
            losses.push(loss / n);
            progress.update("learned-cosine", step as u64 + 1, "");
        }
        progress.finish("learned-cosine");
        Ok(TrainReport {
            epochs_run: self.steps,
            best_epoch: self.steps,
            steps: self.steps,
            train_loss: losses,
            ..TrainReport::default()
        })
    }

    fn attach(&mut self, graph: &LinkGraph) -> lprag::Result<()> {
        graph.validate()?;
        let rows: Vec<usize> = (0..graph.num_chunks).collect();
        self.chunks = Some(graph.features.select(&rows));
        Ok(())
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> lprag::Result<Vec<f32>> {
        let chunks = self
            .chunks
            .as_ref()
            .ok_or_else(|| Error::NotReady("learned-cosine has no graph".into()))?;
        Ok(candidates
            .iter()
            .map(|&c| self.a * cosine(query, chunks.row(c)) + self.b)
            .collect())
    }

    fn save(&self, dir: &Path) -> lprag::Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("params.json");
        std::fs::write(&path, serde_json::to_vec(&(self.a, self.b)).unwrap())
            .map_err(|e| Error::io(&path, e))
    }
}

#[tokio::test]
async fn a_custom_trainable_predictor_trains_saves_and_reopens() {
    let rag = LpRag::builder()
        .encoder(encoder())
        .predictor(Box::new(LearnedCosine::new(300)))
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(rag.predictor().name(), "learned-cosine");
    let report = &rag.stats().train;
    assert_eq!(report.steps, 300);
    assert!(
        report.train_loss[299] < report.train_loss[0],
        "training lowered the loss: {:?} → {:?}",
        report.train_loss[0],
        report.train_loss[299]
    );

    let question = "Who invented dynamite?";
    let hits = rag.retrieve(question, Selection::TopK(100)).await.unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "nobel");
    // The learned slope is positive: the ranking is the cosine ranking.
    let q = rag.encoder().embed_one(question).await.unwrap();
    let cos: Vec<f32> = hits
        .iter()
        .map(|h| cosine(&q, rag.graph().features.row(h.chunk.id)))
        .collect();
    assert!(cos.windows(2).all(|w| w[0] >= w[1] - 1e-6), "{cos:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    let msg = LpRag::open(&path).unwrap_err().to_string();
    assert!(msg.contains("load_with"), "{msg}");
    let err = LpRag::load_with(&path, encoder(), |_, _| {
        Ok(Box::new(lprag::extend::GnnLinkPredictor::new(
            Default::default(),
            Default::default(),
        )))
    })
    .unwrap_err();
    assert!(err.to_string().contains("learned-cosine"), "{err}");

    let reopened = LpRag::load_with(&path, encoder(), LearnedCosine::restore).unwrap();
    let again = reopened
        .retrieve(question, Selection::TopK(100))
        .await
        .unwrap();
    let ids =
        |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
    assert_eq!(ids(&hits), ids(&again));
}

#[tokio::test]
async fn the_built_in_predictor_reopens_with_load_with_but_not_as_a_scorer() {
    let config = lprag::LpRagConfig {
        train: lprag::TrainConfig {
            epochs: 3,
            ..Default::default()
        },
        ..Default::default()
    };
    let rag = LpRag::builder()
        .encoder(encoder())
        .config(config)
        .progress(Arc::new(NoProgress))
        .build(&corpus())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    // `load_with` also restores the built-in predictor (say, on another device).
    let reopened = LpRag::load_with(&path, encoder(), |d, _| {
        Ok(Box::new(lprag::extend::GnnLinkPredictor::from_dir(d)?) as Box<dyn LinkPredictor>)
    })
    .unwrap();
    let q = "Who invented dynamite?";
    let a = rag.retrieve(q, Selection::TopK(3)).await.unwrap();
    let b = reopened.retrieve(q, Selection::TopK(3)).await.unwrap();
    let ids =
        |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    // A scorer cannot open it.
    let msg = LpRag::load_with_scorer(&path, encoder(), DegreeBonus)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("LpRag::open or LpRag::load"), "{msg}");
}

mod burn_model {
    use super::*;
    use lprag::extend::{BurnLinkPredictor, GraphBatch, LinkModel, Pairs};
    use lprag::model::burn;
    use lprag::TrainConfig;

    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, Tensor};

    /// One SAGE-mean layer and a dot decoder, written against the public API only.
    #[derive(Module, Debug)]
    pub struct Tiny {
        this: Linear,
        nbr: Linear,
    }

    pub fn tiny(d_in: usize, device: &Device) -> Tiny {
        Tiny {
            this: LinearConfig::new(d_in, 8).init(device),
            nbr: LinearConfig::new(d_in, 8).init(device),
        }
    }

    impl LinkModel for Tiny {
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

    #[tokio::test]
    async fn a_burn_model_trains_saves_and_reopens_through_lprag() {
        let train = TrainConfig {
            epochs: 5,
            ..TrainConfig::default()
        };
        let rag = LpRag::builder()
            .encoder(encoder())
            .predictor(Box::new(BurnLinkPredictor::new("tiny", train, tiny)))
            .build(&corpus())
            .await
            .unwrap();
        assert_eq!(rag.predictor().name(), "tiny");
        assert!(rag.stats().train.epochs_run > 0);
        let question = "Which river flows through Warsaw?";
        let hits = rag.retrieve(question, Selection::TopK(6)).await.unwrap();
        assert_eq!(hits.len(), 6);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        rag.save(&path).unwrap();
        let reopened = LpRag::load_with(&path, encoder(), |d, g| {
            Ok(Box::new(BurnLinkPredictor::restore(d, g, tiny)?) as Box<dyn LinkPredictor>)
        })
        .unwrap();
        let again = reopened
            .retrieve(question, Selection::TopK(6))
            .await
            .unwrap();
        let ids =
            |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
        assert_eq!(ids(&hits), ids(&again));
    }
}

#[tokio::test]
async fn a_scorer_that_panics_is_a_backend_error_not_a_cancellation() {
    struct Boom;
    impl LinkScorer for Boom {
        fn name(&self) -> &str {
            "boom"
        }
        fn score(&self, _: &ScoreContext<'_>, _: &[f32], _: &[ChunkId]) -> lprag::Result<Vec<f32>> {
            panic!("the scorer's own bug")
        }
    }
    let rag = LpRag::builder()
        .encoder(encoder())
        .scorer(Boom)
        .build(&corpus())
        .await
        .unwrap();
    let err = rag
        .retrieve("Where was Marie Curie born?", lprag::Selection::TopK(3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(err.to_string().contains("the scorer's own bug"), "{err}");
}
