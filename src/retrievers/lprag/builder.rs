//! [`LpRagBuilder`]: the components of a build and the build itself, stage by stage.

use super::stages::{self, ChunkInput, EmbedInput, QueryInput, StageCtx};
use super::{
    read_manifest, search_for_at, IndexStats, LpRag, LpRagConfig, Manifest, ModelChoice,
    PredictorSource, RankModel, RecordingProgress,
};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use lprag_core::{
    Document, DocumentSource, Encoder, Error, LinkPredictor, LinkScorer, QueryGenerator, Result,
};
use lprag_llm::{ChatModel, LlmChunker, LlmQueryGenerator, OnUnparseable, TokenMeter};
use lprag_model::ComputeDevice;
use lprag_text::HeuristicQueryGenerator;

use crate::retrievers::common::{
    encoder_and_fit, input_setters, labelled_queries, BuildInputs, Docs, Labelled, Parents,
};
use crate::workdir::{StageKey, WorkDir, COLUMNS_FILE, REPRESENTATIONS_FILE};

/// Assembles an [`LpRag`] retriever; every component has an offline default.
///
/// The default chunker keeps documents whole (split only where one exceeds the encoder's
/// input). The paper's atomic chunks come from an LLM that rewrites statements to stand
/// alone; the offline [`lprag_text::SentenceChunker`] cuts sentences as written ("She was
/// born in …"), which loses the subject, and measured 3–4 points below whole passages on
/// MuSiQue-100 (`docs/benchmarks.md`). Pass `Arc::new(SentenceChunker::default())` to
/// [`LpRagBuilder::chunker`] to index sentences.
#[derive(Default)]
pub struct LpRagBuilder {
    inputs: BuildInputs,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    llm: Option<Arc<dyn ChatModel>>,
    llm_on_unparseable: OnUnparseable,
    model: Option<ModelChoice>,
    labelled: Labelled,
    labelled_only: bool,
    config: LpRagConfig,
    work_dir: Option<PathBuf>,
    features_on_disk: bool,
    device: ComputeDevice,
}

impl LpRagBuilder {
    input_setters!();

    /// Use this query generator (default: [`HeuristicQueryGenerator`]).
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Index with an LLM, as the paper does: [`LlmChunker`] (C-PROMPT atomic statements)
    /// and [`LlmQueryGenerator`] (S-PROMPT questions per A.2 batch) replace the offline
    /// defaults, unless [`LpRagBuilder::chunker`] / [`LpRagBuilder::query_generator`]
    /// chose others. Tokens per stage land in [`IndexStats::llm_usage`].
    ///
    /// Wrap the model in a [`CachedChat`](lprag_llm::CachedChat) so an interrupted build
    /// resumes without paying again:
    ///
    /// ```no_run
    /// # async fn run(docs: Vec<lprag::Document>) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use lprag::llm::{CachedChat, OpenAiChat, OpenAiConfig};
    /// let config = OpenAiConfig::from_env().ok_or("set LPRAG_LLM_MODEL")?;
    /// let model = CachedChat::open(Arc::new(OpenAiChat::new(config)?), "llm-cache")?;
    /// let rag = lprag::LpRag::builder().llm(Arc::new(model)).build(&docs).await?;
    /// println!("{:?}", rag.stats().llm_usage);
    /// # Ok(()) }
    /// ```
    ///
    /// A weak model does not abort the build: a document (or batch) whose answer cannot be
    /// parsed, even after the model is asked once more, is chunked by the offline
    /// [`lprag_text::SentenceChunker`] (or gets [`HeuristicQueryGenerator`] questions) instead;
    /// [`IndexStats::llm_usage`]'s `fallbacks` counts them per stage and
    /// [`IndexStats::warnings`] says so. [`LpRagBuilder::llm_on_unparseable`] with
    /// [`OnUnparseable::Fail`] fails the build instead.
    pub fn llm(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.llm = Some(model);
        self
    }

