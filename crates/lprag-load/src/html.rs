//! HTML to plain text.
//!
//! Built on `html5gum`, a WHATWG-compliant HTML tokenizer with no dependencies of its own
//! (`#![forbid(unsafe_code)]`, fuzzed upstream). A tokenizer is all that text extraction
//! needs: the tags that matter here (blocks that break paragraphs, `script`/`style` and
//! friends whose content is dropped, `title`, `h1`) are recognised one token at a time, so
//! there is no DOM to build and no recursion, and deeply nested or broken markup cannot
//! overflow the stack. `html2text` and `scraper` would pull html5ever's tree builder,
//! `markup5ever` and (for `scraper`) the CSS selector stack into every build for the same
//! result.

use html5gum::{DefaultEmitter, EndTag, StartTag, Token, Tokenizer};

/// The text and title of an HTML page.
pub(crate) struct HtmlText {
    /// Visible text: paragraphs separated by blank lines, whitespace collapsed outside
    /// `<pre>`.
    pub text: String,
    /// `<title>`, else the first `<h1>`, whitespace collapsed; empty when neither has text.
    pub title: String,
}

/// Elements whose content is never visible text.
const DROPPED: &[&[u8]] = &[
    b"script",
    b"style",
    b"noscript",
    b"template",
    b"svg",
    b"math",
    b"nav",
    b"iframe",
    b"object",
    b"canvas",
    b"select",
];

/// Elements that start and end a paragraph.
const BLOCKS: &[&[u8]] = &[
    b"address",
    b"article",
    b"aside",
    b"blockquote",
    b"body",
    b"caption",
    b"dd",
    b"details",
    b"dialog",
    b"div",
    b"dl",
    b"dt",
    b"fieldset",
    b"figcaption",
    b"figure",
    b"footer",
    b"form",
    b"h1",
    b"h2",
    b"h3",
    b"h4",
    b"h5",
    b"h6",
    b"header",
    b"hgroup",
    b"hr",
    b"html",
    b"legend",
    b"main",
    b"ol",
    b"p",
    b"pre",
    b"section",
    b"summary",
    b"table",
    b"ul",
];

/// Elements that end a line.
const LINES: &[&[u8]] = &[b"br", b"li", b"tr", b"option"];

/// Extract the visible text and the title of `html`. Never panics.
pub(crate) fn html_to_text(html: &str) -> HtmlText {
    let mut emitter = DefaultEmitter::default();
    // Switch to raw-text states after <script>, <style>, <title>, <textarea>, ... as a
    // browser does, so that their content is not read as markup.
    emitter.naively_switch_states(true);
    let mut page = Extractor::default();
    for token in Tokenizer::new_with_emitter(html, emitter) {
        let Ok(token) = token; // the reader of a &str cannot fail
        match token {
            Token::StartTag(tag) => page.start_tag(&tag),
            Token::EndTag(tag) => page.end_tag(&tag),
            Token::String(s) => page.string(&s.value),
            Token::Comment(_) | Token::Doctype(_) | Token::Error(_) => {}
        }
    }
    page.finish()
}

/// The state of one [`html_to_text`] pass, fed one token at a time.
#[derive(Default)]
struct Extractor {
    /// The visible text so far.
    out: Writer,
    /// Depth inside DROPPED elements.
    dropped: usize,
    /// Depth inside `<pre>`.
    pre: usize,
    /// Inside `<title>`.
    in_title: bool,
    /// The text of `<title>` so far.
    title: String,
    /// Text of the first `<h1>`, while or after reading it.
    h1: Option<String>,
    /// Inside the first `<h1>`.
    in_h1: bool,
}

impl Extractor {
    /// An opening tag: enter dropped, title, `<h1>` and `<pre>` elements, and break
    /// paragraphs and lines, separate cells, write list bullets and image alt text.
    fn start_tag(&mut self, tag: &StartTag<()>) {
        let name = lower(&tag.name);
        let name = name.as_slice();
        if DROPPED.contains(&name) {
            if !tag.self_closing {
                self.dropped += 1;
            }
            return;
        }
        if name == b"title" {
            self.in_title = !tag.self_closing;
            return;
        }
        if name == b"h1" && self.h1.is_none() {
            self.h1 = Some(String::new());
            self.in_h1 = true;
        }
        if name == b"pre" {
            self.pre += 1;
        }
        let out = &mut self.out;
        if BLOCKS.contains(&name) {
            out.paragraph();
        } else if LINES.contains(&name) {
            out.line();
            if name == b"li" && self.dropped == 0 {
                out.text("- ", false);
            }
        } else if (name == b"td" || name == b"th") && self.dropped == 0 {
            out.space();
        } else if name == b"img" && self.dropped == 0 {
            if let Some(alt) = tag.attributes.get(b"alt".as_slice()) {
                let alt = String::from_utf8_lossy(&alt.value);
                out.text(&alt, false);
            }
        }
    }

