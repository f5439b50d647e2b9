//! Indexes that change while they serve: [`Updatable`] retrievers, [`sync`] and [`Live`].
//!
//! Every retriever that updates implements [`Updatable`]: one call adds, replaces and
//! removes documents. [`sync`] compares the documents you have now with those in the
//! index by content hash ([`Document::content_hash`], recorded on every chunk) and changes
//! only what differs; an unchanged corpus costs no embedding and no LLM call.
//!
//! [`Live`] serves an index while it changes. Queries take a snapshot (one atomic load of
//! an `Arc`) and answer from it; an update clones the index (graph, embeddings and model
//! are shared, the chunk lists copied), changes the clone aside, saves it when a directory
//! is set, and only then swaps it in. Queries never wait for an update, and each sees a
//! complete index, the one before or the one after.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use lprag_core::{
    Chunker, Document, DocumentBlocks, DocumentSource, Error, LiveIndex, QueryGenerator, Result,
    Retriever, TripleExtractor, UpsertReport,
};
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{blocking, documents_with_ids};
use crate::UpdateReport;

/// The components an update chunks (and writes questions or triples) with. Use the ones the
/// index was built with; the defaults are the builders' offline defaults.
#[derive(Clone)]
pub struct UpdateInputs {
    /// The chunker of new and changed documents (default:
    /// [`BoundedPassageChunker`](crate::BoundedPassageChunker)).
    pub chunker: Arc<dyn Chunker>,
    /// The question writer of retrievers that write questions for new chunks (QCG-RAG);
    /// `None`: the retriever's own offline default.
    pub query_generator: Option<Arc<dyn QueryGenerator>>,
    /// The triple extractor of GFM-RAG; `None`: its offline default.
    pub extractor: Option<Arc<dyn TripleExtractor>>,
}

impl Default for UpdateInputs {
    fn default() -> Self {
        Self {
            chunker: Arc::new(crate::BoundedPassageChunker),
            query_generator: None,
            extractor: None,
        }
    }
}

impl UpdateInputs {
    /// The defaults with `chunker`.
    pub fn with_chunker(chunker: Arc<dyn Chunker>) -> Self {
        Self {
            chunker,
            ..Self::default()
        }
    }
}

impl std::fmt::Debug for UpdateInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateInputs")
            .field("chunker", &self.chunker.name())
            .field(
                "query_generator",
                &self.query_generator.as_ref().map(|g| g.name().to_string()),
            )
            .field("extractor", &self.extractor.is_some())
            .finish()
    }
}

/// A retriever whose documents can change after it was built.
///
/// A clone must be cheap and independent: updating it leaves the original as it was (the
/// retrievers share their large parts behind `Arc`s and build new ones on update).
#[async_trait]
pub trait Updatable: Retriever + Clone + 'static {
    /// Replace the documents of `upsert` that are in the index (matched by id), add the
    /// others, and remove the documents `remove`, in one update. Nothing changes when it
    /// fails.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when an id repeats in `upsert`, appears in both lists, or an
    /// id of `remove` is not in the index, or when the update would leave the index empty;
    /// the errors of the chunker, the encoder and the model.
    async fn apply_changes(
        &mut self,
        upsert: &[Document],
        remove: &[String],
        inputs: &UpdateInputs,
    ) -> Result<UpdateReport>;

    /// Save the index into `dir` (new, empty, or an index of the same kind; see the
    /// retriever's own `save`).
    ///
    /// # Errors
    /// Those of the retriever's `save`.
    fn save_index(&self, dir: &Path) -> Result<()>;

    /// Each document in the index with the content hash recorded when it was indexed
    /// (`None` for documents indexed before hashes were kept).
    fn document_hashes(&self) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        for c in self.chunks() {
            let entry = out
                .entry(c.provenance.document_id.clone())
                .or_insert_with(|| c.document_hash().map(str::to_string));
            if entry.as_deref() != c.document_hash() {
                // Chunks of one document that disagree: treat it as changed.
                *entry = None;
            }
        }
        out
    }
}

