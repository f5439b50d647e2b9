//! Offline chunkers: [`SentenceChunker`] (rule-based atomic statements) and
//! [`PassageChunker`] (one chunk per document).

use std::collections::HashMap;
use std::ops::Range;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use lprag_core::{Chunk, Chunker, Document, Error, Provenance, Result};

/// Configuration of [`SentenceChunker`]. All lengths count Unicode scalar values
/// (`char`s), not bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SentenceChunkerConfig {
    /// Sentences longer than this are split further at clause boundaries (`;`, and
    /// `, and` / `, but` / `, while` / `, which` ...). Default 200. `usize::MAX` turns
    /// clause splitting off.
    pub max_chars: usize,
    /// Pieces shorter than this (for example "It was a hit.") are merged into the
    /// preceding piece of the same document (or the following one when they come first).
    /// Default 20. `0` turns merging off.
    pub min_chars: usize,
    /// A clause split is made only when both resulting pieces are at least this long, so
    /// that lists ("Adweek, Billboard, and other periodicals") are not cut. Default 40.
    pub min_clause_chars: usize,
}

impl Default for SentenceChunkerConfig {
    fn default() -> Self {
        Self {
            max_chars: 200,
            min_chars: 20,
            min_clause_chars: 40,
        }
    }
}

/// Splits documents into sentence and clause chunks: the offline default [`Chunker`].
///
/// LP-RAG (§3.1, prompt C-PROMPT in Appendix D.1) asks an LLM to rewrite every document
/// into atomic, self-contained statements with pronouns resolved. This chunker is the
/// deterministic, offline stand-in: it cuts the text at sentence and clause boundaries but
/// never rewrites it, so a chunk can still start with "It" or "The journal". It is clearly
/// weaker than the LLM chunker; its strengths are that every chunk is an exact slice of
/// its document (`&doc.text[chunk.provenance.span] == chunk.text`), that it needs nothing
/// but the text, and that it always gives the same output.
///
/// # Corpus rules (shared with [`PassageChunker`])
///
/// Chunk ids are positions in the output across the whole corpus, in document order;
/// chunk texts are trimmed; empty or whitespace-only documents are skipped; a corpus
/// without a single chunk (or without documents) is [`Error::EmptyCorpus`]; two documents
/// with the same id are [`Error::InvalidInput`] naming the id. Chunking never panics.
///
/// # Sentence boundaries
///
/// A sentence ends after a run of terminal punctuation (`.`, `!`, `?`, `…`, `...`) plus any
/// closing quotes or brackets (`"`, `'`, `''`, `”`, `’`, `»`, `)`, `]`, `}`), when
/// whitespace or the end of the text follows and the next word does not start with a
/// lower-case letter. CJK full stops (`。！？`) end a sentence without whitespace; a blank
/// line always ends one. A single `.` does **not** end a sentence after:
///
/// * titles that never end one: `Mr.`, `Mrs.`, `Dr.`, `Prof.`, `St.`, `Mt.`, `Gen.`, ...;
/// * `No.`, `Vol.`, `pp.`, `Fig.`, ... when a number follows (`No. 7`);
/// * abbreviations that rarely end one — `etc.`, `Inc.`, `Ltd.`, `Co.`, `Jr.`, `Sr.`,
///   `vs.`, `c.`, `ca.`, month names (`Jan.` ... `Sept.` ... `Dec.`) — initialisms
///   (`U.S.`, `e.g.`, `i.e.`, `D.C.`) and single-letter initials (`J. R. R. Tolkien`),
///   unless the next word is a common sentence opener (`The`, `He`, `It`, `In`, ...).
///
/// Decimals (`3.5`, `$2.1`) and dotted names never split because no whitespace follows
/// the period. These are heuristics: "moved to the U.S. Yuma is ..." stays one sentence.
///
/// # Clauses and merging
///
/// See [`SentenceChunkerConfig`]: long sentences are cut at `;` first, then at `, and`,
/// `, but`, `, yet`, `, so`, `, while`, `, whereas`, `, although`, `, though`, `, which`,
/// `, who` (outside brackets and quotes), at the candidate nearest the middle, recursively.
/// A dropped coordinating conjunction (`and`, `but`, `yet`, `so`) is left out of the next
/// piece; subordinating ones (`which`, `while`, ...) are kept. Tiny pieces are merged with
/// a neighbour. Each chunk's text is its span of the document, trimmed.
///
/// ```
/// use lprag_text::SentenceChunker;
/// let text = "Dr. J. R. R. Tolkien wrote it in 1937. It cost $2.1 million... Really?";
/// let spans = SentenceChunker::default().split(text);
/// let pieces: Vec<&str> = spans.iter().map(|s| &text[s.clone()]).collect();
/// assert_eq!(pieces, ["Dr. J. R. R. Tolkien wrote it in 1937.", "It cost $2.1 million... Really?"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SentenceChunker {
    /// The configuration.
    pub config: SentenceChunkerConfig,
}

