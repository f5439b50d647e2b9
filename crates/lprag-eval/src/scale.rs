//! The scale benchmark: retrievers on MuSiQue-100's questions with the corpus padded to N
//! passages by real distractors, all in one process, so their ratios are measured under the
//! same conditions.
//!
//! [`make_corpus`] writes the padded corpus with the shared tool `scale-corpus.py` (once
//! per N; an existing corpus is reused). [`run_scale`] builds each retriever in turn,
//! times its stages (LP-RAG reports chunk / embed / graph / queries / train), runs every
//! question, and records the process's peak resident memory while that retriever was
//! built and queried (Linux: the high-water mark is reset through
//! `/proc/self/clear_refs` before each retriever; elsewhere it is not reported).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use lprag_core::{ChunkStore, Encoder, Progress};
use serde::{Deserialize, Serialize};

use crate::datasets::Dataset;
use crate::harness::{evaluate_retrieval, EvalOptions};
use crate::registry::{build_lprag, build_retriever_with};
use crate::report::RetrievalResult;
use crate::{Error, Result};

/// One retriever at one corpus size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleResult {
    /// Passages in the corpus.
    pub passages: usize,
    /// Seconds per indexing stage (`[("build", total)]` for retrievers without stages).
    pub stages: Vec<(String, f64)>,
    /// Peak resident memory in bytes while the retriever was built and queried (the
    /// loaded dataset and encoder included), when the platform reports it.
    pub peak_rss_bytes: Option<u64>,
    /// Recall, latency and index time.
    pub result: RetrievalResult,
    /// LP-RAG rows: the median of each query stage ([`lprag::QueryProfile`]) over the
    /// questions, asked once more through `LpRag::retrieve_profiled`.
    #[serde(default)]
    pub profile: Option<ProfileMedians>,
}

/// Medians over the questions of each stage of an LP-RAG query, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileMedians {
    /// Checking and embedding the query.
    pub embed_ms: f64,
    /// The candidate stage.
    pub candidates_ms: f64,
    /// The link predictor.
    pub predictor_ms: f64,
    /// Cosines, the anchor, the documents' ranking, the selection, the copies.
    pub rank_ms: f64,
    /// The whole call.
    pub total_ms: f64,
    /// Chunks scored per query (median).
    pub scored: f64,
}

/// Each question of `dataset` through [`lprag::LpRag::retrieve_profiled`] (top 10), the
/// median of each stage.
pub async fn profile_queries(rag: &lprag::LpRag, dataset: &Dataset) -> Result<ProfileMedians> {
    let mut rows = Vec::with_capacity(dataset.questions.len());
    for q in &dataset.questions {
        let (_, p) = rag
            .retrieve_profiled(&q.question, lprag_core::Selection::TopK(10))
            .await?;
        rows.push(p);
    }
    let med = |f: &dyn Fn(&lprag::QueryProfile) -> f64| {
        let v: Vec<f64> = rows.iter().map(f).collect();
        crate::metrics::percentile(&v, 50.0).unwrap_or(0.0)
    };
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    Ok(ProfileMedians {
        embed_ms: med(&|p| ms(p.embed)),
        candidates_ms: med(&|p| ms(p.candidates)),
        predictor_ms: med(&|p| ms(p.predictor)),
        rank_ms: med(&|p| ms(p.rank)),
        total_ms: med(&|p| ms(p.total)),
        scored: med(&|p| p.candidates_scored as f64),
    })
}

