//! LP-RAG's LLM chunker (§3.1, C-PROMPT in Box D.1), with long documents split into
//! windows that fit the model's context.
//!
//! `windows` sizes the windows and requests to the context budget; this module sends
//! them, splits a window again while its answer is cut, and assembles the statements into
//! chunks with spans in the whole document.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Error, Provenance, Result};
use lprag_text::SentenceChunker;
use serde::{Deserialize, Serialize};

use crate::jobs::{
    collect, fallback_items, run_all, settings_methods, Attempt, Parsed, Settings, TooLong,
};
use crate::parse::{chunk_statements, drop_prompt_echoes, drop_ungrounded};
use crate::{ChatModel, ChatRequest, LlmError, OnUnparseable};

mod windows;

use windows::{
    estimate_tokens, split_windows, Budget, ANSWER_PER_WINDOW_TOKEN, ANSWER_SLACK, BYTES_PER_TOKEN,
    MIN_ANSWER_TOKENS, MIN_WINDOW_TOKENS,
};

/// Share of a statement's content words that must occur in its document
/// ([`drop_ungrounded`]): statements are rewrites, so some new words are expected.
const GROUNDED_FRACTION: f32 = 0.5;

/// What [`LlmChunker`] split to fit the model's context, since it was built (every
/// [`Chunker::chunk`] call adds to it). The same counts go to a [`crate::TokenMeter`]
/// under `"chunking"` ([`crate::StageUsage::windowed_items`] and the fields after it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChunkerStats {
    /// Non-empty documents chunked.
    pub documents: u64,
    /// Of those, documents longer than one window, split into windows before the model
    /// saw them.
    pub documents_windowed: u64,
    /// Windows sent to the model: one per document that fits, one per window of a split
    /// document, plus the pieces of windows split again.
    pub windows: u64,
    /// Windows whose answer was cut at the token limit (finish reason `length`, Ollama's
    /// `done_reason`), split in two and asked again.
    pub truncated_retries: u64,
    /// Windows the server refused as longer than its context, split in two and asked
    /// again.
    pub context_retries: u64,
    /// Windows given to the offline fallback chunker: unreadable answers, and answers
    /// still cut (or requests still refused) at the smallest window
    /// ([`crate::OnUnparseable::Fallback`]).
    pub fallback_windows: u64,
}

