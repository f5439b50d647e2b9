//! The HTTP layer shared by every backend: bounded concurrency, per-request timeouts,
//! retries with exponential backoff and jitter that honour `Retry-After`, error
//! classification (transient / context-length / permanent), and detection of errors that
//! arrive with HTTP 200.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::secret::{redact_error, redact_url};
use crate::{ApiKey, LlmError};

/// How the HTTP backends talk to a server.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    /// Whole-request timeout (connect, send, wait, read). Default 120 s: LLM calls are slow.
    pub timeout: Duration,
    /// Connection timeout. Default 10 s.
    pub connect_timeout: Duration,
    /// Retries after the first attempt for transient errors. Default 5.
    pub max_retries: u32,
    /// First backoff; doubles per retry. Default 500 ms.
    pub backoff_base: Duration,
    /// Largest backoff. Default 30 s.
    pub backoff_max: Duration,
    /// Largest `Retry-After` honoured; a longer one is capped to this. Default 120 s.
    pub max_retry_after: Duration,
    /// Most requests in flight at once through one client (shared by every backend built
    /// on it). Default 8.
    pub max_concurrency: usize,
    /// Largest response body read, in bytes; a longer one is a permanent error, read no
    /// further (a misbehaving or hostile server cannot exhaust memory). Default 32 MiB.
    pub max_body_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_retries: 5,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            max_concurrency: 8,
            max_body_bytes: 32 << 20,
        }
    }
}

