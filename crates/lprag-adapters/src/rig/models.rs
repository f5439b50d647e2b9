//! rig's provider models as lprag's parts: [`RigEncoder`], [`RigChat`], [`RigReranker`].

use async_trait::async_trait;
use lprag_core::{Embeddings, Encoder, Error, Reranker, Result};
use lprag_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Role, TextStream, Usage};
use rig_core::completion::{CompletionRequest, FinishReason, Message};
use rig_core::error::ProviderError;
use rig_core::operation::{Completion, Embedding, Rerank, RerankRequest};
use rig_core::streaming::{Item, StreamEvent};
use rig_core::DynModel;

/// A rig model's name: its id, else its provider's.
fn model_name<Op: rig_core::wire::Operation>(model: &DynModel<Op>) -> String {
    model.id().unwrap_or_else(|| model.name()).to_string()
}

/// A rig failure as lprag's: transient when rig says it is worth retrying.
fn core_error(component: &str, e: ProviderError) -> Error {
    if e.is_retryable() {
        Error::transient(component, e)
    } else {
        Error::backend(component, e)
    }
}

/// A rig embedding model (`DynModel<Embedding>`: OpenAI, Cohere, Gemini, Ollama, a local
/// runtime…) as an lprag [`Encoder`]. Texts go in batches of the model's
/// `max_documents` (all at once when it declares none); vectors come back as `f32`,
/// L2-normalised (lprag's retrievers score by dot product).
#[derive(Clone)]
pub struct RigEncoder {
    model: DynModel<Embedding>,
    name: String,
    dim: usize,
}

impl RigEncoder {
    /// Wrap `model`, whose width its capabilities declare (`ndims`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the model declares no width: use
    /// [`RigEncoder::with_dimension`] or [`RigEncoder::probe`].
    pub fn new(model: impl Into<DynModel<Embedding>>) -> Result<Self> {
        let model = model.into();
        let caps = model.capabilities();
        let dim = caps.declared.filter(|&d| d > 0).unwrap_or(caps.ndims);
        if dim == 0 {
            return Err(Error::invalid(
                format!("rig embedding model {:?}", model_name(&model)),
                "declares no vector width; use RigEncoder::with_dimension or RigEncoder::probe",
            ));
        }
        Ok(Self::with_dimension(model, dim))
    }

    /// Wrap `model`, whose vectors have `dim` entries (checked on every answer).
    pub fn with_dimension(model: impl Into<DynModel<Embedding>>, dim: usize) -> Self {
        let model = model.into();
        Self {
            name: format!("rig:{}", model_name(&model)),
            model,
            dim,
        }
    }

    /// Wrap `model`, learning its width by embedding one short text (one request).
    ///
    /// # Errors
    /// The model's, and [`Error::InvalidInput`] when it returns no vector or an empty one.
    pub async fn probe(model: impl Into<DynModel<Embedding>>) -> Result<Self> {
        let model = model.into();
        let name = model_name(&model);
        let response = model
            .call(vec!["width probe".to_string()])
            .await
            .map_err(|e| core_error("rig embedding model", e))?;
        let dim = response.embeddings.first().map_or(0, |e| e.vec.len());
        if dim == 0 {
            return Err(Error::invalid(
                format!("rig embedding model {name:?}"),
                "returned no vector for one text",
            ));
        }
        Ok(Self::with_dimension(model, dim))
    }

    /// The wrapped model.
    pub fn model(&self) -> &DynModel<Embedding> {
        &self.model
    }
}

impl std::fmt::Debug for RigEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RigEncoder")
            .field("name", &self.name)
            .field("dim", &self.dim)
            .finish()
    }
}

#[async_trait]
impl Encoder for RigEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    /// The provider and model, and the width: a saved index built with another rig model
    /// of the same width is refused on load.
    fn fingerprint(&self) -> Option<String> {
        Some(format!(
            "rig:{}:{}:{}",
            self.model.name(),
            self.model.id().unwrap_or_default(),
            self.dim
        ))
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        let location = || format!("rig embedding model {:?}", self.name);
        let batch = match self.model.capabilities().max_documents {
            0 => texts.len().max(1),
            n => n,
        };
        let mut data = Vec::with_capacity(texts.len() * self.dim);
        for group in texts.chunks(batch) {
            let response = self
                .model
                .call(group.to_vec())
                .await
                .map_err(|e| core_error("rig embedding model", e))?;
            if response.embeddings.len() != group.len() {
                return Err(Error::DimensionMismatch {
                    location: format!("{} rows", location()),
                    expected: group.len(),
                    actual: response.embeddings.len(),
                });
            }
            for e in &response.embeddings {
                if e.vec.len() != self.dim {
                    return Err(Error::DimensionMismatch {
                        location: format!("{} vector width", location()),
                        expected: self.dim,
                        actual: e.vec.len(),
                    });
                }
                if e.vec.iter().any(|x| !x.is_finite()) {
                    return Err(Error::invalid(location(), "returned a non-finite value"));
                }
                data.extend(e.vec.iter().map(|&x| x as f32));
            }
        }
        let mut out = Embeddings::new(self.dim, data)?;
        out.normalize();
        Ok(out)
    }
}

/// A rig completion model (`DynModel<Completion>`: any of rig's providers) as an lprag
/// [`ChatModel`], for LLM chunking, question writing and answers (`lprag_llm`). Wrap it
/// in `lprag_llm::CachedChat` to keep what was paid for across runs.
///
/// Messages map role for role (system, user, assistant); `temperature` and `max_tokens`
/// pass through; `complete_stream` streams through rig's own stream. Failures rig calls retryable are [`LlmError::Transient`], the others
/// [`LlmError::Permanent`].
#[derive(Clone)]
pub struct RigChat {
    model: DynModel<Completion>,
    name: String,
    backend: String,
    context_tokens: Option<u32>,
}

