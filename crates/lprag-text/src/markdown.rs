//! [`MarkdownChunker`]: token-bounded chunks along a Markdown document's structure, each
//! labelled with the heading path it falls under.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Chunker, Document, Encoder, Provenance, Result};

use crate::chunker::{check_corpus, chunk_in_blocks, nonempty, BLOCK_BYTES};
use text_splitter::{ChunkConfig, ChunkSizer, MarkdownSplitter};
use unicode_segmentation::UnicodeSegmentation;

/// Chunk metadata key: the headings in force where the chunk starts, outermost first,
/// joined by `" > "` (`"Install > Linux > Debian"`). Absent before the first heading.
pub const HEADING_KEY: &str = "heading";

/// Splits documents along their Markdown structure (sections, then paragraphs, list
/// items, code blocks, sentences, words) into chunks of at most `max_tokens` tokens,
/// with `text-splitter`'s `MarkdownSplitter`; each chunk carries its document's metadata
/// and, under [`HEADING_KEY`], the heading path at its start.
///
/// Tokens are counted on the text an encoder embeds, the document title, a newline and
/// the chunk ([`Chunk::embedding_text`]), unless the title alone takes half the budget or
/// more (then on the chunk alone, so that a long title cannot force tiny chunks):
///
/// * [`MarkdownChunker::new`]: word-ish tokens, that is Unicode words and punctuation
///   marks (UAX #29 word boundaries, whitespace not counted), about what a BERT tokenizer
///   sees before it splits rare words into pieces;
/// * [`MarkdownChunker::for_encoder`]: [`Encoder::count_tokens`] of that encoder (the
///   word-ish count where it returns `None`), as [`crate::TokenChunker`] does.
///
/// [`Default`] is `new(200)`: the builders' default chunker ([`crate::BoundedPassageChunker`])
/// has no limit of its own but fits the encoder, whose default (all-MiniLM-L6-v2) takes
/// 256 word pieces; 200 word-ish tokens leave room for the pieces of rare words and for
/// the special tokens. Use `for_encoder` for an exact bound.
///
/// Plain text without headings is split the same way (paragraphs, sentences, words) and
/// gets no `heading`. Corpus rules are those of [`crate::SentenceChunker`]: ids are
/// positions across the corpus, empty documents give no chunk, a corpus without chunks
/// is [`Error::EmptyCorpus`], duplicate document ids are [`Error::InvalidInput`]. Every
/// chunk is a slice of its document: `&doc.text[chunk.provenance.span] == chunk.text`.
///
/// [`Error::EmptyCorpus`]: lprag_core::Error::EmptyCorpus
/// [`Error::InvalidInput`]: lprag_core::Error::InvalidInput
///
/// ```
/// use lprag_core::{Chunker, Document};
/// use lprag_text::{MarkdownChunker, HEADING_KEY};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let text = "# Install\n\nGet it.\n\n## Linux\n\nUse the package.\n\n## macOS\n\nUse brew.";
/// let chunks = MarkdownChunker::new(8).chunk(&[Document::new("d", "", text)]).await.unwrap();
/// let headings: Vec<&str> = chunks.iter().map(|c| c.metadata[HEADING_KEY].as_str()).collect();
/// assert_eq!(headings, ["Install", "Install > Linux", "Install > macOS"]);
/// # });
/// ```
#[derive(Clone)]
pub struct MarkdownChunker {
    max_tokens: usize,
    encoder: Option<Arc<dyn Encoder>>,
}

impl std::fmt::Debug for MarkdownChunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkdownChunker")
            .field("max_tokens", &self.max_tokens)
            .field(
                "encoder",
                &self.encoder.as_ref().map(|e| e.name().to_string()),
            )
            .finish()
    }
}

impl Default for MarkdownChunker {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_TOKENS)
    }
}

impl MarkdownChunker {
    /// The [`Default`] bound, in word-ish tokens.
    pub const DEFAULT_MAX_TOKENS: usize = 200;

    /// Chunks of at most `max_tokens` word-ish tokens (at least 1).
    pub fn new(max_tokens: usize) -> Self {
        Self {
            max_tokens: max_tokens.max(1),
            encoder: None,
        }
    }

