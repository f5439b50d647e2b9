//! Running many LLM calls of one stage: bounded concurrency, progress, failures that do
//! not throw away the calls that succeeded, re-asking once when an answer cannot be read,
//! and the offline fallback for items whose answer stays unreadable.

use std::future::Future;

use futures::StreamExt;
use lprag_core::Progress;

use crate::LlmError;

/// What an LLM component does with an item (a document, a batch, a chunk, a pair) whose
/// answer still cannot be parsed after its parse retries.
///
/// Transport failures (the server is down, the key is wrong) are never covered by a
/// fallback: they fail the stage with an [`LlmError::Stage`], and the response cache keeps the
/// calls that succeeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnparseable {
    /// Use the component's offline counterpart for that item (the sentence chunker, the
    /// heuristic questions, the co-occurrence extractor, the centroid merge rule), finish
    /// the stage, count the item in [`crate::StageUsage::fallbacks`] and warn once per
    /// stage through the component's progress sink. The default: a weak model costs
    /// quality on some items, never the build.
    #[default]
    Fallback,
    /// Fail the stage with an [`LlmError::Stage`] naming the first unreadable item (its raw
    /// answer included), after every other call has run and been cached.
    Fail,
}

/// The outcome of one item's LLM call under [`OnUnparseable::Fallback`].
pub(crate) enum Parsed<T> {
    /// The answer was read.
    Read(T),
    /// It could not be; the reason, for the stage's warning.
    Unreadable(String),
}

/// Count the items that fell back, warn once for the stage, and return the indices that
/// need the offline path.
pub(crate) fn fallback_items<T>(
    settings: &Settings,
    stage: &str,
    usage_stage: &str,
    what: &str,
    offline: &str,
    results: &[Parsed<T>],
) -> Vec<usize> {
    let failed: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, Parsed::Unreadable(_)))
        .map(|(i, _)| i)
        .collect();
    if let Some(&first) = failed.first() {
        if let Some(m) = &settings.meter {
            m.record_fallbacks(usage_stage, failed.len() as u64);
        }
        let reason = match &results[first] {
            Parsed::Unreadable(r) => r.as_str(),
            Parsed::Read(_) => "",
        };
        tracing::info!(
            target: "lprag::llm",
            stage,
            fallbacks = failed.len(),
            items = results.len(),
            first_reason = reason,
            "unparseable LLM answers fell back to the offline component"
        );
        settings.progress.warn(&format!(
            "{stage}: the answers for {} of {} {what} could not be parsed after {} retr{}; \
             {offline} was used for them (first: {reason}). Use a stronger model, or \
             `on_unparseable(OnUnparseable::Fail)` to stop instead",
            failed.len(),
            results.len(),
            settings.parse_retries,
            if settings.parse_retries == 1 {
                "y"
            } else {
                "ies"
            },
        ));
    }
    failed
}

/// Run `call(i)` for `i in 0..n`, at most `concurrency` at once, reporting progress under
/// `stage`. All calls run even when some fail; results come back in order. Calls finish in
/// any order: a slow answer holds back neither the next calls nor the progress count (an
/// ordered buffer would keep its finished successors queued behind it, and with them the
/// free places for new calls).
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
    let mut out: Vec<Option<Result<T, LlmError>>> = (0..n).map(|_| None).collect();
    let call = &call;
    let mut stream = futures::stream::iter(0..n)
        .map(|i| async move { (i, call(i).await) })
        .buffer_unordered(concurrency.max(1));
    while let Some((i, r)) = stream.next().await {
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
        out[i] = Some(r);
    }
    progress.finish(stage);
    out.into_iter().flatten().collect()
}

/// Split results into successes, or an [`LlmError::Stage`] naming the first failure.
pub(crate) fn collect<T>(
    stage: &str,
    results: Vec<Result<T, LlmError>>,
    describe: impl Fn(usize) -> String,
) -> Result<Vec<T>, LlmError> {
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
        Some((i, e)) => Err(LlmError::Stage {
            stage: stage.to_string(),
            failed,
            succeeded: total - failed,
            total,
            first_item: describe(i),
            first: Box::new(e),
        }),
    }
}

/// What every LLM component holds: the model, the prompts, where tokens and progress go,
/// and the sampling settings of its calls.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) model: std::sync::Arc<dyn crate::ChatModel>,
    pub(crate) prompts: std::sync::Arc<crate::Prompts>,
    pub(crate) meter: Option<std::sync::Arc<crate::TokenMeter>>,
    pub(crate) progress: std::sync::Arc<dyn Progress>,
    pub(crate) concurrency: usize,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_tokens: Option<u32>,
    /// `true` once the caller set `max_tokens` (a component may size its default per
    /// call, as [`crate::LlmChunker`] does, only while this is `false`).
    pub(crate) max_tokens_set: bool,
    pub(crate) parse_retries: u32,
    pub(crate) on_unparseable: OnUnparseable,
}

