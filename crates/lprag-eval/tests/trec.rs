//! TREC files from an evaluation: qrels of the dataset, one run per retriever, readable
//! back with the retriever's order and scores.

use lprag_eval::datasets::{Dataset, DatasetFormat, Question};
use lprag_eval::harness::QuestionOutcome;
use lprag_eval::report::RetrievalResult;
use lprag_eval::trec::{write_qrels, write_run};

fn dataset() -> Dataset {
    Dataset {
        name: "toy".into(),
        format: DatasetFormat::Beir,
        corpus: ["d1", "d2", "d3"]
            .iter()
            .map(|id| lprag::Document::new(*id, "", "text"))
            .collect(),
        questions: vec![Question {
            id: "q1".into(),
            question: "?".into(),
            answers: vec![],
            gold: vec![0, 2],
            grades: vec![2, 1],
            unmatched_gold: vec![],
            metadata: Default::default(),
        }],
        duplicates_dropped: 0,
    }
}

fn result(scores: Vec<f32>) -> RetrievalResult {
    RetrievalResult {
        retriever: "lprag".into(),
        recall: Default::default(),
        mrr_at_10: 0.0,
        ndcg_at_10: 0.0,
        index_seconds: 0.0,
        query_ms_p50: 0.0,
        query_ms_p95: 0.0,
        tokens_per_query: 0.0,
        questions: 1,
        questions_with_gold: 1,
        per_question: vec![QuestionOutcome {
            id: "q1".into(),
            ranking: vec![2, 0, 1],
            scores,
            latency_ms: 1.0,
        }],
    }
}

#[test]
fn runs_and_qrels_keep_ids_order_and_grades() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset();
    write_qrels(dir.path().join("qrels.txt"), &ds).unwrap();
    let qrels = std::fs::read_to_string(dir.path().join("qrels.txt")).unwrap();
    assert_eq!(qrels, "q1 0 d1 2\nq1 0 d3 1\n");
    // Saturated scores (1, 1, 0.5) are written strictly decreasing, in the retriever's order.
    let path = dir.path().join("lprag.run");
    write_run(&path, &ds, &result(vec![1.0, 1.0, 0.5]), "lprag").unwrap();
    let run = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<Vec<&str>> = run.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(rows.len(), 3);
    let docs: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(docs, ["d3", "d1", "d2"]);
    let ranks: Vec<&str> = rows.iter().map(|r| r[3]).collect();
    assert_eq!(ranks, ["1", "2", "3"]);
    let scores: Vec<f32> = rows.iter().map(|r| r[4].parse().unwrap()).collect();
    assert_eq!(scores[0], 1.0);
    assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
    assert!(rows
        .iter()
        .all(|r| r[0] == "q1" && r[1] == "Q0" && r[5] == "lprag"));
    // A run tool re-sorting by score, ties by id, reads the same order.
    let mut resorted = rows.clone();
    resorted.sort_by(|a, b| {
        let (x, y): (f32, f32) = (a[4].parse().unwrap(), b[4].parse().unwrap());
        y.total_cmp(&x).then(b[2].cmp(a[2]))
    });
    assert_eq!(resorted, rows);
    // Ids the format cannot hold are refused, as is a result without rankings.
    let mut bad = dataset();
    bad.corpus[2].id = "d 3".into();
    let err = write_run(&path, &bad, &result(vec![0.9, 0.8, 0.7]), "x").unwrap_err();
    assert!(err.to_string().contains("`d 3`"), "{err}");
    let mut empty = result(vec![]);
    empty.per_question.clear();
    assert!(write_run(&path, &ds, &empty, "x").is_err());
}
