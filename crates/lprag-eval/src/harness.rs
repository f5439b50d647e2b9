//! The retrieval benchmark: run every question through a retriever and measure it.
//!
//! # Passage-level ranking
//!
//! Benchmarks label whole passages; retrievers may return sub-passage chunks (LP-RAG's
//! atomic statements). The harness ranks **passages** by the best score of any of their
//! chunks: it walks the retriever's answer (best first) and lists each passage
//! (`chunk.provenance.document_id`) at its first appearance ([`rank_passages`]). Recall@k
//! is computed on that passage ranking. For retrievers that index whole passages (all the
//! baselines) the chunk and passage rankings coincide.
//!
//! To fill the top `max k` passages the harness asks for [`Selection::TopK`] of
//! `max_k × ⌈chunks / passages⌉` chunks, and doubles that (up to every chunk) while fewer
//! than `max_k` distinct passages came back.
//!
//! # Measurements
//!
//! - **Recall@k**: [`recall_at_k`] per question, averaged over questions that have at
//!   least one gold passage; gold passages missing from the corpus count in the
//!   denominator.
//! - **MRR@10 and nDCG@10**: [`mrr_at_k`] and [`ndcg_at_k`] (trec_eval's definitions,
//!   graded where the dataset grades its gold passages), averaged like Recall@k; on the
//!   ranking fetched for the largest k asked (10 by default), so with smaller `ks` they
//!   are cut there.
//! - **Query latency**: wall time of `retrieve` per question (summed when the depth had to
//!   be doubled), reported as the 50th and 95th percentiles ([`percentile`]) in ms.
//!   Questions run one at a time.
//! - **Tokens per query**: whitespace tokens ([`whitespace_tokens`]) of the passage
//!   strings (`title + "\n" + text`) of the top 5 ranked passages, averaged over all
//!   questions: the context a reader would get when fed the top 5 passages.
//! - **Index time**: wall time of [`build_retriever`](crate::registry::build_retriever) (embedding the corpus included;
//!   fitting the hashing encoder's IDF, done once for all retrievers, is not).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use lprag_core::{Encoder, Progress, Retriever, ScoredChunk, Selection};
use serde::{Deserialize, Serialize};

use crate::datasets::{passage_text, Dataset};
use crate::metrics::{
    mean, mrr_at_k, ndcg_at_k, percentile, recall_at_k, whitespace_tokens, RANK_CUTOFF, RECALL_KS,
};
use crate::registry::{build_retriever_with, RetrieverOptions};
use crate::report::{RetrievalReport, RetrievalResult};
use crate::{Error, Result};

/// What [`evaluate_retrieval`] measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalOptions {
    /// Recall@k cut-offs. Default `[1, 2, 5, 10]`.
    pub ks: Vec<usize>,
    /// Passages counted for tokens per query. Default 5.
    pub token_passages: usize,
    /// Keep each question's passage ranking in [`RetrievalResult::per_question`].
    /// Default false.
    pub keep_rankings: bool,
    /// Settings passed to the retrievers (not serialised).
    #[serde(skip)]
    pub retrievers: RetrieverOptions,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            ks: RECALL_KS.to_vec(),
            token_passages: 5,
            keep_rankings: false,
            retrievers: RetrieverOptions::default(),
        }
    }
}

/// One question's outcome (kept when [`EvalOptions::keep_rankings`] is set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOutcome {
    /// The question's id.
    pub id: String,
    /// Ranked passage indices (into [`Dataset::corpus`]), the top `max(ks)` or more.
    pub ranking: Vec<usize>,
    /// Each ranked passage's score: the best score of its chunks.
    #[serde(default)]
    pub scores: Vec<f32>,
    /// Wall time of retrieval in ms.
    pub latency_ms: f64,
}

