//! Training speed on a graph the size of MuSiQue-100's LP-RAG graph (1,890 chunks, 3,780
//! synthetic queries, 384-d features, hidden 256), or on a larger random graph of the same
//! shape (a third of the nodes are chunks, a third of the edges chunk–chunk).
//!
//! ```text
//! cargo run -p lprag-model --release --example bench_train [-- EPOCHS [NODES EDGES]]
//! cargo run -p lprag-model --release --example bench_train -- 2 150000 450000
//! cargo run -p lprag-model --release --features wgpu --example bench_train -- --device wgpu:0 20
//! ```
//!
//! With `--device D` (`cuda:N`, `wgpu:N`) each model trains on the CPU and then on D in the
//! same run, and the table adds D's time and the CPU-to-D ratio. A GPU compiles each kernel
//! at its first use in the process, inside the timed epochs: that weighs on the first rows
//! and on short runs.
//!
//! The references (PyTorch Geometric, 1-layer GCN + Hadamard predictor, one negative per
//! positive, on the project's 2-core machine): 0.128 s/epoch full batch on the MuSiQue-size
//! graph, 14 s/epoch on a 150k-node, 450k-edge graph; the printed ratios compare against
//! those recorded figures unless `--pyg SECONDS` gives the figure that
//! `scripts/anchors/pyg_anchor.py` measured on this machine. `--only gcn|ncn` times one model.

use std::time::Instant;

