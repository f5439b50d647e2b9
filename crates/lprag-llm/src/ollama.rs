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
    /// Timeouts, retries, concurrency.
    pub http: HttpConfig,
}

impl std::fmt::Debug for OllamaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaConfig")
            .field("base_url", &crate::secret::redact_url(&self.base_url))
            .field("model", &self.model)
            .field("http", &self.http)
            .finish()
    }
}

impl OllamaConfig {
    /// `model` on the local default server.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: "http://localhost:11434".into(),
            model: model.into(),
            http: HttpConfig::default(),
        }
    }

    /// Use another server.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }
}

/// A [`ChatModel`] speaking Ollama's native chat API.
#[derive(Clone)]
pub struct OllamaChat {
    url: String,
    model: String,
    http: HttpClient,
}

impl std::fmt::Debug for OllamaChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaChat")
            .field("url", &crate::secret::redact_url(&self.url))
            .field("model", &self.model)
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
        Ok(Self {
            url: crate::http::join_url(&config.base_url, "api/chat")?,
            model: config.model,
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

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut options = serde_json::Map::new();
        if let Some(t) = request.temperature {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(n) = request.max_tokens {
            options.insert("num_predict".into(), json!(n));
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
