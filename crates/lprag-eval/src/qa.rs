//! Answer quality: retrieve the top k chunks, let an LLM reader answer from them
//! (COMBINE + LP-RAG's D.2 prompt, chunks best first, each shown as `title` + text), and
//! score the answer by EM and token F1 (SQuAD normalisation, max over answer and aliases).
//!
//! Readers are slow and paid: questions are answered concurrently (bounded), every
//! question is attempted even when some fail, and with a [`lprag::llm::CachedChat`]
//! reader (the CLI always uses one) a rerun pays only for what failed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use lprag::llm::{Answer, AnswerGenerator, ChatModel, LlmError, StageUsage, TokenMeter};
use lprag_core::{Encoder, Progress, Retriever, ScoredChunk, Selection};
use serde::{Deserialize, Serialize};

use crate::datasets::Dataset;
use crate::harness::EvalOptions;
use crate::metrics::{mean, qa_score, recall_at_k};
use crate::registry::build_retriever_with;
use crate::{Error, Result};

/// Settings of a QA run.
#[derive(Debug, Clone)]
pub struct QaOptions {
    /// Chunks given to the reader. Default 5.
    pub top_k: usize,
    /// Reader calls in flight at once. Default 8.
    pub concurrency: usize,
    /// Keep each question's prediction. Default true.
    pub keep_predictions: bool,
    /// Retriever settings (the `retrievers` field of [`EvalOptions`]).
    pub eval: EvalOptions,
}

impl Default for QaOptions {
    fn default() -> Self {
        Self {
            top_k: 5,
            concurrency: 8,
            keep_predictions: true,
            eval: EvalOptions::default(),
        }
    }
}

/// One question's answer and score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QaOutcome {
    /// The question's id.
    pub id: String,
    /// The reader's answer.
    pub prediction: String,
    /// 1 when it matches an accepted answer exactly (normalised), else 0.
    pub em: f64,
    /// Best token F1 against the accepted answers.
    pub f1: f64,
}

/// One retriever + reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QaResult {
    /// The retriever's name.
    pub retriever: String,
    /// Mean exact match over questions with answers, in [0, 1].
    pub em: f64,
    /// Mean token F1, in [0, 1].
    pub f1: f64,
    /// Passage recall of the chunks shown to the reader (Recall@top_k by passage).
    pub context_recall: f64,
    /// Seconds to build the retriever.
    pub index_seconds: f64,
    /// Seconds to retrieve and answer every question.
    pub answer_seconds: f64,
    /// Reader calls, cached calls and tokens.
    pub usage: StageUsage,
    /// Questions scored (those with at least one accepted answer).
    pub questions_scored: usize,
    /// Per-question predictions (when kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_question: Vec<QaOutcome>,
}

/// A QA run over several retrievers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QaReport {
    /// Dataset name.
    pub dataset: String,
    /// Questions asked.
    pub questions: usize,
    /// Encoder of the dense retrievers.
    pub encoder: String,
    /// The reader: `backend:model`.
    pub reader: String,
    /// Chunks shown to the reader.
    pub top_k: usize,
    /// One entry per retriever.
    pub results: Vec<QaResult>,
}

