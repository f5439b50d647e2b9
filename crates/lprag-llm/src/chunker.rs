//! LP-RAG's LLM chunker (§3.1, C-PROMPT in Box D.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Error, Provenance, Result};
use lprag_text::SentenceChunker;

use crate::jobs::{collect, fallback_items, run_all, settings_methods, Parsed, Settings};
use crate::parse::{chunk_statements, drop_prompt_echoes, drop_ungrounded};

/// Share of a statement's content words that must occur in its document
/// ([`drop_ungrounded`]): statements are rewrites, so some new words are expected.
const GROUNDED_FRACTION: f32 = 0.5;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// Splits each document into atomic, self-contained statements with an LLM (pronouns
/// resolved, as the C-PROMPT asks). One call per non-empty document, several in flight.
///
/// Statements are rewritten text, so their [`Provenance::span`] is the span of the
/// document they came from: the exact substring when the statement appears verbatim,
/// else the sentence sharing the most words with it, else the whole document.
///
/// A document whose answer cannot be parsed, even after the model was asked once more
/// ([`LlmChunker::parse_retries`]), is split by the offline fallback chunker instead
/// ([`SentenceChunker`] by default, [`LlmChunker::fallback`] to change it), counted in
/// [`crate::StageUsage::fallbacks`] under `"chunking"` and reported in one warning; with
/// [`crate::OnUnparseable::Fail`] it fails the stage with [`LlmError::Parse`] (carrying
/// the raw answer) instead. All other documents are still processed either way, so with
/// a [`crate::CachedChat`] a rerun pays only for what failed.
pub struct LlmChunker {
    settings: Settings,
    fallback: Arc<dyn Chunker>,
}

impl LlmChunker {
    /// A chunker on `model` with the paper's prompt, temperature 0, 8 documents in flight,
    /// at most 1,024 tokens per answer.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 1024),
            fallback: Arc::new(SentenceChunker::default()),
        }
    }

    settings_methods!("chunking");

    /// Split documents whose answer cannot be parsed with this chunker. Default
    /// [`SentenceChunker::default`].
    pub fn fallback(mut self, chunker: Arc<dyn Chunker>) -> Self {
        self.fallback = chunker;
        self
    }

    /// The request sent for one document's text.
    pub fn request(&self, text: &str) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        Ok(self.settings.request(vec![
            ChatMessage::system(p.chunk_system.render(&[])?),
            ChatMessage::user(p.chunk_user.render(&[("paragraph", text)])?),
        ]))
    }

    async fn statements(
        &self,
        doc: &Document,
    ) -> std::result::Result<Parsed<Vec<String>>, LlmError> {
        let request = self.request(&doc.text)?;
        let system = request.messages[0].content.clone();
        self.settings
            .call_parsed(
                "chunking",
                request,
                || format!("chunk list for document `{}`", doc.id),
                |raw| {
                    let statements = chunk_statements(raw)?;
                    let statements = drop_prompt_echoes(statements, &system)?;
                    drop_ungrounded(statements, &doc.text, GROUNDED_FRACTION)
                },
            )
            .await
    }
}

/// Where in `text` a (possibly rewritten) statement came from.
fn locate(
    statement: &str,
    text: &str,
    sentences: &[std::ops::Range<usize>],
) -> std::ops::Range<usize> {
    if let Some(start) = text.find(statement) {
        return start..start + statement.len();
    }
    let words = |s: &str| -> std::collections::HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let target = words(statement);
    let best = sentences
        .iter()
        .map(|r| (target.intersection(&words(&text[r.clone()])).count(), r))
        .filter(|(n, _)| *n > 0)
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.start.cmp(&a.1.start)));
    match best {
        Some((_, r)) => r.clone(),
        None => 0..text.len(),
    }
}

#[async_trait]
impl Chunker for LlmChunker {
    fn name(&self) -> &str {
        "llm-chunker"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!(
            "{} fallback={}:{:?}",
            self.settings.fingerprint(),
            self.fallback.name(),
            self.fallback.fingerprint()
        ))
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        let docs: Vec<&Document> = documents
            .iter()
            .filter(|d| !d.text.trim().is_empty())
            .collect();
        if docs.is_empty() {
            return Err(Error::EmptyCorpus(
                "every document is empty or whitespace".into(),
            ));
        }
        let stage = "LLM chunking";
        let s = &self.settings;
        let results = run_all(docs.len(), s.concurrency, stage, &*s.progress, |i| {
            self.statements(docs[i])
        })
        .await;
        let per_doc = collect(stage, results, |i| format!("document `{}`", docs[i].id))
            .map_err(|e| e.into_core(stage))?;
        let offline = format!("the offline chunker `{}`", self.fallback.name());
        fallback_items(s, stage, "chunking", "documents", &offline, &per_doc);
        let splitter = SentenceChunker::default();
        let mut chunks = Vec::new();
        for (doc, outcome) in docs.iter().zip(per_doc) {
            match outcome {
                Parsed::Read(statements) => {
                    let sentences = splitter.split(&doc.text);
                    for s in statements {
                        chunks.push(Chunk {
                            id: chunks.len(),
                            provenance: Provenance {
                                document_id: doc.id.clone(),
                                title: doc.title.clone(),
                                span: locate(&s, &doc.text, &sentences),
                            },
                            text: s,
                            metadata: doc.metadata.clone(),
                        });
                    }
                }
                Parsed::Unreadable(_) => {
                    let own = self.fallback.chunk(std::slice::from_ref(*doc)).await?;
                    for c in own {
                        chunks.push(Chunk {
                            id: chunks.len(),
                            ..c
                        });
                    }
                }
            }
        }
        Ok(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_located_in_their_document() {
        let text = "Marie Curie was born in Warsaw. She won two Nobel Prizes.";
        let sentences = SentenceChunker::default().split(text);
        assert_eq!(
            locate("Marie Curie was born in Warsaw.", text, &sentences),
            0..31
        );
        let r = locate("Marie Curie won two Nobel Prizes.", text, &sentences);
        assert_eq!(&text[r], "She won two Nobel Prizes.");
        assert_eq!(locate("Unrelated.", text, &sentences), 0..text.len());
    }
}
