//! A process that only answers: a saved LP-RAG index opened beside its Lance table holding
//! no chunk row and no chunk record (`AnswerOptions::rows_from_store` and
//! `records_from_store`): each query reads what it needs from the table. Prints the first
//! questions' best hits, the query times, and (on Linux) the process's memory after each
//! step.
//!
//! ```sh
//! cargo run --manifest-path crates/lprag-lance/Cargo.toml --example answer_from_lance -- \
//!     [INDEX_DIR TABLE_DIR DATASET_DIR [PASSES]]
//! ```
//!
//! Without arguments it builds a small index and its table in a temporary directory and
//! answers one question. With them: INDEX_DIR an index `lprag-eval scale --lprag-save` saved,
//! TABLE_DIR the Lance database `scale --store lance:DIR` wrote it into (with the model's
//! representations; `?nprobes=N&ef=N&refine=N` after it sets the search, by default
//! `nprobes=40&ef=400&refine=10`), DATASET_DIR the benchmark's corpus and questions; the corpus only
//! fits the hashing encoder the benchmark used and is dropped before the index is opened,
//! and the peak is reset there, so the figures after it are the index's and LanceDB's.
//! PASSES (default 1) asks the questions that many times, printing the memory after each
//! pass (whether it settles). The process allocates with the system allocator.

use std::sync::Arc;
use std::time::Instant;

use lprag::{AnswerOptions, Encoder, HashingEncoder, LpRag, NoProgress, Retriever, Selection};
use lprag_lance::{LanceStore, SearchParams, StoreSpec, DEFAULT_TABLE};

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The process's resident and peak resident memory in GB (Linux), for the printout.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or("?".to_string(), |kb| format!("{:.2}", kb * 1024.0 / 1e9))
    };
    format!("RSS {} GB, peak {} GB", field("VmRSS:"), field("VmHWM:"))
}

/// A small index and its Lance table (with the model's representations) under `dir`.
async fn make_example(dir: &std::path::Path) -> Result<(String, String), BoxError> {
    let docs = mini_corpus::documents();
    let mut rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&docs)
        .await?;
    rag.set_candidates(Some(3), true);
    let index = dir.join("index");
    rag.save(&index)?;
    let uri = dir.join("db").to_string_lossy().into_owned();
    let rd = rag
        .predictor()
        .stored_representation_dim()
        .ok_or("the built-in predictor keeps representations")?;
    let spec = StoreSpec::new(rag.graph().features.dim()).with_representations(rd);
    let store = LanceStore::create(&uri, spec).await?;
    rag.write_store(&store, &NoProgress).await?;
    Ok((index.to_string_lossy().into_owned(), uri))
}

/// `DIR[?nprobes=N&ef=N&refine=N]`: the directory and the search parameters.
fn search_params(spec: &str) -> Result<(String, SearchParams), BoxError> {
    let mut search = SearchParams {
        nprobes: Some(40),
        ef: Some(400),
        refine_factor: Some(10),
    };
    let (dir, options) = spec.split_once('?').unwrap_or((spec, ""));
    for option in options.split('&').filter(|o| !o.is_empty()) {
        let (key, value) = option.split_once('=').unwrap_or((option, ""));
        let bad = || format!("{spec}: {option} is not a count");
        match key {
            "nprobes" => search.nprobes = Some(value.parse().map_err(|_| bad())?),
            "ef" => search.ef = Some(value.parse().map_err(|_| bad())?),
            "refine" => search.refine_factor = Some(value.parse().map_err(|_| bad())?),
            _ => return Err(format!("{spec}: unknown option {key} (nprobes, ef, refine)").into()),
        }
    }
    Ok((dir.to_string(), search))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    println!("start: {}", memory());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let temp = tempfile::tempdir()?;
    let (index, uri, encoder, questions): (String, String, Arc<dyn Encoder>, Vec<String>) =
        match args.get(..3.min(args.len())).unwrap_or_default() {
            [index, uri, dataset] => {
                let data = lprag_eval::datasets::load_dir(dataset, None)?;
                let encoder = lprag_eval::registry::build_encoder(
                    lprag_eval::registry::EncoderKind::Hashing,
                    &data.corpus,
                    None,
                )?;
                let questions = data.questions.into_iter().map(|q| q.question).collect();
                (index.clone(), uri.clone(), encoder, questions)
            }
            [] => {
                let (index, uri) = make_example(temp.path()).await?;
                let question = "Which river flows through the city where Marie Curie was born?";
                let encoder = Arc::new(HashingEncoder::default());
                (index, uri, encoder, vec![question.into()])
            }
            _ => return Err("arguments: [INDEX_DIR TABLE_DIR DATASET_DIR [PASSES]]".into()),
        };
    // The corpus read to fit the encoder is freed: give its pages back (glibc keeps them
    // otherwise), so that what follows starts from the encoder's own memory.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system; no pointer is read.
    unsafe {
        libc::malloc_trim(0);
    }
    println!("encoder ready: {}", memory());
    // What follows is the answering process proper (Linux: peak reset here).
    let _ = std::fs::write("/proc/self/clear_refs", "5");

    let (uri, search) = search_params(&uri)?;
    let t = Instant::now();
    let store = LanceStore::open(&uri, DEFAULT_TABLE).await?;
    store.set_search(search);
    println!("table opened: {}", memory());
    let rag = LpRag::open_to_answer(
        &index,
        AnswerOptions {
            encoder: Some(encoder),
            store: Some(Arc::new(store)),
            rows_from_store: true,
            records_from_store: true,
            ..AnswerOptions::default()
        },
    )
    .await?;
    println!(
        "index opened in {:.1} s ({} chunks, none held): {}",
        t.elapsed().as_secs_f64(),
        rag.num_chunks(),
        memory()
    );

    let passes: usize = match args.get(3) {
        Some(p) => p.parse().map_err(|_| format!("PASSES: not a count: {p}"))?,
        None => 1,
    };
    let mut ms = Vec::with_capacity(questions.len() * passes);
    for pass in 1..=passes {
        for (i, q) in questions.iter().enumerate() {
            let t = Instant::now();
            let hits = rag.retrieve(q, Selection::TopK(5)).await?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            if pass == 1 && i < 3 {
                let best = hits
                    .first()
                    .map_or("(none)".to_string(), |h| h.chunk.provenance.title.clone());
                println!("{q}\n  best: {best}");
            }
        }
        if passes > 1 {
            println!("pass {pass}: {}", memory());
        }
    }
    if ms.is_empty() {
        return Err("no questions".into());
    }
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    println!(
        "{} questions: p50 {:.2} ms, p95 {:.2} ms; {}",
        ms.len(),
        at(0.5),
        at(0.95),
        memory()
    );
    Ok(())
}