    /// A closing tag: leave dropped, title, `<h1>` and `<pre>` elements, and break
    /// paragraphs and lines.
    fn end_tag(&mut self, tag: &EndTag<()>) {
        let name = lower(&tag.name);
        let name = name.as_slice();
        if DROPPED.contains(&name) {
            self.dropped = self.dropped.saturating_sub(1);
            return;
        }
        if name == b"title" {
            self.in_title = false;
            return;
        }
        if name == b"h1" {
            self.in_h1 = false;
        }
        if name == b"pre" {
            self.pre = self.pre.saturating_sub(1);
        }
        if BLOCKS.contains(&name) {
            self.out.paragraph();
        } else if LINES.contains(&name) {
            self.out.line();
        }
    }

    /// Character data: into the title, or (outside dropped elements) into the text and
    /// the first `<h1>`.
    fn string(&mut self, s: &[u8]) {
        let s = String::from_utf8_lossy(s);
        if self.in_title {
            self.title.push_str(&s);
        } else if self.dropped == 0 {
            if self.in_h1 {
                if let Some(h) = self.h1.as_mut() {
                    h.push_str(&s);
                }
            }
            self.out.text(&s, self.pre > 0);
        }
    }

    /// The text, and the title: `<title>`, else the first `<h1>`.
    fn finish(self) -> HtmlText {
        let mut title = collapse(&self.title);
        if title.is_empty() {
            title = self.h1.map(|h| collapse(&h)).unwrap_or_default();
        }
        HtmlText {
            text: self.out.finish(),
            title,
        }
    }
}

fn lower(name: &[u8]) -> Vec<u8> {
    name.to_ascii_lowercase()
}

/// Whitespace runs to one space, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text output with pending line and paragraph breaks, so that runs of block tags give
/// one blank line and no break is written at the start or the end.
#[derive(Default)]
struct Writer {
    out: String,
    /// 0: none, 1: a line break, 2: a paragraph break before the next text.
    pending: u8,
    /// A space is owed before the next text (collapsed whitespace).
    space: bool,
}

impl Writer {
    fn paragraph(&mut self) {
        self.pending = 2;
    }

    fn line(&mut self) {
        self.pending = self.pending.max(1);
    }

    fn space(&mut self) {
        self.space = true;
    }

    fn text(&mut self, s: &str, verbatim: bool) {
        if verbatim {
            if s.is_empty() {
                return;
            }
            self.flush_breaks();
            self.space = false;
            self.out.push_str(s);
            return;
        }
        let starts_ws = s.starts_with(char::is_whitespace);
        let ends_ws = s.ends_with(char::is_whitespace);
        let mut words = s.split_whitespace().peekable();
        if words.peek().is_none() {
            if !s.is_empty() {
                self.space = true;
            }
            return;
        }
        let at_line_start = self.flush_breaks();
        if (self.space || starts_ws) && !at_line_start && !self.out.is_empty() {
            self.out.push(' ');
        }
        let mut first = true;
        for w in words {
            if !first {
                self.out.push(' ');
            }
            first = false;
            self.out.push_str(w);
        }
        self.space = ends_ws;
    }

    /// Write owed breaks; whether the output is now at the start of a line.
    fn flush_breaks(&mut self) -> bool {
        if self.out.is_empty() {
            self.pending = 0;
            return true;
        }
        if self.pending == 0 {
            return self.out.ends_with('\n');
        }
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
        let have = self.out.len() - self.out.trim_end_matches('\n').len();
        for _ in have..usize::from(self.pending) {
            self.out.push('\n');
        }
        self.pending = 0;
        self.space = false;
        true
    }

    fn finish(self) -> String {
        self.out.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_title_and_paragraphs() {
        let h = html_to_text(
            "<!doctype html><html><head><title> The  Page </title>\
             <style>p { color: red }</style><script>var x = '<p>no</p>';</script></head>\
             <body><nav><a href=/>Home</a></nav><h1>Main heading</h1>\
             <p>First <b>bold</b> para&amp;graph.</p><p>Second\n   line</p>\
             <ul><li>one</li><li>two</li></ul><pre>a  b\n  c</pre>\
             <table><tr><td>x</td><td>y</td></tr></table></body></html>",
        );
        assert_eq!(h.title, "The Page");
        assert_eq!(
            h.text,
            "Main heading\n\nFirst bold para&graph.\n\nSecond line\n\n- one\n- two\n\n\
             a  b\n  c\n\nx y"
        );
    }

    #[test]
    fn h1_when_no_title() {
        let h = html_to_text("<h1>  Only <i>h1</i> </h1><h1>Second</h1><p>x");
        assert_eq!(h.title, "Only h1");
        assert_eq!(h.text, "Only h1\n\nSecond\n\nx");
        assert_eq!(html_to_text("<p>plain").title, "");
    }

    #[test]
    fn broken_and_deep_markup_does_not_panic() {
        let deep = "<div>".repeat(200_000) + "deep" + &"</div>".repeat(10);
        assert_eq!(html_to_text(&deep).text, "deep");
        for s in [
            "<",
            "<<>>",
            "</p",
            "<script>",
            "<title>x",
            "&#xFFFFFFFF;",
            "<svg/>ok",
        ] {
            let _ = html_to_text(s);
        }
        assert_eq!(html_to_text("<svg/>ok").text, "ok");
    }
}
