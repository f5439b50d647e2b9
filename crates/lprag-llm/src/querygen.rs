//! Synthetic queries from an LLM: LP-RAG's S-PROMPT batches (§3.2, Box D.3) or QCG-RAG's
//! Doc2Query (query, answer) pairs (Prompt C.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Error, NoProgress, Progress, QueryGenerator, Result, SyntheticQuery,
};

use crate::jobs::{collect, run_all};
use crate::parse::{grouped_questions, query_answer_pairs};
use crate::prompts::Prompts;
use crate::{ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmError, TokenMeter};

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
    model: Arc<dyn ChatModel>,
    prompts: Arc<Prompts>,
    mode: QueryMode,
    meter: Option<Arc<TokenMeter>>,
    progress: Arc<dyn Progress>,
    concurrency: usize,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
}

impl LlmQueryGenerator {
    /// LP-RAG's S-PROMPT generator on `model` (temperature 0, 8 calls in flight).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            prompts: Arc::new(Prompts::default()),
            mode: QueryMode::LpRag,
            meter: None,
            progress: Arc::new(NoProgress),
            concurrency: 8,
            temperature: Some(0.0),
            max_tokens: None,
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

    /// Use these prompts (validated).
    pub fn with_prompts(mut self, prompts: Arc<Prompts>) -> std::result::Result<Self, LlmError> {
        prompts.validate()?;
        self.prompts = prompts;
        Ok(self)
    }

    /// Count tokens under the stage `"queries"`.
    pub fn with_meter(mut self, meter: Arc<TokenMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Report progress per call.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// Calls in flight at once.
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

    /// The S-PROMPT request for a batch of chunk texts.
    pub fn batch_request(&self, texts: &[&str]) -> std::result::Result<ChatRequest, LlmError> {
        let mut bag = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let index = (i + 1).to_string();
            bag.push(
                self.prompts
                    .query_chunk
                    .render(&[("index", &index), ("text", t)])?,
            );
        }
        Ok(ChatRequest {
            messages: vec![
                ChatMessage::system(self.prompts.query_system.render(&[])?),
                ChatMessage::user(
                    self.prompts
                        .query_user
                        .render(&[("chunks", &bag.join("\n"))])?,
                ),
            ],
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        })
    }

    /// The Doc2Query request for one chunk.
    pub fn doc2query_request(
        &self,
        text: &str,
        num_queries: usize,
    ) -> std::result::Result<ChatRequest, LlmError> {
        let n = num_queries.to_string();
        Ok(ChatRequest {
            messages: vec![
                ChatMessage::system(
                    self.prompts
                        .doc2query_system
                        .render(&[("num_queries", &n)])?,
                ),
                ChatMessage::user(self.prompts.doc2query_user.render(&[("chunk", text)])?),
            ],
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        })
    }

    async fn call(&self, request: ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
        let response = self.model.complete(&request).await?;
        if let Some(m) = &self.meter {
            m.record("queries", &response);
        }
        Ok(response)
    }

    fn parse_error(what: String, reason: String, response: &ChatResponse) -> LlmError {
        LlmError::Parse {
            what,
            reason: if response.truncated() {
                format!("{reason} (the answer hit the token limit)")
            } else {
                reason
            },
            raw: response.content.clone(),
        }
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
                    self.concurrency,
                    stage,
                    &*self.progress,
                    |b| {
                        let batch = &batches[b];
                        async move {
                            let texts: Vec<&str> =
                                batch.iter().map(|&c| chunks[c].text.as_str()).collect();
                            let response = self.call(self.batch_request(&texts)?).await?;
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
                                    Self::parse_error(
                                        format!("questions for batch {b}"),
                                        r,
                                        &response,
                                    )
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
                let results = run_all(order.len(), self.concurrency, stage, &*self.progress, |i| {
                    let c = order[i];
                    async move {
                        let response = self
                            .call(self.doc2query_request(&chunks[c].text, num_queries)?)
                            .await?;
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
                                Self::parse_error(
                                    format!("Doc2Query pairs for chunk {c}"),
                                    r,
                                    &response,
                                )
                            })
                    }
                })
                .await;
                let per_chunk = collect(stage, results, |i| format!("chunk {}", order[i]))
                    .map_err(|e| Error::backend(stage, e))?;
                Ok(per_chunk.into_iter().flatten().collect())
            }
        }
    }
}
