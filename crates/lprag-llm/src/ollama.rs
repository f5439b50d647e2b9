//! Ollama's native `/api/chat` (non-streaming).

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::http::{HttpClient, HttpConfig};
use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, Usage};

/// Where Ollama runs and which model to use.
#[derive(Clone)]
pub struct OllamaConfig {
    /// Server URL, default `http://localhost:11434`.
    pub base_url: String,
    /// Model tag, e.g. `llama3.1:8b`.
    pub model: String,
    /// The context window asked of the server, in tokens, sent as `options.num_ctx` with
    /// every request; `None` sends none, leaving the server's default (2,048 or 4,096
    /// tokens depending on Ollama's version, or its `OLLAMA_CONTEXT_LENGTH`).
    ///
    /// Default **8,192**, a departure from Ollama's own default: Ollama silently drops the
    /// start of a prompt longer than its context, and 8,192 is the budget
    /// [`crate::LlmChunker`] assumes for a model that reports none. The chunker reads this
    /// value ([`crate::ChatModel::context_tokens`]) and sizes its windows to it. A larger
    /// context costs the server memory (its KV cache), and a model cannot use more than it
    /// was trained for.
    pub num_ctx: Option<u32>,
    /// Timeouts, retries, concurrency.
    pub http: HttpConfig,
}

impl std::fmt::Debug for OllamaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaConfig")
            .field("base_url", &crate::secret::redact_url(&self.base_url))
            .field("model", &self.model)
            .field("num_ctx", &self.num_ctx)
            .field("http", &self.http)
            .finish()
    }
}

impl OllamaConfig {
    /// [`OllamaConfig::num_ctx()`]'s default.
    pub const DEFAULT_NUM_CTX: u32 = 8192;

    /// `model` on the local default server.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: "http://localhost:11434".into(),
            model: model.into(),
            num_ctx: Some(Self::DEFAULT_NUM_CTX),
            http: HttpConfig::default(),
        }
    }

    /// Use another server.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The context window to ask for (`options.num_ctx`); `None` leaves the server's
    /// default. Default [`OllamaConfig::DEFAULT_NUM_CTX`].
    pub fn num_ctx(mut self, tokens: Option<u32>) -> Self {
        self.num_ctx = tokens;
        self
    }
}

/// A [`ChatModel`] speaking Ollama's native chat API.
#[derive(Clone)]
pub struct OllamaChat {
    url: String,
    model: String,
    num_ctx: Option<u32>,
    http: HttpClient,
}

impl std::fmt::Debug for OllamaChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaChat")
            .field("url", &crate::secret::redact_url(&self.url))
            .field("model", &self.model)
            .field("num_ctx", &self.num_ctx)
            .field("http", &self.http)
            .finish()
    }
}

impl OllamaChat {
    /// A client with its own [`HttpClient`].
    pub fn new(config: OllamaConfig) -> Result<Self, LlmError> {
        let http = HttpClient::new(config.http.clone())?;
        Self::with_client(config, http)
    }

    /// A client sharing `http` with other backends.
    pub fn with_client(config: OllamaConfig, http: HttpClient) -> Result<Self, LlmError> {
        if config.model.trim().is_empty() {
            return Err(LlmError::Permanent("OllamaConfig::model is empty".into()));
        }
        if config.num_ctx == Some(0) {
            return Err(LlmError::Permanent(
                "OllamaConfig::num_ctx must be at least 1 (or None for the server's default)"
                    .into(),
            ));
        }
        Ok(Self {
            url: crate::http::join_url(&config.base_url, "api/chat")?,
            model: config.model,
            num_ctx: config.num_ctx,
            http,
        })
    }
}

pub(crate) fn parse_ollama(v: Value) -> Result<ChatResponse, LlmError> {
    let content = v
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::Permanent(format!("Ollama response has no message: {v}")))?
        .to_string();
    let usage = v
        .get("prompt_eval_count")
        .and_then(Value::as_u64)
        .map(|p| Usage {
            prompt_tokens: p,
            completion_tokens: v.get("eval_count").and_then(Value::as_u64).unwrap_or(0),
        });
    Ok(ChatResponse {
        content,
        usage,
        finish_reason: v
            .get("done_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        cached: false,
    })
}

#[async_trait]
impl ChatModel for OllamaChat {
    fn name(&self) -> &str {
        &self.model
    }

    fn backend(&self) -> &str {
        "ollama"
    }

    fn context_tokens(&self) -> Option<u32> {
        self.num_ctx
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut options = serde_json::Map::new();
        if let Some(t) = request.temperature {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(n) = request.max_tokens {
            options.insert("num_predict".into(), json!(n));
        }
        if let Some(n) = self.num_ctx {
            options.insert("num_ctx".into(), json!(n));
        }
        let body = json!({
            "model": self.model,
            "messages": request.messages,
            "stream": false,
            "options": options,
        });
        self.http
            .post_json(&self.url, None, &body, parse_ollama)
            .await
    }
}
