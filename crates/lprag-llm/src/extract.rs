//! GFM-RAG's KG-index extraction with an LLM (§3.1): OpenIE named entities and triples,
//! one call per chunk, behind [`lprag_core::TripleExtractor`].
//!
//! The prompt ([`crate::Prompts`]' `openie_*` templates) follows HippoRAG's OpenIE, which
//! GFM-RAG uses, merged into one call that answers JSON; [`crate::parse::openie`] reads it.
//! Wrap the model in a [`crate::CachedChat`] so a rerun after a failure pays only for the
//! chunks that failed.

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Error, Extraction, Result, Triple, TripleExtractor};

use crate::jobs::{collect, parse_error, run_all, settings_methods, Settings};
use crate::parse::openie;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// A [`TripleExtractor`] backed by a [`ChatModel`] with the OpenIE prompt.
pub struct LlmTripleExtractor {
    settings: Settings,
}

impl LlmTripleExtractor {
    /// OpenIE on `model`: temperature 0, 8 calls in flight.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model),
        }
    }

    settings_methods!("openie");

    /// The OpenIE request for one chunk.
    pub fn request(&self, chunk: &Chunk) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        Ok(self.settings.request(vec![
            ChatMessage::system(p.openie_system.render(&[])?),
            ChatMessage::user(p.openie_user.render(&[
                ("title", chunk.provenance.title.as_str()),
                ("passage", chunk.text.as_str()),
            ])?),
        ]))
    }
}

#[async_trait]
impl TripleExtractor for LlmTripleExtractor {
    fn name(&self) -> &str {
        "llm-openie"
    }

    async fn extract(&self, chunks: &[Chunk]) -> Result<Vec<Extraction>> {
        let stage = "LLM OpenIE";
        let results = run_all(
            chunks.len(),
            self.settings.concurrency,
            stage,
            &*self.settings.progress,
            |i| async move {
                let response = self
                    .settings
                    .call("openie", &self.request(&chunks[i])?)
                    .await?;
                openie(&response.content)
                    .map(|o| Extraction {
                        entities: o.entities,
                        triples: o
                            .triples
                            .into_iter()
                            .map(|(s, r, o)| Triple::new(s, r, o))
                            .collect(),
                    })
                    .map_err(|r| parse_error(format!("OpenIE of chunk {i}"), r, &response))
            },
        )
        .await;
        collect(stage, results, |i| format!("chunk {i}")).map_err(|e| Error::backend(stage, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatResponse;
    use lprag_core::{Chunker, Document, PassageChunker};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers OpenIE for chunk texts containing "Radio", garbage otherwise.
    struct Fake(AtomicUsize);

    #[async_trait]
    impl ChatModel for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        async fn complete(&self, r: &ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let user = &r.messages[1].content;
            Ok(ChatResponse::text(if user.contains("Radio") {
                r#"{"named_entities": ["Radio City", "India"], "triples": [["Radio City", "located in", "India"]]}"#
            } else {
                "I cannot help with that."
            }))
        }
    }

    #[tokio::test]
    async fn extracts_per_chunk_and_names_the_failed_chunk() {
        let docs = [
            Document::new(
                "a",
                "Radio City",
                "Radio City is India's first private radio station.",
            ),
            Document::new("b", "Other", "Nothing to see."),
        ];
        let chunks = PassageChunker.chunk(&docs).await.unwrap();
        let model = Arc::new(Fake(AtomicUsize::new(0)));
        let x = LlmTripleExtractor::new(model.clone());
        let req = x.request(&chunks[0]).unwrap();
        assert!(req.messages[0].content.contains("named_entities"));
        assert!(req.messages[1]
            .content
            .starts_with("Title: Radio City\nPassage:\nRadio City is"));
        let ok = x.extract(&chunks[..1]).await.unwrap();
        assert_eq!(ok[0].entities, vec!["Radio City", "India"]);
        assert_eq!(
            ok[0].triples,
            vec![Triple::new("Radio City", "located in", "India")]
        );
        let err = x.extract(&chunks).await.unwrap_err().to_string();
        assert!(err.contains("chunk 1") && err.contains("1 of 2"), "{err}");
        assert_eq!(model.0.load(Ordering::SeqCst), 3);
    }
}
