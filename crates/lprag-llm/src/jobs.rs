//! Running many LLM calls of one stage: bounded concurrency, progress, and failures that
//! do not throw away the calls that succeeded.

use std::future::Future;

use futures::StreamExt;
use lprag_core::Progress;

use crate::LlmError;

/// Some calls of an indexing stage failed. Every call that succeeded was stored by the
/// response cache (when the model is a [`crate::CachedChat`]), so running the stage again
/// pays only for the failed ones.
#[derive(Debug, thiserror::Error)]
#[error(
    "{stage}: {failed} of {total} LLM calls failed (first: {first_item}: {first}); the {succeeded} \
     that succeeded are kept by the response cache, when one is configured, and a rerun resumes from them"
)]
pub struct StageError {
    /// The stage, e.g. "LLM chunking".
    pub stage: String,
    /// Calls that failed.
    pub failed: usize,
    /// Calls that succeeded.
    pub succeeded: usize,
    /// Calls in all.
    pub total: usize,
    /// What the first failed call was for (e.g. "document `d7`").
    pub first_item: String,
    /// Why it failed.
    #[source]
    pub first: LlmError,
}

/// Run `call(i)` for `i in 0..n`, at most `concurrency` at once, reporting progress under
/// `stage`. All calls run even when some fail; results come back in order.
pub(crate) async fn run_all<T, F, Fut>(
    n: usize,
    concurrency: usize,
    stage: &str,
    progress: &dyn Progress,
    call: F,
) -> Vec<Result<T, LlmError>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T, LlmError>>,
{
    progress.start(stage, Some(n as u64));
    let mut done = 0u64;
    let mut failed = 0u64;
    let mut out = Vec::with_capacity(n);
    let mut stream = futures::stream::iter(0..n)
        .map(&call)
        .buffered(concurrency.max(1));
    while let Some(r) = stream.next().await {
        done += 1;
        if r.is_err() {
            failed += 1;
        }
        let msg = if failed > 0 {
            format!("{failed} failed")
        } else {
            String::new()
        };
        progress.update(stage, done, &msg);
        out.push(r);
    }
    progress.finish(stage);
    out
}

/// Split results into successes, or a [`StageError`] naming the first failure.
pub(crate) fn collect<T>(
    stage: &str,
    results: Vec<Result<T, LlmError>>,
    describe: impl Fn(usize) -> String,
) -> Result<Vec<T>, Box<StageError>> {
    let total = results.len();
    let mut ok = Vec::with_capacity(total);
    let mut first: Option<(usize, LlmError)> = None;
    let mut failed = 0;
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => ok.push(v),
            Err(e) => {
                failed += 1;
                if first.is_none() {
                    first = Some((i, e));
                }
            }
        }
    }
    match first {
        None => Ok(ok),
        Some((i, e)) => Err(Box::new(StageError {
            stage: stage.to_string(),
            failed,
            succeeded: total - failed,
            total,
            first_item: describe(i),
            first: e,
        })),
    }
}

/// What every LLM component holds: the model, the prompts, where tokens and progress go,
/// and the sampling settings of its calls.
pub(crate) struct Settings {
    pub(crate) model: std::sync::Arc<dyn crate::ChatModel>,
    pub(crate) prompts: std::sync::Arc<crate::Prompts>,
    pub(crate) meter: Option<std::sync::Arc<crate::TokenMeter>>,
    pub(crate) progress: std::sync::Arc<dyn Progress>,
    pub(crate) concurrency: usize,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_tokens: Option<u32>,
}

impl Settings {
    /// The papers' prompts, temperature 0, 8 calls in flight, no meter, no progress.
    pub(crate) fn new(model: std::sync::Arc<dyn crate::ChatModel>) -> Self {
        Self {
            model,
            prompts: std::sync::Arc::new(crate::Prompts::default()),
            meter: None,
            progress: std::sync::Arc::new(lprag_core::NoProgress),
            concurrency: 8,
            temperature: Some(0.0),
            max_tokens: None,
        }
    }

    /// A request with these messages and the component's sampling settings.
    pub(crate) fn request(&self, messages: Vec<crate::ChatMessage>) -> crate::ChatRequest {
        crate::ChatRequest {
            messages,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        }
    }

    /// Call the model and count the answer under `stage`.
    pub(crate) async fn call(
        &self,
        stage: &str,
        request: &crate::ChatRequest,
    ) -> Result<crate::ChatResponse, LlmError> {
        let response = self.model.complete(request).await?;
        if let Some(m) = &self.meter {
            m.record(stage, &response);
        }
        Ok(response)
    }
}

/// A parse failure of `response`, noting when the answer was cut by the token limit.
pub(crate) fn parse_error(
    what: String,
    reason: String,
    response: &crate::ChatResponse,
) -> LlmError {
    LlmError::Parse {
        what,
        reason: if response.truncated() {
            format!("{reason} (the answer hit the token limit)")
        } else {
            reason
        },
        raw: response.content.clone(),
    }
}

/// The builder methods shared by the LLM components (they hold `settings: Settings`).
macro_rules! settings_methods {
    ($stage:literal) => {
        /// Use these prompts. They are validated first: a template that lost a
        /// placeholder its component fills in is refused before any call is paid for.
        pub fn with_prompts(
            mut self,
            prompts: std::sync::Arc<$crate::Prompts>,
        ) -> std::result::Result<Self, $crate::LlmError> {
            prompts.validate()?;
            self.settings.prompts = prompts;
            Ok(self)
        }

        #[doc = concat!("Count calls and tokens under the stage `\"", $stage, "\"`.")]
        pub fn with_meter(mut self, meter: std::sync::Arc<$crate::TokenMeter>) -> Self {
            self.settings.meter = Some(meter);
            self
        }

        /// Report progress per call (documents, batches or chunks).
        pub fn with_progress(mut self, progress: std::sync::Arc<dyn lprag_core::Progress>) -> Self {
            self.settings.progress = progress;
            self
        }

        /// Calls in flight at once (the HTTP client has its own limit too). Default 8.
        pub fn concurrency(mut self, n: usize) -> Self {
            self.settings.concurrency = n.max(1);
            self
        }

        /// Sampling temperature (`None`: the backend's default). Default 0.
        pub fn temperature(mut self, t: Option<f32>) -> Self {
            self.settings.temperature = t;
            self
        }

        /// Token limit per answer (`None`: the backend's default).
        pub fn max_tokens(mut self, n: Option<u32>) -> Self {
            self.settings.max_tokens = n;
            self
        }
    };
}
pub(crate) use settings_methods;
