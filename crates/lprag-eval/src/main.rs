//! `lprag-eval`: the benchmark command line.
//!
//! ```text
//! lprag-eval retrieval --dataset DIR --retriever dense,bm25,hybrid \
//!     [--encoder hashing|hashing-unfitted|minilm] [--model-dir DIR] [--json OUT]
//!     [--format hipporag|multihop-rag|jsonl] [--limit N] [--no-progress]
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use lprag_core::{NoProgress, Progress};
use lprag_eval::datasets::{load_dir, DatasetFormat};
use lprag_eval::harness::{run_retrieval, EvalOptions};
use lprag_eval::registry::{build_encoder, parse_retriever_list, EncoderKind, RETRIEVERS};
use lprag_eval::{Error, Result};

/// Benchmark lprag retrievers on multi-hop QA data (HippoRAG protocol).
#[derive(Debug, Parser)]
#[command(name = "lprag-eval", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Passage retrieval: Recall@1/2/5/10, index time, query latency, tokens per query.
    Retrieval(RetrievalArgs),
    /// Answer quality (EM / F1 with an LLM reader): not available yet.
    Qa {
        /// Ignored for now.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct RetrievalArgs {
    /// Dataset directory (questions.json + corpus.json, NAME.json + NAME_corpus.json,
    /// MultiHopRAG.json + corpus.json, or questions.jsonl + corpus.jsonl).
    #[arg(long, value_name = "DIR")]
    dataset: PathBuf,
    /// Retrievers to run, comma separated.
    #[arg(long, value_name = "NAME[,NAME...]", default_value = "dense,bm25,hybrid",
          help = format!("Retrievers to run, comma separated (known: {})", RETRIEVERS.join(", ")))]
    retriever: String,
    /// Encoder for dense retrievers: `hashing` (IDF fitted on the corpus),
    /// `hashing-unfitted`, or `minilm`.
    #[arg(long, default_value = "hashing", value_name = "NAME")]
    encoder: String,
    /// Model directory for encoders with weights (`--encoder minilm`).
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
    /// Dataset format (default: detected from file names and the first record).
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// Run only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Do not draw progress bars.
    #[arg(long)]
    no_progress: bool,
    /// LP-RAG configuration as JSON (an `LpRagConfig`; missing fields take their defaults).
    #[arg(long, value_name = "FILE")]
    lprag_config: Option<PathBuf>,
    /// LP-RAG indexes atomic sentences instead of whole passages.
    #[arg(long)]
    lprag_sentences: bool,
    /// Cache embeddings in this directory (one file per dataset and encoder), so reruns
    /// embed nothing twice.
    #[arg(long, value_name = "DIR")]
    embedding_cache: Option<PathBuf>,
    /// Print LP-RAG's indexing and training progress.
    #[arg(long)]
    verbose: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Retrieval(args) => retrieval(args).await,
        Command::Qa { .. } => Err(Error::not_available(
            "`lprag-eval qa`",
            "answer evaluation needs an LLM reader (lprag-llm), which is not wired in yet; \
             EM / F1 are implemented in lprag_eval::metrics",
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

async fn retrieval(args: RetrievalArgs) -> Result<()> {
    let names = parse_retriever_list(&args.retriever);
    if names.is_empty() {
        return Err(Error::invalid("--retriever", "no retriever named"));
    }
    let encoder_kind: EncoderKind = args.encoder.parse()?;
    let format: Option<DatasetFormat> = args.format.as_deref().map(str::parse).transpose()?;

    let t = Instant::now();
    let mut dataset = load_dir(&args.dataset, format)?;
    if let Some(n) = args.limit {
        dataset.truncate_questions(n);
    }
    eprintln!(
        "{} ({}): {} questions, {} passages, {} gold passages ({} not in the corpus), \
         {} duplicate passages dropped; loaded in {:.2} s",
        dataset.name,
        dataset.format,
        dataset.questions.len(),
        dataset.corpus.len(),
        dataset.gold_passages(),
        dataset.unmatched_gold(),
        dataset.duplicates_dropped,
        t.elapsed().as_secs_f64()
    );
    if dataset.unmatched_gold() > 0 {
        for q in dataset
            .questions
            .iter()
            .filter(|q| !q.unmatched_gold.is_empty())
            .take(5)
        {
            eprintln!(
                "  question {}: gold not in corpus: {}",
                q.id,
                q.unmatched_gold.join(" | ")
            );
        }
    }

    let t = Instant::now();
    let mut encoder = build_encoder(encoder_kind, &dataset.corpus, args.model_dir.as_deref())?;
    if let Some(dir) = &args.embedding_cache {
        let file = dir.join(format!("{}-{}.bin", dataset.name, encoder_kind.as_str()));
        let cached = lprag_eval::cache::CachedEncoder::open(encoder, &file)?;
        eprintln!(
            "embedding cache {}: {} vectors",
            file.display(),
            cached.len()
        );
        encoder = std::sync::Arc::new(cached);
    }
    eprintln!(
        "encoder {} (dimension {}) ready in {:.2} s",
        encoder_kind,
        encoder.dimension(),
        t.elapsed().as_secs_f64()
    );

    let bars = Bars::new(!args.no_progress);
    let progress: &dyn Progress = if args.no_progress { &NoProgress } else { &bars };
    let mut options = EvalOptions::default();
    if let Some(path) = &args.lprag_config {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        options.retrievers.lprag = serde_json::from_str(&text).map_err(|source| Error::Json {
            path: path.clone(),
            source,
        })?;
    }
    options.retrievers.lprag_sentences = args.lprag_sentences;
    options.retrievers.verbose = args.verbose;
    let report = run_retrieval(
        &dataset,
        &names,
        encoder,
        encoder_kind.as_str(),
        &options,
        progress,
    )
    .await?;

    println!(
        "\n{}: {} questions, {} passages, encoder {}; passage-level Recall@k in %\n",
        report.dataset, report.questions, report.passages, report.encoder
    );
    print!("{}", report.to_markdown());
    if let Some(path) = &args.json {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Progress bars on stderr: a spinner per index stage, a bar per query stage.
struct Bars {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

impl Bars {
    fn new(draw: bool) -> Self {
        let target = if draw {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Self {
            multi: MultiProgress::with_draw_target(target),
            bars: Mutex::new(HashMap::new()),
        }
    }
}

impl Progress for Bars {
    fn start(&self, stage: &str, total: Option<u64>) {
        let bar = match total {
            Some(n) => {
                let b = self.multi.add(ProgressBar::new(n));
                b.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>16} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                );
                b
            }
            None => {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("{prefix:>16} {spinner} {elapsed}")
                        .expect("valid template"),
                );
                b.enable_steady_tick(Duration::from_millis(120));
                b
            }
        };
        bar.set_prefix(stage.to_string());
        self.bars
            .lock()
            .expect("progress lock")
            .insert(stage.to_string(), bar);
    }

    fn update(&self, stage: &str, done: u64, message: &str) {
        if let Some(b) = self.bars.lock().expect("progress lock").get(stage) {
            b.set_position(done);
            b.set_message(message.to_string());
        }
    }

    fn finish(&self, stage: &str) {
        if let Some(b) = self.bars.lock().expect("progress lock").remove(stage) {
            b.finish();
        }
    }
}