    /// What the LLM chunker and query writer made by [`LpRagBuilder::llm`] do with an
    /// answer they cannot parse: fall back to the offline component for that item
    /// (default) or fail the build ([`OnUnparseable::Fail`], strict mode).
    pub fn llm_on_unparseable(mut self, policy: OnUnparseable) -> Self {
        self.llm_on_unparseable = policy;
        self
    }

    /// Use a custom link predictor instead of the [`GnnLinkPredictor`](crate::extend::GnnLinkPredictor) built from
    /// [`LpRagConfig::model`] and [`LpRagConfig::train`]; it is trained with
    /// [`LinkPredictor::fit`] on the index's graph. Reopen the saved index with
    /// [`LpRag::load_with`]. Replaces an earlier [`LpRagBuilder::scorer`].
    pub fn predictor(mut self, predictor: Box<dyn LinkPredictor>) -> Self {
        self.model = Some(ModelChoice::Predictor(predictor));
        self
    }

    /// Rank with a training-free [`LinkScorer`] instead of a trained link predictor: the
    /// index is built as usual (chunks, embeddings, chunk graph, synthetic queries) but
    /// nothing is trained, and every query is scored by `scorer` with the index's graph in
    /// its [`ScoreContext`](crate::extend::ScoreContext). Reopen the saved index with [`LpRag::load_with_scorer`].
    /// Replaces an earlier [`LpRagBuilder::predictor`].
    ///
    /// If the scorer does not read the synthetic queries, skip writing them (and their
    /// LLM calls) with `.labelled_only(Vec::new())`.
    pub fn scorer(mut self, scorer: impl LinkScorer + 'static) -> Self {
        self.model = Some(ModelChoice::Scorer(Arc::new(scorer)));
        self
    }

    /// Train and score the built-in predictor on `device` (default
    /// [`ComputeDevice::Cpu`]; a GPU needs the `cuda` or `wgpu` cargo feature, checked
    /// before anything is computed). Reopen the index on a device with [`LpRag::open_on`]
    /// or [`LpRag::load_on`]. A custom predictor chooses its own device.
    pub fn device(mut self, device: ComputeDevice) -> Self {
        self.device = device;
        self
    }

    /// Transfer (LP-RAG B.3): reuse the built-in predictor trained for the index saved in
    /// `index_dir` (another corpus) on this corpus without training it again. The new index
    /// is chunked, embedded and linked as usual; no synthetic queries are written (nothing
    /// is trained), and the predictor is attached to the new chunk graph with
    /// [`LinkPredictor::attach`]. The new index takes the saved index's predictor
    /// configuration ([`LpRagConfig::predictor`], `model`, `train`), so [`LpRag::open`]
    /// reopens it. The encoder must be the one the saved index was built with (name and
    /// dimension are checked before anything else is done).
    ///
    /// Replaces an earlier [`LpRagBuilder::predictor`] or [`LpRagBuilder::scorer`].
    pub fn transfer_from(mut self, index_dir: impl Into<PathBuf>) -> Self {
        self.model = Some(ModelChoice::Transfer(index_dir.into()));
        self
    }

    /// Supervised mode: real `(question, gold document ids)` pairs — a query log — become
    /// query nodes linked to every chunk of their gold documents, **in addition to** the
    /// synthetic queries. Unknown document ids are an error naming the pair.
    pub fn labelled(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self.labelled_only = false;
        self
    }

    /// Supervised mode with the labelled pairs **instead of** synthetic queries (no query
    /// generator runs).
    pub fn labelled_only(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self.labelled_only = true;
        self
    }

    /// Replace the whole configuration.
    pub fn config(mut self, config: LpRagConfig) -> Self {
        self.config = config;
        self
    }