/// Passage indices in order of first appearance in `hits` (best first), at most `limit`.
///
/// `doc_index` maps [`lprag_core::Document::id`] to corpus position (see
/// [`Dataset::document_index`]). A chunk naming an unknown document is an error.
pub fn rank_passages(
    hits: &[ScoredChunk],
    doc_index: &HashMap<&str, usize>,
    limit: usize,
) -> Result<Vec<usize>> {
    Ok(rank_passages_scored(hits, doc_index, limit)?.0)
}

/// [`rank_passages`] with each passage's score (its first, best, chunk's).
pub fn rank_passages_scored(
    hits: &[ScoredChunk],
    doc_index: &HashMap<&str, usize>,
    limit: usize,
) -> Result<(Vec<usize>, Vec<f32>)> {
    let mut out: Vec<usize> = Vec::new();
    let mut scores: Vec<f32> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for hit in hits {
        if out.len() >= limit {
            break;
        }
        let doc = hit.chunk.provenance.document_id.as_str();
        let Some(&p) = doc_index.get(doc) else {
            return Err(Error::invalid(
                "retrieved chunk",
                format!(
                    "chunk {} names document `{doc}`, which is not in the corpus",
                    hit.chunk.id
                ),
            ));
        };
        if seen.insert(p) {
            out.push(p);
            scores.push(hit.score);
        }
    }
    Ok((out, scores))
}

/// Run every question of `dataset` through `retriever` and measure recall, latency and
/// tokens (see the [module documentation](self)). `index_seconds` is copied into the
/// result. Progress goes to stage `"queries <name>"`, one step per question.
pub async fn evaluate_retrieval(
    retriever: &dyn Retriever,
    dataset: &Dataset,
    index_seconds: f64,
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<RetrievalResult> {
    let max_k = options
        .ks
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(options.token_passages)
        .max(1);
    if options.ks.contains(&0) {
        return Err(Error::invalid("EvalOptions.ks", "k must be at least 1"));
    }
    let doc_index = dataset.document_index();
    let n_chunks = retriever.num_chunks();
    let per_passage = n_chunks.div_ceil(dataset.corpus.len().max(1)).max(1);
    let first_depth = if n_chunks > 0 {
        (max_k * per_passage).min(n_chunks)
    } else {
        max_k * 4
    };
    let search = DepthSearch {
        retriever,
        doc_index: &doc_index,
        max_k,
        n_chunks,
        first_depth,
    };

    let stage = format!("queries {}", retriever.name());
    progress.start(&stage, Some(dataset.questions.len() as u64));
    let mut tally = Tally::new(options, dataset.questions.len());
    for (qi, q) in dataset.questions.iter().enumerate() {
        let (ranking, scores, elapsed) = search.rank(&q.question).await?;
        tally.add(q, ranking, scores, elapsed, dataset, options);
        progress.update(&stage, qi as u64 + 1, &tally.message());
    }
    progress.finish(&stage);
    Ok(tally.result(retriever.name(), dataset, index_seconds))
}

/// How [`evaluate_retrieval`] asks a retriever for enough chunks to rank `max_k`
/// passages.
struct DepthSearch<'a> {
    /// The retriever.
    retriever: &'a dyn Retriever,
    /// Document id to corpus position.
    doc_index: &'a HashMap<&'a str, usize>,
    /// Passages wanted.
    max_k: usize,
    /// Chunks in the index (0 when the retriever does not say).
    n_chunks: usize,
    /// Chunks asked for first.
    first_depth: usize,
}

