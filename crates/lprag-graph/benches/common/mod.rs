//! What the benchmarks share: real passages embedded by the hashing encoder, and lists
//! from the environment.

use lprag_core::Embeddings;
use lprag_text::{HashingEncoder, HashingEncoderConfig};

/// The first `n` passages of a HippoRAG `corpus.json` ("title\ntext"), embedded by the
/// hashing encoder fitted on them (width `LPRAG_BENCH_HASH_DIM`, default 1024); the encoder
/// is returned too, to embed queries the same way.
pub fn hashing_corpus(path: &str, n: usize) -> (HashingEncoder, Embeddings) {
    let raw = std::fs::read_to_string(path).expect("the corpus file is readable");
    let items: Vec<serde_json::Value> = serde_json::from_str(&raw).expect("a JSON array");
    drop(raw);
    let texts: Vec<String> = items
        .iter()
        .take(n)
        .map(|p| {
            format!(
                "{}\n{}",
                p["title"].as_str().unwrap_or(""),
                p["text"].as_str().unwrap_or("")
            )
        })
        .collect();
    drop(items);
    let config = HashingEncoderConfig {
        dim: env_list("LPRAG_BENCH_HASH_DIM")
            .first()
            .copied()
            .unwrap_or(1024),
        ..HashingEncoderConfig::default()
    };
    let encoder = HashingEncoder::fitted(config, &texts).expect("fitted");
    let rows = encoder.embed_sync(&texts).expect("embedded");
    (encoder, rows)
}

/// A comma-separated list of numbers from the environment (empty when unset).
pub fn env_list(key: &str) -> Vec<usize> {
    std::env::var(key)
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}
