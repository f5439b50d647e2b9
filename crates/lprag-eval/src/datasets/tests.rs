//! Loader tests: the shared sample data and small inline fixtures.

use std::path::{Path, PathBuf};

use super::*;

/// `shared/data/NAME` next to the workspace (`LPRAG_DATA` overrides the folder);
/// `None` (and the test is skipped) when it is not there.
fn shared_data(name: &str) -> Option<PathBuf> {
    let base = std::env::var_os("LPRAG_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let dir = base.join(name);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} not found", dir.display());
        None
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        write(dir.path(), name, text);
    }
    dir
}

/// Check that `err` is `Malformed` for `file`, `record` and `field`, and that its message
/// names all three.
fn assert_malformed(err: Error, file: &str, record: Option<usize>, field: &str) {
    let msg = err.to_string();
    match &err {
        Error::Malformed {
            path,
            record: r,
            field: f,
            ..
        } => {
            assert!(path.ends_with(file), "{msg}");
            assert_eq!(*r, record, "{msg}");
            assert_eq!(f, field, "{msg}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert!(msg.contains(file), "{msg}");
    assert!(msg.contains(&format!("`{field}`")), "{msg}");
    if let Some(r) = record {
        assert!(msg.contains(&format!("record {r}")), "{msg}");
    }
}

#[test]
fn sample_dataset_loads() {
    let Some(dir) = shared_data("sample") else {
        return;
    };
    let ds = load_dir(&dir, None).unwrap();
    assert_eq!(ds.name, "sample");
    assert_eq!(ds.format, DatasetFormat::HippoRag);
    assert_eq!(ds.corpus.len(), 3);
    assert_eq!(ds.corpus[1].id, "1");
    assert_eq!(ds.corpus[1].title, "David Eagleman");
    assert!(ds.corpus[0]
        .text
        .starts_with("Introduction\nThomas Christian Sudhof"));
    assert_eq!(ds.questions.len(), 1);
    let q = &ds.questions[0];
    assert_eq!(q.id, "sample/question_1.json");
    assert_eq!(
        q.question,
        "Which Stanford University professor works on Alzheimer's?"
    );
    assert_eq!(q.answers, vec!["Thomas C. Sudhof"]); // `answer` given as a list
    assert_eq!(q.gold, vec![0]); // paragraph uses `text`, not `paragraph_text`
    assert!(q.unmatched_gold.is_empty());
    assert_eq!(
        passage_text(&ds.corpus[0]).lines().next(),
        Some("Thomas C. Sudhof")
    );
}

#[test]
fn musique_100_loads() {
    let Some(dir) = shared_data("musique-100") else {
        return;
    };
    let ds = load_dir(&dir, None).unwrap();
    assert_eq!(ds.questions.len(), 100);
    assert_eq!(ds.corpus.len(), 1890);
    assert_eq!(ds.gold_passages(), 237);
    assert_eq!(ds.unmatched_gold(), 0);
    assert_eq!(ds.duplicates_dropped, 0);
    assert!(ds.questions.iter().all(|q| (2..=4).contains(&q.gold.len())));
    assert!(!ds.questions[0].answers.is_empty());
}

#[test]
fn split_for_training_moves_questions_with_their_gold_ids() {
    let Some(dir) = shared_data("musique-100") else {
        return;
    };
    let mut ds = load_dir(&dir, None).unwrap();
    let before: Vec<(String, Vec<String>)> = ds
        .questions
        .iter()
        .map(|q| {
            let ids = q.gold.iter().map(|&g| ds.corpus[g].id.clone()).collect();
            (q.question.clone(), ids)
        })
        .collect();
    let pairs = ds.split_for_training(30);
    assert_eq!((pairs.len(), ds.questions.len()), (30, 70));
    // Each pair is a question with exactly its gold document ids, and left the eval set.
    for p in &pairs {
        assert!(before.contains(p));
        assert!(ds.questions.iter().all(|q| q.question != p.0));
    }
    // The pick depends on ids only: the same on a fresh load, and not the first 30.
    let mut again = load_dir(&dir, None).unwrap();
    assert_eq!(again.split_for_training(30), pairs);
    assert_ne!(pairs[0].0, before[0].0);
}

#[test]
fn musique_style_inline() {
    let dir = fixture(&[
        (
            "questions.json",
            r#"[{"id": "q1", "question": "Who?", "answer": "Ann", "answer_aliases": ["Annie"],
                 "paragraphs": [
                   {"idx": 0, "title": "A", "paragraph_text": "Ann lived.", "is_supporting": true},
                   {"idx": 1, "title": "B", "paragraph_text": "Bob lived.", "is_supporting": false},
                   {"idx": 2, "title": "C", "paragraph_text": "Not  in corpus.", "is_supporting": true},
                   {"idx": 3, "title": "D", "paragraph_text": "Dan   lived."}
                 ]}]"#,
        ),
        (
            "corpus.json",
            r#"[{"title": "A", "text": "Ann lived."}, {"title": "B", "text": "Bob lived."},
                {"title": "A", "text": "Ann lived."}, {"title": "D", "text": "Dan lived."}]"#,
        ),
    ]);
    let ds = load_dir(dir.path(), None).unwrap();
    assert_eq!(ds.duplicates_dropped, 1);
    assert_eq!(ds.corpus.len(), 3);
    assert_eq!(ds.corpus[2].title, "D");
    assert_eq!(ds.corpus[2].id, "2");
    assert_eq!(ds.corpus[2].metadata["source_index"], "3");
    let q = &ds.questions[0];
    assert_eq!(q.answers, vec!["Ann", "Annie"]);
    // A exactly; D ignoring whitespace and with no is_supporting flag (counts as gold)
    assert_eq!(q.gold, vec![0, 2]);
    assert_eq!(q.unmatched_gold, vec!["C"]);
    assert_eq!(q.gold_count(), 3);
    assert_eq!(ds.unmatched_gold(), 1);
}

