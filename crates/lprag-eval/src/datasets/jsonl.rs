//! The generic JSONL format for users' own data.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use lprag_core::Document;
use serde_json::Value;

use super::json::{self, idx, opt, Rec};
use super::{stem_name, Dataset, DatasetFormat, Question};
use crate::{Error, Result};

/// Load the generic JSONL format: one JSON object per line, blank lines ignored.
///
/// **`corpus.jsonl`**: `{"id": "d1", "title": "...", "text": "...", "metadata": {...}}`.
/// `text` is required; `id` (string or integer) defaults to the 0-based line index and
/// must be unique; `title` defaults to `""`; `metadata` is an optional object of strings.
/// Documents keep these ids ([`Document::id`]); no duplicate detection is done.
///
/// **`questions.jsonl`**: `{"id": "q1", "question": "...", "answer": "..." or [...],
/// "answer_aliases": [...], "gold": ["d1", "d7"]}`. `question` is required; `gold` lists
/// corpus ids (strings or integers) and is optional (a question without it counts in
/// latency and tokens, not in Recall@k). A `gold` id that is not in the corpus is an error.
///
/// Errors name the file, the record (the 0-based line index) and the field.
pub fn load_jsonl(questions: impl AsRef<Path>, corpus: impl AsRef<Path>) -> Result<Dataset> {
    let (q_path, c_path) = (questions.as_ref(), corpus.as_ref());
    let corpus = read_corpus(c_path)?;
    let ids: HashMap<&str, usize> = corpus
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.as_str(), i))
        .collect();
    let mut questions = Vec::new();
    for (line, v) in lines(q_path)? {
        let rec = Rec::new(q_path, line);
        let obj = rec.object(&v, "")?;
        let id = match opt(obj, "id") {
            Some(v) => rec.id(v, "id")?,
            None => line.to_string(),
        };
        let question = rec.req_str(obj, "", "question")?.to_string();
        let mut answers = match opt(obj, "answer") {
            Some(a) => rec.answers(a, "answer")?,
            None => Vec::new(),
        };
        if let Some(a) = opt(obj, "answer_aliases") {
            answers.extend(rec.strings(a, "answer_aliases")?);
        }
        let mut gold = Vec::new();
        if let Some(g) = opt(obj, "gold") {
            for (i, g) in rec.list(g, "gold")?.iter().enumerate() {
                let field = idx("gold", i);
                let gid = rec.id(g, &field)?;
                let Some(&at) = ids.get(gid.as_str()) else {
                    return Err(rec.err(
                        &field,
                        format!("document id `{gid}` is not in {}", c_path.display()),
                    ));
                };
                if !gold.contains(&at) {
                    gold.push(at);
                }
            }
        }
        gold.sort_unstable();
        questions.push(Question {
            id,
            question,
            answers,
            gold,
            grades: Vec::new(),
            unmatched_gold: Vec::new(),
            metadata: BTreeMap::new(),
        });
    }
    Ok(Dataset {
        name: stem_name(q_path),
        format: DatasetFormat::Jsonl,
        corpus,
        questions,
        duplicates_dropped: 0,
    })
}

pub(crate) fn read_corpus(path: &Path) -> Result<Vec<Document>> {
    read_corpus_with(path, "id", false)
}

/// [`read_corpus`] with the id under `id_key` (BEIR writes `_id`); with `any_metadata`,
/// metadata values that are not strings are kept as JSON text (BEIR has numbers and
/// lists there) instead of refused.
pub(crate) fn read_corpus_with(
    path: &Path,
    id_key: &str,
    any_metadata: bool,
) -> Result<Vec<Document>> {
    let mut docs = Vec::new();
    let mut seen = HashSet::new();
    for (line, v) in lines(path)? {
        let rec = Rec::new(path, line);
        let obj = rec.object(&v, "")?;
        let id = match opt(obj, id_key) {
            Some(v) => rec.id(v, id_key)?,
            None => line.to_string(),
        };
        if !seen.insert(id.clone()) {
            return Err(rec.err(id_key, format!("duplicate document id `{id}`")));
        }
        let title = rec.opt_str(obj, "", "title")?.unwrap_or("");
        let text = rec.req_str(obj, "", "text")?;
        let mut doc = Document::new(id, title, text);
        if let Some(m) = opt(obj, "metadata") {
            for (k, v) in rec.object(m, "metadata")? {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other if any_metadata => other.to_string(),
                    other => rec.str(other, &json::sub("metadata", k))?.to_string(),
                };
                doc.metadata.insert(k.clone(), v);
            }
        }
        doc.metadata.insert("source_index".into(), line.to_string());
        docs.push(doc);
    }
    Ok(docs)
}

/// The non-blank lines of a JSONL file, parsed, with their 0-based line index.
pub(crate) fn lines(path: &Path) -> Result<Vec<(usize, Value)>> {
    let text = json::read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Value>(l)
                .map(|v| (i, v))
                .map_err(|e| Error::Malformed {
                    path: path.to_path_buf(),
                    record: Some(i),
                    field: "(line)".into(),
                    message: format!("invalid JSON on line {}: {e}", i + 1),
                })
        })
        .collect()
}
