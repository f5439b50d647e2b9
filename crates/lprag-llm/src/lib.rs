//! # lprag-llm
//!
//! Everything lprag needs from a large language model, and nothing that ties you to one
//! vendor:
//!
//! - the object-safe async [`ChatModel`] trait with its message types, and [`LlmError`],
//!   which classifies failures as transient, context-length, permanent or unparseable;
//! - HTTP backends: [`OpenAiChat`] (any OpenAI-compatible `/v1/chat/completions`: OpenAI,
//!   Groq, vLLM, llama.cpp server, LM Studio…), [`OllamaChat`] (Ollama's native
//!   `/api/chat`) and [`OpenAiEmbeddings`] (`/v1/embeddings`, an [`lprag_core::Encoder`]),
//!   all on one [`HttpClient`] with bounded concurrency, per-request timeouts, retries with
//!   exponential backoff and jitter that honour `Retry-After`, and detection of errors sent
//!   with HTTP 200;
//! - [`CachedChat`]: a persistent response cache, so an interrupted indexing run resumes
//!   where it stopped and a rerun costs nothing;
//! - the papers' prompts as overridable [`Template`]s ([`Prompts`]), parsers that survive
//!   real model output ([`parse`]), and the components built on them: [`LlmChunker`]
//!   (LP-RAG C-PROMPT), [`LlmQueryGenerator`] (LP-RAG S-PROMPT batches, or QCG-RAG's
//!   Doc2Query pairs), [`AnswerGenerator`] (COMBINE + the D.2 prompt),
//!   [`LlmMergeJudge`] (G²RAG's yes/no merge of subgroups) and [`LlmTripleExtractor`]
//!   (GFM-RAG's OpenIE);
//! - [`TokenMeter`]: prompt/completion tokens per stage.
//!
//! API keys are held in [`ApiKey`], whose `Debug` and `Display` print `***`; they are sent
//! only in the `Authorization` header and never appear in errors, logs or saved files.
//! Base URLs are shown only through [`redact_url`] (credentials and query values hidden),
//! and a server's words quoted in an error pass through [`redact_secrets`] (the key, and
//! anything shaped like one, hidden). Requests go only to the base URL the caller or the
//! environment named ([`OpenAiConfig::resolve`]).
#![warn(missing_docs)]

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod answer;
pub mod cache;
mod chunker;
mod embeddings;
mod extract;
pub mod http;
mod jobs;
mod merge;
mod ollama;
mod openai;
pub mod parse;
pub mod prompts;
mod querygen;
mod secret;
mod usage;

pub use answer::{cite, Answer, AnswerGenerator, Citation, CitedAnswer, CITATION_INSTRUCTION};
pub use cache::{CacheStats, CachedChat, ResponseCache};
pub use chunker::{ChunkerStats, LlmChunker};
pub use embeddings::{OpenAiEmbeddings, OpenAiEmbeddingsConfig};
pub use extract::LlmTripleExtractor;
pub use http::{HttpClient, HttpConfig};
pub use jobs::OnUnparseable;
pub use merge::LlmMergeJudge;
pub use ollama::{OllamaChat, OllamaConfig};
pub use openai::{LlmConfigError, LlmEnv, OpenAiChat, OpenAiConfig};
pub use prompts::{Prompts, Template};
pub use querygen::{LlmQueryGenerator, QueryMode};
pub use secret::{redact_secrets, redact_url, ApiKey};
pub use usage::{StageUsage, TokenMeter};

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// An assistant message (for few-shot turns).
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
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

impl ChatRequest {
    /// A request with these messages and the backend's default sampling.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Set the temperature.
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Set the most tokens to generate.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }
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
    /// Why generation stopped, as the backend said (`"stop"`, `"length"`…), when it did.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// `true` when this answer came from a [`CachedChat`] cache instead of the backend
    /// (nothing was paid for it this time). Never stored.
    #[serde(skip)]
    pub cached: bool,
}

impl ChatResponse {
    /// A plain answer with no usage information.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            usage: None,
            finish_reason: None,
            cached: false,
        }
    }

    /// `true` when the backend stopped because it hit the token limit.
    pub fn truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// Why an LLM call failed, classified so retry logic can decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// Worth retrying: rate limit, server error, timeout, connection error, a truncated
    /// or malformed response body. `retry_after` is the server's `Retry-After`, if any.
    #[error("transient LLM error: {message}")]
    Transient {
        /// What happened (never contains the API key).
        message: String,
        /// How long the server asked us to wait.
        retry_after: Option<Duration>,
    },
    /// The prompt does not fit the model's context window: retrying will not help,
    /// shortening the input will.
    #[error("prompt exceeds the model's context length: {0}")]
    ContextLength(String),
    /// Retrying will not help (bad request, authentication, unknown model…).
    #[error("permanent LLM error: {0}")]
    Permanent(String),
    /// The model answered but its output could not be parsed; `raw` is the full output.
    #[error("could not parse the LLM's {what}: {reason}; raw output: {raw:?}")]
    Parse {
        /// What was being parsed (e.g. "chunk list for document `d1`").
        what: String,
        /// Why parsing failed.
        reason: String,
        /// The model's output, unchanged.
        raw: String,
    },
    /// The response cache could not be used (its directory cannot be created).
    #[error("LLM response cache at {path}: {message}")]
    Cache {
        /// The cache directory or entry.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Some calls of an indexing stage failed. Every call that succeeded was stored by the
    /// response cache (when the model is a [`CachedChat`]), so running the stage again
    /// pays only for the failed ones. Transient when its first failure is.
    #[error(
        "{stage}: {failed} of {total} LLM calls failed (first: {first_item}: {first}); the {succeeded} \
         that succeeded are kept by the response cache, when one is configured, and a rerun resumes from them"
    )]
    Stage {
        /// The stage, e.g. "LLM chunking".
        stage: String,
        /// Calls that failed.
        failed: usize,
        /// Calls that succeeded.
        succeeded: usize,
        /// Calls in all.
        total: usize,
        /// What the first failed call was for (e.g. "document `d7`").
        first_item: String,
        /// Why it failed.
        #[source]
        first: Box<LlmError>,
    },
}