    /// Chunks of at most `max_tokens` tokens of `encoder` ([`Encoder::count_tokens`]);
    /// pass `encoder.max_input_tokens()` to fit its input exactly.
    pub fn for_encoder(encoder: Arc<dyn Encoder>, max_tokens: usize) -> Self {
        Self {
            max_tokens: max_tokens.max(1),
            encoder: Some(encoder),
        }
    }

    /// The bound, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokens `text` counts for this chunker (title included by the caller).
    pub fn count_tokens(&self, text: &str) -> usize {
        count(self.encoder.as_deref(), text)
    }

    /// The byte spans of `text`'s chunks, in order, and the heading path at each one's
    /// start (empty before the first heading). `title` is counted with each chunk as
    /// described on [`MarkdownChunker`].
    pub fn split(&self, title: &str, text: &str) -> Vec<(Range<usize>, String)> {
        if text.trim().is_empty() {
            return Vec::new();
        }
        // text-splitter takes a piece no longer in bytes than the capacity to fit without
        // sizing it, so the sizer must count at most one token a byte: it counts the
        // piece's own tokens, and the capacity is what the title and the encoder's
        // special tokens leave.
        let encoder = self.encoder.as_deref();
        let specials = count(encoder, "");
        let title_tokens = if title.is_empty() {
            0
        } else {
            count(encoder, &format!("{title}\n")).saturating_sub(specials)
        };
        let overhead = specials
            + if title_tokens * 2 < self.max_tokens {
                title_tokens
            } else {
                0
            };
        let capacity = self.max_tokens.saturating_sub(overhead).max(1);
        let sizer = Sizer { encoder, specials };
        let splitter = MarkdownSplitter::new(ChunkConfig::new(capacity).with_sizer(sizer));
        let headings = heading_paths(text);
        splitter
            .chunk_indices(text)
            .filter(|(_, piece)| !piece.trim().is_empty())
            .map(|(start, piece)| {
                let at = headings.partition_point(|(offset, _)| *offset <= start);
                let path = at
                    .checked_sub(1)
                    .map(|i| headings[i].1.clone())
                    .unwrap_or_default();
                (start..start + piece.len(), path)
            })
            .collect()
    }
}

#[async_trait]
impl Chunker for MarkdownChunker {
    fn name(&self) -> &str {
        "markdown"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(match &self.encoder {
            None => format!("max_tokens={} sizer=words", self.max_tokens),
            Some(e) => format!(
                "max_tokens={} sizer=encoder {} {} {:?}",
                self.max_tokens,
                e.name(),
                e.dimension(),
                e.fingerprint()
            ),
        })
    }

    /// On tokio's blocking pool ([`lprag_core::blocking`]; inline without a runtime):
    /// sizing runs the tokenizer many times per chunk. A block of documents (16 MiB of
    /// text) is copied there at a time.
    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        check_corpus(documents)?;
        let me = self.clone();
        let chunks =
            chunk_in_blocks(documents, BLOCK_BYTES, move |block| me.chunk_now(block)).await?;
        nonempty(chunks, documents.len())
    }
}

impl MarkdownChunker {
    /// The chunks of `documents`, numbered from 0 (no corpus checks).
    fn chunk_now(&self, documents: &[Document]) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        for d in documents {
            for (span, heading) in self.split(&d.title, &d.text) {
                let Some(text) = d.text.get(span.clone()) else {
                    continue;
                };
                let mut metadata = d.metadata.clone();
                if !heading.is_empty() {
                    metadata.insert(HEADING_KEY.to_string(), heading);
                }
                chunks.push(Chunk {
                    id: chunks.len(),
                    text: text.to_string(),
                    provenance: Provenance {
                        document_id: d.id.clone(),
                        title: d.title.clone(),
                        span,
                    },
                    metadata,
                });
            }
        }
        chunks
    }
}

fn count(encoder: Option<&dyn Encoder>, text: &str) -> usize {
    encoder
        .and_then(|e| e.count_tokens(text))
        .unwrap_or_else(|| word_tokens(text))
}

/// Words and punctuation marks: UAX #29 word-boundary segments that are not whitespace.
fn word_tokens(text: &str) -> usize {
    text.split_word_bounds()
        .filter(|s| !s.chars().all(char::is_whitespace))
        .count()
}

/// The tokens of a piece, without the encoder's special tokens.
struct Sizer<'a> {
    encoder: Option<&'a dyn Encoder>,
    specials: usize,
}

