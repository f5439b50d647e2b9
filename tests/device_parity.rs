//! The same index on the CPU and on a GPU: a predictor trained on one device scores every
//! chunk the same when its index is reopened on the other, for the default predictor and
//! for VGAE, PEG and SEAL.
//!
//! Needs a GPU and a build with its backend, so it runs only where one is named:
//!
//! ```text
//! LPRAG_TEST_DEVICE=wgpu:0 cargo test --release --features wgpu --test integration device_parity::
//! LPRAG_TEST_DEVICE=cuda:0 cargo test --release --features cuda --test integration device_parity::
//! ```
//!
//! Without `LPRAG_TEST_DEVICE` each test prints that it was skipped and passes (as the
//! real-model tier does without a server).

use std::collections::HashMap;
use std::sync::Arc;

use crate::common;

use lprag::{
    ComputeDevice, HashingEncoder, LpRag, LpRagConfig, Retriever, Selection, SentenceChunker,
};

/// Scores may differ by float reduction order between backends; rankings must agree.
const TOLERANCE: f32 = 1e-3;

fn device() -> Option<ComputeDevice> {
    let name = std::env::var("LPRAG_TEST_DEVICE").ok()?;
    Some(name.parse().expect("LPRAG_TEST_DEVICE names a device"))
}

const QUERIES: [&str; 3] = [
    "Where was the winner of two Nobel Prizes born?",
    "capital of Japan",
    "highest mountain",
];

/// Every chunk's score for each query.
async fn scores(rag: &LpRag) -> Vec<HashMap<usize, f32>> {
    let mut out = Vec::new();
    for q in QUERIES {
        let hits = rag
            .retrieve(q, Selection::TopK(rag.chunks().len()))
            .await
            .unwrap();
        out.push(hits.into_iter().map(|h| (h.chunk.id, h.score)).collect());
    }
    out
}

fn max_difference(a: &[HashMap<usize, f32>], b: &[HashMap<usize, f32>]) -> f32 {
    let mut worst = 0f32;
    for (a, b) in a.iter().zip(b) {
        assert_eq!(a.len(), b.len(), "both devices rank the same chunks");
        for (id, x) in a {
            let y = b.get(id).expect("the same chunk ids on both devices");
            assert!(x.is_finite() && y.is_finite(), "{id}: {x} vs {y}");
            worst = worst.max((x - y).abs());
        }
    }
    worst
}

/// Train with `config` on `train_on`, save, reopen on `open_on`: the scores must agree.
async fn round_trip(
    name: &str,
    config: LpRagConfig,
    train_on: ComputeDevice,
    open_on: ComputeDevice,
) {
    let encoder = Arc::new(HashingEncoder::default());
    let t = std::time::Instant::now();
    let rag = LpRag::builder()
        .encoder(encoder.clone())
        .chunker(Arc::new(SentenceChunker::default()))
        .config(config)
        .device(train_on)
        .build(&common::three_sentence_corpus())
        .await
        .unwrap();
    let built = t.elapsed().as_secs_f64();
    let report = &rag.stats().train;
    assert!(
        report.steps > 0,
        "{name}: nothing was trained on {train_on}"
    );
    assert!(
        report.train_loss.iter().all(|l| l.is_finite()),
        "{name}: {:?}",
        report.train_loss
    );
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path().join("index")).unwrap();
    let reopened = LpRag::load_on(dir.path().join("index"), encoder, open_on).unwrap();
    let diff = max_difference(&scores(&rag).await, &scores(&reopened).await);
    println!(
        "{name}: trained on {train_on} in {built:.2} s ({} steps, loss {:.4} -> {:.4}), \
         reopened on {open_on}: max |score difference| {diff:.2e}",
        report.steps,
        report.train_loss.first().unwrap_or(&f32::NAN),
        report.train_loss.last().unwrap_or(&f32::NAN),
    );
    assert!(diff <= TOLERANCE, "{name}: {diff} > {TOLERANCE}");
}

fn presets() -> Vec<(&'static str, LpRagConfig)> {
    let mut out = vec![
        ("default (NCN)", LpRagConfig::default()),
        ("paper VGAE", LpRagConfig::paper_vgae()),
        ("paper PEG", LpRagConfig::paper_peg()),
        ("paper SEAL", LpRagConfig::paper_seal()),
    ];
    for (_, c) in &mut out {
        c.train.epochs = c.train.epochs.min(10);
    }
    out
}

#[tokio::test]
async fn trained_on_the_cpu_scores_the_same_on_the_gpu() {
    let Some(gpu) = device() else {
        eprintln!("skipped: set LPRAG_TEST_DEVICE (e.g. wgpu:0) in a GPU build");
        return;
    };
    for (name, config) in presets() {
        round_trip(name, config, ComputeDevice::Cpu, gpu).await;
    }
}

#[tokio::test]
async fn trained_on_the_gpu_scores_the_same_on_the_cpu() {
    let Some(gpu) = device() else {
        eprintln!("skipped: set LPRAG_TEST_DEVICE (e.g. wgpu:0) in a GPU build");
        return;
    };
    for (name, config) in presets() {
        round_trip(name, config, gpu, ComputeDevice::Cpu).await;
    }
}
