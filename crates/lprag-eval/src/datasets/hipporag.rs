//! The HippoRAG file family: MuSiQue, HotpotQA, 2WikiMultihopQA.

use std::collections::BTreeMap;
use std::path::Path;

use lprag_core::Document;
use serde_json::{Map, Value};

use super::json::{self, first_of, idx, opt, sub, Rec, Top};
use super::{stem_name, CorpusBuilder, Dataset, DatasetFormat, GoldSet, Question};
use crate::Result;

/// Load a HippoRAG-format dataset: a questions file and a corpus file.
///
/// **Questions**: a JSON list of objects with
/// - `id` or `_id` (string or integer; default: the record index),
/// - `question` (string, required),
/// - `answer` (string, number or list of strings; optional) and `answer_aliases`
///   (list of strings; optional),
/// - the gold passages, in one of these forms:
///   - MuSiQue: `paragraphs` (or `contexts`), a list of `{title, paragraph_text | text,
///     is_supporting}`; gold = entries whose `is_supporting` is not `false` (a missing
///     flag counts as supporting, as in HippoRAG's evaluation code);
///   - HotpotQA / 2Wiki: `context` as `[[title, [sentences]]]` (or the Hugging Face form
///     `{"title": [...], "sentences": [[...]]}`) and `supporting_facts` as
///     `[[title, sentence_index]]` (or `{"title": [...], "sent_id": [...]}`); gold = the
///     context paragraphs whose title appears in `supporting_facts`, their sentences
///     joined with [`join_sentences`](super::join_sentences). A supporting title missing
///     from `context` is looked up in the corpus by title (when exactly one entry has it).
///
/// **Corpus**: either a list of `{title, text | paragraph_text}` objects (`text` may be a
/// list of sentences) or `[title, sentences]` pairs, or an object mapping title → text or
/// title → list of sentences.
///
/// See the [module documentation](super) for gold matching and duplicates.
pub fn load_hipporag(questions: impl AsRef<Path>, corpus: impl AsRef<Path>) -> Result<Dataset> {
    let q_path = questions.as_ref();
    let text = json::read_text(q_path)?;
    let records = json::parse_list(q_path, &text)?;
    from_records(q_path, &records, corpus.as_ref())
}

/// Load only a HippoRAG-format corpus file (see [`load_hipporag`] for its forms), with
/// duplicates dropped and ids `"0"`, `"1"`, ... as in a [`Dataset`].
pub fn load_hipporag_corpus(corpus: impl AsRef<Path>) -> Result<Vec<Document>> {
    Ok(read_corpus(corpus.as_ref())?.finish().0)
}

pub(crate) fn from_records(q_path: &Path, records: &[Value], c_path: &Path) -> Result<Dataset> {
    let corpus = read_corpus(c_path)?;
    let questions = records
        .iter()
        .enumerate()
        .map(|(i, v)| parse_question(Rec::new(q_path, i), v, &corpus))
        .collect::<Result<Vec<_>>>()?;
    let (corpus, duplicates_dropped) = corpus.finish();
    Ok(Dataset {
        name: stem_name(q_path),
        format: DatasetFormat::HippoRag,
        corpus,
        questions,
        duplicates_dropped,
    })
}

const TEXT_KEYS: &[&str] = &["text", "paragraph_text", "sentences"];

fn read_corpus(path: &Path) -> Result<CorpusBuilder> {
    let text = json::read_text(path)?;
    let mut corpus = CorpusBuilder::new();
    match json::parse_top(path, &text)? {
        Top::List(items) => {
            for (i, v) in items.iter().enumerate() {
                let rec = Rec::new(path, i);
                let (title, text) = match v {
                    Value::Object(o) => {
                        let title = rec.opt_str(o, "", "title")?.unwrap_or("").to_string();
                        let Some((key, t)) = first_of(o, TEXT_KEYS) else {
                            return Err(
                                rec.err("text", "missing (expected `text` or `paragraph_text`)")
                            );
                        };
                        (title, rec.text(t, key)?)
                    }
                    Value::Array(pair) => title_and_sentences(&rec, pair, "")?,
                    other => {
                        return Err(rec.err(
                            "",
                            format!(
                                "expected an object or a [title, text] pair, found {}",
                                json::kind(other)
                            ),
                        ))
                    }
                };
                corpus.push(i, title, text, BTreeMap::new());
            }
        }
        Top::Object(entries) => {
            for (i, (title, v)) in entries.into_iter().enumerate() {
                let rec = Rec::new(path, i);
                let text = rec.text(&v, &title)?;
                corpus.push(i, title, text, BTreeMap::new());
            }
        }
    }
    Ok(corpus)
}

/// `[title, text-or-sentences]` at `field`.
fn title_and_sentences(rec: &Rec, pair: &[Value], field: &str) -> Result<(String, String)> {
    if pair.len() != 2 {
        return Err(rec.err(
            field,
            format!(
                "expected a [title, sentences] pair, found a list of {}",
                pair.len()
            ),
        ));
    }
    let title = rec.str(&pair[0], &idx(field, 0))?.to_string();
    let text = rec.text(&pair[1], &idx(field, 1))?;
    Ok((title, text))
}