/// Write MuSiQue-100 padded to `passages` passages into `dir` with the shared tool
/// `scale-corpus.py` at `tool` (run by `python3`), unless `dir/corpus.json` exists.
pub fn make_corpus(tool: &Path, passages: usize, dir: &Path) -> Result<()> {
    if dir.join("corpus.json").is_file() && dir.join("questions.json").is_file() {
        return Ok(());
    }
    if !tool.is_file() {
        return Err(Error::invalid(
            "--corpus-tool",
            format!(
                "{} not found (the shared tools/scale-corpus.py; set LPRAG_DATA or pass --corpus-tool)",
                tool.display()
            ),
        ));
    }
    let status = std::process::Command::new("python3")
        .arg(tool)
        .arg(passages.to_string())
        .arg(dir)
        .status()
        .map_err(|source| Error::Io {
            path: tool.to_path_buf(),
            source,
        })?;
    if !status.success() {
        return Err(Error::invalid(
            "--corpus-tool",
            format!(
                "{} {passages} {} failed: {status}",
                tool.display(),
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Reset the process's peak-RSS mark (Linux); `false` where that is not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident memory in bytes since start or the last
/// [`reset_peak_rss`] (Linux `VmHWM`), `None` where it is not available.
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The process's resident memory now, in bytes (Linux `VmRSS`), `None` where it is not
/// available.
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A memory line of `/proc/self/status`, in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// LP-RAG's candidate-stage settings [`run_scale`] evaluates on one index.
#[derive(Debug, Clone, Copy, Default)]
pub struct Variants<'a> {
    /// Candidate pools (`None` = every chunk); empty = the configured pool.
    pub pools: &'a [Option<usize>],
    /// Candidate searches; empty = the configured search.
    pub searches: &'a [CandidateSearch],
    /// Chunk stores whose search finds the nearest chunks, each evaluated after the
    /// in-memory rows with every pool (rows named `… store=LABEL`).
    pub stores: &'a [Box<dyn StoreSetup>],
}

/// A chunk store that LP-RAG's candidate stage searches in a `scale` run (`--store`):
/// made from the built index, attached with `LpRag::attach_store`.
#[async_trait::async_trait]
pub trait StoreSetup: Send + Sync + std::fmt::Debug {
    /// The store in row names (`memory`, `lance`).
    fn label(&self) -> String;

    /// A store holding `rag`'s chunks (written with `LpRag::write_store`, which resumes
    /// a store written before) for the corpus of `passages` passages, with the seconds of
    /// each stage it ran (`store write`, and whatever else it does, e.g. an index).
    async fn make(
        &self,
        rag: &lprag::LpRag,
        passages: usize,
        progress: &dyn Progress,
    ) -> Result<(Arc<dyn ChunkStore>, Vec<(String, f64)>)>;

    /// The store an earlier run made for the corpus of `passages` passages, opened
    /// without writing anything (for an index opened to answer only); `None` when this
    /// kind keeps nothing between runs or nothing was made for that size.
    async fn open(&self, _passages: usize) -> Result<Option<Arc<dyn ChunkStore>>> {
        Ok(None)
    }
}

/// What turns one `--store` entry into a [`StoreSetup`]: `None` when the entry is not
/// this parser's kind, an error when it is but is malformed.
pub type StoreParser = fn(&str) -> Option<Result<Box<dyn StoreSetup>>>;

/// `--store memory`: [`MemoryStoreSetup`].
pub fn memory_store(spec: &str) -> Option<Result<Box<dyn StoreSetup>>> {
    (spec.trim() == "memory").then(|| Ok(Box::new(MemoryStoreSetup) as Box<dyn StoreSetup>))
}

/// The in-memory store (`lprag::MemoryStore`, an exact scan): the index's chunks copied
/// into it. Its rows rank as the in-memory index does; they check the store path.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryStoreSetup;

#[async_trait::async_trait]
impl StoreSetup for MemoryStoreSetup {
    fn label(&self) -> String {
        "memory".into()
    }

    async fn make(
        &self,
        rag: &lprag::LpRag,
        _passages: usize,
        progress: &dyn Progress,
    ) -> Result<(Arc<dyn ChunkStore>, Vec<(String, f64)>)> {
        let store = Arc::new(lprag::MemoryStore::new(
            rag.graph().features.dim(),
            rag.predictor().stored_representation_dim(),
        )?);
        let wrote = rag.write_store(&*store, progress).await?;
        Ok((store, vec![("store write".into(), wrote.seconds)]))
    }
}

/// The stores of `--store SPEC[,SPEC...]`, each parsed by the first of `parsers` that
/// takes it.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error) naming an entry no parser takes, or a parser's
/// own error.
pub fn parse_stores(list: &str, parsers: &[StoreParser]) -> Result<Vec<Box<dyn StoreSetup>>> {
    list.split(',')
        .map(|spec| {
            parsers
                .iter()
                .find_map(|parse| parse(spec))
                .unwrap_or_else(|| {
                    Err(Error::invalid(
                        "--store",
                        format!(
                            "`{spec}`: not a store this binary knows (`memory`; `lance:DIR` \
                             with lprag-lance's lprag-eval example)"
                        ),
                    ))
                })
        })
        .collect()
}

/// How LP-RAG's candidate stage finds the query's nearest chunks (one row variant each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateSearch {
    /// The exact scan over the embedding rows.
    Rows,
    /// The exact scan over the column-wise copy (`LpRagConfig::column_scan_from`).
    Columns,
    /// An inverted-file index with this many probed lists (`LpRagConfig::candidate_index`).
    Ivf(usize),
    /// A walk on the proximity graph with this beam (`LpRagConfig::candidate_graph`).
    Graph(usize),
}

impl std::str::FromStr for CandidateSearch {
    type Err = crate::Error;

    /// `rows` (or `exact`), `columns`, `graph` / `graphB` (a proximity graph walked with
    /// beam B, default `GraphParams::default().beam`), or a number of probed inverted-file lists.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "rows" | "exact" => Ok(Self::Rows),
            "columns" => Ok(Self::Columns),
            "graph" => Ok(Self::Graph(lprag::graph::GraphParams::default().beam)),
            g if g.starts_with("graph") => match g["graph".len()..].parse::<usize>() {
                Ok(b) if b > 0 => Ok(Self::Graph(b)),
                _ => Err(crate::Error::invalid(
                    "--candidate-search",
                    format!("`{g}`: expected graph or graphB with a beam B of at least 1"),
                )),
            },
            n => match n.parse::<usize>() {
                Ok(0) => Err(crate::Error::invalid(
                    "--candidate-search",
                    "0 probes: at least 1 list",
                )),
                Ok(k) => Ok(Self::Ivf(k)),
                Err(_) => Err(crate::Error::invalid(
                    "--candidate-search",
                    format!(
                        "`{n}`: expected rows, columns, graph, graphB or a number of probed lists"
                    ),
                )),
            },
        }
    }
}

/// Build and evaluate each retriever of `names` on `dataset`, one after the other (each is
/// dropped before the next is built). `lprag` is evaluated once per combination of
/// `variants` (pool × candidate search), on the same index; those rows are named `lprag`
/// plus the pool and the search (`lprag P=200`, `lprag all`, `lprag P=20 ivf16`,
/// `lprag P=20 columns`).
pub async fn run_scale(
    dataset: &Dataset,
    names: &[String],
    encoder: Arc<dyn Encoder>,
    options: &EvalOptions,
    variants: &Variants<'_>,
    progress: &dyn Progress,
) -> Result<Vec<ScaleResult>> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let can_reset = reset_peak_rss();
        let stage = format!("index {name}");
        progress.start(&stage, None);
        let t = Instant::now();
        let turn = Turn {
            dataset,
            encoder: &encoder,
            options,
            progress,
            stage,
            started: t,
            can_reset,
        };
        if name == "lprag" {
            turn.lprag(variants, &mut out).await?;
            continue;
        }
        out.push(turn.other(name).await?);
    }
    Ok(out)
}

