//! Mutual k-NN build time (k = 5): exact, HNSW, NN-descent and IVF, with each approximate backend's
//! recall of the exact k-NN lists.
//!
//! ```text
//! cargo bench -p lprag-graph --bench knn
//! LPRAG_BENCH_SIZES=10000 cargo bench -p lprag-graph --bench knn   # only 10k
//! LPRAG_BENCH_HNSW_100K=1 cargo bench -p lprag-graph --bench knn   # also HNSW at 100k (minutes)
//! # real text: the first N passages of a corpus.json (HippoRAG format, e.g. from
//! # ../shared/tools/scale-corpus.py), embedded by the 1024-d hashing encoder
//! LPRAG_BENCH_CORPUS=target/scale/musique-100000/corpus.json LPRAG_BENCH_SIZES=100000 \
//!     cargo bench -p lprag-graph --bench knn
//! # real sentence embeddings: the first N vectors of an `lprag-eval --embedding-cache` file
//! LPRAG_BENCH_EMBEDDINGS=target/emb-minilm/musique-30000-minilm.bin LPRAG_BENCH_SIZES=30000 \
//!     cargo bench -p lprag-graph --bench knn
//! # HNSW at several ef_construction values, hashing width 256, no IVF rows
//! LPRAG_BENCH_HNSW_EFC=200,50,25 LPRAG_BENCH_HASH_DIM=256 LPRAG_BENCH_IVF=0 ...
//! # NN-descent with candidate lists of 12 and 20; 0 leaves a backend out
//! # (LPRAG_BENCH_HNSW_EFC=0, LPRAG_BENCH_NND=0, LPRAG_BENCH_EXACT=0: then no recall, unless
//! # LPRAG_BENCH_RECALL_SAMPLE=1000 finds exact lists for 1,000 rows by brute force)
//! LPRAG_BENCH_NND=12,20 LPRAG_BENCH_NND_ITERATIONS=20 LPRAG_BENCH_NND_INIT=8 ...
//! ```
//!
//! Synthetic vectors (384-d) are drawn around 100 random centres (like clustered sentence
//! embeddings), so neighbourhoods are meaningful. Prints a Markdown table; recall is the
//! share of the exact lists' neighbours an approximate backend found.

mod common;

use std::time::Instant;

use common::env_list;

use lprag_core::Embeddings;
use lprag_graph::{
    knn, mutual_edges_of, HnswParams, IvfParams, KnnBackend, NnDescentParams, DEFAULT_K,
};
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

/// The first `n` vectors of an embedding cache file written by `lprag-eval
/// --embedding-cache` (`LPEMBC01`, dimension, then `(u32 length, text, dim × f32)` records).
fn cache_file(path: &str, n: usize) -> Embeddings {
    let bytes = std::fs::read(path).expect("LPRAG_BENCH_EMBEDDINGS is readable");
    assert!(
        bytes.starts_with(b"LPEMBC01"),
        "not an lprag-eval embedding cache"
    );
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let dim = u32_at(8) as usize;
    let (mut at, mut data) = (12usize, Vec::new());
    while data.len() < n * dim && at + 4 <= bytes.len() {
        let len = u32_at(at) as usize;
        let start = at + 4 + len;
        if start + 4 * dim > bytes.len() {
            break;
        }
        data.extend(
            bytes[start..start + 4 * dim]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))),
        );
        at = start + 4 * dim;
    }
    Embeddings::new(dim, data).expect("whole rows")
}