/// Splits each document into atomic, self-contained statements with an LLM (pronouns
/// resolved, as the C-PROMPT asks). One call per window, several in flight.
///
/// # Long documents
///
/// A document is never cut silently. Before the model sees it, a document whose prompt,
/// text and expected answer would not fit the model's context is split into windows
/// that do, at paragraph breaks where possible, then line breaks, sentences, words
/// (`text-splitter`); each window is chunked by its own call, and the statements come
/// back in document order with their spans in the whole document. The budget:
///
/// - the context is [`LlmChunker::context_tokens`], else the model's own
///   ([`ChatModel::context_tokens`]: [`crate::OllamaChat`] reports its `num_ctx`), else
///   **8,192 tokens** ([`LlmChunker::DEFAULT_CONTEXT_TOKENS`]; set it to your server's
///   real context, which may be smaller);
/// - tokens are **estimated** as UTF-8 bytes ÷ 3, rounded up (no tokenizer is at hand):
///   about a third more than English prose really takes, about right for CJK text;
/// - the answer gets **3 tokens per window token + 128** (the C-PROMPT's answer repeats
///   each sentence and lists its statements), at least 1,024 where the context has room
///   — short documents get the 1,024 every document got before windows existed, so
///   their requests, and cached answers, are unchanged. This departs from the earlier
///   fixed cap of 1,024 tokens, which cut the answers of long documents. An explicit
///   [`LlmChunker::max_tokens`] is used as it is, and windows are made small enough for
///   it (`Some(n)`: at most `(n − 128) / 3` tokens); `None` sends no limit and sizes
///   windows as the default does;
/// - so a window is at most `(context − prompt − 128) / 4` estimated tokens: about 1,800
///   (5,400 bytes) with the paper's prompt and 8,192 tokens of context.
///
/// An answer the backend cut at its token limit (finish reason `length`) is not read,
/// since what it lost would be lost silently: its window is split in two and each half
/// asked again, down to windows of 128 estimated tokens; a first request the server
/// refuses as longer than its context ([`LlmError::ContextLength`]) is split the same
/// way. A window still cut at that size is unreadable and handled as
/// [`LlmChunker::on_unparseable`] says. What was split is counted in [`ChunkerStats`]
/// ([`LlmChunker::stats`]), in the [`crate::TokenMeter`] and in one warning through the
/// progress sink per run. Statements do not span windows: a pronoun whose referent is in
/// the previous window stays unresolved.
///
/// # Provenance
///
/// Statements are rewritten text, so their [`Provenance::span`] is the span of the
/// document they came from: the exact substring when the statement appears verbatim in
/// its window, else the window's sentence sharing the most words with it, else the whole
/// window (the whole document when it was not split).
///
/// # Unreadable answers
///
/// A window whose answer cannot be parsed, even after the model was asked once more
/// ([`LlmChunker::parse_retries`]), is split by the offline fallback chunker instead
/// ([`SentenceChunker`] by default, [`LlmChunker::fallback`] to change it); the
/// documents concerned are counted in [`crate::StageUsage::fallbacks`] under
/// `"chunking"` and reported in one warning; with [`crate::OnUnparseable::Fail`] it fails
/// the stage with [`LlmError::Parse`] (carrying the raw answer) instead. All other
/// windows are still processed either way, so with a [`crate::CachedChat`] a rerun pays
/// only for what failed.
pub struct LlmChunker {
    settings: Settings,
    fallback: Arc<dyn Chunker>,
    context_tokens: Option<u32>,
    stats: Mutex<ChunkerStats>,
}

/// The outcome of one planned window: the pieces it was finally read in (itself, or the
/// halves of a cut answer…), in order, and what was split on the way.
#[derive(Default)]
struct WindowRun {
    pieces: Vec<(Range<usize>, Parsed<Vec<String>>)>,
    sent: u64,
    truncated: u64,
    context: u64,
}

impl LlmChunker {
    /// The context assumed for a model that reports none ([`ChatModel::context_tokens`])
    /// when [`LlmChunker::context_tokens`] is not set: 8,192 tokens.
    pub const DEFAULT_CONTEXT_TOKENS: u32 = 8192;

