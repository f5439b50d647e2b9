//! `lprag-eval live-update`: query latency while the index is updated.
//!
//! Concurrent clients query an index in a closed loop (each awaits its query, then sends
//! the next) in three phases of one run:
//!
//! - **idle**: [`lprag::Live`] serving, nothing else happening;
//! - **live**: the same, while the main task applies `updates` updates through
//!   [`Live::apply`] (each adds `docs_per_update` new documents, then a second update
//!   removes them again, so the index returns to its size): the copy is updated aside and
//!   swapped in;
//! - **rwlock**: the design [`Live`] replaced — the only index inside a
//!   [`tokio::sync::RwLock`], queries under `read()`, the same updates under `write()`.
//!
//! A query counts for an update when its time in flight overlaps the update's (from the
//! call to its return, the wait for the write lock included). [`run`] returns the
//! latency percentiles per phase, the time of every update and its stages
//! ([`UpdateReport::seconds`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lprag::{Document, Live, Selection, Updatable, UpdateInputs, UpdateReport};
use serde::Serialize;

use crate::metrics::percentile;
use crate::{Error, Result};

/// `lprag-eval live-update`'s command line.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// Dataset directory (as for `retrieval`; `../shared/tools/scale-corpus.py N DIR`
    /// writes one of N passages). Its questions are the queries (its titles when it has
    /// none).
    #[arg(long, value_name = "DIR")]
    pub dataset: PathBuf,
    /// Open the LP-RAG index saved in DIR instead of building one (built over the same
    /// dataset, with the same encoder).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Save the index built here to DIR (`LpRag::save`), for `--index` next time.
    #[arg(long, value_name = "DIR", conflicts_with = "index")]
    pub save: Option<PathBuf>,
    /// Encoder (`hashing`, `hashing-unfitted`, `minilm`, `minilm-fp16`).
    #[arg(long, default_value = "hashing", value_name = "NAME")]
    pub encoder: String,
    /// Width of the hashing encoder (default 1,024).
    #[arg(long, value_name = "DIM")]
    pub hashing_dim: Option<usize>,
    /// Model directory for `--encoder minilm`.
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
    /// LP-RAG configuration: a JSON file (an `LpRagConfig`) or a preset (`paper`, ...),
    /// as for `retrieval`.
    #[arg(long, value_name = "FILE|paper|...")]
    pub lprag_config: Option<PathBuf>,
    /// Concurrent query clients (closed loop).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub clients: usize,
    /// Seconds of the idle phase.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub seconds: f64,
    /// Updates per updating phase (each adds documents, then removes them again).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub updates: usize,
    /// Documents each update adds.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub docs_per_update: usize,
    /// Seconds between two updates (so that a query overlaps one update at most).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub gap: f64,
    /// Chunks each query retrieves.
    #[arg(long, default_value_t = 10, value_name = "K")]
    pub top_k: usize,
    /// The new documents: a HippoRAG corpus file (a JSON list of `{title, text}`), read
    /// from its end (default: $LPRAG_DATA/distractors/2wikimultihopqa_corpus.json, else
    /// ../shared/data/distractors/2wikimultihopqa_corpus.json; the dataset's own passages
    /// when neither is there). Each gets a fresh id and its title a suffix.
    #[arg(long, value_name = "FILE")]
    pub new_docs: Option<PathBuf>,
    /// Skip the rwlock phase.
    #[arg(long)]
    pub no_rwlock: bool,
    /// Threads of the live phase's update pool (`Live::update_threads`; `0`: rayon's
    /// global pool, shared with the queries). Default: the library's (half the cores).
    #[arg(long)]
    pub update_threads: Option<usize>,
    /// Write every query's start and latency into the JSON too (`samples`).
    #[arg(long, requires = "json")]
    pub samples: bool,
    /// Print LP-RAG's build progress.
    #[arg(long)]
    pub verbose: bool,
    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
}

/// The benchmark's settings (see [`LiveArgs`]).
#[derive(Debug, Clone, Serialize)]
pub struct LiveOptions {
    /// Concurrent query clients.
    pub clients: usize,
    /// Seconds of the idle phase (a warm-up of `min(1, seconds / 5)` s is not counted).
    pub seconds: f64,
    /// Updates per updating phase.
    pub updates: usize,
    /// Seconds between two updates (and before the first).
    pub gap: f64,
    /// Chunks per query.
    pub top_k: usize,
    /// Run the rwlock phase.
    pub rwlock: bool,
    /// `Live::update_threads`, when set.
    pub update_threads: Option<usize>,
    /// Keep every query's start and latency in [`LiveReport::samples`].
    pub keep_samples: bool,
}