impl ChunkSizer for Sizer<'_> {
    fn size(&self, piece: &str) -> usize {
        count(self.encoder, piece).saturating_sub(self.specials)
    }
}

/// Every heading of `text` as (byte offset of its first line, heading path), in order:
/// ATX (`## Title`) and setext (`Title` over `===` or `---`) headings, outside fenced
/// code blocks, indented code and YAML front matter.
fn heading_paths(text: &str) -> Vec<(usize, String)> {
    let mut headings = HeadingStack::default();
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').map(|raw| {
        let start = offset;
        offset += raw.len();
        (start, raw.trim_end_matches(['\n', '\r']))
    });
    let mut fence: Option<(char, usize)> = None;
    // A paragraph line that a setext underline would turn into a heading.
    let mut previous: Option<(usize, &str)> = None;
    let mut first = true;
    while let Some((start, line)) = lines.next() {
        if std::mem::take(&mut first) && line.trim_end() == "---" {
            // YAML front matter.
            for (_, l) in lines.by_ref() {
                if matches!(l.trim_end(), "---" | "...") {
                    break;
                }
            }
            continue;
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = &line[indent..];
        if let Some((c, n)) = fence {
            if indent < 4
                && fence_run(body)
                    .is_some_and(|(fc, fnum, rest)| fc == c && fnum >= n && rest.trim().is_empty())
            {
                fence = None;
            }
            continue;
        }
        if indent >= 4 || body.starts_with('\t') {
            // Indented code, unless it continues a paragraph.
            if previous.is_none() {
                continue;
            }
            previous = Some((start, line.trim()));
            continue;
        }
        if let Some((c, n, _)) = fence_run(body) {
            fence = Some((c, n));
            previous = None;
            continue;
        }
        if let Some((level, title)) = atx_heading(body) {
            headings.push(start, level, title);
            previous = None;
            continue;
        }
        let t = body.trim_end();
        if let Some((p_start, p_line)) = previous {
            if let Some(level) = setext_level(t) {
                headings.push(p_start, level, p_line);
                previous = None;
                continue;
            }
        }
        previous = if t.is_empty() || is_list_item(t) || t.starts_with(['>', '|', '<']) {
            None
        } else {
            Some((start, t))
        };
    }
    headings.out
}

/// Heading paths as the headings come: the open headings and the paths so far.
#[derive(Default)]
struct HeadingStack {
    /// (level, title) of each open heading, outermost first.
    stack: Vec<(usize, String)>,
    /// (byte offset, heading path) of each heading, in order.
    out: Vec<(usize, String)>,
}

impl HeadingStack {
    /// A heading of `level` at `offset`: it closes the open headings of its level and
    /// deeper; an empty title is skipped.
    fn push(&mut self, offset: usize, level: usize, title: &str) {
        let title = title.trim();
        if title.is_empty() {
            return;
        }
        while self.stack.last().is_some_and(|(l, _)| *l >= level) {
            self.stack.pop();
        }
        self.stack.push((level, title.to_string()));
        let path: Vec<&str> = self.stack.iter().map(|(_, t)| t.as_str()).collect();
        self.out.push((offset, path.join(" > ")));
    }
}

