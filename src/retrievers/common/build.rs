//! The start every build shares: the builders' `chunker`, `encoder` and `progress` inputs
//! (and their setters, `input_setters!`), chunking, fitting the chunks to the encoder,
//! choosing the default encoder, embedding the chunks; and labelled questions as query
//! nodes.

use std::sync::Arc;

use lprag_core::{
    Chunk, ChunkId, Chunker, Document, DocumentBlocks, DocumentSource, Embeddings, Encoder, Error,
    NoProgress, Progress, Result, SyntheticQuery,
};

use super::{blocking, embed_all, DefaultEncoder};

/// The start every peer retriever's build shares: chunk `documents` ([`chunk_documents`]),
/// take their embedding texts, and use `encoder` or, without one,
/// [`DefaultEncoder::choose`] (its fallback warning goes to `progress`).
pub(crate) async fn chunk_and_encoder(
    chunker: &dyn Chunker,
    documents: Docs<'_>,
    encoder: Option<Arc<dyn Encoder>>,
    progress: &dyn Progress,
) -> Result<(Vec<Chunk>, Vec<String>, Arc<dyn Encoder>)> {
    let chunks = chunk_documents(chunker, documents, progress).await?;
    let (chunks, encoder, _) =
        encoder_and_fit(chunks, documents, encoder, chunker.name(), &mut |w| {
            progress.warn(&w)
        })
        .await?;
    let texts = chunks.iter().map(Chunk::embedding_text).collect();
    Ok((chunks, texts, encoder))
}

/// The encoder for `chunks` (`encoder`, else [`DefaultEncoder::choose`] on their texts,
/// returned with the choice) and the chunks fitted to its input ([`fit_to_encoder`]). Each
/// build takes this step: the peers through [`chunk_and_encoder`], LP-RAG after its chunk
/// stage. Warnings (the default encoder's fallback, split or too-long chunks) go to `warn`.
pub(crate) async fn encoder_and_fit(
    chunks: Vec<Chunk>,
    documents: Docs<'_>,
    encoder: Option<Arc<dyn Encoder>>,
    chunker: &str,
    warn: &mut (dyn FnMut(String) + Send),
) -> Result<(Vec<Chunk>, Arc<dyn Encoder>, Option<DefaultEncoder>)> {
    let (chunks, encoder, choice) = match encoder {
        Some(e) => (chunks, e, None),
        None => {
            let (chunks, (spec, enc, warning)) = blocking(move || {
                let chosen = DefaultEncoder::choose_for_chunks(&chunks)?;
                Ok((chunks, chosen))
            })
            .await?;
            if let Some(w) = warning {
                warn(w);
            }
            (chunks, enc, Some(spec))
        }
    };
    let (chunks, warning) = fit_to_encoder(chunks, documents, &encoder, chunker).await?;
    if let Some(w) = warning {
        warn(w);
    }
    Ok((chunks, encoder, choice))
}

/// Where a build's documents are: the caller's slice, or a source read a block at a time
/// (`LpRagBuilder::build_from`), which the build never holds whole.
#[derive(Clone, Copy)]
pub(crate) enum Docs<'a> {
    /// Every document, in memory.
    Slice(&'a [Document]),
    /// Documents read in blocks.
    Source(&'a dyn DocumentSource),
}

/// The chunks of `documents`, each with its document's metadata and content hash: a slice
/// chunked in one call, a source block by block ([`chunk_source`], ids checked across
/// blocks). No chunk at all is [`Error::EmptyCorpus`].
pub(crate) async fn chunk_documents(
    chunker: &dyn Chunker,
    documents: Docs<'_>,
    progress: &dyn Progress,
) -> Result<Vec<Chunk>> {
    let chunks = match documents {
        Docs::Slice(documents) => {
            let mut chunks = chunker.chunk(documents).await?;
            Chunk::inherit_metadata(&mut chunks, documents);
            Chunk::stamp_document_hashes(&mut chunks, documents);
            chunks
        }
        Docs::Source(source) => chunk_source(chunker, source, progress, true).await?,
    };
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus("no document produced a chunk".into()));
    }
    Ok(chunks)
}

/// Chunk a source block by block: each block is chunked on its own (a block whose
/// documents yield no chunk adds none), its chunks renumbered after the last block's and
/// given their documents' metadata and content hashes. With `check_ids`, two documents
/// with one id, in any blocks, are the error a chunker gives a slice with them.
pub(crate) async fn chunk_source(
    chunker: &dyn Chunker,
    source: &dyn DocumentSource,
    progress: &dyn Progress,
    check_ids: bool,
) -> Result<Vec<Chunk>> {
    const STAGE: &str = "chunk documents";
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    progress.start(STAGE, source.len_hint().map(|n| n as u64));
    let mut chunks = Vec::new();
    let mut blocks = DocumentBlocks::new(source);
    while let Some((start, block)) = blocks.next().await? {
        if check_ids {
            for (i, d) in block.iter().enumerate().map(|(i, d)| (start + i, d)) {
                if let Some(first) = seen.insert(d.id.clone(), i) {
                    return Err(duplicate_id(&d.id, first, i));
                }
            }
        }
        let mut c = match chunker.chunk(&block).await {
            Err(Error::EmptyCorpus(_)) => Vec::new(),
            done => done?,
        };
        let base = chunks.len();
        for (i, chunk) in c.iter_mut().enumerate() {
            chunk.id = base + i;
        }
        Chunk::inherit_metadata(&mut c, &block);
        Chunk::stamp_document_hashes(&mut c, &block);
        chunks.extend(c);
        let done = blocks.position() as u64;
        progress.update(STAGE, done, &format!("{} chunks", chunks.len()));
    }
    progress.finish(STAGE);
    Ok(chunks)
}

