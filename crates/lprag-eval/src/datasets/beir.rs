//! The BEIR layout: `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::json::{self, opt, Rec};
use super::jsonl::{lines, read_corpus_with};
use super::{Dataset, DatasetFormat, Question};
use crate::{Error, Result};

/// Load a BEIR dataset directory (as `beir.datasets.data_loader.GenericDataLoader` reads
/// it):
///
/// - **`corpus.jsonl`**: `{"_id": "d1", "title": "...", "text": "...", "metadata": {...}}`
///   (`_id` and `text` required; documents keep their ids).
/// - **`queries.jsonl`**: `{"_id": "q1", "text": "...", "metadata": {...}}`.
/// - **`qrels/<split>.tsv`**: a header line, then `query-id<TAB>corpus-id<TAB>score`.
///   `split` is `test` by default (else the only `.tsv` there). Grades above 0 are gold
///   passages, with their grade kept for nDCG ([`Question::grades`]); grade 0 is
///   "judged not relevant" and ignored.
///
/// The questions are the queries the qrels judge (BEIR evaluates only those), in
/// `queries.jsonl` order. A qrels line naming a document that is not in the corpus counts
/// as an unmatched gold passage (as in the HippoRAG format); one naming an unknown query,
/// or a malformed line, is an error naming the file and line.
pub fn load_beir(dir: impl AsRef<Path>, split: Option<&str>) -> Result<Dataset> {
    let dir = dir.as_ref();
    let qrels = qrels_file(dir, split)?;
    let corpus = read_corpus_with(&dir.join("corpus.jsonl"), "_id", true)?;
    let doc_index: HashMap<&str, usize> = corpus
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.as_str(), i))
        .collect();
    let q_path = dir.join("queries.jsonl");
    let queries = read_queries(&q_path)?;
    let known: HashMap<&str, usize> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| (q.0.as_str(), i))
        .collect();
    let mut judged = read_qrels(&qrels, &q_path, &known)?;
    let mut questions = Vec::new();
    for (i, (id, question, metadata)) in queries.into_iter().enumerate() {
        let Some(judgements) = judged.remove(&i) else {
            continue;
        };
        questions.push(judged_question(
            id, question, metadata, judgements, &doc_index,
        ));
    }
    Ok(Dataset {
        name: super::stem_name(dir),
        format: DatasetFormat::Beir,
        corpus,
        questions,
        duplicates_dropped: 0,
    })
}

/// A query of `queries.jsonl`: id, text and metadata (values stringified).
type Query = (String, String, BTreeMap<String, String>);

/// The queries of `queries.jsonl` at `q_path`, in file order.
fn read_queries(q_path: &Path) -> Result<Vec<Query>> {
    let mut queries: Vec<Query> = Vec::new();
    for (line, v) in lines(q_path)? {
        let rec = Rec::new(q_path, line);
        let obj = rec.object(&v, "")?;
        let id = rec.id(rec.req(obj, "", "_id")?, "_id")?;
        let text = rec.req_str(obj, "", "text")?.to_string();
        let mut metadata = BTreeMap::new();
        if let Some(m) = opt(obj, "metadata") {
            for (k, v) in rec.object(m, "metadata")? {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                metadata.insert(k.clone(), v);
            }
        }
        queries.push((id, text, metadata));
    }
    Ok(queries)
}

/// The judgements of the qrels file `qrels` per query (its index in `known`, the
/// queries of `q_path`): (document, grade) with grade above 0, in file order; a query
/// judged only with grade 0 has an empty list.
fn read_qrels(
    qrels: &Path,
    q_path: &Path,
    known: &HashMap<&str, usize>,
) -> Result<HashMap<usize, Vec<(String, u32)>>> {
    // Judgements per query: (document, grade), in file order.
    let mut judged: HashMap<usize, Vec<(String, u32)>> = HashMap::new();
    let text = json::read_text(qrels)?;
    let bad = |line: usize, field: &str, message: String| Error::Malformed {
        path: qrels.to_path_buf(),
        record: Some(line),
        field: field.into(),
        message,
    };
    for (line, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || (line == 0 && l.starts_with("query-id")) {
            continue;
        }
        let cols: Vec<&str> = l.split('\t').collect();
        let [qid, did, grade] = cols[..] else {
            return Err(bad(
                line,
                "(line)",
                format!("expected 3 tab-separated columns, found {}", cols.len()),
            ));
        };
        let grade: i64 = grade
            .trim()
            .parse()
            .map_err(|e| bad(line, "score", format!("`{grade}` is not an integer: {e}")))?;
        let Some(&q) = known.get(qid.trim()) else {
            return Err(bad(
                line,
                "query-id",
                format!("query `{qid}` is not in {}", q_path.display()),
            ));
        };
        if grade > 0 {
            let grade = u32::try_from(grade).unwrap_or(u32::MAX);
            judged
                .entry(q)
                .or_default()
                .push((did.trim().to_string(), grade));
        } else {
            judged.entry(q).or_default();
        }
    }
    Ok(judged)
}

/// A judged query as a question: its gold passages (first judgement of each, sorted by
/// corpus position; grades kept unless all are 1) and the documents not in the corpus.
fn judged_question(
    id: String,
    question: String,
    metadata: BTreeMap<String, String>,
    judgements: Vec<(String, u32)>,
    doc_index: &HashMap<&str, usize>,
) -> Question {
    let mut gold: Vec<(usize, u32)> = Vec::new();
    let mut unmatched_gold = Vec::new();
    for (doc, grade) in judgements {
        match doc_index.get(doc.as_str()) {
            Some(&at) if !gold.iter().any(|g| g.0 == at) => gold.push((at, grade)),
            Some(_) => {}
            None => unmatched_gold.push(doc),
        }
    }
    gold.sort_unstable();
    let all_one = gold.iter().all(|g| g.1 == 1);
    Question {
        id,
        question,
        answers: Vec::new(),
        grades: if all_one {
            Vec::new()
        } else {
            gold.iter().map(|g| g.1).collect()
        },
        gold: gold.into_iter().map(|g| g.0).collect(),
        unmatched_gold,
        metadata,
    }
}

/// `qrels/<split>.tsv`: `test` unless named, else the only file there.
fn qrels_file(dir: &Path, split: Option<&str>) -> Result<std::path::PathBuf> {
    let qdir = dir.join("qrels");
    let wanted = split.unwrap_or("test");
    let path = qdir.join(format!("{wanted}.tsv"));
    if path.is_file() || split.is_some() {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::UnknownLayout {
                path: dir.to_path_buf(),
                message: format!("no qrels/{wanted}.tsv"),
            })
        };
    }
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(&qdir)
        .map_err(|source| Error::Io {
            path: qdir.clone(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::UnknownLayout {
            path: dir.to_path_buf(),
            message: "no qrels/*.tsv".into(),
        }),
        _ => Err(Error::UnknownLayout {
            path: dir.to_path_buf(),
            message: format!(
                "no qrels/test.tsv and several splits ({}); name one with --split",
                found
                    .iter()
                    .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}
