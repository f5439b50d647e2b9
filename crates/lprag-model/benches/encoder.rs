//! Throughput of the BERT sentence encoder (all-MiniLM-L6-v2 on the flex CPU backend)
//! over the MuSiQue-100 passages (`title + "\n" + text`).
//!
//! ```text
//! scripts/fetch-model.sh
//! cargo bench -p lprag-model --bench encoder
//! ```
//!
//! Environment: `LPRAG_BENCH_BATCH` (batch size, default 32), `LPRAG_BENCH_LIMIT` (use
//! only the first N passages), `LPRAG_BENCH_CORPUS` (another corpus.json), and
//! `LPRAG_REQUIRE_MODEL=1` to fail rather than skip when no model is found,
//! `LPRAG_BENCH_VECTORS=FILE` to write the passages' vectors (a JSON list of rows, for
//! `scripts/anchors/encoder_anchor.py --compare FILE`), `LPRAG_BENCH_DEVICE` (`cpu`,
//! `wgpu:N` or `cuda:N`, with the crate built `--features wgpu` or `cuda`),
//! `LPRAG_BENCH_REPEATS` (timed runs over the whole corpus, default 1: on a GPU the first
//! run includes compiling and tuning kernels for each batch shape) and
//! `LPRAG_BENCH_PARITY=N` (also embed the first N passages on the CPU and print the
//! largest difference from the chosen device; on the CPU itself, the other engine's
//! vectors: burn's ops against lprag's CPU kernels, or with `LPRAG_BENCH_FP16=1` the f32
//! kernels), `LPRAG_BENCH_BURN_OPS=1` (run the CPU encoder on burn's ops rather than
//! lprag's CPU kernels), `LPRAG_BENCH_FP16=1` (the CPU kernels' dense layers in fp16,
//! `SentenceEncoder::with_fp16_kernels`). The model is found like
//! `SentenceEncoder::load(None)` does (`LPRAG_MODEL_DIR`, the Hugging Face cache).
//! Threads follow rayon (`RAYON_NUM_THREADS`).

use std::time::Instant;

use lprag_model::bert::SentenceEncoder;
use lprag_model::{ComputeDevice, Device};

fn env_usize(key: &str) -> Option<usize> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

/// Peak resident set size in MiB (`VmHWM` of /proc/self/status), when available.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The engine `encoder` runs on, in words.
fn engine(encoder: &SentenceEncoder) -> &'static str {
    if encoder.uses_fp16_kernels() {
        "lprag's CPU kernels, fp16 dense layers"
    } else if encoder.uses_cpu_kernels() {
        "lprag's CPU kernels"
    } else {
        "burn's ops"
    }
}

