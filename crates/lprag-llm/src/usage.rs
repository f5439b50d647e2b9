//! Token accounting per indexing stage.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::ChatResponse;

/// What one stage (e.g. `"chunking"`, `"queries"`, `"answer"`) spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageUsage {
    /// Completions obtained (paid or from the cache).
    pub calls: u64,
    /// Of those, answered by the response cache (not paid again).
    pub cached_calls: u64,
    /// Prompt tokens of the paid calls, as the backend reported them.
    pub prompt_tokens: u64,
    /// Completion tokens of the paid calls.
    pub completion_tokens: u64,
    /// Paid calls whose backend reported no token counts.
    pub calls_without_usage: u64,
    /// Items (documents, batches, chunks, pairs) whose answer could not be parsed even
    /// after the parse retries and that the offline counterpart handled instead
    /// ([`crate::OnUnparseable::Fallback`]).
    #[serde(default)]
    pub fallbacks: u64,
    /// Prompt tokens the cached answers cost when they were paid, as their backend reported
    /// them then (answers cached without counts add nothing): what a rerun saved, and
    /// what a run resumed from a cache cost in all.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Completion tokens the cached answers cost when they were paid.
    #[serde(default)]
    pub cached_completion_tokens: u64,
    /// Items (documents, for `"chunking"`) longer than the model's context budget, split
    /// into windows before the model saw them, so that nothing was cut.
    #[serde(default)]
    pub windowed_items: u64,
    /// Windows sent to the model (an item that fits is one window; a window split again
    /// after a cut answer adds its pieces).
    #[serde(default)]
    pub windows: u64,
    /// Answers cut at the token limit (finish reason `length`) whose window was split in
    /// two and asked again instead of being read incomplete.
    #[serde(default)]
    pub truncated_retries: u64,
    /// Requests the server refused as longer than its context whose window was split in
    /// two and asked again.
    #[serde(default)]
    pub context_retries: u64,
}

impl StageUsage {
    /// Prompt plus completion tokens.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Thread-safe token counter shared by the LLM components of one pipeline. Clone the
/// `Arc` it lives in; read it with [`TokenMeter::snapshot`].
#[derive(Debug, Default)]
pub struct TokenMeter {
    stages: Mutex<BTreeMap<String, StageUsage>>,
}

impl TokenMeter {
    /// An empty meter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one completion for `stage`.
    pub fn record(&self, stage: &str, response: &ChatResponse) {
        let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        let s = stages.entry(stage.to_string()).or_default();
        s.calls += 1;
        if response.cached {
            s.cached_calls += 1;
            if let Some(u) = response.usage {
                s.cached_prompt_tokens += u.prompt_tokens;
                s.cached_completion_tokens += u.completion_tokens;
            }
        } else if let Some(u) = response.usage {
            s.prompt_tokens += u.prompt_tokens;
            s.completion_tokens += u.completion_tokens;
        } else {
            s.calls_without_usage += 1;
        }
    }

    /// Count `n` items of `stage` that fell back to the offline counterpart.
    pub fn record_fallbacks(&self, stage: &str, n: u64) {
        let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        stages.entry(stage.to_string()).or_default().fallbacks += n;
    }

    /// Count what a stage split to fit the model's context: `windowed_items` items split
    /// into `windows` windows in all, `truncated_retries` windows split again after a cut
    /// answer and `context_retries` after a request refused as too long.
    pub fn record_windows(
        &self,
        stage: &str,
        windowed_items: u64,
        windows: u64,
        truncated_retries: u64,
        context_retries: u64,
    ) {
        let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        let s = stages.entry(stage.to_string()).or_default();
        s.windowed_items += windowed_items;
        s.windows += windows;
        s.truncated_retries += truncated_retries;
        s.context_retries += context_retries;
    }

    /// Usage per stage so far.
    pub fn snapshot(&self) -> BTreeMap<String, StageUsage> {
        self.stages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// All stages together.
    pub fn total(&self) -> StageUsage {
        let mut t = StageUsage::default();
        for s in self.snapshot().values() {
            t.calls += s.calls;
            t.cached_calls += s.cached_calls;
            t.prompt_tokens += s.prompt_tokens;
            t.completion_tokens += s.completion_tokens;
            t.calls_without_usage += s.calls_without_usage;
            t.fallbacks += s.fallbacks;
            t.cached_prompt_tokens += s.cached_prompt_tokens;
            t.cached_completion_tokens += s.cached_completion_tokens;
            t.windowed_items += s.windowed_items;
            t.windows += s.windows;
            t.truncated_retries += s.truncated_retries;
            t.context_retries += s.context_retries;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    #[test]
    fn counts_paid_and_cached_calls_per_stage() {
        let m = TokenMeter::new();
        let mut r = ChatResponse::text("x");
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
        });
        m.record("chunking", &r);
        r.cached = true;
        m.record("chunking", &r);
        m.record("queries", &ChatResponse::text("y"));
        let s = m.snapshot();
        assert_eq!(s["chunking"].calls, 2);
        assert_eq!(s["chunking"].cached_calls, 1);
        assert_eq!(s["chunking"].total_tokens(), 13);
        // The cached answer's original cost is kept apart from what was paid now.
        assert_eq!(s["chunking"].cached_prompt_tokens, 10);
        assert_eq!(s["chunking"].cached_completion_tokens, 3);
        assert_eq!(s["queries"].calls_without_usage, 1);
        assert_eq!(m.total().calls, 3);
        assert_eq!(m.total().cached_completion_tokens, 3);
        // A cached answer stored without counts adds nothing.
        let mut bare = ChatResponse::text("z");
        bare.cached = true;
        m.record("queries", &bare);
        assert_eq!(m.snapshot()["queries"].cached_calls, 1);
        assert_eq!(m.total().cached_prompt_tokens, 10);
        m.record_windows("chunking", 2, 7, 1, 0);
        m.record_windows("chunking", 0, 1, 0, 1);
        let c = m.snapshot()["chunking"];
        assert_eq!(
            (
                c.windowed_items,
                c.windows,
                c.truncated_retries,
                c.context_retries
            ),
            (2, 8, 1, 1)
        );
        assert_eq!(m.total().windows, 8);
        // Usage saved before these counts existed still loads.
        let old: StageUsage = serde_json::from_str(
            r#"{"calls":1,"cached_calls":0,"prompt_tokens":1,"completion_tokens":1,"calls_without_usage":0}"#,
        )
        .unwrap();
        assert_eq!(old.windows, 0);
    }
}