#[test]
fn hotpotqa_inline_with_object_corpus() {
    // HotpotQA: sentences carry leading spaces; the corpus maps title → sentences.
    let dir = fixture(&[
        (
            "hotpot.json",
            r#"[{"_id": "5a8b", "question": "Which city?", "answer": "Paris",
                 "context": [["Eiffel Tower", ["The tower is in Paris.", " It is iron."]],
                             ["Louvre", ["A museum."]],
                             ["Seine", ["A river.", " It flows."]]],
                 "supporting_facts": [["Eiffel Tower", 0], ["Seine", 1], ["Eiffel Tower", 1]]}]"#,
        ),
        (
            "hotpot_corpus.json",
            r#"{"Seine": ["A river.", " It flows."], "Eiffel Tower": ["The tower is in Paris.", " It is iron."],
                "Louvre": "A museum."}"#,
        ),
    ]);
    let ds = load_dir(dir.path(), None).unwrap();
    // object order is kept: Seine = 0, Eiffel Tower = 1
    assert_eq!(ds.corpus[0].title, "Seine");
    assert_eq!(ds.corpus[1].text, "The tower is in Paris. It is iron.");
    let q = &ds.questions[0];
    assert_eq!(q.id, "5a8b");
    assert_eq!(q.gold, vec![0, 1]);
    assert!(q.unmatched_gold.is_empty());
}