fn main() {
    let corpus_path = std::env::var("LPRAG_BENCH_CORPUS").unwrap_or_else(|_| {
        let data = std::env::var("LPRAG_DATA").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data").to_string()
        });
        format!("{data}/musique-100/corpus.json")
    });
    let require =
        std::env::var_os("LPRAG_REQUIRE_MODEL").is_some_and(|v| !v.is_empty() && v != "0");
    let device: ComputeDevice = match std::env::var("LPRAG_BENCH_DEVICE") {
        Ok(d) => d
            .parse()
            .unwrap_or_else(|e| panic!("LPRAG_BENCH_DEVICE: {e}")),
        Err(_) => ComputeDevice::Cpu,
    };
    let burn_device = device
        .to_burn()
        .unwrap_or_else(|e| panic!("device {device}: {e}"));
    let t_load = Instant::now();
    let encoder = match SentenceEncoder::load_on(None, &burn_device) {
        Ok(e) => e,
        Err(e) if !require => {
            println!("encoder bench skipped: {e}");
            return;
        }
        Err(e) => panic!("no model: {e}"),
    };
    let load_s = t_load.elapsed().as_secs_f64();
    let flag = |key: &str| std::env::var_os(key).is_some_and(|v| !v.is_empty() && v != "0");
    let (burn_ops, fp16) = (flag("LPRAG_BENCH_BURN_OPS"), flag("LPRAG_BENCH_FP16"));
    let encoder = encoder
        .with_batch_size(env_usize("LPRAG_BENCH_BATCH").unwrap_or(32))
        .with_cpu_kernels(!burn_ops)
        .with_fp16_kernels(fp16);

    let raw = match std::fs::read_to_string(&corpus_path) {
        Ok(r) => r,
        Err(e) => {
            println!("encoder bench skipped: cannot read {corpus_path}: {e}");
            return;
        }
    };
    let corpus: Vec<serde_json::Value> = serde_json::from_str(&raw).expect("corpus.json is a list");
    let mut texts: Vec<String> = corpus
        .iter()
        .map(|p| {
            format!(
                "{}\n{}",
                p["title"].as_str().unwrap_or_default(),
                p["text"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if let Some(n) = env_usize("LPRAG_BENCH_LIMIT") {
        texts.truncate(n);
    }

    let lens: Vec<usize> = texts
        .iter()
        .map(|t| encoder.token_ids(t).expect("tokenize").len())
        .collect();
    let mean_tokens = lens.iter().sum::<usize>() as f64 / lens.len().max(1) as f64;
    let cut = lens
        .iter()
        .filter(|&&l| l >= encoder.max_seq_length())
        .count();

    // Warm-up: first-call allocations and kernel selection.
    encoder
        .encode(&texts[..texts.len().min(8)])
        .expect("warm-up");

    let repeats = env_usize("LPRAG_BENCH_REPEATS").unwrap_or(1).max(1);
    let mut runs = Vec::with_capacity(repeats);
    let mut e = None;
    for run in 1..=repeats {
        let t = Instant::now();
        let out = encoder.encode(&texts).expect("encode");
        let secs = t.elapsed().as_secs_f64();
        if repeats > 1 {
            println!(
                "run {run}: {:.1} passages/s ({secs:.2} s)",
                texts.len() as f64 / secs
            );
        }
        runs.push(secs);
        e = Some(out);
    }
    let e = e.expect("at least one run");
    assert_eq!(e.rows(), texts.len());
    // The last run: on a GPU the earlier ones compile and tune kernels.
    let secs = *runs.last().expect("at least one run");
    if let Ok(path) = std::env::var("LPRAG_BENCH_VECTORS") {
        let rows: Vec<&[f32]> = (0..e.rows()).map(|i| e.row(i)).collect();
        std::fs::write(&path, serde_json::to_vec(&rows).expect("vectors as JSON"))
            .unwrap_or_else(|err| panic!("cannot write {path}: {err}"));
    }

    println!(
        "encoder: {} ({} dims) on {device} from {}",
        encoder_name(&encoder),
        e.dim(),
        encoder.model_dir().display()
    );
    println!(
        "corpus: {} passages, mean {:.1} tokens, {} cut at {}",
        texts.len(),
        mean_tokens,
        cut,
        encoder.max_seq_length()
    );
    println!("engine: {}", engine(&encoder));
    println!("load: {load_s:.2} s");
    println!(
        "throughput: {:.1} passages/s ({:.2} s total), batch {}, threads {}",
        texts.len() as f64 / secs,
        secs,
        encoder.batch_size(),
        rayon::current_num_threads()
    );
    if let Some(n) = env_usize("LPRAG_BENCH_PARITY") {
        let n = n.min(texts.len());
        // Another device: the CPU's vectors; the CPU: the other engine's (fp16: f32).
        let other = if device != ComputeDevice::Cpu || encoder.uses_fp16_kernels() {
            true
        } else {
            !encoder.uses_cpu_kernels()
        };
        let cpu = SentenceEncoder::from_dir(encoder.model_dir(), &Device::flex())
            .expect("the same model on the CPU")
            .with_batch_size(encoder.batch_size())
            .with_cpu_kernels(other);
        println!("parity reference: the CPU on {}", engine(&cpu));
        let reference = cpu.encode(&texts[..n]).expect("encode on the CPU");
        let (mut max_abs, mut min_cos) = (0f32, f32::INFINITY);
        for i in 0..n {
            let (a, b) = (e.row(i), reference.row(i));
            let d = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            max_abs = max_abs.max(d);
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            min_cos = min_cos.min(dot / (norm(a) * norm(b)).max(1e-12));
        }
        println!(
            "parity with the CPU over {n} passages: max abs difference {max_abs:.2e}, lowest cosine {min_cos:.7}"
        );
    }
    // Short texts: the questions next to the corpus, when there are any.
    let questions_path = std::path::Path::new(&corpus_path).with_file_name("questions.json");
    if let Ok(raw) = std::fs::read_to_string(&questions_path) {
        let qs: Vec<serde_json::Value> = serde_json::from_str(&raw).unwrap_or_default();
        let qs: Vec<&str> = qs.iter().filter_map(|q| q["question"].as_str()).collect();
        if !qs.is_empty() {
            let t = Instant::now();
            encoder.encode(&qs).expect("encode questions");
            let secs = t.elapsed().as_secs_f64();
            println!(
                "questions: {} in {:.2} s, {:.1} per second",
                qs.len(),
                secs,
                qs.len() as f64 / secs
            );
        }
    }
    match peak_rss_mib() {
        Some(m) => println!("peak RSS: {m:.0} MiB"),
        None => println!("peak RSS: unavailable"),
    }
}

fn encoder_name(e: &SentenceEncoder) -> String {
    use lprag_core::Encoder;
    e.name().to_string()
}