impl SentenceChunker {
    /// From this many bytes of document text in one call, [`Chunker::chunk`] runs on
    /// tokio's blocking pool instead of the calling async worker (inline when no runtime
    /// runs). Splitting costs about 12 ns a byte (sentence rules, clause search, merging;
    /// measured in the test profile), so 8 KiB (a few pages) is about the 100 µs a task
    /// should run at most between `.await`s; a corpus moves off the worker, for the cost
    /// of copying its documents once.
    pub const BLOCKING_FROM_BYTES: usize = 8 * 1024;

    /// A chunker with the given configuration.
    pub fn new(config: SentenceChunkerConfig) -> Self {
        Self { config }
    }

    /// The byte spans of `text`'s chunks, in order: trimmed, non-empty, on char
    /// boundaries. An empty or whitespace-only text gives no span.
    pub fn split(&self, text: &str) -> Vec<Range<usize>> {
        let cfg = &self.config;
        let mut pieces = Vec::new();
        for s in sentence_spans(text) {
            split_clauses(text, s, cfg, &mut pieces);
        }
        merge_small(text, pieces, cfg.min_chars)
    }
}

#[async_trait]
impl Chunker for SentenceChunker {
    fn name(&self) -> &str {
        "sentence"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!("{:?}", self.config))
    }

    /// Inline for corpora under [`SentenceChunker::BLOCKING_FROM_BYTES`] of text; larger
    /// ones on tokio's blocking pool ([`lprag_core::blocking`]), so the async worker is
    /// free while a corpus is split, a block of documents (16 MiB of text) copied there at
    /// a time.
    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        let bytes: usize = documents.iter().map(|d| d.text.len()).sum();
        if bytes < Self::BLOCKING_FROM_BYTES {
            return chunk_corpus(documents, |text| self.split(text));
        }
        check_corpus(documents)?;
        let me = self.clone();
        let chunks = chunk_in_blocks(documents, BLOCK_BYTES, move |block| {
            chunk_documents(block, |text| me.split(text))
        })
        .await?;
        nonempty(chunks, documents.len())
    }
}

/// One chunk per non-empty document: the document's whole text, trimmed (span = the
/// trimmed range). Same corpus rules as [`SentenceChunker`].
///
/// This is the HippoRAG / GFM-RAG setting (passages are the retrieval unit), where
/// passage-level and chunk-level recall coincide.
#[derive(Debug, Clone, Default)]
pub struct PassageChunker;

#[async_trait]
impl Chunker for PassageChunker {
    fn name(&self) -> &str {
        "passage"
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        chunk_corpus(documents, |text| {
            let span = trim_span(text, 0..text.len());
            if span.is_empty() {
                Vec::new()
            } else {
                vec![span]
            }
        })
    }
}

/// No documents, or two with one id, are errors (the rule of every chunker here).
pub(crate) fn check_corpus(documents: &[Document]) -> Result<()> {
    if documents.is_empty() {
        return Err(Error::EmptyCorpus("no documents".into()));
    }
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(documents.len());
    for (i, d) in documents.iter().enumerate() {
        if let Some(first) = seen.insert(d.id.as_str(), i) {
            return Err(Error::invalid(
                format!("document '{}'", d.id),
                format!("duplicate document id (documents {first} and {i})"),
            ));
        }
    }
    Ok(())
}