    /// Keep each finished stage (chunks, chunk embeddings, chunk graph, synthetic
    /// queries, query embeddings) in `dir`, and reuse the stages found there; the built-in
    /// predictor also checkpoints every training epoch in `dir/train` (see
    /// [`GnnLinkPredictor::with_checkpoints`](crate::extend::GnnLinkPredictor::with_checkpoints)) and resumes from it. A build
    /// that was interrupted, or is repeated with a changed later stage (say, another
    /// [`TrainConfig`](crate::TrainConfig)), starts after the last stage whose inputs are unchanged.
    ///
    /// A stage is reused only when its key matches: a hash of the documents (for the
    /// chunks) or of the previous stage's output, the component's
    /// [`name`](crate::Chunker::name) (chunker, encoder and its dimension, query generator) and
    /// the configuration fields the stage reads. Settings held inside a custom
    /// component are not part of its name: clear the directory after changing them.
    /// [`IndexStats::reused_stages`] lists what was loaded. Files are written atomically
    /// and an unreadable one is recomputed with a warning. With an LLM, also wrap it in
    /// [`CachedChat`](lprag_llm::CachedChat) so a stage interrupted half-way keeps the
    /// answers it already paid for.
    pub fn work_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_dir = Some(dir.into());
        self
    }

    /// Keep the link graph's feature rows (every chunk's and every synthetic question's
    /// embedding: 12 GB at a million passages with 1,024-wide rows) in a file of the work
    /// directory, `features.bin`, memory-mapped, instead of on the heap (default: off).
    /// Needs [`LpRagBuilder::work_dir`]. The chunk rows and the question rows are
    /// written to their stage files batch by batch as they are embedded and never held
    /// whole (the chunk graph is built on the mapped chunk rows), and the column-wise copy
    /// of the chunk rows for the candidate scan ([`LpRagConfig::column_scan_from`]) is
    /// written to `columns.bin` and mapped too ([`LpRag::columns_mapped`]), as are the
    /// built-in predictor's cached chunk representations, streamed to
    /// `representations.bin` whenever they are computed ([`LpRag::representations_mapped`];
    /// 1 GB at a million chunks); training and
    /// the index read the rows through the page cache, so the kernel keeps the rows in use
    /// and can drop the rest when memory runs short. The built index answers exactly as
    /// one built without it (same rows, same order). The files are rewritten by each such
    /// build; keep the work directory while the index lives (it maps them) and do not
    /// change them in place. [`LpRag::save`] writes the rows into the index as usual; an
    /// update that adds rows ([`LpRag::add_documents`]) copies them back to the heap.
    pub fn features_on_disk(mut self, on: bool) -> Self {
        self.features_on_disk = on;
        self
    }

    /// Index `documents`: chunk, embed, build the chunk graph, write synthetic queries and
    /// train the link predictor.
    pub async fn build(self, documents: &[Document]) -> Result<LpRag> {
        use tracing::Instrument;
        let span = tracing::info_span!("lprag.build", documents = documents.len());
        if documents.is_empty() {
            return Err(Error::EmptyCorpus("no documents were given".into()));
        }
        self.build_traced(Docs::Slice(documents))
            .instrument(span)
            .await
    }

    /// Index the documents of `source`, read a block at a time: the build never holds
    /// them all (a million passages are gigabytes of strings a caller of
    /// [`LpRagBuilder::build`] keeps for the whole build). The index is the one
    /// [`LpRagBuilder::build`] makes of the same documents in the same order, with one
    /// difference: the chunker is given each block on its own, so a chunker that looks
    /// across documents sees one block at a time (every chunker of lprag chunks each
    /// document on its own). The source is read two to four times: once to count the
    /// documents and check their ids, once more for the work directory's key (with a work
    /// directory), once to chunk (unless the work directory has the chunks), and once for
    /// the documents of the few chunks too long for the encoder (when there are any).
    /// A work directory keys the documents as [`LpRagBuilder::build`] does, so a build
    /// resumes from either. `lprag_load::JsonLinesSource` reads a JSON Lines file this way.
    pub async fn build_from(self, source: &dyn DocumentSource) -> Result<LpRag> {
        use tracing::Instrument;
        let span = tracing::info_span!("lprag.build", documents = source.len_hint());
        self.build_traced(Docs::Source(source))
            .instrument(span)
            .await
    }

    /// The inputs a build can refuse before it pays for anything (beside no documents):
    /// `knn_k` 0, invalid candidate-search settings, a device this build cannot use, features on
    /// disk without a work directory.
    fn check_before_paying(&self) -> Result<()> {
        if self.config.knn_k == 0 {
            return Err(Error::invalid("LpRagConfig.knn_k", "must be at least 1"));
        }
        self.config.anchor.validate()?;
        super::search::check_search(&self.config)?;
        self.device.to_burn()?;
        if self.features_on_disk && self.work_dir.is_none() {
            return Err(Error::invalid(
                "LpRagBuilder::features_on_disk",
                "needs a work directory (LpRagBuilder::work_dir) to hold the features file",
            ));
        }
        Ok(())
    }

    /// [`LpRagBuilder::build`] inside its span; every stage gets a child span.
    async fn build_traced(self, documents: Docs<'_>) -> Result<LpRag> {
        self.check_before_paying()?;
        let Components {
            progress,
            chunker,
            query_generator,
            meter,
            llm_progress,
        } = Components::of(&self);
        let LpRagBuilder {
            inputs,
            model,
            labelled,
            labelled_only,
            config,
            work_dir,
            features_on_disk,
            device,
            ..
        } = self;
        let encoder = inputs.encoder;
        let mut stats = IndexStats {
            documents: match documents {
                Docs::Slice(d) => d.len(),
                Docs::Source(_) => 0,
            },
            ..IndexStats::default()
        };
        let mut timer = StageTimer::start();
        let mut lap = |stats: &mut IndexStats, name: &str| timer.lap(stats, name);

        let work = work_dir.as_deref().map(WorkDir::open).transpose()?;
        let warned = std::sync::Mutex::new(Vec::<String>::new());
        let warn = |m: String| {
            progress.warn(&m);
            warned.lock().unwrap_or_else(|p| p.into_inner()).push(m);
        };
        let mut ctx = StageCtx {
            work: work.as_ref(),
            warn: &warn,
            progress: &*progress,
            reused: Vec::new(),
            features_on_disk,
        };

        // 1–2. Chunks, labelled questions, the encoder and the chunk embeddings.
        let source = Source {
            documents,
            chunker: &*chunker,
            encoder,
            labelled: &labelled,
        };
        let Embedded {
            chunks,
            labelled,
            encoder,
            default_encoder,
            chunk_emb,
            key: emb_key,
        } = embedded_chunks(&mut ctx, source, &mut stats, &mut lap).await?;
        // A transferred predictor: its index's manifest is checked now, before the graph and
        // the rest are paid for; its predictor configuration becomes this index's.
        let mut config = config;
        let transfer = transfer_of(&model, &*encoder, &mut config)?;

        // 3–4. The chunk graph, the synthetic and labelled queries, the link graph.
        let writer = (!labelled_only && transfer.is_none()).then_some(&*query_generator);
        let plan = GraphPlan {
            config: &config,
            key: emb_key,
            encoder: &*encoder,
            writer,
        };
        let (chunks, queries, graph, knn_lists) = graph_and_queries(
            &mut ctx,
            plan,
            (chunks, chunk_emb, labelled),
            &mut stats,
            &mut lap,
        )
        .await?;
        let reused = std::mem::take(&mut ctx.reused);
        drop(ctx);

        // 5. Train the link predictor on a blocking thread (a training-free scorer is
        //    only given the graph).
        let graph = Arc::new(graph);
        // With the features on disk, a column-wise copy goes beside them.
        let columns = work
            .as_ref()
            .filter(|_| features_on_disk)
            .map(|w| w.file(COLUMNS_FILE));
        let search = Arc::new(search_for_at(&graph, &config, columns.as_deref())?);
        let parents = Arc::new(Parents::of(&chunks));
        let choice = RankModel {
            model,
            transfer,
            config: &config,
            work_dir: work_dir.as_deref(),
            // And so do the predictor's cached representations.
            representations: work
                .as_ref()
                .filter(|_| features_on_disk)
                .map(|w| w.file(REPRESENTATIONS_FILE)),
            device,
            parents: parents.clone(),
        };
        let (predictor, source) = choice.make(&graph, &search, &progress, &mut stats).await?;
        lap(&mut stats, "train");
        stats.llm_usage = meter.snapshot();
        stats.reused_stages = reused;
        stats.warnings.extend(llm_progress.take_warnings());
        stats
            .warnings
            .extend(warned.into_inner().unwrap_or_else(|p| p.into_inner()));

        Ok(LpRag {
            chunks,
            queries,
            search,
            graph,
            encoder,
            default_encoder,
            predictor,
            source,
            config,
            stats,
            knn: knn_lists,
            device,
            parents,
            store: None,
            answer_only: false,
            rows: None,
            records: None,
        })
    }
}

