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
    let rest = rest.trim_end_matches(',').trim();
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
    for (i, line) in lines.iter().enumerate() {
        let l = clean_line(line);
        match header(l) {
            Some(Header::Sentence) => {
                in_sentence = true;
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
        section_items(free)
    };
    let items = dedup(items);
    if items.is_empty() {
        return Err("no chunk statements found".into());
    }
    Ok(items)
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
    let out: Vec<(Option<usize>, String)> = sections
        .into_iter()
        .flat_map(|(g, items)| section_items(items).into_iter().map(move |q| (g, q)))
        .filter(|(_, q)| seen.insert(q.to_lowercase()))
        .collect();
    if out.is_empty() {
        return Err("no questions found".into());
    }
    Ok(out)
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
        assert!(chunk_statements("[Sentence 1]\nOnly the echo.").is_err());
        assert!(grouped_questions("   ").is_err());
        assert!(query_answer_pairs("no json here").is_err());
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