impl RigChat {
    /// Wrap `model`.
    pub fn new(model: impl Into<DynModel<Completion>>) -> Self {
        let model = model.into();
        Self {
            name: model_name(&model),
            backend: format!("rig:{}", model.name()),
            model,
            context_tokens: None,
        }
    }

    /// Tell lprag the model's context window (prompt and answer, in tokens), which sizes
    /// `LlmChunker`'s windows; rig does not report it.
    pub fn context_tokens(mut self, tokens: u32) -> Self {
        self.context_tokens = Some(tokens);
        self
    }

    /// The wrapped model.
    pub fn model(&self) -> &DynModel<Completion> {
        &self.model
    }
}

impl std::fmt::Debug for RigChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RigChat")
            .field("name", &self.name)
            .field("backend", &self.backend)
            .finish()
    }
}

/// lprag's request as rig's: the messages in order, role for role.
fn rig_request(request: &ChatRequest) -> std::result::Result<CompletionRequest, LlmError> {
    let messages: Vec<Message> = request
        .messages
        .iter()
        .map(|m| match m.role {
            Role::System => Message::system(m.content.clone()),
            Role::User => Message::user(m.content.clone()),
            Role::Assistant => Message::assistant(m.content.clone()),
        })
        .collect();
    let Some(first) = messages.first().cloned() else {
        return Err(LlmError::Permanent(
            "a chat request with no messages".into(),
        ));
    };
    let mut out = CompletionRequest::new(first)
        .temperature(request.temperature.map(f64::from))
        .max_tokens(request.max_tokens.map(u64::from));
    out.chat_history = messages;
    Ok(out)
}

/// A rig completion failure as lprag's: transient when rig says it is worth retrying.
fn llm_error(model: &str, e: ProviderError) -> LlmError {
    let message = format!("rig completion model {model:?}: {e}");
    if e.is_retryable() {
        LlmError::transient(message)
    } else {
        LlmError::Permanent(message)
    }
}

fn finish_reason(reason: FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(s) => s,
        other => format!("{other:?}").to_lowercase(),
    }
}

#[async_trait]
impl ChatModel for RigChat {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &str {
        &self.backend
    }

    fn context_tokens(&self) -> Option<u32> {
        self.context_tokens
    }

    async fn complete(&self, request: &ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
        let response = self
            .model
            .call(rig_request(request)?)
            .await
            .map_err(|e| llm_error(&self.name, e))?;
        let usage = match (response.usage.input_tokens, response.usage.output_tokens) {
            (Some(prompt), completion) => Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion.unwrap_or(0),
            }),
            _ => None,
        };
        Ok(ChatResponse {
            content: response.text(),
            usage,
            finish_reason: response.finish_reason().map(finish_reason),
            cached: false,
        })
    }

    /// rig's own stream of the reply (`Model::stream`): each text fragment is one piece;
    /// reasoning, tool-call and unmodelled events are left out; a failure ends the stream.
    async fn complete_stream(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<TextStream, LlmError> {
        use futures::StreamExt;
        let name = self.name.clone();
        let streamed = self
            .model
            .stream(rig_request(request)?)
            .map_err(|e| llm_error(&name, e))?;
        Ok(Box::pin(streamed.filter_map(move |item| {
            let piece = match item {
                Ok(Item::Event(StreamEvent::Text { text, .. })) if !text.is_empty() => {
                    Some(Ok(text))
                }
                Ok(_) => None,
                Err(e) => Some(Err(llm_error(&name, e))),
            };
            std::future::ready(piece)
        })))
    }
}

/// A rig rerank model (`DynModel<Rerank>`: Cohere, Voyage, Jina, a llama.cpp server…) as
/// an lprag [`Reranker`], for `lprag::Reranked`. Scores are the provider's relevance
/// scores, put back in input order.
#[derive(Clone)]
pub struct RigReranker {
    model: DynModel<Rerank>,
    name: String,
}

impl RigReranker {
    /// Wrap `model`.
    pub fn new(model: impl Into<DynModel<Rerank>>) -> Self {
        let model = model.into();
        Self {
            name: format!("rig:{}", model_name(&model)),
            model,
        }
    }
}

impl std::fmt::Debug for RigReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RigReranker")
            .field("name", &self.name)
            .finish()
    }
}

#[async_trait]
impl Reranker for RigReranker {
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let location = || format!("reranker {:?}", self.name);
        let batch = match self.model.capabilities().max_documents {
            0 => texts.len().max(1),
            n => n,
        };
        let mut scores = vec![f32::NAN; texts.len()];
        for (g, group) in texts.chunks(batch).enumerate() {
            let request = RerankRequest {
                query: query.to_string(),
                documents: group.iter().map(|t| t.to_string()).collect(),
            };
            let response = self
                .model
                .call(request)
                .await
                .map_err(|e| core_error("rig rerank model", e))?;
            for r in response.results {
                let Some(slot) = (r.index < group.len())
                    .then(|| scores.get_mut(g * batch + r.index))
                    .flatten()
                else {
                    return Err(Error::invalid(
                        location(),
                        format!("scored document {} of {}", r.index, group.len()),
                    ));
                };
                *slot = r.relevance_score as f32;
            }
        }
        if let Some(i) = scores.iter().position(|s| s.is_nan()) {
            return Err(Error::invalid(
                location(),
                format!("returned no score for text {i} of {}", texts.len()),
            ));
        }
        lprag_core::check_rerank_scores(&self.name, texts.len(), &scores)?;
        Ok(scores)
    }
}