/// What stages 1 and 2 start from: the documents, their chunker, the encoder given (if
/// any) and the labelled questions.
struct Source<'a> {
    documents: Docs<'a>,
    chunker: &'a dyn lprag_core::Chunker,
    encoder: Option<Arc<dyn Encoder>>,
    labelled: &'a Labelled,
}

/// What stages 1 and 2 give: the chunks fitted to the encoder, the labelled questions as
/// query nodes on them, the encoder (with the default's choice when none was given), the
/// chunk embeddings and their stage key.
struct Embedded {
    chunks: Vec<lprag_core::Chunk>,
    labelled: Vec<lprag_core::SyntheticQuery>,
    encoder: Arc<dyn Encoder>,
    default_encoder: Option<crate::DefaultEncoder>,
    chunk_emb: lprag_core::Embeddings,
    key: crate::workdir::StageKey,
}

/// Stages 1 (chunks; the labelled questions checked on them before anything is paid for)
/// and 2 (the encoder chosen when none was given, the chunks fitted to it, the labelled
/// questions mapped again if chunks were split, the chunk embeddings), with their laps.
async fn embedded_chunks(
    ctx: &mut StageCtx<'_>,
    source: Source<'_>,
    stats: &mut IndexStats,
    lap: &mut (dyn FnMut(&mut IndexStats, &str) + Send),
) -> Result<Embedded> {
    let Source {
        documents,
        chunker,
        encoder,
        labelled: labelled_pairs,
    } = source;
    let mut documents_key = None;
    if let Docs::Source(source) = documents {
        let survey = stages::survey(source).await?;
        stats.documents = survey.documents;
        if ctx.work.is_some() {
            documents_key = Some(StageKey::of_source(source, survey.json_len).await?);
        }
    }
    let input = ChunkInput {
        documents,
        chunker,
        documents_key,
    };
    let chunks = stages::chunk(ctx, &input).await?;
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus("no document produced a chunk".into()));
    }
    stats.chunks = chunks.len();
    let mut labelled = labelled_queries(&chunks, labelled_pairs)?;
    lap(stats, "chunk");

    let progress = ctx.progress;
    let mut fit_warnings = Vec::new();
    let (chunks, encoder, default_encoder) =
        encoder_and_fit(chunks, documents, encoder, chunker.name(), &mut |w| {
            progress.warn(&w);
            fit_warnings.push(w);
        })
        .await?;
    stats.warnings.extend(fit_warnings);
    if chunks.len() != stats.chunks {
        stats.chunks = chunks.len();
        labelled = labelled_queries(&chunks, labelled_pairs)?;
    }
    let input = EmbedInput {
        chunks: &chunks,
        encoder: &*encoder,
    };
    let (chunk_emb, key) = stages::embed_chunks(ctx, &input).await?;
    lap(stats, "embed");
    Ok(Embedded {
        chunks,
        labelled,
        encoder,
        default_encoder,
        chunk_emb,
        key,
    })
}

