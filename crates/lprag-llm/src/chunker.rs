//! LP-RAG's LLM chunker (§3.1, C-PROMPT in Box D.1), with long documents split into
//! windows that fit the model's context.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Error, Provenance, Result};
use lprag_text::SentenceChunker;
use serde::{Deserialize, Serialize};
use text_splitter::{ChunkConfig, ChunkSizer, TextSplitter};

use crate::jobs::{
    collect, fallback_items, run_all, settings_methods, Attempt, Parsed, Settings, TooLong,
};
use crate::parse::{chunk_statements, drop_prompt_echoes, drop_ungrounded};
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError, OnUnparseable};

/// Share of a statement's content words that must occur in its document
/// ([`drop_ungrounded`]): statements are rewrites, so some new words are expected.
const GROUNDED_FRACTION: f32 = 0.5;

/// UTF-8 bytes counted as one token. Real tokenizers give about 4 bytes a token for English
/// prose and about 3 for a CJK character (one token or a little more), so `bytes / 3`
/// overestimates English by about a third and is close for CJK: a conservative estimate,
/// as it must be with no tokenizer at hand.
const BYTES_PER_TOKEN: u64 = 3;

/// Answer tokens budgeted per token of window: the C-PROMPT's answer repeats every
/// sentence and then lists its statements, each a rewrite of part of it (the prompt's own
/// example answers with about 2.7 times its paragraph).
const ANSWER_PER_WINDOW_TOKEN: u64 = 3;

/// Answer tokens budgeted on top (labels, a short preamble).
const ANSWER_SLACK: u64 = 128;

/// The smallest token limit a window's answer gets (when the context has room): the limit
/// every document got before windows existed, so a short document's request, and its
/// cached answer, stay what they were.
const MIN_ANSWER_TOKENS: u64 = 1024;

/// Tokens a chat template adds per message (role markers, separators).
const MESSAGE_OVERHEAD: u64 = 8;

/// A window of at most this many estimated tokens is not split again when its answer is
/// cut: its answer limit (at least [`MIN_ANSWER_TOKENS`]) is 8 times its size, so a cut
/// answer means a model that does not stop, not a long input.
const MIN_WINDOW_TOKENS: u64 = 128;

/// The estimated token count of `text`: its UTF-8 bytes ÷ 3, rounded up (see
/// [`LlmChunker`] on why).
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Sizes text-splitter's pieces in UTF-8 bytes.
struct Bytes;

impl ChunkSizer for Bytes {
    fn size(&self, chunk: &str) -> usize {
        chunk.len()
    }
}

/// `text` in pieces of at most `max_bytes` bytes, split at paragraph breaks where
/// possible, then line breaks, sentences, words: the byte ranges of the pieces, in order,
/// trimmed (only whitespace between them is left out). A text that fits is one range, the
/// whole text, untrimmed.
fn split_windows(text: &str, max_bytes: usize) -> Vec<Range<usize>> {
    if text.len() <= max_bytes {
        return std::iter::once(0..text.len()).collect();
    }
    TextSplitter::new(ChunkConfig::new(max_bytes.max(1)).with_sizer(Bytes))
        .chunk_indices(text)
        .map(|(start, piece)| start..start + piece.len())
        .filter(|r| !text[r.clone()].trim().is_empty())
        .collect()
}

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

