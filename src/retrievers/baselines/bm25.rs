//! Okapi BM25 as a retriever over [`lprag_text::Bm25Index`], scored exactly as
//! `rank_bm25.BM25Okapi`.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, Chunker, Document, Error, Filter, Progress, Result, Retriever, ScoredChunk, Selection,
    SparseIndex,
};
use lprag_text::Bm25Index;
use serde::{Deserialize, Serialize};

use super::{admitted, check_chunks, passage_chunks, read_index, select, Unbounded};
use crate::retrievers::common::{
    begin_update, blocking, build_from, chunk_documents, save_json_atomic, Docs, Renumbered,
};
use crate::UpdateReport;

/// Parameters of [`Bm25Retriever`]: Okapi BM25's (as [`lprag_text::Bm25Config`]) and the
/// query length bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bm25Config {
    /// Term-frequency saturation. Default 1.5.
    pub k1: f64,
    /// Length normalisation, in `[0, 1]`. Default 0.75.
    pub b: f64,
    /// Floor for negative IDFs, as a fraction of the average IDF (rank_bm25's
    /// `epsilon`). Default 0.25.
    pub epsilon: f64,
    /// The longest query, in bytes of UTF-8, that `retrieve` scores; a longer one is
    /// [`Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`].
    pub max_query_bytes: usize,
}

impl Default for Bm25Config {
    fn default() -> Self {
        Self::from(lprag_text::Bm25Config::default())
    }
}

