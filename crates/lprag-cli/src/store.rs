//! `lprag index`, `sync` and `query`: one retriever of any kind behind [`AnyIndex`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use lprag::llm::{ChatModel, LlmChunker, LlmEnv, LlmQueryGenerator, OpenAiChat, OpenAiConfig};
use lprag::{
    AnswerOptions, Bm25Retriever, Chunk, Chunker, ComputeDevice, Document, Encoder, Error, Filter,
    G2Rag, GfmRag, LesegrRag, LpRag, LpRagConfig, Progress, QcgRag, Result, Retriever, ScoredChunk,
    Selection, StderrProgress, Updatable, UpdateInputs, UpdateReport,
};
use lprag::{DenseRetriever, HybridRetriever, NoProgress, QueryGenerator};
use lprag_load::{DirSource, LoadOptions, LoadReport};
use serde::Serialize;

use crate::settings::{
    index_path, EncoderSpec, LlmSettings, RetrieverKind, Settings, INDEX_DIR, SETTINGS_VERSION,
    WORK_SUBDIR,
};
use crate::{DeviceArg, IndexArgs, QueryArgs, SyncArgs};

/// A retriever of any kind the command builds.
#[derive(Clone)]
pub enum AnyIndex {
    /// LP-RAG (boxed: by far the largest).
    Lprag(Box<LpRag>),
    /// QCG-RAG.
    Qcg(QcgRag),
    /// LeSeGR.
    Lesegr(LesegrRag),
    /// GFM-RAG.
    Gfm(GfmRag),
    /// G²RAG (no in-place updates).
    G2(G2Rag),
    /// Dense search.
    Dense(DenseRetriever),
    /// BM25.
    Bm25(Bm25Retriever),
    /// Dense + BM25.
    Hybrid(HybridRetriever),
}

macro_rules! each {
    ($self:expr, $r:ident => $body:expr) => {
        match $self {
            AnyIndex::Lprag($r) => $body,
            AnyIndex::Qcg($r) => $body,
            AnyIndex::Lesegr($r) => $body,
            AnyIndex::Gfm($r) => $body,
            AnyIndex::G2($r) => $body,
            AnyIndex::Dense($r) => $body,
            AnyIndex::Bm25($r) => $body,
            AnyIndex::Hybrid($r) => $body,
        }
    };
}

#[async_trait]
impl Retriever for AnyIndex {
    fn name(&self) -> &str {
        each!(self, r => r.name())
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        each!(self, r => r.retrieve(query, selection).await)
    }

    fn chunks(&self) -> &[Chunk] {
        each!(self, r => r.chunks())
    }

    fn num_chunks(&self) -> usize {
        each!(self, r => r.num_chunks())
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        each!(self, r => r.retrieve_filtered(query, selection, filter).await)
    }
}