impl Settings {
    /// What determines the answers: the model (backend and name), the prompts and the
    /// sampling and parsing settings (not the meter, progress or concurrency).
    pub(crate) fn fingerprint(&self) -> String {
        format!(
            "{}/{} {:?} t={:?} max={:?} retries={} {:?}",
            self.model.backend(),
            self.model.name(),
            self.prompts,
            self.temperature,
            self.max_tokens,
            self.parse_retries,
            self.on_unparseable
        )
    }

    /// The papers' prompts, temperature 0, 8 calls in flight, at most `max_tokens` per
    /// answer, no meter, no progress.
    pub(crate) fn new(model: std::sync::Arc<dyn crate::ChatModel>, max_tokens: u32) -> Self {
        Self {
            model,
            prompts: std::sync::Arc::new(crate::Prompts::default()),
            meter: None,
            progress: std::sync::Arc::new(lprag_core::NoProgress),
            concurrency: 8,
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            max_tokens_set: false,
            parse_retries: 1,
            on_unparseable: OnUnparseable::Fallback,
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

impl Settings {
    /// Call the model and parse its answer with `parse`. An answer that cannot be read is
    /// shown back to the model with the reason and the request to answer again in the
    /// asked format, up to `parse_retries` times (each retry is a different request, so a
    /// response cache stores it separately). When the last answer is still unreadable, the
    /// model forgets the whole conversation ([`crate::ChatModel::forget`]: a cache deletes
    /// it), so that a rerun asks again rather than replaying the failure.
    ///
    /// Returns `Ok(Parsed::Unreadable)` for an answer still unreadable under
    /// [`OnUnparseable::Fallback`], and the [`LlmError::Parse`] of the last answer under
    /// [`OnUnparseable::Fail`]. A request the server refuses as longer than the model's
    /// context ([`LlmError::ContextLength`]: typically a retry that carries a long unreadable
    /// first answer) also counts as unreadable under [`OnUnparseable::Fallback`]: that item
    /// cannot be answered by this model, the others can. Other transport errors are
    /// returned as they are.
    pub(crate) async fn call_parsed<T>(
        &self,
        stage: &str,
        request: crate::ChatRequest,
        what: impl Fn() -> String,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Parsed<T>, LlmError> {
        match self
            .call_parsed_or_split(stage, request, what, parse, false)
            .await?
        {
            Attempt::Answered(p) => Ok(p),
            // Never returned when splitting is not asked for.
            Attempt::TooLong { why, .. } => Ok(Parsed::Unreadable(why.to_string())),
        }
    }

    /// [`Settings::call_parsed`], and with `split` set, two more outcomes for an input
    /// that can be split and asked again in smaller pieces: an answer the backend cut at
    /// the token limit ([`crate::ChatResponse::truncated`], at any attempt; the answer is
    /// not parsed, as whatever it lost would be lost silently), and a first request the
    /// server refuses as longer than its context ([`LlmError::ContextLength`]; a parse
    /// retry refused so is handled as [`Settings::call_parsed`] does). Nothing is
    /// forgotten for those: a rerun replays the cut answer and splits the same way.
    pub(crate) async fn call_parsed_or_split<T>(
        &self,
        stage: &str,
        request: crate::ChatRequest,
        what: impl Fn() -> String,
        parse: impl Fn(&str) -> Result<T, String>,
        split: bool,
    ) -> Result<Attempt<T>, LlmError> {
        let mut request = request;
        let mut attempt = 0;
        let mut asked: Vec<crate::ChatRequest> = Vec::new();
        // Nothing of a conversation that ends unreadable is kept: a rerun asks again.
        let forget = |asked: &[crate::ChatRequest]| asked.iter().for_each(|r| self.model.forget(r));
        loop {
            let response = match self.call(stage, &request).await {
                Ok(r) => r,
                Err(LlmError::ContextLength(why)) if split && attempt == 0 => {
                    return Ok(Attempt::TooLong {
                        why: TooLong::Context(why),
                        asked,
                    });
                }
                Err(LlmError::ContextLength(why))
                    if self.on_unparseable == OnUnparseable::Fallback =>
                {
                    forget(&asked);
                    let after = if attempt > 0 {
                        format!(" (asking again after {attempt} unreadable answer(s))")
                    } else {
                        String::new()
                    };
                    return Ok(Attempt::Answered(Parsed::Unreadable(format!(
                        "{}: the request is longer than the model's context{after}: {why}",
                        what()
                    ))));
                }
                Err(e) => return Err(e),
            };
            asked.push(request.clone());
            if split && response.truncated() {
                return Ok(Attempt::TooLong {
                    why: TooLong::Truncated {
                        max_tokens: request.max_tokens,
                        raw: response.content,
                    },
                    asked,
                });
            }
            match parse(&response.content) {
                Ok(v) => return Ok(Attempt::Answered(Parsed::Read(v))),
                Err(reason) if attempt < self.parse_retries => {
                    attempt += 1;
                    let again = self
                        .prompts
                        .reformat_user
                        .render(&[("reason", reason.as_str())])?;
                    request
                        .messages
                        .push(crate::ChatMessage::assistant(response.content.clone()));
                    request.messages.push(crate::ChatMessage::user(again));
                }
                Err(reason) => {
                    forget(&asked);
                    let e = parse_error(what(), reason, &response);
                    return match self.on_unparseable {
                        OnUnparseable::Fail => Err(e),
                        OnUnparseable::Fallback => {
                            Ok(Attempt::Answered(Parsed::Unreadable(unreadable_reason(&e))))
                        }
                    };
                }
            }
        }
    }
}

/// The short account of an unreadable answer, for the stage's warning.
pub(crate) fn unreadable_reason(e: &LlmError) -> String {
    match e {
        LlmError::Parse { what, reason, raw } => {
            let head: String = raw.chars().take(160).collect();
            let more = if head.len() < raw.len() { "…" } else { "" };
            format!("{what}: {reason}; the answer began {head:?}{more}")
        }
        other => other.to_string(),
    }
}

/// The outcome of [`Settings::call_parsed_or_split`].
pub(crate) enum Attempt<T> {
    /// Read, or unreadable under [`OnUnparseable::Fallback`].
    Answered(Parsed<T>),
    /// The input is too long for one call: split it and ask again.
    TooLong {
        /// Why.
        why: TooLong,
        /// The requests of this conversation that were answered (for
        /// [`crate::ChatModel::forget`] when the input cannot be split further).
        asked: Vec<crate::ChatRequest>,
    },
}

/// Why an input has to be split.
#[derive(Debug)]
pub(crate) enum TooLong {
    /// The answer hit the token limit (`max_tokens` of the request that was cut).
    Truncated {
        /// The limit the request carried.
        max_tokens: Option<u32>,
        /// The cut answer.
        raw: String,
    },
    /// The server refused the request as longer than its context.
    Context(String),
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated {
                max_tokens: Some(n),
                ..
            } => write!(f, "the answer hit the token limit ({n} tokens)"),
            Self::Truncated { .. } => write!(f, "the answer hit the backend's token limit"),
            Self::Context(why) => {
                write!(f, "the request is longer than the model's context: {why}")
            }
        }
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

        /// Times an unreadable answer is shown back to the model with a request to answer
        /// again in the asked format (the [`crate::Prompts`]' `reformat_user` turn).
        /// Default 1; 0 never re-asks.
        pub fn parse_retries(mut self, n: u32) -> Self {
            self.settings.parse_retries = n;
            self
        }

        /// What to do with an item whose answer is still unreadable after the parse
        /// retries: use the offline counterpart (default) or fail the stage.
        pub fn on_unparseable(mut self, policy: $crate::OnUnparseable) -> Self {
            self.settings.on_unparseable = policy;
            self
        }

        /// Token limit per answer (`None`: the backend's default, which for some local
        /// servers is the whole context: a model that never stops then runs until the
        /// request times out). The default of each component is in its docs.
        pub fn max_tokens(mut self, n: Option<u32>) -> Self {
            self.settings.max_tokens = n;
            self.settings.max_tokens_set = true;
            self
        }
    };
}
pub(crate) use settings_methods;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    /// Progress that records every count it is shown.
    #[derive(Default)]
    struct Counts(Mutex<Vec<u64>>);

    impl Progress for Counts {
        fn update(&self, _stage: &str, done: u64, _message: &str) {
            self.0.lock().unwrap().push(done);
        }
    }

    #[tokio::test]
    async fn a_slow_call_holds_back_neither_later_calls_nor_the_progress_count() {
        // Call 0 finishes only after call 5 has run. With two places, an ordered buffer
        // keeps call 1's finished result queued behind call 0, never starts call 5, and
        // hangs; the timeout turns that into a failure.
        let last_ran = tokio::sync::Notify::new();
        let started = AtomicU64::new(0);
        let progress = Counts::default();
        let results = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            run_all(6, 2, "test", &progress, |i| {
                let (last_ran, started) = (&last_ran, &started);
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    match i {
                        0 => last_ran.notified().await,
                        5 => last_ran.notify_one(),
                        _ => tokio::task::yield_now().await,
                    }
                    if i == 3 {
                        Err(LlmError::transient("HTTP 503"))
                    } else {
                        Ok(i * 10)
                    }
                }
            }),
        )
        .await
        .expect("run_all waited on its slowest call");
        let values: Vec<Option<usize>> = results.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(
            values,
            vec![Some(0), Some(10), Some(20), None, Some(40), Some(50)],
            "results come back in call order"
        );
        assert_eq!(started.load(Ordering::SeqCst), 6);
        // The count rose with every finished call, before the slow first one was done.
        assert_eq!(*progress.0.lock().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    }
}