impl QaReport {
    /// A Markdown table (EM, F1 and context recall in %).
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| retriever | EM | F1 | context R@k | reader calls (cached) | prompt tokens | completion tokens | index (s) | answer (s) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &self.results {
            out.push_str(&format!(
                "| {} | {:.2} | {:.2} | {:.2} | {} ({}) | {} | {} | {:.1} | {:.1} |\n",
                r.retriever,
                100.0 * r.em,
                100.0 * r.f1,
                100.0 * r.context_recall,
                r.usage.calls,
                r.usage.cached_calls,
                r.usage.prompt_tokens,
                r.usage.completion_tokens,
                r.index_seconds,
                r.answer_seconds
            ));
        }
        out
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// Write [`QaReport::to_json`] to `path`.
    pub fn write_json(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json() + "\n").map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Answer every question of `dataset` with `reader` over `retriever`'s top chunks.
pub async fn evaluate_qa(
    retriever: &dyn Retriever,
    dataset: &Dataset,
    reader: Arc<dyn ChatModel>,
    index_seconds: f64,
    options: &QaOptions,
    progress: &dyn Progress,
) -> Result<QaResult> {
    if options.top_k == 0 {
        return Err(Error::invalid("--top-k", "must be at least 1"));
    }
    let t = Instant::now();
    let doc_index = dataset.document_index();
    let meter = Arc::new(TokenMeter::new());
    let generator = AnswerGenerator::new(reader).with_meter(meter.clone());

    // Retrieval first (CPU-bound, one at a time), then the reader calls concurrently.
    let (contexts, recalls) = retrieve_contexts(retriever, dataset, &doc_index, options).await?;
    let stage = format!("answers {}", retriever.name());
    let results = answer_all(&generator, dataset, &contexts, options, progress, &stage).await;
    let scored = score_answers(dataset, results, options)?;
    Ok(QaResult {
        retriever: retriever.name().to_string(),
        em: mean(&scored.ems).unwrap_or(0.0),
        f1: mean(&scored.f1s).unwrap_or(0.0),
        context_recall: mean(&recalls).unwrap_or(0.0),
        index_seconds,
        answer_seconds: t.elapsed().as_secs_f64(),
        usage: meter.snapshot().get("answer").copied().unwrap_or_default(),
        questions_scored: scored.ems.len(),
        per_question: scored.outcomes,
    })
}

/// Each question's top chunks from `retriever` (their text as the reader sees it), and
/// the passage recall of those chunks for each question with gold passages.
async fn retrieve_contexts(
    retriever: &dyn Retriever,
    dataset: &Dataset,
    doc_index: &HashMap<&str, usize>,
    options: &QaOptions,
) -> Result<(Vec<Vec<ScoredChunk>>, Vec<f64>)> {
    let mut contexts: Vec<Vec<ScoredChunk>> = Vec::with_capacity(dataset.questions.len());
    let mut recalls = Vec::new();
    for q in &dataset.questions {
        let hits = retriever
            .retrieve(&q.question, Selection::TopK(options.top_k))
            .await?;
        let ranking = crate::harness::rank_passages(&hits, doc_index, usize::MAX)?;
        if let Some(r) = recall_at_k(&ranking, &q.gold, q.gold_count(), ranking.len().max(1)) {
            recalls.push(r);
        }
        contexts.push(
            hits.into_iter()
                .map(|mut h| {
                    h.chunk.text = h.chunk.embedding_text();
                    h
                })
                .collect(),
        );
    }
    Ok((contexts, recalls))
}

/// The reader's answer to each question over its context, [`QaOptions::concurrency`]
/// calls in flight, in question order; progress in `stage`, one step per answer.
async fn answer_all(
    generator: &AnswerGenerator,
    dataset: &Dataset,
    contexts: &[Vec<ScoredChunk>],
    options: &QaOptions,
    progress: &dyn Progress,
    stage: &str,
) -> Vec<std::result::Result<Answer, LlmError>> {
    progress.start(stage, Some(dataset.questions.len() as u64));
    let mut done = 0u64;
    let mut results = Vec::with_capacity(contexts.len());
    let mut stream = futures::stream::iter(dataset.questions.iter().zip(contexts))
        .map(|(q, ctx)| async move { generator.answer(&q.question, ctx).await })
        .buffered(options.concurrency.max(1));
    while let Some(r) = stream.next().await {
        done += 1;
        progress.update(stage, done, "");
        results.push(r);
    }
    drop(stream);
    progress.finish(stage);
    results
}

/// The scores of a QA run's answers.
struct Scored {
    /// Exact match per question with accepted answers.
    ems: Vec<f64>,
    /// Token F1 per question with accepted answers.
    f1s: Vec<f64>,
    /// Each question's prediction, with [`QaOptions::keep_predictions`].
    outcomes: Vec<QaOutcome>,
}

/// Score each answer against its question's accepted answers.
///
/// # Errors
/// The first failed reader call, with the number of failures.
fn score_answers(
    dataset: &Dataset,
    results: Vec<std::result::Result<Answer, LlmError>>,
    options: &QaOptions,
) -> Result<Scored> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    let mut outcomes = Vec::with_capacity(results.len());
    let (mut ems, mut f1s) = (Vec::new(), Vec::new());
    for (q, r) in dataset.questions.iter().zip(results) {
        let answer = match r {
            Ok(a) => a,
            Err(e) => {
                return Err(Error::Core(lprag_core::Error::backend(
                    format!(
                        "reader ({failed} of {} questions failed; answers already received are cached — rerun to resume), first failure at question {}",
                        dataset.questions.len(),
                        q.id
                    ),
                    e,
                )))
            }
        };
        let s = qa_score(&answer.text, &q.answers);
        if !q.answers.is_empty() {
            ems.push(s.em);
            f1s.push(s.f1);
        }
        if options.keep_predictions {
            outcomes.push(QaOutcome {
                id: q.id.clone(),
                prediction: answer.text,
                em: s.em,
                f1: s.f1,
            });
        }
    }
    Ok(Scored { ems, f1s, outcomes })
}

/// The name of the "no retrieval" row of `lprag-eval qa`: the reader answers from the
/// question alone (its own knowledge), the floor every retriever is read against.
pub const NO_RETRIEVAL: &str = "none";

/// A retriever that returns nothing (the [`NO_RETRIEVAL`] row).
struct NoRetrieval;

#[async_trait::async_trait]
impl Retriever for NoRetrieval {
    fn name(&self) -> &str {
        NO_RETRIEVAL
    }

    async fn retrieve(
        &self,
        _query: &str,
        _selection: Selection,
    ) -> lprag_core::Result<Vec<ScoredChunk>> {
        Ok(Vec::new())
    }

    fn chunks(&self) -> &[lprag_core::Chunk] {
        &[]
    }
}

