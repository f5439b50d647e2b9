//! Parsers for LLM output that survive real models: markdown decoration, code fences,
//! numbering and bullets, missing brackets, preambles and trailing prose, and output cut
//! off by the token limit. Each returns `Err(reason)` rather than an empty list; callers
//! turn that into [`crate::LlmError::Parse`] carrying the raw output.

use serde_json::Value;

/// The text inside the first fenced code block, or the text itself when there is none.
/// An unterminated fence (truncated output) keeps everything after it.
pub fn strip_code_fences(raw: &str) -> &str {
    let Some(start) = raw.find("```") else {
        return raw;
    };
    let after = &raw[start + 3..];
    // Skip the info string (```json).
    let body = match after.find('\n') {
        Some(nl) => &after[nl + 1..],
        None => return raw,
    };
    match body.find("```") {
        Some(end) => &body[..end],
        None => body,
    }
}

/// Markdown decoration around a line: headings, bold, block quotes.
fn clean_line(line: &str) -> &str {
    let mut l = line.trim();
    loop {
        let before = l;
        l = l.trim_start_matches('#').trim_start_matches('>').trim();
        if l.len() >= 4 && l.starts_with("**") && l.ends_with("**") {
            l = l[2..l.len() - 2].trim();
        }
        if l == before {
            return l;
        }
    }
}

#[derive(Debug, PartialEq)]
enum Header {
    /// `[Sentence 3]`: the source sentence follows.
    Sentence,
    /// `[Extracted Chunks in Sentence 3]`.
    Extracted,
    /// `[Questions Chunk 2]` or `[Chunk 2]`: 1-based chunk number.
    Group(usize),
    /// `[The Start of …]`, `Your Answer:` and other framing.
    Other,
}

fn header(line: &str) -> Option<Header> {
    let l = line
        .trim_matches(|c| c == '[' || c == ']' || c == ':')
        .trim();
    let lower = l.to_lowercase();
    let number = |prefix: &str| -> Option<usize> {
        lower
            .strip_prefix(prefix)
            .and_then(|r| r.trim().trim_end_matches(':').trim().parse::<usize>().ok())
    };
    if line.starts_with('[') || line.ends_with(':') || line.ends_with("]:") {
        if label_prefix(l).is_some_and(|rest| rest.trim().is_empty()) {
            // `[Question 1]`, `Statement 2:` alone on a line: a label of what follows.
            if number("questions chunk").is_none()
                && number("questions for chunk").is_none()
                && number("chunk").is_none()
                && number("sentence").is_none()
            {
                return Some(Header::Other);
            }
        }
        if number("sentence").is_some() {
            return Some(Header::Sentence);
        }
        if lower.starts_with("extracted chunks") {
            return Some(Header::Extracted);
        }
        if let Some(n) = number("questions chunk")
            .or_else(|| number("questions for chunk"))
            .or_else(|| number("chunk"))
        {
            return Some(Header::Group(n));
        }
        if lower.starts_with("the start")
            || lower.starts_with("the end")
            || lower == "your answer"
            || lower == "system's input"
            || lower == "answer"
        {
            return Some(Header::Other);
        }
    }
    None
}

/// The rest of `line` after a numbered label of an item — `Question 1:`, `Q1.`,
/// `Statement 2 -`, `Chunk 3)`, `Fact 1:` — or `None` when it has none.
fn label_prefix(line: &str) -> Option<&str> {
    const LABELS: [&str; 8] = [
        "question",
        "query",
        "statement",
        "chunk",
        "fact",
        "claim",
        "q",
        "s",
    ];
    let lower = line.to_ascii_lowercase();
    for label in LABELS {
        let Some(after) = lower.strip_prefix(label) else {
            continue;
        };
        let after_trim = after.trim_start();
        let digits = after_trim
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 || digits > 3 {
            continue;
        }
        let offset = line.len() - after_trim.len() + digits;
        let rest = &line[offset..];
        let stripped = rest
            .trim_start()
            .trim_start_matches([':', '.', ')', '-', ']', '–'])
            .trim_start();
        if rest.is_empty() || rest.starts_with([' ', ':', '.', ')', '-', ']', '–']) {
            return Some(stripped);
        }
    }
    None
}

