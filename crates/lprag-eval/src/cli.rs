//! The `lprag-eval` command line ([`main`]), a library function so that another binary can
//! add chunk stores to `scale --store`: the stock binary knows `memory`, `lprag-lance`'s
//! `lprag-eval` example adds `lance:DIR`.
//!
//! ```text
//! lprag-eval retrieval --dataset DIR --retriever dense,bm25,hybrid \
//!     [--encoder hashing|hashing-unfitted|minilm|minilm-fp16] [--hashing-dim N] [--model-dir DIR] [--json OUT]
//!     [--format hipporag|multihop-rag|jsonl] [--limit N] [--no-progress]
//! lprag-eval scale --sizes 10000,100000 [--retriever dense,lprag] [--store memory] [--limit N] [--json OUT]
//! lprag-eval qa --dataset DIR --retriever dense,lprag [--top-k 5] \
//!     [--llm-base-url URL] [--llm-model NAME] [--llm-cache DIR] [--json OUT]
//! lprag-eval live-update --dataset DIR [--index DIR | --save DIR] [--clients 4] \
//!     [--seconds 10] [--updates 3] [--docs-per-update 10] [--json OUT]
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::datasets::{load_dir, DatasetFormat};
use crate::harness::{run_retrieval, EvalOptions};
use crate::registry::{build_encoder_on, parse_retriever_list, EncoderKind, RETRIEVERS};
use crate::scale::StoreParser;
use crate::{Error, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use lprag_core::{NoProgress, Progress};

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
    /// Answer quality: an LLM reader answers from each retriever's top chunks (LP-RAG's
    /// D.2 prompt); EM and token F1 against the gold answers.
    Qa(QaArgs),
    /// Scale: MuSiQue-100's questions on corpora padded to N passages with real
    /// distractors; index time per stage, query p50/p95 (and the ratio to flat dense
    /// search in the same run), peak RSS and recall per retriever and size.
    Scale(ScaleArgs),
    /// Updates that never block queries: query latency (p50/p95/p99/max) of concurrent
    /// clients idle, while documents are added and removed through `lprag::Live`, and
    /// under the old `RwLock` design, in one run.
    LiveUpdate(crate::live_bench::LiveArgs),
}

