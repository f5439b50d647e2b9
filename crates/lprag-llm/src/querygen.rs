//! Synthetic queries from an LLM: LP-RAG's S-PROMPT batches (§3.2, Box D.3) or QCG-RAG's
//! Doc2Query (query, answer) pairs (Prompt C.1).

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, ChunkId, Error, QueryGenerator, Result, SyntheticQuery};
use lprag_text::{HeuristicQueryGenerator, HeuristicQueryGeneratorConfig};

use crate::jobs::{collect, fallback_items, run_all, settings_methods, Parsed, Settings};
use crate::parse::{drop_prompt_echoes, drop_ungrounded, grouped_questions, query_answer_pairs};

/// Share of a question's content words that must occur in its batch's chunks
/// ([`drop_ungrounded`]).
const GROUNDED_FRACTION: f32 = 0.34;
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// Which paper's query generation to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMode {
    /// LP-RAG: one S-PROMPT call per batch of chunks (A.2 batches, n_B = 2 questions per
    /// chunk as the prompt asks); every question is linked to every chunk of its batch.
    LpRag,
    /// QCG-RAG: one Doc2Query call per chunk, `num_queries` (query, answer) pairs each,
    /// linked to that chunk, with the answer kept.
    Doc2Query {
        /// Pairs asked for per chunk (the paper: 20).
        num_queries: usize,
    },
}

/// A [`QueryGenerator`] backed by a [`ChatModel`].
///
/// A batch (S-PROMPT) or chunk (Doc2Query) whose answer cannot be parsed, even after the
/// model was asked once more ([`LlmQueryGenerator::parse_retries`]), gets its questions
/// from the offline fallback generator instead ([`HeuristicQueryGenerator`], with
/// `num_queries` questions per chunk in Doc2Query mode; [`LlmQueryGenerator::fallback`]
/// to change it), counted in [`crate::StageUsage::fallbacks`] under `"queries"` and
/// reported in one warning. With [`crate::OnUnparseable::Fail`] the stage fails instead.
/// Questions that copy the prompt's own example are dropped.
pub struct LlmQueryGenerator {
    settings: Settings,
    mode: QueryMode,
    fallback: Option<Arc<dyn QueryGenerator>>,
}

