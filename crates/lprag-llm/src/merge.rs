//! G²RAG's LLM-guided merging (§2.2, Eq. 8): M_LLM(ω_r, ω_s) ∈ {0, 1} decides whether two
//! subgroups of one weakly connected component become one community.
//!
//! The paper publishes no prompt; [`crate::Prompts`]' `merge_*` templates are lprag's: both
//! groups' passages (each cut to a character budget, at most a few per group) and a
//! question answered by one word, read by [`crate::parse::yes_no`]. Responses are cached by
//! whatever [`ChatModel`] the user passes (wrap it in a [`crate::CachedChat`] to pay for each
//! pair once).

use std::sync::Arc;

use lprag_core::Result;

use crate::jobs::{collect, fallback_items, run_all, settings_methods, Parsed, Settings};
use crate::parse::yes_no;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// Asks an LLM whether two groups of passages should be merged.
pub struct LlmMergeJudge {
    settings: Settings,
    max_passages: usize,
    max_chars: usize,
}

impl LlmMergeJudge {
    /// The default merge prompt on `model`: temperature 0, 8 calls in flight, at most 32
    /// tokens per answer, at most 5 passages per group of at most 400 characters each.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 32),
            max_passages: 5,
            max_chars: 400,
        }
    }

    settings_methods!("merge");

    /// Show at most `n` passages of each group (at least 1). Default 5.
    pub fn max_passages(mut self, n: usize) -> Self {
        self.max_passages = n.max(1);
        self
    }

    /// Cut each passage to at most `n` characters (at least 1; "…" marks a cut).
    /// Default 400.
    pub fn max_chars(mut self, n: usize) -> Self {
        self.max_chars = n.max(1);
        self
    }

    fn render_group(&self, texts: &[&str]) -> std::result::Result<String, LlmError> {
        let mut out = Vec::new();
        for (i, t) in texts.iter().take(self.max_passages).enumerate() {
            let index = (i + 1).to_string();
            let text = truncate_chars(t.trim(), self.max_chars);
            out.push(
                self.settings
                    .prompts
                    .merge_chunk
                    .render(&[("index", &index), ("text", &text)])?,
            );
        }
        if texts.len() > self.max_passages {
            out.push(format!(
                "(and {} more passages)",
                texts.len() - self.max_passages
            ));
        }
        Ok(out.join("\n"))
    }

    /// The request asking whether the groups `a` and `b` (passage texts, most
    /// representative first) should be merged.
    pub fn request(&self, a: &[&str], b: &[&str]) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let (ga, gb) = (self.render_group(a)?, self.render_group(b)?);
        Ok(self.settings.request(vec![
            ChatMessage::system(p.merge_system.render(&[])?),
            ChatMessage::user(p.merge_user.render(&[("group_a", &ga), ("group_b", &gb)])?),
        ]))
    }

    /// One verdict: `true` means merge. An answer with no yes/no, even after the parse
    /// retries, is a parse error whatever [`crate::OnUnparseable`] says (there is no
    /// offline rule here; [`LlmMergeJudge::judge_all`] leaves that to its caller).
    pub async fn judge(&self, a: &[&str], b: &[&str]) -> std::result::Result<bool, LlmError> {
        let request = self.request(a, b)?;
        let mut settings = self.settings.clone();
        settings.on_unparseable = crate::OnUnparseable::Fail;
        match settings
            .call_parsed("merge", request, || "merge verdict".into(), yes_no)
            .await?
        {
            Parsed::Read(v) => Ok(v),
            Parsed::Unreadable(reason) => Err(LlmError::Permanent(reason)),
        }
    }

    /// Verdicts for every pair, in order, `concurrency` calls at a time; `None` for a
    /// pair whose answer had no yes/no even after the parse retries (under
    /// [`crate::OnUnparseable::Fallback`], the default: the caller applies its offline
    /// rule, and the pairs are counted in [`crate::StageUsage::fallbacks`] under
    /// `"merge"`). All calls run even when some fail; a transport failure, or an
    /// unreadable answer under [`crate::OnUnparseable::Fail`], is a
    /// [`crate::LlmError::Stage`] (as [`lprag_core::Error::Backend`], or `Transient` when its first failure was) naming the first
    /// failed pair.
    pub async fn judge_all(&self, pairs: &[(Vec<&str>, Vec<&str>)]) -> Result<Vec<Option<bool>>> {
        let stage = "LLM merge";
        let results = run_all(
            pairs.len(),
            self.settings.concurrency,
            stage,
            &*self.settings.progress,
            |i| {
                let (a, b) = &pairs[i];
                async move {
                    let request = self.request(a, b)?;
                    self.settings
                        .call_parsed(
                            "merge",
                            request,
                            || format!("merge verdict for pair {i}"),
                            yes_no,
                        )
                        .await
                }
            },
        )
        .await;
        let verdicts =
            collect(stage, results, |i| format!("pair {i}")).map_err(|e| e.into_core(stage))?;
        fallback_items(
            &self.settings,
            stage,
            "merge",
            "pairs",
            "the centroid-similarity rule",
            &verdicts,
        );
        Ok(verdicts
            .into_iter()
            .map(|v| match v {
                Parsed::Read(v) => Some(v),
                Parsed::Unreadable(_) => None,
            })
            .collect())
    }
}

/// At most `n` characters of `s`, with "…" appended when cut.
fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatResponse;
    use async_trait::async_trait;

    struct Fixed(&'static str);

    #[async_trait]
    impl ChatModel for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        async fn complete(&self, _: &ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
            Ok(ChatResponse::text(self.0))
        }
    }

    #[test]
    fn request_shows_both_groups_truncated() {
        let judge = LlmMergeJudge::new(Arc::new(Fixed("yes")))
            .max_passages(2)
            .max_chars(5);
        let r = judge
            .request(&["Warsaw is a city", "b", "c"], &["Vistula"])
            .unwrap();
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.temperature, Some(0.0));
        let user = &r.messages[1].content;
        assert!(user.contains("[Group A]\n1. Warsa…\n2. b\n(and 1 more passages)"));
        assert!(user.contains("[Group B]\n1. Vistu…"), "{user}");
        assert!(!user.contains("3. c"));
    }

    #[tokio::test]
    async fn verdicts_and_parse_errors() {
        let yes = LlmMergeJudge::new(Arc::new(Fixed("Yes, same topic.")));
        assert!(yes.judge(&["a"], &["b"]).await.unwrap());
        let no = LlmMergeJudge::new(Arc::new(Fixed("No")));
        assert_eq!(
            no.judge_all(&[(vec!["a"], vec!["b"]), (vec!["c"], vec!["d"])])
                .await
                .unwrap(),
            vec![Some(false), Some(false)]
        );
        let unsure = LlmMergeJudge::new(Arc::new(Fixed("Hard to say.")));
        assert!(matches!(
            unsure.judge(&["a"], &["b"]).await,
            Err(LlmError::Parse { .. })
        ));
        assert_eq!(
            unsure.judge_all(&[(vec!["a"], vec!["b"])]).await.unwrap(),
            vec![None]
        );
        let e = LlmMergeJudge::new(Arc::new(Fixed("Hard to say.")))
            .on_unparseable(crate::OnUnparseable::Fail)
            .judge_all(&[(vec!["a"], vec!["b"])])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("LLM merge"), "{e}");
    }
}