impl LlmError {
    /// A transient error with no `Retry-After`.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient {
            message: message.into(),
            retry_after: None,
        }
    }

    /// `true` for errors worth retrying: [`LlmError::Transient`], and a
    /// [`LlmError::Stage`] whose first failure was transient.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Transient { .. } => true,
            Self::Stage { first, .. } => first.is_transient(),
            _ => false,
        }
    }

    /// The trait-level error of `component`: [`lprag_core::Error::Transient`] when
    /// [`LlmError::is_transient`], else [`lprag_core::Error::Backend`].
    pub fn into_core(self, component: &str) -> lprag_core::Error {
        if self.is_transient() {
            lprag_core::Error::transient(component, self)
        } else {
            lprag_core::Error::backend(component, self)
        }
    }
}

/// Transient LLM failures ([`LlmError::is_transient`]) become
/// [`lprag_core::Error::Transient`], the rest [`lprag_core::Error::Backend`], both with the
/// component `"llm"`, so a caller of the traits can still tell whether to retry.
impl From<LlmError> for lprag_core::Error {
    fn from(e: LlmError) -> Self {
        e.into_core("llm")
    }
}

/// An answer's text as it is generated: pieces in order, whose concatenation is the whole
/// answer. An error ends it (a connection cut mid-answer, say).
pub type TextStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<String, LlmError>> + Send + 'static>>;

/// A chat-completion backend. Object-safe: `Arc<dyn ChatModel>` works.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's name (part of cache keys).
    fn name(&self) -> &str;

    /// The backend's kind, e.g. `"openai"` or `"ollama"` (part of cache keys; default
    /// `"custom"`).
    fn backend(&self) -> &str {
        "custom"
    }

    /// The model's context window in tokens (prompt and answer together), when the backend
    /// knows it: [`OllamaChat`] reports the `num_ctx` it sends ([`OllamaConfig::num_ctx()`]),
    /// [`CachedChat`] its inner model's. Default `None` (unknown). [`LlmChunker`] sizes its
    /// windows to it unless [`LlmChunker::context_tokens`] says otherwise.
    fn context_tokens(&self) -> Option<u32> {
        None
    }

    /// Complete the chat.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Complete the chat, yielding the answer's text as the model writes it. The
    /// provided method calls [`ChatModel::complete`] and yields its whole content at
    /// once; [`OpenAiChat`] streams it (server-sent events) and [`CachedChat`] replays a
    /// cached answer or caches a streamed one once it has ended.
    ///
    /// # Errors
    /// Those of opening the answer (the request refused, the server unreachable); later
    /// failures arrive in the stream.
    async fn complete_stream(&self, request: &ChatRequest) -> Result<TextStream, LlmError> {
        let response = self.complete(request).await?;
        Ok(Box::pin(futures::stream::once(async move {
            Ok(response.content)
        })))
    }

    /// Drop anything remembered of the answer to `request`, because it could not be used
    /// (the jobs call it when an answer stays unreadable after its retries, so that a rerun
    /// asks the model again instead of replaying the failure). Default: nothing to drop;
    /// [`CachedChat`] deletes its cache entry.
    fn forget(&self, request: &ChatRequest) {
        let _ = request;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn transient_llm_errors_stay_transient_through_the_trait_error() {
        let e: lprag_core::Error = LlmError::transient("HTTP 503").into();
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("HTTP 503"), "{e}");
        for permanent in [
            LlmError::Permanent("HTTP 401".into()),
            LlmError::ContextLength("too long".into()),
        ] {
            let e: lprag_core::Error = permanent.into();
            assert!(!e.is_transient(), "{e}");
            assert!(matches!(e, lprag_core::Error::Backend { .. }), "{e:?}");
        }
        // A stage that failed is as transient as its first failure.
        let stage = |first: LlmError| LlmError::Stage {
            stage: "LLM chunking".into(),
            failed: 1,
            succeeded: 2,
            total: 3,
            first_item: "document `d1`".into(),
            first: Box::new(first),
        };
        let e = stage(LlmError::transient("timeout")).into_core("LLM chunking");
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("1 of 3 LLM calls failed"), "{e}");
        assert!(!stage(LlmError::Permanent("401".into()))
            .into_core("LLM chunking")
            .is_transient());
    }

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
            Ok(ChatResponse::text(last.content.clone()))
        }
    }

    #[tokio::test]
    async fn chat_model_is_object_safe_and_errors_convert() {
        let model: Arc<dyn ChatModel> = Arc::new(Echo);
        let req = ChatRequest::new(vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("hi"),
        ]);
        assert_eq!(model.complete(&req).await.unwrap().content, "hi");
        assert_eq!(model.backend(), "custom");
        let err: lprag_core::Error = model
            .complete(&ChatRequest::new(vec![]))
            .await
            .unwrap_err()
            .into();
        assert!(err.to_string().contains("no messages"), "{err}");
    }

    #[test]
    fn errors_are_send_sync_static() {
        fn check<T: Send + Sync + 'static>() {}
        check::<LlmError>();
        assert!(LlmError::transient("x").is_transient());
        assert!(!LlmError::Permanent("x".into()).is_transient());
    }
}