/// What stages 3 and 4 take beside the chunks: the configuration, the chunk embeddings'
/// stage key, the encoder and the question writer (`None`: labelled questions only, or a
/// transferred predictor).
struct GraphPlan<'a> {
    config: &'a LpRagConfig,
    key: crate::workdir::StageKey,
    encoder: &'a dyn Encoder,
    writer: Option<&'a dyn QueryGenerator>,
}

/// Stages 3 (the mutual k-NN chunk graph with its bridges and A.2 batches) and 4 (the
/// synthetic queries linked to their batch, then the labelled questions, embedded into the
/// link graph), with their laps: the chunks, the queries, the link graph and the k-NN
/// lists behind the chunk edges.
async fn graph_and_queries(
    ctx: &mut StageCtx<'_>,
    plan: GraphPlan<'_>,
    (chunks, chunk_emb, labelled): (
        Vec<lprag_core::Chunk>,
        lprag_core::Embeddings,
        Vec<lprag_core::SyntheticQuery>,
    ),
    stats: &mut IndexStats,
    lap: &mut (dyn FnMut(&mut IndexStats, &str) + Send),
) -> Result<(
    Vec<lprag_core::Chunk>,
    Vec<lprag_core::SyntheticQuery>,
    lprag_core::LinkGraph,
    Option<Arc<super::KnnLists>>,
)> {
    let GraphPlan {
        config,
        key,
        encoder,
        writer,
    } = plan;
    let input = stages::graph_input(config, key, chunks.len());
    let (graph_stage, chunks, chunk_emb) =
        stages::chunk_graph(ctx, &input, config.seed, chunks, chunk_emb).await?;
    stats.chunk_edges = graph_stage.edges.len();
    stats.bridge_edges = graph_stage.bridges;
    stats.isolated_chunks = graph_stage.isolated;
    lap(stats, "graph");

    let input = writer.map(|generator| QueryInput {
        graph: graph_stage.key,
        chunks: &chunks,
        batches: &graph_stage.batches,
        seed: config.seed,
        generator,
    });
    stats.labelled_queries = labelled.len();
    let (queries, graph) = stages::queries_and_graph(
        ctx,
        input,
        labelled,
        (key, encoder),
        chunk_emb,
        &graph_stage.edges,
    )
    .await?;
    stats.queries = queries.len();
    stats.query_edges = graph.edges.len() - graph_stage.edges.len();
    lap(stats, "queries");
    Ok((chunks, queries, graph, graph_stage.knn))
}

