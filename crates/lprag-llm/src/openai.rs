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
            .field("base_url", &crate::secret::redact_url(&self.base_url))
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

    /// Read the configuration from the environment ([`LlmEnv::from_process`]) with
    /// [`OpenAiConfig::resolve`] and nothing set explicitly: `LPRAG_LLM_BASE_URL` (else
    /// `OPENAI_BASE_URL`), `LPRAG_LLM_MODEL` (else `OPENAI_MODEL`; required) and
    /// `LPRAG_LLM_API_KEY` (else `OPENAI_API_KEY`). OpenAI's URL is used only when no base
    /// URL is set at all and a key is. `None` when [`OpenAiConfig::resolve`] fails (no model
    /// named, or neither a base URL nor a key), so callers can fall back to offline
    /// components; call [`OpenAiConfig::resolve`] to learn why.
    pub fn from_env() -> Option<Self> {
        Self::resolve(None, None, &LlmEnv::from_process()).ok()
    }

    /// The configuration from explicit settings (a command-line flag, a builder, a
    /// configuration file) and the environment's `env`, each explicit one winning:
    ///
    /// - base URL: `base_url`, else `env.base_url` (`LPRAG_LLM_BASE_URL`), else
    ///   `env.openai_base_url` (`OPENAI_BASE_URL`); OpenAI's public
    ///   [`OpenAiConfig::OPENAI_BASE_URL`] only when none is set, and then only with a
    ///   key (without one OpenAI would refuse, after receiving the prompt);
    /// - model: `model`, else `env.model`;
    /// - key: `env.api_key` (`LPRAG_LLM_API_KEY`); else `env.openai_api_key`
    ///   (`OPENAI_API_KEY`) only when the URL is OpenAI's or came from `OPENAI_BASE_URL`,
    ///   so a shell's OpenAI key never reaches a server named elsewhere (keys are never
    ///   taken from a command line).
    ///
    /// Blank values count as unset. Pure: it reads no environment itself, so it can be
    /// tested without one (see [`LlmEnv::from_lookup`]).
    ///
    /// ```
    /// use lprag_llm::{LlmEnv, OpenAiConfig};
    /// // `LPRAG_LLM_BASE_URL` names a local server, the model comes from a flag:
    /// let env = LlmEnv::from_lookup(|var| {
    ///     (var == "LPRAG_LLM_BASE_URL").then(|| "http://127.0.0.1:8000/v1".to_string())
    /// });
    /// let config = OpenAiConfig::resolve(None, Some("qwen"), &env).unwrap();
    /// assert_eq!(config.base_url, "http://127.0.0.1:8000/v1");
    /// assert_eq!(config.model, "qwen");
    /// ```
    pub fn resolve(
        base_url: Option<&str>,
        model: Option<&str>,
        env: &LlmEnv,
    ) -> Result<Self, LlmConfigError> {
        fn set(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        let model = set(model)
            .or(set(env.model.as_deref()))
            .ok_or(LlmConfigError::NoModel)?;
        let any_key = env.api_key.is_some() || env.openai_api_key.is_some();
        let (base_url, openai_url) = match set(base_url).or(set(env.base_url.as_deref())) {
            Some(url) => (url, false),
            None => match set(env.openai_base_url.as_deref()) {
                Some(url) => (url, true),
                None if any_key => (Self::OPENAI_BASE_URL, true),
                None => return Err(LlmConfigError::NoBaseUrlNorKey),
            },
        };
        // `OPENAI_API_KEY` is OpenAI's: it goes only to OpenAI's endpoint or the one
        // `OPENAI_BASE_URL` names, never to a server named elsewhere.
        let api_key = env
            .api_key
            .clone()
            .or_else(|| openai_url.then(|| env.openai_api_key.clone()).flatten());
        Ok(Self {
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key,
            http: HttpConfig::default(),
        })
    }
}

/// The LLM settings of the environment, read once so that [`OpenAiConfig::resolve`] is a
/// pure function. `Debug` hides the key and the URL's credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LlmEnv {
    /// `LPRAG_LLM_BASE_URL`.
    pub base_url: Option<String>,
    /// `OPENAI_BASE_URL`.
    pub openai_base_url: Option<String>,
    /// `LPRAG_LLM_MODEL`, else `OPENAI_MODEL`.
    pub model: Option<String>,
    /// `LPRAG_LLM_API_KEY`.
    pub api_key: Option<ApiKey>,
    /// `OPENAI_API_KEY` (sent only to OpenAI's endpoint or `OPENAI_BASE_URL`'s).
    pub openai_api_key: Option<ApiKey>,
}

