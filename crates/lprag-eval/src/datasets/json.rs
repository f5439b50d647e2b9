//! Field-aware helpers for reading JSON dataset records with precise error locations.

use std::fmt;
use std::path::Path;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// Read a whole file as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A top-level JSON value that is a list or an object, with object keys in file order
/// (serde_json's own `Map` sorts keys unless its `preserve_order` feature is on).
pub(crate) enum Top {
    /// `[ ... ]`
    List(Vec<Value>),
    /// `{ "key": value, ... }` in file order.
    Object(Vec<(String, Value)>),
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct TopVisitor;
        impl<'de> Visitor<'de> for TopVisitor {
            type Value = Top;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON list or object")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Top, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(v) = seq.next_element::<Value>()? {
                    out.push(v);
                }
                Ok(Top::List(out))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Top, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Top::Object(out))
            }
        }
        d.deserialize_any(TopVisitor)
    }
}

/// Parse `text` (the contents of `path`) as a top-level list or object.
pub(crate) fn parse_top(path: &Path, text: &str) -> Result<Top> {
    serde_json::from_str(text).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Parse `text` as a top-level list.
pub(crate) fn parse_list(path: &Path, text: &str) -> Result<Vec<Value>> {
    match parse_top(path, text)? {
        Top::List(v) => Ok(v),
        Top::Object(_) => Err(Error::Malformed {
            path: path.to_path_buf(),
            record: None,
            field: "(top level)".into(),
            message: "expected a list of records, found an object".into(),
        }),
    }
}

/// A short description of a JSON value's type for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `prefix.key`, or `key` when the prefix is empty.
pub(crate) fn sub(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// `prefix[i]`.
pub(crate) fn idx(prefix: &str, i: usize) -> String {
    format!("{prefix}[{i}]")
}

/// One record of one file: builds errors that name both.
#[derive(Clone, Copy)]
pub(crate) struct Rec<'a> {
    pub path: &'a Path,
    pub index: usize,
}

impl<'a> Rec<'a> {
    pub fn new(path: &'a Path, index: usize) -> Self {
        Self { path, index }
    }

    /// An [`Error::Malformed`] for `field` of this record.
    pub fn err(&self, field: &str, message: impl Into<String>) -> Error {
        Error::Malformed {
            path: self.path.to_path_buf(),
            record: Some(self.index),
            field: if field.is_empty() {
                "(record)".into()
            } else {
                field.to_string()
            },
            message: message.into(),
        }
    }

    fn expected(&self, field: &str, what: &str, v: &Value) -> Error {
        self.err(field, format!("expected {what}, found {}", kind(v)))
    }

    /// `v` as an object.
    pub fn object<'v>(&self, v: &'v Value, field: &str) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| self.expected(field, "an object", v))
    }

    /// `v` as a list.
    pub fn list<'v>(&self, v: &'v Value, field: &str) -> Result<&'v Vec<Value>> {
        v.as_array()
            .ok_or_else(|| self.expected(field, "a list", v))
    }

    /// `v` as a string.
    pub fn str<'v>(&self, v: &'v Value, field: &str) -> Result<&'v str> {
        v.as_str()
            .ok_or_else(|| self.expected(field, "a string", v))
    }

    /// `v` as a boolean.
    pub fn bool(&self, v: &Value, field: &str) -> Result<bool> {
        v.as_bool()
            .ok_or_else(|| self.expected(field, "true or false", v))
    }

    /// `v` as an identifier: a string, or an integer written in decimal.
    pub fn id(&self, v: &Value, field: &str) -> Result<String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
            _ => Err(self.expected(field, "a string or an integer", v)),
        }
    }

    /// `v` as a list of strings.
    pub fn strings(&self, v: &Value, field: &str) -> Result<Vec<String>> {
        self.list(v, field)?
            .iter()
            .enumerate()
            .map(|(i, s)| self.str(s, &idx(field, i)).map(str::to_string))
            .collect()
    }

    /// An answer field: a string, a number, or a list of strings.
    pub fn answers(&self, v: &Value, field: &str) -> Result<Vec<String>> {
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Number(n) => Ok(vec![n.to_string()]),
            Value::Array(_) => self.strings(v, field),
            _ => Err(self.expected(field, "a string or a list of strings", v)),
        }
    }

    /// A text given as a string or as a list of sentences (joined with [`join_sentences`]).
    pub fn text(&self, v: &Value, field: &str) -> Result<String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Array(_) => Ok(join_sentences(&self.strings(v, field)?)),
            _ => Err(self.expected(field, "a string or a list of sentences", v)),
        }
    }

    /// A required field of `obj` (`null` counts as missing).
    pub fn req<'v>(
        &self,
        obj: &'v Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Result<&'v Value> {
        opt(obj, key).ok_or_else(|| self.err(&sub(prefix, key), "missing"))
    }

    /// A required string field of `obj`.
    pub fn req_str<'v>(
        &self,
        obj: &'v Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Result<&'v str> {
        let v = self.req(obj, prefix, key)?;
        self.str(v, &sub(prefix, key))
    }

    /// An optional string field of `obj`.
    pub fn opt_str<'v>(
        &self,
        obj: &'v Map<String, Value>,
        prefix: &str,
        key: &str,
    ) -> Result<Option<&'v str>> {
        opt(obj, key)
            .map(|v| self.str(v, &sub(prefix, key)))
            .transpose()
    }
}

/// An optional field of `obj` (`null` counts as missing).
pub(crate) fn opt<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// The first of `keys` present in `obj`, with its name.
pub(crate) fn first_of<'v>(
    obj: &'v Map<String, Value>,
    keys: &[&'static str],
) -> Option<(&'static str, &'v Value)> {
    keys.iter().find_map(|&k| opt(obj, k).map(|v| (k, v)))
}

/// Join a list of sentences into one text.
///
/// Sentences are concatenated as they are when the next one starts with whitespace (or the
/// previous one ends with it), else with one space. This reproduces both conventions of the
/// HippoRAG family: HotpotQA sentences carry their leading space (`"".join`), 2Wiki
/// sentences do not (`" ".join`).
pub fn join_sentences<S: AsRef<str>>(sentences: &[S]) -> String {
    let mut out = String::new();
    for s in sentences {
        let s = s.as_ref();
        let glue = !out.is_empty()
            && !s.is_empty()
            && !s.starts_with(char::is_whitespace)
            && !out.ends_with(char::is_whitespace);
        if glue {
            out.push(' ');
        }
        out.push_str(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_both_sentence_conventions() {
        assert_eq!(join_sentences(&["A b.", " C d."]), "A b. C d.");
        assert_eq!(join_sentences(&["A b.", "C d."]), "A b. C d.");
        assert_eq!(join_sentences(&["A b. ", "C d."]), "A b. C d.");
        assert_eq!(join_sentences::<&str>(&[]), "");
        assert_eq!(join_sentences(&["", "x"]), "x");
    }

    #[test]
    fn object_keys_keep_file_order() {
        let Top::Object(v) = parse_top(Path::new("x"), r#"{"b": 1, "a": 2}"#).unwrap() else {
            panic!("expected an object")
        };
        assert_eq!(v[0].0, "b");
        assert_eq!(v[1].0, "a");
        assert!(parse_top(Path::new("x"), "3").is_err());
    }
}