impl DepthSearch<'_> {
    /// The passage ranking of `question` and its scores, asking for twice the chunks
    /// (up to all of them) while fewer than `max_k` passages came back; with the
    /// seconds spent in `retrieve`, summed over the tries.
    async fn rank(&self, question: &str) -> Result<(Vec<usize>, Vec<f32>, f64)> {
        let n_chunks = self.n_chunks;
        let mut depth = self.first_depth;
        let mut elapsed = 0.0f64;
        loop {
            let t = Instant::now();
            let hits = self
                .retriever
                .retrieve(question, Selection::TopK(depth))
                .await?;
            elapsed += t.elapsed().as_secs_f64();
            let (ranking, scores) = rank_passages_scored(&hits, self.doc_index, self.max_k)?;
            let exhausted = hits.len() < depth || (n_chunks > 0 && depth >= n_chunks);
            if ranking.len() >= self.max_k || exhausted {
                return Ok((ranking, scores, elapsed));
            }
            depth = if n_chunks > 0 {
                (depth * 2).min(n_chunks)
            } else {
                depth * 2
            };
        }
    }
}

/// The per-question measurements of [`evaluate_retrieval`] so far.
struct Tally {
    /// Recall@k per question with gold passages, by k.
    recalls: BTreeMap<usize, Vec<f64>>,
    /// MRR@10 per question with gold passages.
    mrrs: Vec<f64>,
    /// nDCG@10 per question with gold passages.
    ndcgs: Vec<f64>,
    /// Query latency per question, ms.
    latencies: Vec<f64>,
    /// Tokens of the top passages per question.
    tokens: Vec<f64>,
    /// Each question's outcome, with [`EvalOptions::keep_rankings`].
    per_question: Vec<QuestionOutcome>,
}

impl Tally {
    /// Nothing measured yet, room for `questions`.
    fn new(options: &EvalOptions, questions: usize) -> Self {
        Self {
            recalls: options.ks.iter().map(|&k| (k, Vec::new())).collect(),
            mrrs: Vec::new(),
            ndcgs: Vec::new(),
            latencies: Vec::with_capacity(questions),
            tokens: Vec::with_capacity(questions),
            per_question: Vec::new(),
        }
    }

    /// Measure question `q`'s passage `ranking` (retrieved in `elapsed` seconds).
    fn add(
        &mut self,
        q: &crate::datasets::Question,
        ranking: Vec<usize>,
        scores: Vec<f32>,
        elapsed: f64,
        dataset: &Dataset,
        options: &EvalOptions,
    ) {
        for (&k, v) in self.recalls.iter_mut() {
            if let Some(r) = recall_at_k(&ranking, &q.gold, q.gold_count(), k) {
                v.push(r);
            }
        }
        self.mrrs
            .extend(mrr_at_k(&ranking, &q.gold, q.gold_count(), RANK_CUTOFF));
        self.ndcgs.extend(ndcg_at_k(
            &ranking,
            &q.gold,
            &q.grades,
            q.gold_count(),
            RANK_CUTOFF,
        ));
        self.latencies.push(elapsed * 1e3);
        self.tokens.push(
            ranking
                .iter()
                .take(options.token_passages)
                .map(|&p| whitespace_tokens(&passage_text(&dataset.corpus[p])) as f64)
                .sum::<f64>(),
        );
        if options.keep_rankings {
            self.per_question.push(QuestionOutcome {
                id: q.id.clone(),
                ranking,
                scores,
                latency_ms: elapsed * 1e3,
            });
        }
    }

    /// The progress message: the mean Recall@5 so far, when measured.
    fn message(&self) -> String {
        match self.recalls.get(&5).and_then(|v| mean(v)) {
            Some(r5) => format!("R@5 {:.2}", 100.0 * r5),
            None => String::new(),
        }
    }

    /// The means and percentiles as the retriever's result.
    fn result(self, retriever: &str, dataset: &Dataset, index_seconds: f64) -> RetrievalResult {
        let questions_with_gold = dataset
            .questions
            .iter()
            .filter(|q| q.gold_count() > 0)
            .count();
        RetrievalResult {
            retriever: retriever.to_string(),
            recall: self
                .recalls
                .into_iter()
                .map(|(k, v)| (k, mean(&v).unwrap_or(0.0)))
                .collect(),
            mrr_at_10: mean(&self.mrrs).unwrap_or(0.0),
            ndcg_at_10: mean(&self.ndcgs).unwrap_or(0.0),
            index_seconds,
            query_ms_p50: percentile(&self.latencies, 50.0).unwrap_or(0.0),
            query_ms_p95: percentile(&self.latencies, 95.0).unwrap_or(0.0),
            tokens_per_query: mean(&self.tokens).unwrap_or(0.0),
            questions: dataset.questions.len(),
            questions_with_gold,
            per_question: self.per_question,
        }
    }
}