#[derive(Debug, PartialEq)]
enum Item {
    /// `[text]`, `- text`, `1. text`: clearly an item.
    Marked(String),
    /// `[text` on the last line: cut off by the token limit.
    Truncated,
    /// A bare line of text.
    Plain(String),
}

fn strip_quotes(s: &str) -> &str {
    let s = s.trim();
    for (a, b) in [("\"", "\""), ("“", "”"), ("'", "'")] {
        if s.len() >= a.len() + b.len() && s.starts_with(a) && s.ends_with(b) {
            return s[a.len()..s.len() - b.len()].trim();
        }
    }
    s
}

fn item(line: &str, is_last: bool) -> Option<Item> {
    let l = clean_line(line);
    if l.is_empty() {
        return None;
    }
    // Bullets and numbering.
    let mut rest = l;
    let mut marked = false;
    for b in ["- ", "* ", "• ", "– "] {
        if let Some(r) = rest.strip_prefix(b) {
            rest = r.trim();
            marked = true;
            break;
        }
    }
    if !marked {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && digits < 4 {
            let r = &rest[digits..];
            if let Some(r) = r.strip_prefix(". ").or_else(|| r.strip_prefix(") ")) {
                rest = r.trim();
                marked = true;
            }
        }
    }
    let mut rest = rest.trim_end_matches(',').trim();
    if let Some(r) = label_prefix(rest) {
        rest = r.trim();
        marked = true;
        if rest.is_empty() {
            return None;
        }
    }
    if let Some(inner) = rest.strip_prefix('[') {
        return match inner.rfind(']') {
            Some(end) => {
                let text = strip_quotes(inner[..end].trim());
                (!text.is_empty()).then(|| Item::Marked(text.to_string()))
            }
            None if is_last => Some(Item::Truncated),
            None => {
                let text = strip_quotes(inner);
                (!text.is_empty()).then(|| Item::Marked(text.to_string()))
            }
        };
    }
    let text = strip_quotes(rest);
    if text.is_empty() {
        return None;
    }
    Some(if marked {
        Item::Marked(text.to_string())
    } else {
        Item::Plain(text.to_string())
    })
}

/// A plain line that is probably an item rather than prose around the items: at least
/// three words, not a lead-in ("…:"), not the model talking about itself or the task
/// (atomic statements have their pronouns resolved, so they do not start with "I").
fn plausible_plain(s: &str) -> bool {
    const PROSE: [&str; 12] = [
        "i ",
        "i'm",
        "i’m",
        "i'd",
        "sorry",
        "as an ai",
        "here are",
        "here is",
        "sure",
        "certainly",
        "let me",
        "note:",
    ];
    let lower = s.to_lowercase();
    s.split_whitespace().count() >= 3
        && !s.ends_with(':')
        && !PROSE.iter().any(|p| lower.starts_with(p))
}

/// Items of one section: its marked items when it has any (plain lines are then prose
/// around them), else its plausible plain lines (the model dropped the brackets).
fn section_items(items: Vec<Item>) -> Vec<String> {
    let any_marked = items.iter().any(|i| matches!(i, Item::Marked(_)));
    items
        .into_iter()
        .filter_map(|i| match i {
            Item::Marked(t) => Some(t),
            Item::Plain(t) if !any_marked && plausible_plain(&t) => Some(t),
            _ => None,
        })
        .collect()
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|s| seen.insert(s.to_lowercase()))
        .collect()
}