impl std::fmt::Debug for LlmEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmEnv")
            .field(
                "base_url",
                &self.base_url.as_deref().map(crate::secret::redact_url),
            )
            .field(
                "openai_base_url",
                &self
                    .openai_base_url
                    .as_deref()
                    .map(crate::secret::redact_url),
            )
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("openai_api_key", &self.openai_api_key)
            .finish()
    }
}

impl LlmEnv {
    /// The settings in this process's environment.
    pub fn from_process() -> Self {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// The settings as `lookup` (a variable's name to its value) reports them; blank
    /// values count as unset. For tests and for callers with their own configuration
    /// source.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |names: &[&str]| {
            names.iter().find_map(|n| {
                lookup(n)
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
            })
        };
        Self {
            base_url: var(&["LPRAG_LLM_BASE_URL"]),
            openai_base_url: var(&["OPENAI_BASE_URL"]),
            model: var(&["LPRAG_LLM_MODEL", "OPENAI_MODEL"]),
            api_key: ApiKey::from_value(lookup("LPRAG_LLM_API_KEY")),
            openai_api_key: ApiKey::from_value(lookup("OPENAI_API_KEY")),
        }
    }
}

/// Why [`OpenAiConfig::resolve`] could not put a configuration together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmConfigError {
    /// No model was named, explicitly or in `LPRAG_LLM_MODEL` / `OPENAI_MODEL`.
    #[error(
        "no LLM model named: set LPRAG_LLM_MODEL (with LPRAG_LLM_BASE_URL and \
         LPRAG_LLM_API_KEY as needed) or name one explicitly"
    )]
    NoModel,
    /// No base URL was set anywhere and no API key either: the only endpoint left would
    /// be OpenAI's public one, which refuses requests without a key after receiving them.
    #[error(
        "no LLM base URL set (explicitly, LPRAG_LLM_BASE_URL or OPENAI_BASE_URL) and no API \
         key (LPRAG_LLM_API_KEY or OPENAI_API_KEY): refusing to send prompts to OpenAI's \
         public endpoint without a key; set the base URL of your server, or a key for OpenAI"
    )]
    NoBaseUrlNorKey,
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
            .field("url", &crate::secret::redact_url(&self.url))
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
            url: crate::http::join_url(&config.base_url, "chat/completions")?,
            model: config.model,
            api_key: config.api_key,
            http,
        })
    }

    /// The endpoint this client posts to, as sent: it may hold the base URL's credentials
    /// or query parameters, so show it through [`crate::redact_url`].
    pub fn url(&self) -> &str {
        &self.url
    }
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
        let body = self.body(request);
        self.http
            .post_json(&self.url, self.api_key.as_ref(), &body, parse_chat)
            .await
    }

    /// `"stream": true`: the answer arrives as server-sent events, each piece the
    /// `choices[0].delta.content` of one event, until `data: [DONE]`.
    async fn complete_stream(&self, request: &ChatRequest) -> Result<crate::TextStream, LlmError> {
        let mut body = self.body(request);
        body["stream"] = json!(true);
        self.http
            .post_sse(&self.url, self.api_key.as_ref(), &body)
            .await
    }
}

impl OpenAiChat {
    /// The JSON body of `request`.
    fn body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({ "model": self.model, "messages": request.messages });
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = request.max_tokens {
            body["max_tokens"] = json!(n);
        }
        body
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
        let url = |base: &str| OpenAiChat::new(OpenAiConfig::new(base, "m")).map(|c| c.url);
        assert_eq!(
            url("http://h:1/v1/").unwrap(),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            url("http://h/v1?key=abc").unwrap(),
            "http://h/v1/chat/completions?key=abc"
        );
        assert!(url("localhost:1/v1").is_err());
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