#[async_trait]
impl Updatable for AnyIndex {
    async fn apply_changes(
        &mut self,
        upsert: &[Document],
        remove: &[String],
        inputs: &UpdateInputs,
    ) -> Result<UpdateReport> {
        match self {
            AnyIndex::Lprag(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Qcg(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Lesegr(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Gfm(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Dense(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Bm25(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::Hybrid(r) => r.apply_changes(upsert, remove, inputs).await,
            AnyIndex::G2(_) => Err(Error::invalid(
                "G2Rag update",
                "G²RAG does not update in place; `lprag sync` rebuilds it",
            )),
        }
    }

    fn save_index(&self, dir: &Path) -> Result<()> {
        each!(self, r => r.save(dir))
    }
}

impl AnyIndex {
    /// Whether the retriever updates in place.
    pub fn updates(&self) -> bool {
        !matches!(self, AnyIndex::G2(_))
    }
}

/// An opened index: its settings, the retriever and what updates it with.
pub struct Opened {
    /// `lprag.json`.
    pub settings: Settings,
    /// The retriever.
    pub index: AnyIndex,
    /// The chunker (and LLM components) of updates: the build's.
    pub inputs: UpdateInputs,
    /// The encoder.
    pub encoder: Arc<dyn Encoder>,
}

/// The LLM of `settings`, configured from the command line and the environment.
fn llm(settings: &LlmSettings) -> Result<Arc<dyn ChatModel>> {
    let config = OpenAiConfig::resolve(
        settings.base_url.as_deref(),
        Some(&settings.model),
        &LlmEnv::from_process(),
    )
    .map_err(|e| Error::invalid("--llm", e.to_string()))?;
    let chat = OpenAiChat::new(config).map_err(|e| Error::invalid("--llm", e.to_string()))?;
    Ok(Arc::new(chat))
}

/// The build's chunker and LLM components for `settings`.
fn inputs(settings: &Settings, encoder: &Arc<dyn Encoder>) -> Result<UpdateInputs> {
    let mut inputs = UpdateInputs::with_chunker(Arc::new(
        lprag::text::MarkdownChunker::for_encoder(encoder.clone(), settings.max_tokens),
    ));
    if let Some(l) = &settings.llm {
        let model = llm(l)?;
        inputs.chunker = Arc::new(LlmChunker::new(model.clone()));
        inputs.query_generator = Some(Arc::new(LlmQueryGenerator::new(model)));
    }
    Ok(inputs)
}

/// Open the index in `dir`, its encoder and network on `on.device`.
///
/// # Errors
/// When `dir` is not a complete index of the command, or its encoder cannot be rebuilt.
pub fn open(dir: &Path, on: DeviceArg) -> Result<Opened> {
    let device = on.device;
    let settings = Settings::read(dir)?;
    let path = index_path(dir);
    if !path.is_dir() {
        return Err(Error::invalid(
            dir.display().to_string(),
            "the index was never completed (no index/); run `lprag index` again to resume",
        ));
    }
    let encoder = settings.encoder.build(on)?;
    let index = match settings.retriever {
        RetrieverKind::Lprag => {
            AnyIndex::Lprag(Box::new(LpRag::load_on(&path, encoder.clone(), device)?))
        }
        RetrieverKind::Qcg => AnyIndex::Qcg(QcgRag::load(&path, encoder.clone())?),
        RetrieverKind::Lesegr => AnyIndex::Lesegr(LesegrRag::load(&path, encoder.clone())?),
        RetrieverKind::Gfm => AnyIndex::Gfm(GfmRag::load_on(&path, encoder.clone(), device)?),
        RetrieverKind::G2 => AnyIndex::G2(G2Rag::load(&path, encoder.clone())?),
        RetrieverKind::Dense => AnyIndex::Dense(DenseRetriever::load(&path, encoder.clone())?),
        RetrieverKind::Bm25 => AnyIndex::Bm25(Bm25Retriever::open(&path)?),
        RetrieverKind::Hybrid => AnyIndex::Hybrid(HybridRetriever::load(&path, encoder.clone())?),
    };
    let inputs = inputs(&settings, &encoder)?;
    Ok(Opened {
        settings,
        index,
        inputs,
        encoder,
    })
}

/// [`open`] for a process that only answers (`lprag query`): an LP-RAG index with the
/// built-in GNN is opened with [`LpRag::open_to_answer`] (its synthetic questions, their
/// rows and the k-NN lists stay on disk; the chunk rows are memory-mapped,
/// [`AnswerOptions::map_rows`]); other indexes as [`open`] opens them.
///
/// # Errors
/// As [`open`].
pub async fn open_to_answer(dir: &Path, on: DeviceArg) -> Result<Opened> {
    let settings = Settings::read(dir)?;
    let path = index_path(dir);
    if settings.retriever != RetrieverKind::Lprag || !path.is_dir() {
        return open(dir, on);
    }
    let encoder = settings.encoder.build(on)?;
    // The chunk rows are read through a memory map of the index's graph file: services
    // answering from one index share them in the page cache, and `lprag sync` replaces
    // the file by a rename, which leaves a mapping intact.
    let options = AnswerOptions {
        encoder: Some(encoder.clone()),
        device: on.device,
        map_rows: true,
        ..AnswerOptions::default()
    };
    let rag = match LpRag::open_to_answer(&path, options).await {
        Ok(rag) => rag,
        // Another predictor (or a damaged index): the whole index, or its error.
        Err(_) => return open(dir, on),
    };
    let inputs = inputs(&settings, &encoder)?;
    Ok(Opened {
        settings,
        index: AnyIndex::Lprag(Box::new(rag)),
        inputs,
        encoder,
    })
}

/// How `lprag index` builds, beyond its settings.
#[derive(Debug, Clone, Copy)]
struct Build {
    /// No progress on stderr.
    quiet: bool,
    /// Where LP-RAG's, LeSeGR's and GFM-RAG's networks train.
    device: ComputeDevice,
    /// LP-RAG's matrices in its work directory (`LpRagBuilder::features_on_disk`).
    features_on_disk: bool,
}

/// Build `kind` over the documents of `folder`, read a block at a time (never held whole),
/// as `on` says (progress on stderr unless quiet, networks trained on its device).
async fn build(
    settings: &Settings,
    dir: &Path,
    folder: &DirSource,
    encoder: Arc<dyn Encoder>,
    on: Build,
) -> Result<AnyIndex> {
    let Build {
        quiet,
        device,
        features_on_disk,
    } = on;
    let progress = progress(quiet);
    let inputs = inputs(settings, &encoder)?;
    let chunker = inputs.chunker.clone();
    Ok(match settings.retriever {
        RetrieverKind::Lprag => {
            let work_dir = dir.join(WORK_SUBDIR);
            let on = (device, features_on_disk);
            build_lprag(settings, work_dir, folder, chunker, encoder, progress, on).await?
        }
        RetrieverKind::Qcg => {
            let generator = inputs.query_generator;
            build_qcg(folder, chunker, generator, encoder, progress).await?
        }
        RetrieverKind::Lesegr => AnyIndex::Lesegr(
            LesegrRag::builder()
                .device(device)
                .chunker(chunker)
                .encoder(encoder)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
        RetrieverKind::Gfm => AnyIndex::Gfm(
            GfmRag::builder()
                .device(device)
                .chunker(chunker)
                .encoder(encoder)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
        RetrieverKind::G2 => AnyIndex::G2(
            G2Rag::builder()
                .chunker(chunker)
                .encoder(encoder)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
        RetrieverKind::Dense => AnyIndex::Dense(
            DenseRetriever::builder()
                .chunker(chunker)
                .encoder(encoder)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
        RetrieverKind::Bm25 => AnyIndex::Bm25(
            Bm25Retriever::builder()
                .chunker(chunker)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
        RetrieverKind::Hybrid => AnyIndex::Hybrid(
            HybridRetriever::builder()
                .chunker(chunker)
                .encoder(encoder)
                .progress(progress)
                .build_from(folder)
                .await?,
        ),
    })
}

/// Build LP-RAG over `folder` with the settings' epochs and LLM, working in `work_dir`,
/// training on `device`, its matrices in `work_dir` with `features_on_disk`.
async fn build_lprag(
    settings: &Settings,
    work_dir: PathBuf,
    folder: &DirSource,
    chunker: Arc<dyn Chunker>,
    encoder: Arc<dyn Encoder>,
    progress: Arc<dyn Progress>,
    (device, features_on_disk): (ComputeDevice, bool),
) -> Result<AnyIndex> {
    let mut config = LpRagConfig::default();
    if let Some(e) = settings.epochs {
        config.train.epochs = e;
    }
    let mut b = LpRag::builder()
        .config(config)
        .device(device)
        .chunker(chunker)
        .encoder(encoder)
        .progress(progress)
        .work_dir(work_dir)
        .features_on_disk(features_on_disk);
    if let Some(l) = &settings.llm {
        b = b.llm(llm(l)?);
    }
    Ok(AnyIndex::Lprag(Box::new(b.build_from(folder).await?)))
}

/// Build QCG-RAG over `folder`, with `generator` (the LLM's) when there is one.
async fn build_qcg(
    folder: &DirSource,
    chunker: Arc<dyn Chunker>,
    generator: Option<Arc<dyn QueryGenerator>>,
    encoder: Arc<dyn Encoder>,
    progress: Arc<dyn Progress>,
) -> Result<AnyIndex> {
    let mut b = QcgRag::builder()
        .chunker(chunker)
        .encoder(encoder)
        .progress(progress);
    if let Some(g) = generator {
        b = b.query_generator(g);
    }
    Ok(AnyIndex::Qcg(b.build_from(folder).await?))
}

fn progress(quiet: bool) -> Arc<dyn Progress> {
    if quiet {
        Arc::new(NoProgress)
    } else {
        Arc::new(StderrProgress::new(1))
    }
}

/// The files under `dir` as a source read a block at a time (each file read once now).
fn open_folder(dir: &Path, settings: &Settings, strict: bool, quiet: bool) -> Result<DirSource> {
    let source = DirSource::open(dir, &load_options(settings, strict), &*progress(quiet))?;
    if source.is_empty() {
        return Err(no_document(dir, source.report()));
    }
    Ok(source)
}

fn load_options(settings: &Settings, strict: bool) -> LoadOptions {
    LoadOptions {
        max_file_bytes: settings.max_file_bytes,
        strict,
        ..LoadOptions::default()
    }
}

fn no_document(dir: &Path, report: &LoadReport) -> Error {
    Error::EmptyCorpus(format!(
        "no document found under {} ({} files seen, {} skipped)",
        dir.display(),
        report.files_seen,
        report.skipped.len()
    ))
}

fn print_load(report: &LoadReport) {
    let formats: Vec<String> = report
        .by_format
        .iter()
        .map(|(f, n)| format!("{n} {f}"))
        .collect();
    eprintln!(
        "loaded {} documents from {} files ({}); {} skipped",
        report.documents,
        report.files_loaded,
        formats.join(", "),
        report.skipped.len()
    );
    for s in &report.skipped {
        eprintln!("  skipped {}: {}", s.path, s.reason);
    }
}

/// `lprag index`.
pub async fn index(args: IndexArgs, quiet: bool) -> Result<()> {
    let started = Instant::now();
    let dir = &args.index;
    INDEX_DIR.check(dir)?;
    let source = std::fs::canonicalize(&args.dir).map_err(|e| Error::io(&args.dir, e))?;
    if let Ok(old) = Settings::read(dir) {
        if old.retriever != args.retriever && index_path(dir).exists() {
            return Err(Error::invalid(
                dir.display().to_string(),
                format!(
                    "holds a {:?} index; index into a new directory to build a {:?} one",
                    old.retriever, args.retriever
                ),
            ));
        }
    }
    if args.features_on_disk && args.retriever != RetrieverKind::Lprag {
        return Err(Error::invalid(
            "--features-on-disk",
            format!(
                "keeps LP-RAG's build matrices on disk; the {:?} retriever has none",
                args.retriever
            ),
        ));
    }
    let (encoder_spec, encoder) = EncoderSpec::choose(args.encoder, args.model.clone(), args.on)?;
    let settings = Settings {
        lprag_index_version: SETTINGS_VERSION,
        retriever: args.retriever,
        encoder: encoder_spec,
        max_tokens: args.max_tokens,
        source,
        max_file_bytes: args.max_file_bytes,
        epochs: args.epochs,
        llm: args.llm.map(|model| LlmSettings {
            model,
            base_url: args.llm_base_url.map(|u| lprag::llm::redact_url(&u)),
        }),
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    // A new index's settings mark the directory as the command's before the long build;
    // over an existing index they are replaced only once the new index is saved, so a
    // failed rebuild never leaves settings that do not match the saved index.
    let rebuild = index_path(dir).exists();
    if !rebuild {
        settings.write(dir)?;
    }
    // The folder is read once here (the report), then again a block at a time by the
    // build, which never holds every document.
    let folder = open_folder(&settings.source, &settings, args.strict, quiet)?;
    if !quiet {
        print_load(folder.report());
    }
    let on = Build {
        quiet,
        device: args.on.device,
        features_on_disk: args.features_on_disk,
    };
    let index = build(&settings, dir, &folder, encoder, on).await?;
    let path = index_path(dir);
    let saved = index.clone();
    lprag::core::blocking(move || saved.save_index(&path)).await?;
    if rebuild {
        settings.write(dir)?;
    }
    eprintln!(
        "indexed {} documents as {} chunks with {} in {:.1} s into {}",
        folder.len(),
        index.chunks().len(),
        index.name(),
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

/// What `lprag sync` prints.
#[derive(Serialize)]
struct SyncSummary<'a> {
    added: usize,
    changed: usize,
    removed: usize,
    unchanged: usize,
    rebuilt: bool,
    skipped_files: usize,
    update: Option<&'a UpdateReport>,
}

/// `lprag sync`.
pub async fn sync(args: SyncArgs, quiet: bool) -> Result<()> {
    let dir = &args.index;
    let _lock = lprag::core::dirs::DirLock::acquire(dir, "lprag sync")?;
    let Opened {
        settings,
        mut index,
        inputs,
        encoder,
    } = open(dir, args.on)?;
    let folder = open_folder(&args.dir, &settings, args.strict, quiet)?;
    let load_report = folder.report();
    if !quiet {
        print_load(load_report);
    }
    let (plan, update, rebuilt) = if index.updates() {
        let report = lprag::sync_from(&mut index, &folder, &inputs).await?;
        (report.plan, report.update, false)
    } else {
        let plan = lprag::SyncPlan::from_source(&index.document_hashes(), &folder).await?;
        let rebuild = !plan.is_empty();
        if rebuild {
            let on = Build {
                quiet,
                device: args.on.device,
                features_on_disk: false,
            };
            index = build(&settings, dir, &folder, encoder, on).await?;
        }
        (plan, None, rebuild)
    };
    if update.is_some() || rebuilt {
        let path = index_path(dir);
        let saved = index.clone();
        lprag::core::blocking(move || saved.save_index(&path)).await?;
    }
    let summary = SyncSummary {
        added: plan.added.len(),
        changed: plan.changed.len(),
        removed: plan.removed.len(),
        unchanged: plan.unchanged,
        rebuilt,
        skipped_files: load_report.skipped.len(),
        update: update.as_ref(),
    };
    eprintln!(
        "sync: {} added, {} changed, {} removed, {} unchanged{}",
        summary.added,
        summary.changed,
        summary.removed,
        summary.unchanged,
        if rebuilt { " (rebuilt)" } else { "" }
    );
    if !quiet {
        for id in plan
            .added
            .iter()
            .map(|i| ("+", i))
            .chain(plan.changed.iter().map(|i| ("~", i)))
            .chain(plan.removed.iter().map(|i| ("-", i)))
        {
            eprintln!("  {} {}", id.0, id.1);
        }
    }
    Ok(())
}

/// One hit as `lprag query --json` and the service print it.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Hit {
    /// The retriever's score (higher is better).
    pub score: f32,
    /// The chunk's text.
    pub text: String,
    /// The document's id (its path under the indexed folder).
    pub document: String,
    /// The chunk's metadata.
    pub metadata: BTreeMap<String, String>,
}

impl From<ScoredChunk> for Hit {
    fn from(h: ScoredChunk) -> Self {
        Hit {
            score: h.score,
            text: h.chunk.text,
            document: h.chunk.provenance.document_id,
            metadata: h.chunk.metadata,
        }
    }
}

/// `KEY=VALUE` filters, all of which must hold.
pub fn parse_filters(filters: &[String]) -> Result<Filter> {
    let mut out = Filter::All;
    for f in filters {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| Error::invalid("--filter", format!("'{f}' is not KEY=VALUE")))?;
        let eq = Filter::eq(k.trim(), v.trim());
        out = if out.is_all() { eq } else { out.and(eq) };
    }
    Ok(out)
}

/// `lprag query`.
pub async fn query(args: QueryArgs) -> Result<()> {
    if args.k == 0 {
        return Err(Error::invalid("-k", "must be at least 1"));
    }
    let filter = parse_filters(&args.filters)?;
    let Opened { index, .. } = open_to_answer(&args.index, args.on).await?;
    let hits = index
        .retrieve_filtered(&args.query, Selection::TopK(args.k), &filter)
        .await?;
    let hits: Vec<Hit> = hits.into_iter().map(Hit::from).collect();
    if args.json {
        let out = serde_json::to_string_pretty(&hits)
            .map_err(|e| Error::invalid("--json", e.to_string()))?;
        println!("{out}");
    } else if hits.is_empty() {
        println!("no match");
    } else {
        for (i, h) in hits.iter().enumerate() {
            let heading = h
                .metadata
                .get("heading")
                .map(|s| format!(" > {s}"))
                .unwrap_or_default();
            println!("{}. [{:.3}] {}{}", i + 1, h.score, h.document, heading);
            for line in h.text.lines() {
                println!("   {line}");
            }
        }
    }
    Ok(())
}
