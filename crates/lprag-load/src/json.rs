//! JSON and JSON Lines records.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Fields that hold a record's text, in order of preference.
pub(crate) const TEXT_FIELDS: &[&str] = &["text", "content", "body"];

/// One record, ready to become a document.
#[derive(Debug)]
pub(crate) struct Record {
    /// The record's `id` (string or number) when it has one, else its index.
    pub key: String,
    /// The record's `title` field, if any.
    pub title: Option<String>,
    /// The text field.
    pub text: String,
    /// The record's other scalar fields, stringified.
    pub metadata: BTreeMap<String, String>,
}

/// What a record that could not be used was.
#[derive(Debug)]
pub(crate) struct BadRecord {
    /// Why, naming the record (and the line for JSON Lines).
    pub reason: String,
    /// `false` when nothing was lost (an empty text), `true` when the input is malformed.
    pub malformed: bool,
}

/// The records of a file, in order; `Err` for the whole file when it is not JSON of the
/// expected shape.
pub(crate) type Records = Vec<Result<Record, BadRecord>>;

/// Parse a `.json` file: an array of records or one record.
pub(crate) fn parse_json(text: &str, max_records: usize) -> Result<(Records, bool), String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    match value {
        Value::Array(items) => {
            let truncated = items.len() > max_records;
            let records = items
                .into_iter()
                .take(max_records)
                .enumerate()
                .map(|(i, v)| record(i, v, None, false))
                .collect();
            Ok((records, truncated))
        }
        v @ Value::Object(_) => Ok((vec![record(0, v, None, false)], false)),
        other => Err(format!(
            "not a record or an array of records (the top-level value is {})",
            kind(&other)
        )),
    }
}

/// Parse a `.jsonl` file: one record a line, blank lines skipped.
pub(crate) fn parse_jsonl(text: &str, max_records: usize) -> (Records, bool) {
    let mut records = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if records.len() == max_records {
            return (records, true);
        }
        let i = records.len();
        let r = match serde_json::from_str::<Value>(line) {
            Ok(v) => record(i, v, Some(line_no + 1), false),
            Err(e) => Err(BadRecord {
                reason: format!("record {i} (line {}): invalid JSON: {e}", line_no + 1),
                malformed: true,
            }),
        };
        records.push(r);
    }
    (records, false)
}

/// Record `index` (at 1-based `line` of a JSON Lines file), or why it cannot be one; with
/// `keep_empty`, a record whose text is empty is kept (a document that chunks to nothing).
pub(crate) fn record(
    index: usize,
    value: Value,
    line: Option<usize>,
    keep_empty: bool,
) -> Result<Record, BadRecord> {
    let at = match line {
        Some(l) => format!("record {index} (line {l})"),
        None => format!("record {index}"),
    };
    let Value::Object(mut map) = value else {
        return Err(BadRecord {
            reason: format!("{at}: not an object but {}", kind(&value)),
            malformed: true,
        });
    };
    let Some((field, text)) = take_text(&mut map) else {
        return Err(BadRecord {
            reason: format!("{at}: no text field (one of {})", TEXT_FIELDS.join(", ")),
            malformed: true,
        });
    };
    if text.trim().is_empty() && !keep_empty {
        return Err(BadRecord {
            reason: format!("{at}: the {field} field is empty"),
            malformed: false,
        });
    }
    let key = match map.remove("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(Value::Number(n)) => n.to_string(),
        _ => index.to_string(),
    };
    let title = map.remove("title").and_then(|v| scalar(&v));
    let metadata = map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
        .collect();
    Ok(Record {
        key,
        title,
        text,
        metadata,
    })
}

/// Remove and return the first text field that holds a string.
fn take_text(map: &mut Map<String, Value>) -> Option<(&'static str, String)> {
    for &f in TEXT_FIELDS {
        if let Some(Value::String(_)) = map.get(f) {
            if let Some(Value::String(s)) = map.remove(f) {
                return Some((f, s));
            }
        }
    }
    None
}

/// A scalar as a string; `None` for null, arrays and objects.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_fields() {
        let (r, cut) = parse_json(
            r#"[{"id": "a1", "title": "T", "text": "hello", "year": 2020, "tags": ["x"], "ok": true, "n": null},
                {"content": "second"}, {"body": ""}, 7, {"other": "x"}]"#,
            10,
        )
        .unwrap();
        assert!(!cut);
        let first = r[0].as_ref().unwrap();
        assert_eq!(
            (
                first.key.as_str(),
                first.title.as_deref(),
                first.text.as_str()
            ),
            ("a1", Some("T"), "hello")
        );
        assert_eq!(first.metadata.len(), 2);
        assert_eq!(first.metadata["year"], "2020");
        assert_eq!(first.metadata["ok"], "true");
        assert_eq!(r[1].as_ref().unwrap().key, "1");
        assert!(!r[2].as_ref().unwrap_err().malformed);
        assert!(r[3]
            .as_ref()
            .unwrap_err()
            .reason
            .contains("record 3: not an object"));
        assert!(r[4].as_ref().unwrap_err().reason.contains("no text field"));
        assert!(parse_json("\"x\"", 10).unwrap_err().contains("a string"));
        assert!(parse_json("{", 10).unwrap_err().starts_with("invalid JSON"));
        let (one, _) = parse_json(r#"{"text": "only", "id": 5}"#, 10).unwrap();
        assert_eq!(one[0].as_ref().unwrap().key, "5");
    }

    #[test]
    fn json_lines_and_limits() {
        let (r, cut) = parse_jsonl("{\"text\": \"a\"}\n\n{bad\n{\"text\": \"c\"}\n", 10);
        assert!(!cut);
        assert_eq!(r.len(), 3);
        assert!(r[1]
            .as_ref()
            .unwrap_err()
            .reason
            .starts_with("record 1 (line 3): invalid JSON"));
        let (r, cut) = parse_jsonl("{\"text\": \"a\"}\n{\"text\": \"b\"}\n", 1);
        assert!(cut);
        assert_eq!(r.len(), 1);
        let (r, cut) = parse_json("[{\"text\": \"a\"}, {\"text\": \"b\"}]", 1).unwrap();
        assert!(cut && r.len() == 1);
    }

    #[test]
    fn deep_json_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(parse_json(&deep, 10).unwrap_err().contains("recursion"));
        let (r, _) = parse_jsonl(&deep, 10);
        assert!(r[0].is_err());
    }
}
