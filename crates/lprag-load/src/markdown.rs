//! The title of a Markdown file.

/// The title of a Markdown text: a `title:` in YAML front matter, else the first level-1
/// heading (ATX `# Title` or setext `Title` over `===`) outside fenced code blocks; `None`
/// when there is neither.
pub(crate) fn markdown_title(text: &str) -> Option<String> {
    let mut lines = text.lines().peekable();
    // Front matter: `---` on the first line up to a closing `---` or `...`.
    if lines.peek().is_some_and(|l| l.trim_end() == "---") {
        lines.next();
        let mut title = None;
        for l in lines.by_ref() {
            let t = l.trim_end();
            if t == "---" || t == "..." {
                break;
            }
            if let Some(v) = l.strip_prefix("title:") {
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
                if !v.is_empty() && title.is_none() {
                    title = Some(v.to_string());
                }
            }
        }
        if title.is_some() {
            return title;
        }
    }
    let mut fence: Option<(char, usize)> = None;
    let mut previous: Option<&str> = None; // a paragraph line that a setext `===` may underline
    for line in lines {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = line.trim_start_matches(' ');
        if let Some((c, n)) = fence {
            if indent < 4
                && fence_run(body)
                    .is_some_and(|(fc, fnum, rest)| fc == c && fnum >= n && rest.trim().is_empty())
            {
                fence = None;
            }
            continue;
        }
        if indent < 4 {
            if let Some((c, n, _)) = fence_run(body) {
                fence = Some((c, n));
                previous = None;
                continue;
            }
            if let Some((1, h)) = atx_heading(body) {
                if !h.is_empty() {
                    return Some(h.to_string());
                }
            }
            if atx_heading(body).is_some() {
                previous = None;
                continue;
            }
            let t = body.trim_end();
            if !t.is_empty() && t.bytes().all(|b| b == b'=') {
                if let Some(p) = previous {
                    return Some(p.trim().to_string());
                }
            }
        }
        previous = if line.trim().is_empty() || indent >= 4 && previous.is_none() {
            None
        } else {
            Some(line)
        };
    }
    None
}

/// A fence opener: ``` or ~~~ (at least three); its char, length and the rest of the line.
pub(crate) fn fence_run(body: &str) -> Option<(char, usize, &str)> {
    let c = body.chars().next().filter(|&c| c == '`' || c == '~')?;
    let n = body.len() - body.trim_start_matches(c).len();
    let rest = &body[n..];
    // A backtick fence's info string may not contain backticks.
    (n >= 3 && !(c == '`' && rest.contains('`'))).then_some((c, n, rest))
}

/// An ATX heading (`body` without its up-to-3-space indent): its level and its text,
/// without the closing `#`s.
pub(crate) fn atx_heading(body: &str) -> Option<(usize, &str)> {
    let level = body.len() - body.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &body[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let mut text = rest.trim();
    // A closing sequence: `#`s preceded by a space (or the whole text).
    let without = text.trim_end_matches('#');
    if without.is_empty() {
        text = "";
    } else if without.ends_with([' ', '\t']) {
        text = without.trim_end();
    }
    Some((level, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(
            markdown_title("intro\n\n# Title #\n\n# Other").as_deref(),
            Some("Title")
        );
        assert_eq!(markdown_title("## Sub\n# Main").as_deref(), Some("Main"));
        assert_eq!(
            markdown_title("Main Title\n=====\n\ntext").as_deref(),
            Some("Main Title")
        );
        assert_eq!(
            markdown_title("```\n# not a title\n```\n# Real").as_deref(),
            Some("Real")
        );
        assert_eq!(
            markdown_title("~~~~\n# no\n~~~\n# no\n~~~~").as_deref(),
            None
        );
        assert_eq!(
            markdown_title("#hashtag\n    # indented code").as_deref(),
            None
        );
        assert_eq!(
            markdown_title("---\ntitle: \"From front matter\"\n---\n# Heading").as_deref(),
            Some("From front matter")
        );
        assert_eq!(
            markdown_title("---\ndate: x\n---\n# Heading").as_deref(),
            Some("Heading")
        );
        assert_eq!(markdown_title("").as_deref(), None);
        assert_eq!(markdown_title("===").as_deref(), None);
        assert_eq!(markdown_title("# C# tips").as_deref(), Some("C# tips"));
    }
}
