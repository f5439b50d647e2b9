//! TREC run and qrels files, so `trec_eval`, ranx, ir_measures or pytrec_eval can score
//! lprag-eval's rankings with any measure they know.
//!
//! Run lines are `qid Q0 docid rank score run_name`, qrels lines `qid 0 docid grade`, with
//! the dataset's own ids (BEIR and JSONL ids; positions for the HippoRAG formats).

use std::fmt::Write as _;
use std::path::Path;

use crate::datasets::Dataset;
use crate::report::RetrievalResult;
use crate::{Error, Result};

/// The run of one retriever: the passages of each question's ranking (kept with
/// `EvalOptions::keep_rankings`), best first.
///
/// TREC tools sort by score and break ties by document id, not by rank; where the
/// retriever gave equal scores (LP-RAG's σ saturates at 1), the written score is lowered
/// to the next representable `f32` below the previous one, so the tools read exactly the
/// retriever's order.
///
/// # Errors
/// [`Error::Invalid`] when an id contains whitespace (the format has no quoting) or
/// the result holds no rankings; I/O errors.
pub fn write_run(
    path: impl AsRef<Path>,
    dataset: &Dataset,
    result: &RetrievalResult,
    run_name: &str,
) -> Result<()> {
    if result.per_question.is_empty() && !dataset.questions.is_empty() {
        return Err(Error::invalid(
            "TREC run",
            "the result kept no rankings (EvalOptions::keep_rankings)",
        ));
    }
    let run = plain(run_name, "run name")?;
    let mut out = String::new();
    for q in &result.per_question {
        let qid = plain(&q.id, "question id")?;
        let mut previous = f32::INFINITY;
        for (rank, &p) in q.ranking.iter().enumerate() {
            let doc = plain(&dataset.corpus[p].id, "document id")?;
            let mut score = q.scores.get(rank).copied().unwrap_or(-(rank as f32));
            if score >= previous {
                score = previous.next_down();
            }
            previous = score;
            let _ = writeln!(out, "{qid} Q0 {doc} {} {score} {run}", rank + 1);
        }
    }
    write(path.as_ref(), &out)
}

/// The dataset's judgements: each question's gold passages with their grade (1 where the
/// dataset does not grade). Gold passages absent from the corpus have no id and are not
/// written, so a tool's recall counts only the matched ones (lprag-eval's denominators
/// count them too; `Dataset::unmatched_gold` says how many there are).
///
/// # Errors
/// As [`write_run`].
pub fn write_qrels(path: impl AsRef<Path>, dataset: &Dataset) -> Result<()> {
    let mut out = String::new();
    for q in &dataset.questions {
        let qid = plain(&q.id, "question id")?;
        for (i, &p) in q.gold.iter().enumerate() {
            let doc = plain(&dataset.corpus[p].id, "document id")?;
            let grade = q.grades.get(i).copied().unwrap_or(1);
            let _ = writeln!(out, "{qid} 0 {doc} {grade}");
        }
    }
    write(path.as_ref(), &out)
}

/// `id` when it has no whitespace (and is not empty).
fn plain<'a>(id: &'a str, what: &str) -> Result<&'a str> {
    if id.is_empty() || id.chars().any(char::is_whitespace) {
        return Err(Error::invalid(
            "TREC file",
            format!("{what} `{id}` is empty or contains whitespace, which the format cannot hold"),
        ));
    }
    Ok(id)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}
