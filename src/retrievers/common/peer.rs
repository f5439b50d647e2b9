//! The generic core of the four peer retrievers (QCG-RAG, LeSeGR, GFM-RAG, G²RAG).
//!
//! A [`Peer`] holds a peer's saved state (a [`PeerState`]: the index as JSON, with its
//! format version and checks), what the peer rebuilds from it at load (its `Runtime`) and
//! the encoder. This module implements, once for all four, [`Retriever`] (the selection
//! checked, the query embedded and checked, then [`PeerState::rank`]), `save` and `load`,
//! and, for states that update ([`PeerUpdate`]), the `add_documents`, `update_documents`
//! and `remove_documents` family and [`crate::Updatable`] around [`PeerUpdate::apply`].
//! A peer's module holds only its method.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Encoder, Result, Retriever, ScoredChunk, Selection};

use super::{
    begin_update, check_all_finite, document_ids, embed_user_query, extend_embeddings,
    load_json_index, refuse_present, refuse_unknown, replaced_ids, save_json_atomic, Laps,
    Renumbered, SavedState,
};
use crate::{UpdateInputs, UpdateReport};

/// The state of a peer retriever: what it saves, how it opens and how it ranks.
#[async_trait]
pub trait PeerState: SavedState + serde::Serialize + Send + Sync + Sized + 'static {
    /// What the retriever keeps beside its saved state, rebuilt from it at load (`()`
    /// when nothing).
    type Runtime: Clone + Send + Sync;
    /// What rebuilding the runtime at load takes; its default is what `load` uses.
    type Open: Default;
    /// The retriever's type name, used in error locations (`QcgRag`).
    const TYPE_NAME: &'static str;
    /// The index file in the index directory (`qcg.json`).
    const FILE: &'static str;
    /// Where a save may write (its files and nothing else of the directory).
    const DIR: lprag_core::dirs::DirSpec;

    /// The retriever's name ([`Retriever::name`]).
    fn name(&self) -> &str;

    /// The indexed chunks, by chunk id.
    fn chunks(&self) -> &[Chunk];

    /// The width of query embeddings and the longest query embedded, in bytes.
    fn query_shape(&self) -> (usize, usize);

    /// The checked query embedding as the method uses it (default: as it is).
    fn prepare_query(q: Vec<f32>) -> Vec<f32> {
        q
    }

    /// The tracing span of one retrieval.
    fn span() -> tracing::Span;

    /// The runtime of the loaded state `self`, read from the index directory `dir`.
    fn open(&self, dir: &Path, open: Self::Open) -> Result<Self::Runtime>;

    /// Write the index files into `dir`, whose save lock is held and whose floats were
    /// checked (default: the state as JSON in [`PeerState::FILE`]).
    fn save_files(peer: &Peer<Self>, dir: &Path) -> Result<()> {
        save_json_atomic(dir, Self::FILE, &*peer.state)
    }

    /// The hits for `query` (embedded as `q`, see `Peer::embed_query`) under
    /// `selection` (validated).
    async fn rank(
        peer: &Peer<Self>,
        query: &str,
        q: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>>;
}

/// The state of a peer retriever that updates in place.
#[async_trait]
pub trait PeerUpdate: PeerState {
    /// What an update takes beside the chunker: the question writer (QCG-RAG), the
    /// citations (LeSeGR), the triple extractor (GFM-RAG).
    type With: ?Sized + Sync;
    /// An owned [`PeerUpdate::With`].
    type Owned: std::ops::Deref<Target = Self::With> + Send + Sync;

    /// What an update takes by default (the builders' offline defaults).
    fn default_with(&self) -> Self::Owned;

    /// What an [`crate::Updatable`] update takes: from `inputs` when they hold it, else
    /// the default.
    fn with_from(&self, inputs: &UpdateInputs) -> Self::Owned {
        let _ = inputs;
        self.default_with()
    }

    /// Remove the chunks of the documents `remove`, add `add` chunked by `chunker`: the
    /// method's update. The index changes only once every step has succeeded.
    async fn apply(
        peer: &mut Peer<Self>,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
        with: &Self::With,
    ) -> Result<UpdateReport>;
}

/// A peer retriever: its saved state, what it rebuilt from it and its encoder. `Send +
/// Sync`; retrieval is read-only; a clone is cheap (the state is shared) and an update of
/// it leaves the original as it was.
pub struct Peer<S: PeerState> {
    pub(crate) state: Arc<S>,
    pub(crate) runtime: S::Runtime,
    pub(crate) encoder: Arc<dyn Encoder>,
}

impl<S: PeerState> Clone for Peer<S> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            runtime: self.runtime.clone(),
            encoder: self.encoder.clone(),
        }
    }
}

impl<S: PeerState> Peer<S> {
    /// The user query's embedding: checked ([`embed_user_query`]), then prepared as the
    /// method uses it ([`PeerState::prepare_query`]).
    pub(crate) async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let (dim, max_bytes) = self.state.query_shape();
        let q = embed_user_query(&*self.encoder, query, dim, max_bytes).await?;
        Ok(S::prepare_query(q))
    }

    /// Write the index into `dir` atomically (each file through a temporary one, then
    /// renamed): `dir` must be new, empty, or an index of the same kind; a value JSON
    /// cannot store (NaN, infinity) is refused before anything is written.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let (dir, st) = (dir.as_ref(), &*self.state);
        check_all_finite(dir, S::FILE, st)?;
        let _lock = crate::durable::open_for_save(&S::DIR, dir)?;
        S::save_files(self, dir)
    }

    /// Read an index written by `save`; `encoder` must be the one it was built with
    /// (checked by name, dimension and fingerprint).
    pub fn load(dir: impl AsRef<Path>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::load_opened(dir.as_ref(), encoder, S::Open::default())
    }

    /// [`Peer::load`] with the runtime rebuilt from `open`.
    pub(crate) fn load_opened(
        dir: &Path,
        encoder: Arc<dyn Encoder>,
        open: S::Open,
    ) -> Result<Self> {
        let state: S = load_json_index(&dir.join(S::FILE), &*encoder)?;
        let runtime = state.open(dir, open)?;
        Ok(Self {
            state: Arc::new(state),
            runtime,
            encoder,
        })
    }
}

