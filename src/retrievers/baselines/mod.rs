//! Baseline retrievers: exact flat cosine search ([`DenseRetriever`]), Okapi BM25
//! ([`Bm25Retriever`], scoring exactly like `rank_bm25`) and their reciprocal-rank fusion
//! ([`HybridRetriever`]).
//!
//! They are built like the other retrievers (a builder with a `chunker`, for the dense
//! ones an `encoder`, a `config`, then `build(&documents)`; by default one chunk per
//! document, split where it exceeds the encoder's input), filter inside their scan
//! ([`Retriever::retrieve_filtered`] ranks only the admitted chunks), update
//! ([`crate::Updatable`]: add, replace and remove documents, equal to a fresh build on the
//! final documents), and save and reopen (`save`, `load`, `open`).
//!
//! For benchmarks, `from_chunks` builds over a given chunk list, such as
//! [`passage_chunks`] (one chunk per document, unsplit). The text a chunk is indexed under
//! is [`Chunk::embedding_text`]: `title + "\n" + text` (the HippoRAG passage string) when
//! the title is not empty.
//!
//! Ranking is deterministic: equal scores are ordered by chunk id.
//!
//! [`Retriever::retrieve_filtered`]: lprag_core::Retriever::retrieve_filtered

mod bm25;
mod dense;
mod hybrid;

pub use bm25::{Bm25Config, Bm25Retriever, Bm25RetrieverBuilder, BM25_FORMAT_VERSION};
pub use dense::{DenseConfig, DenseRetriever, DenseRetrieverBuilder, DENSE_FORMAT_VERSION};
pub use hybrid::{HybridRetriever, HybridRetrieverBuilder, RrfConfig, HYBRID_FORMAT_VERSION};

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, Document, Embeddings, Encoder, Error, Filter, Progress, Provenance, Result, Selection,
};
use lprag_text::{HashingEncoder, HashingIdf};
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{
    blocking, chunk_documents, fit_to_encoder, BuildInputs, DefaultEncoder, Docs,
};

/// The update methods every baseline has, and its [`crate::Updatable`] impl, around its
/// `apply(&mut self, remove, add, chunker)` and `save(dir)`.
macro_rules! updates {
    ($ty:ident, $name:literal) => {
        impl $ty {
            /// Add documents with the builders' default chunker
            /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)); see
            #[doc = concat!("[`", $name, "::add_documents_with`].")]
            ///
            /// # Errors
            #[doc = concat!("Those of [`", $name, "::add_documents_with`].")]
            pub async fn add_documents(
                &mut self,
                documents: &[lprag_core::Document],
            ) -> lprag_core::Result<crate::UpdateReport> {
                self.add_documents_with(documents, &crate::BoundedPassageChunker)
                    .await
            }

            /// Add documents, chunked by `chunker` (use the one the index was built with).
            /// The index afterwards equals a fresh build on its documents in their new
            /// order (the kept ones, then these).
            ///
            /// # Errors
            /// [`lprag_core::Error::InvalidInput`] when a document id repeats or is already
            /// in the index (use `update_documents`); the errors of the chunker and the
            /// encoder. The index is unchanged then.
            pub async fn add_documents_with(
                &mut self,
                documents: &[lprag_core::Document],
                chunker: &dyn lprag_core::Chunker,
            ) -> lprag_core::Result<crate::UpdateReport> {
                crate::retrievers::common::refuse_present(
                    &self.document_ids(),
                    documents,
                    concat!($name, "::add_documents"),
                )?;
                self.apply(&[], documents, chunker).await
            }

            /// Replace documents (matched by id) with new versions, and add those not yet
            /// in the index, with the default chunker; see
            #[doc = concat!("[`", $name, "::update_documents_with`].")]
            ///
            /// # Errors
            #[doc = concat!("Those of [`", $name, "::update_documents_with`].")]
            pub async fn update_documents(
                &mut self,
                documents: &[lprag_core::Document],
            ) -> lprag_core::Result<crate::UpdateReport> {
                self.update_documents_with(documents, &crate::BoundedPassageChunker)
                    .await
            }

            /// Replace documents (matched by id) with new versions, and add those not yet
            /// in the index: the old versions' chunks are removed and the new ones added
            /// in one update.
            ///
            /// # Errors
            #[doc = concat!("Those of [`", $name, "::add_documents_with`] (a repeated id included).")]
            pub async fn update_documents_with(
                &mut self,
                documents: &[lprag_core::Document],
                chunker: &dyn lprag_core::Chunker,
            ) -> lprag_core::Result<crate::UpdateReport> {
                let replaced =
                    crate::retrievers::common::replaced_ids(&self.document_ids(), documents);
                self.apply(&replaced, documents, chunker).await
            }

            /// Remove documents by id, with their chunks.
            ///
            /// # Errors
            /// [`lprag_core::Error::InvalidInput`] naming the ids that are not in the index
            /// (nothing is removed then), or when every chunk would go (an index cannot be
            /// empty).
            pub async fn remove_documents(
                &mut self,
                ids: &[String],
            ) -> lprag_core::Result<crate::UpdateReport> {
                crate::retrievers::common::refuse_unknown(
                    &self.document_ids(),
                    ids,
                    concat!($name, "::remove_documents"),
                )?;
                self.apply(ids, &[], &crate::BoundedPassageChunker).await
            }

            /// The ids of the documents in the index (those that produced a chunk).
            pub fn document_ids(&self) -> std::collections::HashSet<&str> {
                crate::retrievers::common::document_ids(lprag_core::Retriever::chunks(self))
            }
        }

        #[async_trait::async_trait]
        impl crate::Updatable for $ty {
            async fn apply_changes(
                &mut self,
                upsert: &[lprag_core::Document],
                remove: &[String],
                inputs: &crate::UpdateInputs,
            ) -> lprag_core::Result<crate::UpdateReport> {
                let gone = crate::live::check_changes(
                    &self.document_ids(),
                    upsert,
                    remove,
                    concat!($name, " update"),
                )?;
                self.apply(&gone, upsert, &*inputs.chunker).await
            }

            fn save_index(&self, dir: &std::path::Path) -> lprag_core::Result<()> {
                self.save(dir)
            }
        }
    };
}
use updates;

