//! # lprag-llm
//!
//! The contract between lprag and large language models: a chat-completion trait that
//! LLM backends implement ([`ChatModel`]) and the message types it speaks. The paper's LLM
//! chunker, query generator and answer generator are built on it; HTTP backends
//! (OpenAI-compatible, Ollama) land in a later release. Until then users plug their own
//! client in by implementing [`ChatModel`].
#![warn(missing_docs)]

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user's turn.
    User,
    /// The model's turn.
    Assistant,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
}

/// A chat-completion request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature (`None`: the backend's default).
    pub temperature: Option<f32>,
    /// Most tokens to generate (`None`: the backend's default).
    pub max_tokens: Option<u32>,
}

/// Token counts of one completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
}

/// A chat-completion answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The generated text.
    pub content: String,
    /// Token accounting, when the backend reports it.
    pub usage: Option<Usage>,
}

/// Why an LLM call failed, classified so retry logic can decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// Worth retrying (rate limit, server error, timeout, connection error).
    #[error("transient LLM error: {0}")]
    Transient(String),
    /// The prompt does not fit the model's context window.
    #[error("prompt exceeds the model's context length: {0}")]
    ContextLength(String),
    /// Retrying will not help (bad request, authentication, unparseable answer).
    #[error("permanent LLM error: {0}")]
    Permanent(String),
}

impl From<LlmError> for lprag_core::Error {
    fn from(e: LlmError) -> Self {
        lprag_core::Error::backend("llm", e)
    }
}

/// A chat-completion backend. Object-safe: `Arc<dyn ChatModel>` works.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's name (part of cache keys).
    fn name(&self) -> &str;

    /// Complete the chat.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Echo;

    #[async_trait]
    impl ChatModel for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let last = request
                .messages
                .last()
                .ok_or_else(|| LlmError::Permanent("no messages".into()))?;
            Ok(ChatResponse {
                content: last.content.clone(),
                usage: None,
            })
        }
    }

    #[tokio::test]
    async fn chat_model_is_object_safe_and_errors_convert() {
        let model: Arc<dyn ChatModel> = Arc::new(Echo);
        let req = ChatRequest {
            messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
            temperature: None,
            max_tokens: None,
        };
        assert_eq!(model.complete(&req).await.unwrap().content, "hi");
        let empty = ChatRequest {
            messages: vec![],
            temperature: None,
            max_tokens: None,
        };
        let err: lprag_core::Error = model.complete(&empty).await.unwrap_err().into();
        assert!(err.to_string().contains("no messages"), "{err}");
    }
}