impl<S: PeerUpdate> Peer<S> {
    /// Add documents with the builders' default chunker
    /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)) and the method's offline
    /// default (QCG-RAG: the heuristic question writer with `queries_per_chunk`
    /// questions; LeSeGR: no citations; GFM-RAG: the co-occurrence extractor with the
    /// index's `offline_extractor` settings); see `add_documents_with`.
    ///
    /// # Errors
    /// Those of `add_documents_with`.
    pub async fn add_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        let with = self.state.default_with();
        self.add_documents_with(documents, &crate::BoundedPassageChunker, &*with)
            .await
    }

    /// Add documents chunked by `chunker`, with `with` (use the ones the index was built
    /// with): the question writer of QCG-RAG (e.g. `LlmQueryGenerator::doc2query`), the
    /// `(citing, cited)` citations of a LeSeGR index built with `document_links`, the
    /// triple extractor of GFM-RAG (e.g. `LlmTripleExtractor`).
    ///
    /// # Errors
    /// [`lprag_core::Error::InvalidInput`] when a document id repeats or is already in the
    /// index (use `update_documents_with`), or when the index cannot be updated (see the
    /// method's `update` module); the errors of the chunker, the encoder and the model.
    pub async fn add_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
        with: &S::With,
    ) -> Result<UpdateReport> {
        let location = format!("{}::add_documents", S::TYPE_NAME);
        refuse_present(&self.document_ids(), documents, &location)?;
        S::apply(self, &[], documents, chunker, with).await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index, with the default chunker and the method's offline default; see
    /// `update_documents_with`.
    ///
    /// # Errors
    /// Those of `update_documents_with`.
    pub async fn update_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        let with = self.state.default_with();
        self.update_documents_with(documents, &crate::BoundedPassageChunker, &*with)
            .await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index, in one update: the old versions' chunks go and the new ones come.
    ///
    /// # Errors
    /// Those of `add_documents_with` (a repeated id included).
    pub async fn update_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
        with: &S::With,
    ) -> Result<UpdateReport> {
        let replaced = replaced_ids(&self.document_ids(), documents);
        S::apply(self, &replaced, documents, chunker, with).await
    }

    /// Remove documents by id, with their chunks and what the method derived from them.
    ///
    /// # Errors
    /// [`lprag_core::Error::InvalidInput`] naming the ids that are not in the index
    /// (nothing is removed then), or when every chunk would go (an index cannot be empty).
    pub async fn remove_documents(&mut self, ids: &[String]) -> Result<UpdateReport> {
        let location = format!("{}::remove_documents", S::TYPE_NAME);
        refuse_unknown(&self.document_ids(), ids, &location)?;
        let with = self.state.default_with();
        S::apply(self, ids, &[], &crate::BoundedPassageChunker, &*with).await
    }

    /// The ids of the documents in the index (those that produced a chunk).
    pub fn document_ids(&self) -> HashSet<&str> {
        document_ids(self.state.chunks())
    }

    /// The first two stages of an update, timed (`chunk`, `embed`): the chunks after it
    /// ([`begin_update`]), and their embeddings: the rows of `old_emb` kept, then the new
    /// chunks' ([`extend_embeddings`]; L2-normalised when `normalize`).
    pub(crate) async fn start_update(
        &self,
        (remove, add): (&[String], &[Document]),
        chunker: &dyn Chunker,
        old_emb: &lprag_core::Embeddings,
        normalize: bool,
    ) -> Result<(Renumbered, lprag_core::Embeddings, UpdateReport, Laps)> {
        let location = format!("{} update", S::TYPE_NAME);
        let (r, mut report, mut laps) = begin_update(
            self.state.chunks(),
            (remove, add),
            chunker,
            &self.encoder,
            &location,
        )
        .await?;
        let new = &r.chunks[r.first_new..];
        let emb = extend_embeddings(old_emb, &r.kept, &*self.encoder, new, normalize).await?;
        laps.lap(&mut report, "embed");
        Ok((r, emb, report, laps))
    }
}

#[async_trait]
impl<S: PeerState> Retriever for Peer<S> {
    fn name(&self) -> &str {
        self.state.name()
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        use tracing::Instrument;
        let span = S::span();
        async {
            selection.validate()?;
            let q = self.embed_query(query).await?;
            S::rank(self, query, q, selection).await
        }
        .instrument(span)
        .await
    }

    fn chunks(&self) -> &[Chunk] {
        self.state.chunks()
    }
}

#[async_trait]
impl<S: PeerUpdate> crate::Updatable for Peer<S> {
    /// One update, with `PeerUpdate::with_from(inputs)` (QCG-RAG's question writer,
    /// GFM-RAG's extractor; LeSeGR adds no citations).
    async fn apply_changes(
        &mut self,
        upsert: &[Document],
        remove: &[String],
        inputs: &UpdateInputs,
    ) -> Result<UpdateReport> {
        let location = format!("{} update", S::TYPE_NAME);
        let gone = crate::live::check_changes(&self.document_ids(), upsert, remove, &location)?;
        let with = self.state.with_from(inputs);
        S::apply(self, &gone, upsert, &*inputs.chunker, &*with).await
    }

    fn save_index(&self, dir: &Path) -> Result<()> {
        self.save(dir)
    }
}