/// Build each named retriever with [`build_retriever`](crate::registry::build_retriever) (timing it), evaluate it with
/// [`evaluate_retrieval`], and collect a report.
///
/// `encoder_name` is recorded in the report. Progress: stage `"index <name>"` (no step
/// count) while a retriever is built, then `"queries <name>"`.
pub async fn run_retrieval(
    dataset: &Dataset,
    retrievers: &[String],
    encoder: Arc<dyn Encoder>,
    encoder_name: &str,
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<RetrievalReport> {
    if retrievers.is_empty() {
        return Err(Error::invalid("--retriever", "no retriever named"));
    }
    let mut results = Vec::with_capacity(retrievers.len());
    for name in retrievers {
        let stage = format!("index {name}");
        progress.start(&stage, None);
        let t = Instant::now();
        let retriever =
            build_retriever_with(name, &dataset.corpus, encoder.clone(), &options.retrievers).await;
        let index_seconds = t.elapsed().as_secs_f64();
        progress.finish(&stage);
        let retriever = retriever?;
        results.push(
            evaluate_retrieval(
                retriever.as_ref(),
                dataset,
                index_seconds,
                options,
                progress,
            )
            .await?,
        );
    }
    Ok(RetrievalReport {
        dataset: dataset.name.clone(),
        questions: dataset.questions.len(),
        passages: dataset.corpus.len(),
        encoder: encoder_name.to_string(),
        unmatched_gold: dataset.unmatched_gold(),
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::{DatasetFormat, Question};
    use crate::test_support::FixedRetriever;
    use lprag_core::{Document, NoProgress};

    fn dataset() -> Dataset {
        let q = |id: &str, gold: Vec<usize>, unmatched: Vec<&str>| Question {
            id: id.into(),
            question: "q".into(),
            answers: vec![],
            gold,
            grades: Vec::new(),
            unmatched_gold: unmatched.into_iter().map(String::from).collect(),
            metadata: Default::default(),
        };
        Dataset {
            name: "toy".into(),
            format: DatasetFormat::Jsonl,
            corpus: vec![
                Document::new("d0", "T0", "one two"),
                Document::new("d1", "T1", "three"),
                Document::new("d2", "T2", "four five six"),
            ],
            questions: vec![
                q("a", vec![1, 2], vec![]),
                q("b", vec![0], vec!["Missing"]),
                q("c", vec![], vec![]),
            ],
            duplicates_dropped: 0,
        }
    }

    // Six sub-passage chunks: d0 has chunks 0,1; d1 has 2,3; d2 has 4,5.
    const CHUNKS: [(&str, &str); 6] = [
        ("d0", "one"),
        ("d0", "two"),
        ("d1", "three"),
        ("d1", "x"),
        ("d2", "four"),
        ("d2", "five six"),
    ];

    #[test]
    fn passages_ranked_by_first_appearance() {
        let r = FixedRetriever::new("f", &CHUNKS, vec![]);
        let hit = |id: usize| ScoredChunk {
            chunk: r.chunks[id].clone(),
            score: 0.0,
        };
        let ds = dataset();
        let idx = ds.document_index();
        let hits = vec![hit(5), hit(4), hit(0), hit(3), hit(1)];
        assert_eq!(rank_passages(&hits, &idx, 10).unwrap(), vec![2, 0, 1]);
        assert_eq!(rank_passages(&hits, &idx, 2).unwrap(), vec![2, 0]);
        let mut bad = hit(0);
        bad.chunk.provenance.document_id = "zz".into();
        assert!(rank_passages(&[bad], &idx, 10).is_err());
    }

    #[tokio::test]
    async fn evaluates_hand_computed_case() {
        // chunk ranking 4, 5, 0, 2, 1, 3 → passages d2, d0, d1
        let r = FixedRetriever::new("f", &CHUNKS, vec![4, 5, 0, 2, 1, 3]);
        let ds = dataset();
        let opts = EvalOptions {
            ks: vec![1, 2, 3],
            token_passages: 2,
            keep_rankings: true,
            ..EvalOptions::default()
        };
        let res = evaluate_retrieval(&r, &ds, 1.5, &opts, &NoProgress)
            .await
            .unwrap();
        // q a: gold {1, 2}: R@1 = 1/2, R@2 = 1/2, R@3 = 1
        // q b: gold {0} + 1 unmatched: R@1 = 0, R@2 = 1/2, R@3 = 1/2
        // q c: no gold, not averaged
        assert!((res.recall[&1] - 0.25).abs() < 1e-12);
        assert!((res.recall[&2] - 0.5).abs() < 1e-12);
        assert!((res.recall[&3] - 0.75).abs() < 1e-12);
        // top-2 passages d2 ("T2\nfour five six": 4 tokens) + d0 ("T0\none two": 3)
        assert!((res.tokens_per_query - 7.0).abs() < 1e-12);
        assert_eq!(res.questions, 3);
        assert_eq!(res.questions_with_gold, 2);
        assert_eq!(res.index_seconds, 1.5);
        assert_eq!(res.per_question[0].ranking, vec![2, 0, 1]);
        assert!(res.query_ms_p50 >= 0.0 && res.query_ms_p95 >= res.query_ms_p50);
    }

    #[tokio::test]
    async fn widens_depth_until_enough_passages() {
        // d2 has four chunks, ranked first. 6 chunks / 3 passages → 2 per passage, so the
        // first request is 2 passages × 2 = 4 chunks, which all belong to d2; the harness
        // must double the depth to 6 to find a second passage.
        let chunks = [
            ("d2", "a"),
            ("d2", "b"),
            ("d2", "c"),
            ("d2", "d"),
            ("d0", "e"),
            ("d1", "f"),
        ];
        let r = FixedRetriever::new("f", &chunks, vec![0, 1, 2, 3, 4, 5]);
        let ds = dataset();
        let opts = EvalOptions {
            ks: vec![2],
            token_passages: 1,
            keep_rankings: true,
            ..EvalOptions::default()
        };
        let res = evaluate_retrieval(&r, &ds, 0.0, &opts, &NoProgress)
            .await
            .unwrap();
        assert_eq!(res.per_question[0].ranking, vec![2, 0]);
        // q a: gold {1, 2} → 1/2; q b: gold {0} + 1 unmatched → 1/2
        assert!((res.recall[&2] - 0.5).abs() < 1e-12);
    }

    #[tokio::test]
    async fn run_retrieval_reports_each_retriever() {
        let ds = dataset();
        let enc: Arc<dyn Encoder> = Arc::new(crate::test_support::KeywordEncoder);
        let names = vec!["bm25".to_string(), "dense".to_string()];
        let rep = run_retrieval(
            &ds,
            &names,
            enc.clone(),
            "keyword",
            &EvalOptions::default(),
            &NoProgress,
        )
        .await
        .unwrap();
        assert_eq!(rep.results.len(), 2);
        assert_eq!(rep.results[1].retriever, "dense");
        assert_eq!(rep.unmatched_gold, 1);
        let bad = run_retrieval(
            &ds,
            &["x".to_string()],
            enc,
            "keyword",
            &EvalOptions::default(),
            &NoProgress,
        )
        .await;
        assert!(bad.is_err());
    }
}
