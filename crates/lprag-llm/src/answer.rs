//! Answering from retrieved chunks: COMBINE(q, C_q) with the D.2 prompt (LP-RAG §3.5).

use std::sync::Arc;

use lprag_core::{ChunkId, ScoredChunk};
use serde::{Deserialize, Serialize};

use crate::jobs::{settings_methods, Settings};
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError, Usage};

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
    settings: Settings,
}

impl AnswerGenerator {
    /// The D.2 prompt on `model`, temperature 0, at most 512 tokens per answer.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 512),
        }
    }

    settings_methods!("answer");

    /// COMBINE: the request for `query` over `chunks`, which are shown in descending score
    /// order whatever order they come in. Also returns the ids in the order shown.
    pub fn request(
        &self,
        query: &str,
        chunks: &[ScoredChunk],
    ) -> Result<(ChatRequest, Vec<ChunkId>), LlmError> {
        let p = &self.settings.prompts;
        let mut sorted: Vec<&ScoredChunk> = chunks.iter().collect();
        sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut bag = Vec::with_capacity(sorted.len());
        for (i, c) in sorted.iter().enumerate() {
            let rank = (i + 1).to_string();
            let score = format!("{:.2}", c.score);
            bag.push(p.answer_chunk.render(&[
                ("rank", &rank),
                ("score", &score),
                ("text", &c.chunk.text),
            ])?);
        }
        let request = self.settings.request(vec![
            ChatMessage::system(p.answer_system.render(&[])?),
            ChatMessage::user(
                p.answer_user
                    .render(&[("chunks", &bag.join("\n")), ("query", query)])?,
            ),
        ]);
        Ok((request, sorted.iter().map(|c| c.chunk.id).collect()))
    }

    /// Ask the model.
    pub async fn answer(&self, query: &str, chunks: &[ScoredChunk]) -> Result<Answer, LlmError> {
        let (request, chunk_ids) = self.request(query, chunks)?;
        let response = self.settings.call("answer", &request).await?;
        Ok(Answer {
            text: response.content.trim().to_string(),
            chunk_ids,
            usage: response.usage,
        })
    }
}