/// Recall of `lists` against exact lists of `m` evenly spaced rows, found by brute force
/// (for sizes where exact search of every row takes hours), printed with the sample size.
fn sample_recall(emb: &Embeddings, lists: &[Vec<(u32, f32)>], m: usize) -> String {
    use rayon::prelude::*;
    let (n, d) = (emb.rows(), emb.dim());
    let unit: Vec<f32> = (0..n)
        .into_par_iter()
        .flat_map_iter(|i| {
            let r = emb.row(i);
            let norm = lprag_core::dot(r, r).sqrt();
            let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
            r.iter().map(move |v| v * inv)
        })
        .collect();
    let row = |i: usize| &unit[i * d..(i + 1) * d];
    let rows: Vec<usize> = (0..m.min(n)).map(|j| j * n / m.min(n)).collect();
    let hits: usize = rows
        .par_iter()
        .map(|&i| {
            let mut best: Vec<(f32, u32)> = Vec::with_capacity(DEFAULT_K + 1);
            for j in (0..n).filter(|&j| j != i) {
                let s = lprag_core::dot(row(i), row(j));
                if best.len() == DEFAULT_K && s <= best[DEFAULT_K - 1].0 {
                    continue;
                }
                let pos = best.partition_point(|&(t, _)| t >= s);
                best.insert(pos, (s, j as u32));
                best.truncate(DEFAULT_K);
            }
            best.iter()
                .filter(|&&(_, j)| lists[i].iter().any(|x| x.0 == j))
                .count()
        })
        .sum();
    format!(
        "{:.4} (sample of {})",
        hits as f64 / (rows.len() * DEFAULT_K).max(1) as f64,
        rows.len()
    )
}

/// What to measure, from the environment (see the module docs).
struct Settings {
    sizes: Vec<usize>,
    efcs: Vec<usize>,
    ivf: bool,
    nnd: Vec<usize>,
    nnd_iterations: Option<usize>,
    nnd_init: usize,
    sample: usize,
    exact_rows: bool,
    hnsw_100k: bool,
    real: Option<String>,
    cached: Option<String>,
}

impl Settings {
    fn from_env() -> Self {
        let mut sizes = env_list("LPRAG_BENCH_SIZES");
        if sizes.is_empty() {
            sizes = vec![10_000, 100_000];
        }
        let mut efcs = env_list("LPRAG_BENCH_HNSW_EFC");
        if efcs.is_empty() {
            efcs = vec![HnswParams::default().ef_construction];
        }
        let ivf = std::env::var("LPRAG_BENCH_IVF").map_or(true, |v| v != "0");
        let mut nnd = env_list("LPRAG_BENCH_NND");
        if nnd.is_empty() {
            nnd = vec![NnDescentParams::default().list];
        }
        let nnd_iterations = env_list("LPRAG_BENCH_NND_ITERATIONS").first().copied();
        let nnd_init = env_list("LPRAG_BENCH_NND_INIT")
            .first()
            .copied()
            .unwrap_or(0);
        let sample = env_list("LPRAG_BENCH_RECALL_SAMPLE")
            .first()
            .copied()
            .unwrap_or(0);
        Self {
            sizes,
            efcs,
            ivf,
            nnd,
            nnd_iterations,
            nnd_init,
            sample,
            exact_rows: std::env::var("LPRAG_BENCH_EXACT").map_or(true, |v| v != "0"),
            hnsw_100k: std::env::var("LPRAG_BENCH_HNSW_100K").is_ok_and(|v| v == "1"),
            real: std::env::var("LPRAG_BENCH_CORPUS").ok(),
            cached: std::env::var("LPRAG_BENCH_EMBEDDINGS").ok(),
        }
    }

