//! LP-RAG's LLM chunker (§3.1, C-PROMPT in Box D.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Error, Provenance, Result, SentenceChunker};

use crate::jobs::{collect, parse_error, run_all, settings_methods, Settings};
use crate::parse::chunk_statements;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// Splits each document into atomic, self-contained statements with an LLM (pronouns
/// resolved, as the C-PROMPT asks). One call per non-empty document, several in flight.
///
/// Statements are rewritten text, so their [`Provenance::span`] is the span of the
/// document they came from: the exact substring when the statement appears verbatim,
/// else the sentence sharing the most words with it, else the whole document.
///
/// A document whose answer cannot be parsed fails with [`LlmError::Parse`] (carrying the
/// raw answer) instead of silently contributing no chunk; all other documents are still
/// processed, so with a [`crate::CachedChat`] a rerun pays only for the failures.
pub struct LlmChunker {
    settings: Settings,
}

impl LlmChunker {
    /// A chunker on `model` with the paper's prompt, temperature 0, 8 documents in flight.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model),
        }
    }

    settings_methods!("chunking");

    /// The request sent for one document's text.
    pub fn request(&self, text: &str) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        Ok(self.settings.request(vec![
            ChatMessage::system(p.chunk_system.render(&[])?),
            ChatMessage::user(p.chunk_user.render(&[("paragraph", text)])?),
        ]))
    }

    async fn statements(&self, doc: &Document) -> std::result::Result<Vec<String>, LlmError> {
        let response = self
            .settings
            .call("chunking", &self.request(&doc.text)?)
            .await?;
        chunk_statements(&response.content).map_err(|reason| {
            parse_error(
                format!("chunk list for document `{}`", doc.id),
                reason,
                &response,
            )
        })
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
            .map_err(|e| Error::backend(stage, e))?;
        let splitter = SentenceChunker::default();
        let mut chunks = Vec::new();
        for (doc, statements) in docs.iter().zip(per_doc) {
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
                });
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