impl LlmQueryGenerator {
    /// LP-RAG's S-PROMPT generator on `model` (temperature 0, 8 calls in flight, at most
    /// 1,024 tokens per answer).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 1024),
            mode: QueryMode::LpRag,
            fallback: None,
        }
    }

    /// QCG-RAG's Doc2Query generator on `model`: 20 pairs per chunk, at most 2,000 tokens
    /// per answer.
    pub fn doc2query(model: Arc<dyn ChatModel>) -> Self {
        Self::new(model).mode(QueryMode::Doc2Query { num_queries: 20 })
    }

    /// Choose the mode. This also sets the token limit per answer to the mode's default
    /// (1,024 for S-PROMPT batches; 100 per pair, at least 1,024, for Doc2Query): call
    /// `max_tokens` after it to choose another.
    pub fn mode(mut self, mode: QueryMode) -> Self {
        self.mode = mode;
        self.settings.max_tokens = Some(match mode {
            QueryMode::LpRag => 1024,
            QueryMode::Doc2Query { num_queries } => (100 * num_queries as u32).max(1024),
        });
        self
    }

    settings_methods!("queries");

    /// Write the questions of batches (or chunks) whose answer cannot be parsed with this
    /// generator. Default: [`HeuristicQueryGenerator`] (its default settings in LP-RAG
    /// mode; `queries_per_batch = num_queries` in Doc2Query mode).
    pub fn fallback(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.fallback = Some(generator);
        self
    }

    fn fallback_generator(&self) -> Arc<dyn QueryGenerator> {
        if let Some(f) = &self.fallback {
            return f.clone();
        }
        Arc::new(match self.mode {
            QueryMode::LpRag => HeuristicQueryGenerator::default(),
            QueryMode::Doc2Query { num_queries } => {
                HeuristicQueryGenerator::new(HeuristicQueryGeneratorConfig {
                    queries_per_batch: num_queries.max(1),
                    ..HeuristicQueryGeneratorConfig::default()
                })
            }
        })
    }

    /// A stage's outcomes (or the [`crate::LlmError::Stage`] of its transport failures) and the
    /// indices of the items whose answers fell back, counted and warned about.
    fn settle<T>(
        &self,
        stage: &str,
        items: &str,
        results: Vec<std::result::Result<Parsed<T>, LlmError>>,
        describe: impl Fn(usize) -> String,
    ) -> Result<(Vec<Parsed<T>>, Vec<usize>)> {
        let outcomes = collect(stage, results, describe).map_err(|e| e.into_core(stage))?;
        let offline = format!(
            "the offline generator `{}`",
            self.fallback_generator().name()
        );
        let failed = fallback_items(&self.settings, stage, "queries", items, &offline, &outcomes);
        Ok((outcomes, failed))
    }

    /// The questions of the batches at `failed` from the fallback generator.
    async fn fallback_queries(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
        failed: &[usize],
    ) -> Result<Vec<SyntheticQuery>> {
        if failed.is_empty() {
            return Ok(Vec::new());
        }
        let subset: Vec<Vec<ChunkId>> = failed.iter().map(|&b| batches[b].clone()).collect();
        self.fallback_generator().generate(chunks, &subset).await
    }

    /// The S-PROMPT request for a batch of chunk texts.
    pub fn batch_request(&self, texts: &[&str]) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let mut bag = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let index = (i + 1).to_string();
            bag.push(p.query_chunk.render(&[("index", &index), ("text", t)])?);
        }
        Ok(self.settings.request(vec![
            ChatMessage::system(p.query_system.render(&[])?),
            ChatMessage::user(p.query_user.render(&[("chunks", &bag.join("\n"))])?),
        ]))
    }

    /// The Doc2Query request for one chunk.
    pub fn doc2query_request(
        &self,
        text: &str,
        num_queries: usize,
    ) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let n = num_queries.to_string();
        Ok(self.settings.request(vec![
            ChatMessage::system(p.doc2query_system.render(&[("num_queries", &n)])?),
            ChatMessage::user(p.doc2query_user.render(&[("chunk", text)])?),
        ]))
    }

    /// LP-RAG queries: one request per batch, its questions linked to the whole batch;
    /// failed batches go to the fallback generator.
    async fn lprag_queries(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>> {
        let stage = "LLM queries";
        let results = run_all(
            batches.len(),
            self.settings.concurrency,
            stage,
            &*self.settings.progress,
            |b| {
                let batch = &batches[b];
                async move {
                    let texts: Vec<&str> = batch.iter().map(|&c| chunks[c].text.as_str()).collect();
                    let request = self.batch_request(&texts)?;
                    let system = request.messages[0].content.clone();
                    let source = texts.join("\n");
                    self.settings
                        .call_parsed(
                            "queries",
                            request,
                            || format!("questions for batch {b}"),
                            |raw| {
                                let qs: Vec<String> = grouped_questions(raw)?
                                    .into_iter()
                                    .map(|(_, q)| q)
                                    .collect();
                                let qs = drop_prompt_echoes(qs, &system)?;
                                drop_ungrounded(qs, &source, GROUNDED_FRACTION)
                            },
                        )
                        .await
                }
            },
        )
        .await;
        let (per_batch, failed) = self.settle(stage, "batches", results, |b| {
            format!("batch {b} (chunks {:?})", batches[b])
        })?;
        let mut out: Vec<SyntheticQuery> = Vec::new();
        for (b, outcome) in per_batch.into_iter().enumerate() {
            if let Parsed::Read(qs) = outcome {
                out.extend(qs.into_iter().map(|q| SyntheticQuery {
                    text: q,
                    chunk_ids: batches[b].clone(),
                    answer: None,
                }));
            }
        }
        out.extend(self.fallback_queries(chunks, batches, &failed).await?);
        Ok(out)
    }

    /// Doc2Query pairs: one request per distinct chunk (in batch order), each question
    /// linked to its chunk with its answer; failed chunks go to the fallback generator.
    async fn doc2query_queries(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
        num_queries: usize,
    ) -> Result<Vec<SyntheticQuery>> {
        let stage = "LLM Doc2Query";
        let mut seen = vec![false; chunks.len()];
        let order: Vec<ChunkId> = batches
            .iter()
            .flatten()
            .copied()
            .filter(|&c| !std::mem::replace(&mut seen[c], true))
            .collect();
        let results = run_all(
            order.len(),
            self.settings.concurrency,
            stage,
            &*self.settings.progress,
            |i| {
                let c = order[i];
                async move {
                    let request = self.doc2query_request(&chunks[c].text, num_queries)?;
                    let system = request.messages[0].content.clone();
                    self.settings
                        .call_parsed(
                            "queries",
                            request,
                            || format!("Doc2Query pairs for chunk {c}"),
                            |raw| {
                                let pairs = query_answer_pairs(raw)?;
                                let qs: Vec<String> =
                                    pairs.iter().map(|(q, _)| q.clone()).collect();
                                let kept = drop_prompt_echoes(qs, &system)?;
                                let kept =
                                    drop_ungrounded(kept, &chunks[c].text, GROUNDED_FRACTION)?;
                                Ok(pairs
                                    .into_iter()
                                    .filter(|(q, _)| kept.contains(q))
                                    .collect::<Vec<_>>())
                            },
                        )
                        .await
                }
            },
        )
        .await;
        let (per_chunk, failed) =
            self.settle(stage, "chunks", results, |i| format!("chunk {}", order[i]))?;
        let mut out: Vec<SyntheticQuery> = Vec::new();
        for (i, outcome) in per_chunk.into_iter().enumerate() {
            if let Parsed::Read(pairs) = outcome {
                out.extend(pairs.into_iter().map(|(q, a)| SyntheticQuery {
                    text: q,
                    chunk_ids: vec![order[i]],
                    answer: (!a.is_empty()).then_some(a),
                }));
            }
        }
        let one_chunk: Vec<Vec<ChunkId>> = order.iter().map(|&c| vec![c]).collect();
        out.extend(self.fallback_queries(chunks, &one_chunk, &failed).await?);
        Ok(out)
    }
}

