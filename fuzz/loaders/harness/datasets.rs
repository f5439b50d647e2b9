//! lprag-eval's dataset loaders on mutated datasets: a small valid dataset of each format
//! (HippoRAG/MuSiQue, HotpotQA/2Wiki in both layouts, MultiHop-RAG, JSONL, BEIR) with one
//! of its files changed: a JSON file structurally (see `mutate.rs`), a JSONL file line by
//! line (a mutated record, a dropped, repeated or foreign line), the qrels TSV field by
//! field. Whatever loads must be a consistent dataset: gold passages sorted, unique and
//! inside the corpus, one grade per gold passage or none.

use std::path::PathBuf;

use arbitrary::Unstructured;
use lprag_eval::datasets::{load_dir, DatasetFormat};
use serde_json::Value;

use crate::mutate::{mutate, mutate_some};

/// A dataset: its format and its files (name, content).
struct Seed {
    format: DatasetFormat,
    files: &'static [(&'static str, &'static str)],
}

const SEEDS: [Seed; 6] = [
    Seed {
        format: DatasetFormat::HippoRag,
        files: &[
            (
                "questions.json",
                r#"[{"id": "q1", "question": "Who?", "answer": "Ann", "answer_aliases": ["Annie"],
                     "paragraphs": [
                       {"idx": 0, "title": "A", "paragraph_text": "Ann lived.", "is_supporting": true},
                       {"idx": 1, "title": "B", "paragraph_text": "Bob lived.", "is_supporting": false},
                       {"idx": 2, "title": "C", "paragraph_text": "Not  in corpus.", "is_supporting": true}]},
                    {"id": "q2", "question": "Where?", "answer": "Rome",
                     "paragraphs": [{"idx": 0, "title": "B", "paragraph_text": "Bob lived.", "is_supporting": true}]}]"#,
            ),
            (
                "corpus.json",
                r#"[{"title": "A", "text": "Ann lived."}, {"title": "B", "text": "Bob lived."},
                    {"title": "B", "text": "Bob lived."}, {"title": "D", "text": "Dan lived."}]"#,
            ),
        ],
    },
    Seed {
        format: DatasetFormat::HippoRag,
        files: &[
            (
                "hotpot.json",
                r#"[{"_id": "5a8b", "question": "Which city?", "answer": "Paris",
                     "context": [["Eiffel Tower", ["The tower is in Paris.", " It is iron."]],
                                 ["Louvre", ["A museum."]]],
                     "supporting_facts": [["Eiffel Tower", 0], ["Louvre", 0]]},
                    {"question": "Hugging Face form",
                     "context": {"title": ["Louvre"], "sentences": [["A museum."]]},
                     "supporting_facts": {"title": ["Louvre"], "sent_id": [0]}}]"#,
            ),
            (
                "hotpot_corpus.json",
                r#"{"Eiffel Tower": ["The tower is in Paris.", " It is iron."], "Louvre": ["A museum."]}"#,
            ),
        ],
    },
    Seed {
        format: DatasetFormat::MultiHopRag,
        files: &[
            (
                "MultiHopRAG.json",
                r#"[{"query": "Did both outlets report X?", "answer": "Yes", "question_type": "comparison_query",
                     "evidence_list": [{"title": "Story A", "url": "https://a", "fact": "..."},
                                       {"title": "Story B", "fact": "..."},
                                       {"title": "Lost story", "url": "https://lost"}]},
                    {"query": "Nothing?", "answer": "Insufficient information.", "question_type": "null_query",
                     "evidence_list": []}]"#,
            ),
            (
                "corpus.json",
                r#"[{"title": "Story A", "url": "https://a", "body": "A happened."},
                    {"title": "Story B", "body": "B happened.", "source": "Wire"}]"#,
            ),
        ],
    },
    Seed {
        format: DatasetFormat::Jsonl,
        files: &[
            (
                "corpus.jsonl",
                "{\"id\": \"d1\", \"title\": \"One\", \"text\": \"First.\", \"metadata\": {\"lang\": \"en\"}}\n\
                 \n\
                 {\"text\": \"Untitled second.\"}\n\
                 {\"id\": 7, \"title\": \"Seven\", \"text\": \"Third.\"}\n",
            ),
            (
                "questions.jsonl",
                "{\"id\": \"q1\", \"question\": \"First?\", \"answer\": \"One\", \"gold\": [\"d1\", 7]}\n\
                 {\"question\": \"Second?\", \"answer\": [\"Two\", \"2\"], \"answer_aliases\": [\"two\"]}\n",
            ),
        ],
    },
    Seed {
        format: DatasetFormat::Beir,
        files: &[
            (
                "corpus.jsonl",
                "{\"_id\": \"d1\", \"title\": \"Warsaw\", \"text\": \"Warsaw lies on the Vistula.\"}\n\
                 {\"_id\": \"d2\", \"title\": \"Kyoto\", \"text\": \"Kyoto was the capital.\", \"metadata\": {\"year\": 794}}\n\
                 {\"_id\": \"d3\", \"title\": \"\", \"text\": \"Mount Everest.\"}\n",
            ),
            (
                "queries.jsonl",
                "{\"_id\": \"q1\", \"text\": \"Which river?\"}\n\
                 {\"_id\": \"q2\", \"text\": \"Old capital?\", \"metadata\": {}}\n\
                 {\"_id\": \"q3\", \"text\": \"Unjudged.\"}\n",
            ),
            (
                "qrels/test.tsv",
                "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq2\td3\t0\nq2\tgone\t1\n",
            ),
        ],
    },
    Seed {
        format: DatasetFormat::HippoRag,
        files: &[
            ("musique.json", "[]"),
            ("musique_corpus.json", r#"[{"title": "t", "text": "x"}]"#),
        ],
    },
];

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Too short to choose a file.
    Skipped,
    /// The loader refused the mutated dataset with an error.
    Rejected,
    /// The mutated dataset loaded and is consistent.
    Loaded,
}