    /// The backends to time at `n` rows, named for the table (exact first).
    fn backends(&self, n: usize) -> Vec<(String, KnnBackend)> {
        let mut backends = Vec::new();
        if self.exact_rows {
            backends.push(("exact".to_string(), KnnBackend::Exact));
        }
        if n < 50_000 || self.hnsw_100k {
            for &ef_construction in self.efcs.iter().filter(|&&e| e > 0) {
                let p = HnswParams {
                    ef_construction,
                    ..HnswParams::default()
                };
                backends.push((
                    format!("hnsw M{}/efc{}/ef{}", p.m, p.ef_construction, p.ef_search),
                    KnnBackend::Hnsw(p),
                ));
            }
        }
        let nnd_init = self.nnd_init;
        for &list in self.nnd.iter().filter(|&&l| l > 0) {
            let p = NnDescentParams {
                list,
                max_iterations: self
                    .nnd_iterations
                    .unwrap_or(NnDescentParams::default().max_iterations),
                init_probes: nnd_init,
                ..NnDescentParams::default()
            };
            let init = if nnd_init > 0 {
                format!(", ivf start {nnd_init} probes")
            } else {
                String::new()
            };
            backends.push((
                format!("nn-descent list {list}{init}"),
                KnnBackend::NnDescent(p),
            ));
        }
        let probe_rows: &[usize] = if self.ivf { &[8, 16, 32] } else { &[] };
        for &probes in probe_rows {
            let p = IvfParams {
                probes,
                ..IvfParams::default()
            };
            backends.push((
                format!("ivf {} lists/{probes} probes", p.lists_for(n)),
                KnnBackend::Ivf(p),
            ));
        }
        backends
    }
}

/// The share of the exact lists' neighbours that `lists` found (by brute force on a sample
/// of rows when there are no exact lists and `sample > 0`).
fn recall(
    emb: &Embeddings,
    lists: &[Vec<(u32, f32)>],
    backend: &KnnBackend,
    exact: Option<&Vec<Vec<(u32, f32)>>>,
    sample: usize,
) -> String {
    match exact {
        None if *backend == KnnBackend::Exact => "1.0000".to_string(),
        None if sample > 0 => sample_recall(emb, lists, sample),
        None => "—".to_string(),
        Some(ex) => {
            let hits: usize = ex
                .iter()
                .zip(lists)
                .map(|(e, a)| e.iter().filter(|x| a.iter().any(|y| y.0 == x.0)).count())
                .sum();
            let total: usize = ex.iter().map(Vec::len).sum();
            format!("{:.4}", hits as f64 / total.max(1) as f64)
        }
    }
}

/// Time every backend at one size and print a table row each.
fn bench_size(settings: &Settings, emb: &Embeddings) {
    let n = emb.rows();
    let mut exact: Option<Vec<Vec<(u32, f32)>>> = None;
    for (name, backend) in settings.backends(n) {
        let t = Instant::now();
        let lists = match knn(emb, DEFAULT_K, &backend) {
            Ok(l) => l,
            Err(e) => {
                println!("| {n} | {} | {name} | error: {e} | | | | |", emb.dim());
                continue;
            }
        };
        let s = t.elapsed().as_secs_f64();
        let recall = recall(emb, &lists, &backend, exact.as_ref(), settings.sample);
        let edges = mutual_edges_of(&lists).expect("valid lists");
        let mut touched = vec![false; n];
        for e in &edges {
            touched[e.a as usize] = true;
            touched[e.b as usize] = true;
        }
        let isolated = touched.iter().filter(|&&t| !t).count();
        println!(
            "| {n} | {} | {name} | {s:.2} | {:.0} | {recall} | {} | {isolated} |",
            emb.dim(),
            n as f64 / s,
            edges.len()
        );
        if backend == KnnBackend::Exact {
            exact = Some(lists);
        }
    }
}

fn main() {
    let settings = Settings::from_env();
    let (real, cached) = (&settings.real, &settings.cached);
    println!(
        "mutual k-NN, k = {DEFAULT_K}, {} rayon threads, data: {}\n",
        rayon::current_num_threads(),
        cached
            .as_deref()
            .or(real.as_deref())
            .unwrap_or("clustered random, d = 384")
    );
    println!(
        "| rows | d | backend | seconds | rows/s | recall of exact lists | edges | isolated |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|");
    for &n in &settings.sizes {
        let emb = match (cached, real) {
            (Some(path), _) => cache_file(path, n),
            (None, Some(path)) => common::hashing_corpus(path, n).1,
            (None, None) => clustered(n, n as u64),
        };
        bench_size(&settings, &emb);
    }
}
