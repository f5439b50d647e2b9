//! Mutual k-NN build time (k = 5) on random 384-d vectors, exact vs HNSW.
//!
//! ```text
//! cargo bench -p lprag-graph --bench knn
//! LPRAG_BENCH_SIZES=10000 cargo bench -p lprag-graph --bench knn   # only 10k
//! LPRAG_BENCH_HNSW_100K=1 cargo bench -p lprag-graph --bench knn   # also HNSW at 100k (minutes)
//! ```
//!
//! Vectors are drawn around 100 random centres (like clustered sentence embeddings), so
//! neighbourhoods are meaningful. Prints a Markdown table.

use std::time::Instant;

use lprag_core::Embeddings;
use lprag_graph::{mutual_knn_edges, HnswParams, KnnBackend, DEFAULT_K};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DIM: usize = 384;

fn clustered(n: usize, seed: u64) -> Embeddings {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<f32> = (0..100 * DIM)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let mut data = Vec::with_capacity(n * DIM);
    for _ in 0..n {
        let c = rng.random_range(0..100);
        for d in 0..DIM {
            data.push(centres[c * DIM + d] + rng.random_range(-0.6f32..0.6));
        }
    }
    Embeddings::new(DIM, data).expect("valid buffer")
}

fn main() {
    let sizes: Vec<usize> = std::env::var("LPRAG_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let hnsw_100k = std::env::var("LPRAG_BENCH_HNSW_100K").is_ok_and(|v| v == "1");
    println!(
        "mutual k-NN, k = {DEFAULT_K}, d = {DIM}, {} rayon threads\n",
        rayon::current_num_threads()
    );
    println!("| rows | backend | seconds | points/s | edges | isolated |");
    println!("|---:|---|---:|---:|---:|---:|");
    for &n in &sizes {
        let emb = clustered(n, n as u64);
        let mut backends = vec![("exact", KnnBackend::Exact)];
        if n < 50_000 || hnsw_100k {
            backends.push((
                "hnsw M16/efc200/ef64",
                KnnBackend::Hnsw(HnswParams::default()),
            ));
        }
        for (name, backend) in backends {
            let t = Instant::now();
            let edges = match mutual_knn_edges(&emb, DEFAULT_K, &backend) {
                Ok(e) => e,
                Err(e) => {
                    println!("| {n} | {name} | error: {e} | | | |");
                    continue;
                }
            };
            let s = t.elapsed().as_secs_f64();
            let mut touched = vec![false; n];
            for e in &edges {
                touched[e.a as usize] = true;
                touched[e.b as usize] = true;
            }
            let isolated = touched.iter().filter(|&&t| !t).count();
            println!(
                "| {n} | {name} | {s:.2} | {:.0} | {} | {isolated} |",
                n as f64 / s,
                edges.len()
            );
        }
    }
}