/// The corpus rules shared by both chunkers.
fn chunk_corpus(
    documents: &[Document],
    split: impl Fn(&str) -> Vec<Range<usize>>,
) -> Result<Vec<Chunk>> {
    check_corpus(documents)?;
    nonempty(chunk_documents(documents, split), documents.len())
}

/// The chunks of `documents` at the spans `split` gives, numbered from 0 (no corpus checks).
fn chunk_documents(
    documents: &[Document],
    split: impl Fn(&str) -> Vec<Range<usize>>,
) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    for d in documents {
        for span in split(&d.text) {
            // Spans come from char_indices and trimming, so this slice cannot fail; `get`
            // keeps the no-panic guarantee even if that ever changed.
            let Some(text) = d.text.get(span.clone()) else {
                continue;
            };
            chunks.push(Chunk {
                id: chunks.len(),
                text: text.to_string(),
                provenance: Provenance {
                    document_id: d.id.clone(),
                    title: d.title.clone(),
                    span,
                },
                metadata: d.metadata.clone(),
            });
        }
    }
    chunks
}

/// `chunks`, or [`Error::EmptyCorpus`] when the `documents` documents made none.
pub(crate) fn nonempty(chunks: Vec<Chunk>, documents: usize) -> Result<Vec<Chunk>> {
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus(format!(
            "all {documents} documents are empty or whitespace"
        )));
    }
    Ok(chunks)
}

/// Text a chunker that splits off the async worker copies to tokio's blocking pool at a
/// time ([`chunk_in_blocks`]).
pub(crate) const BLOCK_BYTES: usize = 16 << 20;

/// `chunk` of consecutive blocks of `documents` (about `block_bytes` of text each, at least
/// one document) on tokio's blocking pool ([`lprag_core::blocking`]), one block after
/// another, the chunks renumbered in order: a block of documents is copied to the pool at
/// a time, not the whole corpus (2.4 GB at a million passages).
pub(crate) async fn chunk_in_blocks<F>(
    documents: &[Document],
    block_bytes: usize,
    chunk: F,
) -> Result<Vec<Chunk>>
where
    F: Fn(&[Document]) -> Vec<Chunk> + Clone + Send + 'static,
{
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < documents.len() {
        let mut end = start + 1;
        let mut bytes = documents[start].text.len();
        while end < documents.len() && bytes + documents[end].text.len() <= block_bytes {
            bytes += documents[end].text.len();
            end += 1;
        }
        let (block, f) = (documents[start..end].to_vec(), chunk.clone());
        for c in lprag_core::blocking(move || Ok(f(&block))).await? {
            chunks.push(Chunk {
                id: chunks.len(),
                ..c
            });
        }
        start = end;
    }
    Ok(chunks)
}

/// Shrink `r` so it neither starts nor ends with whitespace (may become empty).
fn trim_span(text: &str, r: Range<usize>) -> Range<usize> {
    let s = &text[r.clone()];
    let lead = s.len() - s.trim_start().len();
    let trimmed = s.trim();
    let start = r.start + lead;
    start..start + trimmed.len()
}

/// Like [`trim_span`], also dropping trailing `,` and `;` (ends of clause pieces).
fn trim_clause(text: &str, r: Range<usize>) -> Range<usize> {
    let r = trim_span(text, r);
    let s = text[r.clone()].trim_end_matches(|c: char| c == ',' || c == ';' || c.is_whitespace());
    r.start..r.start + s.len()
}

fn char_len(text: &str, r: &Range<usize>) -> usize {
    text[r.clone()].chars().count()
}

/// `char_len(text, r) >= n`, reading at most `n` characters (a cut's two sides are checked
/// for every cut of a sentence: counting them whole made a long sentence quadratic).
fn has_chars(text: &str, r: &Range<usize>, n: usize) -> bool {
    r.len() >= n && text[r.clone()].chars().take(n).count() >= n
}

