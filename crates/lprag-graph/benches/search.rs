//! One query's nearest chunks: the exact row scan (`nearest_by_cosine`) against the exact
//! column scan (`ColumnIndex`), on real passages and real questions.
//!
//! ```text
//! # MuSiQue-100's questions over a padded corpus (../shared/tools/scale-corpus.py N DIR)
//! LPRAG_BENCH_CORPUS=target/scale/musique-100000/corpus.json LPRAG_BENCH_SIZES=100000 \
//!     cargo bench -p lprag-graph --bench search
//! ```
//!
//! Hashing encoder (1024-d, fitted on the passages), the questions of `questions.json`
//! beside the corpus, `LPRAG_BENCH_M` nearest (default 20, LP-RAG's pool), each question
//! searched `LPRAG_BENCH_REPEAT` times (default 5). Prints a Markdown table: build time,
//! memory, query p50/p95, and whether both searches returned the same rows and scores
//! for every question.

mod common;

use std::time::Instant;

use common::{env_list, hashing_corpus};
use lprag_graph::{inverse_norms, nearest_by_cosine, ColumnIndex};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let Ok(path) = std::env::var("LPRAG_BENCH_CORPUS") else {
        println!("set LPRAG_BENCH_CORPUS to a corpus.json with questions.json beside it");
        return;
    };
    let questions_path = std::path::Path::new(&path).with_file_name("questions.json");
    let raw = std::fs::read_to_string(&questions_path).expect("questions.json is readable");
    let items: Vec<serde_json::Value> = serde_json::from_str(&raw).expect("a JSON array");
    let questions: Vec<String> = items
        .iter()
        .filter_map(|q| q["question"].as_str().map(str::to_string))
        .collect();
    let mut sizes = env_list("LPRAG_BENCH_SIZES");
    if sizes.is_empty() {
        sizes = vec![100_000];
    }
    let m = env_list("LPRAG_BENCH_M").first().copied().unwrap_or(20);
    let repeat = env_list("LPRAG_BENCH_REPEAT").first().copied().unwrap_or(5);
    println!(
        "nearest {m} chunks, {} questions × {repeat}, {} rayon threads, data: {path}\n",
        questions.len(),
        rayon::current_num_threads()
    );
    println!("| rows | d | search | built in (s) | memory (MB) | query p50 (ms) | p95 (ms) | same answers |");
    println!("|---:|---:|---|---:|---:|---:|---:|---|");
    for &n in &sizes {
        let (encoder, rows) = hashing_corpus(&path, n);
        let queries = encoder.embed_sync(&questions).expect("embedded");
        let n = rows.rows();
        let t = Instant::now();
        let inv = inverse_norms(&rows, n);
        let norms_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let columns = ColumnIndex::build(&rows, &inv).expect("finite rows");
        let columns_s = t.elapsed().as_secs_f64();
        let mut times = [Vec::new(), Vec::new()];
        let mut same = 0;
        for q in queries.iter() {
            let mut answers = [Vec::new(), Vec::new()];
            for _ in 0..repeat {
                for (k, answer) in answers.iter_mut().enumerate() {
                    let t = Instant::now();
                    *answer = if k == 0 {
                        nearest_by_cosine(&rows, &inv, q, m)
                    } else {
                        columns.nearest_where(&rows, &inv, q, m, &|_| true)
                    };
                    times[k].push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            same += usize::from(answers[0] == answers[1]);
        }
        for (k, name) in ["rows (f32)", "columns (i16)"].iter().enumerate() {
            times[k].sort_by(f64::total_cmp);
            let (built, mb) = if k == 0 {
                (norms_s, (n * rows.dim() * 4) as f64 / 1e6)
            } else {
                (columns_s, columns.memory_bytes() as f64 / 1e6)
            };
            println!(
                "| {n} | {} | {name} | {built:.2} | {mb:.0} | {:.2} | {:.2} | {} |",
                rows.dim(),
                percentile(&times[k], 0.5),
                percentile(&times[k], 0.95),
                if k == 0 {
                    "—".to_string()
                } else {
                    format!("{same} of {}", queries.rows())
                }
            );
        }
    }
}