/// Two documents with one id, at positions `first` and `then`.
pub(crate) fn duplicate_id(id: &str, first: usize, then: usize) -> Error {
    Error::invalid(
        format!("document '{id}'"),
        format!("duplicate document id (documents {first} and {then})"),
    )
}

/// The documents of `source` whose ids are in `wanted`, read through once (the documents
/// of chunks split to fit an encoder, those a sync adds or replaces).
pub(crate) async fn documents_with_ids<S>(
    source: &dyn DocumentSource,
    wanted: &std::collections::HashSet<S>,
) -> Result<Vec<Document>>
where
    S: std::borrow::Borrow<str> + Eq + std::hash::Hash,
{
    let mut found = Vec::new();
    let mut blocks = DocumentBlocks::new(source);
    while let Some((_, block)) = blocks.next().await? {
        found.extend(block.into_iter().filter(|d| wanted.contains(d.id.as_str())));
    }
    Ok(found)
}

/// Make `chunks` fit the encoder's input: the default [`BoundedPassageChunker`]'s (by
/// name) are split where too long, any other chunker's are only counted, with a warning.
///
/// [`BoundedPassageChunker`]: crate::BoundedPassageChunker
pub(crate) async fn fit_to_encoder(
    chunks: Vec<Chunk>,
    documents: Docs<'_>,
    encoder: &Arc<dyn Encoder>,
    chunker: &str,
) -> Result<(Vec<Chunk>, Option<String>)> {
    if encoder.max_input_tokens().is_none() {
        return Ok((chunks, None));
    }
    let encoder = encoder.clone();
    if chunker == lprag_text::BOUNDED_PASSAGES {
        let n = chunks.len();
        let (chunks, split) = match documents {
            Docs::Slice(d) => lprag_text::split_to_fit_async(chunks, d, encoder.clone()).await?,
            Docs::Source(source) => {
                lprag_text::split_to_fit_with(chunks, encoder.clone(), |wanted| async move {
                    documents_with_ids(source, &wanted).await
                })
                .await?
            }
        };
        let note = (split > 0).then(|| {
            format!(
                "{split} of {n} passages were longer than the encoder '{}' takes ({} \
                 tokens) and were split into {} chunks that fit",
                encoder.name(),
                encoder.max_input_tokens().unwrap_or(0),
                chunks.len() - (n - split)
            )
        });
        Ok((chunks, note))
    } else {
        blocking(move || {
            let warning = lprag_text::truncation_warning(&chunks, &*encoder);
            Ok((chunks, warning))
        })
        .await
    }
}

/// Labelled `(question, gold document ids)` pairs as query nodes linked to every chunk of
/// their gold documents; an unknown id is [`Error::InvalidInput`] naming `labelled[k]`.
pub(crate) fn labelled_queries(
    chunks: &[Chunk],
    pairs: &[(String, Vec<String>)],
) -> Result<Vec<SyntheticQuery>> {
    let mut doc_chunks: std::collections::HashMap<&str, Vec<ChunkId>> = Default::default();
    for (c, ch) in chunks.iter().enumerate() {
        doc_chunks
            .entry(ch.provenance.document_id.as_str())
            .or_default()
            .push(c);
    }
    pairs
        .iter()
        .enumerate()
        .map(|(k, (question, docs))| {
            if question.trim().is_empty() {
                return Err(Error::invalid(format!("labelled[{k}]"), "empty question"));
            }
            let mut chunk_ids = Vec::new();
            for id in docs {
                let cs = doc_chunks.get(id.as_str()).ok_or_else(|| {
                    Error::invalid(
                        format!("labelled[{k}]"),
                        format!("unknown document id {id:?}"),
                    )
                })?;
                chunk_ids.extend_from_slice(cs);
            }
            if chunk_ids.is_empty() {
                return Err(Error::invalid(format!("labelled[{k}]"), "no gold document"));
            }
            Ok(SyntheticQuery {
                text: question.trim().to_string(),
                chunk_ids,
                answer: None,
            })
        })
        .collect()
}

/// Labelled training questions: `(question, gold document ids)` pairs, as the builders of
/// [`crate::LpRag`], [`crate::LesegrRag`] and [`crate::GfmRag`] take them.
pub type Labelled = Vec<(String, Vec<String>)>;