/// Latency of the queries of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseStats {
    /// `idle`, `live add`, `live remove`, `rwlock add`, `rwlock remove`.
    pub phase: String,
    /// Queries counted.
    pub queries: usize,
    /// Queries that failed (not counted in the latencies).
    pub errors: usize,
    /// Latency percentiles and maximum, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Seconds of each update of the phase (none for idle).
    pub update_seconds: Vec<f64>,
}

/// One update.
#[derive(Debug, Clone, Serialize)]
pub struct UpdateTiming {
    /// `live add`, `live remove`, `rwlock add`, `rwlock remove`.
    pub phase: String,
    /// Wall time from the call to its return, seconds (for rwlock: the wait for the write
    /// lock included).
    pub seconds: f64,
    /// For rwlock: seconds until the write lock was held.
    pub lock_wait_seconds: f64,
    /// Chunks in the index afterwards.
    pub chunks: usize,
    /// The update's own stages ([`UpdateReport::seconds`]).
    pub stages: Vec<(String, f64)>,
    /// The graph stage's parts ([`UpdateReport::graph_seconds`]).
    pub graph_stages: Vec<(String, f64)>,
    /// Start and end, seconds since its phase began (the clock of [`RawSample::start`]).
    pub interval: (f64, f64),
}

/// One query, with [`LiveOptions::keep_samples`].
#[derive(Debug, Clone, Serialize)]
pub struct RawSample {
    /// `idle`, `live` or `rwlock`.
    pub phase: &'static str,
    /// Seconds since the phase began.
    pub start: f64,
    /// Latency, milliseconds (`None`: the query failed).
    pub ms: Option<f64>,
}

/// What [`run`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct LiveReport {
    /// Settings.
    pub options: LiveOptions,
    /// Documents each update added.
    pub docs_per_update: usize,
    /// Chunks in the index at the start.
    pub chunks: usize,
    /// Distinct queries the clients cycle through.
    pub distinct_queries: usize,
    /// Rows: idle, live add, live remove, rwlock add, rwlock remove.
    pub phases: Vec<PhaseStats>,
    /// Every update, in order.
    pub updates: Vec<UpdateTiming>,
    /// p99 while documents are added through `Live` / p99 idle.
    pub ratio_live_add: Option<f64>,
    /// p99 while documents are removed through `Live` / p99 idle.
    pub ratio_live_remove: Option<f64>,
    /// p99 while documents are added under the write lock / p99 idle.
    pub ratio_rwlock_add: Option<f64>,
    /// `/proc/loadavg`'s 1, 5 and 15-minute load averages before and after the run.
    pub load_before: Option<[f64; 3]>,
    /// After the run.
    pub load_after: Option<[f64; 3]>,
    /// Every query, with [`LiveOptions::keep_samples`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<RawSample>,
}

/// One query: start and end, seconds since the phase's origin; `None` end for a failure.
type Sample = (f64, Option<f64>);

/// An update's interval, seconds since the origin.
type Interval = (f64, f64);

