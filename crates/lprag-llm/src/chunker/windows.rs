//! The context budget of [`LlmChunker`]: token estimates, the most document text per
//! request, answer limits sized per window, and the split of a text into windows.

use std::ops::Range;

use text_splitter::{ChunkConfig, ChunkSizer, TextSplitter};

use super::LlmChunker;
use crate::{ChatMessage, ChatRequest, LlmError};

/// UTF-8 bytes counted as one token. Real tokenizers give about 4 bytes a token for English
/// prose and about 3 for a CJK character (one token or a little more), so `bytes / 3`
/// overestimates English by about a third and is close for CJK: a conservative estimate,
/// as it must be with no tokenizer at hand.
pub(super) const BYTES_PER_TOKEN: u64 = 3;

/// Answer tokens budgeted per token of window: the C-PROMPT's answer repeats every
/// sentence and then lists its statements, each a rewrite of part of it (the prompt's own
/// example answers with about 2.7 times its paragraph).
pub(super) const ANSWER_PER_WINDOW_TOKEN: u64 = 3;

/// Answer tokens budgeted on top (labels, a short preamble).
pub(super) const ANSWER_SLACK: u64 = 128;

/// The smallest token limit a window's answer gets (when the context has room): the limit
/// every document got before windows existed, so a short document's request, and its
/// cached answer, stay what they were.
pub(super) const MIN_ANSWER_TOKENS: u64 = 1024;

/// Tokens a chat template adds per message (role markers, separators).
pub(super) const MESSAGE_OVERHEAD: u64 = 8;

/// A window of at most this many estimated tokens is not split again when its answer is
/// cut: its answer limit (at least [`MIN_ANSWER_TOKENS`]) is 8 times its size, so a cut
/// answer means a model that does not stop, not a long input.
pub(super) const MIN_WINDOW_TOKENS: u64 = 128;

/// The estimated token count of `text`: its UTF-8 bytes ÷ 3, rounded up (see
/// [`LlmChunker`] on why).
pub(super) fn estimate_tokens(text: &str) -> u64 {
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
pub(super) fn split_windows(text: &str, max_bytes: usize) -> Vec<Range<usize>> {
    if text.len() <= max_bytes {
        return std::iter::once(0..text.len()).collect();
    }
    TextSplitter::new(ChunkConfig::new(max_bytes.max(1)).with_sizer(Bytes))
        .chunk_indices(text)
        .map(|(start, piece)| start..start + piece.len())
        .filter(|r| !text[r.clone()].trim().is_empty())
        .collect()
}

/// The sizes one chunking run works with, in estimated tokens.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// The model's context.
    pub(super) context: u64,
    /// The prompt without the document.
    pub(super) prompt: u64,
    /// The most document text per request.
    pub(super) window: u64,
}

impl LlmChunker {
    /// The sizes in estimated tokens, or why the context is too small for any window.
    pub(super) fn budget(&self) -> std::result::Result<Budget, LlmError> {
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

    pub(super) fn window_request(
        &self,
        b: &Budget,
        text: &str,
    ) -> std::result::Result<ChatRequest, LlmError> {
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
}