#[derive(Debug, Args)]
struct ScaleArgs {
    /// Corpus sizes in passages, comma separated (each ≥ 1,890, MuSiQue-100's own).
    #[arg(long, value_name = "N[,N...]", default_value = "10000")]
    sizes: String,
    /// Where the padded corpora are written (DIR/musique-N) and reused.
    #[arg(long, value_name = "DIR", default_value = "target/scale")]
    work: PathBuf,
    /// The corpus tool (default: $LPRAG_DATA/../tools/scale-corpus.py, else
    /// ../shared/tools/scale-corpus.py).
    #[arg(long, value_name = "FILE")]
    corpus_tool: Option<PathBuf>,
    /// Retrievers to run, comma separated; query p50 is also shown as a ratio to the
    /// first one.
    #[arg(long, value_name = "NAME[,NAME...]", default_value = "dense,lprag")]
    retriever: String,
    /// Encoder (`hashing`, `hashing-unfitted`, `minilm`, `minilm-fp16`).
    #[arg(long, default_value = "hashing", value_name = "NAME")]
    encoder: String,
    /// Width of the hashing encoder (default 1,024): narrower makes the dense scans and
    /// the exact k-NN graph proportionally cheaper, at a recall cost to measure.
    #[arg(long, value_name = "DIM")]
    hashing_dim: Option<usize>,
    /// Run only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// LP-RAG configuration: a JSON file (an `LpRagConfig`), or `paper` / `paper-mlp` /
    /// `paper-vgae` / `paper-peg` / `paper-seal` for `LpRagConfig::paper()` and its MLP,
    /// VGAE, PEG and SEAL variants.
    #[arg(
        long,
        value_name = "FILE|paper|paper-mlp|paper-vgae|paper-peg|paper-seal"
    )]
    lprag_config: Option<PathBuf>,
    /// LP-RAG candidate pools to evaluate on the same index, comma separated (`all` =
    /// every chunk); default: the configured pool only.
    #[arg(long, value_name = "P[,P...]")]
    pools: Option<String>,
    /// LP-RAG candidate searches to evaluate on the same index, comma separated: `rows`
    /// (alias `exact`: every chunk's row scanned), `columns` (the same chunks from the
    /// column-wise copy, `LpRagConfig::column_scan_from`) or a number of probed lists of an
    /// inverted-file index (`LpRagConfig::candidate_index`, √chunks lists); default: the
    /// configured search.
    #[arg(long, alias = "ivf-probes", value_name = "rows|columns|PROBES[,...]")]
    candidate_search: Option<String>,
    /// Chunk stores LP-RAG's candidate stage also searches, comma separated, each
    /// evaluated on the same index after the in-memory rows (`… store=NAME`): `memory`
    /// (`lprag::MemoryStore`, exact), and `lance:DIR` in the binary of lprag-lance's
    /// `lprag-eval` example (a Lance table per size under DIR, written once and reused).
    #[arg(long, value_name = "SPEC[,SPEC...]")]
    store: Option<String>,
    /// LeSeGR configuration as JSON (a `LesegrConfig`; missing fields take their
    /// defaults), for `lesegr` and `lesegr-lite`.
    #[arg(long, value_name = "FILE")]
    lesegr_config: Option<PathBuf>,
    /// GFM-RAG configuration as JSON (a `GfmConfig`; missing fields take their defaults),
    /// for `gfm`.
    #[arg(long, value_name = "FILE")]
    gfm_config: Option<PathBuf>,
    /// Print the indexing and training progress of every retriever that reports it.
    #[arg(long)]
    verbose: bool,
    /// Build LP-RAG, QCG-RAG, LeSeGR and GFM-RAG without the corpus's last N passages,
    /// then add them to the index (their `add_documents`) and report the time as stage
    /// `add` (`--lprag-add` is the old name).
    #[arg(
        long = "add",
        alias = "lprag-add",
        value_name = "N",
        default_value_t = 0
    )]
    lprag_add: usize,
    /// Keep LP-RAG's finished stages (chunks, embeddings, graph, synthetic queries) and
    /// per-epoch training checkpoints in DIR/musique-N, so an interrupted build resumes
    /// there and a rerun reuses what is unchanged.
    #[arg(long, value_name = "DIR")]
    lprag_work_dir: Option<PathBuf>,
    /// Keep LP-RAG's feature rows (chunk and question embeddings) in the work directory's
    /// features.bin, memory-mapped, instead of on the heap
    /// (`LpRagBuilder::features_on_disk`).
    #[arg(long, requires = "lprag_work_dir")]
    lprag_features_on_disk: bool,
    /// Save each size's LP-RAG index to DIR/musique-N once built (`LpRag::save`; the
    /// save is part of the index time), for `--lprag-answer-from`.
    #[arg(long, value_name = "DIR")]
    lprag_save: Option<PathBuf>,
    /// Do not build LP-RAG: open each size's index saved in DIR/musique-N to answer only
    /// (`LpRag::open_to_answer`): a row `lprag answer-only` in memory, or with `--store`
    /// one per store (`… answer-only store=NAME`, opened afresh with its own peak RSS; give
    /// one store per run for a clean peak). A store not made for that size yet is made
    /// first from the saved index (opened with its rows in memory for the write, then
    /// dropped; that run's memory figures carry what the allocator kept of it: rerun for
    /// clean ones).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["lprag_save", "lprag_work_dir"])]
    lprag_answer_from: Option<PathBuf>,
    /// With `--lprag-answer-from` and `--store`: hold no chunk row, read each query's rows
    /// from the store (`AnswerOptions::rows_from_store`; the store must keep the model's
    /// representations, as the stores made by this command do). Rows `… rows=store`.
    #[arg(long, requires_all = ["lprag_answer_from", "store"])]
    lprag_rows_from_store: bool,
    /// With `--lprag-answer-from` and `--store`: hold no chunk record, read the returned
    /// chunks' records from the store (`AnswerOptions::records_from_store`). Rows
    /// `… records=store`.
    #[arg(long, requires_all = ["lprag_answer_from", "store"])]
    lprag_records_from_store: bool,
    /// With `--lprag-answer-from`: read the chunk rows through a memory map of the saved
    /// graph file instead of copying them to the heap (`AnswerOptions::map_rows`). Rows
    /// `… rows=mapped`.
    #[arg(long, requires = "lprag_answer_from")]
    lprag_map_rows: bool,
    /// Checkpoint the training of `lesegr` and `gfm` after every epoch in
    /// DIR/musique-N/<retriever>, so an interrupted run resumes after its last finished
    /// epoch.
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct QaArgs {
    #[command(flatten)]
    common: RetrievalArgs,
    /// Chunks given to the reader.
    #[arg(long, default_value_t = 5, value_name = "K")]
    top_k: usize,
    /// Reader calls in flight at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    concurrency: usize,
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
    /// `hashing-unfitted`, `minilm`, or `minilm-fp16` (its dense layers in fp16 on a CPU
    /// with AVX-512-FP16).
    #[arg(long, default_value = "hashing", value_name = "NAME")]
    encoder: String,
    /// Width of the hashing encoder (default 1,024; the embedding cache file is named
    /// after it when set).
    #[arg(long, value_name = "DIM")]
    hashing_dim: Option<usize>,
    /// Model directory for encoders with weights (`--encoder minilm`); with
    /// `--embedding-cache-only`, only its tokenizer is read.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
    /// Dataset format (default: detected from file names and the first record):
    /// hipporag, multihop-rag, jsonl, beir.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// BEIR qrels split to evaluate (qrels/SPLIT.tsv; default test, else the only one).
    #[arg(long, value_name = "SPLIT")]
    split: Option<String>,
    /// Write TREC files to DIR: qrels.txt (the dataset's judgements) and one
    /// RETRIEVER.run per retriever, for trec_eval, ranx, ir_measures or pytrec_eval.
    #[arg(long, value_name = "DIR")]
    trec: Option<PathBuf>,
    /// Run only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Supervised mode: move N questions (picked by a hash of their ids) out of the
    /// evaluation into labelled training pairs for `lprag`, `lesegr` and `gfm`; every
    /// retriever is evaluated on the remaining questions only.
    #[arg(long, value_name = "N")]
    train_questions: Option<usize>,
    /// With `--train-questions`: hold the questions out but give no labels to any
    /// retriever (the unsupervised baseline on the same evaluation questions).
    #[arg(long)]
    holdout_only: bool,
    /// Do not draw progress bars.
    #[arg(long)]
    no_progress: bool,
    /// LP-RAG configuration: a JSON file (an `LpRagConfig`; missing fields take their
    /// defaults), or `paper` / `paper-mlp` / `paper-vgae` / `paper-peg` / `paper-seal` for
    /// `LpRagConfig::paper()` and its MLP, VGAE, PEG and SEAL variants.
    #[arg(
        long,
        value_name = "FILE|paper|paper-mlp|paper-vgae|paper-peg|paper-seal"
    )]
    lprag_config: Option<PathBuf>,
    /// LP-RAG indexes atomic sentences instead of whole passages.
    #[arg(long)]
    lprag_sentences: bool,
    /// LP-RAG keeps each passage whole even where it exceeds the encoder's input (the
    /// encoder cuts it) instead of splitting it to fit (the library's default).
    #[arg(long)]
    lprag_whole_passages: bool,
    /// Keep LP-RAG's finished stages and per-epoch training checkpoints in this directory,
    /// so an interrupted build resumes there and a rerun reuses what is unchanged.
    #[arg(long, value_name = "DIR")]
    lprag_work_dir: Option<PathBuf>,
    /// Keep LP-RAG's feature rows (chunk and question embeddings) in the work directory's
    /// features.bin, memory-mapped, instead of on the heap
    /// (`LpRagBuilder::features_on_disk`).
    #[arg(long, requires = "lprag_work_dir")]
    lprag_features_on_disk: bool,
    /// Checkpoint the training of `lesegr` and `gfm` after every epoch in DIR/<retriever>,
    /// so an interrupted run resumes after its last finished epoch.
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Save the LP-RAG index built here to this directory (`LpRag::save`).
    #[arg(long, value_name = "DIR")]
    lprag_save: Option<PathBuf>,
    /// Transfer (LP-RAG B.3): reuse the predictor of the LP-RAG index saved in this
    /// directory (another corpus, same encoder) without training (`transfer_from`).
    #[arg(long, value_name = "DIR")]
    lprag_transfer_from: Option<PathBuf>,
    /// LeSeGR configuration as JSON (a `LesegrConfig`; missing fields take their
    /// defaults), for `lesegr` and `lesegr-lite`.
    #[arg(long, value_name = "FILE")]
    lesegr_config: Option<PathBuf>,
    /// G²RAG configuration as JSON (a `G2Config`; missing fields take their defaults),
    /// for `g2`.
    #[arg(long, value_name = "FILE")]
    g2_config: Option<PathBuf>,
    /// GFM-RAG configuration as JSON (a `GfmConfig`; missing fields take their defaults),
    /// for `gfm`.
    #[arg(long, value_name = "FILE")]
    gfm_config: Option<PathBuf>,
    /// Cache embeddings in this directory (one file per dataset and encoder), so reruns
    /// embed nothing twice.
    #[arg(long, value_name = "DIR")]
    embedding_cache: Option<PathBuf>,
    /// With `--embedding-cache`: answer every text from the cache and fail on the first
    /// text it lacks, without loading the encoder (a machine without the encoder's weights
    /// reruns a benchmark whose texts were embedded elsewhere). With `--model-dir`, the
    /// tokenizer of that directory (no weights needed) splits long passages as the encoder
    /// would; without it, passages are not split.
    #[arg(long, requires = "embedding_cache")]
    embedding_cache_only: bool,
    /// Where LP-RAG trains and scores and the MiniLM encoder embeds: `cpu` (default),
    /// `cuda:N` (a build with the `cuda` feature) or `wgpu:N` (the `wgpu` feature).
    #[arg(long, value_name = "DEVICE", default_value = "cpu")]
    device: String,
    /// Print LP-RAG's, LeSeGR's, G²RAG's and GFM-RAG's indexing and training progress.
    #[arg(long)]
    verbose: bool,
    /// The LLM writes the synthetic queries of `lprag` (S-PROMPT) and `qcg` (Doc2Query)
    /// instead of the offline generator; answers are cached in --llm-cache.
    #[arg(long)]
    query_llm: bool,
    /// OpenAI-compatible base URL of the LLM (reader, --query-llm) (default:
    /// LPRAG_LLM_BASE_URL, else OPENAI_BASE_URL; OpenAI's only when neither is set and an
    /// API key is).
    #[arg(long, value_name = "URL")]
    llm_base_url: Option<BaseUrlArg>,
    /// LLM model (default: LPRAG_LLM_MODEL). The API key comes from LPRAG_LLM_API_KEY or
    /// OPENAI_API_KEY only, never from the command line.
    #[arg(long, value_name = "NAME")]
    llm_model: Option<String>,
    /// LLM answers are cached here, so an interrupted run resumes and a rerun is free.
    #[arg(long, value_name = "DIR", default_value = "target/lprag-llm-cache")]
    llm_cache: PathBuf,
    /// Query-writer calls in flight at once (--query-llm). A local server that answers one
    /// request at a time wants 1-2: queued requests count against the HTTP timeout.
    #[arg(long, default_value_t = 8, value_name = "N")]
    llm_concurrency: usize,
    /// Seconds one LLM request may take, time queued at the server included (a slow local
    /// model writing 2,000 Doc2Query tokens needs more than the default).
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    llm_timeout: u64,
    /// Keep answers that stayed unreadable after their retries in --llm-cache (default:
    /// deleted, so a rerun asks anew). At temperature 0 the model writes them again, so
    /// keeping them makes a rerun free, fallbacks included.
    #[arg(long)]
    llm_keep_unreadable: bool,
}