/// One retriever's turn in [`run_scale`]: what it is built and evaluated with.
struct Turn<'a> {
    /// The dataset.
    dataset: &'a Dataset,
    /// The encoder.
    encoder: &'a Arc<dyn Encoder>,
    /// Retriever and evaluation options.
    options: &'a EvalOptions,
    /// Progress of the build and the queries.
    progress: &'a dyn Progress,
    /// The progress stage of the indexing, finished once the index is built.
    stage: String,
    /// When the indexing started.
    started: Instant,
    /// Whether the peak-RSS mark was reset before the turn (so the peak can be reported).
    can_reset: bool,
}

impl Turn<'_> {
    /// LP-RAG: build it (then add the last documents, with `lprag_add_last`) and evaluate
    /// a row per combination of `variants` on the same index, into `out`.
    async fn lprag(&self, variants: &Variants<'_>, out: &mut Vec<ScaleResult>) -> Result<()> {
        if let Some(dir) = &self.options.retrievers.lprag_answer_from {
            return self.lprag_answering(dir, variants, out).await;
        }
        let (mut rag, index_seconds, stages) = self.build_lprag().await?;
        let neighbours = rag.config().candidate_neighbours;
        let (pools, searches) = variant_lists(variants);
        for search in searches {
            let made = set_candidate_search(&mut rag, search)?;
            let mut stages = stages.clone();
            if let Some((stage, s)) = made {
                stages.push((stage.into(), s));
            }
            for &pool in &pools {
                if let Some(pool) = pool {
                    rag.set_candidates(pool, neighbours);
                }
                let row = self
                    .lprag_row(&rag, index_seconds, &stages, |name| {
                        variant_name(pool, search, name)
                    })
                    .await?;
                out.push(row);
            }
        }
        for setup in variants.stores {
            let t = Instant::now();
            let (store, made) = setup
                .make(&rag, self.dataset.corpus.len(), self.progress)
                .await?;
            let mut stages = stages.clone();
            stages.extend(made);
            let attach = Instant::now();
            rag.attach_store(store).await?;
            stages.push(("store attach".into(), attach.elapsed().as_secs_f64()));
            eprintln!(
                "lprag: store {} ready in {:.1} s",
                setup.label(),
                t.elapsed().as_secs_f64()
            );
            for &pool in &pools {
                if let Some(pool) = pool {
                    rag.set_candidates(pool, neighbours);
                }
                let row = self
                    .lprag_row(&rag, index_seconds, &stages, |name| {
                        format!("{} store={}", variant_name(pool, None, name), setup.label())
                    })
                    .await?;
                out.push(row);
            }
            rag.detach_store()?;
        }
        Ok(())
    }

    /// `setup`'s store made from the index saved in `dir`, opened to answer only with its
    /// rows in memory for the write (the store's own vector index included), then dropped.
    async fn make_answer_store(
        &self,
        dir: &Path,
        setup: &dyn StoreSetup,
        options: &lprag::AnswerOptions,
    ) -> Result<Arc<dyn ChunkStore>> {
        let t = Instant::now();
        eprintln!(
            "lprag answer-only: making store {} from {}",
            setup.label(),
            dir.display()
        );
        let held = lprag::LpRag::open_to_answer(
            dir,
            lprag::AnswerOptions {
                encoder: options.encoder.clone(),
                device: options.device,
                ..lprag::AnswerOptions::default()
            },
        )
        .await?;
        let (store, stages) = setup
            .make(&held, self.dataset.corpus.len(), self.progress)
            .await?;
        let stages: Vec<String> = stages
            .iter()
            .map(|(name, secs)| format!("{name} {secs:.1} s"))
            .collect();
        eprintln!(
            "lprag answer-only: store {} made in {:.1} s ({})",
            setup.label(),
            t.elapsed().as_secs_f64(),
            stages.join(", ")
        );
        Ok(store)
    }

    /// LP-RAG opened to answer only from the index saved in `dir`
    /// ([`lprag::LpRag::open_to_answer`]): without `variants.stores` its rows with the
    /// in-memory search, else for each store, opened afresh with the store an earlier run
    /// made or, when none was, one made now from the saved index (no in-memory search is
    /// built); the peak RSS of each opening and its queries.
    /// The "index" time of these rows is the opening's.
    async fn lprag_answering(
        &self,
        dir: &Path,
        variants: &Variants<'_>,
        out: &mut Vec<ScaleResult>,
    ) -> Result<()> {
        let rows_from_store = self.options.retrievers.lprag_rows_from_store;
        let records_from_store = self.options.retrievers.lprag_records_from_store;
        let map_rows = self.options.retrievers.lprag_map_rows;
        let options = lprag::AnswerOptions {
            encoder: Some(self.encoder.clone()),
            device: self.options.retrievers.device,
            store: None,
            rows_from_store,
            records_from_store,
            map_rows,
        };
        for (on, flag, what) in [
            (rows_from_store, "--lprag-rows-from-store", "rows"),
            (records_from_store, "--lprag-records-from-store", "records"),
        ] {
            if on && variants.stores.is_empty() {
                return Err(Error::invalid(
                    flag,
                    format!("the {what} are read from a store: give one with --store"),
                ));
            }
        }
        let (pools, _) = variant_lists(variants);
        // A process answers in memory or from a store: without `--store` one row in
        // memory, else one per store (one store per run keeps each peak clean of the
        // memory the allocator holds back from an earlier row).
        let opened: Vec<Option<&Box<dyn StoreSetup>>> = if variants.stores.is_empty() {
            vec![None]
        } else {
            variants.stores.iter().map(Some).collect()
        };
        let passages = self.dataset.corpus.len();
        for (i, setup) in opened.into_iter().enumerate() {
            // A store not made for this size yet is made here, from the saved index opened
            // in memory for that and dropped before the answering process opens.
            let mut made = None;
            if let Some(setup) = setup {
                if setup.open(passages).await?.is_none() {
                    made = Some(self.make_answer_store(dir, &**setup, &options).await?);
                }
            }
            if i > 0 || made.is_some() {
                reset_peak_rss();
            }
            // What the process holds before opening (the dataset, the encoder): the
            // index's share of the RSS printed after the row is the difference.
            eprintln!(
                "lprag answer-only: RSS before opening {:.2} GB",
                rss_bytes().unwrap_or(0) as f64 / 1e9
            );
            let t = Instant::now();
            let store = match setup {
                None => None,
                // A fresh handle, as another process opens the store; a kind that keeps
                // nothing between handles hands the one just made.
                Some(setup) => match setup.open(passages).await? {
                    Some(store) => Some(store),
                    None => made.take(),
                },
            };
            let mut rag = lprag::LpRag::open_to_answer(
                dir,
                lprag::AnswerOptions {
                    store,
                    ..options.clone()
                },
            )
            .await?;
            let seconds = t.elapsed().as_secs_f64();
            if i == 0 {
                self.progress.finish(&self.stage);
            }
            let stages = vec![("open to answer".to_string(), seconds)];
            let neighbours = rag.config().candidate_neighbours;
            for &pool in &pools {
                if let Some(pool) = pool {
                    rag.set_candidates(pool, neighbours);
                }
                let row = self
                    .lprag_row(&rag, seconds, &stages, |name| {
                        let mut name = format!("{} answer-only", variant_name(pool, None, name));
                        if rows_from_store {
                            name.push_str(" rows=store");
                        }
                        if records_from_store {
                            name.push_str(" records=store");
                        }
                        if map_rows && !rows_from_store {
                            name.push_str(" rows=mapped");
                        }
                        match setup {
                            Some(s) => format!("{name} store={}", s.label()),
                            None => name,
                        }
                    })
                    .await?;
                out.push(row);
            }
        }
        Ok(())
    }

    /// Evaluate `rag` as it is set now: one row, named by `name` from the default name,
    /// with the query profile printed.
    async fn lprag_row(
        &self,
        rag: &lprag::LpRag,
        index_seconds: f64,
        stages: &[(String, f64)],
        name: impl Fn(&str) -> String,
    ) -> Result<ScaleResult> {
        let mut result = evaluate_retrieval(
            rag,
            self.dataset,
            index_seconds,
            self.options,
            self.progress,
        )
        .await?;
        result.retriever = name(&result.retriever);
        let profile = profile_queries(rag, self.dataset).await?;
        eprintln!(
            "  {} profile (median ms): embed {:.3}, candidates {:.3} ({} scored), predictor {:.3}, rank {:.3}, total {:.3}; RSS now {:.2} GB",
            result.retriever,
            profile.embed_ms,
            profile.candidates_ms,
            profile.scored,
            profile.predictor_ms,
            profile.rank_ms,
            profile.total_ms,
            rss_bytes().unwrap_or(0) as f64 / 1e9
        );
        Ok(ScaleResult {
            passages: self.dataset.corpus.len(),
            stages: stages.to_vec(),
            peak_rss_bytes: if self.can_reset {
                peak_rss_bytes()
            } else {
                None
            },
            result,
            profile: Some(profile),
        })
    }

    /// Build LP-RAG without the last `lprag_add_last` documents, finish the progress
    /// stage, then add them (timed as stage `add`); the index, its build seconds and its
    /// stages.
    async fn build_lprag(&self) -> Result<(lprag::LpRag, f64, Vec<(String, f64)>)> {
        let retrievers = &self.options.retrievers;
        let corpus = &self.dataset.corpus;
        let add = retrievers.lprag_add_last.min(corpus.len() - 1);
        let (base, later) = corpus.split_at(corpus.len() - add);
        let mut rag = build_lprag(base, self.encoder.clone(), retrievers).await?;
        let index_seconds = self.started.elapsed().as_secs_f64();
        self.progress.finish(&self.stage);
        let mut stages = rag.stats().seconds.clone();
        if add > 0 {
            let t = Instant::now();
            let chunker = crate::registry::lprag_chunker(retrievers);
            let report = rag.add_documents_with(later, &*chunker).await?;
            stages.push(("add".into(), t.elapsed().as_secs_f64()));
            eprintln!("lprag: added {add} documents: {report:?}");
        }
        Ok((rag, index_seconds, stages))
    }

    /// Any retriever but LP-RAG: build it (the updatable ones without the last
    /// `lprag_add_last` documents, then add them) and evaluate it.
    async fn other(&self, name: &str) -> Result<ScaleResult> {
        let t = self.started;
        let add = self.options.retrievers.lprag_add_last;
        let mut stages = Vec::new();
        let updatable = matches!(name, "qcg" | "lesegr" | "lesegr-lite" | "gfm");
        let retriever: Box<dyn lprag_core::Retriever> = if updatable && add > 0 {
            let corpus = &self.dataset.corpus;
            let (base, later) = corpus.split_at(corpus.len() - add.min(corpus.len() - 1));
            let (retriever, report, build) = crate::registry::build_then_add(
                name,
                base,
                later,
                self.encoder.clone(),
                &self.options.retrievers,
            )
            .await?;
            stages.push(("build".to_string(), build));
            stages.push(("add".into(), t.elapsed().as_secs_f64() - build));
            if let Some(report) = report {
                eprintln!("{name}: added {} documents: {report:?}", later.len());
            }
            retriever
        } else {
            let corpus = &self.dataset.corpus;
            let r =
                build_retriever_with(name, corpus, self.encoder.clone(), &self.options.retrievers)
                    .await?;
            stages.push(("build".to_string(), t.elapsed().as_secs_f64()));
            r
        };
        let index_seconds = t.elapsed().as_secs_f64();
        self.progress.finish(&self.stage);
        let result = evaluate_retrieval(
            retriever.as_ref(),
            self.dataset,
            index_seconds,
            self.options,
            self.progress,
        )
        .await?;
        let peak = if self.can_reset {
            peak_rss_bytes()
        } else {
            None
        };
        drop(retriever);
        Ok(ScaleResult {
            passages: self.dataset.corpus.len(),
            stages,
            peak_rss_bytes: peak,
            result,
            profile: None,
        })
    }
}