const TERMINALS: &[char] = &['.', '!', '?', '…', '‼', '⁇', '⁈', '⁉'];
const CJK_TERMINALS: &[char] = &['。', '！', '？'];
const CLOSERS: &[char] = &[
    '"', '\'', '”', '’', '»', '›', ')', ']', '}', '」', '』', '）',
];
const OPENERS: &[char] = &[
    '"', '\'', '“', '‘', '«', '‹', '(', '[', '{', '`', '「', '『',
];

/// Titles before a name: a following period never ends a sentence.
const TITLES: &[&str] = &[
    "adm", "capt", "cmdr", "col", "dr", "fr", "ft", "gen", "gov", "hon", "lt", "maj", "messrs",
    "mlle", "mme", "mr", "mrs", "ms", "mt", "pres", "prof", "rep", "rev", "sen", "sgt", "st",
    "supt",
];
/// Abbreviations that are not sentence ends when a number follows.
const NUMERIC_ABBREVS: &[&str] = &[
    "art", "ch", "fig", "figs", "no", "nos", "nr", "op", "p", "pp", "sec", "vol", "vols",
];
/// Abbreviations that may end a sentence, but usually do not.
const OTHER_ABBREVS: &[&str] = &[
    "al", "approx", "apr", "assn", "aug", "ave", "blvd", "bros", "c", "ca", "cf", "co", "corp",
    "dec", "dept", "ed", "eds", "est", "etc", "feb", "inc", "jan", "jr", "jul", "jun", "ltd",
    "mar", "nov", "oct", "rd", "sep", "sept", "sr", "univ", "viz", "vs",
];
/// Words that commonly open a sentence; after an ambiguous abbreviation they signal a
/// boundary.
const OPENER_WORDS: &[&str] = &[
    "A",
    "After",
    "Also",
    "Although",
    "An",
    "As",
    "At",
    "But",
    "By",
    "During",
    "Following",
    "For",
    "From",
    "He",
    "Her",
    "His",
    "However",
    "I",
    "In",
    "It",
    "Its",
    "Later",
    "On",
    "One",
    "She",
    "Since",
    "The",
    "Their",
    "There",
    "These",
    "They",
    "This",
    "Those",
    "Today",
    "We",
    "When",
    "While",
];

/// Is `word` (with its final period removed) an initialism such as `U.S`, `e.g`, `D.C`,
/// `Ph.D`, or a single-letter initial?
pub(crate) fn is_initialism(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    parts
        .iter()
        .all(|p| (1..=2).contains(&p.chars().count()) && p.chars().all(char::is_alphabetic))
        && (parts.len() > 1 || parts[0].chars().count() == 1)
}

/// Does a single `.` ending `word` (the text before it) end a sentence, given the next
/// word (starting at its first non-opener char)?
fn period_ends_sentence(word: &str, next: &str) -> bool {
    let word = word.trim_start_matches(OPENERS);
    if word.is_empty() {
        return true; // " ." : a detached period.
    }
    let lower = word.to_ascii_lowercase();
    if TITLES.binary_search(&lower.as_str()).is_ok() {
        return false;
    }
    let next_is_digit = next.chars().next().is_some_and(|c| c.is_ascii_digit());
    if NUMERIC_ABBREVS.binary_search(&lower.as_str()).is_ok() && next_is_digit {
        return false;
    }
    if OTHER_ABBREVS.binary_search(&lower.as_str()).is_ok() || is_initialism(word) {
        let next_word: String = next.chars().take_while(|c| c.is_alphanumeric()).collect();
        let rest = &next[next_word.len()..];
        let next_is_initial = rest.starts_with('.');
        return !next_is_initial && OPENER_WORDS.contains(&next_word.as_str());
    }
    true
}