/// `--llm-base-url` as given; its `Debug` (that of the parsed command line) hides the
/// URL's credentials and query values.
#[derive(Clone)]
struct BaseUrlArg(String);

impl std::str::FromStr for BaseUrlArg {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

impl std::fmt::Debug for BaseUrlArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&lprag::llm::redact_url(&self.0))
    }
}

/// `--lprag-config`: a preset name or a JSON file.
fn lprag_config(arg: &std::path::Path) -> Result<lprag::LpRagConfig, Error> {
    match arg.to_str() {
        Some("paper") => Ok(lprag::LpRagConfig::paper()),
        Some("paper-mlp") => Ok(lprag::LpRagConfig::paper_mlp()),
        Some("paper-vgae") => Ok(lprag::LpRagConfig::paper_vgae()),
        Some("paper-peg") => Ok(lprag::LpRagConfig::paper_peg()),
        Some("paper-seal") => Ok(lprag::LpRagConfig::paper_seal()),
        _ => read_json(arg),
    }
}

/// A JSON configuration file, missing fields defaulted by the type.
fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Run the command line of this process's arguments; `stores` are the chunk stores
/// `scale --store` knows (the stock binary passes [`crate::scale::memory_store`]).
/// Installs a `tracing` subscriber (`RUST_LOG`, default `warn`) and prints an error with
/// its causes to standard error.
pub async fn main(stores: &[StoreParser]) -> ExitCode {
    // Spans and events of the library (RUST_LOG=info shows the build stages and retrieves' spans).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Retrieval(args) => retrieval(args).await,
        Command::Qa(args) => qa(args).await,
        Command::Scale(args) => scale(args, stores).await,
        Command::LiveUpdate(args) => {
            match args.lprag_config.as_deref().map(lprag_config).transpose() {
                Ok(config) => crate::live_bench::command(args, config).await,
                Err(e) => Err(e),
            }
        }
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

/// `lprag-eval scale`: each retriever over corpora of each size; the table and the JSON.
async fn scale(args: ScaleArgs, parsers: &[StoreParser]) -> Result<()> {
    use crate::scale::{parse_stores, scale_markdown, CandidateSearch, Variants};
    let sizes = parse_sizes(&args.sizes)?;
    let names = parse_retriever_list(&args.retriever);
    if names.is_empty() {
        return Err(Error::invalid("--retriever", "no retriever named"));
    }
    let tool = args.corpus_tool.clone().unwrap_or_else(|| {
        std::env::var_os("LPRAG_DATA")
            .map(|d| PathBuf::from(d).join("../tools/scale-corpus.py"))
            .unwrap_or_else(|| PathBuf::from("../shared/tools/scale-corpus.py"))
    });
    let pools = parse_pools(args.pools.as_deref())?;
    let searches: Vec<CandidateSearch> = match &args.candidate_search {
        None => Vec::new(),
        Some(list) => list.split(',').map(str::parse).collect::<Result<_>>()?,
    };
    let encoder_kind: EncoderKind = args.encoder.parse()?;
    let mut options = scale_options(&args)?;
    let stores = match &args.store {
        None => Vec::new(),
        Some(list) => parse_stores(list, parsers)?,
    };
    let variants = Variants {
        pools: &pools,
        searches: &searches,
        stores: &stores,
    };
    let mut rows = Vec::new();
    for &n in &sizes {
        let got = scale_size(
            &args,
            n,
            &tool,
            encoder_kind,
            &names,
            &mut options,
            &variants,
        );
        rows.extend(got.await?);
    }
    println!(
        "\nscale benchmark, encoder {}{}; passage-level Recall@k in %, latency per question\n",
        encoder_kind,
        args.hashing_dim
            .map(|d| format!(" ({d} dimensions)"))
            .unwrap_or_default()
    );
    print!("{}", scale_markdown(&rows, &names[0]));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows).map_err(|source| Error::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(path, text).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// `--sizes`: comma-separated corpus sizes.
fn parse_sizes(sizes: &str) -> Result<Vec<usize>> {
    sizes
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::invalid("--sizes", format!("{sizes}: {e}")))
}

/// `--pools`: comma-separated candidate pools, `all` for every chunk (`None`); none
/// without the flag.
fn parse_pools(pools: Option<&str>) -> Result<Vec<Option<usize>>> {
    Ok(match pools {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|p| match p.trim() {
                "all" => Ok(None),
                n => n
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|e| Error::invalid("--pools", format!("{n}: {e}"))),
            })
            .collect::<Result<_>>()?,
    })
}