/// A scratch folder per seed, written afresh for each input.
pub struct Harness {
    scratch: PathBuf,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A fresh scratch folder under `TMPDIR` (`/dev/shm` makes the runs faster).
    pub fn new() -> Self {
        let scratch = std::env::temp_dir().join(format!(
            "lprag-fuzz-datasets-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        Self { scratch }
    }

    /// One input: pick a seed and one of its files, mutate the file, load, check.
    pub fn run(&self, data: &[u8]) -> Outcome {
        let mut u = Unstructured::new(data);
        let Ok(seed_index) = u.choose_index(SEEDS.len()) else {
            return Outcome::Skipped;
        };
        let seed = &SEEDS[seed_index];
        let Ok(target) = u.choose_index(seed.files.len()) else {
            return Outcome::Skipped;
        };
        let dir = self.scratch.join(seed_index.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        for (i, (name, text)) in seed.files.iter().enumerate() {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("scratch folder");
            let content = if i == target {
                mutated(name, text, &mut u)
            } else {
                text.to_string()
            };
            std::fs::write(&path, content).expect("write a dataset file");
        }
        let format = if u.ratio(1u8, 2u8).unwrap_or(false) {
            Some(seed.format)
        } else {
            None
        };
        let Ok(ds) = load_dir(&dir, format) else {
            return Outcome::Rejected;
        };
        // What the documentation of `Dataset` and `Question` promises.
        for q in &ds.questions {
            assert!(
                q.gold.windows(2).all(|w| w[0] < w[1]),
                "gold not sorted and unique: {:?}",
                q.gold
            );
            assert!(
                q.gold.iter().all(|&g| g < ds.corpus.len()),
                "gold {:?} outside a corpus of {}",
                q.gold,
                ds.corpus.len()
            );
            assert!(
                q.grades.is_empty() || q.grades.len() == q.gold.len(),
                "{} grades for {} gold passages",
                q.grades.len(),
                q.gold.len()
            );
        }
        let _ = ds.unmatched_gold();
        let _ = ds.gold_passages();
        Outcome::Loaded
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// `text` changed by the input: structurally for JSON, by line for JSONL and TSV.
fn mutated(name: &str, text: &str, u: &mut Unstructured) -> String {
    if name.ends_with(".json") {
        let mut doc: Value = serde_json::from_str(text).expect("a seed file is JSON");
        mutate_some(&mut doc, u, 3);
        return doc.to_string();
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let edits = u.int_in_range(1u8..=3).unwrap_or(1);
    for _ in 0..edits {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let Ok(i) = u.choose_index(lines.len()) else {
            break;
        };
        match u.int_in_range(0u8..=4).unwrap_or(0) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let copy = lines[i].clone();
                lines.insert(i, copy);
            }
            2 => lines[i] = u.arbitrary::<String>().unwrap_or_default(),
            3 if name.ends_with(".tsv") => {
                let mut fields: Vec<String> = lines[i].split('\t').map(str::to_string).collect();
                let f = u.choose_index(fields.len()).unwrap_or(0);
                fields[f] = match u.int_in_range(0u8..=3).unwrap_or(0) {
                    0 => String::new(),
                    1 => "-1".into(),
                    2 => u64::MAX.to_string(),
                    _ => u.arbitrary::<String>().unwrap_or_default(),
                };
                if u.ratio(1u8, 4u8).unwrap_or(false) {
                    fields.push("extra".into());
                }
                lines[i] = fields.join("\t");
            }
            _ => {
                if let Ok(mut v) = serde_json::from_str::<Value>(&lines[i]) {
                    let _ = mutate(&mut v, u);
                    lines[i] = v.to_string();
                }
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}
