//! MultiHop-RAG (Tang & Yang, 2024): news articles and queries with evidence lists.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::json::{self, idx, opt, sub, Rec};
use super::{stem_name, CorpusBuilder, Dataset, DatasetFormat, GoldSet, Question};
use crate::Result;

/// Load a MultiHop-RAG dataset: `MultiHopRAG.json` (queries) and `corpus.json`.
///
/// **Queries**: a list of objects with `query` (string, required), `answer` (optional),
/// `question_type` (optional, kept in [`Question::metadata`]), `id` (optional; default the
/// record index) and `evidence_list` (list, required; may be empty, as for
/// `null_query`), whose items name their article by `url` and/or `title`.
///
/// **Corpus**: a list of articles with `title` and `body` (required strings) and
/// optional string fields (`url`, `author`, `source`, `category`, `published_at`) kept in
/// [`lprag_core::Document::metadata`]. The passage of an article is `title + "\n" + body`.
///
/// Gold: each evidence item is matched to an article by `url` when both have one, else by
/// `title` (the first article with that title); unmatched evidence is reported in
/// [`Question::unmatched_gold`]. Several evidence items of one article count once.
/// Questions with an empty evidence list have no gold: they count in latency and tokens,
/// not in Recall@k.
pub fn load_multihop_rag(queries: impl AsRef<Path>, corpus: impl AsRef<Path>) -> Result<Dataset> {
    let q_path = queries.as_ref();
    let text = json::read_text(q_path)?;
    let records = json::parse_list(q_path, &text)?;
    from_records(q_path, &records, corpus.as_ref())
}

pub(crate) fn from_records(q_path: &Path, records: &[Value], c_path: &Path) -> Result<Dataset> {
    let corpus = read_corpus(c_path)?;
    let questions = records
        .iter()
        .enumerate()
        .map(|(i, v)| parse_query(Rec::new(q_path, i), v, &corpus))
        .collect::<Result<Vec<_>>>()?;
    let (corpus, duplicates_dropped) = corpus.finish();
    Ok(Dataset {
        name: stem_name(q_path),
        format: DatasetFormat::MultiHopRag,
        corpus,
        questions,
        duplicates_dropped,
    })
}

fn read_corpus(path: &Path) -> Result<CorpusBuilder> {
    let text = json::read_text(path)?;
    let items = json::parse_list(path, &text)?;
    let mut corpus = CorpusBuilder::new();
    for (i, v) in items.iter().enumerate() {
        let rec = Rec::new(path, i);
        let o = rec.object(v, "")?;
        let title = rec.req_str(o, "", "title")?.to_string();
        let body = rec.req_str(o, "", "body")?.to_string();
        let metadata: BTreeMap<String, String> = o
            .iter()
            .filter(|(k, _)| k.as_str() != "title" && k.as_str() != "body")
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect();
        let url = metadata.get("url").cloned();
        let at = corpus.push(i, title, body, metadata);
        if let Some(url) = url {
            corpus.add_key("url", &url, at);
        }
    }
    Ok(corpus)
}

fn parse_query(rec: Rec, v: &Value, corpus: &CorpusBuilder) -> Result<Question> {
    let obj = rec.object(v, "")?;
    let id = match opt(obj, "id") {
        Some(v) => rec.id(v, "id")?,
        None => rec.index.to_string(),
    };
    let question = rec.req_str(obj, "", "query")?.to_string();
    let answers = match opt(obj, "answer") {
        Some(a) => rec.answers(a, "answer")?,
        None => Vec::new(),
    };
    let mut metadata = BTreeMap::new();
    if let Some(t) = rec.opt_str(obj, "", "question_type")? {
        metadata.insert("question_type".to_string(), t.to_string());
    }
    let evidence = rec.list(rec.req(obj, "", "evidence_list")?, "evidence_list")?;
    let mut gold = GoldSet::default();
    for (i, e) in evidence.iter().enumerate() {
        let field = idx("evidence_list", i);
        let e = rec.object(e, &field)?;
        let url = rec.opt_str(e, &field, "url")?;
        let title = rec.opt_str(e, &field, "title")?;
        if url.is_none() && title.is_none() {
            return Err(rec.err(&sub(&field, "title"), "missing (need `title` or `url`)"));
        }
        let found = url
            .and_then(|u| corpus.match_key("url", u))
            .or_else(|| title.and_then(|t| corpus.match_first_title(t)));
        gold.add(found, title.or(url).unwrap_or_default());
    }
    let (gold, unmatched_gold) = gold.finish();
    Ok(Question {
        id,
        question,
        answers,
        gold,
        grades: Vec::new(),
        unmatched_gold,
        metadata,
    })
}