fn check_batches(chunks: &[Chunk], batches: &[Vec<ChunkId>]) -> Result<()> {
    for (b, batch) in batches.iter().enumerate() {
        if batch.is_empty() {
            return Err(Error::invalid(format!("batches[{b}]"), "empty batch"));
        }
        if let Some(&c) = batch.iter().find(|&&c| c >= chunks.len()) {
            return Err(Error::invalid(
                format!("batches[{b}]"),
                format!("chunk id {c} out of range ({} chunks)", chunks.len()),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl QueryGenerator for LlmQueryGenerator {
    fn name(&self) -> &str {
        match self.mode {
            QueryMode::LpRag => "llm-queries",
            QueryMode::Doc2Query { .. } => "llm-doc2query",
        }
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!(
            "{} {:?} fallback={:?}",
            self.settings.fingerprint(),
            self.mode,
            self.fallback
                .as_ref()
                .map(|f| format!("{}:{:?}", f.name(), f.fingerprint()))
        ))
    }

    async fn generate(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>> {
        check_batches(chunks, batches)?;
        match self.mode {
            QueryMode::LpRag => self.lprag_queries(chunks, batches).await,
            QueryMode::Doc2Query { num_queries } => {
                self.doc2query_queries(chunks, batches, num_queries).await
            }
        }
    }
}