/// The manifest of a transferred predictor's index (`model` is
/// [`ModelChoice::Transfer`]), checked against `encoder`; see [`transfer_manifest`].
fn transfer_of(
    model: &Option<ModelChoice>,
    encoder: &dyn Encoder,
    config: &mut LpRagConfig,
) -> Result<Option<(PathBuf, Manifest)>> {
    match model {
        Some(ModelChoice::Transfer(dir)) => Ok(Some(transfer_manifest(dir, encoder, config)?)),
        _ => Ok(None),
    }
}

/// The manifest of the index a predictor is transferred from, checked against this
/// build's encoder; its predictor configuration becomes `config`'s.
fn transfer_manifest(
    dir: &Path,
    encoder: &dyn Encoder,
    config: &mut LpRagConfig,
) -> Result<(PathBuf, Manifest)> {
    let manifest = read_manifest(dir)?;
    if manifest.predictor_source != PredictorSource::Builtin {
        return Err(Error::invalid(
            "LpRagBuilder::transfer_from",
            format!(
                "the index in {} was built with the custom predictor or scorer '{}'; restore \
                 it yourself and pass it to LpRagBuilder::predictor",
                dir.display(),
                manifest.predictor
            ),
        ));
    }
    if manifest.encoder != encoder.name() || manifest.dimension != encoder.dimension() {
        return Err(Error::invalid(
            "LpRagBuilder::transfer_from (encoder)",
            format!(
                "the index in {} was built with encoder '{}' ({} dims), this build uses '{}' \
                 ({} dims)",
                dir.display(),
                manifest.encoder,
                manifest.dimension,
                encoder.name(),
                encoder.dimension()
            ),
        ));
    }
    config.predictor = manifest.config.predictor;
    config.model = manifest.config.model.clone();
    config.train = manifest.config.train.clone();
    Ok((dir.to_path_buf(), manifest))
}