#[test]
fn twowiki_inline_with_list_corpus() {
    // 2Wiki: sentences without leading spaces (joined with " "); a supporting title
    // missing from `context` is found in the corpus by title.
    let dir = fixture(&[
        (
            "questions.json",
            r#"[{"_id": "w1", "question": "Who was born first?", "answer": "X",
                 "context": [["X", ["X was born in 1900.", "X died in 1990."]], ["Y", ["Y was born in 1950."]]],
                 "supporting_facts": [["X", 0], ["Y", 0], ["Z", 0], ["Nowhere", 0]]},
                {"question": "Hugging Face form",
                 "context": {"title": ["Y"], "sentences": [["Y was born in 1950."]]},
                 "supporting_facts": {"title": ["Y"], "sent_id": [0]}}]"#,
        ),
        (
            "corpus.json",
            r#"[{"title": "X", "text": "X was born in 1900. X died in 1990."},
                {"title": "Y", "text": "Y was born in 1950."},
                ["Z", ["Z is a letter."]]]"#,
        ),
    ]);
    let ds = load_dir(dir.path(), None).unwrap();
    assert_eq!(ds.corpus.len(), 3);
    assert_eq!(ds.corpus[2].title, "Z");
    let q = &ds.questions[0];
    assert_eq!(q.gold, vec![0, 1, 2]);
    assert_eq!(q.unmatched_gold, vec!["Nowhere"]);
    let q = &ds.questions[1];
    assert_eq!(q.id, "1");
    assert!(q.answers.is_empty());
    assert_eq!(q.gold, vec![1]);
}

#[test]
fn multihop_rag_inline() {
    let dir = fixture(&[
        (
            "MultiHopRAG.json",
            r#"[{"query": "Did both outlets report X?", "answer": "Yes", "question_type": "comparison_query",
                 "evidence_list": [{"title": "Story A", "url": "https://a", "fact": "..."},
                                   {"title": "Story B", "fact": "..."},
                                   {"title": "Story A", "url": "https://a", "fact": "again"},
                                   {"title": "Lost story", "url": "https://lost"}]},
                {"query": "Nothing?", "answer": "Insufficient information.", "question_type": "null_query",
                 "evidence_list": []}]"#,
        ),
        (
            "corpus.json",
            r#"[{"title": "Story A", "body": "Body A.", "url": "https://a", "author": "Ann", "published_at": "2023"},
                {"title": "Story B", "body": "Body B.", "url": "https://b", "source": "Wire"}]"#,
        ),
    ]);
    let ds = load_dir(dir.path(), None).unwrap();
    assert_eq!(ds.format, DatasetFormat::MultiHopRag);
    assert_eq!(ds.corpus[0].text, "Body A.");
    assert_eq!(ds.corpus[0].metadata["author"], "Ann");
    assert_eq!(ds.corpus[1].metadata["url"], "https://b");
    let q = &ds.questions[0];
    assert_eq!(q.question, "Did both outlets report X?");
    assert_eq!(q.answers, vec!["Yes"]);
    assert_eq!(q.metadata["question_type"], "comparison_query");
    assert_eq!(q.gold, vec![0, 1]);
    assert_eq!(q.unmatched_gold, vec!["Lost story"]);
    assert_eq!(ds.questions[1].gold_count(), 0);

    // the same files under HippoRAG names are detected by content
    let dir2 = fixture(&[
        (
            "questions.json",
            &std::fs::read_to_string(dir.path().join("MultiHopRAG.json")).unwrap(),
        ),
        (
            "corpus.json",
            &std::fs::read_to_string(dir.path().join("corpus.json")).unwrap(),
        ),
    ]);
    assert_eq!(
        load_dir(dir2.path(), None).unwrap().format,
        DatasetFormat::MultiHopRag
    );
}

#[test]
fn jsonl_inline() {
    let dir = fixture(&[
        (
            "corpus.jsonl",
            "{\"id\": \"d1\", \"title\": \"One\", \"text\": \"First.\", \"metadata\": {\"lang\": \"en\"}}\n\
             \n\
             {\"text\": \"Untitled second.\"}\n\
             {\"id\": 7, \"title\": \"Seven\", \"text\": \"Third.\"}\n",
        ),
        (
            "questions.jsonl",
            "{\"id\": \"q1\", \"question\": \"Which?\", \"answer\": [\"One\", \"1\"], \"gold\": [\"d1\", 7, \"d1\"]}\n\
             {\"question\": \"No gold?\"}\n",
        ),
    ]);
    let ds = load_dir(dir.path(), None).unwrap();
    assert_eq!(ds.format, DatasetFormat::Jsonl);
    let ids: Vec<&str> = ds.corpus.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, vec!["d1", "2", "7"]); // a missing id is the line index
    assert_eq!(ds.corpus[0].metadata["lang"], "en");
    assert_eq!(ds.corpus[1].title, "");
    assert_eq!(ds.questions[0].gold, vec![0, 2]);
    assert_eq!(ds.questions[0].answers, vec!["One", "1"]);
    assert_eq!(ds.questions[1].id, "1");
    assert_eq!(ds.questions[1].gold_count(), 0);
    assert_eq!(ds.document_index()["7"], 2);
}

