//! An OpenAI-compatible `/v1/embeddings` client as an [`lprag_core::Encoder`].

use async_trait::async_trait;
use lprag_core::{Embeddings, Encoder, Error, Result};
use serde_json::{json, Value};

use crate::http::{HttpClient, HttpConfig};
use crate::{ApiKey, LlmError};

/// Where the embedding server is and what it returns.
#[derive(Clone)]
pub struct OpenAiEmbeddingsConfig {
    /// Base URL including the API version (`/embeddings` is appended).
    pub base_url: String,
    /// The embedding model, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Bearer token, if the server needs one.
    pub api_key: Option<ApiKey>,
    /// Vector width; `None` lets [`OpenAiEmbeddings::connect`] ask the server.
    pub dimension: Option<usize>,
    /// Texts per request. Default 64.
    pub batch_size: usize,
    /// Batch requests of one [`Encoder::embed`] call in flight at once (the [`HttpClient`]'s
    /// `max_concurrency` bounds all requests through it as well). Default 4; 1 sends one
    /// batch after the other, as before this setting existed.
    pub concurrency: usize,
    /// L2-normalise every vector (lprag's retrievers compare by cosine). Default `true`.
    pub normalize: bool,
    /// Timeouts, retries, concurrency.
    pub http: HttpConfig,
}

impl std::fmt::Debug for OpenAiEmbeddingsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddingsConfig")
            .field("base_url", &crate::secret::redact_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .field("concurrency", &self.concurrency)
            .field("normalize", &self.normalize)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiEmbeddingsConfig {
    /// [`OpenAiEmbeddingsConfig::concurrency()`]'s default.
    pub const DEFAULT_CONCURRENCY: usize = 4;

    /// `model` at `base_url`, dimension discovered on connect.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            dimension: None,
            batch_size: 64,
            concurrency: Self::DEFAULT_CONCURRENCY,
            normalize: true,
            http: HttpConfig::default(),
        }
    }

    /// Set the API key.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Declare the dimension (no probe request needed).
    pub fn dimension(mut self, dim: usize) -> Self {
        self.dimension = Some(dim);
        self
    }

    /// Batch requests in flight at once (at least 1). Default
    /// [`OpenAiEmbeddingsConfig::DEFAULT_CONCURRENCY`].
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
}

/// Remote embeddings through the OpenAI embeddings protocol.
#[derive(Clone)]
pub struct OpenAiEmbeddings {
    url: String,
    model: String,
    name: String,
    api_key: Option<ApiKey>,
    dim: usize,
    batch_size: usize,
    concurrency: usize,
    normalize: bool,
    http: HttpClient,
}

impl std::fmt::Debug for OpenAiEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddings")
            .field("url", &crate::secret::redact_url(&self.url))
            .field("model", &self.model)
            .field("name", &self.name)
            .field("api_key", &self.api_key)
            .field("dim", &self.dim)
            .field("batch_size", &self.batch_size)
            .field("concurrency", &self.concurrency)
            .field("normalize", &self.normalize)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiEmbeddings {
    /// A client whose configuration names the dimension.
    pub fn new(config: OpenAiEmbeddingsConfig) -> Result<Self> {
        let dim = config.dimension.ok_or_else(|| {
            Error::invalid(
                "OpenAiEmbeddingsConfig::dimension",
                "unknown; set it or use OpenAiEmbeddings::connect to ask the server",
            )
        })?;
        let http = HttpClient::new(config.http.clone())?;
        Self::build(config, dim, http)
    }

    /// A client whose dimension is read off one probe request when not configured.
    pub async fn connect(config: OpenAiEmbeddingsConfig) -> Result<Self> {
        let http = HttpClient::new(config.http.clone())?;
        match config.dimension {
            Some(dim) => Self::build(config, dim, http),
            None => {
                let mut probe = Self::build(config, 0, http)?;
                let v = probe.request(&["dimension probe".to_string()]).await?;
                probe.dim = v[0].len();
                if probe.dim == 0 {
                    return Err(Error::invalid(
                        crate::secret::redact_url(&probe.url),
                        "the server returned an empty embedding",
                    ));
                }
                Ok(probe)
            }
        }
    }

    fn build(config: OpenAiEmbeddingsConfig, dim: usize, http: HttpClient) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::invalid(
                "OpenAiEmbeddingsConfig::batch_size",
                "must be at least 1",
            ));
        }
        if config.concurrency == 0 {
            return Err(Error::invalid(
                "OpenAiEmbeddingsConfig::concurrency",
                "must be at least 1",
            ));
        }
        Ok(Self {
            url: crate::http::join_url(&config.base_url, "embeddings")?,
            name: format!("openai-embeddings:{}", config.model),
            model: config.model,
            api_key: config.api_key,
            dim,
            batch_size: config.batch_size,
            concurrency: config.concurrency,
            normalize: config.normalize,
            http,
        })
    }

    /// Send at most `n` batch requests at once (at least 1). See
    /// [`OpenAiEmbeddingsConfig::concurrency()`].
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let body = json!({ "model": self.model, "input": texts });
        let n = texts.len();
        let rows = self
            .http
            .post_json(&self.url, self.api_key.as_ref(), &body, |v| {
                parse_embeddings(v, n)
            })
            .await?;
        Ok(rows)
    }
}