/// The components a build runs with, and what the LLM ones report to.
struct Components {
    progress: Arc<dyn lprag_core::Progress>,
    chunker: Arc<dyn lprag_core::Chunker>,
    query_generator: Arc<dyn QueryGenerator>,
    /// Counts the LLM's tokens.
    meter: Arc<TokenMeter>,
    /// The LLM components warn (fallbacks) through this; their warnings go to `progress`
    /// and into the stats.
    llm_progress: Arc<RecordingProgress>,
}

impl Components {
    /// The builder's chunker and question writer; with an LLM, its chunker and writer stand
    /// in for those not set.
    fn of(builder: &LpRagBuilder) -> Self {
        let progress = builder.inputs.progress();
        let mut chunker = builder.inputs.chunker();
        let mut query_generator = builder.query_generator.clone().unwrap_or_else(|| {
            Arc::new(HeuristicQueryGenerator::default()) as Arc<dyn QueryGenerator>
        });
        let meter = Arc::new(TokenMeter::new());
        let llm_progress = Arc::new(RecordingProgress::new(progress.clone()));
        if let Some(model) = &builder.llm {
            let made = LlmParts {
                model,
                meter: &meter,
                progress: &llm_progress,
                on_unparseable: builder.llm_on_unparseable,
            };
            if builder.inputs.chunker.is_none() {
                chunker = made.chunker();
            }
            if builder.query_generator.is_none() {
                query_generator = made.query_generator();
            }
        }
        Self {
            progress,
            chunker,
            query_generator,
            meter,
            llm_progress,
        }
    }
}

/// How the LLM-backed components of a build are made.
struct LlmParts<'a> {
    model: &'a Arc<dyn ChatModel>,
    meter: &'a Arc<TokenMeter>,
    progress: &'a Arc<RecordingProgress>,
    on_unparseable: OnUnparseable,
}

impl LlmParts<'_> {
    /// The LLM chunker.
    fn chunker(&self) -> Arc<dyn lprag_core::Chunker> {
        Arc::new(
            LlmChunker::new(self.model.clone())
                .with_meter(self.meter.clone())
                .with_progress(self.progress.clone())
                .on_unparseable(self.on_unparseable),
        )
    }

    /// The LLM question writer.
    fn query_generator(&self) -> Arc<dyn QueryGenerator> {
        Arc::new(
            LlmQueryGenerator::new(self.model.clone())
                .with_meter(self.meter.clone())
                .with_progress(self.progress.clone())
                .on_unparseable(self.on_unparseable),
        )
    }
}

/// The stages' clock and tracing spans: one span per stage, open from its start to its
/// end (an OpenTelemetry layer reports its duration); the stages run in this order.
struct StageTimer {
    clock: Instant,
    span: tracing::Span,
}

impl StageTimer {
    /// The clock of the first stage, `chunk`.
    fn start() -> Self {
        Self {
            clock: Instant::now(),
            span: tracing::info_span!("stage", name = "chunk"),
        }
    }

    /// Record stage `name`'s seconds in `stats` and start the next stage's clock and span.
    fn lap(&mut self, stats: &mut IndexStats, name: &str) {
        let seconds = self.clock.elapsed().as_secs_f64();
        stats.seconds.push((name.to_string(), seconds));
        tracing::info!(parent: &self.span, seconds, "stage finished");
        let next = match name {
            "chunk" => "embed",
            "embed" => "graph",
            "graph" => "queries",
            "queries" => "train",
            _ => "done",
        };
        self.span = tracing::info_span!("stage", name = next);
        self.clock = Instant::now();
    }
}