/// Run the three phases on `index`. `batches[u]` are the documents update `u` adds (and
/// the next update removes); their ids must be new to the index.
///
/// # Errors
/// The first failed update; [`Error::Invalid`] for no queries, no clients or fewer
/// batches than updates.
pub async fn run<R: Updatable>(
    index: R,
    queries: Vec<String>,
    batches: &[Vec<Document>],
    inputs: &UpdateInputs,
    options: &LiveOptions,
) -> Result<LiveReport> {
    check_run(&queries, batches, options)?;
    let load_before = load_average();
    let chunks = index.chunks().len();
    let queries = Arc::new(queries);
    let k = options.top_k;
    let gap = Duration::from_secs_f64(options.gap.max(0.0));
    let mut measured = Measured::new(options.keep_samples);

    // Idle and live: `Live` serving.
    let live = match options.update_threads {
        Some(n) => Live::new(index).update_threads(n),
        None => Live::new(index),
    };
    let live = Arc::new(live);
    let query_live = {
        let live = live.clone();
        move |q: String| {
            let live = live.clone();
            async move {
                live.snapshot()
                    .retrieve(&q, Selection::TopK(k))
                    .await
                    .map(|_| ())
            }
        }
    };
    let idle_samples = idle_phase(&queries, query_live.clone(), options).await?;
    measured.phases.push(stats("idle", &idle_samples, &[]));
    measured.keep("idle", &idle_samples);

    let driver = {
        let live = live.clone();
        let batches = batches[..options.updates].to_vec();
        let inputs = inputs.clone();
        move |origin: Instant| drive_live(live, batches, inputs, gap, origin)
    };
    let got = run_clients_spawned(options.clients, &queries, query_live, driver).await?;
    measured.updating("live", ["live add", "live remove"], &got);

    // Rwlock: the only index behind a lock.
    if options.rwlock {
        rwlock_phase(live, &queries, batches, inputs, options, gap, &mut measured).await?;
    }

    Ok(measured.report(options, batches, chunks, queries.len(), load_before))
}

/// [`run`]'s checks of its arguments.
fn check_run(queries: &[String], batches: &[Vec<Document>], options: &LiveOptions) -> Result<()> {
    if queries.is_empty() {
        return Err(Error::invalid("live-update", "no queries"));
    }
    if options.clients == 0 {
        return Err(Error::invalid("--clients", "at least one client"));
    }
    if batches.len() < options.updates {
        return Err(Error::invalid(
            "live-update",
            format!(
                "{} batches of new documents for {} updates",
                batches.len(),
                options.updates
            ),
        ));
    }
    Ok(())
}

/// The idle phase: the clients query for [`LiveOptions::seconds`]; the queries that
/// started after the warm-up.
async fn idle_phase<Q, F>(
    queries: &Arc<Vec<String>>,
    query: Q,
    options: &LiveOptions,
) -> Result<Vec<Sample>>
where
    Q: Fn(String) -> F + Clone + Send + 'static,
    F: Future<Output = lprag::Result<()>> + Send + 'static,
{
    let warm_up = (options.seconds / 5.0).min(1.0);
    let idle = run_clients(Instant::now(), options.clients, queries, query, async {
        sleep(Duration::from_secs_f64(options.seconds.max(0.0))).await;
        Ok(Vec::new())
    })
    .await?;
    Ok(idle
        .samples
        .into_iter()
        .filter(|s| s.0 >= warm_up)
        .collect())
}

/// The live phase's updates: each batch added, then removed, through [`Live::apply`],
/// `gap` before each (times in seconds since `origin`).
async fn drive_live<R: Updatable>(
    live: Arc<Live<R>>,
    batches: Vec<Vec<Document>>,
    inputs: UpdateInputs,
    gap: Duration,
    origin: Instant,
) -> lprag::Result<Vec<(UpdateTiming, Interval)>> {
    let mut done = Vec::new();
    for docs in &batches {
        let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
        for (phase, upsert, remove) in [
            ("live add", docs.as_slice(), &[][..]),
            ("live remove", &[][..], ids.as_slice()),
        ] {
            sleep(gap).await;
            let start = origin.elapsed().as_secs_f64();
            let report = live.apply(upsert, remove, &inputs).await?;
            let end = origin.elapsed().as_secs_f64();
            done.push((timing(phase, (start, end), 0.0, &report), (start, end)));
        }
    }
    Ok(done)
}

/// The rwlock phase: the index taken out of `live` into a [`tokio::sync::RwLock`], queried
/// under `read()` while the same updates run under `write()`.
async fn rwlock_phase<R: Updatable>(
    live: Arc<Live<R>>,
    queries: &Arc<Vec<String>>,
    batches: &[Vec<Document>],
    inputs: &UpdateInputs,
    options: &LiveOptions,
    gap: Duration,
    measured: &mut Measured,
) -> Result<()> {
    let k = options.top_k;
    let live = Arc::try_unwrap(live)
        .map_err(|_| Error::invalid("live-update", "the index is still shared"))?;
    let snapshot = live.snapshot();
    drop(live);
    let index = Arc::try_unwrap(snapshot)
        .map_err(|_| Error::invalid("live-update", "a snapshot is still held"))?;
    let lock = Arc::new(tokio::sync::RwLock::new(index));
    let query_lock = {
        let lock = lock.clone();
        move |q: String| {
            let lock = lock.clone();
            async move {
                let index = lock.read().await;
                index.retrieve(&q, Selection::TopK(k)).await.map(|_| ())
            }
        }
    };
    let driver = {
        let lock = lock.clone();
        let batches = batches[..options.updates].to_vec();
        let inputs = inputs.clone();
        move |origin: Instant| drive_rwlock(lock, batches, inputs, gap, origin)
    };
    let got = run_clients_spawned(options.clients, queries, query_lock, driver).await?;
    measured.updating("rwlock", ["rwlock add", "rwlock remove"], &got);
    Ok(())
}

