//! Chunks that fit the encoder's input.
//!
//! An encoder with an input limit ([`Encoder::max_input_tokens`], 256 tokens for MiniLM)
//! cuts longer inputs, so the end of a long chunk would never be embedded. The builders'
//! default chunker, [`BoundedPassageChunker`], makes one chunk per document and the
//! pipeline splits those that do not fit the encoder it ends up with — at sentence
//! boundaries first, then words ([`text_splitter`], sized by the encoder's own tokenizer,
//! title included). Any other chunker's chunks are left as they are, with a warning and
//! counts when some will be cut. [`TokenChunker`] is the same splitting as a [`Chunker`]
//! of its own, for a known encoder.

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Encoder, Result};

use crate::PassageChunker;
use rayon::prelude::*;
use text_splitter::{ChunkConfig, ChunkSizer, TextSplitter};

/// The builders' default chunker: one chunk per document, as [`PassageChunker`], which
/// the pipeline then splits where a chunk exceeds the input of the encoder it uses (the
/// encoder may be chosen after chunking). Pass `Arc::new(PassageChunker)` to keep whole
/// documents (cut by the encoder, with a warning).
#[derive(Debug, Clone, Copy, Default)]
pub struct BoundedPassageChunker;

/// [`Chunker::name`] of [`BoundedPassageChunker`].
pub const BOUNDED_PASSAGES: &str = "passage-bounded";

#[async_trait]
impl Chunker for BoundedPassageChunker {
    fn name(&self) -> &str {
        BOUNDED_PASSAGES
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        PassageChunker.chunk(documents).await
    }
}

/// Documents cut into passages that fit an encoder's input: one chunk per document when
/// it fits, else pieces of at most [`Encoder::max_input_tokens`] tokens (title included),
/// split at sentence boundaries where possible, then at words. With an encoder that has
/// no limit it is [`PassageChunker`].
#[derive(Clone)]
pub struct TokenChunker {
    encoder: Arc<dyn Encoder>,
}

impl std::fmt::Debug for TokenChunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenChunker")
            .field("encoder", &self.encoder.name())
            .field("max_input_tokens", &self.encoder.max_input_tokens())
            .finish()
    }
}

impl TokenChunker {
    /// Chunks sized for `encoder`.
    pub fn new(encoder: Arc<dyn Encoder>) -> Self {
        Self { encoder }
    }
}

#[async_trait]
impl Chunker for TokenChunker {
    fn name(&self) -> &str {
        "token-passage"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!(
            "{} {} {:?} {:?}",
            self.encoder.name(),
            self.encoder.dimension(),
            self.encoder.fingerprint(),
            self.encoder.max_input_tokens()
        ))
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        let chunks = PassageChunker.chunk(documents).await?;
        Ok(split_to_fit_async(chunks, documents, self.encoder.clone())
            .await?
            .0)
    }
}

/// Token counts by the encoder, as it embeds a chunk: the title, a newline, the text.
struct EncoderSizer<'a> {
    encoder: &'a dyn Encoder,
    title: &'a str,
}

impl ChunkSizer for EncoderSizer<'_> {
    fn size(&self, piece: &str) -> usize {
        let text = if self.title.is_empty() {
            piece.to_string()
        } else {
            format!("{}\n{piece}", self.title)
        };
        self.encoder.count_tokens(&text).unwrap_or(0)
    }
}

/// How many of `chunks` exceed the encoder's input, and the longest one's tokens (`(0, 0)`
/// for an encoder without a limit).
pub fn over_long(chunks: &[Chunk], encoder: &dyn Encoder) -> (usize, usize) {
    let Some(max) = encoder.max_input_tokens() else {
        return (0, 0);
    };
    chunks
        .par_iter()
        .filter_map(|c| {
            encoder
                .count_tokens(&c.embedding_text())
                .filter(|&t| t > max)
        })
        .fold(|| (0, 0), |(n, m), t| (n + 1, m.max(t)))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)))
}

/// Split the chunks that exceed the encoder's input into pieces that fit (ids renumbered,
/// spans inside the source document where the chunk's text is a slice of it); returns the
/// chunks and how many were split.
pub fn split_to_fit(
    chunks: Vec<Chunk>,
    documents: &[Document],
    encoder: &dyn Encoder,
) -> (Vec<Chunk>, usize) {
    let long = too_long(&chunks, encoder);
    split_marked(chunks, &long, documents, encoder)
}