/// The sizes one chunking run works with, in estimated tokens.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// The model's context.
    context: u64,
    /// The prompt without the document.
    prompt: u64,
    /// The most document text per request.
    window: u64,
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

    /// The sizes in estimated tokens, or why the context is too small for any window.
    fn budget(&self) -> std::result::Result<Budget, LlmError> {
        let p = &self.settings.prompts;
        let prompt = estimate_tokens(&p.chunk_system.render(&[])?)
            + estimate_tokens(&p.chunk_user.render(&[("paragraph", "")])?)
            + 2 * MESSAGE_OVERHEAD;
        let context = u64::from(self.context_budget());
        let room = context.saturating_sub(prompt);
        let window = match (self.settings.max_tokens_set, self.settings.max_tokens) {
            (true, Some(n)) => {
                let n = u64::from(n);
                room.saturating_sub(n)
                    .min(n.saturating_sub(ANSWER_SLACK) / ANSWER_PER_WINDOW_TOKEN)
            }
            _ => room.saturating_sub(ANSWER_SLACK) / (ANSWER_PER_WINDOW_TOKEN + 1),
        };
        if window < MIN_WINDOW_TOKENS {
            let cap = match (self.settings.max_tokens_set, self.settings.max_tokens) {
                (true, Some(n)) => format!("an answer limit of {n} tokens (max_tokens)"),
                _ => format!(
                    "its answer ({ANSWER_PER_WINDOW_TOKEN} tokens per document token + {ANSWER_SLACK})"
                ),
            };
            return Err(LlmError::Permanent(format!(
                "LlmChunker: a context of {context} tokens with the chunking prompt (about \
                 {prompt} tokens) and {cap} leaves room for {window} tokens of document per \
                 call, fewer than the {MIN_WINDOW_TOKENS} needed; raise context_tokens (and \
                 the server's context) or max_tokens"
            )));
        }
        Ok(Budget {
            context,
            prompt,
            window,
        })
    }

    /// The byte ranges of `text` that are sent to the model, one call each: the whole
    /// text when it fits the context budget (see [`LlmChunker`]), else windows split at
    /// paragraph breaks where possible, then line breaks, sentences, words. Windows are
    /// trimmed, in order, and cover all of `text` but the whitespace between them. Fails
    /// when the context is too small for any window.
    pub fn windows(&self, text: &str) -> std::result::Result<Vec<Range<usize>>, LlmError> {
        let b = self.budget()?;
        Ok(split_windows(text, (b.window * BYTES_PER_TOKEN) as usize))
    }

    /// The answer limit of a request for `text`.
    fn answer_limit(&self, b: &Budget, text: &str) -> Option<u32> {
        if self.settings.max_tokens_set {
            return self.settings.max_tokens;
        }
        let own = estimate_tokens(text);
        let want = (ANSWER_PER_WINDOW_TOKEN * own + ANSWER_SLACK).max(MIN_ANSWER_TOKENS);
        let room = b.context.saturating_sub(b.prompt + own).max(1);
        Some(want.min(room).min(u64::from(u32::MAX)) as u32)
    }

    fn window_request(&self, b: &Budget, text: &str) -> std::result::Result<ChatRequest, LlmError> {
        let p = &self.settings.prompts;
        let mut request = self.settings.request(vec![
            ChatMessage::system(p.chunk_system.render(&[])?),
            ChatMessage::user(p.chunk_user.render(&[("paragraph", text)])?),
        ]);
        request.max_tokens = self.answer_limit(b, text);
        Ok(request)
    }

    /// The request sent for one window's text (a whole document when it fits), its answer
    /// limit sized to the text (see [`LlmChunker`]).
    pub fn request(&self, text: &str) -> std::result::Result<ChatRequest, LlmError> {
        self.window_request(&self.budget()?, text)
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
            let halves: Vec<Range<usize>> = if own > MIN_WINDOW_TOKENS {
                split_windows(text, text.len().div_ceil(2))
                    .into_iter()
                    .map(|h| r.start + h.start..r.start + h.end)
                    .collect()
            } else {
                Vec::new()
            };
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
            asked.iter().for_each(|r| self.settings.model.forget(r));
            let reason = format!("{why}, even for a window of about {own} tokens");
            match (self.settings.on_unparseable, why) {
                (OnUnparseable::Fail, TooLong::Truncated { raw, .. }) => {
                    return Err(LlmError::Parse {
                        what: what(),
                        reason,
                        raw,
                    })
                }
                (OnUnparseable::Fail, TooLong::Context(why)) => {
                    return Err(LlmError::ContextLength(format!("{}: {why}", what())))
                }
                (OnUnparseable::Fallback, _) => {
                    let reason = format!("{}: {reason}", what());
                    run.pieces.push((r, Parsed::Unreadable(reason)));
                }
            }
        }
        Ok(run)
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
        // Every document's windows, in document order.
        let mut windows: Vec<(usize, Range<usize>, bool)> = Vec::new();
        let mut windowed = 0u64;
        for (d, doc) in docs.iter().enumerate() {
            let own = split_windows(&doc.text, max_bytes);
            let whole = own.len() == 1;
            windowed += u64::from(!whole);
            windows.extend(own.into_iter().map(|r| (d, r, whole)));
        }
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
        // One outcome per document for the fallback count and warning: unreadable when
        // any of its windows was.
        let mut per_doc: Vec<Parsed<()>> = docs.iter().map(|_| Parsed::Read(())).collect();
        let mut partial = false;
        for ((d, _, whole), run) in windows.iter().zip(&runs) {
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
mod tests {
    use super::*;
    use crate::{ChatResponse, TokenMeter};

    /// What a scripted model does with a window's paragraph.
    type Script =
        dyn Fn(&str, &ChatRequest) -> std::result::Result<ChatResponse, LlmError> + Send + Sync;

    /// A model that records every request and answers through its script.
    struct Scripted {
        requests: Mutex<Vec<ChatRequest>>,
        context: Option<u32>,
        script: Box<Script>,
    }

    impl Scripted {
        fn new(
            script: impl Fn(&str, &ChatRequest) -> std::result::Result<ChatResponse, LlmError>
                + Send
                + Sync
                + 'static,
        ) -> Arc<Self> {
            Arc::new(Self {
                requests: Mutex::new(Vec::new()),
                context: None,
                script: Box::new(script),
            })
        }

        fn requests(&self) -> Vec<ChatRequest> {
            self.requests.lock().unwrap().clone()
        }

        /// The paragraphs sent, in the order sent.
        fn paragraphs(&self) -> Vec<String> {
            self.requests()
                .iter()
                .map(|r| paragraph(r).to_string())
                .collect()
        }
    }

    #[async_trait]
    impl ChatModel for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        fn context_tokens(&self) -> Option<u32> {
            self.context
        }
        async fn complete(
            &self,
            request: &ChatRequest,
        ) -> std::result::Result<ChatResponse, LlmError> {
            self.requests.lock().unwrap().push(request.clone());
            (self.script)(paragraph(request), request)
        }
    }

    /// The paragraph of a C-PROMPT request.
    fn paragraph(r: &ChatRequest) -> &str {
        let user = &r.messages[1].content;
        let start = user.find("[The Start of Paragraph text]\n").unwrap() + 30;
        let end = user.rfind("\n[The End of Paragraph text]").unwrap();
        &user[start..end]
    }

    /// The sentences of a paragraph (each ends with a full stop).
    fn sentences(paragraph: &str) -> Vec<&str> {
        paragraph
            .split_inclusive('.')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// A well-behaved C-PROMPT answer: each sentence is its own statement.
    fn answer(paragraph: &str) -> String {
        sentences(paragraph)
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n = i + 1;
                format!("[Sentence {n}]\n{s}\n[Extracted Chunks in Sentence {n}]\n[{s}]\n")
            })
            .collect()
    }

    fn stop(content: String) -> ChatResponse {
        ChatResponse {
            finish_reason: Some("stop".into()),
            ..ChatResponse::text(content)
        }
    }

    /// A document of 50 paragraphs of three distinct sentences each.
    fn long_document() -> Document {
        let text = (0..50)
            .map(|p| {
                (0..3)
                    .map(|s| {
                        format!("Paragraph {p} states fact {s} about river {p}x{s} flowing north.")
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        Document::new("long", "Rivers", text)
    }

    /// The estimated size of a request against `budget`, answer limit included.
    fn estimated(r: &ChatRequest) -> u64 {
        r.messages
            .iter()
            .map(|m| estimate_tokens(&m.content) + MESSAGE_OVERHEAD)
            .sum::<u64>()
            + u64::from(r.max_tokens.unwrap())
    }

    #[derive(Default)]
    struct Warnings(Mutex<Vec<String>>);

    impl lprag_core::Progress for Warnings {
        fn warn(&self, message: &str) {
            self.0.lock().unwrap().push(message.to_string());
        }
    }

    #[tokio::test]
    async fn a_long_document_is_chunked_in_windows_that_fit_with_spans_in_the_whole_document() {
        let doc = long_document();
        let model = Scripted::new(|p, _| Ok(stop(answer(p))));
        let meter = Arc::new(TokenMeter::new());
        let warnings = Arc::new(Warnings::default());
        let chunker = LlmChunker::new(model.clone())
            .context_tokens(2048)
            .concurrency(3)
            .with_meter(meter.clone())
            .with_progress(warnings.clone());
        let chunks = chunker
            .chunk(&[doc.clone(), Document::new("short", "", "A short note.")])
            .await
            .unwrap();

        // Every request fits the context with its answer limit, and the answer limit is
        // 3 tokens per window token + 128 (at least 1,024 where there is room).
        let requests = model.requests();
        assert!(requests.len() > 5, "{} requests", requests.len());
        for r in &requests {
            assert!(estimated(r) <= 2048, "{} > 2048", estimated(r));
            let own = estimate_tokens(paragraph(r));
            assert!(u64::from(r.max_tokens.unwrap()) >= (3 * own + 128).min(2048 - own));
        }
        // The windows are the document in order, nothing dropped but the whitespace
        // between paragraphs; they end at paragraph breaks.
        let mut sent = model.paragraphs();
        sent.sort_by_key(|p| doc.text.find(p.as_str()).unwrap_or(usize::MAX));
        let windows = chunker.windows(&doc.text).unwrap();
        assert_eq!(windows.len() + 1, sent.len());
        let mut covered: Vec<&str> = windows.iter().map(|r| &doc.text[r.clone()]).collect();
        assert!(covered.iter().all(|w| !w.starts_with(char::is_whitespace)));
        covered.push("A short note.");
        assert_eq!(sent, covered);
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        assert_eq!(
            squeeze(&covered[..windows.len()].concat()),
            squeeze(&doc.text)
        );
        for w in &windows {
            assert!(w.end == doc.text.len() || doc.text[w.end..].starts_with("\n\n"));
        }

        // Every sentence is a statement, in document order, its span exact in the whole
        // document.
        let expected: Vec<&str> = sentences(&doc.text);
        let got: Vec<&str> = chunks
            .iter()
            .filter(|c| c.provenance.document_id == "long")
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(got, expected);
        for c in &chunks {
            let source = if c.provenance.document_id == "long" {
                &doc.text
            } else {
                "A short note."
            };
            assert_eq!(&source[c.provenance.span.clone()], c.text);
        }
        assert_eq!(
            chunks.iter().map(|c| c.id).collect::<Vec<_>>(),
            (0..chunks.len()).collect::<Vec<_>>()
        );

        let stats = chunker.stats();
        assert_eq!(stats.documents, 2);
        assert_eq!(stats.documents_windowed, 1);
        assert_eq!(stats.windows, requests.len() as u64);
        assert_eq!(
            (
                stats.truncated_retries,
                stats.context_retries,
                stats.fallback_windows
            ),
            (0, 0, 0)
        );
        let usage = meter.snapshot()["chunking"];
        assert_eq!(
            (usage.windowed_items, usage.windows, usage.truncated_retries),
            (1, requests.len() as u64, 0)
        );
        let w = warnings.0.lock().unwrap().clone();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("1 of 2 documents") && w[0].contains("2048 tokens"),
            "{w:?}"
        );
    }

    #[tokio::test]
    async fn a_short_document_is_sent_whole_with_the_old_answer_limit() {
        let model = Scripted::new(|p, _| Ok(stop(answer(p))));
        let chunker = LlmChunker::new(model.clone());
        let text = "Marie Curie was born in Warsaw. She won two Nobel Prizes.";
        let whole: Vec<Range<usize>> = std::iter::once(0..text.len()).collect();
        assert_eq!(chunker.windows(text).unwrap(), whole);
        assert_eq!(chunker.request(text).unwrap().max_tokens, Some(1024));
        let chunks = chunker
            .chunk(&[Document::new("d", "", text)])
            .await
            .unwrap();
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunker.stats().documents_windowed, 0);
        assert_eq!(chunker.stats().windows, 1);
        assert_eq!(chunker.context_budget(), LlmChunker::DEFAULT_CONTEXT_TOKENS);
    }

    #[tokio::test]
    async fn answers_cut_at_the_token_limit_are_split_and_asked_again_never_read() {
        let doc = long_document();
        // Windows over 600 bytes get an answer cut short, as a model with too small a
        // limit would give.
        let model = Scripted::new(|p, _| {
            let full = answer(p);
            Ok(if p.len() > 600 {
                ChatResponse {
                    finish_reason: Some("length".into()),
                    ..ChatResponse::text(full[..full.len() / 3].to_string())
                }
            } else {
                stop(full)
            })
        });
        let meter = Arc::new(TokenMeter::new());
        let chunker = LlmChunker::new(model.clone())
            .context_tokens(2048)
            .with_meter(meter.clone());
        let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
        let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(got, sentences(&doc.text), "nothing lost, in order");
        for c in &chunks {
            assert_eq!(&doc.text[c.provenance.span.clone()], c.text);
        }
        let stats = chunker.stats();
        let planned = chunker.windows(&doc.text).unwrap().len() as u64;
        let cut = model.paragraphs().iter().filter(|p| p.len() > 600).count() as u64;
        assert!(cut > 0);
        assert_eq!(stats.truncated_retries, cut);
        assert!(stats.windows > planned);
        assert_eq!(stats.windows, model.requests().len() as u64);
        assert_eq!(stats.fallback_windows, 0);
        assert_eq!(meter.snapshot()["chunking"].truncated_retries, cut);
    }

    #[tokio::test]
    async fn a_window_still_cut_at_the_smallest_size_falls_back_or_fails() {
        let doc = long_document();
        // Never stops.
        let model = Scripted::new(|p, _| {
            Ok(ChatResponse {
                finish_reason: Some("length".into()),
                ..ChatResponse::text(answer(p))
            })
        });
        let chunker = LlmChunker::new(model.clone()).context_tokens(2048);
        let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
        // The offline chunker took every smallest window: all text is still there, in
        // order, with spans in the whole document.
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(squeeze(&joined), squeeze(&doc.text));
        for c in &chunks {
            assert_eq!(&doc.text[c.provenance.span.clone()], c.text);
        }
        let stats = chunker.stats();
        assert!(
            stats.fallback_windows > 0 && stats.truncated_retries > 0,
            "{stats:?}"
        );
        for p in model.paragraphs() {
            assert!(estimate_tokens(&p) <= chunker.budget().unwrap().window);
        }

        let err = LlmChunker::new(model)
            .context_tokens(2048)
            .on_unparseable(OnUnparseable::Fail)
            .chunk(std::slice::from_ref(&doc))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("token limit") && err.contains("bytes"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_request_refused_as_too_long_is_split_and_asked_again() {
        let doc = long_document();
        let model = Scripted::new(|p, _| {
            if p.len() > 500 {
                Err(LlmError::ContextLength("4155 tokens > 4096".into()))
            } else {
                Ok(stop(answer(p)))
            }
        });
        let chunker = LlmChunker::new(model.clone()).context_tokens(2048);
        let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
        let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(got, sentences(&doc.text));
        assert!(chunker.stats().context_retries > 0);
        assert_eq!(chunker.stats().truncated_retries, 0);
    }

    #[tokio::test]
    async fn windows_follow_the_context_and_an_explicit_answer_limit() {
        let mut model = Scripted::new(|p, _| Ok(stop(answer(p))));
        Arc::get_mut(&mut model).unwrap().context = Some(4096);
        let text = long_document().text;
        let chunker = LlmChunker::new(model.clone());
        assert_eq!(
            chunker.context_budget(),
            4096,
            "the model's context is used"
        );
        let b = chunker.budget().unwrap();
        assert_eq!(b.window, (4096 - b.prompt - 128) / 4);
        assert!(chunker
            .windows(&text)
            .unwrap()
            .iter()
            .all(|r| r.len() as u64 <= b.window * 3));
        // The explicit setting beats the model's.
        assert_eq!(chunker.context_tokens(16384).context_budget(), 16384);
        // An explicit answer limit is sent as it is, and windows are made small enough
        // for it.
        let chunker = LlmChunker::new(model.clone()).max_tokens(Some(600));
        let b = chunker.budget().unwrap();
        assert_eq!(b.window, (600 - 128) / 3);
        assert_eq!(chunker.request("x").unwrap().max_tokens, Some(600));
        let none = LlmChunker::new(model.clone()).max_tokens(None);
        assert_eq!(none.request("x").unwrap().max_tokens, None);
        // A context too small for any window is refused before any call.
        let err = LlmChunker::new(model.clone())
            .context_tokens(900)
            .chunk(&[Document::new("d", "", "Text.")])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("context_tokens"), "{err}");
        assert!(model.requests().is_empty());
    }

    #[test]
    fn the_fingerprint_follows_the_context_and_the_answer_limit() {
        let model = Scripted::new(|p, _| Ok(stop(answer(p))));
        let fp = |c: LlmChunker| c.fingerprint().unwrap();
        let default = fp(LlmChunker::new(model.clone()));
        assert_ne!(
            default,
            fp(LlmChunker::new(model.clone()).context_tokens(4096))
        );
        assert_ne!(
            default,
            fp(LlmChunker::new(model.clone()).max_tokens(Some(1024)))
        );
        assert_eq!(
            default,
            fp(LlmChunker::new(model.clone()).context_tokens(8192))
        );
    }

    #[test]
    fn windows_split_at_paragraphs_and_cover_the_text() {
        let text = "First paragraph here.\n\nSecond one, a bit longer.\n\nThird.";
        let whole: Vec<Range<usize>> = std::iter::once(0..text.len()).collect();
        assert_eq!(split_windows(text, 100), whole);
        let w = split_windows(text, 30);
        let pieces: Vec<&str> = w.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(
            pieces,
            [
                "First paragraph here.",
                "Second one, a bit longer.",
                "Third."
            ]
        );
        assert!(w.iter().all(|r| r.len() <= 30));
        // Multi-byte text is cut on char boundaries, by bytes.
        let cjk = "居里夫人出生于华沙。她获得了两次诺贝尔奖。".repeat(5);
        for r in split_windows(&cjk, 40) {
            assert!(r.len() <= 40);
            assert!(cjk.is_char_boundary(r.start) && cjk.is_char_boundary(r.end));
        }
        assert_eq!(estimate_tokens("abcd"), 2);
        assert_eq!(estimate_tokens("居"), 1);
    }

    #[test]
    fn statements_are_located_in_their_document() {
        let text = "Marie Curie was born in Warsaw. She won two Nobel Prizes.";
        let sentences = SentenceChunker::default().split(text);
        assert_eq!(
            locate("Marie Curie was born in Warsaw.", text, &sentences),
            0..31
        );
        let r = locate("Marie Curie won two Nobel Prizes.", text, &sentences);
        assert_eq!(&text[r], "She won two Nobel Prizes.");
        assert_eq!(locate("Unrelated.", text, &sentences), 0..text.len());
    }
}
