//! The Lance store beside the in-memory one on a padded MuSiQue corpus: ingest and index
//! time, query p50, recall against the exact answer, dense R@2/R@5, and the peak memory
//! of a process that only answers.
//!
//! ```text
//! python3 ../shared/tools/scale-corpus.py 100000 /tmp/m100k
//! lprag-eval retrieval --dataset /tmp/m100k --retriever dense --embedding-cache /tmp/m100k.bin
//! cargo run --release --manifest-path crates/lprag-lance/Cargo.toml --example store_bench -- \
//!     /tmp/m100k.bin /tmp/m100k /tmp/m100k.lance [--index hnsw-sq|ivf-pq] [--nprobes N] \
//!     [--ef N] [--refine N]
//! ```
//!
//! The vectors are the ones `lprag-eval` wrote to its embedding cache (`LPEMBC01`
//! records: passages as `title + "\n" + text`, and the questions), so every figure is on
//! the vectors of the in-memory runs. The database directory must not exist.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::time::Instant;

use lprag_core::{dot, Chunk, ChunkBatch, ChunkStore, Embeddings, Filter, Provenance};
use lprag_lance::{LanceStore, SearchParams, StoreSpec, VectorIndex, DEFAULT_TABLE};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const K: usize = 10;
const BLOCK: usize = 10_000;

struct Data {
    passages: Vec<(String, String)>,
    vectors: Embeddings,
    questions: Embeddings,
    gold: Vec<HashSet<usize>>,
}

fn load(cache: &str, dataset: &str) -> Result<Data, BoxError> {
    let corpus: Vec<serde_json::Value> =
        serde_json::from_reader(std::fs::File::open(format!("{dataset}/corpus.json"))?)?;
    let questions: Vec<serde_json::Value> =
        serde_json::from_reader(std::fs::File::open(format!("{dataset}/questions.json"))?)?;
    let s = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let passages: Vec<(String, String)> = corpus
        .iter()
        .map(|d| (s(d, "title"), s(d, "text")))
        .collect();
    let key = |t: &str, x: &str| format!("{t}\n{x}");
    let index_of: HashMap<String, usize> = passages
        .iter()
        .enumerate()
        .map(|(i, (t, x))| (key(t, x), i))
        .collect();
    let wanted: HashSet<String> = index_of
        .keys()
        .cloned()
        .chain(questions.iter().map(|q| s(q, "question")))
        .collect();

    let mut f = std::io::BufReader::new(std::fs::File::open(cache)?);
    let mut head = [0u8; 12];
    f.read_exact(&mut head)?;
    if &head[..8] != b"LPEMBC01" {
        return Err(format!("{cache} is not an lprag-eval embedding cache").into());
    }
    let dim = u32::from_le_bytes(head[8..12].try_into()?) as usize;
    let mut found: HashMap<String, Vec<f32>> = HashMap::new();
    loop {
        let mut n = [0u8; 4];
        if f.read_exact(&mut n).is_err() {
            break;
        }
        let mut text = vec![0u8; u32::from_le_bytes(n) as usize];
        let mut v = vec![0u8; 4 * dim];
        if f.read_exact(&mut text).is_err() || f.read_exact(&mut v).is_err() {
            break;
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        if wanted.contains(&text) {
            let row = v
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            found.insert(text, row);
        }
    }
    let mut data = Vec::with_capacity(passages.len() * dim);
    let mut missing = 0;
    for (t, x) in &passages {
        match found.get(&key(t, x)) {
            Some(v) => data.extend_from_slice(v),
            None => {
                missing += 1;
                data.extend(std::iter::repeat_n(0.0, dim));
            }
        }
    }
    if missing > 0 {
        return Err(format!("{missing} passages have no vector in {cache}").into());
    }
    let mut qv = Vec::new();
    let mut gold = Vec::new();
    for q in &questions {
        let Some(v) = found.get(&s(q, "question")) else {
            continue;
        };
        qv.extend_from_slice(v);
        let g = q["paragraphs"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["is_supporting"].as_bool() == Some(true))
                    .filter_map(|p| {
                        let text = p
                            .get("paragraph_text")
                            .or_else(|| p.get("text"))
                            .and_then(|t| t.as_str())
                            .unwrap_or("");
                        index_of.get(&key(&s(p, "title"), text)).copied()
                    })
                    .collect()
            })
            .unwrap_or_default();
        gold.push(g);
    }
    Ok(Data {
        passages,
        vectors: Embeddings::new(dim, data)?,
        questions: Embeddings::new(dim, qv)?,
        gold,
    })
}