/// A cheap-to-clone HTTP client with one concurrency limit for everything sent through it.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    config: Arc<HttpConfig>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client with this configuration. TLS is rustls with the ring provider and the
    /// bundled Mozilla root certificates (no process-wide state is touched).
    pub fn new(config: HttpConfig) -> Result<Self, LlmError> {
        if config.max_concurrency == 0 {
            return Err(LlmError::Permanent(
                "HttpConfig::max_concurrency must be at least 1".into(),
            ));
        }
        if config.timeout.is_zero() {
            return Err(LlmError::Permanent(
                "HttpConfig::timeout must be positive".into(),
            ));
        }
        let tls = tls_config()?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("lprag/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Permanent(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            permits: Arc::new(Semaphore::new(config.max_concurrency)),
            config: Arc::new(config),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// POST `body` as JSON to `url` and turn the JSON answer into a `T` with `parse`,
    /// retrying transient failures (429, 408, 409, 425, 5xx, timeouts, connection errors,
    /// malformed bodies, transient errors reported in-band with HTTP 200). A `Retry-After`
    /// (or `retry-after-ms`) header replaces the computed backoff, capped at
    /// [`HttpConfig::max_retry_after`]. Each attempt holds one concurrency permit.
    ///
    /// Errors show `url` through [`redact_url`], and every message they carry (a server's
    /// error body included) through [`crate::redact_secrets`] with `api_key`, before it is
    /// logged or returned: a server that quotes the key back does not get it into a log.
    pub async fn post_json<T>(
        &self,
        url: &str,
        api_key: Option<&ApiKey>,
        body: &Value,
        parse: impl Fn(Value) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        self.retrying(api_key, || self.attempt(url, api_key, body, &parse))
            .await
    }

    /// Run `attempt` until it succeeds, fails for good, or has been retried
    /// [`HttpConfig::max_retries`] times: transient failures wait for the server's
    /// `Retry-After` (capped) or the backoff, and are logged. Every error is redacted
    /// with `api_key` first.
    async fn retrying<T, F, Fut>(
        &self,
        api_key: Option<&ApiKey>,
        mut attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, LlmError>>,
    {
        let mut tries = 0u32;
        loop {
            // Errors may quote the server's words, which may quote the key: hidden here,
            // before they are logged or returned.
            match attempt().await.map_err(|e| redact_error(e, api_key)) {
                Ok(v) => return Ok(v),
                Err(LlmError::Transient {
                    message,
                    retry_after,
                }) => {
                    if tries >= self.config.max_retries {
                        return Err(LlmError::Transient {
                            message: format!("{message} (gave up after {} attempts)", tries + 1),
                            retry_after,
                        });
                    }
                    let wait = match retry_after {
                        Some(d) => d.min(self.config.max_retry_after),
                        None => self.backoff(tries),
                    };
                    tracing::warn!(
                        target: "lprag::llm",
                        attempt = tries + 1,
                        wait_ms = wait.as_millis() as u64,
                        error = %message,
                        "transient LLM error, retrying"
                    );
                    tokio::time::sleep(wait).await;
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Exponential backoff with "equal jitter": half the capped delay plus a random part
    /// of the other half, so synchronised clients spread out.
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .config
            .backoff_base
            .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX));
        let cap = exp.min(self.config.backoff_max);
        let half = cap / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    async fn attempt<T>(
        &self,
        url: &str,
        api_key: Option<&ApiKey>,
        body: &Value,
        parse: &impl Fn(Value) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        let shown = redact_url(url);
        let (_permit, resp) = self.send(url, &shown, api_key, body).await?;
        let status = resp.status();
        let retry_after = parse_retry_after(resp.headers());
        let text = self.read_body(resp, &shown).await?;
        handle_response(status.as_u16(), retry_after, &text, &shown, parse)
    }

    /// POST `body` to `url` holding one concurrency permit, which the caller keeps for as
    /// long as it reads the answer.
    async fn send(
        &self,
        url: &str,
        shown: &str,
        api_key: Option<&ApiKey>,
        body: &Value,
    ) -> Result<(tokio::sync::OwnedSemaphorePermit, reqwest::Response), LlmError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| LlmError::Permanent("HTTP client closed".into()))?;
        let mut req = self
            .client
            .post(url)
            .json(body)
            .timeout(self.config.timeout);
        if let Some(key) = api_key {
            req = req.bearer_auth(key.expose());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| reqwest_error(e, shown, self.config.timeout))?;
        Ok((permit, resp))
    }
}

/// The state of one server-sent-events answer: the body read so far, the pieces parsed
/// and not yet yielded.
struct SseEvents {
    resp: reqwest::Response,
    buf: Vec<u8>,
    pending: std::collections::VecDeque<Result<String, LlmError>>,
    done: bool,
    /// Whether an event carried a `finish_reason` (the model said it had finished).
    finished: bool,
    shown: String,
    key: Option<ApiKey>,
    timeout: Duration,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl SseEvents {
    /// Parse every complete line of the buffer (and, at the end of the body, the rest).
    fn drain(&mut self, at_end: bool) {
        while !self.done {
            let line = match self.buf.iter().position(|&b| b == b'\n') {
                Some(i) => self.buf.drain(..=i).collect::<Vec<u8>>(),
                None if at_end && !self.buf.is_empty() => std::mem::take(&mut self.buf),
                None if at_end => return self.end(),
                None => return,
            };
            let line = String::from_utf8_lossy(&line);
            if let Some(item) = sse_line(line.trim_end_matches(['\r', '\n']), &self.shown) {
                match item {
                    SseItem::Event { piece, finished } => {
                        if let Some(p) = piece {
                            self.pending.push_back(Ok(p));
                        }
                        self.finished |= finished;
                    }
                    SseItem::Failed(e) => {
                        self.pending
                            .push_back(Err(redact_error(e, self.key.as_ref())));
                        self.done = true;
                    }
                    SseItem::Done => self.end(),
                }
            }
        }
    }

    /// The answer ended (`[DONE]` or the end of the body): complete only if the model said
    /// it had finished. A server may close a stream early and still send `[DONE]`
    /// (llama-cpp-python's does when another request arrives); such a cut answer ends
    /// with a transient error, so that it is neither shown as whole nor cached.
    fn end(&mut self) {
        if !self.done && !self.finished {
            self.pending.push_back(Err(LlmError::transient(format!(
                "the answer stream from {} ended before the model finished (no \
                 finish_reason): the server cut it short",
                self.shown
            ))));
        }
        self.done = true;
    }
}

/// What one line of a server-sent-events answer says.
#[derive(Debug)]
enum SseItem {
    /// A completion event: a piece of the answer's text (if it carries one), and whether
    /// it has the `finish_reason` of the model's last event.
    Event {
        /// Text, when the event's delta has some.
        piece: Option<String>,
        /// The event carries a `finish_reason`.
        finished: bool,
    },
    /// An error event, or an event that is not JSON.
    Failed(LlmError),
    /// `data: [DONE]`.
    Done,
}

/// Read one line of an OpenAI-compatible event stream: `None` for lines that are not
/// events (comments, other fields).
fn sse_line(line: &str, shown: &str) -> Option<SseItem> {
    let data = line.strip_prefix("data:")?.trim();
    if data == "[DONE]" {
        return Some(SseItem::Done);
    }
    if data.is_empty() {
        return None;
    }
    let value: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => {
            return Some(SseItem::Failed(LlmError::transient(format!(
                "malformed event from {shown} ({e}); event starts {:?}",
                snippet(data)
            ))))
        }
    };
    if let Some((message, code)) = in_band_error(&value) {
        return Some(SseItem::Failed(classify(
            None,
            &format!("error event from {shown}: {message}"),
            code.as_deref(),
            None,
        )));
    }
    let piece = match value.pointer("/choices/0/delta/content") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let finished = value
        .pointer("/choices/0/finish_reason")
        .is_some_and(|r| r.is_string());
    Some(SseItem::Event { piece, finished })
}

/// What a response means, from its status, `Retry-After`, body and the backend's parser:
/// the network-free half of [`HttpClient::post_json`] (also what the fuzz target drives).
fn handle_response<T>(
    status: u16,
    retry_after: Option<Duration>,
    text: &str,
    shown: &str,
    parse: &impl Fn(Value) -> Result<T, LlmError>,
) -> Result<T, LlmError> {
    if !(200..300).contains(&status) {
        let (message, code) = error_fields(text);
        return Err(classify(
            Some(status),
            &format!("HTTP {status} from {shown}: {message}"),
            code.as_deref(),
            retry_after,
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| LlmError::Transient {
        message: format!(
            "malformed JSON from {shown} ({e}); body starts {:?}",
            snippet(text)
        ),
        retry_after: None,
    })?;
    if let Some((message, code)) = in_band_error(&value) {
        return Err(classify(
            None,
            &format!("error reported with HTTP 200 by {shown}: {message}"),
            code.as_deref(),
            retry_after,
        ));
    }
    parse(value)
}

/// Fuzzing entry points (built only under `cargo fuzz`, `--cfg fuzzing`).
#[cfg(fuzzing)]
pub mod fuzzing {
    use super::*;

    /// Run a response with status `status`, `Retry-After` / `retry-after-ms` header values
    /// and body `body` through everything the clients do with it, for every backend's
    /// parser (OpenAI chat, Ollama chat, embeddings).
    pub fn response(status: u16, retry_after: &str, retry_after_ms: &str, body: &str) {
        let mut headers = HeaderMap::new();
        if let Ok(v) = reqwest::header::HeaderValue::from_str(retry_after) {
            headers.insert("retry-after", v);
        }
        if let Ok(v) = reqwest::header::HeaderValue::from_str(retry_after_ms) {
            headers.insert("retry-after-ms", v);
        }
        let wait = parse_retry_after(&headers);
        let shown = redact_url("http://user:pw@127.0.0.1:1/v1/chat?key=k");
        let _ = handle_response(status, wait, body, &shown, &crate::openai::parse_chat);
        let _ = handle_response(status, wait, body, &shown, &crate::ollama::parse_ollama);
        let _ = handle_response(status, wait, body, &shown, &|v| {
            crate::embeddings::parse_embeddings(v, 3)
        });
        // What every error message goes through before it is shown.
        let key = ApiKey::new(retry_after);
        let _ = crate::redact_secrets(body, Some(&key));
        let _ = redact_url(body);
    }
}

impl HttpClient {
    /// POST `body` as JSON to `url` and read the answer as server-sent events (an
    /// OpenAI-compatible `"stream": true` completion): each `data:` event's
    /// `choices[0].delta.content` is one piece, until `data: [DONE]` or the end of the
    /// body. Opening the answer is retried as in [`HttpClient::post_json`]; once it is
    /// open, a failure (a cut connection, an error event) is the stream's last item.
    /// Errors are redacted as in `post_json`. The answer holds one concurrency permit
    /// until it is dropped.
    ///
    /// # Errors
    /// Those of opening the answer: an HTTP error status, the server unreachable.
    pub async fn post_sse(
        &self,
        url: &str,
        api_key: Option<&ApiKey>,
        body: &Value,
    ) -> Result<crate::TextStream, LlmError> {
        self.retrying(api_key, || self.open_sse(url, api_key, body))
            .await
    }

    async fn open_sse(
        &self,
        url: &str,
        api_key: Option<&ApiKey>,
        body: &Value,
    ) -> Result<crate::TextStream, LlmError> {
        let shown = redact_url(url);
        let (permit, resp) = self.send(url, &shown, api_key, body).await?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = parse_retry_after(resp.headers());
            let text = self.read_body(resp, &shown).await?;
            let (message, code) = error_fields(&text);
            return Err(classify(
                Some(status.as_u16()),
                &format!("HTTP {} from {shown}: {message}", status.as_u16()),
                code.as_deref(),
                retry_after,
            ));
        }
        let events = SseEvents {
            resp,
            buf: Vec::new(),
            pending: std::collections::VecDeque::new(),
            done: false,
            finished: false,
            shown,
            key: api_key.cloned(),
            timeout: self.config.timeout,
            _permit: permit,
        };
        Ok(Box::pin(futures::stream::unfold(
            events,
            |mut ev| async move {
                loop {
                    if let Some(item) = ev.pending.pop_front() {
                        return Some((item, ev));
                    }
                    if ev.done {
                        return None;
                    }
                    match ev.resp.chunk().await {
                        Ok(Some(bytes)) => {
                            ev.buf.extend_from_slice(&bytes);
                            ev.drain(false);
                        }
                        Ok(None) => ev.drain(true),
                        Err(e) => {
                            let cut = reqwest_error(e, &ev.shown, ev.timeout);
                            ev.pending
                                .push_back(Err(redact_error(cut, ev.key.as_ref())));
                            ev.done = true;
                        }
                    }
                }
            },
        )))
    }

    /// The response body as text, at most [`HttpConfig::max_body_bytes`] of it.
    async fn read_body(
        &self,
        mut resp: reqwest::Response,
        shown: &str,
    ) -> Result<String, LlmError> {
        let limit = self.config.max_body_bytes;
        let too_long = |n: u64| {
            LlmError::Permanent(format!(
                "response body from {shown} is longer than HttpConfig::max_body_bytes \
                 ({limit} bytes; {n} bytes announced or read)"
            ))
        };
        if let Some(n) = resp.content_length() {
            if n > limit as u64 {
                return Err(too_long(n));
            }
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(part) = resp
            .chunk()
            .await
            .map_err(|e| reqwest_error(e, shown, self.config.timeout))?
        {
            if body.len() + part.len() > limit {
                return Err(too_long((body.len() + part.len()) as u64));
            }
            body.extend_from_slice(&part);
        }
        Ok(match String::from_utf8(body) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

fn tls_config() -> Result<rustls::ClientConfig, LlmError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| LlmError::Permanent(format!("TLS setup failed: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// The endpoint `path` under `base`: `path` is appended to `base`'s path, whatever query
/// string `base` has stays after it (`http://h/v1?key=k` + `chat/completions` is
/// `http://h/v1/chat/completions?key=k`), trailing slashes of `base` and leading ones of
/// `path` do not double, and a fragment (never sent) is dropped. Errors when `base` is not
/// an `http://` or `https://` URL; the error shows `base` through [`redact_url`].
///
/// ```
/// use lprag_llm::http::join_url;
/// assert_eq!(
///     join_url("http://localhost:8000/v1/?key=k", "chat/completions").unwrap(),
///     "http://localhost:8000/v1/chat/completions?key=k"
/// );
/// assert!(join_url("localhost:8000/v1", "embeddings").is_err());
/// ```
pub fn join_url(base: &str, path: &str) -> Result<String, LlmError> {
    let base = base.trim();
    let bad = |why: &str| {
        LlmError::Permanent(format!(
            "base URL {:?} is not usable ({why}): it must be an http:// or https:// URL",
            redact_url(base)
        ))
    };
    // `url::ParseError` names what is wrong without quoting the input.
    let mut url = reqwest::Url::parse(base).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("has another scheme"));
    }
    let mut joined = url.path().trim_end_matches('/').to_string();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        joined.push('/');
        joined.push_str(segment);
    }
    url.set_path(&joined);
    url.set_fragment(None);
    Ok(url.into())
}

fn snippet(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn reqwest_error(e: reqwest::Error, url: &str, timeout: Duration) -> LlmError {
    let e = e.without_url();
    if e.is_timeout() {
        LlmError::transient(format!(
            "request to {url} timed out after {:.1} s",
            timeout.as_secs_f64()
        ))
    } else if e.is_builder() {
        LlmError::Permanent(format!("bad request to {url}: {e}"))
    } else {
        // Connection refused/reset, broken body, DNS…: worth another try.
        let mut msg = format!("request to {url} failed: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(&format!(": {s}"));
            source = s.source();
        }
        LlmError::transient(msg)
    }
}

/// `Retry-After` as seconds or an HTTP date, or OpenAI's `retry-after-ms`. A value too large
/// for a `Duration` (say `1e20` seconds) saturates to `Duration::MAX`, which the caller caps
/// at [`HttpConfig::max_retry_after`]; it never panics.
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(secs(ms / 1000.0));
    }
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(s) = value.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| secs(s));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Message and code of an error body in the shapes servers use: OpenAI's
/// `{"error": {"message", "type", "code"}}`, Ollama's `{"error": "…"}`, vLLM's
/// `{"object": "error", "message"}`, or plain text.
fn error_fields(text: &str) -> (String, Option<String>) {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => in_band_error(&v).unwrap_or_else(|| (snippet(text), None)),
        Err(_) if text.trim().is_empty() => ("(empty body)".into(), None),
        Err(_) => (snippet(text), None),
    }
}

/// An error carried inside a JSON body, if there is one.
fn in_band_error(v: &Value) -> Option<(String, Option<String>)> {
    let obj = v.as_object()?;
    let code_of = |o: &serde_json::Map<String, Value>| {
        let parts: Vec<String> = ["code", "type"]
            .iter()
            .filter_map(|k| match o.get(*k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    };
    match obj.get("error") {
        Some(Value::String(s)) => return Some((s.clone(), None)),
        Some(Value::Object(e)) => {
            let message = e
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| Value::Object(e.clone()).to_string());
            return Some((message, code_of(e)));
        }
        Some(Value::Null) | None => {}
        Some(other) => return Some((other.to_string(), None)),
    }
    if obj.get("object").and_then(Value::as_str) == Some("error") {
        let message = obj
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unspecified error")
            .to_string();
        return Some((message, code_of(obj)));
    }
    None
}

/// Decide what kind of failure a server-reported error is.
pub(crate) fn classify(
    status: Option<u16>,
    message: &str,
    code: Option<&str>,
    retry_after: Option<Duration>,
) -> LlmError {
    let text = format!("{message} {}", code.unwrap_or("")).to_lowercase();
    const CONTEXT: [&str; 10] = [
        "context_length",
        // llama.cpp's server: "request (4155 tokens) exceeds the available context size".
        "available context size",
        "exceed_context_size",
        "context length",
        "maximum context",
        "context window",
        "too many tokens",
        "prompt is too long",
        "input is too long",
        "reduce the length",
    ];
    const TRANSIENT: [&str; 9] = [
        "rate limit",
        "rate_limit",
        "overloaded",
        "server_error",
        "timeout",
        "timed out",
        "temporarily",
        "unavailable",
        "try again",
    ];
    if CONTEXT.iter().any(|p| text.contains(p)) {
        return LlmError::ContextLength(message.to_string());
    }
    let transient = match status {
        Some(s) => matches!(s, 408 | 409 | 425 | 429 | 500..=599),
        None => TRANSIENT.iter().any(|p| text.contains(p)),
    };
    if transient {
        LlmError::Transient {
            message: message.to_string(),
            retry_after,
        }
    } else {
        LlmError::Permanent(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn classification() {
        assert!(classify(Some(429), "slow down", None, None).is_transient());
        assert!(classify(Some(503), "", None, None).is_transient());
        assert!(matches!(
            classify(Some(401), "bad key", None, None),
            LlmError::Permanent(_)
        ));
        assert!(matches!(
            classify(
                Some(400),
                "This model's maximum context length is 8192 tokens",
                Some("context_length_exceeded"),
                None
            ),
            LlmError::ContextLength(_)
        ));
        assert!(classify(None, "Rate limit reached", None, None).is_transient());
        assert!(matches!(
            classify(None, "model not found", None, None),
            LlmError::Permanent(_)
        ));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        let d = parse_retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(25) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn huge_retry_after_saturates_instead_of_panicking() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("1e20"));
        assert_eq!(parse_retry_after(&h), Some(Duration::MAX));
        h.insert("retry-after", HeaderValue::from_static("inf"));
        assert_eq!(parse_retry_after(&h), None);
        h.insert("retry-after-ms", HeaderValue::from_static("1e300"));
        assert_eq!(parse_retry_after(&h), Some(Duration::MAX));
    }

    #[test]
    fn error_bodies_in_every_shape() {
        let (m, c) = error_fields(
            r#"{"error":{"message":"nope","type":"invalid_request_error","code":"model_not_found"}}"#,
        );
        assert_eq!(m, "nope");
        assert_eq!(c.as_deref(), Some("model_not_found invalid_request_error"));
        assert_eq!(
            error_fields(r#"{"error":"model 'x' not found"}"#).0,
            "model 'x' not found"
        );
        assert_eq!(
            error_fields(r#"{"object":"error","message":"overloaded"}"#).0,
            "overloaded"
        );
        assert_eq!(error_fields("<html>502</html>").0, "<html>502</html>");
        assert!(in_band_error(&serde_json::json!({"choices": [], "error": null})).is_none());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let c = HttpClient::new(HttpConfig {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            ..HttpConfig::default()
        })
        .unwrap();
        for attempt in 0..30 {
            let d = c.backoff(attempt);
            let cap =
                Duration::from_millis(100 * (1u64 << attempt.min(20))).min(Duration::from_secs(1));
            assert!(d >= cap / 2 && d <= cap, "{attempt}: {d:?}");
        }
        assert!(HttpClient::new(HttpConfig {
            max_concurrency: 0,
            ..HttpConfig::default()
        })
        .is_err());
    }

    #[test]
    fn join_url_keeps_the_query_after_the_path() {
        for (base, path, joined) in [
            (
                "http://h/v1?key=abc",
                "/chat/completions",
                "http://h/v1/chat/completions?key=abc",
            ),
            (
                "http://h/v1/?key=abc&v=2",
                "chat/completions",
                "http://h/v1/chat/completions?key=abc&v=2",
            ),
            (
                "http://h:1/v1/",
                "chat/completions",
                "http://h:1/v1/chat/completions",
            ),
            ("http://h:1/v1//", "/embeddings", "http://h:1/v1/embeddings"),
            ("http://h:1/v1", "embeddings", "http://h:1/v1/embeddings"),
            ("  https://h/v1  ", "embeddings", "https://h/v1/embeddings"),
            (
                "http://localhost:11434",
                "api/chat",
                "http://localhost:11434/api/chat",
            ),
            (
                "http://localhost:11434/",
                "api/chat",
                "http://localhost:11434/api/chat",
            ),
            ("http://h?key=a", "api/chat", "http://h/api/chat?key=a"),
            ("http://h/v1#part", "embeddings", "http://h/v1/embeddings"),
            (
                "http://h/v1?k=a#part",
                "embeddings",
                "http://h/v1/embeddings?k=a",
            ),
            (
                "http://u:p@h/v1",
                "embeddings",
                "http://u:p@h/v1/embeddings",
            ),
            (
                "http://h/a%20b/v1",
                "embeddings",
                "http://h/a%20b/v1/embeddings",
            ),
        ] {
            assert_eq!(join_url(base, path).unwrap(), joined, "{base} + {path}");
        }
    }

    #[test]
    fn join_url_refuses_non_http_bases_without_quoting_secrets() {
        for base in [
            "localhost:1/v1",
            "ftp://me:hunter2@h/v1?key=sk-secret",
            "http://me:hunter2@/v1?key=sk-secret",
            "",
            "h/v1?key=sk-secret",
        ] {
            let err = join_url(base, "x").unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(matches!(err, LlmError::Permanent(_)), "{shown}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("sk-secret"),
                "{shown}"
            );
        }
    }
}
