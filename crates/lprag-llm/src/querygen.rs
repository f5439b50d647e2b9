//! Synthetic queries from an LLM: LP-RAG's S-PROMPT batches (§3.2, Box D.3) or QCG-RAG's
//! Doc2Query (query, answer) pairs (Prompt C.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, ChunkId, Error, QueryGenerator, Result, SyntheticQuery};

use crate::jobs::{collect, parse_error, run_all, settings_methods, Settings};
use crate::parse::{grouped_questions, query_answer_pairs};
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// Which paper's query generation to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMode {
    /// LP-RAG: one S-PROMPT call per batch of chunks (A.2 batches, n_B = 2 questions per
    /// chunk as the prompt asks); every question is linked to every chunk of its batch.
    LpRag,
    /// QCG-RAG: one Doc2Query call per chunk, `num_queries` (query, answer) pairs each,
    /// linked to that chunk, with the answer kept.
    Doc2Query {
        /// Pairs asked for per chunk (the paper: 20).
        num_queries: usize,
    },
}

/// A [`QueryGenerator`] backed by a [`ChatModel`].
pub struct LlmQueryGenerator {
    settings: Settings,
    mode: QueryMode,
}

impl LlmQueryGenerator {
    /// LP-RAG's S-PROMPT generator on `model` (temperature 0, 8 calls in flight).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model),
            mode: QueryMode::LpRag,
        }
    }

    /// QCG-RAG's Doc2Query generator on `model`: 20 pairs per chunk.
    pub fn doc2query(model: Arc<dyn ChatModel>) -> Self {
        Self::new(model).mode(QueryMode::Doc2Query { num_queries: 20 })
    }

    /// Choose the mode.
    pub fn mode(mut self, mode: QueryMode) -> Self {
        self.mode = mode;
        self
    }

    settings_methods!("queries");

    /// The S-PROMPT request for a batch of chunk texts.
    pub fn batch_request(&self, texts: &[&str]) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let mut bag = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let index = (i + 1).to_string();
            bag.push(p.query_chunk.render(&[("index", &index), ("text", t)])?);
        }
        Ok(self.settings.request(vec![
            ChatMessage::system(p.query_system.render(&[])?),
            ChatMessage::user(p.query_user.render(&[("chunks", &bag.join("\n"))])?),
        ]))
    }

    /// The Doc2Query request for one chunk.
    pub fn doc2query_request(
        &self,
        text: &str,
        num_queries: usize,
    ) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let n = num_queries.to_string();
        Ok(self.settings.request(vec![
            ChatMessage::system(p.doc2query_system.render(&[("num_queries", &n)])?),
            ChatMessage::user(p.doc2query_user.render(&[("chunk", text)])?),
        ]))
    }
}

fn check_batches(chunks: &[Chunk], batches: &[Vec<ChunkId>]) -> Result<()> {
    for (b, batch) in batches.iter().enumerate() {
        if batch.is_empty() {
            return Err(Error::invalid(format!("batches[{b}]"), "empty batch"));
        }
        if let Some(&c) = batch.iter().find(|&&c| c >= chunks.len()) {
            return Err(Error::invalid(
                format!("batches[{b}]"),
                format!("chunk id {c} out of range ({} chunks)", chunks.len()),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl QueryGenerator for LlmQueryGenerator {
    fn name(&self) -> &str {
        match self.mode {
            QueryMode::LpRag => "llm-queries",
            QueryMode::Doc2Query { .. } => "llm-doc2query",
        }
    }

    async fn generate(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>> {
        check_batches(chunks, batches)?;
        match self.mode {
            QueryMode::LpRag => {
                let stage = "LLM queries";
                let results = run_all(
                    batches.len(),
                    self.settings.concurrency,
                    stage,
                    &*self.settings.progress,
                    |b| {
                        let batch = &batches[b];
                        async move {
                            let texts: Vec<&str> =
                                batch.iter().map(|&c| chunks[c].text.as_str()).collect();
                            let response = self
                                .settings
                                .call("queries", &self.batch_request(&texts)?)
                                .await?;
                            grouped_questions(&response.content)
                                .map(|qs| {
                                    qs.into_iter()
                                        .map(|(_, q)| SyntheticQuery {
                                            text: q,
                                            chunk_ids: batch.clone(),
                                            answer: None,
                                        })
                                        .collect::<Vec<_>>()
                                })
                                .map_err(|r| {
                                    parse_error(format!("questions for batch {b}"), r, &response)
                                })
                        }
                    },
                )
                .await;
                let per_batch = collect(stage, results, |b| {
                    format!("batch {b} (chunks {:?})", batches[b])
                })
                .map_err(|e| Error::backend(stage, e))?;
                Ok(per_batch.into_iter().flatten().collect())
            }
            QueryMode::Doc2Query { num_queries } => {
                let stage = "LLM Doc2Query";
                let mut seen = vec![false; chunks.len()];
                let order: Vec<ChunkId> = batches
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|&c| !std::mem::replace(&mut seen[c], true))
                    .collect();
                let results = run_all(
                    order.len(),
                    self.settings.concurrency,
                    stage,
                    &*self.settings.progress,
                    |i| {
                        let c = order[i];
                        async move {
                            let request = self.doc2query_request(&chunks[c].text, num_queries)?;
                            let response = self.settings.call("queries", &request).await?;
                            query_answer_pairs(&response.content)
                                .map(|pairs| {
                                    pairs
                                        .into_iter()
                                        .map(|(q, a)| SyntheticQuery {
                                            text: q,
                                            chunk_ids: vec![c],
                                            answer: (!a.is_empty()).then_some(a),
                                        })
                                        .collect::<Vec<_>>()
                                })
                                .map_err(|r| {
                                    parse_error(
                                        format!("Doc2Query pairs for chunk {c}"),
                                        r,
                                        &response,
                                    )
                                })
                        }
                    },
                )
                .await;
                let per_chunk = collect(stage, results, |i| format!("chunk {}", order[i]))
                    .map_err(|e| Error::backend(stage, e))?;
                Ok(per_chunk.into_iter().flatten().collect())
            }
        }
    }
}