/// Trimmed sentence spans of `text`: cut at blank lines, after CJK terminals, and after
/// Western terminal punctuation that ends a sentence (see [`terminal_run`]).
pub(crate) fn sentence_spans(text: &str) -> Vec<Range<usize>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let byte_at = |i: usize| byte_at(text, &chars, i);
    let mut out = Vec::new();
    let mut start = 0usize; // byte offset of the current sentence
    let push = |out: &mut Vec<Range<usize>>, r: Range<usize>| {
        let r = trim_span(text, r);
        if !r.is_empty() {
            out.push(r);
        }
    };
    let mut i = 0;
    while i < n {
        let c = chars[i].1;
        // A blank line is a hard boundary.
        if c == '\n' {
            if let Some(j) = blank_line_end(&chars, i) {
                push(&mut out, start..byte_at(i));
                start = byte_at(j);
                i = j;
            } else {
                i += 1;
            }
            continue;
        }
        if CJK_TERMINALS.contains(&c) {
            let mut j = i + 1;
            while j < n && (CJK_TERMINALS.contains(&chars[j].1) || CLOSERS.contains(&chars[j].1)) {
                j += 1;
            }
            push(&mut out, start..byte_at(j));
            start = byte_at(j);
            i = j;
            continue;
        }
        if !TERMINALS.contains(&c) {
            i += 1;
            continue;
        }
        let (end, boundary) = terminal_run(text, &chars, i);
        if boundary {
            push(&mut out, start..byte_at(end));
            start = byte_at(end);
        }
        i = end.max(i + 1);
    }
    push(&mut out, start..text.len());
    out
}

/// The byte offset of char `i` of `text` (`chars` is its `char_indices`), or its length.
fn byte_at(text: &str, chars: &[(usize, char)], i: usize) -> usize {
    if i < chars.len() {
        chars[i].0
    } else {
        text.len()
    }
}

/// When the line break at char `i` starts a blank line: the char index of the line break
/// that ends it.
fn blank_line_end(chars: &[(usize, char)], i: usize) -> Option<usize> {
    let n = chars.len();
    let mut j = i + 1;
    while j < n && chars[j].1 != '\n' && chars[j].1.is_whitespace() {
        j += 1;
    }
    (j < n && chars[j].1 == '\n').then_some(j)
}

/// The run of terminal punctuation starting at char `i`, with its closing quotes and
/// brackets: `(char index after it, whether it ends a sentence)`.
fn terminal_run(text: &str, chars: &[(usize, char)], i: usize) -> (usize, bool) {
    let n = chars.len();
    let byte_at = |i: usize| byte_at(text, chars, i);
    let c = chars[i].1;
    // A run of terminal punctuation, then closing quotes / brackets.
    let mut j = i;
    while j < n && TERMINALS.contains(&chars[j].1) {
        j += 1;
    }
    let single_period = j == i + 1 && c == '.';
    while j < n && CLOSERS.contains(&chars[j].1) {
        j += 1;
    }
    let mut end = j;
    if end < n && !chars[end].1.is_whitespace() {
        return (end, false); // 3.5, U.S.A, example.com, "end."Next
    }
    // The next word, after whitespace and opening quotes / brackets.
    let mut k = end;
    while k < n && chars[k].1.is_whitespace() {
        k += 1;
    }
    // A detached `''` (the closing quote of tokenised text: "earth. ''Three") belongs
    // to the sentence that ends here.
    if k + 1 < n && chars[k].1 == '\'' && chars[k + 1].1 == '\'' {
        end = k + 2;
        k = end;
        while k < n && chars[k].1.is_whitespace() {
            k += 1;
        }
    }
    while k < n && OPENERS.contains(&chars[k].1) {
        k += 1;
    }
    let next = &text[byte_at(k)..];
    let boundary = match next.chars().next() {
        None => true,
        Some(nc) if nc.is_lowercase() => false,
        Some(_) if single_period => {
            // The word before the period: back to the previous whitespace.
            let mut w = i;
            while w > 0 && !chars[w - 1].1.is_whitespace() {
                w -= 1;
            }
            period_ends_sentence(&text[byte_at(w)..byte_at(i)], next)
        }
        Some(_) => true,
    };
    (end, boundary)
}

/// A place where a long sentence may be cut.
struct ClauseCut {
    /// The left piece ends here (before the `,` or `;`).
    left_end: usize,
    /// The right piece starts here.
    right_start: usize,
    /// 0 for `;`, 1 for a conjunction.
    rank: u8,
}