fn parse_question(rec: Rec, v: &Value, corpus: &CorpusBuilder) -> Result<Question> {
    let obj = rec.object(v, "")?;
    let id = match first_of(obj, &["id", "_id"]) {
        Some((k, v)) => rec.id(v, k)?,
        None => rec.index.to_string(),
    };
    let question = rec.req_str(obj, "", "question")?.to_string();
    let mut answers = match opt(obj, "answer") {
        Some(a) => rec.answers(a, "answer")?,
        None => Vec::new(),
    };
    if let Some(a) = opt(obj, "answer_aliases") {
        answers.extend(rec.strings(a, "answer_aliases")?);
    }
    let mut gold = GoldSet::default();
    if let Some((key, paragraphs)) = first_of(obj, &["paragraphs", "contexts"]) {
        for (i, p) in rec.list(paragraphs, key)?.iter().enumerate() {
            let field = idx(key, i);
            let p = rec.object(p, &field)?;
            let supporting = match opt(p, "is_supporting") {
                Some(b) => rec.bool(b, &sub(&field, "is_supporting"))?,
                None => true,
            };
            let title = rec.req_str(p, &field, "title")?;
            let Some((tkey, t)) = first_of(p, &["paragraph_text", "text"]) else {
                return Err(rec.err(
                    &sub(&field, "paragraph_text"),
                    "missing (expected `paragraph_text` or `text`)",
                ));
            };
            let text = rec.str(t, &sub(&field, tkey))?;
            if supporting {
                gold.add(corpus.match_passage(title, text), title);
            }
        }
    } else if let Some(context) = opt(obj, "context") {
        let context = parse_context(&rec, context)?;
        let Some(facts) = opt(obj, "supporting_facts") else {
            return Err(rec.err("supporting_facts", "missing (required with `context`)"));
        };
        for title in supporting_titles(&rec, facts)? {
            let found = match context.iter().find(|(t, _)| *t == title) {
                Some((t, text)) => corpus.match_passage(t, text),
                None => corpus.match_unique_title(&title),
            };
            gold.add(found, &title);
        }
    } else {
        return Err(rec.err(
            "paragraphs",
            "missing (expected `paragraphs`, `contexts`, or `context` with `supporting_facts`)",
        ));
    }
    let (gold, unmatched_gold) = gold.finish();
    Ok(Question {
        id,
        question,
        answers,
        gold,
        grades: Vec::new(),
        unmatched_gold,
        metadata: BTreeMap::new(),
    })
}

/// HotpotQA / 2Wiki `context`: `[[title, sentences]]` or `{"title": [..], "sentences": [[..]]}`.
fn parse_context(rec: &Rec, v: &Value) -> Result<Vec<(String, String)>> {
    match v {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let field = idx("context", i);
                match item {
                    Value::Array(pair) => title_and_sentences(rec, pair, &field),
                    Value::Object(o) => {
                        let title = rec.req_str(o, &field, "title")?.to_string();
                        let Some((key, t)) = first_of(o, TEXT_KEYS) else {
                            return Err(rec.err(&sub(&field, "sentences"), "missing"));
                        };
                        Ok((title, rec.text(t, &sub(&field, key))?))
                    }
                    other => Err(rec.err(
                        &field,
                        format!(
                            "expected a [title, sentences] pair, found {}",
                            json::kind(other)
                        ),
                    )),
                }
            })
            .collect(),
        Value::Object(o) => {
            let (titles, sentences) = columns(rec, o, "context", "sentences")?;
            titles
                .iter()
                .zip(sentences)
                .enumerate()
                .map(|(i, (t, s))| {
                    let title = rec.str(t, &idx("context.title", i))?.to_string();
                    Ok((title, rec.text(s, &idx("context.sentences", i))?))
                })
                .collect()
        }
        other => Err(rec.err(
            "context",
            format!(
                "expected a list of [title, sentences] pairs, found {}",
                json::kind(other)
            ),
        )),
    }
}

/// The Hugging Face column form: `{"title": [...], second: [...]}` of equal lengths.
fn columns<'v>(
    rec: &Rec,
    o: &'v Map<String, Value>,
    field: &str,
    second: &str,
) -> Result<(&'v Vec<Value>, &'v Vec<Value>)> {
    let titles = rec.list(rec.req(o, field, "title")?, &sub(field, "title"))?;
    let other = rec.list(rec.req(o, field, second)?, &sub(field, second))?;
    if titles.len() != other.len() {
        return Err(rec.err(
            &sub(field, second),
            format!(
                "has {} entries but `title` has {}",
                other.len(),
                titles.len()
            ),
        ));
    }
    Ok((titles, other))
}

/// The distinct titles of `supporting_facts`, in order of first appearance.
fn supporting_titles(rec: &Rec, v: &Value) -> Result<Vec<String>> {
    let mut titles: Vec<String> = Vec::new();
    let mut add = |t: &str| {
        if !titles.iter().any(|x| x == t) {
            titles.push(t.to_string());
        }
    };
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let field = idx("supporting_facts", i);
                let title = match item {
                    Value::Array(pair) if !pair.is_empty() => rec.str(&pair[0], &idx(&field, 0))?,
                    Value::Object(o) => rec.req_str(o, &field, "title")?,
                    other => {
                        return Err(rec.err(
                            &field,
                            format!(
                                "expected a [title, sentence_index] pair, found {}",
                                json::kind(other)
                            ),
                        ))
                    }
                };
                add(title);
            }
        }
        Value::Object(o) => {
            let (titles_col, _) = columns(rec, o, "supporting_facts", "sent_id")?;
            for (i, t) in titles_col.iter().enumerate() {
                add(rec.str(t, &idx("supporting_facts.title", i))?);
            }
        }
        other => {
            return Err(rec.err(
                "supporting_facts",
                format!(
                    "expected a list of [title, sentence_index] pairs, found {}",
                    json::kind(other)
                ),
            ))
        }
    }
    Ok(titles)
}
