//! Retrievers and encoders by name, as the command line chooses them.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use lprag_core::{Chunk, Document, Encoder, Retriever};
use lprag_text::{HashingEncoder, HashingEncoderConfig};

use crate::baselines::{
    passage_chunks, Bm25Config, Bm25Retriever, DenseRetriever, HybridRetriever,
};
use crate::{Error, Result};

/// Names [`build_retriever`] knows, in the order `--help` lists them.
pub const RETRIEVERS: &[&str] = &[
    "dense",
    "bm25",
    "hybrid",
    "lprag",
    "lprag-incremental",
    "qcg",
    "qcg-incremental",
    "lesegr",
    "lesegr-lite",
    "lesegr-incremental",
    "lesegr-lite-incremental",
    "g2",
    "gfm",
    "gfm-incremental",
];

/// Settings for retrievers that have more than an encoder to choose.
#[derive(Debug, Clone, Default)]
pub struct RetrieverOptions {
    /// Configuration of `lprag` (default: [`lprag::LpRagConfig::default`]).
    pub lprag: lprag::LpRagConfig,
    /// Chunker of `lprag`: `true` splits passages into atomic sentences
    /// ([`lprag::SentenceChunker`]), `false` (default, as `LpRag`'s own default) keeps each
    /// passage whole ([`lprag::PassageChunker`]).
    pub lprag_sentences: bool,
    /// Keep each passage of `lprag` whole even where it exceeds the encoder's input
    /// ([`lprag::PassageChunker`]; the encoder cuts it, with a warning) instead of the
    /// library's default, [`lprag::BoundedPassageChunker`], which splits it.
    pub lprag_whole_passages: bool,
    /// Work directory of `lprag` ([`lprag::LpRagBuilder::work_dir`]): finished stages and
    /// training checkpoints are kept there and reused. Default none.
    pub lprag_work_dir: Option<std::path::PathBuf>,
    /// Keep `lprag`'s feature rows in its work directory, memory-mapped
    /// ([`lprag::LpRagBuilder::features_on_disk`]; needs `lprag_work_dir`). Default off.
    pub lprag_features_on_disk: bool,
    /// Training checkpoints of `lesegr` and `gfm` ([`lprag::LesegrRagBuilder::checkpoints`],
    /// [`lprag::GfmRagBuilder::checkpoints`]) in `DIR/<retriever>`: an interrupted
    /// training resumes after its last finished epoch. Default none.
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// Save the `lprag` index to this directory after building it. Default none.
    pub lprag_save: Option<std::path::PathBuf>,
    /// `lprag-eval scale`: instead of building `lprag`, open the index saved in this
    /// directory to answer only ([`lprag::LpRag::open_to_answer`]). Default none.
    pub lprag_answer_from: Option<std::path::PathBuf>,
    /// With `lprag_answer_from` and a store: read each query's chunk rows from the store
    /// ([`lprag::AnswerOptions::rows_from_store`]). Default off.
    pub lprag_rows_from_store: bool,
    /// With `lprag_answer_from` and a store: read the records of the returned chunks from
    /// the store ([`lprag::AnswerOptions::records_from_store`]). Default off.
    pub lprag_records_from_store: bool,
    /// With `lprag_answer_from`: the chunk rows memory-mapped from the saved graph file
    /// ([`lprag::AnswerOptions::map_rows`]). Default off.
    pub lprag_map_rows: bool,
    /// Build `lprag` with the predictor of the index saved in this directory, attached
    /// without training ([`lprag::LpRagBuilder::transfer_from`]). Default none.
    pub lprag_transfer_from: Option<std::path::PathBuf>,
    /// Where `lprag` trains and scores ([`lprag::LpRagBuilder::device`]; default the CPU).
    pub device: lprag::ComputeDevice,
    /// Print `lprag`'s indexing and training progress to standard error.
    pub verbose: bool,
    /// `lprag-eval scale`: build `lprag` and `qcg` without the corpus's last N documents,
    /// then add them ([`lprag::LpRag::add_documents_with`], [`lprag::QcgRag::add_documents`])
    /// and time it (stage `add`). Default 0.
    pub lprag_add_last: usize,
    /// Configuration of `qcg` (default: the paper's MultiHop-RAG setting).
    pub qcg: lprag::QcgConfig,
    /// Configuration of `lesegr` (default: [`lprag::LesegrConfig::default`]; `lesegr-lite`
    /// uses the same with the lite variant).
    pub lesegr: lprag::LesegrConfig,
    /// Configuration of `g2` (default: [`lprag::G2Config::default`]).
    pub g2: lprag::G2Config,
    /// Configuration of `gfm` (default: `GfmRag`'s own, [`lprag::GfmConfig::cpu`] on the
    /// CPU, the paper's d = 512, L = 6 network on a GPU device).
    pub gfm: Option<lprag::GfmConfig>,
    /// An LLM that writes the synthetic queries of `lprag` (LP-RAG's S-PROMPT batches)
    /// and `qcg` (QCG-RAG's Doc2Query pairs) instead of the offline heuristic generator.
    /// Default none.
    pub query_llm: Option<QueryLlm>,
    /// Calls of [`RetrieverOptions::query_llm`] in flight at once (0 is taken as 1).
    pub query_llm_concurrency: usize,
    /// Labelled `(question, gold document ids)` pairs for the retrievers with a supervised
    /// mode: `lprag` adds them to its synthetic queries, `lesegr` and `gfm` train on them
    /// instead of synthetic questions. Default none.
    pub labelled: lprag::Labelled,
}