    /// A chunker on `model` with the paper's prompt, temperature 0, 8 windows in flight,
    /// the model's context (else 8,192 tokens) and answer limits sized per window (see
    /// [`LlmChunker`]).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, MIN_ANSWER_TOKENS as u32),
            fallback: Arc::new(SentenceChunker::default()),
            context_tokens: None,
            stats: Mutex::new(ChunkerStats::default()),
        }
    }

    settings_methods!("chunking");

    /// Split documents whose answer cannot be parsed with this chunker. Default
    /// [`SentenceChunker::default`].
    pub fn fallback(mut self, chunker: Arc<dyn Chunker>) -> Self {
        self.fallback = chunker;
        self
    }

    /// The model's context window in tokens (prompt and answer together), which windows
    /// are sized to. Default: the model's own ([`ChatModel::context_tokens`]), else
    /// [`LlmChunker::DEFAULT_CONTEXT_TOKENS`]. Set it to what the server really runs with:
    /// a server that cuts a long prompt silently (Ollama does) is not caught by anything
    /// else.
    pub fn context_tokens(mut self, tokens: u32) -> Self {
        self.context_tokens = Some(tokens);
        self
    }

    /// The context in use: [`LlmChunker::context_tokens`], else the model's, else
    /// [`LlmChunker::DEFAULT_CONTEXT_TOKENS`].
    pub fn context_budget(&self) -> u32 {
        self.context_tokens
            .or_else(|| self.settings.model.context_tokens())
            .unwrap_or(Self::DEFAULT_CONTEXT_TOKENS)
    }

    /// What was split so far (see [`ChunkerStats`]).
    pub fn stats(&self) -> ChunkerStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Chunk the window `range` of `doc`, splitting it again while answers are cut.
    async fn window_statements(
        &self,
        b: &Budget,
        doc: &Document,
        range: Range<usize>,
    ) -> std::result::Result<WindowRun, LlmError> {
        let mut run = WindowRun::default();
        let mut todo = VecDeque::from([range]);
        while let Some(r) = todo.pop_front() {
            run.sent += 1;
            let text = &doc.text[r.clone()];
            let whole = r == (0..doc.text.len());
            let what = || describe("chunk list for document", doc, &r, whole);
            let request = self.window_request(b, text)?;
            let system = request.messages[0].content.clone();
            let attempt = self
                .settings
                .call_parsed_or_split(
                    "chunking",
                    request,
                    what,
                    |raw| {
                        let statements = chunk_statements(raw)?;
                        let statements = drop_prompt_echoes(statements, &system)?;
                        drop_ungrounded(statements, text, GROUNDED_FRACTION)
                    },
                    true,
                )
                .await?;
            let (why, asked) = match attempt {
                Attempt::Answered(p) => {
                    run.pieces.push((r, p));
                    continue;
                }
                Attempt::TooLong { why, asked } => (why, asked),
            };
            let own = estimate_tokens(text);
            let halves = halves(text, &r, own);
            if halves.len() >= 2 {
                match why {
                    TooLong::Truncated { .. } => run.truncated += 1,
                    TooLong::Context(_) => run.context += 1,
                }
                tracing::debug!(
                    target: "lprag::llm",
                    document = %doc.id,
                    window = ?r,
                    pieces = halves.len(),
                    "{why}; splitting the window and asking again"
                );
                for h in halves.into_iter().rev() {
                    todo.push_front(h);
                }
                continue;
            }
            // The smallest window: nothing left to split.
            let outcome = self.unsplittable(why, &asked, own, what)?;
            run.pieces.push((r, outcome));
        }
        Ok(run)
    }

    /// The outcome of a window still cut, or refused, at the smallest size (`own`
    /// estimated tokens): unreadable, for the fallback chunker, or the error under
    /// [`OnUnparseable::Fail`]. The conversation's answers are forgotten either way.
    fn unsplittable(
        &self,
        why: TooLong,
        asked: &[ChatRequest],
        own: u64,
        what: impl Fn() -> String,
    ) -> std::result::Result<Parsed<Vec<String>>, LlmError> {
        asked.iter().for_each(|r| self.settings.model.forget(r));
        let reason = format!("{why}, even for a window of about {own} tokens");
        match (self.settings.on_unparseable, why) {
            (OnUnparseable::Fail, TooLong::Truncated { raw, .. }) => Err(LlmError::Parse {
                what: what(),
                reason,
                raw,
            }),
            (OnUnparseable::Fail, TooLong::Context(why)) => {
                Err(LlmError::ContextLength(format!("{}: {why}", what())))
            }
            (OnUnparseable::Fallback, _) => {
                let reason = format!("{}: {reason}", what());
                Ok(Parsed::Unreadable(reason))
            }
        }
    }

    /// The chunks of the offline fallback for the window `range` of `doc`, spans in `doc`.
    async fn fallback_window(&self, doc: &Document, range: &Range<usize>) -> Result<Vec<Chunk>> {
        if *range == (0..doc.text.len()) {
            return self.fallback.chunk(std::slice::from_ref(doc)).await;
        }
        let window = Document {
            text: doc.text[range.clone()].to_string(),
            ..doc.clone()
        };
        let mut own = self.fallback.chunk(std::slice::from_ref(&window)).await?;
        for c in &mut own {
            let span = &c.provenance.span;
            c.provenance.span = range.start + span.start..range.start + span.end;
        }
        Ok(own)
    }

    /// Count a run's splits and warn about them once.
    fn report(&self, documents: u64, windowed: u64, runs: &[&WindowRun], b: &Budget) {
        let sent: u64 = runs.iter().map(|r| r.sent).sum();
        let truncated: u64 = runs.iter().map(|r| r.truncated).sum();
        let context: u64 = runs.iter().map(|r| r.context).sum();
        let fallbacks = runs
            .iter()
            .flat_map(|r| &r.pieces)
            .filter(|(_, p)| matches!(p, Parsed::Unreadable(_)))
            .count() as u64;
        {
            let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            s.documents += documents;
            s.documents_windowed += windowed;
            s.windows += sent;
            s.truncated_retries += truncated;
            s.context_retries += context;
            s.fallback_windows += fallbacks;
        }
        if let Some(m) = &self.settings.meter {
            m.record_windows("chunking", windowed, sent, truncated, context);
        }
        if windowed == 0 && truncated == 0 && context == 0 {
            return;
        }
        tracing::info!(
            target: "lprag::llm",
            documents,
            windowed,
            windows = sent,
            truncated,
            context,
            "LLM chunking split inputs to fit the model's context"
        );
        let mut message = String::from("LLM chunking:");
        if windowed > 0 {
            message.push_str(&format!(
                " {windowed} of {documents} documents were too long for one call within the \
                 model's context ({} tokens, about {} tokens of document per call) and were chunked in \
                 windows; statements do not span windows.",
                b.context, b.window
            ));
        }
        if truncated > 0 || context > 0 {
            message.push_str(&format!(
                " {truncated} answers cut at the token limit and {context} requests refused as \
                 longer than the context had their window split and asked again."
            ));
        }
        message.push_str(&format!(" {sent} windows sent in all."));
        self.settings.progress.warn(&message);
    }
}