/// The rwlock phase's updates: each batch added, then removed, under the write lock,
/// `gap` before each (times in seconds since `origin`).
async fn drive_rwlock<R: Updatable>(
    lock: Arc<tokio::sync::RwLock<R>>,
    batches: Vec<Vec<Document>>,
    inputs: UpdateInputs,
    gap: Duration,
    origin: Instant,
) -> lprag::Result<Vec<(UpdateTiming, Interval)>> {
    let mut done = Vec::new();
    for docs in &batches {
        let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
        for (phase, upsert, remove) in [
            ("rwlock add", docs.as_slice(), &[][..]),
            ("rwlock remove", &[][..], ids.as_slice()),
        ] {
            sleep(gap).await;
            let start = origin.elapsed().as_secs_f64();
            let mut index = lock.write().await;
            let held = origin.elapsed().as_secs_f64();
            let report = index.apply_changes(upsert, remove, &inputs).await?;
            drop(index);
            let end = origin.elapsed().as_secs_f64();
            done.push((
                timing(phase, (start, end), held - start, &report),
                (start, end),
            ));
        }
    }
    Ok(done)
}

/// What the phases of [`run`] measured so far.
struct Measured {
    /// Keep every query in `raw` ([`LiveOptions::keep_samples`]).
    keep_samples: bool,
    /// Latency rows, in phase order.
    phases: Vec<PhaseStats>,
    /// Every update, in order.
    updates: Vec<UpdateTiming>,
    /// Every query, when kept.
    raw: Vec<RawSample>,
}

impl Measured {
    /// Nothing measured yet.
    fn new(keep_samples: bool) -> Self {
        Self {
            keep_samples,
            phases: Vec::new(),
            updates: Vec::new(),
            raw: Vec::new(),
        }
    }

    /// Keep the queries of `samples` under `phase`, when samples are kept.
    fn keep(&mut self, phase: &'static str, samples: &[Sample]) {
        if self.keep_samples {
            self.raw
                .extend(samples.iter().map(|&(start, end)| RawSample {
                    phase,
                    start,
                    ms: end.map(|e| (e - start) * 1000.0),
                }));
        }
    }

    /// Add an updating phase (`kind` `live` or `rwlock`): a row for each of `rows` (its
    /// add and remove updates), its updates and its queries.
    fn updating(&mut self, kind: &'static str, rows: [&str; 2], got: &Clients) {
        for phase in rows {
            self.phases
                .push(phase_stats(phase, &got.samples, &got.updates));
        }
        self.updates
            .extend(got.updates.iter().map(|(t, _)| t.clone()));
        self.keep(kind, &got.samples);
    }

    /// The report, with the p99 ratios to idle and the load average now.
    fn report(
        self,
        options: &LiveOptions,
        batches: &[Vec<Document>],
        chunks: usize,
        distinct_queries: usize,
        load_before: Option<[f64; 3]>,
    ) -> LiveReport {
        let phases = self.phases;
        let p99 = |name: &str| {
            phases
                .iter()
                .find(|p| p.phase == name && p.queries > 0)
                .map(|p| p.p99_ms)
        };
        let ratio = |name: &str| match (p99(name), p99("idle")) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        LiveReport {
            options: options.clone(),
            docs_per_update: batches.first().map_or(0, Vec::len),
            chunks,
            distinct_queries,
            ratio_live_add: ratio("live add"),
            ratio_live_remove: ratio("live remove"),
            ratio_rwlock_add: ratio("rwlock add"),
            phases,
            updates: self.updates,
            load_before,
            load_after: load_average(),
            samples: self.raw,
        }
    }
}