/// The chat model of [`RetrieverOptions::query_llm`] (its `Debug` shows the model name).
#[derive(Clone)]
pub struct QueryLlm(pub Arc<dyn lprag::llm::ChatModel>);

impl fmt::Debug for QueryLlm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueryLlm({})", self.0.name())
    }
}

/// The query generator `make` builds on [`RetrieverOptions::query_llm`] (with its
/// concurrency, progress and a fresh token meter), or `None` without an LLM.
fn query_writer(
    options: &RetrieverOptions,
    make: fn(Arc<dyn lprag::llm::ChatModel>) -> lprag::llm::LlmQueryGenerator,
) -> Option<(Arc<dyn lprag::QueryGenerator>, Arc<lprag::llm::TokenMeter>)> {
    let QueryLlm(model) = options.query_llm.as_ref()?;
    let meter = Arc::new(lprag::llm::TokenMeter::new());
    let generator = make(model.clone())
        .concurrency(options.query_llm_concurrency)
        .with_meter(meter.clone())
        .with_progress(progress(options.verbose));
    Some((Arc::new(generator), meter))
}

/// [`build_retriever_with`] with default [`RetrieverOptions`].
pub async fn build_retriever(
    name: &str,
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
) -> Result<Box<dyn Retriever>> {
    build_retriever_with(name, docs, encoder, &RetrieverOptions::default()).await
}

/// A retriever reported under another name (one index type, two table rows).
struct Renamed {
    name: &'static str,
    inner: Box<dyn Retriever>,
}

#[async_trait::async_trait]
impl Retriever for Renamed {
    fn name(&self) -> &str {
        self.name
    }

    async fn retrieve(
        &self,
        query: &str,
        selection: lprag::Selection,
    ) -> lprag::Result<Vec<lprag::ScoredChunk>> {
        self.inner.retrieve(query, selection).await
    }

    fn chunks(&self) -> &[lprag::Chunk] {
        self.inner.chunks()
    }

    fn num_chunks(&self) -> usize {
        self.inner.num_chunks()
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: lprag::Selection,
        filter: &lprag::Filter,
    ) -> lprag::Result<Vec<lprag::ScoredChunk>> {
        self.inner.retrieve_filtered(query, selection, filter).await
    }