/// The halves of window `r` (its text `text`, `own` estimated tokens), spans in the
/// document, to ask again; none (or one) when the window is at the smallest size.
fn halves(text: &str, r: &Range<usize>, own: u64) -> Vec<Range<usize>> {
    if own > MIN_WINDOW_TOKENS {
        split_windows(text, text.len().div_ceil(2))
            .into_iter()
            .map(|h| r.start + h.start..r.start + h.end)
            .collect()
    } else {
        Vec::new()
    }
}

/// `"{what} `id`"`, with the window's byte range when it is not the whole document.
fn describe(what: &str, doc: &Document, r: &Range<usize>, whole: bool) -> String {
    if whole {
        format!("{what} `{}`", doc.id)
    } else {
        format!("{what} `{}` (bytes {}..{})", doc.id, r.start, r.end)
    }
}

/// Where in `text` a (possibly rewritten) statement came from.
fn locate(
    statement: &str,
    text: &str,
    sentences: &[std::ops::Range<usize>],
) -> std::ops::Range<usize> {
    if let Some(start) = text.find(statement) {
        return start..start + statement.len();
    }
    let words = |s: &str| -> std::collections::HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let target = words(statement);
    let best = sentences
        .iter()
        .map(|r| (target.intersection(&words(&text[r.clone()])).count(), r))
        .filter(|(n, _)| *n > 0)
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.start.cmp(&a.1.start)));
    match best {
        Some((_, r)) => r.clone(),
        None => 0..text.len(),
    }
}

#[async_trait]
impl Chunker for LlmChunker {
    fn name(&self) -> &str {
        "llm-chunker"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!(
            "{} fallback={}:{:?} context={} answer={} windows=bytes/{BYTES_PER_TOKEN},x{ANSWER_PER_WINDOW_TOKEN}+{ANSWER_SLACK},min{MIN_WINDOW_TOKENS}",
            self.settings.fingerprint(),
            self.fallback.name(),
            self.fallback.fingerprint(),
            self.context_budget(),
            if self.settings.max_tokens_set { "set" } else { "per-window" },
        ))
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        let docs: Vec<&Document> = documents
            .iter()
            .filter(|d| !d.text.trim().is_empty())
            .collect();
        if docs.is_empty() {
            return Err(Error::EmptyCorpus(
                "every document is empty or whitespace".into(),
            ));
        }
        let stage = "LLM chunking";
        let s = &self.settings;
        let budget = self
            .budget()
            .map_err(|e| Error::invalid("LlmChunker::context_tokens", e.to_string()))?;
        let max_bytes = (budget.window * BYTES_PER_TOKEN) as usize;
        let (windows, windowed) = plan_windows(&docs, max_bytes);
        let results = run_all(windows.len(), s.concurrency, stage, &*s.progress, |i| {
            let (d, r, _) = &windows[i];
            self.window_statements(&budget, docs[*d], r.clone())
        })
        .await;
        let ok: Vec<&WindowRun> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        self.report(docs.len() as u64, windowed, &ok, &budget);
        let runs = collect(stage, results, |i| {
            let (d, r, whole) = &windows[i];
            describe("document", docs[*d], r, *whole)
        })
        .map_err(|e| e.into_core(stage))?;
        self.report_fallbacks(&docs, &windows, &runs);
        self.assemble(&docs, &windows, runs).await
    }
}