/// Build each named retriever (timed) and run [`evaluate_qa`] on it; [`NO_RETRIEVAL`]
/// (`none`) is the reader without retrieval.
pub async fn run_qa(
    dataset: &Dataset,
    retrievers: &[String],
    encoder: Arc<dyn Encoder>,
    encoder_name: &str,
    reader: Arc<dyn ChatModel>,
    options: &QaOptions,
    progress: &dyn Progress,
) -> Result<QaReport> {
    if retrievers.is_empty() {
        return Err(Error::invalid("--retriever", "no retriever named"));
    }
    let mut results = Vec::new();
    for name in retrievers {
        let t = Instant::now();
        let retriever: Box<dyn Retriever> = if name == NO_RETRIEVAL {
            Box::new(NoRetrieval)
        } else {
            build_retriever_with(
                name,
                &dataset.corpus,
                encoder.clone(),
                &options.eval.retrievers,
            )
            .await?
        };
        let index_seconds = t.elapsed().as_secs_f64();
        results.push(
            evaluate_qa(
                retriever.as_ref(),
                dataset,
                reader.clone(),
                index_seconds,
                options,
                progress,
            )
            .await?,
        );
    }
    Ok(QaReport {
        dataset: dataset.name.clone(),
        questions: dataset.questions.len(),
        encoder: encoder_name.to_string(),
        reader: format!("{}:{}", reader.backend(), reader.name()),
        top_k: options.top_k,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::{DatasetFormat, Question};
    use async_trait::async_trait;
    use lprag::llm::{ChatRequest, ChatResponse, LlmError};
    use lprag_core::{Document, NoProgress};
    use lprag_text::HashingEncoder;

    /// Answers with the first line of the best chunk's text (the title) when the question
    /// mentions "title", else with a fixed wrong answer; fails on "boom".
    struct Reader;

    #[async_trait]
    impl ChatModel for Reader {
        fn name(&self) -> &str {
            "reader"
        }
        async fn complete(&self, r: &ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
            let user = &r.messages[1].content;
            if user.contains("boom") {
                return Err(LlmError::Permanent("boom".into()));
            }
            let first_chunk = user
                .lines()
                .find(|l| l.starts_with("1. "))
                .map(|l| l[3..].to_string())
                .unwrap_or_default();
            let mut resp = ChatResponse::text(if user.contains("title") {
                first_chunk
            } else {
                "I don't know.".into()
            });
            resp.usage = Some(lprag::llm::Usage {
                prompt_tokens: 100,
                completion_tokens: 2,
            });
            Ok(resp)
        }
    }

    fn dataset(extra: Option<&str>) -> Dataset {
        let q = |id: &str, text: &str, answer: &str, gold: usize| Question {
            id: id.into(),
            question: text.into(),
            answers: vec![answer.into()],
            gold: vec![gold],
            grades: Vec::new(),
            unmatched_gold: vec![],
            metadata: Default::default(),
        };
        let mut questions = vec![
            q("a", "title of the Vistula river passage", "Vistula", 0),
            q("b", "who invented dynamite", "Alfred Nobel", 1),
        ];
        if let Some(t) = extra {
            questions.push(q("c", t, "x", 0));
        }
        Dataset {
            name: "toy".into(),
            format: DatasetFormat::Jsonl,
            corpus: vec![
                Document::new("d0", "Vistula", "The Vistula river flows through Warsaw."),
                Document::new("d1", "Alfred Nobel", "Alfred Nobel invented dynamite."),
                Document::new("d2", "Tokyo", "Tokyo is the capital of Japan."),
                Document::new("d3", "Everest", "Mount Everest is the highest mountain."),
            ],
            questions,
            duplicates_dropped: 0,
        }
    }

    #[tokio::test]
    async fn scores_answers_and_counts_reader_tokens() {
        let enc = Arc::new(HashingEncoder::default());
        let report = run_qa(
            &dataset(None),
            &["bm25".to_string()],
            enc,
            "hashing",
            Arc::new(Reader),
            &QaOptions {
                top_k: 1,
                ..QaOptions::default()
            },
            &NoProgress,
        )
        .await
        .unwrap();
        let r = &report.results[0];
        // Question a: the top passage is "Vistula\n…", the reader answers its title → EM 1.
        // Question b: "I don't know." → EM 0, F1 0.
        assert_eq!(r.per_question[0].prediction, "Vistula");
        assert_eq!((r.per_question[0].em, r.per_question[1].em), (1.0, 0.0));
        assert_eq!(r.em, 0.5);
        assert_eq!(r.context_recall, 1.0);
        assert_eq!(r.usage.calls, 2);
        assert_eq!(r.usage.prompt_tokens, 200);
        assert!(report.to_markdown().contains("| bm25 | 50.00 |"));
        assert_eq!(report.reader, "custom:reader");
    }

    #[tokio::test]
    async fn a_failing_reader_is_a_typed_error_naming_the_question() {
        let err = run_qa(
            &dataset(Some("boom")),
            &["bm25".to_string()],
            Arc::new(HashingEncoder::default()),
            "hashing",
            Arc::new(Reader),
            &QaOptions::default(),
            &NoProgress,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("1 of 3 questions failed") && err.contains("question c"),
            "{err}"
        );
    }
}