/// The pools and candidate searches of `variants`, each `[None]` (the configured one)
/// when empty.
fn variant_lists(
    variants: &Variants<'_>,
) -> (Vec<Option<Option<usize>>>, Vec<Option<CandidateSearch>>) {
    let pools: Vec<Option<Option<usize>>> = if variants.pools.is_empty() {
        vec![None]
    } else {
        variants.pools.iter().map(|&p| Some(p)).collect()
    };
    let searches: Vec<Option<CandidateSearch>> = if variants.searches.is_empty() {
        vec![None]
    } else {
        variants.searches.iter().map(|&p| Some(p)).collect()
    };
    (pools, searches)
}

/// Switch `rag` to `search` (nothing for `None`); the stage and seconds of the structure
/// it made (`columns` or `ivf`), if any.
fn set_candidate_search(
    rag: &mut lprag::LpRag,
    search: Option<CandidateSearch>,
) -> Result<Option<(&'static str, f64)>> {
    let mut made = None;
    if let Some(search) = search {
        let t = Instant::now();
        match search {
            CandidateSearch::Rows | CandidateSearch::Columns => {
                rag.set_candidate_index(None)?;
                rag.set_candidate_graph(None)?;
                let columns = search == CandidateSearch::Columns;
                rag.set_column_scan_from(columns.then_some(0))?;
                if columns {
                    made = Some(("columns", t.elapsed().as_secs_f64()));
                }
            }
            CandidateSearch::Graph(beam) => {
                // One graph serves every beam: link once, then only change the beam.
                let same = rag.config().candidate_graph.is_some();
                let params = lprag::graph::GraphParams {
                    beam,
                    ..rag.config().candidate_graph.unwrap_or_default()
                };
                if same {
                    rag.set_candidate_graph_beam(beam)?;
                } else {
                    rag.set_candidate_graph(Some(params))?;
                    made = Some(("graph", t.elapsed().as_secs_f64()));
                }
            }
            CandidateSearch::Ivf(probes) => {
                rag.set_candidate_index(Some(lprag::graph::IvfParams {
                    probes,
                    ..lprag::graph::IvfParams::default()
                }))?;
                made = Some(("ivf", t.elapsed().as_secs_f64()));
            }
        }
    }
    Ok(made)
}