pub(crate) fn parse_embeddings(
    v: Value,
    expected: usize,
) -> std::result::Result<Vec<Vec<f32>>, LlmError> {
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| {
        LlmError::Permanent(format!("embeddings response has no data array: {v}"))
    })?;
    if data.len() != expected {
        return Err(LlmError::Permanent(format!(
            "asked for {expected} embeddings, got {}",
            data.len()
        )));
    }
    let mut rows: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (pos, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map(|i| i as usize)
            .unwrap_or(pos);
        let emb = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Permanent(format!("item {pos} has no embedding array")))?;
        let row: Option<Vec<f32>> = emb.iter().map(|x| x.as_f64().map(|x| x as f32)).collect();
        let row = row.ok_or_else(|| {
            LlmError::Permanent(format!("item {pos} has a non-numeric embedding value"))
        })?;
        match rows.get_mut(index) {
            Some(slot @ None) => *slot = Some(row),
            _ => {
                return Err(LlmError::Permanent(format!(
                    "embedding index {index} is out of range or repeated"
                )))
            }
        }
    }
    Ok(rows.into_iter().map(|r| r.unwrap_or_default()).collect())
}

#[async_trait]
impl Encoder for OpenAiEmbeddings {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    /// Batches of [`OpenAiEmbeddingsConfig::batch_size`] texts, up to
    /// [`OpenAiEmbeddingsConfig::concurrency()`] requests in flight, rows kept in the order
    /// of `texts`. The first batch that fails (after the client's retries) fails the call:
    /// no partial result, and the requests still in flight are dropped.
    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        use futures::StreamExt;
        let mut data = Vec::with_capacity(texts.len() * self.dim);
        // The futures are made first (they do nothing until polled): a closure inside
        // the stream would trip the compiler's `Send` check of this async-trait method.
        let requests: Vec<_> = texts
            .chunks(self.batch_size)
            .map(|batch| self.request(batch))
            .collect();
        let mut batches = futures::stream::iter(requests).buffered(self.concurrency.max(1));
        let mut b = 0;
        while let Some(rows) = batches.next().await {
            for (i, row) in rows?.into_iter().enumerate() {
                if row.len() != self.dim {
                    return Err(Error::DimensionMismatch {
                        location: format!(
                            "{} embedding of text {}",
                            crate::secret::redact_url(&self.url),
                            b * self.batch_size + i
                        ),
                        expected: self.dim,
                        actual: row.len(),
                    });
                }
                data.extend(row);
            }
            b += 1;
        }
        let mut e = Embeddings::new(self.dim, data)?;
        if self.normalize {
            e.normalize();
        }
        Ok(e)
    }
}