/// One chunk per document, holding its whole text: chunk `i` is document `i`, with
/// `provenance.document_id` = the document's id, span `0..text.len()`, the document's
/// metadata and its content hash ([`Chunk::stamp_document_hashes`], so that
/// [`crate::sync`] recognises unchanged documents).
///
/// # Errors
/// [`Error::EmptyCorpus`] when `docs` is empty.
pub fn passage_chunks(docs: &[Document]) -> Result<Vec<Chunk>> {
    if docs.is_empty() {
        return Err(Error::EmptyCorpus("no documents to index".into()));
    }
    let mut chunks: Vec<Chunk> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| Chunk {
            id: i,
            text: d.text.clone(),
            provenance: Provenance {
                document_id: d.id.clone(),
                title: d.title.clone(),
                span: 0..d.text.len(),
            },
            metadata: d.metadata.clone(),
        })
        .collect();
    Chunk::stamp_document_hashes(&mut chunks, docs);
    Ok(chunks)
}

/// Check that chunk ids are positions (`chunks[i].id == i`) and that there is at least one.
fn check_chunks(chunks: &[Chunk], who: &str) -> Result<()> {
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus(format!("{who}: no chunks to index")));
    }
    if let Some((i, c)) = chunks.iter().enumerate().find(|(i, c)| c.id != *i) {
        return Err(Error::invalid(
            format!("{who}: chunks[{i}]"),
            format!("chunk id is {} but must equal its position {i}", c.id),
        ));
    }
    Ok(())
}

/// Which chunks `filter` admits, or `None` when it admits every chunk.
fn admitted(chunks: &[Chunk], filter: &Filter) -> Result<Option<Vec<bool>>> {
    filter.validate()?;
    if filter.is_all() {
        return Ok(None);
    }
    Ok(Some(chunks.iter().map(|c| filter.matches(c)).collect()))
}