fn timing(phase: &str, interval: Interval, lock_wait: f64, report: &UpdateReport) -> UpdateTiming {
    UpdateTiming {
        phase: phase.to_string(),
        seconds: interval.1 - interval.0,
        interval,
        lock_wait_seconds: lock_wait,
        chunks: report.chunks,
        stages: report.seconds.clone(),
        graph_stages: report.graph_seconds.clone(),
    }
}

/// The queries of `samples` that overlap an update of `phase`.
fn phase_stats(
    phase: &str,
    samples: &[Sample],
    updates: &[(UpdateTiming, Interval)],
) -> PhaseStats {
    let intervals: Vec<Interval> = updates
        .iter()
        .filter(|(t, _)| t.phase == phase)
        .map(|&(_, i)| i)
        .collect();
    let during: Vec<Sample> = samples
        .iter()
        .filter(|&&(start, end)| {
            let end = end.unwrap_or(start);
            intervals.iter().any(|&(a, b)| start < b && end > a)
        })
        .copied()
        .collect();
    let seconds: Vec<f64> = updates
        .iter()
        .filter(|(t, _)| t.phase == phase)
        .map(|(t, _)| t.seconds)
        .collect();
    stats(phase, &during, &seconds)
}

fn stats(phase: &str, samples: &[Sample], update_seconds: &[f64]) -> PhaseStats {
    let ms: Vec<f64> = samples
        .iter()
        .filter_map(|&(s, e)| e.map(|e| (e - s) * 1000.0))
        .collect();
    let p = |q: f64| percentile(&ms, q).unwrap_or(f64::NAN);
    PhaseStats {
        phase: phase.to_string(),
        queries: ms.len(),
        errors: samples.len() - ms.len(),
        p50_ms: p(50.0),
        p95_ms: p(95.0),
        p99_ms: p(99.0),
        max_ms: p(100.0),
        update_seconds: update_seconds.to_vec(),
    }
}

struct Clients {
    samples: Vec<Sample>,
    updates: Vec<(UpdateTiming, Interval)>,
}

/// Run `clients` closed-loop clients (times in seconds since `origin`) while `main` runs
/// on this task; stop them when it returns.
async fn run_clients<Q, F>(
    origin: Instant,
    clients: usize,
    queries: &Arc<Vec<String>>,
    query: Q,
    main: impl Future<Output = Result<Vec<(UpdateTiming, Interval)>>>,
) -> Result<Clients>
where
    Q: Fn(String) -> F + Clone + Send + 'static,
    F: Future<Output = lprag::Result<()>> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (queries, stop, query) = (queries.clone(), stop.clone(), query.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                // Each client starts at another place in the list.
                let mut i = c * queries.len() / clients;
                while !stop.load(Ordering::Relaxed) {
                    let q = queries[i % queries.len()].clone();
                    i += 1;
                    let start = origin.elapsed().as_secs_f64();
                    let ok = query(q).await.is_ok();
                    let end = origin.elapsed().as_secs_f64();
                    samples.push((start, ok.then_some(end)));
                    // A query that finished without waiting must not keep the worker.
                    tokio::task::yield_now().await;
                }
                samples
            })
        })
        .collect();
    let updates = main.await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for h in handles {
        samples.extend(
            h.await
                .map_err(|e| Error::invalid("live-update client", e.to_string()))?,
        );
    }
    Ok(Clients {
        samples,
        updates: updates?,
    })
}

/// [`run_clients`] with the updates on a task of their own (as a server would run them).
async fn run_clients_spawned<Q, F, D, DF>(
    clients: usize,
    queries: &Arc<Vec<String>>,
    query: Q,
    driver: D,
) -> Result<Clients>
where
    Q: Fn(String) -> F + Clone + Send + 'static,
    F: Future<Output = lprag::Result<()>> + Send + 'static,
    D: FnOnce(Instant) -> DF + Send + 'static,
    DF: Future<Output = lprag::Result<Vec<(UpdateTiming, Interval)>>> + Send + 'static,
{
    let origin = Instant::now();
    let task = tokio::spawn(driver(origin));
    run_clients(origin, clients, queries, query, async move {
        Ok(task
            .await
            .map_err(|e| Error::invalid("live-update driver", e.to_string()))??)
    })
    .await
}