/// The level of a setext underline: 1 for `===`, 2 for `---`.
fn setext_level(t: &str) -> Option<usize> {
    if !t.is_empty() && t.bytes().all(|b| b == b'=') {
        Some(1)
    } else if !t.is_empty() && t.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

/// `- x`, `* x`, `+ x`, `1. x`, `1) x`: a setext underline after it is not a heading.
fn is_list_item(t: &str) -> bool {
    if let Some(rest) = t.strip_prefix(['-', '*', '+']) {
        return rest.is_empty() || rest.starts_with([' ', '\t']);
    }
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (1..=9).contains(&digits)
        && t[digits..]
            .strip_prefix(['.', ')'])
            .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t']))
}

/// A fence opener or closer: ``` or ~~~ (at least three); its char, length and the rest
/// of the line.
fn fence_run(body: &str) -> Option<(char, usize, &str)> {
    let c = body.chars().next().filter(|&c| c == '`' || c == '~')?;
    let n = body.len() - body.trim_start_matches(c).len();
    let rest = &body[n..];
    // A backtick fence's info string may not contain backticks.
    (n >= 3 && !(c == '`' && rest.contains('`'))).then_some((c, n, rest))
}

/// An ATX heading (`body` without its indent): level and text without closing `#`s.
fn atx_heading(body: &str) -> Option<(usize, &str)> {
    let level = body.len() - body.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &body[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let without = text.trim_end_matches('#');
    Some((
        level,
        if without.is_empty() {
            ""
        } else if without.ends_with([' ', '\t']) {
            without.trim_end()
        } else {
            text
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::Error;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn paths(text: &str) -> Vec<(&str, String)> {
        heading_paths(text)
            .into_iter()
            .map(|(o, p)| (text[o..].lines().next().unwrap(), p))
            .collect()
    }

    #[test]
    fn heading_paths_follow_levels() {
        let text = "intro\n# Install\ntext\n## Linux\n### Debian\nx\n### Fedora\n## macOS #\n\
                    # Usage\n#### Deep\n##no-space\n#\n";
        let p: Vec<String> = heading_paths(text).into_iter().map(|(_, p)| p).collect();
        assert_eq!(
            p,
            [
                "Install",
                "Install > Linux",
                "Install > Linux > Debian",
                "Install > Linux > Fedora",
                "Install > macOS",
                "Usage",
                "Usage > Deep",
            ]
        );
    }

    #[test]
    fn setext_front_matter_and_code_are_handled() {
        let text = "---\ntitle: x\n---\nTop\n===\n\nSub part\n--------\n\n- item\n---\n\n\
                    ```sh\n# a comment, not a heading\n```\n\n~~~~\n## nor this\n~~~\n## still code\n~~~~\n\
                    \n    # indented code\n\n## Real\n";
        assert_eq!(
            paths(text),
            [
                ("Top", "Top".to_string()),
                ("Sub part", "Top > Sub part".to_string()),
                ("## Real", "Top > Real".to_string()),
            ]
        );
    }

    #[test]
    fn chunks_carry_heading_paths_and_document_metadata() {
        let text = "# Install\n\nDownload the archive and unpack it somewhere.\n\n\
                    ## Linux\n\nUse the package manager of your distribution.\n\n\
                    ### Debian\n\nRun apt install and wait until it finishes.\n\n\
                    ```\n# not a heading\necho hi\n```\n\n\
                    ## Windows\n\nRun the installer and follow the wizard.\n";
        let doc = Document::new("guide.md", "Guide", text)
            .with_metadata("path", "guide.md")
            .with_metadata("format", "markdown");
        let chunks = block_on(MarkdownChunker::new(16).chunk(std::slice::from_ref(&doc))).unwrap();
        assert!(chunks.len() >= 4, "{chunks:#?}");
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.id, i);
            assert_eq!(&text[c.provenance.span.clone()], c.text);
            assert_eq!(c.provenance.document_id, "guide.md");
            assert_eq!(c.provenance.title, "Guide");
            assert_eq!(c.metadata["path"], "guide.md");
            assert_eq!(c.metadata["format"], "markdown");
        }
        let heading = |needle: &str| {
            chunks
                .iter()
                .find(|c| c.text.contains(needle))
                .map(|c| c.metadata[HEADING_KEY].as_str())
                .unwrap()
        };
        assert_eq!(heading("Download"), "Install");
        assert_eq!(heading("package manager"), "Install > Linux");
        assert_eq!(heading("apt install"), "Install > Linux > Debian");
        assert_eq!(heading("echo hi"), "Install > Linux > Debian");
        assert_eq!(heading("wizard"), "Install > Windows");
    }

    #[test]
    fn chunk_sizes_are_bounded() {
        let mut text = String::from("# Big\n\n");
        for i in 0..50 {
            text.push_str(&format!(
                "## Part {i}\n\nThis paragraph has some words, and punctuation; it goes on \
                 for a while so that sections must be cut. Another sentence follows here.\n\n\
                 - a list item\n- another one\n\n"
            ));
        }
        text.push_str(&"unbroken ".repeat(500));
        let doc = Document::new("d", "A title", text.as_str());
        for max in [10, 25, 64] {
            let chunker = MarkdownChunker::new(max);
            let chunks = block_on(chunker.chunk(std::slice::from_ref(&doc))).unwrap();
            assert!(chunks.len() > 50);
            for c in &chunks {
                let n = chunker.count_tokens(&c.embedding_text());
                assert!(n <= max, "{n} > {max}: {:?}", c.text);
            }
            // Everything but whitespace is covered, in order.
            let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
            let strip = |s: &str| s.split_whitespace().collect::<String>();
            assert_eq!(strip(&joined), strip(&text));
        }
    }

    #[test]
    fn a_long_title_is_not_counted() {
        let title = "word ".repeat(40);
        let doc = Document::new("d", title.as_str(), "One sentence here. Another one here.");
        let chunks = block_on(MarkdownChunker::new(10).chunk(&[doc])).unwrap();
        assert_eq!(chunks.len(), 1);
    }

    #[test]
    fn plain_text_chunks_without_headings() {
        let text =
            "First paragraph of plain text.\n\nSecond paragraph, a bit longer than the first.";
        let chunks =
            block_on(MarkdownChunker::new(8).chunk(&[Document::new("p", "", text)])).unwrap();
        assert!(chunks.len() >= 2);
        assert!(chunks.iter().all(|c| !c.metadata.contains_key(HEADING_KEY)));
        let whole =
            block_on(MarkdownChunker::default().chunk(&[Document::new("p", "", text)])).unwrap();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].text, text);
    }

    #[test]
    fn empty_documents_and_corpus_errors() {
        let c = MarkdownChunker::new(50);
        let docs = [
            Document::new("e", "", "  \n\n "),
            Document::new("x", "", "# Only\n\ntext"),
        ];
        let chunks = block_on(c.chunk(&docs)).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].provenance.document_id, "x");
        assert_eq!(chunks[0].metadata[HEADING_KEY], "Only");
        let e = block_on(c.chunk(&[])).unwrap_err();
        assert!(matches!(e, Error::EmptyCorpus(_)), "{e}");
        let e = block_on(c.chunk(&docs[..1])).unwrap_err();
        assert!(matches!(e, Error::EmptyCorpus(_)), "{e}");
        let dup = [Document::new("a", "", "x"), Document::new("a", "", "y")];
        let e = block_on(c.chunk(&dup)).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    }

    #[test]
    fn fingerprints_name_the_settings() {
        assert_eq!(
            MarkdownChunker::new(64).fingerprint().as_deref(),
            Some("max_tokens=64 sizer=words")
        );
        assert_ne!(
            MarkdownChunker::new(64).fingerprint(),
            MarkdownChunker::new(65).fingerprint()
        );
        assert_eq!(MarkdownChunker::new(0).max_tokens(), 1);
        assert_eq!(MarkdownChunker::default().max_tokens(), 200);
    }

    #[test]
    fn encoder_counts_are_used() {
        /// Counts every character as a token.
        struct CharEncoder;
        #[async_trait]
        impl Encoder for CharEncoder {
            fn name(&self) -> &str {
                "chars"
            }
            fn dimension(&self) -> usize {
                1
            }
            async fn embed(&self, texts: &[String]) -> Result<lprag_core::Embeddings> {
                lprag_core::Embeddings::new(1, vec![0.0; texts.len()])
            }
            fn count_tokens(&self, text: &str) -> Option<usize> {
                Some(text.chars().count())
            }
        }
        let chunker = MarkdownChunker::for_encoder(Arc::new(CharEncoder), 30);
        let text = "# Head\n\nSome words that are longer than thirty characters in all.";
        let chunks = block_on(chunker.chunk(&[Document::new("d", "T", text)])).unwrap();
        assert!(chunks.len() > 2);
        assert!(
            chunks
                .iter()
                .all(|c| c.embedding_text().chars().count() <= 30),
            "{chunks:#?}"
        );
        assert!(chunker.fingerprint().unwrap().contains("encoder chars 1"));
        assert!(format!("{chunker:?}").contains("chars"));
    }

    #[test]
    fn odd_input_never_panics() {
        let c = MarkdownChunker::new(3);
        for t in [
            "#",
            "######",
            "```",
            "~~~\n",
            "---",
            "---\n---",
            "===\n",
            "a\n===",
            "\r\n# x\r\n",
            "# 🦀 crab\n\n🦀🦀🦀🦀🦀🦀🦀🦀",
            "e\u{301}\u{301}\u{301}",
            "> # quoted\n",
            "|a|\n|-|",
        ] {
            let _ = c.split("", t);
            let _ = c.split("title", t);
        }
        let deep = "> ".repeat(10_000) + "x";
        assert!(!c.split("", &deep).is_empty());
    }
}