/// Indices of `scores` that `selection` keeps among the `admitted` ones (all when `None`),
/// best first; equal scores by index; NaN scores rank last.
fn select(
    scores: &[f64],
    selection: Selection,
    admitted: Option<&[bool]>,
) -> Result<Vec<(usize, f64)>> {
    selection.validate()?;
    let key = |i: usize| {
        let s = scores[i];
        if s.is_nan() {
            f64::NEG_INFINITY
        } else {
            s
        }
    };
    let cmp = |a: &usize, b: &usize| key(*b).total_cmp(&key(*a)).then(a.cmp(b));
    let (threshold, k) = match selection {
        Selection::TopK(k) => (None, Some(k)),
        Selection::Threshold(t) => (Some(f64::from(t)), None),
        Selection::ThresholdTopK { threshold, k } => (Some(f64::from(threshold)), Some(k)),
    };
    let mut idx: Vec<usize> = (0..scores.len())
        .filter(|&i| admitted.is_none_or(|m| m[i]))
        .filter(|&i| threshold.is_none_or(|t| key(i) >= t))
        .collect();
    if let Some(k) = k {
        if k < idx.len() {
            idx.select_nth_unstable_by(k - 1, cmp);
            idx.truncate(k);
        }
    }
    idx.sort_unstable_by(cmp);
    Ok(idx.into_iter().map(|i| (i, scores[i])).collect())
}

/// The encoder a dense index was built with when none was given: what
/// [`DefaultEncoder::choose`] picked, and, for the fitted hashing encoder once the chunks
/// it was fitted on have changed (an update), its fitted table, so that `open` rebuilds
/// exactly the encoder in use.
#[derive(Clone, Default)]
struct EncoderOrigin {
    default: Option<DefaultEncoder>,
    idf: Option<Arc<HashingIdf>>,
}

impl EncoderOrigin {
    /// This origin, ready for an update of an index whose chunks are `chunks`: a fitted
    /// hashing encoder's table is taken from them first (it was fitted on exactly these
    /// chunks, at build or at `open`), since after the update they are gone.
    async fn before_update(&self, chunks: &[Chunk]) -> Result<Self> {
        match (&self.default, &self.idf) {
            (Some(DefaultEncoder::FittedHashing { config }), None) => {
                let config = config.clone();
                let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
                let idf = blocking(move || HashingIdf::fit(&config, &texts)).await?;
                Ok(Self {
                    default: self.default.clone(),
                    idf: Some(Arc::new(idf)),
                })
            }
            _ => Ok(self.clone()),
        }
    }

    /// The default encoder recorded in a saved index, rebuilt (see
    /// [`DefaultEncoder::rebuild`]); `who` names the loader to use for a custom encoder.
    fn rebuild<C>(path: &Path, saved: &SavedDense<C>, who: &str) -> Result<Arc<dyn Encoder>> {
        match (&saved.default_encoder, &saved.hashing_idf) {
            (None, _) => Err(Error::invalid(
                format!("{who}::open"),
                format!(
                    "the index {} was built with the custom encoder '{}'; load it with \
                     {who}::load(dir, encoder)",
                    path.display(),
                    saved.encoder
                ),
            )),
            (Some(DefaultEncoder::FittedHashing { config }), Some(idf)) => Ok(Arc::new(
                HashingEncoder::new(config.clone())?.with_idf(idf.clone())?,
            )),
            (Some(spec), _) => {
                let texts: Vec<String> = saved.chunks.iter().map(Chunk::embedding_text).collect();
                spec.rebuild(&texts)
            }
        }
    }
}

/// The start of a baseline's build: the documents chunked (metadata inherited, content
/// hashes stamped; none is [`Error::EmptyCorpus`]), the encoder set or, without one, the
/// default ([`DefaultEncoder::choose`], recorded), and the chunks fitted to the encoder.
struct Prepared {
    chunks: Vec<Chunk>,
    texts: Vec<String>,
    encoder: Arc<dyn Encoder>,
    origin: EncoderOrigin,
    progress: Arc<dyn Progress>,
}