impl From<lprag_text::Bm25Config> for Bm25Config {
    fn from(c: lprag_text::Bm25Config) -> Self {
        Self {
            k1: c.k1,
            b: c.b,
            epsilon: c.epsilon,
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl Bm25Config {
    /// The scoring parameters, as the index takes them.
    pub fn scoring(&self) -> lprag_text::Bm25Config {
        lprag_text::Bm25Config {
            k1: self.k1,
            b: self.b,
            epsilon: self.epsilon,
        }
    }

    /// Check the numbers: `k1 ≥ 0`, `0 ≤ b ≤ 1`, all finite.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field.
    pub fn validate(&self) -> Result<()> {
        self.scoring().validate()
    }
}

/// Version of the file written by [`Bm25Retriever::save`].
pub const BM25_FORMAT_VERSION: u32 = 1;
const BM25_FILE: &str = "bm25.json";
/// Where a save may write (its file and nothing else of the directory).
const BM25_DIR: lprag_core::dirs::DirSpec = crate::durable::peer_index("a BM25 index", BM25_FILE);

/// A BM25 index as saved: its settings and chunks (the inverted index is refitted on
/// open, deterministically).
#[derive(Serialize)]
struct SavedRef<'a> {
    version: u32,
    config: &'a Bm25Config,
    chunks: &'a [Chunk],
}

#[derive(Deserialize)]
struct Saved {
    version: u32,
    config: Bm25Config,
    chunks: Vec<Chunk>,
}

/// Assembles a [`Bm25Retriever`]: `Bm25Retriever::builder().build(&docs)`. BM25 needs no
/// encoder.
pub struct Bm25RetrieverBuilder {
    chunker: Option<Arc<dyn Chunker>>,
    progress: Option<Arc<dyn Progress>>,
    config: Bm25Config,
}

impl Bm25RetrieverBuilder {
    /// Split documents with this chunker (default
    /// [`BoundedPassageChunker`](crate::BoundedPassageChunker), which without an encoder
    /// makes one chunk per document).
    pub fn chunker(mut self, chunker: Arc<dyn Chunker>) -> Self {
        self.chunker = Some(chunker);
        self
    }

    /// Receive progress reports (default: none).
    pub fn progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Replace the configuration.
    pub fn config(mut self, config: Bm25Config) -> Self {
        self.config = config;
        self
    }

    /// Chunk the documents (metadata inherited, content hashes recorded) and fit the
    /// index on the chunks' [`Chunk::embedding_text`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad configuration; [`Error::EmptyCorpus`] when no
    /// document produced a chunk; the chunker's errors.
    pub async fn build(self, documents: &[Document]) -> Result<Bm25Retriever> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(Bm25Retriever);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<Bm25Retriever> {
        self.config.validate()?;
        let chunker = self
            .chunker
            .unwrap_or_else(|| Arc::new(crate::BoundedPassageChunker));
        let progress = self
            .progress
            .unwrap_or_else(|| Arc::new(lprag_core::NoProgress));
        let chunks = chunk_documents(&*chunker, documents, &*progress).await?;
        progress.start("bm25 index", None);
        let r = Bm25Retriever::fitted(Arc::new(chunks), self.config).await;
        progress.finish("bm25 index");
        r
    }
}

/// Okapi BM25 over an in-memory inverted index, scoring exactly like the Python package
/// `rank_bm25` (`BM25Okapi`, k1 = 1.5, b = 0.75, ε = 0.25).
///
/// For a query of tokens `q₁ … qₘ` (repeats count again, as in rank_bm25) the score of
/// chunk `d` is
///
/// ```text
/// Σᵢ idf(qᵢ) · tf(qᵢ, d)·(k1 + 1) / (tf(qᵢ, d) + k1·(1 − b + b·|d| / avgdl))
/// idf(t) = ln(N − n(t) + 0.5) − ln(n(t) + 0.5)
/// ```
///
/// with `N` chunks, `n(t)` chunks containing `t`, `|d|` the chunk's token count and
/// `avgdl` the mean count. Terms with a negative IDF (in more than half the chunks) get
/// `ε · mean IDF` instead, as rank_bm25 does; query terms absent from the corpus add
/// nothing. Arithmetic is in `f64` in rank_bm25's order of operations, so scores (and
/// therefore rankings) agree with it to the last bit on the same tokens. Tokens come from
/// [`lprag_text::bm25_tokens`] applied to [`Chunk::embedding_text`]
/// (`title + "\n" + text`). With a [`Filter`], only the admitted chunks are ranked.
///
/// Every IDF depends on the whole corpus and every length norm on `avgdl`, so an update
/// refits the index on all chunks (tokenising and counting: linear in the corpus, much
/// cheaper than embedding it); scores then equal a fresh build's to the last bit.
///
/// Clones are cheap (chunks and index are shared) and independent.
///
/// # Why not tantivy?
///
/// tantivy is a fine search engine, but the wrong tool for a reference baseline:
/// - **Its scores differ from the reference.** tantivy implements Lucene's BM25: IDF
///   `ln(1 + (N − n + 0.5)/(n + 0.5))` (never negative, no ε floor), and document
///   lengths stored as one-byte quantised field norms. Rankings then differ from
///   rank_bm25, which is what the Python reference figures (and most RAG papers' "BM25"
///   rows) use; this implementation reproduces them exactly.
/// - **Its machinery buys nothing here.** Benchmark corpora are 10³–10⁵ passages held in
///   memory; a plain inverted index scores a query in microseconds to a millisecond, with
///   no schema, index writer, segments, commits or directory to manage.
///
/// For corpora that do not fit in memory, or for phrase queries, use tantivy behind your
/// own [`Retriever`] implementation.
#[derive(Debug, Clone)]
pub struct Bm25Retriever {
    pub(super) chunks: Arc<Vec<Chunk>>,
    index: Arc<Bm25Index>,
    config: Bm25Config,
}

impl Bm25Retriever {
    /// A builder with the defaults (the default chunker, [`Bm25Config::default`]).
    pub fn builder() -> Bm25RetrieverBuilder {
        Bm25RetrieverBuilder {
            chunker: None,
            progress: None,
            config: Bm25Config::default(),
        }
    }

    /// Index whole passages (one chunk per document, see [`passage_chunks`]).
    ///
    /// # Errors
    /// Those of [`passage_chunks`] and [`Bm25Retriever::from_chunks`].
    pub fn build(docs: &[Document], config: impl Into<Bm25Config>) -> Result<Self> {
        Self::from_chunks(passage_chunks(docs)?, config)
    }

    /// Index the given chunks (ids must be their positions).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad configuration or an id that is not its position;
    /// [`Error::EmptyCorpus`] without chunks.
    pub fn from_chunks(chunks: Vec<Chunk>, config: impl Into<Bm25Config>) -> Result<Self> {
        Self::from_shared(Arc::new(chunks), config.into())
    }

    /// Fit an index over `chunks` (shared with the caller).
    pub(super) fn from_shared(chunks: Arc<Vec<Chunk>>, config: Bm25Config) -> Result<Self> {
        config.validate()?;
        check_chunks(&chunks, "bm25")?;
        let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
        let index = Bm25Index::fit(&texts, config.scoring())?;
        Ok(Self {
            chunks,
            index: Arc::new(index),
            config,
        })
    }

    /// [`Bm25Retriever::from_shared`] on a blocking thread.
    pub(super) async fn fitted(chunks: Arc<Vec<Chunk>>, config: Bm25Config) -> Result<Self> {
        blocking(move || Self::from_shared(chunks, config)).await
    }

    /// The parameters in use.
    pub fn config(&self) -> &Bm25Config {
        &self.config
    }

    /// The fitted index (a [`lprag_core::SparseIndex`]).
    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    /// Number of distinct terms in the index.
    pub fn vocabulary_size(&self) -> usize {
        self.index.vocabulary_size()
    }

    /// The (floored) IDF of a term, if it occurs in the corpus. The term is used as given
    /// (pass a token of [`lprag_text::bm25_tokens`]).
    pub fn idf(&self, term: &str) -> Option<f64> {
        self.index.idf(term)
    }

    /// The BM25 score of `query` against every chunk, in chunk order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        self.index.scores(query)
    }

    /// The chunks `selection` keeps among the `admitted` ones, as `(chunk id, score)`,
    /// best first. The query is not checked here (the callers do).
    pub(super) fn rank(
        &self,
        query: &str,
        selection: Selection,
        admitted: Option<&[bool]>,
    ) -> Result<Vec<(usize, f64)>> {
        selection.validate()?;
        select(&self.scores(query), selection, admitted)
    }

    fn search(
        &self,
        query: &str,
        selection: Selection,
        admitted: Option<&[bool]>,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        Ok(self
            .rank(query, selection, admitted)?
            .into_iter()
            .map(|(i, s)| ScoredChunk {
                chunk: self.chunks[i].clone(),
                score: s as f32,
            })
            .collect())
    }

    /// Remove the chunks of `remove` (document ids), add `add`, and refit.
    async fn apply(
        &mut self,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
    ) -> Result<UpdateReport> {
        let unbounded: Arc<dyn lprag_core::Encoder> = Arc::new(Unbounded);
        let (Renumbered { chunks, .. }, mut report, mut laps) = begin_update(
            &self.chunks,
            (remove, add),
            chunker,
            &unbounded,
            "Bm25Retriever update",
        )
        .await?;
        report.chunks = chunks.len();
        let next = Self::fitted(Arc::new(chunks), self.config).await?;
        laps.lap(&mut report, "index");
        *self = next;
        Ok(report)
    }

    /// Write the index to `dir/bm25.json` atomically (a temporary file, then a rename):
    /// the configuration and the chunks; [`Bm25Retriever::open`] refits the index. `dir`
    /// must be new, empty, or hold a BM25 index; its other files are left alone.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` holds something else; I/O errors.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let _lock = crate::durable::open_for_save(&BM25_DIR, dir)?;
        let saved = SavedRef {
            version: BM25_FORMAT_VERSION,
            config: &self.config,
            chunks: &self.chunks,
        };
        save_json_atomic(dir, BM25_FILE, &saved)
    }

    /// Read an index written by [`Bm25Retriever::save`] (the inverted index is refitted:
    /// the same scores to the last bit).
    ///
    /// # Errors
    /// I/O and format errors of the file.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().join(BM25_FILE);
        let saved: Saved = read_index(&path, BM25_FORMAT_VERSION)?;
        if saved.version != BM25_FORMAT_VERSION {
            return Err(Error::format(
                &path,
                format!(
                    "format version {} (this build reads {BM25_FORMAT_VERSION})",
                    saved.version
                ),
            ));
        }
        Self::from_shared(Arc::new(saved.chunks), saved.config)
            .map_err(|e| Error::format(&path, e.to_string()))
    }
}

super::updates!(Bm25Retriever, "Bm25Retriever");

#[async_trait]
impl Retriever for Bm25Retriever {
    fn name(&self) -> &str {
        "bm25"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        self.search(query, selection, None)
    }

    /// Ranks the admitted chunks only (the filter applies inside the scan).
    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        let mask = admitted(&self.chunks, filter)?;
        self.search(query, selection, mask.as_deref())
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}