#[test]
fn malformed_hipporag_files_name_file_record_and_field() {
    let corpus = r#"[{"title": "A", "text": "a"}]"#;
    let cases: &[(&str, Option<usize>, &str)] = &[
        (
            r#"[{"question": "ok", "paragraphs": []}, {"paragraphs": []}]"#,
            Some(1),
            "question",
        ),
        (
            r#"[{"question": 3, "paragraphs": []}]"#,
            Some(0),
            "question",
        ),
        (
            r#"[{"question": "q", "paragraphs": [{"title": "A", "text": "a"}, {"title": "B", "paragraph_text": "b", "is_supporting": "yes"}]}]"#,
            Some(0),
            "paragraphs[1].is_supporting",
        ),
        (
            r#"[{"question": "q", "paragraphs": [{"text": "a"}]}]"#,
            Some(0),
            "paragraphs[0].title",
        ),
        (
            r#"[{"question": "q", "paragraphs": [{"title": "A"}]}]"#,
            Some(0),
            "paragraphs[0].paragraph_text",
        ),
        (r#"[{"question": "q"}]"#, Some(0), "paragraphs"),
        (
            r#"[{"question": "q", "context": []}]"#,
            Some(0),
            "supporting_facts",
        ),
        (
            r#"[{"question": "q", "context": [["A", [1]]], "supporting_facts": []}]"#,
            Some(0),
            "context[0][1][0]",
        ),
        (
            r#"[{"question": "q", "context": [], "supporting_facts": [[5, 0]]}]"#,
            Some(0),
            "supporting_facts[0][0]",
        ),
        (
            r#"[{"question": "q", "paragraphs": [], "answer_aliases": ["x", 2]}]"#,
            Some(0),
            "answer_aliases[1]",
        ),
        (r#"[1]"#, Some(0), "(record)"),
        (r#"{"a": 1}"#, None, "(top level)"),
    ];
    for (questions, record, field) in cases {
        let dir = fixture(&[("questions.json", questions), ("corpus.json", corpus)]);
        let err = load_dir(dir.path(), Some(DatasetFormat::HippoRag)).unwrap_err();
        assert_malformed(err, "questions.json", *record, field);
    }
}

#[test]
fn malformed_corpus_files() {
    let q = r#"[{"question": "q", "paragraphs": []}]"#;
    let cases: &[(&str, Option<usize>, &str)] = &[
        (
            r#"[{"title": "A", "text": "a"}, {"title": "B"}]"#,
            Some(1),
            "text",
        ),
        (
            r#"[{"title": "A", "text": "a"}, {"title": 2, "text": "b"}]"#,
            Some(1),
            "title",
        ),
        (r#"[["A"]]"#, Some(0), "(record)"),
        (r#"{"A": "a", "B": 3}"#, Some(1), "B"),
    ];
    for (corpus, record, field) in cases {
        let dir = fixture(&[("questions.json", q), ("corpus.json", corpus)]);
        let err = load_dir(dir.path(), None).unwrap_err();
        assert_malformed(err, "corpus.json", *record, field);
    }
    // not JSON at all: the parser's line and column, and the file
    let dir = fixture(&[("questions.json", q), ("corpus.json", "[{\"title\": }")]);
    let err = load_dir(dir.path(), None).unwrap_err();
    assert!(matches!(err, Error::Json { .. }), "{err:?}");
    assert!(
        err.to_string().contains("corpus.json") && err.to_string().contains("line 1"),
        "{err}"
    );
}

#[test]
fn malformed_multihop_rag_files() {
    let corpus = r#"[{"title": "A", "body": "a"}]"#;
    let cases: &[(&str, &str, Option<usize>, &str)] = &[
        (
            r#"[{"query": "q"}]"#,
            "MultiHopRAG.json",
            Some(0),
            "evidence_list",
        ),
        (
            r#"[{"query": "q", "evidence_list": [{"fact": "f"}]}]"#,
            "MultiHopRAG.json",
            Some(0),
            "evidence_list[0].title",
        ),
        (
            r#"[{"query": "q", "evidence_list": [{"title": "A"}, "A"]}]"#,
            "MultiHopRAG.json",
            Some(0),
            "evidence_list[1]",
        ),
    ];
    for (queries, file, record, field) in cases {
        let dir = fixture(&[("MultiHopRAG.json", queries), ("corpus.json", corpus)]);
        assert_malformed(
            load_dir(dir.path(), None).unwrap_err(),
            file,
            *record,
            field,
        );
    }
    let dir = fixture(&[
        ("MultiHopRAG.json", r#"[]"#),
        (
            "corpus.json",
            r#"[{"title": "A", "body": "a"}, {"title": "B", "text": "b"}]"#,
        ),
    ]);
    assert_malformed(
        load_dir(dir.path(), None).unwrap_err(),
        "corpus.json",
        Some(1),
        "body",
    );
}

#[test]
fn malformed_jsonl_files() {
    let corpus = "{\"id\": \"d1\", \"text\": \"a\"}\n";
    let cases: &[(&str, &str, &str, Option<usize>, &str)] = &[
        (
            corpus,
            "{\"question\": \"q\"}\n\n{\"id\": \"q2\"}\n",
            "questions.jsonl",
            Some(2),
            "question",
        ),
        (
            corpus,
            "{\"question\": \"q\", \"gold\": [\"d1\", \"d9\"]}\n",
            "questions.jsonl",
            Some(0),
            "gold[1]",
        ),
        (
            corpus,
            "{\"question\": \"q\"}\n{not json\n",
            "questions.jsonl",
            Some(1),
            "(line)",
        ),
        (
            "{\"id\": \"d1\", \"text\": \"a\"}\n{\"id\": \"d1\", \"text\": \"b\"}\n",
            "",
            "corpus.jsonl",
            Some(1),
            "id",
        ),
        (
            "{\"id\": \"d1\", \"text\": \"a\", \"metadata\": {\"n\": 1}}\n",
            "",
            "corpus.jsonl",
            Some(0),
            "metadata.n",
        ),
        (
            "{\"id\": \"d1\", \"text\": [\"a\"]}\n",
            "",
            "corpus.jsonl",
            Some(0),
            "text",
        ),
    ];
    for (c, q, file, record, field) in cases {
        let dir = fixture(&[("corpus.jsonl", c), ("questions.jsonl", q)]);
        assert_malformed(
            load_dir(dir.path(), None).unwrap_err(),
            file,
            *record,
            field,
        );
    }
}

#[test]
fn directory_layouts() {
    let empty = tempfile::tempdir().unwrap();
    let err = load_dir(empty.path(), None).unwrap_err();
    assert!(matches!(err, Error::UnknownLayout { .. }), "{err:?}");
    assert!(load_dir(empty.path().join("missing"), None).is_err());
    let two = fixture(&[
        ("a.json", "[]"),
        ("a_corpus.json", "[]"),
        ("b.json", "[]"),
        ("b_corpus.json", "[]"),
    ]);
    assert!(load_dir(two.path(), None)
        .unwrap_err()
        .to_string()
        .contains("a, b"));
    let one = fixture(&[
        ("musique.json", "[]"),
        ("musique_corpus.json", r#"[{"title": "t", "text": "x"}]"#),
    ]);
    let files = find_files(one.path()).unwrap();
    assert!(files.questions.ends_with("musique.json"));
    assert_eq!(load_dir(one.path(), None).unwrap().corpus.len(), 1);
    assert_eq!(
        "multihop-rag".parse::<DatasetFormat>().unwrap(),
        DatasetFormat::MultiHopRag
    );
    assert!("csv".parse::<DatasetFormat>().is_err());
}

#[test]
fn missing_file_is_io_error_naming_it() {
    let err = load_hipporag("/nonexistent/q.json", "/nonexistent/c.json").unwrap_err();
    assert!(matches!(err, Error::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/q.json"), "{err}");
    let docs = {
        let dir = fixture(&[(
            "c.json",
            r#"[{"title": "A", "text": "a"}, {"title": "A", "text": "a"}]"#,
        )]);
        load_hipporag_corpus(dir.path().join("c.json")).unwrap()
    };
    assert_eq!(docs.len(), 1);
}

/// A BEIR directory: three documents, three queries (one unjudged), graded qrels.
fn beir_fixture(qrels: &str) -> tempfile::TempDir {
    let dir = fixture(&[
        (
            "corpus.jsonl",
            "{\"_id\": \"d1\", \"title\": \"Warsaw\", \"text\": \"Warsaw lies on the Vistula.\"}\n\
             {\"_id\": \"d2\", \"title\": \"Kyoto\", \"text\": \"Kyoto was the capital.\", \"metadata\": {\"year\": 794}}\n\
             {\"_id\": \"d3\", \"title\": \"\", \"text\": \"Mount Everest.\"}\n",
        ),
        (
            "queries.jsonl",
            "{\"_id\": \"q1\", \"text\": \"Which river?\"}\n\
             {\"_id\": \"q2\", \"text\": \"Old capital?\"}\n\
             {\"_id\": \"q3\", \"text\": \"Not judged\"}\n",
        ),
    ]);
    std::fs::create_dir(dir.path().join("qrels")).unwrap();
    write(dir.path(), "qrels/test.tsv", qrels);
    dir
}

#[test]
fn beir_loads_graded_judgements_of_the_judged_queries() {
    let dir = beir_fixture(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq1\td2\t0\nq2\td2\t1\nq2\tgone\t1\n",
    );
    let ds = load_dir(dir.path(), None).unwrap();
    assert_eq!(ds.format, DatasetFormat::Beir);
    assert_eq!(ds.corpus.len(), 3);
    assert_eq!(ds.corpus[1].id, "d2");
    assert_eq!(ds.corpus[1].metadata["year"], "794");
    let ids: Vec<&str> = ds.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["q1", "q2"], "only judged queries");
    assert_eq!(ds.questions[0].gold, [0, 2]);
    assert_eq!(ds.questions[0].grades, [2, 1]);
    assert_eq!(ds.questions[1].gold, [1]);
    assert!(ds.questions[1].grades.is_empty(), "all grade 1");
    assert_eq!(ds.questions[1].unmatched_gold, ["gone"]);
    // A named split, and errors naming file and line.
    write(dir.path(), "qrels/dev.tsv", "q9\td1\t1\n");
    let err = load_beir(dir.path(), Some("dev")).unwrap_err();
    assert_malformed(err, "dev.tsv", Some(0), "query-id");
    write(dir.path(), "qrels/dev.tsv", "q1\td1\n");
    assert_malformed(
        load_beir(dir.path(), Some("dev")).unwrap_err(),
        "dev.tsv",
        Some(0),
        "(line)",
    );
    write(dir.path(), "qrels/dev.tsv", "q1\td1\thigh\n");
    assert_malformed(
        load_beir(dir.path(), Some("dev")).unwrap_err(),
        "dev.tsv",
        Some(0),
        "score",
    );
    let err = load_beir(dir.path(), Some("train"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("qrels/train.tsv"), "{err}");
}