/// A JSON array of strings, when the whole (fence-stripped) output is one.
fn string_array(text: &str) -> Option<Vec<String>> {
    let v = json_array(text).ok()?;
    let items: Vec<String> = v
        .iter()
        .filter_map(|x| match x {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Object(o) => ["chunk", "statement", "question", "query", "text"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str))
                .map(|s| s.trim().to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty())
        .collect();
    (!items.is_empty()).then_some(items)
}

/// Atomic statements from a C-PROMPT answer (`[Sentence i]` / `[Extracted Chunks in
/// Sentence i]` sections of `[statement]` lines). The source sentences echoed under
/// `[Sentence i]` are skipped. Also accepted: bullets or numbering instead of brackets,
/// statements without brackets, no section headers, a JSON array of strings. A last line
/// cut off mid-statement is dropped.
pub fn chunk_statements(raw: &str) -> Result<Vec<String>, String> {
    let text = strip_code_fences(raw);
    if text.trim_start().starts_with("[\"") || text.trim_start().starts_with("[\n") {
        if let Some(items) = string_array(text) {
            return Ok(dedup(items));
        }
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut saw_extracted = false;
    let mut in_sentence = false;
    let mut sections: Vec<Vec<Item>> = vec![Vec::new()];
    let mut free: Vec<Item> = Vec::new();
    // Lines under `[Sentence i]`: echoes of the source sentence when the answer has
    // `[Extracted Chunks …]` sections; the statements themselves when it has none.
    let mut under_sentence: Vec<Vec<Item>> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let l = clean_line(line);
        match header(l) {
            Some(Header::Sentence) => {
                in_sentence = true;
                under_sentence.push(Vec::new());
                continue;
            }
            Some(Header::Extracted) => {
                saw_extracted = true;
                in_sentence = false;
                sections.push(Vec::new());
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        if in_sentence {
            if let Some(it) = item(line, i + 1 == lines.len()) {
                under_sentence
                    .last_mut()
                    .expect("a sentence section")
                    .push(it);
            }
            continue;
        }
        if let Some(it) = item(line, i + 1 == lines.len()) {
            if saw_extracted {
                sections.last_mut().expect("one section").push(it);
            } else {
                free.push(it);
            }
        }
    }
    let items: Vec<String> = if saw_extracted {
        sections.into_iter().flat_map(section_items).collect()
    } else {
        let mut items = section_items(free);
        if items.is_empty() {
            items = under_sentence.into_iter().flat_map(section_items).collect();
        }
        items
    };
    // One statement per line was asked: a line of several sentences (a weak model often
    // rewrites the paragraph) is split into them.
    let splitter = lprag_text::SentenceChunker::default();
    let items: Vec<String> = items
        .into_iter()
        .flat_map(|it| {
            let spans = splitter.split(&it);
            if spans.len() <= 1 {
                vec![it]
            } else {
                spans.into_iter().map(|r| it[r].to_string()).collect()
            }
        })
        .collect();
    let items = dedup(items);
    if items.is_empty() {
        return Err("no chunk statements found".into());
    }
    Ok(items)
}

/// Lower-case words, for comparing an item with the prompt.
fn normalized_words(s: &str) -> String {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Drop items that repeat the prompt (a weak model often copies the example of the
/// instructions: "Pakistan Super League (PSL) is a Twenty20 cricket league."). An item is
/// an echo when its words occur, in order, in `prompt`. Fails when nothing else is left.
pub fn drop_prompt_echoes(items: Vec<String>, prompt: &str) -> Result<Vec<String>, String> {
    let prompt = format!(" {} ", normalized_words(prompt));
    let n = items.len();
    let kept: Vec<String> = items
        .into_iter()
        .filter(|it| {
            let w = normalized_words(it);
            w.is_empty() || !prompt.contains(&format!(" {w} "))
        })
        .collect();
    if kept.is_empty() {
        return Err(format!(
            "all {n} items repeat the prompt's own example or instructions"
        ));
    }
    Ok(kept)
}

/// Questions from an S-PROMPT answer, each with the 1-based chunk number of the
/// `[Questions Chunk i]` section it was under (`None` outside any section). Same
/// tolerance as [`chunk_statements`]; JSON arrays of strings or of
/// `{"question": …}` objects are accepted too.
pub fn grouped_questions(raw: &str) -> Result<Vec<(Option<usize>, String)>, String> {
    let text = strip_code_fences(raw);
    let start = text.trim_start();
    if start.starts_with("[\"") || start.starts_with("[{") || start.starts_with("[\n") {
        if let Some(items) = string_array(text) {
            return Ok(dedup(items).into_iter().map(|q| (None, q)).collect());
        }
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut sections: Vec<(Option<usize>, Vec<Item>)> = vec![(None, Vec::new())];
    for (i, line) in lines.iter().enumerate() {
        let l = clean_line(line);
        match header(l) {
            Some(Header::Group(n)) => {
                sections.push((Some(n), Vec::new()));
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        if let Some(it) = item(line, i + 1 == lines.len()) {
            sections.last_mut().expect("one section").1.push(it);
        }
    }
    let mut seen = std::collections::HashSet::new();
    let found: Vec<(Option<usize>, String)> = sections
        .into_iter()
        .flat_map(|(g, items)| section_items(items).into_iter().map(move |q| (g, q)))
        .filter(|(_, q)| seen.insert(q.to_lowercase()))
        .collect();
    if found.is_empty() {
        return Err("no questions found".into());
    }
    let n = found.len();
    let out: Vec<(Option<usize>, String)> =
        found.into_iter().filter(|(_, q)| is_question(q)).collect();
    if out.is_empty() {
        return Err(format!(
            "none of the {n} lines is a question (no `?`, no question word first)"
        ));
    }
    Ok(out)
}

/// Whether `s` reads as a question: it ends with `?`, or starts with a question word or
/// an auxiliary verb (`What …`, `Is …`, `In which …`). Statements a weak model wrote
/// instead of questions are not.
pub fn is_question(s: &str) -> bool {
    const OPENERS: [&str; 30] = [
        "what", "who", "whom", "whose", "when", "where", "which", "why", "how", "is", "are", "was",
        "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would",
        "should", "in", "on", "at", "from", "for", "by",
    ];
    let t = s.trim();
    if t.ends_with('?') {
        return true;
    }
    let mut words = t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase);
    match words.next() {
        // "In which year …", "For whom …": a preposition must lead to a question word.
        Some(w) if ["in", "on", "at", "from", "for", "by"].contains(&w.as_str()) => {
            words.next().is_some_and(|w2| {
                ["what", "which", "whom", "whose", "when", "where", "how"].contains(&w2.as_str())
            })
        }
        Some(w) => OPENERS.contains(&w.as_str()),
        None => false,
    }
}

/// Content words of `s`: lower case, at least 4 characters and not a function word, or
/// any number.
fn content_words(s: &str) -> Vec<String> {
    const STOP: [&str; 40] = [
        "what", "which", "where", "when", "whom", "whose", "does", "have", "with", "that", "this",
        "these", "those", "from", "were", "been", "being", "they", "them", "their", "there",
        "into", "also", "about", "after", "before", "many", "much", "some", "such", "than", "then",
        "only", "other", "over", "under", "most", "more", "very", "will",
    ];
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            w.chars().count() >= 4 || (!w.is_empty() && w.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// Keep the items grounded in `source` (the text the model was given): at least
/// `min_fraction` of an item's content words (≥ 4 letters, or numbers) occur in it; an
/// item with no content word is kept. Drops what a weak model invents ("Bhratanath
/// Bhandavkaram, a British chemist…" for a batch about Marie Curie). Fails when nothing
/// is left.
pub fn drop_ungrounded(
    items: Vec<String>,
    source: &str,
    min_fraction: f32,
) -> Result<Vec<String>, String> {
    let vocab: std::collections::HashSet<String> = content_words(source).into_iter().collect();
    let n = items.len();
    let kept: Vec<String> = items
        .into_iter()
        .filter(|it| {
            let words = content_words(it);
            if words.is_empty() {
                return true;
            }
            let hit = words.iter().filter(|w| vocab.contains(*w)).count();
            hit as f32 >= min_fraction * words.len() as f32
        })
        .collect();
    if kept.is_empty() {
        return Err(format!(
            "none of the {n} items is grounded in the given text (too few of their words occur in it)"
        ));
    }
    Ok(kept)
}

/// The first JSON array in the output, ignoring prose and code fences around it. A
/// truncated array keeps its complete elements. An object wrapping one array field
/// (`{"queries": […]}`) yields that array.
pub fn json_array(raw: &str) -> Result<Vec<Value>, String> {
    let text = strip_code_fences(raw);
    let open = text
        .find(['[', '{'])
        .ok_or_else(|| "no JSON array in the output".to_string())?;
    let body = &text[open..];
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match stream.next() {
        Some(Ok(Value::Array(items))) => return Ok(items),
        Some(Ok(Value::Object(o))) => {
            let arrays: Vec<&Vec<Value>> = o.values().filter_map(Value::as_array).collect();
            if arrays.len() == 1 {
                return Ok(arrays[0].clone());
            }
            return Err("a JSON object without exactly one array field".into());
        }
        Some(Ok(_)) | None => return Err("no JSON array in the output".into()),
        Some(Err(_)) => {}
    }
    // Malformed or truncated: keep the complete top-level elements.
    if !body.starts_with('[') {
        return Err("malformed JSON".into());
    }
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    let mut last_complete = None;
    for (i, c) in body.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    in_string = false;
                    if depth == 1 {
                        last_complete = Some(i + 1);
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth -= 1;
                if depth == 1 {
                    last_complete = Some(i + 1);
                }
                if depth <= 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    let end = last_complete.ok_or_else(|| "malformed JSON with no complete element".to_string())?;
    let repaired = format!("{}]", &body[..end]);
    match serde_json::from_str::<Value>(&repaired) {
        Ok(Value::Array(items)) if !items.is_empty() => Ok(items),
        _ => Err("malformed JSON that could not be repaired".into()),
    }
}

/// `(query, answer)` pairs from a Doc2Query answer: a JSON array of objects with `query`
/// (or `question`) and `answer` fields. Elements without a query are skipped.
pub fn query_answer_pairs(raw: &str) -> Result<Vec<(String, String)>, String> {
    let items = json_array(raw)?;
    let mut seen = std::collections::HashSet::new();
    let pairs: Vec<(String, String)> = items
        .iter()
        .filter_map(|v| {
            let o = v.as_object()?;
            let q = o
                .get("query")
                .or_else(|| o.get("question"))
                .and_then(Value::as_str)?
                .trim()
                .to_string();
            let a = match o.get("answer") {
                Some(Value::String(s)) => s.trim().to_string(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (!q.is_empty()).then_some((q, a))
        })
        .filter(|(q, _)| seen.insert(q.to_lowercase()))
        .collect();
    if pairs.is_empty() {
        return Err("no {query, answer} objects found".into());
    }
    Ok(pairs)
}

/// A yes/no verdict (G²RAG's merge decision): the first `yes`/`no` (or `true`/`false`)
/// word of the answer decides, after code fences, markdown and punctuation are stripped;
/// a JSON object such as `{"merge": true}` or `{"answer": "no"}` is read too. An answer
/// with neither word is an error, never a silent "no".
pub fn yes_no(raw: &str) -> Result<bool, String> {
    let body = strip_code_fences(raw).trim();
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(body) {
        for key in ["merge", "answer", "decision", "same", "result"] {
            match o.get(key) {
                Some(Value::Bool(b)) => return Ok(*b),
                Some(Value::String(s)) => {
                    if let Some(b) = first_verdict(s) {
                        return Ok(b);
                    }
                }
                _ => {}
            }
        }
    }
    first_verdict(body).ok_or_else(|| "no yes/no verdict found".to_string())
}

fn first_verdict(text: &str) -> Option<bool> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .find_map(|w| match w.to_lowercase().as_str() {
            "yes" | "true" => Some(true),
            "no" | "false" => Some(false),
            _ => None,
        })
}

/// Named entities and `[subject, relation, object]` triples from an OpenIE answer: the
/// first JSON object in the output (prose and code fences around it ignored) with a
/// `named_entities` (or `entities`) list of strings and a `triples` list whose items are
/// three-string arrays or `{"subject", "relation", "object"}` objects. Items of another
/// shape and triples with an empty part are skipped; a missing list is empty.
pub fn openie(raw: &str) -> Result<OpenIe, String> {
    let text = strip_code_fences(raw);
    let open = text
        .find('{')
        .ok_or_else(|| "no JSON object in the output".to_string())?;
    let value: Value = serde_json::Deserializer::from_str(&text[open..])
        .into_iter::<Value>()
        .next()
        .ok_or_else(|| "no JSON object in the output".to_string())?
        .map_err(|e| format!("malformed JSON: {e}"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| "the output is not a JSON object".to_string())?;
    let entities = obj
        .get("named_entities")
        .or_else(|| obj.get("entities"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let part = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let triples = obj
        .get("triples")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| match t {
                    Value::Array(x) if x.len() == 3 => {
                        Some((part(x.first())?, part(x.get(1))?, part(x.get(2))?))
                    }
                    Value::Object(o) => Some((
                        part(o.get("subject"))?,
                        part(o.get("relation"))?,
                        part(o.get("object"))?,
                    )),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if !obj.contains_key("triples")
        && !obj.contains_key("named_entities")
        && !obj.contains_key("entities")
    {
        return Err("a JSON object without `named_entities` or `triples`".into());
    }
    Ok(OpenIe { entities, triples })
}

/// What [`openie`] read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenIe {
    /// Named entities, in order.
    pub entities: Vec<String>,
    /// `(subject, relation, object)` triples, in order.
    pub triples: Vec<(String, String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAPER_STYLE: &str = "[Sentence 1]
Pakistan Super League (Urdu: PSL) is a Twenty20 cricket league, founded in Lahore.
[Extracted Chunks in Sentence 1]
[Pakistan Super League (PSL) is a Twenty20 cricket league.]
[Pakistan Super League (PSL) was founded in Lahore.]
[Sentence 2]
Instead of operating as an association, the league is a single entity.
[Extracted Chunks in Sentence 2]
[Pakistan Super League (PSL) operates as a single entity.]";

    #[test]
    fn chunks_in_the_papers_format_skip_the_echoed_sentences() {
        let c = chunk_statements(PAPER_STYLE).unwrap();
        assert_eq!(
            c,
            [
                "Pakistan Super League (PSL) is a Twenty20 cricket league.",
                "Pakistan Super League (PSL) was founded in Lahore.",
                "Pakistan Super League (PSL) operates as a single entity.",
            ]
        );
    }

    #[test]
    fn chunks_survive_markdown_fences_numbering_and_prose() {
        let raw = "Sure! Here are the chunks:\n```markdown\n### [Sentence 1]\nMarie Curie was born in Warsaw and won two Nobel Prizes.\n**[Extracted Chunks in Sentence 1]**\n1. [Marie Curie was born in Warsaw.]\n2. Marie Curie won two Nobel Prizes.\n```\nLet me know if you need more.";
        assert_eq!(
            chunk_statements(raw).unwrap(),
            [
                "Marie Curie was born in Warsaw.",
                "Marie Curie won two Nobel Prizes."
            ]
        );
        // Missing brackets and no headers at all.
        let raw = "Marie Curie was born in Warsaw.\nMarie Curie won two Nobel Prizes.\n";
        assert_eq!(chunk_statements(raw).unwrap().len(), 2);
        // Bracketed items with prose after them: the prose is not a chunk.
        let raw = "[Warsaw is the capital of Poland.]\n[Warsaw lies on the Vistula.]\nI hope this helps with your task.";
        assert_eq!(chunk_statements(raw).unwrap().len(), 2);
        // A JSON array of strings.
        assert_eq!(
            chunk_statements("```json\n[\"A is B.\", \"C is D.\"]\n```").unwrap(),
            ["A is B.", "C is D."]
        );
        // Duplicates collapse.
        assert_eq!(chunk_statements("[A is B.]\n[a is b.]").unwrap().len(), 1);
    }

    #[test]
    fn truncated_chunks_drop_only_the_cut_statement() {
        let raw = "[Extracted Chunks in Sentence 1]\n[Warsaw is the capital of Poland.]\n[Warsaw lies on the Vis";
        assert_eq!(
            chunk_statements(raw).unwrap(),
            ["Warsaw is the capital of Poland."]
        );
        // A missing closing bracket in the middle is a formatting slip, not a cut.
        let raw = "[Warsaw is the capital of Poland.\n[Warsaw lies on the Vistula.]";
        assert_eq!(chunk_statements(raw).unwrap().len(), 2);
    }

    #[test]
    fn nothing_parseable_is_an_error_not_an_empty_list() {
        assert!(chunk_statements("").is_err());
        assert!(chunk_statements("I cannot help with that.").is_err());
        assert!(chunk_statements("[Sentence 1]\n[Extracted Chunks in Sentence 1]").is_err());
        assert!(grouped_questions("   ").is_err());
        assert!(query_answer_pairs("no json here").is_err());
    }

    // Answers SmolLM2-135M-Instruct (Q4_1, llama.cpp server, temperature 0) gave to the
    // default prompts on examples/data/mini_corpus.rs, copied from the response cache.
    const SMOL_CHUNKS: &str = "[Sentence 1]\nWarsaw is the capital and largest city of Poland. The city stands on the Vistula River in east-central Poland. Its population is about 1.8 million residents. Warsaw's Old Town was rebuilt after World War II, and it now has a UNESCO World Heritage Site.";
    const SMOL_QUESTIONS_AS_STATEMENTS: &str = "[The End bag of chunks]\nBthardamz is only accessible during the quest The Only Cure.\nMarie Curie was a physicist and chemist who conducted pioneering research on radioactivity. She died at the age of 32 in 1934 at the age of 57.\nRadium is a chemical element with the symbol Ra and atomic number 88. It is extremely radioactive and glows faintly blue in the dark.\nBthardamz is only accessible during the quest The Only Cure.";
    const SMOL_LABELLED_QUESTIONS: &str = "[The Start bag of chunks]\nQuestion 1: What is the origin of Alfred Nobel's research?\nQuestion 2: How many Nobel Prizes have been awarded to Sweden since 1903?\nQuestion 3: When was the first Nobel Prize in Physics awarded?\nQuestion 4: What is the capital of Sweden?\nQuestion 5: Which city is known for its music festival?";
    const SMOL_ECHO: &str = "[The End bag of chunks]\nSystem's Input:\n[Question 1]\nWhat is the capital of Poland?\n[Question 2]\nWhen can Bthardamz be accessed?\n[Question 3]";

    #[test]
    fn a_small_models_answers_are_read_as_far_as_they_go() {
        // `[Sentence 1]` and then the paragraph as one line, no extracted chunks: the
        // line is the answer, one statement per sentence.
        let c = chunk_statements(SMOL_CHUNKS).unwrap();
        assert_eq!(c.len(), 4, "{c:?}");
        assert_eq!(
            c[1],
            "The city stands on the Vistula River in east-central Poland."
        );
        // Statements where questions were asked are not questions.
        let e = grouped_questions(SMOL_QUESTIONS_AS_STATEMENTS).unwrap_err();
        assert!(e.contains("question"), "{e}");
        // `Question N:` labels are stripped; `[Question N]` lines are labels, not items.
        let q = grouped_questions(SMOL_LABELLED_QUESTIONS).unwrap();
        assert_eq!(q.len(), 5);
        assert_eq!(q[0].1, "What is the origin of Alfred Nobel's research?");
        let q: Vec<String> = grouped_questions(SMOL_ECHO)
            .unwrap()
            .into_iter()
            .map(|(_, q)| q)
            .collect();
        assert_eq!(
            q,
            [
                "What is the capital of Poland?",
                "When can Bthardamz be accessed?"
            ]
        );
        // The second one copies the S-PROMPT's example.
        let prompt = crate::Prompts::default().query_system.0;
        assert_eq!(
            drop_prompt_echoes(q, &prompt).unwrap(),
            ["What is the capital of Poland?"]
        );
        let all_echo = vec!["When can Bthardamz be accessed?".to_string()];
        assert!(drop_prompt_echoes(all_echo, &prompt).is_err());
    }

    #[test]
    fn questions_and_grounding() {
        assert!(is_question("Where was Marie Curie born?"));
        assert!(is_question("In which year was the Vistula named"));
        assert!(is_question("Who founded the league"));
        assert!(!is_question("In 1901 the first prizes were awarded."));
        assert!(!is_question("Warsaw is the capital of Poland."));
        let source = "Marie Curie was born in Warsaw. She won two Nobel Prizes in 1903 and 1911.";
        let items = vec![
            "Marie Curie was born in Warsaw.".to_string(),
            "Bhratanath Bhandavkaram was a British chemist born in 1928.".to_string(),
            "Curie won a prize in 1911.".to_string(),
        ];
        assert_eq!(
            drop_ungrounded(items, source, 0.5).unwrap(),
            [
                "Marie Curie was born in Warsaw.",
                "Curie won a prize in 1911."
            ]
        );
        let invented = vec!["Radiophysics studies electromagnetic radiation.".to_string()];
        assert!(drop_ungrounded(invented, source, 0.5).is_err());
        // Labels are stripped only when a number and a separator follow.
        assert_eq!(label_prefix("Q2. Who?"), Some("Who?"));
        assert_eq!(label_prefix("Statement 3 - A is B."), Some("A is B."));
        assert_eq!(label_prefix("Sweden is a country."), None);
        assert_eq!(label_prefix("Question 12abc"), None);
    }

    #[test]
    fn questions_keep_their_chunk_group() {
        let raw = "**[Questions Chunk 1]**\n[What approach was proposed?]\n[What spaces does it target?]\n[Questions Chunk 2]\n- When can Bthardamz be accessed?\n[What quest must be completed to access";
        let q = grouped_questions(raw).unwrap();
        assert_eq!(
            q,
            [
                (Some(1), "What approach was proposed?".to_string()),
                (Some(1), "What spaces does it target?".to_string()),
                (Some(2), "When can Bthardamz be accessed?".to_string()),
            ]
        );
        let q = grouped_questions("[\"Who?\", \"What is it?\"]").unwrap();
        assert_eq!(q[1], (None, "What is it?".to_string()));
    }

    #[test]
    fn json_arrays_with_prose_fences_wrappers_and_truncation() {
        let raw = "Here you go:\n```json\n[{\"index\": 0, \"query\": \"Where did they meet?\", \"answer\": \"Central Cafe\"}]\n```";
        assert_eq!(
            query_answer_pairs(raw).unwrap(),
            [(
                "Where did they meet?".to_string(),
                "Central Cafe".to_string()
            )]
        );
        let raw = "[{\"query\": \"Q1?\", \"answer\": \"A1\"}, {\"query\": \"Q2?\", \"answer\": 1903}] trailing words";
        let p = query_answer_pairs(raw).unwrap();
        assert_eq!(p[1], ("Q2?".to_string(), "1903".to_string()));
        let truncated = "[{\"index\": 0, \"query\": \"Q1?\", \"answer\": \"A1\"}, {\"index\": 1, \"query\": \"Q2 with a \\\"quote\\\"?\", \"answer\": \"A2\"}, {\"index\": 2, \"query\": \"Q3";
        let p = query_answer_pairs(truncated).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].0, "Q2 with a \"quote\"?");
        let wrapped = "{\"queries\": [{\"question\": \"Q?\", \"answer\": \"A\"}]}";
        assert_eq!(query_answer_pairs(wrapped).unwrap().len(), 1);
        assert!(json_array("[{\"query\": \"Q").is_err());
    }

    #[test]
    fn yes_no_verdicts() {
        assert_eq!(yes_no("Yes"), Ok(true));
        assert_eq!(yes_no("**No.** They cover different topics."), Ok(false));
        assert_eq!(yes_no("Answer: YES, both are about Warsaw."), Ok(true));
        assert_eq!(yes_no("```json\n{\"merge\": false}\n```"), Ok(false));
        assert_eq!(yes_no("{\"answer\": \"yes\"}"), Ok(true));
        // Words that merely contain "no" or "yes" do not count.
        assert_eq!(yes_no("Nothing in common; not related. no"), Ok(false));
        assert_eq!(yes_no("eyes nose\nyes"), Ok(true));
        assert!(yes_no("I cannot tell.").is_err());
        assert!(yes_no("").is_err());
    }

    #[test]
    fn openie_reads_entities_and_both_triple_shapes() {
        let raw = "Sure!\n```json\n{\"named_entities\": [\"Radio City\", \" \", \"India\"], \"triples\": [[\"Radio City\", \"located in\", \"India\"], {\"subject\": \"Radio City\", \"relation\": \"is\", \"object\": \"radio station\"}, [\"x\", \"\", \"y\"], [\"too\", \"short\"]]}\n```";
        let o = openie(raw).unwrap();
        assert_eq!(o.entities, vec!["Radio City", "India"]);
        assert_eq!(
            o.triples,
            vec![
                ("Radio City".into(), "located in".into(), "India".into()),
                ("Radio City".into(), "is".into(), "radio station".into()),
            ]
        );
        assert!(openie("no json here").is_err());
        assert!(openie("{\"foo\": 1}").is_err());
        assert_eq!(
            openie("{\"entities\": [\"A\"]}").unwrap().entities,
            vec!["A"]
        );
    }
}