/// Check an update's lists and split `upsert` into replaced and new ids.
pub(crate) fn check_changes(
    present: &HashSet<&str>,
    upsert: &[Document],
    remove: &[String],
    location: &str,
) -> Result<Vec<String>> {
    let mut seen = HashSet::new();
    if let Some(d) = upsert.iter().find(|d| !seen.insert(d.id.as_str())) {
        return Err(Error::invalid(
            location,
            format!("document id '{}' appears twice", d.id),
        ));
    }
    if let Some(id) = remove.iter().find(|id| seen.contains(id.as_str())) {
        return Err(Error::invalid(
            location,
            format!("document id '{id}' is both added and removed"),
        ));
    }
    crate::retrievers::common::refuse_unknown(present, remove, location)?;
    let mut gone: Vec<String> = upsert
        .iter()
        .filter(|d| present.contains(d.id.as_str()))
        .map(|d| d.id.clone())
        .collect();
    gone.extend(remove.iter().cloned());
    Ok(gone)
}

/// What [`sync`] has to do: the ids of new, changed and missing documents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncPlan {
    /// Documents not in the index.
    pub added: Vec<String>,
    /// Documents in the index whose content hash differs (or was not recorded).
    pub changed: Vec<String>,
    /// Documents in the index that are not among the current ones.
    pub removed: Vec<String>,
    /// Documents whose content hash is the same: nothing is done for them.
    pub unchanged: usize,
}

impl SyncPlan {
    /// Compare the index's documents (`indexed`: id → recorded hash, from
    /// [`Updatable::document_hashes`]) with the current `documents`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a document id repeats in `documents`.
    pub fn new(indexed: &BTreeMap<String, Option<String>>, documents: &[Document]) -> Result<Self> {
        let mut plan = SyncPlan::default();
        let mut seen = HashSet::new();
        plan.compare(indexed, documents, &mut seen)?;
        plan.removed = Self::missing(indexed, &seen);
        Ok(plan)
    }

    /// [`SyncPlan::new`] over the documents of `source`, read through once a block at a
    /// time: only their ids are kept.
    ///
    /// # Errors
    /// As [`SyncPlan::new`]; the source's own errors.
    pub async fn from_source(
        indexed: &BTreeMap<String, Option<String>>,
        source: &dyn DocumentSource,
    ) -> Result<Self> {
        let mut plan = SyncPlan::default();
        let mut seen = HashSet::new();
        let mut blocks = DocumentBlocks::new(source);
        while let Some((_, block)) = blocks.next().await? {
            let mut ids = HashSet::new();
            plan.compare(indexed, &block, &mut ids)?;
            for id in ids {
                if !seen.insert(id.to_string()) {
                    return Err(repeated(id));
                }
            }
        }
        plan.removed = Self::missing(indexed, &seen);
        Ok(plan)
    }

    /// Sort `documents` into added, changed and unchanged, each id noted in `seen`.
    fn compare<'a>(
        &mut self,
        indexed: &BTreeMap<String, Option<String>>,
        documents: &'a [Document],
        seen: &mut HashSet<&'a str>,
    ) -> Result<()> {
        for d in documents {
            if !seen.insert(d.id.as_str()) {
                return Err(repeated(&d.id));
            }
            match indexed.get(&d.id) {
                None => self.added.push(d.id.clone()),
                Some(Some(h)) if *h == d.content_hash() => self.unchanged += 1,
                Some(_) => self.changed.push(d.id.clone()),
            }
        }
        Ok(())
    }

    /// The indexed ids not in `seen`.
    fn missing<S: std::borrow::Borrow<str> + Eq + std::hash::Hash>(
        indexed: &BTreeMap<String, Option<String>>,
        seen: &HashSet<S>,
    ) -> Vec<String> {
        indexed
            .keys()
            .filter(|id| !seen.contains(id.as_str()))
            .cloned()
            .collect()
    }

    /// The ids of the documents to add or replace.
    fn upserted(&self) -> HashSet<&str> {
        self.added
            .iter()
            .chain(&self.changed)
            .map(String::as_str)
            .collect()
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

/// A document id that appears twice among a sync's documents.
fn repeated(id: &str) -> Error {
    Error::invalid(
        "sync (documents)",
        format!("document id '{id}' appears twice"),
    )
}

/// What [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncReport {
    /// What was compared and found.
    pub plan: SyncPlan,
    /// The update, when there was one.
    pub update: Option<UpdateReport>,
}

