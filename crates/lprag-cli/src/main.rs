//! `lprag`: index a folder of files, keep the index in sync, query it, serve it over HTTP.
//!
//! ```text
//! lprag index notes/ --index notes.idx          # load, chunk, embed, build (resumable)
//! lprag sync notes/ --index notes.idx           # only what changed since, then saved
//! lprag query notes.idx "how do I deploy?" -k 5 # ranked chunks; --json for machines
//! lprag serve notes.idx                         # HTTP JSON on 127.0.0.1:8080
//! ```
//!
//! An index directory holds `lprag.json` (what was built and how: retriever, encoder,
//! chunker, source folder), `index/` (the retriever's saved index) and `work/` (LP-RAG's
//! resumable work directory). Every error is printed with its `Display` and exits 1.

mod serve;
mod settings;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lprag::ComputeDevice;
use settings::{EncoderChoice, RetrieverKind};

/// `--device`: a device name this build can run on (its cargo feature is built).
fn parse_device(text: &str) -> Result<ComputeDevice, String> {
    let device = text.parse::<ComputeDevice>().map_err(|e| e.to_string())?;
    device.to_burn().map_err(|e| e.to_string())?;
    Ok(device)
}

/// `--device` and `--fp16`, taken by every command.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct DeviceArg {
    /// Where the MiniLM encoder and LP-RAG's, LeSeGR's and GFM-RAG's networks run: `cpu`
    /// (default), `wgpu:N` or `cuda:N` (a build with the `wgpu` or `cuda` feature).
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = parse_device)]
    pub(crate) device: ComputeDevice,
    /// Run the MiniLM encoder's dense layers in fp16 on a CPU with AVX-512-FP16 (about
    /// 1.4× faster; vectors within a cosine of 0.99999 of f32, so an index built either
    /// way answers either way). Elsewhere it changes nothing.
    #[arg(long)]
    pub(crate) fp16: bool,
}

/// Graph RAG over your files: index a folder, keep it in sync, query it, serve it.
#[derive(Parser, Debug)]
#[command(name = "lprag", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Show only warnings and errors (no progress).
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Index the files under DIR (Markdown, text, HTML, JSON/JSONL, PDF unless built
    /// with `--no-default-features`), honouring .gitignore. Resumable: run it again after an
    /// interruption.
    Index(IndexArgs),
    /// Bring an index in line with DIR: add new files, update changed ones (content hash),
    /// remove deleted ones, then save. Unchanged files cost nothing.
    Sync(SyncArgs),
    /// Ask an index a question; prints the best chunks.
    Query(QueryArgs),
    /// Serve an index over HTTP (JSON): search, batch search, document updates, stats.
    Serve(ServeArgs),
}

/// `lprag index`.
#[derive(clap::Args, Debug)]
struct IndexArgs {
    /// The folder to index.
    dir: PathBuf,
    /// Where the index goes (a new or empty directory, or an lprag index to rebuild).
    #[arg(long)]
    index: PathBuf,
    /// The retriever.
    #[arg(long, value_enum, default_value_t = RetrieverKind::Lprag)]
    retriever: RetrieverKind,
    /// The encoder: `auto` is MiniLM when its weights are found (LPRAG_MODEL_DIR or the
    /// Hugging Face cache), else the offline hashing encoder.
    #[arg(long, value_enum, default_value_t = EncoderChoice::Auto)]
    encoder: EncoderChoice,
    /// A sentence-transformers model directory or Hugging Face id (with `--encoder minilm`).
    #[arg(long)]
    model: Option<String>,
    /// The most tokens per chunk (the encoder's input limit caps it too).
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// An LLM (OpenAI-compatible chat API) for propositions and questions: its model name.
    #[arg(long)]
    llm: Option<String>,
    /// The LLM server's base URL (else LPRAG_LLM_BASE_URL, OPENAI_BASE_URL, OpenAI's).
    #[arg(long, requires = "llm")]
    llm_base_url: Option<String>,
    /// Skip files larger than this many bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    max_file_bytes: u64,
    /// Fail on the first file that cannot be read or parsed (default: skip it, warn).
    #[arg(long)]
    strict: bool,
    /// Training epochs of LP-RAG's link predictor (default: the library's).
    #[arg(long)]
    epochs: Option<usize>,
    /// LP-RAG: keep the build's embedding matrices in the work directory (`IDX/work`),
    /// memory-mapped, instead of on the heap (`LpRagBuilder::features_on_disk`): the same
    /// index in a fraction of the memory, for large folders.
    #[arg(long)]
    features_on_disk: bool,
    #[command(flatten)]
    on: DeviceArg,
}

/// `lprag sync`.
#[derive(clap::Args, Debug)]
struct SyncArgs {
    /// The folder the index was built from (or its new location).
    dir: PathBuf,
    /// The index directory.
    #[arg(long)]
    index: PathBuf,
    /// Fail on the first file that cannot be read or parsed.
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    on: DeviceArg,
}

/// `lprag query`.
#[derive(clap::Args, Debug)]
struct QueryArgs {
    /// The index directory.
    index: PathBuf,
    /// The question.
    query: String,
    /// How many chunks.
    #[arg(short, default_value_t = 5)]
    k: usize,
    /// Only chunks whose metadata has key = value (repeat for all of several).
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    filters: Vec<String>,
    /// Print JSON: a list of hits with `score`, `text`, `document` and `metadata`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    on: DeviceArg,
}

/// `lprag serve`.
#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// The index directory.
    index: PathBuf,
    /// The address to listen on. Anything but loopback needs `--token`.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// A bearer token every request must carry (`Authorization: Bearer TOKEN`); else
    /// LPRAG_TOKEN. Required off loopback.
    #[arg(long)]
    token: Option<String>,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    max_body_bytes: usize,
    /// The longest query, in bytes.
    #[arg(long, default_value_t = 4096)]
    max_query_bytes: usize,
    /// The largest `k`.
    #[arg(long, default_value_t = 100)]
    max_k: usize,
    /// The most queries in one batch request.
    #[arg(long, default_value_t = 64)]
    max_batch: usize,
    /// The longest a search may take, in milliseconds (503 after).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Updates waiting at most (one runs at a time; more are refused with 429).
    #[arg(long, default_value_t = 4)]
    max_pending_updates: usize,
    /// Write the address listened on (`host:port`) to this file once listening: for
    /// scripts, with `--addr 127.0.0.1:0` to let the system choose the port.
    #[arg(long)]
    port_file: Option<PathBuf>,
    /// Answer only: an LP-RAG index is opened without its synthetic questions and their
    /// rows (`LpRag::open_to_answer`: about half the memory; the chunk rows are read
    /// through a memory map, shared by every service on the index), updates are refused (400)
    /// and the index directory is neither locked nor written, so several such services
    /// can serve one index while `lprag sync` rebuilds it (they see the rebuild after a
    /// restart).
    #[arg(long)]
    answer_only: bool,
    #[command(flatten)]
    on: DeviceArg,
}

/// mimalloc (feature `mimalloc`, a default): it keeps training's large per-step tensors
/// instead of unmapping and faulting them in again at every step as glibc's allocator does.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = if cli.quiet { "warn" } else { "info" };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let quiet = cli.quiet;
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Index(a) => store::index(a, quiet).await,
            Command::Sync(a) => store::sync(a, quiet).await,
            Command::Query(a) => store::query(a).await,
            Command::Serve(a) => serve::serve(a).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
