//! Benchmark results and their Markdown / JSON renderings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::harness::QuestionOutcome;
use crate::{Error, Result};

/// The measurements of one retriever on one dataset.
///
/// Serialises as `{"retriever": …, "recall": {"1": …, "2": …, "5": …, "10": …},
/// "index_seconds": …, "query_ms_p50": …, "query_ms_p95": …, "tokens_per_query": …,
/// "questions": …, "questions_with_gold": …}` (recall as fractions in `[0, 1]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalResult {
    /// The retriever's name.
    pub retriever: String,
    /// Mean passage Recall@k, keyed by k, as a fraction in `[0, 1]`.
    pub recall: BTreeMap<usize, f64>,
    /// Mean reciprocal rank of the first gold passage within the top 10, in `[0, 1]`.
    #[serde(default)]
    pub mrr_at_10: f64,
    /// Mean nDCG@10 (graded where the dataset grades), in `[0, 1]`.
    #[serde(default)]
    pub ndcg_at_10: f64,
    /// Wall time to build the index, in seconds.
    pub index_seconds: f64,
    /// Median query latency, in ms.
    pub query_ms_p50: f64,
    /// 95th-percentile query latency, in ms.
    pub query_ms_p95: f64,
    /// Mean whitespace tokens of the top-5 retrieved passages.
    pub tokens_per_query: f64,
    /// Questions run.
    pub questions: usize,
    /// Questions with at least one gold passage (those Recall@k averages over).
    pub questions_with_gold: usize,
    /// Per-question rankings, when asked for
    /// ([`EvalOptions::keep_rankings`](crate::harness::EvalOptions::keep_rankings)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_question: Vec<QuestionOutcome>,
}

/// The results of several retrievers on one dataset.
///
/// Serialises as `{"dataset": …, "questions": N, "passages": …, "encoder": …,
/// "unmatched_gold": …, "results": [RetrievalResult, …]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalReport {
    /// The dataset's name.
    pub dataset: String,
    /// Number of questions run.
    pub questions: usize,
    /// Number of passages in the corpus.
    pub passages: usize,
    /// The encoder given to the retrievers that embed.
    pub encoder: String,
    /// Gold passages (over all questions) that match no corpus entry.
    pub unmatched_gold: usize,
    /// One entry per retriever, in the order run.
    pub results: Vec<RetrievalResult>,
}

impl RetrievalReport {
    /// A Markdown table: one row per retriever, recall in percent (2 decimals), index time
    /// in seconds, latency in ms, tokens per query.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use lprag_eval::report::{RetrievalReport, RetrievalResult};
    /// let r = RetrievalResult {
    ///     retriever: "bm25".into(),
    ///     recall: BTreeMap::from([(1, 0.25), (10, 0.5)]), mrr_at_10: 0.5, ndcg_at_10: 0.375,
    ///     index_seconds: 0.5, query_ms_p50: 1.25, query_ms_p95: 2.0, tokens_per_query: 400.0,
    ///     questions: 2, questions_with_gold: 2, per_question: vec![],
    /// };
    /// let rep = RetrievalReport {
    ///     dataset: "toy".into(), questions: 2, passages: 9, encoder: "hashing".into(),
    ///     unmatched_gold: 0, results: vec![r],
    /// };
    /// let md = rep.to_markdown();
    /// assert!(md.contains("| retriever | R@1 | R@10 | MRR@10 | nDCG@10 |"));
    /// assert!(md.contains("| bm25 | 25.00 | 50.00 | 50.00 | 37.50 | 0.500 | 1.250 | 2.000 | 400.0 |"));
    /// ```
    pub fn to_markdown(&self) -> String {
        let ks: BTreeSet<usize> = self
            .results
            .iter()
            .flat_map(|r| r.recall.keys().copied())
            .collect();
        let mut out = String::new();
        out.push_str("| retriever |");
        for k in &ks {
            out.push_str(&format!(" R@{k} |"));
        }
        out.push_str(
            " MRR@10 | nDCG@10 | index (s) | query p50 (ms) | query p95 (ms) | tokens/query |\n|---|",
        );
        for _ in &ks {
            out.push_str("---:|");
        }
        out.push_str("---:|---:|---:|---:|---:|---:|\n");
        for r in &self.results {
            out.push_str(&format!("| {} |", r.retriever));
            for k in &ks {
                match r.recall.get(k) {
                    Some(v) => out.push_str(&format!(" {:.2} |", percent(*v))),
                    None => out.push_str(" – |"),
                }
            }
            out.push_str(&format!(
                " {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.1} |\n",
                percent(r.mrr_at_10),
                percent(r.ndcg_at_10),
                r.index_seconds,
                r.query_ms_p50,
                r.query_ms_p95,
                r.tokens_per_query
            ));
        }
        out
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// Write [`RetrievalReport::to_json`] to `path`.
    pub fn write_json(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json() + "\n").map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// A fraction as a percentage for the tables; a zero of either sign prints as `0.00`
/// (an nDCG of −0.0 printed as `-0.00`).
fn percent(v: f64) -> f64 {
    if v == 0.0 {
        0.0
    } else {
        100.0 * v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_documented_shape() {
        let r = RetrievalResult {
            retriever: "dense".into(),
            recall: BTreeMap::from([(1, 0.1), (2, 0.2), (5, 0.5), (10, 1.0)]),
            mrr_at_10: 0.5,
            ndcg_at_10: 0.5,
            index_seconds: 0.25,
            query_ms_p50: 1.0,
            query_ms_p95: 3.0,
            tokens_per_query: 512.0,
            questions: 100,
            questions_with_gold: 100,
            per_question: vec![],
        };
        let rep = RetrievalReport {
            dataset: "musique-100".into(),
            questions: 100,
            passages: 1890,
            encoder: "hashing".into(),
            unmatched_gold: 0,
            results: vec![r],
        };
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
        assert_eq!(v["dataset"], "musique-100");
        assert_eq!(v["questions"], 100);
        let r0 = &v["results"][0];
        assert_eq!(r0["retriever"], "dense");
        assert_eq!(r0["recall"]["10"], 1.0);
        assert_eq!(r0["recall"]["2"], 0.2);
        assert_eq!(r0["mrr_at_10"], 0.5);
        assert_eq!(r0["ndcg_at_10"], 0.5);
        assert_eq!(r0["index_seconds"], 0.25);
        assert_eq!(r0["query_ms_p50"], 1.0);
        assert_eq!(r0["tokens_per_query"], 512.0);
        assert!(r0.get("per_question").is_none());
        let back: RetrievalReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, rep);
        let md = rep.to_markdown();
        assert!(
            md.contains(
                "| dense | 10.00 | 20.00 | 50.00 | 100.00 | 50.00 | 50.00 | 0.250 | 1.000 | 3.000 | 512.0 |"
            ),
            "{md}"
        );
        // A negative zero (every score tied, as the paper's untrained NCN gives) is 0.00.
        let mut zero = rep.clone();
        zero.results[0].ndcg_at_10 = -0.0;
        zero.results[0].mrr_at_10 = -0.0;
        let md = zero.to_markdown();
        assert!(
            md.contains("| 0.00 | 0.00 | 0.250 |") && !md.contains("-0.00"),
            "{md}"
        );
    }
}