/// See [`Prepared`].
async fn prepare(inputs: &BuildInputs, documents: Docs<'_>) -> Result<Prepared> {
    let chunker = inputs.chunker();
    let progress = inputs.progress();
    let chunks = chunk_documents(&*chunker, documents, &*progress).await?;
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let (encoder, default) = match inputs.encoder.clone() {
        Some(e) => (e, None),
        None => {
            let t = texts.clone();
            let (spec, enc, warning) = blocking(move || DefaultEncoder::choose(&t)).await?;
            if let Some(w) = warning {
                progress.warn(&w);
            }
            (enc, Some(spec))
        }
    };
    let n = chunks.len();
    let (chunks, warning) = fit_to_encoder(chunks, documents, &encoder, chunker.name()).await?;
    if let Some(w) = warning {
        progress.warn(&w);
    }
    let texts = if chunks.len() == n {
        texts
    } else {
        chunks.iter().map(Chunk::embedding_text).collect()
    };
    Ok(Prepared {
        chunks,
        texts,
        encoder,
        origin: EncoderOrigin { default, idf: None },
        progress,
    })
}

/// The encoder BM25's updates chunk "for": none, so chunks are never split to fit
/// ([`crate::retrievers::common::begin_update`] takes an encoder for that).
struct Unbounded;

#[async_trait]
impl Encoder for Unbounded {
    fn name(&self) -> &str {
        "none"
    }

    fn dimension(&self) -> usize {
        1
    }

    async fn embed(&self, _texts: &[String]) -> Result<Embeddings> {
        Err(Error::invalid("bm25", "BM25 embeds nothing"))
    }
}

/// A dense index as saved (by [`DenseRetriever`] and [`HybridRetriever`], whose own
/// settings are `config`): the version first, so that the directory's marker check finds
/// it.
#[derive(Serialize)]
struct SavedDenseRef<'a, C> {
    version: u32,
    encoder: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoder_fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    default_encoder: Option<&'a DefaultEncoder>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hashing_idf: Option<&'a HashingIdf>,
    config: &'a C,
    chunks: &'a [Chunk],
    embeddings: &'a Embeddings,
}

/// What [`SavedDenseRef`] wrote, read back.
#[derive(Deserialize)]
struct SavedDense<C> {
    version: u32,
    encoder: String,
    #[serde(default)]
    encoder_fingerprint: Option<String>,
    #[serde(default)]
    default_encoder: Option<DefaultEncoder>,
    #[serde(default)]
    hashing_idf: Option<HashingIdf>,
    config: C,
    chunks: Vec<Chunk>,
    embeddings: Embeddings,
}

/// Read a JSON index file of format `version` (checked before the body is parsed, so that
/// another version says so).
fn read_index<T: serde::de::DeserializeOwned>(path: &Path, version: u32) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    crate::retrievers::common::check_version(path, &bytes, "version", version)?;
    serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))
}

/// Check a saved dense index read from `path`: its version, finite embeddings, one row per
/// chunk, chunk ids equal to positions.
fn check_saved_dense<C>(path: &Path, saved: &SavedDense<C>, version: u32) -> Result<()> {
    if saved.version != version {
        return Err(Error::format(
            path,
            format!(
                "format version {} (this build reads {version})",
                saved.version
            ),
        ));
    }
    if let Some(i) = saved
        .embeddings
        .as_slice()
        .iter()
        .position(|x| !x.is_finite())
    {
        return Err(Error::format(
            path,
            format!("field `embeddings`: value {i} is not finite (a number outside f32's range?)"),
        ));
    }
    if saved.embeddings.rows() != saved.chunks.len() {
        return Err(Error::format(
            path,
            format!(
                "{} embedding rows for {} chunks",
                saved.embeddings.rows(),
                saved.chunks.len()
            ),
        ));
    }
    check_chunks(&saved.chunks, "saved index").map_err(|e| Error::format(path, e.to_string()))
}

/// Check that `encoder` is the one a saved dense index was built with: name, width and
/// fingerprint.
fn check_saved_encoder<C>(path: &Path, saved: &SavedDense<C>, encoder: &dyn Encoder) -> Result<()> {
    let dim = saved.embeddings.dim();
    if saved.encoder != encoder.name() || dim != encoder.dimension() {
        return Err(Error::invalid(
            path.display().to_string(),
            format!(
                "index built with encoder `{}` ({dim}-d), given `{}` ({}-d)",
                saved.encoder,
                encoder.name(),
                encoder.dimension()
            ),
        ));
    }
    crate::retrievers::common::check_fingerprint(
        &path.display().to_string(),
        saved.encoder_fingerprint.as_deref(),
        encoder,
    )
}