/// The inputs every builder takes the same way: chunker, encoder and progress, each
/// `None` until set (then the defaults of [`BuildInputs::chunker`] and
/// [`chunk_and_encoder`] apply).
#[derive(Clone, Default)]
pub(crate) struct BuildInputs {
    pub(crate) chunker: Option<Arc<dyn Chunker>>,
    pub(crate) encoder: Option<Arc<dyn Encoder>>,
    pub(crate) progress: Option<Arc<dyn Progress>>,
}

impl BuildInputs {
    /// The chunker set, or the default [`lprag_text::BoundedPassageChunker`].
    pub(crate) fn chunker(&self) -> Arc<dyn Chunker> {
        self.chunker
            .clone()
            .unwrap_or_else(|| Arc::new(lprag_text::BoundedPassageChunker))
    }

    /// The progress receiver set, or none.
    pub(crate) fn progress(&self) -> Arc<dyn Progress> {
        self.progress
            .clone()
            .unwrap_or_else(|| Arc::new(NoProgress))
    }

    /// The start of every peer's build: [`chunk_and_encoder`] with these inputs, then the
    /// chunks embedded (checked per batch, see [`embed_all`]) under the stage "embed
    /// chunks". Validate the configuration before calling it: nothing is paid for yet.
    pub(crate) async fn start(&self, documents: Docs<'_>) -> Result<Started> {
        let progress = self.progress();
        let at = std::time::Instant::now();
        let (chunks, texts, encoder) = chunk_and_encoder(
            &*self.chunker(),
            documents,
            self.encoder.clone(),
            &*progress,
        )
        .await?;
        let t = std::time::Instant::now();
        let chunk_emb = embed_all(&*encoder, &texts, "embed chunks", &*progress).await?;
        Ok(Started {
            embed_seconds: t.elapsed().as_secs_f64(),
            progress,
            at,
            chunks,
            texts,
            encoder,
            chunk_emb,
        })
    }
}

/// What [`BuildInputs::start`] hands a build: the chunks, their texts and embeddings, the
/// encoder chosen, the progress receiver and when the build started.
pub(crate) struct Started {
    pub(crate) progress: Arc<dyn Progress>,
    pub(crate) at: std::time::Instant,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) texts: Vec<String>,
    pub(crate) encoder: Arc<dyn Encoder>,
    /// One row per chunk, not normalised.
    pub(crate) chunk_emb: Embeddings,
    /// Seconds spent embedding the chunks.
    pub(crate) embed_seconds: f64,
}

/// The `chunker`, `encoder` and `progress` setters of a builder with a `inputs:
/// BuildInputs` field (the same three on all five builders).
macro_rules! input_setters {
    () => {
        /// Split documents with this chunker (default
        /// [`BoundedPassageChunker`](crate::BoundedPassageChunker): one chunk per document,
        /// split where it exceeds the encoder's input).
        pub fn chunker(mut self, chunker: std::sync::Arc<dyn lprag_core::Chunker>) -> Self {
            self.inputs.chunker = Some(chunker);
            self
        }

        /// Embed chunks and queries with this encoder (default:
        /// [`DefaultEncoder::choose`](crate::DefaultEncoder::choose): the sentence encoder
        /// when its weights are found, else a hashing encoder fitted on the chunks, with a
        /// warning).
        pub fn encoder(mut self, encoder: std::sync::Arc<dyn lprag_core::Encoder>) -> Self {
            self.inputs.encoder = Some(encoder);
            self
        }

        /// Receive progress reports (default: none).
        pub fn progress(mut self, progress: std::sync::Arc<dyn lprag_core::Progress>) -> Self {
            self.inputs.progress = Some(progress);
            self
        }
    };
    ($config:ty) => {
        input_setters!();

        /// Replace the configuration.
        pub fn config(mut self, config: $config) -> Self {
            self.config = config;
            self
        }
    };
}
pub(crate) use input_setters;

/// The `build_from` of a builder with a private `build_docs(self, Docs)` behind its
/// `build(&[Document])` (the peers' and the baselines' builders).
macro_rules! build_from {
    ($out:ty) => {
        /// Index the documents of `source`, read a block at a time, so that the build never
        /// holds them all (`lprag_load::DirSource` reads a folder this way,
        /// `lprag_load::JsonLinesSource` a JSON Lines file). The index is the one
        /// [`Self::build`] makes of the same documents in the same order, but that the
        /// chunker is given each block on its own (every chunker of lprag chunks each
        /// document on its own). The chunks, their texts and vectors are held as
        /// [`Self::build`] holds them: only the documents are not. Two documents with one
        /// id are [`Error::InvalidInput`](lprag_core::Error::InvalidInput), in any blocks;
        /// the source is read once, and once more for the documents of chunks too long
        /// for the encoder when there are any.
        pub async fn build_from(
            self,
            source: &dyn lprag_core::DocumentSource,
        ) -> lprag_core::Result<$out> {
            self.build_docs(crate::retrievers::common::Docs::Source(source))
                .await
        }
    };
}
pub(crate) use build_from;