/// Bring `index` in line with `documents`: add the new ones, replace the changed ones
/// (content hash) and remove the missing ones, in one [`Updatable::apply_changes`]. With
/// nothing to do, nothing is called. `index` is unchanged when it fails.
///
/// Removing every document is refused (an index cannot be empty).
///
/// # Errors
/// Those of [`SyncPlan::new`] and [`Updatable::apply_changes`].
pub async fn sync<R: Updatable>(
    index: &mut R,
    documents: &[Document],
    inputs: &UpdateInputs,
) -> Result<SyncReport> {
    let plan = SyncPlan::new(&index.document_hashes(), documents)?;
    if plan.is_empty() {
        return Ok(SyncReport { plan, update: None });
    }
    let wanted = plan.upserted();
    let upsert: Vec<Document> = documents
        .iter()
        .filter(|d| wanted.contains(d.id.as_str()))
        .cloned()
        .collect();
    let update = index.apply_changes(&upsert, &plan.removed, inputs).await?;
    Ok(SyncReport {
        plan,
        update: Some(update),
    })
}

/// [`sync`] with the documents of `source`, read a block at a time: once to compare them
/// with the index ([`SyncPlan::from_source`]) and, when some are new or changed, once more
/// to gather those (the only documents held). A folder (`lprag_load::DirSource`) of
/// which a few files changed costs two reads of the folder and the update of those files.
///
/// # Errors
/// As [`sync`]; the source's own errors.
pub async fn sync_from<R: Updatable>(
    index: &mut R,
    source: &dyn DocumentSource,
    inputs: &UpdateInputs,
) -> Result<SyncReport> {
    let plan = SyncPlan::from_source(&index.document_hashes(), source).await?;
    if plan.is_empty() {
        return Ok(SyncReport { plan, update: None });
    }
    let upsert = documents_with_ids(source, &plan.upserted()).await?;
    let update = index.apply_changes(&upsert, &plan.removed, inputs).await?;
    Ok(SyncReport {
        plan,
        update: Some(update),
    })
}