    async fn retrieve_batch(
        &self,
        queries: &[String],
        selection: lprag::Selection,
    ) -> lprag::Result<Vec<Vec<lprag::ScoredChunk>>> {
        self.inner.retrieve_batch(queries, selection).await
    }
}

/// The chunker `lprag` uses under `options` (see [`RetrieverOptions::lprag_sentences`]).
pub fn lprag_chunker(options: &RetrieverOptions) -> Arc<dyn lprag::Chunker> {
    if options.lprag_sentences {
        Arc::new(lprag::SentenceChunker::default())
    } else if options.lprag_whole_passages {
        Arc::new(lprag::PassageChunker)
    } else {
        Arc::new(lprag::BoundedPassageChunker)
    }
}

/// `lprag-incremental`: LP-RAG built on every other document (even positions), the rest
/// added afterwards with [`lprag::LpRag::add_documents_with`] (scored by the model trained
/// on the first half, not retrained), for comparison with `lprag` built on everything.
pub async fn build_lprag_incremental(
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<lprag::LpRag> {
    let (first, later) = halves(docs);
    let mut rag = build_lprag(&first, encoder, options).await?;
    if !later.is_empty() {
        let report = rag
            .add_documents_with(&later, &*lprag_chunker(options))
            .await?;
        eprintln!("lprag-incremental: {:?}", report);
    }
    Ok(rag)
}

/// The documents at even positions, then those at odd positions: the halves the
/// `*-incremental` retrievers build on and add.
fn halves(docs: &[Document]) -> (Vec<Document>, Vec<Document>) {
    let (first, later): (Vec<_>, Vec<_>) = docs
        .iter()
        .cloned()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    (
        first.into_iter().map(|(_, d)| d).collect(),
        later.into_iter().map(|(_, d)| d).collect(),
    )
}

/// The peers that take incremental updates, as `lprag-eval` adds documents to them: with
/// the build's own chunker and question writer.
#[async_trait::async_trait]
trait Updatable: Retriever + 'static {
    async fn add(
        &mut self,
        docs: &[Document],
        options: &RetrieverOptions,
    ) -> Result<lprag::UpdateReport>;
}

#[async_trait::async_trait]
impl Updatable for lprag::QcgRag {
    async fn add(
        &mut self,
        docs: &[Document],
        options: &RetrieverOptions,
    ) -> Result<lprag::UpdateReport> {
        Ok(
            match query_writer(options, lprag::llm::LlmQueryGenerator::doc2query) {
                Some((generator, _)) => {
                    self.add_documents_with(docs, &lprag::BoundedPassageChunker, &*generator)
                        .await?
                }
                None => self.add_documents(docs).await?,
            },
        )
    }
}

#[async_trait::async_trait]
impl Updatable for lprag::LesegrRag {
    async fn add(
        &mut self,
        docs: &[Document],
        _: &RetrieverOptions,
    ) -> Result<lprag::UpdateReport> {
        Ok(self.add_documents(docs).await?)
    }
}

#[async_trait::async_trait]
impl Updatable for lprag::GfmRag {
    async fn add(
        &mut self,
        docs: &[Document],
        _: &RetrieverOptions,
    ) -> Result<lprag::UpdateReport> {
        Ok(self.add_documents(docs).await?)
    }
}

/// What [`build_then_add`] made: the retriever, the update's report (none when nothing was
/// added) and the seconds the build took.
pub type BuiltThenAdded = (Box<dyn Retriever>, Option<lprag::UpdateReport>, f64);