/// Every document's windows, in document order: `(document index, window, whether it is
/// the whole document)`, and how many documents were split.
fn plan_windows(docs: &[&Document], max_bytes: usize) -> (Vec<Window>, u64) {
    let mut windows: Vec<Window> = Vec::new();
    let mut windowed = 0u64;
    for (d, doc) in docs.iter().enumerate() {
        let own = split_windows(&doc.text, max_bytes);
        let whole = own.len() == 1;
        windowed += u64::from(!whole);
        windows.extend(own.into_iter().map(|r| (d, r, whole)));
    }
    (windows, windowed)
}

/// A planned window: `(document index, byte range, whether it is the whole document)`.
type Window = (usize, Range<usize>, bool);

impl LlmChunker {
    /// Count and report the documents that went (in part) to the fallback chunker.
    fn report_fallbacks(&self, docs: &[&Document], windows: &[Window], runs: &[WindowRun]) {
        let s = &self.settings;
        let stage = "LLM chunking";
        // One outcome per document for the fallback count and warning: unreadable when
        // any of its windows was.
        let mut per_doc: Vec<Parsed<()>> = docs.iter().map(|_| Parsed::Read(())).collect();
        let mut partial = false;
        for ((d, _, whole), run) in windows.iter().zip(runs) {
            for (_, p) in &run.pieces {
                if let (Parsed::Unreadable(why), Parsed::Read(())) = (p, &per_doc[*d]) {
                    per_doc[*d] = Parsed::Unreadable(why.clone());
                    partial |= !whole || run.pieces.len() > 1;
                }
            }
        }
        let offline = if partial {
            format!(
                "the offline chunker `{}` (on the unreadable windows only, for split documents)",
                self.fallback.name()
            )
        } else {
            format!("the offline chunker `{}`", self.fallback.name())
        };
        fallback_items(s, stage, "chunking", "documents", &offline, &per_doc);
    }

    /// The chunks of all windows, in order: the statements read, located in their
    /// document, and the fallback chunker's chunks of unreadable windows.
    async fn assemble(
        &self,
        docs: &[&Document],
        windows: &[Window],
        runs: Vec<WindowRun>,
    ) -> Result<Vec<Chunk>> {
        let splitter = SentenceChunker::default();
        let mut chunks = Vec::new();
        for ((d, _, _), run) in windows.iter().zip(runs) {
            let doc = docs[*d];
            for (r, outcome) in run.pieces {
                match outcome {
                    Parsed::Read(statements) => {
                        let text = &doc.text[r.clone()];
                        let sentences = splitter.split(text);
                        for s in statements {
                            let span = locate(&s, text, &sentences);
                            chunks.push(Chunk {
                                id: chunks.len(),
                                provenance: Provenance {
                                    document_id: doc.id.clone(),
                                    title: doc.title.clone(),
                                    span: r.start + span.start..r.start + span.end,
                                },
                                text: s,
                                metadata: doc.metadata.clone(),
                            });
                        }
                    }
                    Parsed::Unreadable(_) => {
                        for c in self.fallback_window(doc, &r).await? {
                            chunks.push(Chunk {
                                id: chunks.len(),
                                ..c
                            });
                        }
                    }
                }
            }
        }
        Ok(chunks)
    }
}

#[cfg(test)]
mod tests;
