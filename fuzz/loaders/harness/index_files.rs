//! Every saved index kind (LP-RAG, QCG-RAG, G²RAG, LeSeGR, GFM-RAG) opened from a copy of
//! its committed fixture (`tests/fixtures/v1/`) with one JSON file mutated structurally
//! (see `mutate.rs`). What opens must then answer: `retrieve` and `retrieve_filtered`
//! return hits best first, never a NaN score, never more than asked, and never a panic
//! (a panic on a blocking thread comes back as an error saying "panicked"; that counts as
//! a crash too).
//!
//! The binary files (graph, k-NN lists, burnpack weights) carry checksums and have their
//! own fuzz target (`graph_files`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbitrary::Unstructured;
use lprag::{
    Encoder, Filter, G2Rag, GfmRag, HashingEncoder, HashingEncoderConfig, LesegrRag, LpRag, QcgRag,
    Retriever, Selection,
};
use serde_json::Value;

use crate::mutate::mutate_some;

const QUERIES: [&str; 3] = [
    "Which river flows through Warsaw?",
    "Who invented dynamite?",
    "capital of Japan",
];

/// One JSON file of a fixture index: where it lies in the scratch copy, its parsed
/// value and its original bytes (written back after each input).
struct JsonFile {
    path: PathBuf,
    value: Value,
    bytes: Vec<u8>,
}

struct Kind {
    name: String,
    dir: PathBuf,
    files: Vec<JsonFile>,
}

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Too short to choose a file.
    Skipped,
    /// The loader refused the mutated index with an error.
    Rejected,
    /// The mutated index opened, and answered without a panic.
    Opened,
}

/// The fixtures copied to a scratch folder (under `TMPDIR`; `/dev/shm` makes the runs
/// faster), and a runtime for the retrieve calls.
pub struct Harness {
    scratch: PathBuf,
    kinds: Vec<Kind>,
    runtime: tokio::runtime::Runtime,
}

impl Harness {
    /// Copy `root/<kind>/index` for every fixture folder (every retriever kind, and
    /// `LpRag` with each built-in predictor) into a fresh scratch folder.
    pub fn new(root: &Path) -> Self {
        let scratch = std::env::temp_dir().join(format!(
            "lprag-fuzz-index-files-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        let mut kinds = Vec::new();
        let mut names: Vec<String> = std::fs::read_dir(root)
            .expect("the fixture folder")
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("index").is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(!names.is_empty(), "no fixture under {}", root.display());
        for name in names {
            let dir = scratch.join(&name);
            copy_dir(&root.join(&name).join("index"), &dir);
            let mut files = Vec::new();
            collect_json(&dir, &mut files);
            files.sort_by(|a, b| a.path.cmp(&b.path));
            assert!(!files.is_empty(), "no JSON file in the {name} fixture");
            kinds.push(Kind { name, dir, files });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        Self {
            scratch,
            kinds,
            runtime,
        }
    }

    /// One input: pick a kind and one of its JSON files, mutate it, open, retrieve.
    pub fn run(&self, data: &[u8]) -> Outcome {
        let mut u = Unstructured::new(data);
        let Ok(kind) = u.choose(&self.kinds) else {
            return Outcome::Skipped;
        };
        let Ok(file) = u.choose(&kind.files) else {
            return Outcome::Skipped;
        };
        let mut doc = file.value.clone();
        mutate_some(&mut doc, &mut u, 3);
        let bytes = serde_json::to_vec(&doc).expect("a JSON value");
        // To see what an input does: LPRAG_FUZZ_KEEP=<file> keeps a copy of the mutated
        // file (pretty-printed, to diff against the fixture's).
        if let Some(keep) = std::env::var_os("LPRAG_FUZZ_KEEP") {
            let pretty = serde_json::to_vec_pretty(&doc).expect("a JSON value");
            std::fs::write(keep, pretty).expect("write the kept copy");
            eprintln!("{}: {}", kind.name, file.path.display());
        }
        std::fs::write(&file.path, bytes).expect("write the mutated file");
        let outcome = match open(&kind.name, &kind.dir) {
            Ok(r) => {
                self.runtime.block_on(exercise(&*r, &mut u));
                Outcome::Opened
            }
            Err(_) => Outcome::Rejected,
        };
        std::fs::write(&file.path, &file.bytes).expect("restore the fixture file");
        outcome
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// The 64-dimensional hashing encoder the fixtures were written with.
fn encoder() -> Arc<dyn Encoder> {
    Arc::new(
        HashingEncoder::new(HashingEncoderConfig {
            dim: 64,
            ..HashingEncoderConfig::default()
        })
        .expect("a valid hashing encoder"),
    )
}

fn open(name: &str, dir: &Path) -> lprag::Result<Arc<dyn Retriever>> {
    Ok(match name {
        // `lprag`, and `lprag-<predictor>` for the built-in burn predictors.
        lprag if lprag.starts_with("lprag") => Arc::new(LpRag::load(dir, encoder())?),
        "qcg" => Arc::new(QcgRag::load(dir, encoder())?),
        "g2" => Arc::new(G2Rag::load(dir, encoder())?),
        "lesegr" => Arc::new(LesegrRag::load(dir, encoder())?),
        _ => Arc::new(GfmRag::load(dir, encoder())?),
    })
}

/// Retrieve with a selection and a query drawn from the input; check what comes back.
async fn exercise(r: &dyn Retriever, u: &mut Unstructured<'_>) {
    let selection = match u.int_in_range(0u8..=2).unwrap_or(0) {
        0 => Selection::TopK(u.int_in_range(0usize..=8).unwrap_or(3)),
        1 => Selection::Threshold(u.int_in_range(-2i8..=2).unwrap_or(0) as f32 * 0.5),
        _ => Selection::ThresholdTopK {
            threshold: 0.0,
            k: u.int_in_range(0usize..=8).unwrap_or(3),
        },
    };
    let query = match u.choose(&QUERIES) {
        Ok(q) => q.to_string(),
        Err(_) => "Warsaw".to_string(),
    };
    check(r.retrieve(&query, selection).await, selection, r.name());
    let filter = Filter::Documents(vec!["0".into(), "2".into()]);
    check(
        r.retrieve_filtered(&query, selection, &filter).await,
        selection,
        r.name(),
    );
}

fn check(result: lprag::Result<Vec<lprag::ScoredChunk>>, selection: Selection, name: &str) {
    let hits = match result {
        Ok(hits) => hits,
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains("panicked"), "{name}: {message}");
            return;
        }
    };
    if let Selection::TopK(k) | Selection::ThresholdTopK { k, .. } = selection {
        assert!(hits.len() <= k, "{name}: {} hits for k = {k}", hits.len());
    }
    for h in &hits {
        assert!(
            !h.score.is_nan(),
            "{name}: NaN score for chunk {}",
            h.chunk.id
        );
    }
    for w in hits.windows(2) {
        assert!(
            w[0].score >= w[1].score,
            "{name}: hits not best first ({} then {})",
            w[0].score,
            w[1].score
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the scratch folder");
    for entry in std::fs::read_dir(from).expect("read a fixture folder") {
        let entry = entry.expect("a fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

fn collect_json(dir: &Path, out: &mut Vec<JsonFile>) {
    for entry in std::fs::read_dir(dir).expect("read the scratch folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect_json(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            let bytes = std::fs::read(&path).expect("read a fixture file");
            let value = serde_json::from_slice(&bytes).expect("a fixture file is JSON");
            out.push(JsonFile { path, value, bytes });
        }
    }
}