fn recall_at(ranked: &[Vec<usize>], gold: &[HashSet<usize>], k: usize) -> f64 {
    let sum: f64 = ranked
        .iter()
        .zip(gold)
        .map(|(r, g)| {
            r.iter().take(k).filter(|i| g.contains(i)).count() as f64 / g.len().max(1) as f64
        })
        .sum();
    100.0 * sum / gold.len().max(1) as f64
}

fn p50(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// Peak resident memory of this process (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn search_all(
    store: &dyn ChunkStore,
    questions: &Embeddings,
) -> Result<(Vec<Vec<usize>>, f64), BoxError> {
    let mut ranked = Vec::new();
    let mut ms = Vec::new();
    for q in questions.iter() {
        let t = Instant::now();
        let hits = store.nearest(q, K, &Filter::All).await?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        ranked.push(hits.into_iter().map(|h| h.0).collect());
    }
    Ok((ranked, p50(ms)))
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn params(args: &[String]) -> Result<SearchParams, BoxError> {
    let num = |n: &str| -> Result<Option<usize>, BoxError> {
        Ok(flag(args, n).map(|v| v.parse()).transpose()?)
    };
    Ok(SearchParams {
        nprobes: num("--nprobes")?,
        ef: num("--ef")?,
        refine_factor: num("--refine")?.map(|r| r as u32),
    })
}

/// The answering process: open the store, answer every question, print p50 and the peak
/// memory.
async fn answer(args: &[String]) -> Result<(), BoxError> {
    let (db, queries) = (&args[2], &args[3]);
    let raw = std::fs::read(queries)?;
    let dim = u32::from_le_bytes(raw[..4].try_into()?) as usize;
    let floats = raw[4..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let questions = Embeddings::new(dim, floats)?;
    let t = Instant::now();
    let store = LanceStore::open(db, DEFAULT_TABLE).await?;
    store.set_search(params(args)?);
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    // Once to warm the caches, once timed.
    search_all(&store, &questions).await?;
    let (_, p) = search_all(&store, &questions).await?;
    println!(
        "answer-only process: open {open_ms:.0} ms, query p50 {p:.2} ms, peak RSS {:.0} MB",
        peak_rss_mb()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("answer") {
        return answer(&args).await;
    }
    if args.len() < 4 {
        return Err("usage: store_bench CACHE.bin DATASET_DIR DB_DIR [--index hnsw-sq|ivf-pq] [--nprobes N] [--ef N] [--refine N]".into());
    }
    let (cache, dataset, db) = (&args[1], &args[2], &args[3]);
    let index = match flag(&args, "--index").as_deref().unwrap_or("hnsw-sq") {
        "hnsw-sq" => VectorIndex::default(),
        "ivf-pq" => VectorIndex::IvfPq {
            partitions: None,
            sub_vectors: None,
        },
        other => return Err(format!("--index {other}: hnsw-sq or ivf-pq").into()),
    };
    let t = Instant::now();
    let data = load(cache, dataset)?;
    let (n, dim) = (data.vectors.rows(), data.vectors.dim());
    println!(
        "{n} passages × {dim}, {} questions, read in {:.1} s",
        data.questions.rows(),
        t.elapsed().as_secs_f64()
    );
    let chunks: Vec<Chunk> = data
        .passages
        .iter()
        .enumerate()
        .map(|(i, (title, text))| {
            Chunk::new(
                i,
                text.clone(),
                Provenance {
                    document_id: format!("p{i}"),
                    title: title.clone(),
                    span: 0..text.len(),
                },
            )
        })
        .collect();

    // The in-memory reference: an exact scan of the matrix (one pass, inverse norms).
    let inv: Vec<f32> = data
        .vectors
        .iter()
        .map(|r| {
            let n = dot(r, r).sqrt();
            if n > 0.0 {
                1.0 / n
            } else {
                0.0
            }
        })
        .collect();
    let scan = |q: &[f32]| -> Vec<usize> {
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(K + 1);
        for (i, r) in data.vectors.iter().enumerate() {
            let s = dot(q, r) * inv[i];
            if best.len() < K || s > best[K - 1].0 {
                let at = best.partition_point(|b| b.0 >= s);
                best.insert(at, (s, i));
                best.truncate(K);
            }
        }
        best.into_iter().map(|b| b.1).collect()
    };
    let mut exact = Vec::new();
    let mut ms = Vec::new();
    for q in data.questions.iter() {
        let t = Instant::now();
        exact.push(scan(q));
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mem_p50 = p50(ms);
    println!(
        "in memory (exact scan, one thread): query p50 {mem_p50:.2} ms, R@2 {:.2}, R@5 {:.2}",
        recall_at(&exact, &data.gold, 2),
        recall_at(&exact, &data.gold, 5)
    );

    let t = Instant::now();
    let store = LanceStore::create(db, StoreSpec::new(dim)).await?;
    for (b, start) in (0..n).step_by(BLOCK).enumerate() {
        let end = (start + BLOCK).min(n);
        let ids: Vec<usize> = (start..end).collect();
        let batch = ChunkBatch::new(chunks[start..end].to_vec(), data.vectors.select(&ids));
        store.append(batch).await?;
        if b % 10 == 9 {
            eprintln!("  appended {end} rows, {:.1} s", t.elapsed().as_secs_f64());
        }
    }
    let ingest = t.elapsed().as_secs_f64();
    let t = Instant::now();
    store.build_index(index).await?;
    let index_s = t.elapsed().as_secs_f64();
    let search = params(&args)?;
    store.set_search(search);
    search_all(&store, &data.questions).await?;
    let (ranked, lance_p50) = search_all(&store, &data.questions).await?;
    let overlap: f64 = ranked
        .iter()
        .zip(&exact)
        .map(|(r, e)| {
            let e: HashSet<_> = e.iter().collect();
            r.iter().filter(|i| e.contains(i)).count() as f64 / e.len().max(1) as f64
        })
        .sum::<f64>()
        / exact.len().max(1) as f64;
    println!(
        "lance ({index:?}, {search:?}): ingest {ingest:.1} s in blocks of {BLOCK}, index {index_s:.1} s, \
         query p50 {lance_p50:.2} ms, recall@{K} vs exact {overlap:.3}, R@2 {:.2}, R@5 {:.2}",
        recall_at(&ranked, &data.gold, 2),
        recall_at(&ranked, &data.gold, 5)
    );
    println!(
        "this process (everything in RAM as well): peak RSS {:.0} MB",
        peak_rss_mb()
    );

    // A second process that only answers, on the same table.
    // In a temporary file of our own (removed when dropped), never beside the user's files.
    let qfile = tempfile::NamedTempFile::new()?;
    let mut raw = (dim as u32).to_le_bytes().to_vec();
    raw.extend(
        data.questions
            .as_slice()
            .iter()
            .flat_map(|x| x.to_le_bytes()),
    );
    std::fs::write(qfile.path(), raw)?;
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child.arg("answer").arg(db).arg(qfile.path());
    for f in ["--nprobes", "--ef", "--refine"] {
        if let Some(v) = flag(&args, f) {
            child.args([f, &v]);
        }
    }
    let status = child.status()?;
    if !status.success() {
        return Err(format!("the answering process failed: {status}").into());
    }
    Ok(())
}
