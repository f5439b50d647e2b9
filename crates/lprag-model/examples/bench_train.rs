//! Training speed on a graph the size of MuSiQue-100's LP-RAG graph: 1,890 chunks,
//! 3,780 synthetic queries, 384-d features, hidden 256.
//!
//! ```text
//! cargo run -p lprag-model --example bench_train [-- EPOCHS]
//! ```
//!
//! The reference (PyTorch Geometric, 1-layer GCN + Hadamard predictor, full batch, one
//! negative per positive) takes 0.128 s/epoch on the project's 2-core machine; the printed
//! ratio compares against that recorded figure.

use std::time::Instant;

use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph, LinkPredictor, NoProgress};
use lprag_model::{GnnLinkPredictor, InferenceMode, ModelConfig, TrainConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CHUNKS: usize = 1890;
const QUERIES: usize = 3780;
const DIM: usize = 384;
const CHUNK_EDGES: usize = 2739;
const PYG_SECONDS_PER_EPOCH: f64 = 0.128;

fn graph() -> LinkGraph {
    let mut rng = StdRng::seed_from_u64(0);
    let n = CHUNKS + QUERIES;
    let rows: Vec<f32> = (0..n * DIM).map(|_| rng.random::<f32>() - 0.5).collect();
    let mut edges = Vec::new();
    while edges.len() < CHUNK_EDGES {
        let (a, b) = (
            rng.random_range(0..CHUNKS as u32),
            rng.random_range(0..CHUNKS as u32),
        );
        if a != b {
            edges.push(LinkEdge {
                a,
                b,
                weight: 0.7,
                kind: EdgeKind::Similarity,
            });
        }
    }
    for q in 0..QUERIES {
        // A.2 batches: one chunk plus up to two neighbours.
        for _ in 0..rng.random_range(1..=3) {
            edges.push(LinkEdge {
                a: (CHUNKS + q) as u32,
                b: rng.random_range(0..CHUNKS as u32),
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
    }
    LinkGraph {
        features: Embeddings::new(DIM, rows).unwrap(),
        num_chunks: CHUNKS,
        edges,
    }
}

fn time(name: &str, model: ModelConfig, train: TrainConfig, g: &LinkGraph) -> f64 {
    let epochs = train.epochs;
    let mut p = GnnLinkPredictor::new(model, train);
    // One warm-up epoch is included in the run; report the per-epoch mean.
    let t = Instant::now();
    let report = p.fit(g, &NoProgress).expect("training runs");
    let secs = t.elapsed().as_secs_f64() / report.epochs_run.max(1) as f64;
    println!(
        "| {name} | {epochs} | {secs:.4} | {:.2}x |",
        PYG_SECONDS_PER_EPOCH / secs
    );
    secs
}

fn main() {
    let epochs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let g = graph();
    println!(
        "graph: {} nodes, {} edges, {DIM}-d features, hidden 256, {} threads",
        g.num_nodes(),
        g.edges.len(),
        rayon::current_num_threads()
    );
    println!("\n| model | epochs | s/epoch | speed vs PyG (0.128 s) |\n|---|---|---|---|");
    let full_batch = TrainConfig {
        epochs,
        batch_size: 0,
        negatives_per_positive: 1,
        mask_targets: false,
        validation_fraction: 0.0,
        inference: InferenceMode::Isolated,
        ..TrainConfig::default()
    };
    time(
        "GCN + Hadamard (PyG reference setting, full batch)",
        ModelConfig::gae(),
        full_batch.clone(),
        &g,
    );
    time(
        "NCN (SAGE, target masking, batch 2048, 1 negative)",
        ModelConfig::ncn(),
        TrainConfig {
            epochs,
            validation_fraction: 0.0,
            ..TrainConfig::default()
        },
        &g,
    );
}