use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph, LinkPredictor, NoProgress};
use lprag_model::{
    ComputeDevice, GnnLinkPredictor, InferenceMode, ModelConfig, StepGraph, TrainConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 384;

/// The allocator a binary that trains should have (docs/guide.md): with glibc's, each
/// step's large tensors are mapped and faulted in afresh.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Chunks, queries, chunk–chunk edges, query–chunk edges.
struct Shape(usize, usize, usize, usize);

fn graph(shape: &Shape) -> LinkGraph {
    let &Shape(chunks, queries, chunk_edges, query_edges) = shape;
    let mut rng = StdRng::seed_from_u64(0);
    let n = chunks + queries;
    let rows: Vec<f32> = (0..n * DIM).map(|_| rng.random::<f32>() - 0.5).collect();
    let mut edges = Vec::new();
    while edges.len() < chunk_edges {
        let (a, b) = (
            rng.random_range(0..chunks as u32),
            rng.random_range(0..chunks as u32),
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
    if query_edges == 0 {
        for q in 0..queries {
            // A.2 batches: one chunk plus up to two neighbours.
            for _ in 0..rng.random_range(1..=3) {
                edges.push(LinkEdge {
                    a: (chunks + q) as u32,
                    b: rng.random_range(0..chunks as u32),
                    weight: 1.0,
                    kind: EdgeKind::QueryChunk,
                });
            }
        }
    } else {
        for e in 0..query_edges {
            edges.push(LinkEdge {
                a: (chunks + e % queries) as u32,
                b: rng.random_range(0..chunks as u32),
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
    }
    LinkGraph {
        features: Embeddings::new(DIM, rows).unwrap(),
        num_chunks: chunks,
        edges,
    }
}

fn time_on(model: &ModelConfig, train: &TrainConfig, g: &LinkGraph, device: ComputeDevice) -> f64 {
    let device = device
        .to_burn()
        .expect("this build has the device's cargo feature");
    let mut p = GnnLinkPredictor::with_device(model.clone(), train.clone(), device);
    // One warm-up epoch is included in the run; report the per-epoch mean.
    let t = Instant::now();
    let report = p.fit(g, &NoProgress).expect("training runs");
    t.elapsed().as_secs_f64() / report.epochs_run.max(1) as f64
}

fn time(
    name: &str,
    model: ModelConfig,
    train: TrainConfig,
    g: &LinkGraph,
    pyg: f64,
    device: Option<ComputeDevice>,
) -> f64 {
    let epochs = train.epochs;
    let secs = time_on(&model, &train, g, ComputeDevice::Cpu);
    match device {
        Some(d) => {
            let on = time_on(&model, &train, g, d);
            println!(
                "| {name} | {epochs} | {secs:.4} | {:.2}x | {on:.4} | {:.2}x |",
                pyg / secs,
                secs / on
            );
        }
        None => println!("| {name} | {epochs} | {secs:.4} | {:.2}x |", pyg / secs),
    }
    secs
}

fn main() {
    let mut device = None;
    let mut pyg_measured = None;
    let mut only: Option<String> = None;
    let mut args = Vec::new();
    let mut raw = std::env::args().skip(1);
    while let Some(a) = raw.next() {
        if a == "--pyg" {
            let s: f64 = raw
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--pyg needs seconds per epoch, as pyg_anchor.py prints them");
            pyg_measured = Some(s);
        } else if a == "--only" {
            only = Some(raw.next().expect("--only needs a model: gcn or ncn"));
        } else if a == "--device" {
            let d: ComputeDevice = raw
                .next()
                .expect("--device needs a value: cuda:N or wgpu:N")
                .parse()
                .unwrap_or_else(|e| panic!("{e}"));
            device = (d != ComputeDevice::Cpu).then_some(d);
        } else {
            args.push(
                a.parse::<usize>()
                    .expect(
                        "arguments are numbers: [--device D] [--pyg S] [--only gcn|ncn] EPOCHS [NODES EDGES]",
                    ),
            );
        }
    }
    let epochs = args.first().copied().unwrap_or(20);
    let (shape, pyg) = match (args.get(1), args.get(2)) {
        (Some(&nodes), Some(&edges)) => (
            Shape(nodes / 3, nodes - nodes / 3, edges / 3, edges - edges / 3),
            14.0,
        ),
        _ => (Shape(1890, 3780, 2739, 0), 0.128),
    };
    let pyg = pyg_measured.unwrap_or(pyg);
    let runs = |model: &str| only.as_deref().is_none_or(|o| o == model);
    let g = graph(&shape);
    println!(
        "graph: {} nodes, {} edges, {DIM}-d features, hidden 256, {} threads",
        g.num_nodes(),
        g.edges.len(),
        rayon::current_num_threads()
    );
    match device {
        Some(d) => println!(
            "\n| model | epochs | CPU s/epoch | CPU speed vs PyG ({pyg} s) | {d} s/epoch | {d} speed vs CPU |\n|---|---|---|---|---|---|"
        ),
        None => println!(
            "\n| model | epochs | s/epoch | speed vs PyG ({pyg} s) |\n|---|---|---|---|"
        ),
    }
    let full_batch = TrainConfig {
        epochs,
        batch_size: 0,
        negatives_per_positive: 1,
        mask_targets: false,
        validation_fraction: 0.0,
        inference: InferenceMode::Isolated,
        ..TrainConfig::default()
    };
    if shape.0 < 10_000 && runs("gcn") {
        time(
            "GCN + Hadamard (PyG reference setting, full batch)",
            ModelConfig::gae(),
            full_batch.clone(),
            &g,
            pyg,
            device,
        );
    }
    let batched = TrainConfig {
        epochs,
        validation_fraction: 0.0,
        inference: InferenceMode::Isolated,
        ..TrainConfig::default()
    };
    if runs("gcn") {
        time(
            "GCN + Hadamard (batch 2048, target masking, neighbourhood steps)",
            ModelConfig::gae(),
            batched.clone(),
            &g,
            pyg,
            device,
        );
    }
    if shape.0 < 10_000 && runs("gcn") {
        time(
            "GCN + Hadamard (batch 2048, target masking, full-graph steps)",
            ModelConfig::gae(),
            TrainConfig {
                step_graph: StepGraph::Full,
                ..batched.clone()
            },
            &g,
            pyg,
            device,
        );
    }
    if runs("ncn") {
        time(
            "NCN (SAGE, target masking, batch 2048, 1 negative, neighbourhood steps)",
            ModelConfig::ncn(),
            TrainConfig {
                epochs,
                validation_fraction: 0.0,
                ..TrainConfig::default()
            },
            &g,
            pyg,
            device,
        );
    }
}