/// An index that answers queries while it is updated: see the [module docs](self).
///
/// ```no_run
/// use lprag::{Document, Live, LpRag, Retriever, Selection, UpdateInputs};
///
/// # async fn run(docs: Vec<Document>, more: Vec<Document>) -> lprag::Result<()> {
/// let live = std::sync::Arc::new(Live::new(LpRag::builder().build(&docs).await?));
/// // Any number of tasks query the current snapshot ...
/// let hits = live.snapshot().retrieve("Where was Curie born?", Selection::TopK(3)).await?;
/// // ... while one updates: the new index is swapped in when it is complete.
/// live.apply(&more, &[], &UpdateInputs::default()).await?;
/// # Ok(()) }
/// ```
pub struct Live<R> {
    current: ArcSwap<R>,
    /// The served retriever's name (for [`LiveIndex::name`]).
    name: String,
    /// What [`LiveIndex::upsert`] chunks new documents with.
    inputs: UpdateInputs,
    /// Updates one at a time; where to save each.
    writer: tokio::sync::Mutex<Option<PathBuf>>,
    /// The rayon pool of the updates' CPU stages (`None`: rayon's global pool).
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl<R: Updatable> Live<R> {
    /// Serve `index`. Updates run their CPU stages on a rayon pool of half the cores (at
    /// least one; see [`Live::update_threads`]).
    pub fn new(index: R) -> Self {
        Self {
            name: index.name().to_string(),
            inputs: UpdateInputs::default(),
            current: ArcSwap::from_pointee(index),
            writer: tokio::sync::Mutex::new(None),
            pool: crate::cpu::default_update_pool(),
        }
    }

    /// Run updates' CPU stages (graph repair, attaching the model, BM25 refits) on a
    /// rayon pool of `threads` threads of their own, so that queries, which rank on
    /// rayon's global pool, never queue behind an update's parallel loops; `0` runs them
    /// on the global pool (faster updates, slower queries meanwhile). Default: half the
    /// cores, at least one.
    pub fn update_threads(self, threads: usize) -> Self {
        let pool = if threads == 0 {
            None
        } else {
            crate::cpu::update_pool(threads)
        };
        Self { pool, ..self }
    }

    /// Save every update into `dir` before it is swapped in (and before the update call
    /// returns): an update that returns `Ok` is on disk, and a failed save leaves the
    /// served index as it was. `dir` follows the retriever's `save` rules.
    pub fn saving_to(self, dir: impl Into<PathBuf>) -> Self {
        Self {
            writer: tokio::sync::Mutex::new(Some(dir.into())),
            ..self
        }
    }

    /// Chunk (and write questions or triples for) the documents of [`LiveIndex::upsert`]
    /// with `inputs` (default: [`UpdateInputs::default`]). [`Live::apply`] and
    /// [`Live::sync`] take theirs per call.
    pub fn upsert_inputs(self, inputs: UpdateInputs) -> Self {
        Self { inputs, ..self }
    }

    /// The index as it is now. Hold it for as long as one request needs a consistent view;
    /// updates swap in new snapshots without waiting for it.
    pub fn snapshot(&self) -> Arc<R> {
        self.current.load_full()
    }

    /// Apply [`Updatable::apply_changes`] to a copy of the current index, save it (see
    /// [`Live::saving_to`]) and swap it in. Updates run one at a time, in call order;
    /// queries are answered throughout.
    ///
    /// # Errors
    /// Those of the update and the save; the served index is unchanged then.
    pub async fn apply(
        &self,
        upsert: &[Document],
        remove: &[String],
        inputs: &UpdateInputs,
    ) -> Result<UpdateReport> {
        let save_to = self.writer.lock().await;
        let mut next = self.copy().await?;
        let report = crate::cpu::with_pool(
            self.pool.clone(),
            next.apply_changes(upsert, remove, inputs),
        )
        .await?;
        self.commit(next, save_to.as_deref()).await?;
        Ok(report)
    }

    /// [`sync`] on a copy of the current index, saved and swapped in like
    /// [`Live::apply`]; with nothing to change, nothing is saved or swapped.
    ///
    /// # Errors
    /// Those of [`sync`] and the save; the served index is unchanged then.
    pub async fn sync(&self, documents: &[Document], inputs: &UpdateInputs) -> Result<SyncReport> {
        let save_to = self.writer.lock().await;
        let mut next = self.copy().await?;
        let report =
            crate::cpu::with_pool(self.pool.clone(), sync(&mut next, documents, inputs)).await?;
        if report.update.is_some() {
            self.commit(next, save_to.as_deref()).await?;
        }
        Ok(report)
    }

    /// Serve `index` instead of the current one (a rebuild, say), saved first like an
    /// update.
    ///
    /// # Errors
    /// Those of the save; the served index is unchanged then.
    pub async fn replace(&self, index: R) -> Result<()> {
        let save_to = self.writer.lock().await;
        self.commit(index, save_to.as_deref()).await
    }

    /// A copy of the current index, made off the async workers (it copies the chunk
    /// lists).
    async fn copy(&self) -> Result<R> {
        let current = self.current.load_full();
        crate::cpu::with_pool(self.pool.clone(), blocking(move || Ok(R::clone(&current)))).await
    }

    async fn commit(&self, next: R, save_to: Option<&Path>) -> Result<()> {
        let next = Arc::new(next);
        if let Some(dir) = save_to {
            let (index, dir) = (next.clone(), dir.to_path_buf());
            blocking(move || index.save_index(&dir)).await?;
        }
        let old = self.current.swap(next);
        // The old index is freed off the async workers (unless a query still holds it).
        blocking(move || {
            drop(old);
            Ok(())
        })
        .await
    }
}

/// The rig and swiftide adapters write into a `Live` index through this trait
/// (`lprag_adapters::rig::RigIndex::live`, `lprag_adapters::swiftide::LpragPersist`).
#[async_trait]
impl<R: Updatable> LiveIndex for Live<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn snapshot(&self) -> Arc<dyn Retriever> {
        Live::<R>::snapshot(self)
    }

    /// [`Live::apply`] with `documents` to upsert, nothing to remove, and the inputs of
    /// [`Live::upsert_inputs`].
    async fn upsert(&self, documents: &[Document]) -> Result<UpsertReport> {
        let report = self.apply(documents, &[], &self.inputs).await?;
        Ok(UpsertReport {
            added: report
                .added_documents
                .saturating_sub(report.removed_documents),
            replaced: report.removed_documents,
            chunks: report.chunks,
        })
    }
}

impl<R> std::fmt::Debug for Live<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}
