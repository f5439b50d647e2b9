//! Answering from retrieved chunks: COMBINE(q, C_q) with the D.2 prompt (LP-RAG §3.5).

use std::sync::Arc;

use lprag_core::{ChunkId, ScoredChunk};
use serde::{Deserialize, Serialize};

use crate::prompts::Prompts;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError, TokenMeter, Usage};

/// An LLM answer and what it was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The model's answer.
    pub text: String,
    /// The chunks shown to the model, in the order shown (descending score).
    pub chunk_ids: Vec<ChunkId>,
    /// Tokens spent, when the backend reported them.
    pub usage: Option<Usage>,
}

/// Answers a question from retrieved chunks.
pub struct AnswerGenerator {
    model: Arc<dyn ChatModel>,
    prompts: Arc<Prompts>,
    meter: Option<Arc<TokenMeter>>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
}

impl AnswerGenerator {
    /// The D.2 prompt on `model`, temperature 0.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            prompts: Arc::new(Prompts::default()),
            meter: None,
            temperature: Some(0.0),
            max_tokens: None,
        }
    }

    /// Use these prompts (validated).
    pub fn with_prompts(mut self, prompts: Arc<Prompts>) -> Result<Self, LlmError> {
        prompts.validate()?;
        self.prompts = prompts;
        Ok(self)
    }

    /// Count tokens under the stage `"answer"`.
    pub fn with_meter(mut self, meter: Arc<TokenMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Token limit per answer.
    pub fn max_tokens(mut self, n: Option<u32>) -> Self {
        self.max_tokens = n;
        self
    }

    /// COMBINE: the request for `query` over `chunks`, which are shown in descending score
    /// order whatever order they come in. Also returns the ids in the order shown.
    pub fn request(
        &self,
        query: &str,
        chunks: &[ScoredChunk],
    ) -> Result<(ChatRequest, Vec<ChunkId>), LlmError> {
        let mut sorted: Vec<&ScoredChunk> = chunks.iter().collect();
        sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut bag = Vec::with_capacity(sorted.len());
        for (i, c) in sorted.iter().enumerate() {
            let rank = (i + 1).to_string();
            let score = format!("{:.2}", c.score);
            bag.push(self.prompts.answer_chunk.render(&[
                ("rank", &rank),
                ("score", &score),
                ("text", &c.chunk.text),
            ])?);
        }
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(self.prompts.answer_system.render(&[])?),
                ChatMessage::user(
                    self.prompts
                        .answer_user
                        .render(&[("chunks", &bag.join("\n")), ("query", query)])?,
                ),
            ],
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        };
        Ok((request, sorted.iter().map(|c| c.chunk.id).collect()))
    }

    /// Ask the model.
    pub async fn answer(&self, query: &str, chunks: &[ScoredChunk]) -> Result<Answer, LlmError> {
        let (request, chunk_ids) = self.request(query, chunks)?;
        let response = self.model.complete(&request).await?;
        if let Some(m) = &self.meter {
            m.record("answer", &response);
        }
        Ok(Answer {
            text: response.content.trim().to_string(),
            chunk_ids,
            usage: response.usage,
        })
    }
}