/// Build the updatable peer `name` (`qcg`, `lesegr`, `lesegr-lite` or `gfm`, as
/// [`build_retriever_with`] does) on `base`, then add `later` through its `add_documents`
/// with the build's chunker and question writer.
///
/// # Errors
/// [`Error::Invalid`] for a retriever without updates here; the build's and the update's
/// errors.
pub async fn build_then_add(
    name: &str,
    base: &[Document],
    later: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<BuiltThenAdded> {
    async fn add<R: Updatable>(
        mut rag: R,
        later: &[Document],
        options: &RetrieverOptions,
        started: std::time::Instant,
    ) -> Result<BuiltThenAdded> {
        let build = started.elapsed().as_secs_f64();
        let report = if later.is_empty() {
            None
        } else {
            Some(rag.add(later, options).await?)
        };
        Ok((Box::new(rag), report, build))
    }
    let t = std::time::Instant::now();
    match name {
        "qcg" => add(build_qcg(base, encoder, options).await?, later, options, t).await,
        "gfm" => add(build_gfm(base, encoder, options).await?, later, options, t).await,
        "lesegr" | "lesegr-lite" => {
            let rag = build_lesegr(name, base, encoder, options).await?;
            add(rag, later, options, t).await
        }
        other => Err(Error::invalid(
            "retriever",
            format!("{other} takes no incremental updates here"),
        )),
    }
}

/// `qcg-incremental`, `lesegr-incremental`, `lesegr-lite-incremental`, `gfm-incremental`:
/// the peer built (and trained) on every other document, the rest added
/// ([`build_then_add`]), for comparison with the build on everything.
async fn build_incremental(
    name: &'static str,
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<Box<dyn Retriever>> {
    let (first, later) = halves(docs);
    let peer = name.trim_end_matches("-incremental");
    let (inner, report, _) = build_then_add(peer, &first, &later, encoder, options).await?;
    if let Some(report) = report {
        eprintln!("{name}: {report:?}");
    }
    Ok(Box::new(Renamed { name, inner }))
}

/// Build `lesegr` or `lesegr-lite` (`name`) as [`build_retriever_with`] does, keeping its
/// type.
pub async fn build_lesegr(
    name: &str,
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<lprag::LesegrRag> {
    let mut config = options.lesegr.clone();
    if name.starts_with("lesegr-lite") {
        config.variant = lprag::LesegrVariant::Lite;
    }
    let mut builder = lprag::LesegrRag::builder();
    if let Some(dir) = &options.checkpoint_dir {
        builder = builder.checkpoints(dir.join(name));
    }
    let rag = builder
        .encoder(encoder)
        .labelled(options.labelled.clone())
        .progress(progress(options.verbose))
        .config(config)
        .build(docs)
        .await?;
    if options.verbose {
        eprintln!("{name} index: {:?}", rag.stats());
    }
    Ok(rag)
}

/// Build `gfm` as [`build_retriever_with`] does, keeping its type.
pub async fn build_gfm(
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<lprag::GfmRag> {
    let mut builder = lprag::GfmRag::builder();
    if let Some(config) = &options.gfm {
        builder = builder.config(config.clone());
    }
    if let Some(dir) = &options.checkpoint_dir {
        builder = builder.checkpoints(dir.join("gfm"));
    }
    let rag = builder
        .encoder(encoder)
        .labelled(options.labelled.clone())
        .progress(progress(options.verbose))
        .build(docs)
        .await?;
    if options.verbose {
        eprintln!("gfm index: {:?}", rag.stats());
    }
    Ok(rag)
}

/// Build `qcg` as [`build_retriever_with`] does, keeping its type.
pub async fn build_qcg(
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<lprag::QcgRag> {
    let mut builder = lprag::QcgRag::builder();
    let writer = query_writer(options, lprag::llm::LlmQueryGenerator::doc2query);
    if let Some((generator, _)) = &writer {
        builder = builder.query_generator(generator.clone());
    }
    let rag = builder
        .encoder(encoder)
        .config(options.qcg.clone())
        .build(docs)
        .await?;
    if options.verbose {
        eprintln!("qcg index: {:?}", rag.stats());
    }
    if let Some((_, meter)) = &writer {
        eprintln!("qcg query writer: {:?}", meter.snapshot());
    }
    Ok(rag)
}

/// Build `lprag` as [`build_retriever_with`] does, keeping its type (for its
/// [`lprag::LpRag::stats`]).
pub async fn build_lprag(
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<lprag::LpRag> {
    // A directory the save would refuse is refused before the build is paid for.
    if let Some(dir) = &options.lprag_save {
        lprag::LpRag::check_save_dir(dir)?;
    }
    let chunker = lprag_chunker(options);
    let mut builder = lprag::LpRag::builder();
    let writer = query_writer(options, lprag::llm::LlmQueryGenerator::new);
    if let Some((generator, _)) = &writer {
        builder = builder.query_generator(generator.clone());
    }
    if let Some(dir) = &options.lprag_work_dir {
        builder = builder.work_dir(dir);
    }
    builder = builder.features_on_disk(options.lprag_features_on_disk);
    if let Some(dir) = &options.lprag_transfer_from {
        builder = builder.transfer_from(dir);
    }
    let rag = builder
        .encoder(encoder)
        .chunker(chunker)
        .labelled(options.labelled.clone())
        .progress(progress(options.verbose))
        .config(options.lprag.clone())
        .device(options.device)
        .build(docs)
        .await?;
    if options.verbose {
        eprintln!("lprag index: {:?}", rag.stats());
    }
    if let Some(a) = &rag.stats().anchor {
        if a.skipped.is_empty() {
            let measured: Vec<String> = a
                .measured
                .iter()
                .zip(&a.versus_dense)
                .map(|((w, r2, r5), (b, l))| format!("{w:.1}: {r2:.2}/{r5:.2} (+{b}/-{l})"))
                .collect();
            eprintln!(
                "lprag anchor: weight {:.1} kept; on {} held-out questions, weight: R@2/R@5 \
                 (questions better/worse than dense) = {}",
                a.weight,
                a.questions,
                measured.join(", ")
            );
        } else {
            eprintln!("lprag anchor: weight {:.1} ({})", a.weight, a.skipped);
        }
    }
    if let Some(dir) = &options.lprag_save {
        rag.save(dir)?;
        eprintln!("lprag index saved to {}", dir.display());
    }
    if let Some((_, meter)) = &writer {
        eprintln!("lprag query writer: {:?}", meter.snapshot());
    }
    Ok(rag)
}

/// Build the retriever called `name` over `docs` (each document is one passage; the
/// harness ranks passages by `chunk.provenance.document_id`, so retrievers may index
/// sub-passage chunks).
///
/// - `dense`: [`DenseRetriever`], exact flat cosine search with `encoder`;
/// - `bm25`: [`Bm25Retriever`], Okapi BM25 (k1 = 1.5, b = 0.75, rank_bm25 IDF);
/// - `hybrid`: [`HybridRetriever::dense_bm25`], reciprocal-rank fusion of the two;
/// - `lprag`: [`lprag::LpRag`] with `encoder`, the options' configuration and chunker, and
///   the offline heuristic query generator (the S-PROMPT on
///   [`RetrieverOptions::query_llm`] when set);
/// - `qcg`: [`lprag::QcgRag`] (QCG-RAG, training-free query-centric graph) with `encoder`,
///   passages as chunks and the offline heuristic (query) generator (Doc2Query on
///   [`RetrieverOptions::query_llm`] when set);
/// - `lesegr` / `lesegr-lite`: [`lprag::LesegrRag`] (CG-RAG's LeSeGR, BM25 × dense message
///   passing on a chunk graph with k-NN document links), trained on synthetic queries or
///   untrained, with `encoder` and passages as chunks;
/// - `g2`: [`lprag::G2Rag`] (G²RAG: HDBSCAN communities, dual-level chunk + community
///   retrieval) with `encoder`, passages as chunks and the offline θ merge rule.
/// - `gfm`: [`lprag::GfmRag`] (GFM-RAG: query-dependent GNN over a KG index) with the
///   offline co-occurrence triple extractor, KG-completion pre-training and `encoder`.
///
/// `encoder` is ignored by retrievers that need none. Index build time, as the harness
/// reports it, is the wall time of this call.
///
/// # Adding a retriever
///
/// Add one match arm (and its name to [`RETRIEVERS`] for help texts), for example
/// `"mine" => Box::new(MyRetriever::build(docs, encoder).await?)`: errors of lprag
/// components convert with `?`.
pub async fn build_retriever_with(
    name: &str,
    docs: &[Document],
    encoder: Arc<dyn Encoder>,
    options: &RetrieverOptions,
) -> Result<Box<dyn Retriever>> {
    Ok(match name {
        "dense" => Box::new(DenseRetriever::build(docs, encoder).await?),
        "bm25" => Box::new(Bm25Retriever::build(docs, Bm25Config::default())?),
        "hybrid" => Box::new(HybridRetriever::dense_bm25(docs, encoder).await?),
        "lprag" => Box::new(build_lprag(docs, encoder, options).await?),
        "lprag-incremental" => Box::new(Renamed {
            name: "lprag-incremental",
            inner: Box::new(build_lprag_incremental(docs, encoder, options).await?),
        }),
        "qcg" => Box::new(build_qcg(docs, encoder, options).await?),
        "qcg-incremental" => build_incremental("qcg-incremental", docs, encoder, options).await?,
        "lesegr" | "lesegr-lite" => Box::new(build_lesegr(name, docs, encoder, options).await?),
        "lesegr-incremental" => {
            build_incremental("lesegr-incremental", docs, encoder, options).await?
        }
        "lesegr-lite-incremental" => {
            build_incremental("lesegr-lite-incremental", docs, encoder, options).await?
        }
        "g2" => {
            let rag = lprag::G2Rag::builder()
                .encoder(encoder)
                .progress(progress(options.verbose))
                .config(options.g2.clone())
                .build(docs)
                .await?;
            if options.verbose {
                eprintln!("g2 index: {:?}", rag.stats());
            }
            Box::new(rag)
        }
        "gfm" => Box::new(build_gfm(docs, encoder, options).await?),
        "gfm-incremental" => build_incremental("gfm-incremental", docs, encoder, options).await?,
        other => {
            return Err(Error::UnknownRetriever {
                name: other.to_string(),
                known: RETRIEVERS.join(", "),
            })
        }
    })
}

fn progress(verbose: bool) -> Arc<dyn lprag::Progress> {
    if verbose {
        Arc::new(lprag::StderrProgress::default())
    } else {
        Arc::new(lprag::NoProgress)
    }
}

/// Split a comma-separated list of retriever names (`"dense,bm25"`), trimming blanks and
/// dropping empty entries and repeats.
pub fn parse_retriever_list(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The encoders the command line offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncoderKind {
    /// [`HashingEncoder`] with inverse document frequencies fitted on the corpus passages
    /// ([`HashingEncoder::fitted`]): the offline default, and the way that encoder is meant
    /// to be used.
    Hashing,
    /// [`HashingEncoder::default`]: no IDF, every feature weighs the same.
    HashingUnfitted,
    /// all-MiniLM-L6-v2 ([`lprag::SentenceEncoder`]) from `--model-dir`, `LPRAG_MODEL_DIR`
    /// or the Hugging Face cache.
    MiniLm,
    /// [`EncoderKind::MiniLm`] with its dense layers in fp16
    /// ([`lprag::SentenceEncoder::with_fp16_kernels`]) on a CPU with AVX-512-FP16 (f32
    /// elsewhere); its embedding cache file is its own.
    MiniLmFp16,
}

impl EncoderKind {
    /// The name used on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            EncoderKind::Hashing => "hashing",
            EncoderKind::HashingUnfitted => "hashing-unfitted",
            EncoderKind::MiniLm => "minilm",
            EncoderKind::MiniLmFp16 => "minilm-fp16",
        }
    }

    /// Whether this is all-MiniLM-L6-v2 (in either precision).
    pub fn is_minilm(&self) -> bool {
        matches!(self, EncoderKind::MiniLm | EncoderKind::MiniLmFp16)
    }
}

impl fmt::Display for EncoderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EncoderKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hashing" => Ok(EncoderKind::Hashing),
            "hashing-unfitted" => Ok(EncoderKind::HashingUnfitted),
            "minilm" => Ok(EncoderKind::MiniLm),
            "minilm-fp16" => Ok(EncoderKind::MiniLmFp16),
            _ => Err(Error::invalid(
                "encoder",
                format!("`{s}` (known: hashing, hashing-unfitted, minilm, minilm-fp16)"),
            )),
        }
    }
}

/// Build the encoder `kind` for the corpus `docs`.
///
/// [`EncoderKind::Hashing`] fits its IDF table on the passages' embedding texts
/// (`title + "\n" + text`), which uses no question or label. `model_dir` is for
/// encoders with weights (MiniLM) and is ignored by the hashing encoders.
pub fn build_encoder(
    kind: EncoderKind,
    docs: &[Document],
    model_dir: Option<&Path>,
) -> Result<Arc<dyn Encoder>> {
    build_encoder_sized(kind, docs, model_dir, None)
}

/// Refuse a hashing width (`--hashing-dim`) for an encoder that has its own (MiniLM).
pub fn check_hashing_dim(kind: EncoderKind, hashing_dim: Option<usize>) -> Result<()> {
    if kind.is_minilm() && hashing_dim.is_some() {
        return Err(Error::invalid(
            "--hashing-dim",
            "applies to the hashing encoders only (MiniLM's width is the model's)",
        ));
    }
    Ok(())
}

/// [`build_encoder`] with the hashing encoders' width set to `hashing_dim` (`None`: the
/// default, [`HashingEncoderConfig::default`]'s 1,024). A narrower width makes every dense
/// scan and the exact k-NN graph proportionally cheaper and collides more features per
/// bucket; measure the recall it costs (`lprag-eval … --hashing-dim 256`). Asking for a
/// width with [`EncoderKind::MiniLm`] (whose width is the model's) is an error.
pub fn build_encoder_sized(
    kind: EncoderKind,
    docs: &[Document],
    model_dir: Option<&Path>,
    hashing_dim: Option<usize>,
) -> Result<Arc<dyn Encoder>> {
    build_encoder_on(
        kind,
        docs,
        model_dir,
        hashing_dim,
        lprag::ComputeDevice::Cpu,
    )
}

/// [`build_encoder_sized`] with MiniLM's forward passes on `device` (`lprag-eval --device
/// wgpu:0 --encoder minilm`; a build with the `wgpu` or `cuda` feature). The hashing
/// encoders have no network and run on the CPU whatever the device. A device whose feature
/// is not built is an error before any model file is read.
pub fn build_encoder_on(
    kind: EncoderKind,
    docs: &[Document],
    model_dir: Option<&Path>,
    hashing_dim: Option<usize>,
    device: lprag::ComputeDevice,
) -> Result<Arc<dyn Encoder>> {
    check_hashing_dim(kind, hashing_dim)?;
    let hashing = || {
        let mut config = HashingEncoderConfig::default();
        if let Some(dim) = hashing_dim {
            config.dim = dim;
        }
        config
    };
    match kind {
        EncoderKind::Hashing => {
            let texts: Vec<String> = passage_chunks(docs)?
                .iter()
                .map(Chunk::embedding_text)
                .collect();
            Ok(Arc::new(HashingEncoder::fitted(hashing(), &texts)?))
        }
        EncoderKind::HashingUnfitted => Ok(Arc::new(HashingEncoder::new(hashing())?)),
        EncoderKind::MiniLm | EncoderKind::MiniLmFp16 => {
            let device = device.to_burn()?;
            let model = model_dir.map(|d| d.display().to_string());
            Ok(Arc::new(
                lprag::SentenceEncoder::load_on(model.as_deref(), &device)?
                    .with_fp16_kernels(kind == EncoderKind::MiniLmFp16),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::KeywordEncoder;

    #[tokio::test]
    async fn hashing_width_is_chosen_and_refused_for_minilm() {
        let docs = vec![Document::new("0", "Apple", "apple pie")];
        for kind in [EncoderKind::Hashing, EncoderKind::HashingUnfitted] {
            let e = build_encoder_sized(kind, &docs, None, Some(256)).unwrap();
            assert_eq!(e.dimension(), 256, "{kind}");
            let v = e.embed(&["apple pie".to_string()]).await.unwrap();
            assert_eq!(v.dim(), 256, "{kind}");
            assert_eq!(build_encoder(kind, &docs, None).unwrap().dimension(), 1024);
        }
        let err = build_encoder_sized(EncoderKind::HashingUnfitted, &docs, None, Some(0))
            .err()
            .expect("a zero width is refused");
        assert!(err.to_string().contains("dim"), "{err}");
        for kind in [EncoderKind::MiniLm, EncoderKind::MiniLmFp16] {
            let err = build_encoder_sized(kind, &docs, None, Some(256))
                .err()
                .expect("MiniLM has its own width");
            assert!(err.to_string().contains("--hashing-dim"), "{kind}: {err}");
            assert_eq!(kind.as_str().parse::<EncoderKind>().unwrap(), kind);
        }
    }

    #[tokio::test]
    async fn builds_known_names_and_rejects_others() {
        let docs = vec![
            // Titles give GFM-RAG's offline extractor an entity per passage.
            Document::new("0", "Apple", "apple"),
            Document::new("1", "Banana", "banana"),
        ];
        for name in RETRIEVERS {
            let r = build_retriever(name, &docs, Arc::new(KeywordEncoder))
                .await
                .unwrap();
            assert_eq!(r.name(), *name);
            assert_eq!(r.chunks().len(), 2);
        }
        let e = build_retriever("nope", &docs, Arc::new(KeywordEncoder))
            .await
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "unknown retriever `nope` (known: dense, bm25, hybrid, lprag, lprag-incremental, qcg, qcg-incremental, lesegr, lesegr-lite, lesegr-incremental, lesegr-lite-incremental, g2, gfm, gfm-incremental)"
        );
    }

    #[test]
    fn parses_lists_and_encoders() {
        assert_eq!(
            parse_retriever_list(" dense,bm25,,dense "),
            vec!["dense", "bm25"]
        );
        assert_eq!(
            "hashing".parse::<EncoderKind>().unwrap(),
            EncoderKind::Hashing
        );
        assert!("word2vec".parse::<EncoderKind>().is_err());
        let missing = Path::new("/nonexistent/minilm-dir");
        let e = build_encoder(EncoderKind::MiniLm, &[], Some(missing))
            .err()
            .unwrap();
        assert!(e.to_string().contains("minilm-dir"), "{e}");
        // A GPU device without its feature is refused before the (missing) model is read.
        #[cfg(not(feature = "wgpu"))]
        {
            let device = lprag::ComputeDevice::Wgpu(0);
            let e = build_encoder_on(EncoderKind::MiniLm, &[], Some(missing), None, device)
                .err()
                .unwrap();
            assert!(e.to_string().contains("wgpu"), "{e}");
            assert!(!e.to_string().contains("minilm-dir"), "{e}");
        }
        let docs = vec![Document::new("0", "T", "apple pie")];
        assert_eq!(
            build_encoder(EncoderKind::HashingUnfitted, &docs, None)
                .unwrap()
                .dimension(),
            1024
        );
    }
}
