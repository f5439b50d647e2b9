//! # Index a JSON Lines corpus without holding it
//!
//! `LpRagBuilder::build_from` reads its documents from a `DocumentSource` a block at a
//! time; `JsonLinesSource` is one over a JSON Lines file (one record a line: `text`, and
//! optionally `id`, `title` and metadata fields). The build never holds the corpus, so a
//! million passages index in the memory the index itself needs.
//!
//! ```text
//! cargo run --example index_jsonl                      # the bundled corpus, written to a temp file
//! cargo run --example index_jsonl -- corpus.jsonl [--work-dir DIR] [--features-on-disk]
//!     [--hashing] [--query "..."]
//! ```
//!
//! `--work-dir` keeps finished stages (an interrupted build resumes), `--features-on-disk`
//! keeps the vectors in that directory, mapped, instead of in memory; `--hashing` uses the
//! weight-free `HashingEncoder` instead of the default encoder.

use std::path::PathBuf;
use std::sync::Arc;

#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{HashingEncoder, JsonLinesSource, LpRag, Retriever, Selection, StderrProgress};

/// The command line: the file and the options above.
struct Args {
    file: Option<PathBuf>,
    work_dir: Option<PathBuf>,
    features_on_disk: bool,
    hashing: bool,
    query: String,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        file: None,
        work_dir: None,
        features_on_disk: false,
        hashing: false,
        query: "Which elements did Marie Curie discover?".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--work-dir" => out.work_dir = Some(it.next().ok_or("--work-dir needs a path")?.into()),
            "--features-on-disk" => out.features_on_disk = true,
            "--hashing" => out.hashing = true,
            "--query" => out.query = it.next().ok_or("--query needs a question")?,
            f if !f.starts_with("--") && out.file.is_none() => out.file = Some(f.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    let args = args().map_err(|e| lprag::Error::invalid("index_jsonl arguments", e))?;
    // Without a file: the bundled corpus as JSON Lines in a temporary directory.
    let temp = tempfile::tempdir().map_err(|e| lprag::Error::io("temporary directory", e))?;
    let file = match &args.file {
        Some(f) => f.clone(),
        None => {
            let path = temp.path().join("corpus.jsonl");
            let lines: Vec<String> = mini_corpus::documents()
                .iter()
                .map(|d| serde_json::json!({"id": d.id, "title": d.title, "text": d.text}))
                .map(|r| r.to_string())
                .collect();
            std::fs::write(&path, lines.join("\n")).map_err(|e| lprag::Error::io(&path, e))?;
            path
        }
    };

    let source = JsonLinesSource::open(&file)?;
    println!("{}: {} records", file.display(), source.len());
    let mut builder = LpRag::builder().progress(Arc::new(StderrProgress::new(25)));
    if args.hashing {
        builder = builder.encoder(Arc::new(HashingEncoder::default()));
    }
    if let Some(dir) = &args.work_dir {
        builder = builder
            .work_dir(dir)
            .features_on_disk(args.features_on_disk);
    }
    let rag = builder.build_from(&source).await?;
    let stats = rag.stats();
    println!(
        "indexed {} documents into {} chunks, {} synthetic queries ({:.1} s: {})",
        stats.documents,
        stats.chunks,
        stats.queries,
        stats.seconds.iter().map(|(_, s)| s).sum::<f64>(),
        stats
            .seconds
            .iter()
            .map(|(n, s)| format!("{n} {s:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("Q: {}", args.query);
    for (rank, hit) in rag
        .retrieve(&args.query, Selection::TopK(3))
        .await?
        .iter()
        .enumerate()
    {
        println!(
            "  {}. [{:.3}] {}: {}",
            rank + 1,
            hit.score,
            hit.chunk.provenance.document_id,
            hit.chunk.text.chars().take(90).collect::<String>()
        );
    }
    Ok(())
}