/// Sleep without a timer driver (the crate's tokio has no `time` feature).
async fn sleep(d: Duration) {
    let _ = tokio::task::spawn_blocking(move || std::thread::sleep(d)).await;
}

/// `/proc/loadavg`'s first three fields (Linux); `None` elsewhere.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// `batches` batches of `per` new documents from `pool` (taken from its end), each with a
/// fresh id (`live-U-I`) and its title suffixed with the update's number.
pub fn new_document_batches(
    pool: &[(String, String)],
    batches: usize,
    per: usize,
) -> Vec<Vec<Document>> {
    (0..batches)
        .map(|u| {
            (0..per)
                .map(|i| {
                    let n = u * per + i;
                    let (title, text) = &pool[pool.len() - 1 - n % pool.len()];
                    Document::new(
                        format!("live-{u}-{i}"),
                        format!("{title} (update {u})"),
                        text.clone(),
                    )
                })
                .collect()
        })
        .collect()
}

/// Read a HippoRAG corpus file: `(title, text)` pairs.
pub fn read_passages(path: &Path) -> Result<Vec<(String, String)>> {
    #[derive(serde::Deserialize)]
    struct Passage {
        #[serde(default)]
        title: String,
        text: String,
    }
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let passages: Vec<Passage> = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(passages.into_iter().map(|p| (p.title, p.text)).collect())
}

impl LiveReport {
    /// The table: phase, queries, p50 / p95 / p99 / max (ms), update seconds; the ratios.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "| phase | queries | p50 (ms) | p95 (ms) | p99 (ms) | max (ms) | updates (s) |\n",
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---|\n");
        for p in &self.phases {
            let secs: Vec<String> = p.update_seconds.iter().map(|x| format!("{x:.2}")).collect();
            s.push_str(&format!(
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |\n",
                p.phase,
                p.queries,
                p.p50_ms,
                p.p95_ms,
                p.p99_ms,
                p.max_ms,
                if secs.is_empty() {
                    "–".to_string()
                } else {
                    secs.join(", ")
                }
            ));
        }
        let r = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.2}×"));
        s.push_str(&format!(
            "\np99 / idle p99: live add {}, live remove {}, rwlock add {}\n",
            r(self.ratio_live_add),
            r(self.ratio_live_remove),
            r(self.ratio_rwlock_add)
        ));
        s
    }

    /// The update stages, one line per update.
    pub fn stages_text(&self) -> String {
        let mut s = String::new();
        for u in &self.updates {
            let f = |v: &[(String, f64)]| {
                v.iter()
                    .map(|(n, x)| format!("{n} {x:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            s.push_str(&format!(
                "{}: {:.2} s (lock wait {:.2}; {}; graph: {}), {} chunks\n",
                u.phase,
                u.seconds,
                u.lock_wait_seconds,
                f(&u.stages),
                f(&u.graph_stages),
                u.chunks
            ));
        }
        s
    }
}

