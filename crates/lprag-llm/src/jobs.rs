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
