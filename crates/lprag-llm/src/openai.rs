//! OpenAI-compatible `/v1/chat/completions`: OpenAI, Groq, Together, vLLM, llama.cpp
//! server, LM Studio, LiteLLM…

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::http::{HttpClient, HttpConfig};
use crate::{ApiKey, ChatModel, ChatRequest, ChatResponse, LlmError, Usage};

/// Where and how to reach an OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL including the API version, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:8000/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model name the server expects.
    pub model: String,
    /// Bearer token; `None` for local servers that need none.
    pub api_key: Option<ApiKey>,
    /// Timeouts, retries, concurrency.
    pub http: HttpConfig,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &crate::http::redact_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiConfig {
    /// OpenAI's own endpoint is `https://api.openai.com/v1`.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A configuration for `model` at `base_url`, without a key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            http: HttpConfig::default(),
        }
    }

    /// Set the API key.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Read the configuration from the environment:
    /// `LPRAG_LLM_BASE_URL` (else `OPENAI_BASE_URL`, else OpenAI's URL),
    /// `LPRAG_LLM_MODEL` (else `OPENAI_MODEL`; required) and
    /// `LPRAG_LLM_API_KEY` (else `OPENAI_API_KEY`; optional).
    /// `None` when no model is named, so callers can fall back to offline components.
    pub fn from_env() -> Option<Self> {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        };
        let model = var(&["LPRAG_LLM_MODEL", "OPENAI_MODEL"])?;
        let base_url = var(&["LPRAG_LLM_BASE_URL", "OPENAI_BASE_URL"])
            .unwrap_or_else(|| Self::OPENAI_BASE_URL.to_string());
        let api_key =
            ApiKey::from_env("LPRAG_LLM_API_KEY").or_else(|| ApiKey::from_env("OPENAI_API_KEY"));
        Some(Self {
            base_url: base_url.trim().to_string(),
            model: model.trim().to_string(),
            api_key,
            http: HttpConfig::default(),
        })
    }
}

/// A [`ChatModel`] speaking the OpenAI chat-completions protocol.
#[derive(Clone)]
pub struct OpenAiChat {
    url: String,
    model: String,
    api_key: Option<ApiKey>,
    http: HttpClient,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("url", &crate::http::redact_url(&self.url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiChat {
    /// A client with its own [`HttpClient`] built from `config.http`.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let http = HttpClient::new(config.http.clone())?;
        Self::with_client(config, http)
    }

    /// A client sharing `http` (and so its concurrency limit) with other backends.
    pub fn with_client(config: OpenAiConfig, http: HttpClient) -> Result<Self, LlmError> {
        if config.model.trim().is_empty() {
            return Err(LlmError::Permanent("OpenAiConfig::model is empty".into()));
        }
        Ok(Self {
            url: endpoint(&config.base_url, "chat/completions")?,
            model: config.model,
            api_key: config.api_key,
            http,
        })
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// `base` + `/` + `path`, checking that `base` is an http(s) URL.
pub(crate) fn endpoint(base: &str, path: &str) -> Result<String, LlmError> {
    let base = base.trim().trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LlmError::Permanent(format!(
            "base URL {base:?} must start with http:// or https://"
        )));
    }
    Ok(format!("{base}/{path}"))
}

pub(crate) fn parse_chat(v: Value) -> Result<ChatResponse, LlmError> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::Permanent(format!("response has no choices: {v}")))?;
    let content = match choice.pointer("/message/content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => {
            // Some servers put refusals or reasoning elsewhere; say so instead of
            // returning an empty answer.
            return Err(LlmError::Permanent(format!(
                "response choice has no message content: {choice}"
            )));
        }
        Some(other) => other.to_string(),
    };
    let usage = v.get("usage").and_then(|u| {
        Some(Usage {
            prompt_tokens: u.get("prompt_tokens")?.as_u64()?,
            completion_tokens: u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    });
    Ok(ChatResponse {
        content,
        usage,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        cached: false,
    })
}

#[async_trait]
impl ChatModel for OpenAiChat {
    fn name(&self) -> &str {
        &self.model
    }

    fn backend(&self) -> &str {
        "openai"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut body = json!({ "model": self.model, "messages": request.messages });
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = request.max_tokens {
            body["max_tokens"] = json!(n);
        }
        self.http
            .post_json(&self.url, self.api_key.as_ref(), &body, parse_chat)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_credentials_in_the_url() {
        let config = OpenAiConfig::new("https://me:hunter2@x/v1?key=sk-secret", "m");
        let chat = OpenAiChat::new(config.clone()).unwrap();
        for shown in [format!("{config:?}"), format!("{chat:?}")] {
            assert!(
                !shown.contains("hunter2") && !shown.contains("sk-secret"),
                "{shown}"
            );
            assert!(shown.contains("x/v1"), "{shown}");
        }
    }

    #[test]
    fn endpoints_and_parsing() {
        assert_eq!(
            endpoint("http://h:1/v1/", "chat/completions").unwrap(),
            "http://h:1/v1/chat/completions"
        );
        assert!(endpoint("localhost:1/v1", "x").is_err());
        let r = parse_chat(json!({
            "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1}
        }))
        .unwrap();
        assert_eq!(r.content, "hi");
        assert!(r.truncated());
        assert_eq!(r.usage.unwrap().prompt_tokens, 7);
        assert!(parse_chat(json!({"choices": []})).is_err());
        assert!(parse_chat(json!({"choices": [{"message": {"content": null}}]})).is_err());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let chat = OpenAiChat::new(
            OpenAiConfig::new("http://localhost:1/v1", "m").api_key(ApiKey::new("sk-secret-123")),
        )
        .unwrap();
        assert!(!format!("{chat:?}").contains("sk-secret-123"));
    }
}