/// `lprag-eval live-update`: build (or open) the LP-RAG index over the dataset, [`run`]
/// the phases, print the table and write the JSON. `config` is the parsed
/// `--lprag-config`.
///
/// # Errors
/// Those of loading, building and [`run`].
pub async fn command(args: LiveArgs, config: Option<lprag::LpRagConfig>) -> Result<()> {
    use crate::registry::{build_encoder_sized, lprag_chunker, EncoderKind, RetrieverOptions};
    let t = Instant::now();
    let dataset = crate::datasets::load_dir(&args.dataset, None)?;
    eprintln!(
        "{}: {} questions, {} passages; loaded in {:.1} s",
        dataset.name,
        dataset.questions.len(),
        dataset.corpus.len(),
        t.elapsed().as_secs_f64()
    );
    let kind: EncoderKind = args.encoder.parse()?;
    let encoder = build_encoder_sized(
        kind,
        &dataset.corpus,
        args.model_dir.as_deref(),
        args.hashing_dim,
    )?;
    let mut options = RetrieverOptions::default();
    if let Some(c) = config {
        options.lprag = c;
    }
    options.verbose = args.verbose;
    options.lprag_save = args.save.clone();
    let index = open_or_build(&args, &dataset, encoder, &options).await?;
    eprintln!("{} chunks", index.chunks().len());

    let queries = live_queries(&dataset);
    let pool = new_document_pool(&args, &dataset)?;
    let batches = new_document_batches(&pool, args.updates, args.docs_per_update);
    let inputs = UpdateInputs::with_chunker(lprag_chunker(&options));
    let opts = live_options(&args);
    let load = load_average();
    if let Some([a, b, c]) = load {
        eprintln!("load average before the run: {a:.2} {b:.2} {c:.2}");
    }
    let report = run(index, queries, &batches, &inputs, &opts).await?;
    print_report(&dataset.name, &report, &opts);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// The index of `--index`, else LP-RAG built over the dataset (saved with `--save`),
/// with the time it took on stderr.
async fn open_or_build(
    args: &LiveArgs,
    dataset: &crate::datasets::Dataset,
    encoder: Arc<dyn lprag::Encoder>,
    options: &crate::registry::RetrieverOptions,
) -> Result<lprag::LpRag> {
    let t = Instant::now();
    Ok(match &args.index {
        Some(dir) => {
            let index = lprag::LpRag::load(dir, encoder)?;
            eprintln!(
                "index opened from {} in {:.1} s",
                dir.display(),
                t.elapsed().as_secs_f64()
            );
            index
        }
        None => {
            let index = crate::registry::build_lprag(&dataset.corpus, encoder, options).await?;
            eprintln!("index built in {:.1} s", t.elapsed().as_secs_f64());
            index
        }
    })
}

/// The queries: the dataset's questions, else up to 1,000 of its non-empty titles.
fn live_queries(dataset: &crate::datasets::Dataset) -> Vec<String> {
    let mut queries: Vec<String> = dataset
        .questions
        .iter()
        .map(|q| q.question.clone())
        .collect();
    if queries.is_empty() {
        queries = dataset
            .corpus
            .iter()
            .map(|d| d.title.clone())
            .filter(|t| !t.is_empty())
            .take(1000)
            .collect();
    }
    queries
}

/// The passages new documents are made of: `--new-docs`, else the default distractor
/// file when it is there, else the dataset's own passages (which one, on stderr).
///
/// # Errors
/// When the file cannot be read, or there are no passages.
fn new_document_pool(
    args: &LiveArgs,
    dataset: &crate::datasets::Dataset,
) -> Result<Vec<(String, String)>> {
    let file = args.new_docs.clone().or_else(|| {
        let default = std::env::var_os("LPRAG_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("../shared/data"))
            .join("distractors/2wikimultihopqa_corpus.json");
        default.is_file().then_some(default)
    });
    let pool = match &file {
        Some(f) => {
            eprintln!("new documents from {}", f.display());
            read_passages(f)?
        }
        None => {
            eprintln!("new documents: copies of the dataset's last passages (no distractor file)");
            dataset
                .corpus
                .iter()
                .map(|d| (d.title.clone(), d.text.clone()))
                .collect()
        }
    };
    if pool.is_empty() {
        return Err(Error::invalid("--new-docs", "no passages"));
    }
    Ok(pool)
}

/// The benchmark's settings from the command line.
fn live_options(args: &LiveArgs) -> LiveOptions {
    LiveOptions {
        clients: args.clients,
        seconds: args.seconds,
        updates: args.updates,
        gap: args.gap,
        top_k: args.top_k,
        rwlock: !args.no_rwlock,
        update_threads: args.update_threads,
        keep_samples: args.samples,
    }
}

/// Print the run's heading, table, update stages and load averages to stdout.
fn print_report(dataset: &str, report: &LiveReport, opts: &LiveOptions) {
    println!(
        "\nlive-update, {}: {} chunks, {} clients (closed loop, top {}), {} updates of {} documents (each added, then removed)\n",
        dataset,
        report.chunks,
        opts.clients,
        opts.top_k,
        opts.updates,
        report.docs_per_update
    );
    print!("{}", report.to_markdown());
    println!("\n{}", report.stages_text());
    let f = |l: Option<[f64; 3]>| l.map_or("?".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
    println!(
        "load average before {}, after {}",
        f(report.load_before),
        f(report.load_after)
    );
}

/// Write `report` as pretty JSON to `path`, and say so on stderr.
fn write_json(path: &Path, report: &LiveReport) -> Result<()> {
    let text = serde_json::to_string_pretty(report).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })?;
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use lprag::{Chunk, ScoredChunk};
    use lprag_core::Provenance;

    /// An index of whole documents whose updates take `UPDATE` of a blocking thread.
    #[derive(Clone)]
    struct Slow {
        chunks: Arc<Vec<Chunk>>,
    }

    const UPDATE: Duration = Duration::from_millis(200);

    fn chunk(id: usize, doc: &str) -> Chunk {
        Chunk {
            id,
            text: format!("text of {doc}"),
            provenance: Provenance {
                document_id: doc.to_string(),
                title: String::new(),
                span: 0..4,
            },
            metadata: Default::default(),
        }
    }

    #[async_trait]
    impl lprag::Retriever for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        async fn retrieve(
            &self,
            _q: &str,
            selection: Selection,
        ) -> lprag::Result<Vec<ScoredChunk>> {
            let scored = self
                .chunks
                .iter()
                .map(|c| ScoredChunk {
                    chunk: c.clone(),
                    score: 1.0,
                })
                .collect();
            Ok(selection.apply(scored, |s| s.score))
        }
        fn chunks(&self) -> &[Chunk] {
            &self.chunks
        }
    }

    #[async_trait]
    impl Updatable for Slow {
        async fn apply_changes(
            &mut self,
            upsert: &[Document],
            remove: &[String],
            _inputs: &UpdateInputs,
        ) -> lprag::Result<UpdateReport> {
            tokio::task::spawn_blocking(|| std::thread::sleep(UPDATE))
                .await
                .expect("sleep");
            let mut docs: Vec<String> = self
                .chunks
                .iter()
                .map(|c| c.provenance.document_id.clone())
                .filter(|d| !remove.contains(d))
                .collect();
            docs.extend(upsert.iter().map(|d| d.id.clone()));
            self.chunks = Arc::new(docs.iter().enumerate().map(|(i, d)| chunk(i, d)).collect());
            Ok(UpdateReport {
                chunks: self.chunks.len(),
                seconds: vec![("sleep".into(), UPDATE.as_secs_f64())],
                ..UpdateReport::default()
            })
        }
        fn save_index(&self, _dir: &Path) -> lprag::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_wait_for_the_lock_and_not_for_live() {
        let index = Slow {
            chunks: Arc::new((0..5).map(|i| chunk(i, &format!("d{i}"))).collect()),
        };
        let pool: Vec<(String, String)> =
            (0..4).map(|i| (format!("t{i}"), format!("x{i}"))).collect();
        let batches = new_document_batches(&pool, 2, 2);
        assert_eq!(batches[1][1].id, "live-1-1");
        assert_eq!(batches[1][1].title, "t0 (update 1)");
        let options = LiveOptions {
            clients: 2,
            seconds: 0.3,
            updates: 2,
            gap: 0.05,
            top_k: 3,
            rwlock: true,
            update_threads: None,
            keep_samples: true,
        };
        let report = run(
            index,
            vec!["q".into()],
            &batches,
            &UpdateInputs::default(),
            &options,
        )
        .await
        .unwrap();
        let names: Vec<&str> = report.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(
            names,
            [
                "idle",
                "live add",
                "live remove",
                "rwlock add",
                "rwlock remove"
            ]
        );
        assert_eq!(report.updates.len(), 8);
        assert!(
            report.updates.iter().all(|u| u.seconds >= 0.19),
            "{report:?}"
        );
        // Each add makes 7 chunks, each removal 5 again.
        let chunks: Vec<usize> = report.updates.iter().map(|u| u.chunks).collect();
        assert_eq!(chunks, [7, 5, 7, 5, 7, 5, 7, 5]);
        for p in &report.phases {
            assert!(p.queries > 0 && p.errors == 0, "{p:?}");
        }
        // Under the write lock a query waits for the update; under Live it does not.
        let max = |name: &str| {
            report
                .phases
                .iter()
                .find(|p| p.phase == name)
                .unwrap()
                .max_ms
        };
        assert!(max("rwlock add") >= 100.0, "{report:?}");
        assert!(max("live add") < max("rwlock add"), "{report:?}");
        assert!(report.ratio_rwlock_add.is_some() && report.ratio_live_add.is_some());
        assert!(report.to_markdown().contains("| rwlock add |"));
        assert!(report.samples.iter().any(|s| s.phase == "rwlock"));
    }
}