/// The evaluation options of `scale`'s command line (the per-size folders are set by
/// [`scale_size`]).
fn scale_options(args: &ScaleArgs) -> Result<EvalOptions> {
    let mut options = EvalOptions::default();
    if let Some(path) = &args.lprag_config {
        options.retrievers.lprag = lprag_config(path)?;
    }
    if let Some(path) = &args.lesegr_config {
        options.retrievers.lesegr = read_json(path)?;
    }
    if let Some(path) = &args.gfm_config {
        options.retrievers.gfm = Some(read_json(path)?);
    }
    options.retrievers.verbose = args.verbose;
    options.retrievers.lprag_add_last = args.lprag_add;
    Ok(options)
}

/// One corpus size `n`: write (or reuse) the padded corpus, load it, run every
/// retriever on it and print a line per retriever; the rows.
async fn scale_size(
    args: &ScaleArgs,
    n: usize,
    tool: &std::path::Path,
    encoder_kind: EncoderKind,
    names: &[String],
    options: &mut EvalOptions,
    variants: &crate::scale::Variants<'_>,
) -> Result<Vec<crate::scale::ScaleResult>> {
    use crate::scale::{make_corpus, run_scale};
    let dir = args.work.join(format!("musique-{n}"));
    make_corpus(tool, n, &dir)?;
    let mut dataset = load_dir(&dir, None)?;
    if let Some(limit) = args.limit {
        dataset.truncate_questions(limit);
    }
    let encoder = build_encoder_on(
        encoder_kind,
        &dataset.corpus,
        None,
        args.hashing_dim,
        options.retrievers.device,
    )?;
    options.retrievers.lprag_work_dir = args
        .lprag_work_dir
        .as_ref()
        .map(|d| d.join(format!("musique-{n}")));
    options.retrievers.lprag_save = args
        .lprag_save
        .as_ref()
        .map(|d| d.join(format!("musique-{n}")));
    options.retrievers.lprag_answer_from = args
        .lprag_answer_from
        .as_ref()
        .map(|d| d.join(format!("musique-{n}")));
    options.retrievers.lprag_features_on_disk = args.lprag_features_on_disk;
    options.retrievers.lprag_rows_from_store = args.lprag_rows_from_store;
    options.retrievers.lprag_records_from_store = args.lprag_records_from_store;
    options.retrievers.lprag_map_rows = args.lprag_map_rows;
    options.retrievers.checkpoint_dir = args
        .checkpoint_dir
        .as_ref()
        .map(|d| d.join(format!("musique-{n}")));
    eprintln!(
        "{}: {} questions, {} passages",
        dir.display(),
        dataset.questions.len(),
        dataset.corpus.len()
    );
    let progress = Bars::new(false);
    let got = run_scale(&dataset, names, encoder, options, variants, &progress).await?;
    for r in &got {
        eprintln!(
            "  {} at {n}: p50 {:.2} ms, index {:.1} s",
            r.result.retriever, r.result.query_ms_p50, r.result.index_seconds
        );
    }
    Ok(got)
}

