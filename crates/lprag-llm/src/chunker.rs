//! LP-RAG's LLM chunker (§3.1, C-PROMPT in Box D.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, Chunker, Document, Error, NoProgress, Progress, Provenance, Result, SentenceChunker,
};

use crate::jobs::{collect, run_all};
use crate::parse::chunk_statements;
use crate::prompts::Prompts;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError, TokenMeter};

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
    model: Arc<dyn ChatModel>,
    prompts: Arc<Prompts>,
    meter: Option<Arc<TokenMeter>>,
    progress: Arc<dyn Progress>,
    concurrency: usize,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
}

impl LlmChunker {
    /// A chunker on `model` with the paper's prompt, temperature 0, 8 documents in flight.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            prompts: Arc::new(Prompts::default()),
            meter: None,
            progress: Arc::new(NoProgress),
            concurrency: 8,
            temperature: Some(0.0),
            max_tokens: None,
        }
    }

    /// Use these prompts (validated: a template missing `{{paragraph}}` is refused).
    pub fn with_prompts(mut self, prompts: Arc<Prompts>) -> std::result::Result<Self, LlmError> {
        prompts.validate()?;
        self.prompts = prompts;
        Ok(self)
    }

    /// Count tokens under the stage `"chunking"`.
    pub fn with_meter(mut self, meter: Arc<TokenMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Report progress per document.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// Documents in flight at once (the HTTP client has its own limit too).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sampling temperature (`None`: the backend's default).
    pub fn temperature(mut self, t: Option<f32>) -> Self {
        self.temperature = t;
        self
    }

    /// Token limit per answer (`None`: the backend's default).
    pub fn max_tokens(mut self, n: Option<u32>) -> Self {
        self.max_tokens = n;
        self
    }

    /// The request sent for one document's text.
    pub fn request(&self, text: &str) -> std::result::Result<ChatRequest, LlmError> {
        Ok(ChatRequest {
            messages: vec![
                ChatMessage::system(self.prompts.chunk_system.render(&[])?),
                ChatMessage::user(self.prompts.chunk_user.render(&[("paragraph", text)])?),
            ],
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        })
    }

    async fn statements(&self, doc: &Document) -> std::result::Result<Vec<String>, LlmError> {
        let response = self.model.complete(&self.request(&doc.text)?).await?;
        if let Some(m) = &self.meter {
            m.record("chunking", &response);
        }
        chunk_statements(&response.content).map_err(|reason| LlmError::Parse {
            what: format!("chunk list for document `{}`", doc.id),
            reason: if response.truncated() {
                format!("{reason} (the answer hit the token limit)")
            } else {
                reason
            },
            raw: response.content.clone(),
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
        let results = run_all(docs.len(), self.concurrency, stage, &*self.progress, |i| {
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