/// Conjunctions after a comma that may start a clause, and whether the conjunction is
/// dropped from the right piece.
const CONJUNCTIONS: &[(&str, bool)] = &[
    ("although", false),
    ("and", true),
    ("but", true),
    ("so", true),
    ("though", false),
    ("whereas", false),
    ("which", false),
    ("while", false),
    ("who", false),
    ("yet", true),
];

/// Clause cut candidates inside `r` (outside brackets and double quotes).
fn clause_cuts(text: &str, r: &Range<usize>) -> Vec<ClauseCut> {
    let s = &text[r.clone()];
    let mut cuts = Vec::new();
    let mut depth = 0i32;
    let mut in_quote = false;
    let bytes = s.as_bytes();
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = (depth - 1).max(0),
            '"' => in_quote = !in_quote,
            '“' => in_quote = true,
            '”' => in_quote = false,
            '`' if bytes.get(i + 1) == Some(&b'`') => in_quote = true,
            '\'' if bytes.get(i + 1) == Some(&b'\'') => in_quote = false,
            _ => {}
        }
        if depth > 0 || in_quote {
            continue;
        }
        let after = &s[i + c.len_utf8()..];
        if !after.starts_with(char::is_whitespace) {
            continue;
        }
        if c == ';' {
            let ws = after.len() - after.trim_start().len();
            cuts.push(ClauseCut {
                left_end: r.start + i,
                right_start: r.start + i + 1 + ws,
                rank: 0,
            });
        } else if c == ',' {
            let rest = after.trim_start();
            let ws = after.len() - rest.len();
            let word: &str = rest
                .split(|ch: char| !ch.is_alphabetic())
                .next()
                .unwrap_or("");
            let follows_space = rest[word.len()..].starts_with(char::is_whitespace);
            if !follows_space {
                continue;
            }
            if let Some(&(_, drop)) = CONJUNCTIONS.iter().find(|(w, _)| *w == word) {
                let mut right = i + 1 + ws;
                if drop {
                    let after_word = &rest[word.len()..];
                    right += word.len() + (after_word.len() - after_word.trim_start().len());
                }
                cuts.push(ClauseCut {
                    left_end: r.start + i,
                    right_start: r.start + right,
                    rank: 1,
                });
            }
        }
    }
    cuts
}

/// Split `r` at clause boundaries while it is longer than `max_chars`.
fn split_clauses(
    text: &str,
    r: Range<usize>,
    cfg: &SentenceChunkerConfig,
    out: &mut Vec<Range<usize>>,
) {
    let len = char_len(text, &r);
    if len <= cfg.max_chars {
        out.push(r);
        return;
    }
    let mid = r.start + text[r.clone()].len() / 2;
    let best = clause_cuts(text, &r)
        .into_iter()
        .filter_map(|c| {
            let left = trim_clause(text, r.start..c.left_end);
            let right = trim_span(text, c.right_start..r.end);
            let min = cfg.min_clause_chars.max(1);
            let ok = has_chars(text, &left, min) && has_chars(text, &right, min);
            ok.then(|| (c.rank, c.left_end.abs_diff(mid), left, right))
        })
        .min_by_key(|(rank, dist, left, _)| (*rank, *dist, left.end));
    match best {
        Some((_, _, left, right)) => {
            split_clauses(text, left, cfg, out);
            split_clauses(text, right, cfg, out);
        }
        None => out.push(r),
    }
}

/// Merge pieces shorter than `min_chars` into a neighbour (spans stay contiguous slices).
fn merge_small(text: &str, pieces: Vec<Range<usize>>, min_chars: usize) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(pieces.len());
    // Start of tiny leading pieces, to be prepended to the first long-enough piece.
    let mut carry: Option<Range<usize>> = None;
    for p in pieces {
        let p = match carry.take() {
            Some(c) => c.start..p.end,
            None => p,
        };
        if char_len(text, &p) >= min_chars {
            out.push(p);
        } else if let Some(last) = out.last_mut() {
            last.end = p.end;
        } else {
            carry = Some(p);
        }
    }
    // Every piece was tiny: keep them as one chunk.
    out.extend(carry);
    out
}

#[cfg(test)]
mod tests;