/// [`split_to_fit`] on blocking threads, for async callers: only the documents of the
/// chunks to split are copied to those threads (a copy of every document, as a
/// `'static` closure over all of them would need, is gigabytes at a million passages).
pub async fn split_to_fit_async(
    chunks: Vec<Chunk>,
    documents: &[Document],
    encoder: Arc<dyn Encoder>,
) -> Result<(Vec<Chunk>, usize)> {
    split_to_fit_with(chunks, encoder, |wanted| async move {
        Ok(documents
            .iter()
            .filter(|d| wanted.contains(d.id.as_str()))
            .cloned()
            .collect())
    })
    .await
}

/// [`split_to_fit_async`] for callers that do not hold the documents: the chunks' tokens
/// are counted first, then `documents_of` is asked once, only when some chunk is too
/// long, for the documents with the given ids (those of the chunks to split; more are
/// ignored, a missing one leaves its chunks cut without their spans). A build reading its
/// documents from a `DocumentSource` reads them again here.
pub async fn split_to_fit_with<F, Fut>(
    chunks: Vec<Chunk>,
    encoder: Arc<dyn Encoder>,
    documents_of: F,
) -> Result<(Vec<Chunk>, usize)>
where
    F: FnOnce(std::collections::HashSet<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Document>>>,
{
    if encoder.max_input_tokens().is_none() {
        return Ok((chunks, 0));
    }
    let enc = encoder.clone();
    let (chunks, long) = lprag_core::blocking(move || {
        let long = too_long(&chunks, &*enc);
        Ok((chunks, long))
    })
    .await?;
    if !long.contains(&true) {
        return Ok((chunks, 0));
    }
    let wanted: std::collections::HashSet<String> = chunks
        .iter()
        .zip(&long)
        .filter(|(_, &l)| l)
        .map(|(c, _)| c.provenance.document_id.clone())
        .collect();
    let docs = documents_of(wanted).await?;
    lprag_core::blocking(move || Ok(split_marked(chunks, &long, &docs, &*encoder))).await
}

/// Which of `chunks` exceed the encoder's input (none for an encoder without a limit).
fn too_long(chunks: &[Chunk], encoder: &dyn Encoder) -> Vec<bool> {
    let Some(max) = encoder.max_input_tokens() else {
        return vec![false; chunks.len()];
    };
    chunks
        .par_iter()
        .map(|c| {
            encoder
                .count_tokens(&c.embedding_text())
                .is_some_and(|t| t > max)
        })
        .collect()
}

/// [`split_to_fit`] of the chunks marked in `too_long`; `documents` need only hold theirs.
fn split_marked(
    chunks: Vec<Chunk>,
    too_long: &[bool],
    documents: &[Document],
    encoder: &dyn Encoder,
) -> (Vec<Chunk>, usize) {
    let split = too_long.iter().filter(|&&t| t).count();
    let Some(max) = encoder.max_input_tokens().filter(|_| split > 0) else {
        return (chunks, 0);
    };
    let texts: std::collections::HashMap<&str, &str> = documents
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    let mut out = Vec::with_capacity(chunks.len() + split);
    for (c, &long) in chunks.into_iter().zip(too_long) {
        if !long {
            out.push(Chunk { id: out.len(), ..c });
            continue;
        }
        let sizer = EncoderSizer {
            encoder,
            title: &c.provenance.title,
        };
        let splitter = TextSplitter::new(ChunkConfig::new(max).with_sizer(sizer));
        // Spans stay in document coordinates when the chunk is a slice of its document.
        let in_doc = texts
            .get(c.provenance.document_id.as_str())
            .and_then(|t| t.get(c.provenance.span.clone()))
            == Some(c.text.as_str());
        let pieces: Vec<(usize, String)> = splitter
            .chunk_indices(&c.text)
            .map(|(offset, piece)| (offset, piece.to_string()))
            .collect();
        for (offset, piece) in pieces {
            let mut provenance = c.provenance.clone();
            if in_doc {
                let start = c.provenance.span.start + offset;
                provenance.span = start..start + piece.len();
            }
            out.push(Chunk {
                id: out.len(),
                text: piece,
                provenance,
                metadata: c.metadata.clone(),
            });
        }
    }
    (out, split)
}

/// The warning for chunks another chunker made too long for the encoder, if any.
pub fn truncation_warning(chunks: &[Chunk], encoder: &dyn Encoder) -> Option<String> {
    let (n, longest) = over_long(chunks, encoder);
    (n > 0).then(|| {
        format!(
            "{n} of {} chunks are longer than the encoder '{}' takes ({} tokens; the \
             longest has {longest}) and will be cut when embedded: their ends are never \
             seen. Use lprag::TokenChunker or a chunker that bounds chunks by tokens.",
            chunks.len(),
            encoder.name(),
            encoder.max_input_tokens().unwrap_or(0)
        )
    })
}