/// Everything both commands set up: dataset, retriever names, encoder, options, bars.
struct Prepared {
    dataset: crate::datasets::Dataset,
    names: Vec<String>,
    encoder: std::sync::Arc<dyn lprag_core::Encoder>,
    encoder_name: &'static str,
    options: EvalOptions,
    bars: Bars,
}

async fn retrieval(args: RetrievalArgs) -> Result<()> {
    let p = prepare(&args)?;
    let progress: &dyn Progress = if args.no_progress {
        &NoProgress
    } else {
        &p.bars
    };
    let report = run_retrieval(
        &p.dataset,
        &p.names,
        p.encoder,
        p.encoder_name,
        &p.options,
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
    if let Some(dir) = &args.trec {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        crate::trec::write_qrels(dir.join("qrels.txt"), &p.dataset)?;
        for r in &report.results {
            let path = dir.join(format!("{}.run", r.retriever));
            crate::trec::write_run(&path, &p.dataset, r, &r.retriever)?;
        }
        eprintln!(
            "wrote qrels.txt and {} run files to {}",
            report.results.len(),
            dir.display()
        );
    }
    Ok(())
}

/// The LLM named by `--llm-model`/`--llm-base-url` or the environment, behind a response
/// cache in `--llm-cache`.
fn open_llm(
    args: &RetrievalArgs,
    what: &str,
    concurrency: usize,
) -> Result<lprag::llm::CachedChat> {
    use lprag::llm::{CachedChat, LlmEnv, OpenAiChat};
    let config = llm_config(args, what, concurrency, &LlmEnv::from_process())?;
    eprintln!("{}", llm_banner(what, &config));
    let chat = OpenAiChat::new(config).map_err(lprag_core::Error::from)?;
    Ok(CachedChat::open(std::sync::Arc::new(chat), &args.llm_cache)
        .map_err(lprag_core::Error::from)?
        .keep_unreadable(args.llm_keep_unreadable))
}

/// The LLM configuration of `args` and `env`: `--llm-base-url` beats `LPRAG_LLM_BASE_URL`,
/// `--llm-model` beats `LPRAG_LLM_MODEL`, and OpenAI's public endpoint is used only when no
/// base URL is set anywhere (and a key is), so a corpus never goes to a server nobody named.
fn llm_config(
    args: &RetrievalArgs,
    what: &str,
    concurrency: usize,
    env: &lprag::llm::LlmEnv,
) -> Result<lprag::llm::OpenAiConfig> {
    let mut config = lprag::llm::OpenAiConfig::resolve(
        args.llm_base_url.as_ref().map(|u| u.0.as_str()),
        args.llm_model.as_deref(),
        env,
    )
    .map_err(|e| Error::invalid(what, format!("{e} (--llm-model, --llm-base-url)")))?;
    config.http.max_concurrency = concurrency.max(1);
    config.http.timeout = std::time::Duration::from_secs(args.llm_timeout.max(1));
    Ok(config)
}

/// The line saying which LLM `what` uses, its URL's credentials and query values hidden.
fn llm_banner(what: &str, config: &lprag::llm::OpenAiConfig) -> String {
    format!(
        "{what}: {} at {}",
        config.model,
        lprag::llm::redact_url(&config.base_url)
    )
}

async fn qa(args: QaArgs) -> Result<()> {
    let reader = open_llm(&args.common, "reader", args.concurrency)?;
    let cache = reader.cache().clone();
    let p = prepare(&args.common)?;
    let progress: &dyn Progress = if args.common.no_progress {
        &NoProgress
    } else {
        &p.bars
    };
    let options = crate::qa::QaOptions {
        top_k: args.top_k,
        concurrency: args.concurrency,
        keep_predictions: true,
        eval: p.options,
    };
    let report = crate::qa::run_qa(
        &p.dataset,
        &p.names,
        p.encoder,
        p.encoder_name,
        std::sync::Arc::new(reader),
        &options,
        progress,
    )
    .await?;
    println!(
        "\n{}: {} questions, reader {}, top {} chunks; EM / F1 / context recall in %\n",
        report.dataset, report.questions, report.reader, report.top_k
    );
    print!("{}", report.to_markdown());
    let s = cache.stats();
    eprintln!(
        "reader cache {}: {} hits, {} misses",
        cache.dir().display(),
        s.hits,
        s.misses
    );
    if let Some(path) = &args.common.json {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Parse the common arguments, load the dataset, ready the encoder and the options.
fn prepare(args: &RetrievalArgs) -> Result<Prepared> {
    let names = parse_retriever_list(&args.retriever);
    if names.is_empty() {
        return Err(Error::invalid("--retriever", "no retriever named"));
    }
    let encoder_kind: EncoderKind = args.encoder.parse()?;
    let format: Option<DatasetFormat> = args.format.as_deref().map(str::parse).transpose()?;
    let (dataset, labelled) = load_dataset(args, format)?;

    let t = Instant::now();
    let device: lprag::ComputeDevice = args.device.parse()?;
    let encoder = open_encoder(args, encoder_kind, &dataset, device)?;
    eprintln!(
        "encoder {} (dimension {}) ready in {:.2} s",
        encoder_kind,
        encoder.dimension(),
        t.elapsed().as_secs_f64()
    );

    let bars = Bars::new(!args.no_progress);
    let options = eval_options(args, device, labelled)?;
    Ok(Prepared {
        dataset,
        names,
        encoder,
        encoder_name: encoder_kind.as_str(),
        options,
        bars,
    })
}

/// Load the dataset (`--split`: BEIR), keep `--limit` questions, set the training
/// questions aside, and describe it on stderr; the dataset and the labelled pairs to
/// train on.
fn load_dataset(
    args: &RetrievalArgs,
    format: Option<DatasetFormat>,
) -> Result<(crate::datasets::Dataset, lprag::Labelled)> {
    let t = Instant::now();
    let mut dataset = match &args.split {
        Some(split) => crate::datasets::load_beir(&args.dataset, Some(split))?,
        None => load_dir(&args.dataset, format)?,
    };
    if let Some(n) = args.limit {
        dataset.truncate_questions(n);
    }
    let labelled = training_pairs(args, &mut dataset);
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
    Ok((dataset, labelled))
}

/// With `--train-questions N`: take N questions out of `dataset` (said on stderr) and
/// return them to train on (none with `--holdout-only`); otherwise none.
fn training_pairs(args: &RetrievalArgs, dataset: &mut crate::datasets::Dataset) -> lprag::Labelled {
    match args.train_questions {
        Some(n) if n > 0 => {
            let pairs = dataset.split_for_training(n);
            eprintln!(
                "supervised mode: {} questions {}, {} are evaluated",
                pairs.len(),
                if args.holdout_only {
                    "held out unused (--holdout-only)"
                } else {
                    "train lprag/lesegr/gfm"
                },
                dataset.questions.len()
            );
            if args.holdout_only {
                Vec::new()
            } else {
                pairs
            }
        }
        _ => Vec::new(),
    }
}

/// The encoder: built (or, with `--embedding-cache-only`, answering from the cache
/// alone), behind the `--embedding-cache` file when there is one.
fn open_encoder(
    args: &RetrievalArgs,
    encoder_kind: EncoderKind,
    dataset: &crate::datasets::Dataset,
    device: lprag::ComputeDevice,
) -> Result<std::sync::Arc<dyn lprag_core::Encoder>> {
    // Checked before the cache-only path, which builds no encoder.
    crate::registry::check_hashing_dim(encoder_kind, args.hashing_dim)?;
    let cache_file = args.embedding_cache.as_ref().map(|dir| {
        let width = args
            .hashing_dim
            .map(|d| format!("-{d}"))
            .unwrap_or_default();
        dir.join(format!(
            "{}-{}{width}.bin",
            dataset.name,
            encoder_kind.as_str()
        ))
    });
    let mut encoder = match &cache_file {
        Some(file) if args.embedding_cache_only => {
            let mut only = crate::cache::CacheOnly::for_file(encoder_kind.as_str(), file)?;
            // The tokenizer alone (no weights) makes passages split as with the encoder.
            if let (true, Some(dir)) = (encoder_kind.is_minilm(), &args.model_dir) {
                only = only.with_tokens(lprag::model::bert::TokenCounter::from_dir(dir)?);
            }
            std::sync::Arc::new(only)
        }
        _ => build_encoder_on(
            encoder_kind,
            &dataset.corpus,
            args.model_dir.as_deref(),
            args.hashing_dim,
            device,
        )?,
    };
    if let Some(file) = &cache_file {
        let cached = crate::cache::CachedEncoder::open(encoder, file)?;
        eprintln!(
            "embedding cache {}: {} vectors",
            file.display(),
            cached.len()
        );
        encoder = std::sync::Arc::new(cached);
    }
    Ok(encoder)
}

/// The evaluation options of the command line (`--query-llm` opens the LLM here).
fn eval_options(
    args: &RetrievalArgs,
    device: lprag::ComputeDevice,
    labelled: lprag::Labelled,
) -> Result<EvalOptions> {
    let mut options = EvalOptions {
        keep_rankings: args.trec.is_some(),
        ..EvalOptions::default()
    };
    if let Some(path) = &args.lprag_config {
        options.retrievers.lprag = lprag_config(path)?;
    }
    if let Some(path) = &args.lesegr_config {
        options.retrievers.lesegr = read_json(path)?;
    }
    if let Some(path) = &args.g2_config {
        options.retrievers.g2 = read_json(path)?;
    }
    if let Some(path) = &args.gfm_config {
        options.retrievers.gfm = Some(read_json(path)?);
    }
    if args.query_llm {
        let llm = open_llm(args, "query writer", args.llm_concurrency)?;
        options.retrievers.query_llm_concurrency = args.llm_concurrency;
        options.retrievers.query_llm = Some(crate::registry::QueryLlm(std::sync::Arc::new(llm)));
    }
    options.retrievers.lprag_sentences = args.lprag_sentences;
    options.retrievers.device = device;
    options.retrievers.lprag_whole_passages = args.lprag_whole_passages;
    options.retrievers.lprag_work_dir = args.lprag_work_dir.clone();
    options.retrievers.lprag_features_on_disk = args.lprag_features_on_disk;
    options.retrievers.checkpoint_dir = args.checkpoint_dir.clone();
    options.retrievers.lprag_save = args.lprag_save.clone();
    options.retrievers.lprag_transfer_from = args.lprag_transfer_from.clone();
    options.retrievers.verbose = args.verbose;
    options.retrievers.labelled = labelled;
    Ok(options)
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

    fn tick(&self, stage: &str, message: &str) {
        if let Some(b) = self.bars.lock().expect("progress lock").get(stage) {
            b.set_message(message.to_string());
        }
    }

    fn finish(&self, stage: &str) {
        if let Some(b) = self.bars.lock().expect("progress lock").remove(stage) {
            b.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag::llm::{ApiKey, LlmEnv};

    /// `lprag-eval qa --dataset d` with `flags`, and the LLM configuration it makes in `env`.
    fn config(flags: &[&str], env: LlmEnv) -> Result<lprag::llm::OpenAiConfig> {
        let mut argv = vec!["lprag-eval", "qa", "--dataset", "d"];
        argv.extend_from_slice(flags);
        let Command::Qa(args) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!("a qa command line")
        };
        llm_config(&args.common, "reader", 3, &env)
    }

    const LOCAL: &str = "http://127.0.0.1:9/v1";

    #[test]
    fn llm_model_flag_with_the_base_url_in_the_environment_uses_that_url() {
        let env = LlmEnv {
            base_url: Some(LOCAL.into()),
            ..LlmEnv::default()
        };
        let c = config(&["--llm-model", "m"], env).unwrap();
        assert_eq!(c.base_url, LOCAL);
        assert_eq!(c.model, "m");
        assert_eq!(c.http.max_concurrency, 3);
    }

    #[test]
    fn llm_base_url_flag_beats_the_environment() {
        let env = LlmEnv {
            base_url: Some("http://env:1/v1".into()),
            model: Some("env-model".into()),
            ..LlmEnv::default()
        };
        let c = config(&["--llm-base-url", LOCAL], env.clone()).unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            (LOCAL, "env-model")
        );
        let c = config(&[], env).unwrap();
        assert_eq!(c.base_url, "http://env:1/v1");
    }

    #[test]
    fn the_public_endpoint_needs_no_base_url_anywhere_and_a_key() {
        let err = config(&["--llm-model", "m"], LlmEnv::default()).unwrap_err();
        assert!(err.to_string().contains("no LLM base URL"), "{err}");
        let env = LlmEnv {
            api_key: Some(ApiKey::new("sk-x")),
            ..LlmEnv::default()
        };
        let c = config(&["--llm-model", "m"], env).unwrap();
        assert_eq!(c.base_url, lprag::llm::OpenAiConfig::OPENAI_BASE_URL);
        let err = config(&[], LlmEnv::default()).unwrap_err();
        assert!(err.to_string().contains("--llm-model"), "{err}");
    }

    #[test]
    fn the_llm_line_hides_url_credentials_and_query_values() {
        let c = config(
            &[
                "--llm-model",
                "m",
                "--llm-base-url",
                "https://me:hunter2@h/v1?key=sk-abc",
            ],
            LlmEnv::default(),
        )
        .unwrap();
        let line = llm_banner("reader", &c);
        assert_eq!(line, "reader: m at https://***:***@h/v1?key=***");
        let cli = Cli::try_parse_from([
            "lprag-eval",
            "qa",
            "--dataset",
            "d",
            "--llm-base-url",
            "https://me:hunter2@h/v1?key=sk-abc",
        ])
        .unwrap();
        let shown = format!("{cli:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("sk-abc"),
            "{shown}"
        );
        assert!(shown.contains("https://***:***@h/v1?key=***"), "{shown}");
    }
}
