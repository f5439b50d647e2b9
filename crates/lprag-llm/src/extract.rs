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
use lprag_text::CooccurrenceExtractor;

use crate::jobs::{collect, fallback_items, run_all, settings_methods, Parsed, Settings};
use crate::parse::openie;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// A [`TripleExtractor`] backed by a [`ChatModel`] with the OpenIE prompt.
///
/// A chunk whose answer cannot be parsed, even after the model was asked once more
/// ([`LlmTripleExtractor::parse_retries`]), is handled by the offline fallback extractor
/// ([`CooccurrenceExtractor`] by default, [`LlmTripleExtractor::fallback`] to change it),
/// counted in [`crate::StageUsage::fallbacks`] under `"openie"` and reported in one
/// warning; with [`crate::OnUnparseable::Fail`] the stage fails instead.
pub struct LlmTripleExtractor {
    settings: Settings,
    fallback: Arc<dyn TripleExtractor>,
}

impl LlmTripleExtractor {
    /// OpenIE on `model`: temperature 0, 8 calls in flight, at most 1,024 tokens per
    /// answer.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 1024),
            fallback: Arc::new(CooccurrenceExtractor::default()),
        }
    }

    settings_methods!("openie");

    /// Extract from chunks whose answer cannot be parsed with this extractor. Default
    /// [`CooccurrenceExtractor::default`].
    pub fn fallback(mut self, extractor: Arc<dyn TripleExtractor>) -> Self {
        self.fallback = extractor;
        self
    }

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
                self.settings
                    .call_parsed(
                        "openie",
                        self.request(&chunks[i])?,
                        || format!("OpenIE of chunk {i}"),
                        |raw| {
                            openie(raw).map(|o| Extraction {
                                entities: o.entities,
                                triples: o
                                    .triples
                                    .into_iter()
                                    .map(|(s, r, o)| Triple::new(s, r, o))
                                    .collect(),
                            })
                        },
                    )
                    .await
            },
        )
        .await;
        let per_chunk =
            collect(stage, results, |i| format!("chunk {i}")).map_err(|e| e.into_core(stage))?;
        let offline = format!("the offline extractor `{}`", self.fallback.name());
        let failed = fallback_items(
            &self.settings,
            stage,
            "openie",
            "chunks",
            &offline,
            &per_chunk,
        );
        let subset: Vec<Chunk> = failed.iter().map(|&i| chunks[i].clone()).collect();
        let mut offline = if subset.is_empty() {
            Vec::new()
        } else {
            self.fallback.extract(&subset).await?
        }
        .into_iter();
        let mut out = Vec::with_capacity(chunks.len());
        for outcome in per_chunk {
            out.push(match outcome {
                Parsed::Read(e) => e,
                Parsed::Unreadable(_) => offline.next().ok_or_else(|| {
                    Error::backend(
                        stage,
                        format!(
                            "the fallback extractor `{}` returned fewer extractions than chunks",
                            self.fallback.name()
                        ),
                    )
                })?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatResponse;
    use lprag_core::{Chunker, Document};
    use lprag_text::PassageChunker;
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
        // Chunk 1's answer is unreadable (asked twice): the co-occurrence extractor
        // handles it, counted.
        let meter = Arc::new(crate::TokenMeter::new());
        let x = LlmTripleExtractor::new(model.clone()).with_meter(meter.clone());
        let both = x.extract(&chunks).await.unwrap();
        assert_eq!(both[0], ok[0]);
        let offline = CooccurrenceExtractor::default()
            .extract(&chunks[1..])
            .await
            .unwrap();
        assert_eq!(both[1], offline[0]);
        assert_eq!(model.0.load(Ordering::SeqCst), 4);
        assert_eq!(meter.snapshot()["openie"].fallbacks, 1);
        // Strict: the stage fails, naming the chunk.
        let err = LlmTripleExtractor::new(model.clone())
            .on_unparseable(crate::OnUnparseable::Fail)
            .parse_retries(0)
            .extract(&chunks)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("chunk 1") && err.contains("1 of 2"), "{err}");
        assert_eq!(model.0.load(Ordering::SeqCst), 6);
    }
}