    /// An environment with these variables set.
    fn env(vars: &[(&str, &str)]) -> LlmEnv {
        LlmEnv::from_lookup(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    const LOCAL: &str = "http://127.0.0.1:8000/v1";

    #[test]
    fn an_explicit_model_with_a_base_url_from_the_environment_goes_to_that_url() {
        // The reported leak: model from a flag, base URL from the environment only.
        let c =
            OpenAiConfig::resolve(None, Some("m"), &env(&[("LPRAG_LLM_BASE_URL", LOCAL)])).unwrap();
        assert_eq!((c.base_url.as_str(), c.model.as_str()), (LOCAL, "m"));
        assert!(c.api_key.is_none());
        let c =
            OpenAiConfig::resolve(None, Some("m"), &env(&[("OPENAI_BASE_URL", LOCAL)])).unwrap();
        assert_eq!(c.base_url, LOCAL);
    }

    #[test]
    fn explicit_settings_beat_the_environment() {
        let e = env(&[
            ("LPRAG_LLM_BASE_URL", "http://env/v1"),
            ("OPENAI_BASE_URL", "http://openai-env/v1"),
            ("LPRAG_LLM_MODEL", "env-model"),
            ("OPENAI_MODEL", "openai-model"),
            ("LPRAG_LLM_API_KEY", "k1"),
            ("OPENAI_API_KEY", "k2"),
        ]);
        let c = OpenAiConfig::resolve(Some(LOCAL), Some("flag"), &e).unwrap();
        assert_eq!((c.base_url.as_str(), c.model.as_str()), (LOCAL, "flag"));
        assert_eq!(c.api_key.unwrap().expose(), "k1");
        let c = OpenAiConfig::resolve(None, None, &e).unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://env/v1", "env-model")
        );
        // Blank explicit values count as unset.
        let c = OpenAiConfig::resolve(Some("  "), Some(""), &e).unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://env/v1", "env-model")
        );
        let e = env(&[("OPENAI_BASE_URL", "http://o/v1"), ("OPENAI_API_KEY", "k2")]);
        let c = OpenAiConfig::resolve(None, Some("m"), &e).unwrap();
        assert_eq!(c.base_url, "http://o/v1");
        assert_eq!(c.api_key.unwrap().expose(), "k2");
    }

    /// A shell's `OPENAI_API_KEY` goes to OpenAI (or `OPENAI_BASE_URL`) only, never to a
    /// server named by a flag or `LPRAG_LLM_BASE_URL`.
    #[test]
    fn the_openai_key_never_goes_to_another_server() {
        let e = env(&[
            ("LPRAG_LLM_BASE_URL", "http://third-party/v1"),
            ("OPENAI_API_KEY", "sk-openai"),
        ]);
        let c = OpenAiConfig::resolve(None, Some("m"), &e).unwrap();
        assert_eq!(c.base_url, "http://third-party/v1");
        assert!(c.api_key.is_none());
        let c = OpenAiConfig::resolve(Some(LOCAL), Some("m"), &e).unwrap();
        assert!(c.api_key.is_none());
        let e = env(&[("OPENAI_API_KEY", "sk-openai")]);
        let c = OpenAiConfig::resolve(None, Some("m"), &e).unwrap();
        assert_eq!(c.base_url, OpenAiConfig::OPENAI_BASE_URL);
        assert_eq!(c.api_key.unwrap().expose(), "sk-openai");
        // lprag's own key goes wherever lprag's base URL points.
        let e = env(&[
            ("LPRAG_LLM_BASE_URL", "http://mine/v1"),
            ("LPRAG_LLM_API_KEY", "k-mine"),
        ]);
        let c = OpenAiConfig::resolve(None, Some("m"), &e).unwrap();
        assert_eq!(c.api_key.unwrap().expose(), "k-mine");
    }

    #[test]
    fn the_public_endpoint_only_when_no_base_url_is_set_anywhere_and_a_key_is() {
        let c = OpenAiConfig::resolve(None, Some("m"), &env(&[("OPENAI_API_KEY", "sk")])).unwrap();
        assert_eq!(c.base_url, OpenAiConfig::OPENAI_BASE_URL);
        assert_eq!(
            OpenAiConfig::resolve(None, Some("m"), &env(&[])).unwrap_err(),
            LlmConfigError::NoBaseUrlNorKey
        );
        assert_eq!(
            OpenAiConfig::resolve(None, Some("m"), &env(&[("LPRAG_LLM_BASE_URL", " ")]))
                .unwrap_err(),
            LlmConfigError::NoBaseUrlNorKey
        );
        // A local server needs no key.
        assert!(OpenAiConfig::resolve(Some(LOCAL), Some("m"), &env(&[])).is_ok());
        assert_eq!(
            OpenAiConfig::resolve(Some(LOCAL), None, &env(&[])).unwrap_err(),
            LlmConfigError::NoModel
        );
    }

    #[test]
    fn the_environment_debug_hides_key_and_url_credentials() {
        let e = env(&[
            ("LPRAG_LLM_BASE_URL", "http://me:hunter2@h/v1?key=abc"),
            ("LPRAG_LLM_API_KEY", "sk-secret-123"),
        ]);
        let shown = format!("{e:?}");
        for secret in ["hunter2", "abc", "sk-secret-123"] {
            assert!(!shown.contains(secret), "{shown}");
        }
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