/// An LP-RAG row's name: `lprag` plus its pool and search (`lprag P=20 ivf16`), or
/// `default` with the search when the pool is the configured one.
fn variant_name(
    pool: Option<Option<usize>>,
    search: Option<CandidateSearch>,
    default: &str,
) -> String {
    let mut name = match pool {
        Some(Some(p)) => format!("lprag P={p}"),
        Some(None) => "lprag all".into(),
        None => default.to_string(),
    };
    match search {
        Some(CandidateSearch::Ivf(k)) => name.push_str(&format!(" ivf{k}")),
        Some(CandidateSearch::Graph(b)) => name.push_str(&format!(" graph{b}")),
        Some(CandidateSearch::Rows) => name.push_str(" rows"),
        Some(CandidateSearch::Columns) => name.push_str(" columns"),
        None => {}
    }
    name
}

/// A Markdown table of scale results: one row per retriever and size, with query p50 as a
/// ratio to `baseline`'s in the same size's run (when it ran).
pub fn scale_markdown(rows: &[ScaleResult], baseline: &str) -> String {
    let mut s = String::from(
        "| passages | retriever | R@2 | R@5 | query p50 (ms) | p95 (ms) | p50 / baseline | index (s) | stages (s) | peak RSS (GB) |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---|---:|\n",
    );
    for r in rows {
        let base = rows
            .iter()
            .find(|b| b.passages == r.passages && b.result.retriever == baseline)
            .map(|b| b.result.query_ms_p50);
        let ratio = match base {
            Some(b) if b > 0.0 => format!("{:.2}×", r.result.query_ms_p50 / b),
            _ => "—".into(),
        };
        let stages: Vec<String> = r
            .stages
            .iter()
            .map(|(n, t)| format!("{n} {t:.1}"))
            .collect();
        let recall = |k: usize| {
            r.result
                .recall
                .get(&k)
                .map_or("—".into(), |v| format!("{:.2}", 100.0 * v))
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {:.1} | {} | {} |\n",
            r.passages,
            r.result.retriever,
            recall(2),
            recall(5),
            r.result.query_ms_p50,
            r.result.query_ms_p95,
            ratio,
            r.result.index_seconds,
            stages.join(", "),
            r.peak_rss_bytes
                .map_or("—".into(), |b| format!("{:.2}", b as f64 / 1e9)),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn candidate_searches_parse_and_bad_ones_say_what() {
        assert_eq!(
            "rows".parse::<CandidateSearch>().unwrap(),
            CandidateSearch::Rows
        );
        assert_eq!(
            "exact".parse::<CandidateSearch>().unwrap(),
            CandidateSearch::Rows
        );
        assert_eq!(
            " columns".parse::<CandidateSearch>().unwrap(),
            CandidateSearch::Columns
        );
        assert_eq!(
            "16".parse::<CandidateSearch>().unwrap(),
            CandidateSearch::Ivf(16)
        );
        let e = "0".parse::<CandidateSearch>().unwrap_err().to_string();
        assert!(
            e.contains("--candidate-search") && e.contains("at least 1"),
            "{e}"
        );
        let e = "cols".parse::<CandidateSearch>().unwrap_err().to_string();
        assert!(e.contains("`cols`") && e.contains("rows, columns"), "{e}");
    }

    #[test]
    fn stores_parse_by_the_first_parser_that_takes_them() {
        let got = parse_stores("memory", &[memory_store]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].label(), "memory");
        let e = parse_stores("memory,lance:/tmp/x", &[memory_store])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--store") && e.contains("`lance:/tmp/x`"), "{e}");
    }

    /// Each question's ranking and scores in a row.
    fn ranked(r: &ScaleResult) -> Vec<(Vec<usize>, Vec<f32>)> {
        r.result
            .per_question
            .iter()
            .map(|q| (q.ranking.clone(), q.scores.clone()))
            .collect()
    }

    /// LP-RAG trained two epochs, rankings kept.
    fn toy_options() -> EvalOptions {
        let mut options = EvalOptions {
            keep_rankings: true,
            ..EvalOptions::default()
        };
        options.retrievers.lprag.train.epochs = 2;
        options
    }

    /// Eight one-sentence passages and three questions, and the hashing encoder.
    fn toy_dataset() -> (Dataset, Arc<dyn Encoder>) {
        use crate::datasets::{DatasetFormat, Question};
        use lprag_core::Document;
        let topics = [
            (
                "Warsaw",
                "Warsaw is the capital of Poland, on the Vistula river.",
            ),
            (
                "Marie Curie",
                "Marie Curie was born in Warsaw and won two Nobel prizes.",
            ),
            ("Paris", "Paris is the capital of France, on the Seine."),
            ("Tokyo", "Tokyo is the capital of Japan, on Tokyo Bay."),
            (
                "Kyoto",
                "Kyoto was the imperial capital of Japan for a thousand years.",
            ),
            (
                "Everest",
                "Mount Everest is the highest mountain, in the Himalayas.",
            ),
            (
                "Nile",
                "The Nile is a long river flowing north through Egypt.",
            ),
            (
                "Alfred Nobel",
                "Alfred Nobel invented dynamite and founded the Nobel prizes.",
            ),
        ];
        let corpus: Vec<Document> = topics
            .iter()
            .enumerate()
            .map(|(i, (t, x))| Document::new(i.to_string(), *t, *x))
            .collect();
        let question = |id: &str, q: &str, gold: Vec<usize>| Question {
            id: id.into(),
            question: q.into(),
            answers: vec![],
            gold,
            grades: vec![],
            unmatched_gold: vec![],
            metadata: Default::default(),
        };
        let dataset = Dataset {
            name: "toy".into(),
            format: DatasetFormat::Jsonl,
            corpus,
            questions: vec![
                question(
                    "a",
                    "Which river flows through Marie Curie's birthplace?",
                    vec![0, 1],
                ),
                question("b", "Where is the highest mountain?", vec![5]),
                question("c", "Who founded the Nobel prizes?", vec![7]),
            ],
            duplicates_dropped: 0,
        };
        let encoder = crate::registry::build_encoder(
            crate::registry::EncoderKind::Hashing,
            &dataset.corpus,
            None,
        )
        .unwrap();
        (dataset, encoder)
    }

    /// A store row ranks as the in-memory row on the same index (an exact store), and
    /// records the store's stages.
    #[tokio::test]
    async fn a_memory_store_row_matches_the_in_memory_row() {
        use lprag_core::NoProgress;
        let (dataset, encoder) = toy_dataset();
        let options = toy_options();
        let stores: Vec<Box<dyn StoreSetup>> = vec![Box::new(MemoryStoreSetup)];
        let variants = Variants {
            pools: &[Some(2)],
            searches: &[],
            stores: &stores,
        };
        let rows = run_scale(
            &dataset,
            &["lprag".to_string()],
            encoder,
            &options,
            &variants,
            &NoProgress,
        )
        .await
        .unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.result.retriever.as_str()).collect();
        assert_eq!(names, ["lprag P=2", "lprag P=2 store=memory"]);
        assert_eq!(rows[0].result.recall, rows[1].result.recall);
        assert_eq!(ranked(&rows[0]), ranked(&rows[1]));
        assert!(!ranked(&rows[0]).is_empty());
        let stages: Vec<&str> = rows[1].stages.iter().map(|(s, _)| s.as_str()).collect();
        assert!(
            stages.contains(&"store write") && stages.contains(&"store attach"),
            "{stages:?}"
        );
    }

    /// `lprag` on `dataset` with a pool of 2 and `stores`.
    async fn lprag_pool_2(
        dataset: Dataset,
        encoder: Arc<dyn Encoder>,
        options: EvalOptions,
        stores: Vec<Box<dyn StoreSetup>>,
    ) -> Result<Vec<ScaleResult>> {
        let variants = Variants {
            pools: &[Some(2)],
            stores: &stores,
            ..Variants::default()
        };
        let lprag = ["lprag".to_string()];
        let progress = lprag_core::NoProgress;
        run_scale(&dataset, &lprag, encoder, &options, &variants, &progress).await
    }

    /// The toy dataset's LP-RAG row built and saved (`--lprag-save`), for the rows that
    /// open it to answer only.
    struct SavedToy {
        dataset: Dataset,
        encoder: Arc<dyn Encoder>,
        _dir: tempfile::TempDir,
        saved: std::path::PathBuf,
        built: Vec<ScaleResult>,
    }

    impl SavedToy {
        async fn new() -> Self {
            let (dataset, encoder) = toy_dataset();
            let dir = tempfile::tempdir().unwrap();
            let saved = dir.path().join("musique-8");
            let mut options = toy_options();
            options.retrievers.lprag_save = Some(saved.clone());
            let built = lprag_pool_2(dataset.clone(), encoder.clone(), options, Vec::new())
                .await
                .unwrap();
            Self {
                dataset,
                encoder,
                _dir: dir,
                saved,
                built,
            }
        }

        /// The LP-RAG rows of a run over the same dataset with `options` and `stores`.
        async fn run(
            &self,
            options: EvalOptions,
            stores: Vec<Box<dyn StoreSetup>>,
        ) -> Result<Vec<ScaleResult>> {
            lprag_pool_2(self.dataset.clone(), self.encoder.clone(), options, stores).await
        }
    }

    /// `--lprag-save` then `--lprag-answer-from`: the index opened to answer only ranks
    /// as the one that was built and saved, in memory and with a store made from the saved
    /// index (none was made before).
    #[tokio::test]
    async fn an_answer_only_row_ranks_as_the_saved_index() {
        let toy = SavedToy::new().await;
        let (saved, built) = (toy.saved.clone(), &toy.built);
        let run = |options, stores| toy.run(options, stores);
        let mut options = toy_options();
        assert!(saved.join("manifest.json").exists());
        options.retrievers.lprag_answer_from = Some(saved.clone());
        let answered = run(options.clone(), Vec::new()).await.unwrap();
        let names: Vec<&str> = answered
            .iter()
            .map(|r| r.result.retriever.as_str())
            .collect();
        assert_eq!(names, ["lprag P=2 answer-only"]);
        assert!(!ranked(&built[0]).is_empty());
        assert_eq!(ranked(&built[0]), ranked(&answered[0]));
        assert_eq!(built[0].result.recall, answered[0].result.recall);
        assert_eq!(answered[0].stages[0].0, "open to answer");
        let stored = run(options, vec![Box::new(MemoryStoreSetup)])
            .await
            .unwrap();
        assert_eq!(
            stored[0].result.retriever,
            "lprag P=2 answer-only store=memory"
        );
        assert_eq!(ranked(&built[0]), ranked(&stored[0]));
    }

    /// A store made beforehand, handed out by `open` (as a store of an earlier run).
    #[derive(Debug)]
    struct Held(Arc<lprag::MemoryStore>);

    #[async_trait::async_trait]
    impl StoreSetup for Held {
        fn label(&self) -> String {
            "held".into()
        }

        async fn make(
            &self,
            _rag: &lprag::LpRag,
            _passages: usize,
            _progress: &dyn Progress,
        ) -> Result<(Arc<dyn ChunkStore>, Vec<(String, f64)>)> {
            Ok((self.0.clone(), Vec::new()))
        }

        async fn open(&self, _passages: usize) -> Result<Option<Arc<dyn ChunkStore>>> {
            Ok(Some(self.0.clone()))
        }
    }

    /// `--lprag-rows-from-store`: the answering process reads every chunk row from the
    /// store and ranks as the saved index; without a store it is refused.
    #[tokio::test]
    async fn a_row_reading_its_rows_from_the_store_ranks_as_the_saved_index() {
        use lprag_core::NoProgress;
        let toy = SavedToy::new().await;
        let (encoder, saved, built) = (toy.encoder.clone(), toy.saved.clone(), &toy.built);
        let run = |options, stores| toy.run(options, stores);
        let mut options = toy_options();
        let rag = lprag::LpRag::load(&saved, encoder.clone()).unwrap();
        let store = Arc::new(
            lprag::MemoryStore::new(
                rag.graph().features.dim(),
                rag.predictor().stored_representation_dim(),
            )
            .unwrap(),
        );
        rag.write_store(&*store, &NoProgress).await.unwrap();
        options.retrievers.lprag_answer_from = Some(saved.clone());
        options.retrievers.lprag_rows_from_store = true;
        let answered = run(options.clone(), vec![Box::new(Held(store.clone()))])
            .await
            .unwrap();
        let names: Vec<&str> = answered
            .iter()
            .map(|r| r.result.retriever.as_str())
            .collect();
        assert_eq!(names, ["lprag P=2 answer-only rows=store store=held"]);
        let (want, got) = (ranked(&built[0]), ranked(&answered[0]));
        assert!(!want.is_empty() && want.len() == got.len());
        for ((ids, scores), (got_ids, got_scores)) in want.iter().zip(&got) {
            assert_eq!(ids, got_ids);
            for (a, b) in scores.iter().zip(got_scores) {
                assert!((a - b).abs() <= 1e-5, "{scores:?} vs {got_scores:?}");
            }
        }
        // The records read from the store too: the same rankings, the same passages.
        options.retrievers.lprag_records_from_store = true;
        let answered = run(options.clone(), vec![Box::new(Held(store))])
            .await
            .unwrap();
        assert_eq!(
            answered[0].result.retriever,
            "lprag P=2 answer-only rows=store records=store store=held"
        );
        assert_eq!(ranked(&answered[0]).len(), want.len());
        for ((ids, _), (got_ids, _)) in want.iter().zip(&ranked(&answered[0])) {
            assert_eq!(ids, got_ids);
        }
        assert_eq!(built[0].result.recall, answered[0].result.recall);
        let err = run(options, Vec::new()).await.unwrap_err().to_string();
        assert!(err.contains("give one with --store"), "{err}");
    }

    fn row(passages: usize, name: &str, p50: f64) -> ScaleResult {
        ScaleResult {
            passages,
            stages: vec![("build".into(), 1.5)],
            peak_rss_bytes: Some(2_000_000_000),
            profile: None,
            result: RetrievalResult {
                retriever: name.into(),
                recall: BTreeMap::from([(2, 0.5), (5, 0.75)]),
                mrr_at_10: 0.5,
                ndcg_at_10: 0.5,
                index_seconds: 1.5,
                query_ms_p50: p50,
                query_ms_p95: p50 * 2.0,
                tokens_per_query: 0.0,
                questions: 1,
                questions_with_gold: 1,
                per_question: Vec::new(),
            },
        }
    }

    #[test]
    fn table_gives_ratios_within_a_size() {
        let rows = vec![
            row(10, "dense", 2.0),
            row(10, "lprag", 3.0),
            row(20, "lprag", 8.0),
        ];
        let t = scale_markdown(&rows, "dense");
        assert!(
            t.contains("| 10 | lprag | 50.00 | 75.00 | 3.00 | 6.00 | 1.50× |"),
            "{t}"
        );
        assert!(
            t.contains("| 20 | lprag | 50.00 | 75.00 | 8.00 | 16.00 | — |"),
            "{t}"
        );
        assert!(t.contains("| 2.00 |"));
    }

    #[test]
    fn peak_rss_is_read_where_linux_reports_it() {
        if std::path::Path::new("/proc/self/status").exists() {
            let before = peak_rss_bytes().expect("VmHWM");
            assert!(before > 0);
            assert!(rss_bytes().expect("VmRSS") > 0);
        }
        let e = make_corpus(
            Path::new("/nonexistent/tool.py"),
            10,
            Path::new("/nonexistent"),
        );
        assert!(e.unwrap_err().to_string().contains("scale-corpus.py"));
    }
}
