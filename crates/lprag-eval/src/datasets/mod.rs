//! Dataset loaders: the HippoRAG file family (MuSiQue, HotpotQA, 2WikiMultihopQA),
//! MultiHop-RAG, BEIR (`corpus.jsonl`, `queries.jsonl`, `qrels/`), and a generic JSONL
//! format for users' own data.
//!
//! Every loader returns a [`Dataset`]: a corpus of [`Document`]s and a list of
//! [`Question`]s whose gold passages are indices into that corpus.
//!
//! # Passages and gold (the HippoRAG protocol)
//!
//! A passage is the string `title + "\n" + text` ([`passage_text`]). The gold passages of
//! a question are matched to corpus entries by title **and** text: first exactly, then
//! ignoring all whitespace (which absorbs the two ways of joining HotpotQA/2Wiki
//! sentences). A gold passage that matches no corpus entry is kept in
//! [`Question::unmatched_gold`]: it still counts in the Recall@k denominator, as in
//! HippoRAG's evaluation, where gold passages are compared as strings, and it can never be
//! retrieved. Loaders never fail on unmatched gold; callers report it
//! ([`Dataset::unmatched_gold`]).
//!
//! Corpus entries with identical title and text are kept once (HippoRAG's index stores
//! each distinct passage once); [`Dataset::duplicates_dropped`] counts the rest.
//! Documents get `id` = their position in [`Dataset::corpus`] (as a string), except in
//! the JSONL format, where the file's own ids are kept. Each document's
//! `metadata["source_index"]` is the 0-based position of its record in the corpus file.
//!
//! # Errors
//!
//! A malformed file gives [`Error::Malformed`](crate::Error), naming the file, the
//! 0-based record index and the field, for example:
//!
//! ```text
//! questions.json: record 4, field `paragraphs[2].is_supporting`: expected true or false, found a string
//! ```

mod beir;
mod hipporag;
mod json;
mod jsonl;
mod multihop_rag;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use lprag_core::Document;
use serde::{Deserialize, Serialize};

pub use beir::load_beir;
pub use hipporag::{load_hipporag, load_hipporag_corpus};
pub use json::join_sentences;
pub use jsonl::load_jsonl;
pub use multihop_rag::load_multihop_rag;

use crate::{Error, Result};

/// The file formats [`load_dir`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetFormat {
    /// The HippoRAG family: `questions.json` (MuSiQue `paragraphs`, or HotpotQA/2Wiki
    /// `context` + `supporting_facts`) and `corpus.json` (a list of `{title, text}` or an
    /// object title → sentences). See [`load_hipporag`].
    HippoRag,
    /// MultiHop-RAG: queries with `evidence_list`, a corpus of news articles with `body`.
    /// See [`load_multihop_rag`].
    MultiHopRag,
    /// The generic JSONL format: `corpus.jsonl` and `questions.jsonl`. See [`load_jsonl`].
    Jsonl,
    /// BEIR: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`. See [`load_beir`].
    Beir,
}

impl DatasetFormat {
    /// The name used on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            DatasetFormat::HippoRag => "hipporag",
            DatasetFormat::MultiHopRag => "multihop-rag",
            DatasetFormat::Jsonl => "jsonl",
            DatasetFormat::Beir => "beir",
        }
    }
}

impl fmt::Display for DatasetFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DatasetFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hipporag" => Ok(DatasetFormat::HippoRag),
            "multihop-rag" | "multihoprag" => Ok(DatasetFormat::MultiHopRag),
            "jsonl" => Ok(DatasetFormat::Jsonl),
            "beir" => Ok(DatasetFormat::Beir),
            _ => Err(Error::invalid(
                "dataset format",
                format!("`{s}` (known: hipporag, multihop-rag, jsonl, beir)"),
            )),
        }
    }
}

/// One evaluation question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The question's id from the file (or its 0-based record index when it has none).
    pub id: String,
    /// The question text.
    pub question: String,
    /// Accepted answers: the answer(s) first, then the aliases. May be empty
    /// (retrieval-only data).
    pub answers: Vec<String>,
    /// Gold passages found in the corpus: indices into [`Dataset::corpus`], sorted, unique.
    pub gold: Vec<usize>,
    /// Graded relevance of each [`Question::gold`] passage, in the same order (BEIR
    /// qrels); empty means grade 1 for all, as in the other formats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grades: Vec<u32>,
    /// Titles of gold passages that match no corpus entry (they count in the Recall@k
    /// denominator and can never be retrieved).
    pub unmatched_gold: Vec<String>,
    /// Extra string fields of the record worth keeping (for example MultiHop-RAG's
    /// `question_type`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl Question {
    /// Number of gold passages, matched or not: the Recall@k denominator.
    pub fn gold_count(&self) -> usize {
        self.gold.len() + self.unmatched_gold.len()
    }
}

/// A loaded benchmark: a corpus and its questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    /// A short name (the directory's name for [`load_dir`]).
    pub name: String,
    /// The format the files were read as.
    pub format: DatasetFormat,
    /// The passages. `corpus[i]` is passage `i`; gold indices point here.
    pub corpus: Vec<Document>,
    /// The questions, in file order.
    pub questions: Vec<Question>,
    /// Corpus records dropped because an earlier record had the same title and text.
    pub duplicates_dropped: usize,
}

impl Dataset {
    /// Total number of gold passages (over all questions) that match no corpus entry.
    pub fn unmatched_gold(&self) -> usize {
        self.questions.iter().map(|q| q.unmatched_gold.len()).sum()
    }

    /// Total number of gold passages over all questions.
    pub fn gold_passages(&self) -> usize {
        self.questions.iter().map(Question::gold_count).sum()
    }

    /// Keep only the first `n` questions (the corpus is unchanged).
    pub fn truncate_questions(&mut self, n: usize) {
        self.questions.truncate(n);
    }

    /// Move `n` questions out of the evaluation set into labelled training pairs
    /// `(question, gold document ids)`, for retrievers with a supervised mode. The
    /// questions taken are the first `n` in order of the FNV-1a hash of their ids — a
    /// fixed, id-determined pseudo-random pick that does not depend on file order; the
    /// rest stay, in their order. Questions without a gold passage in the corpus are
    /// never taken.
    pub fn split_for_training(&mut self, n: usize) -> lprag::Labelled {
        let fnv = |s: &str| {
            s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let mut order: Vec<usize> = (0..self.questions.len())
            .filter(|&i| !self.questions[i].gold.is_empty())
            .collect();
        order.sort_by_key(|&i| (fnv(&self.questions[i].id), i));
        let mut take = vec![false; self.questions.len()];
        for &i in order.iter().take(n) {
            take[i] = true;
        }
        let mut pairs = Vec::new();
        let mut rest = Vec::new();
        for (q, t) in std::mem::take(&mut self.questions).into_iter().zip(take) {
            if t {
                let docs = q.gold.iter().map(|&g| self.corpus[g].id.clone()).collect();
                pairs.push((q.question, docs));
            } else {
                rest.push(q);
            }
        }
        self.questions = rest;
        pairs
    }

    /// Map from [`Document::id`] to position in the corpus.
    pub fn document_index(&self) -> HashMap<&str, usize> {
        self.corpus
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.as_str(), i))
            .collect()
    }
}

/// The HippoRAG passage string: `title + "\n" + text`.
pub fn passage_text(doc: &Document) -> String {
    format!("{}\n{}", doc.title, doc.text)
}

/// Collects corpus entries, drops exact duplicates, and matches gold passages to them.
pub(crate) struct CorpusBuilder {
    docs: Vec<Document>,
    exact: HashMap<String, usize>,
    squashed: HashMap<String, usize>,
    by_title: HashMap<String, Vec<usize>>,
    by_key: HashMap<(String, String), usize>,
    duplicates: usize,
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn squashed_key(title: &str, text: &str) -> String {
    format!("{}\u{1}{}", squash(title), squash(text))
}

impl CorpusBuilder {
    pub fn new() -> Self {
        Self {
            docs: Vec::new(),
            exact: HashMap::new(),
            squashed: HashMap::new(),
            by_title: HashMap::new(),
            by_key: HashMap::new(),
            duplicates: 0,
        }
    }

    /// Add a passage read from record `source_index`; returns its corpus index (that of
    /// the earlier identical passage when it is a duplicate).
    pub fn push(
        &mut self,
        source_index: usize,
        title: String,
        text: String,
        metadata: BTreeMap<String, String>,
    ) -> usize {
        let key = format!("{title}\n{text}");
        if let Some(&i) = self.exact.get(&key) {
            self.duplicates += 1;
            return i;
        }
        let i = self.docs.len();
        self.exact.insert(key, i);
        self.squashed
            .entry(squashed_key(&title, &text))
            .or_insert(i);
        self.by_title.entry(title.clone()).or_default().push(i);
        let mut doc = Document::new(i.to_string(), title, text);
        doc.metadata = metadata;
        doc.metadata
            .insert("source_index".into(), source_index.to_string());
        self.docs.push(doc);
        i
    }

    /// Index a metadata value (for example a URL) for [`CorpusBuilder::match_key`].
    pub fn add_key(&mut self, kind: &str, value: &str, index: usize) {
        self.by_key
            .entry((kind.to_string(), value.to_string()))
            .or_insert(index);
    }

    /// The corpus entry with this title and text (exactly, else ignoring whitespace).
    pub fn match_passage(&self, title: &str, text: &str) -> Option<usize> {
        self.exact
            .get(&format!("{title}\n{text}"))
            .or_else(|| self.squashed.get(&squashed_key(title, text)))
            .copied()
    }

    /// The corpus entry with this title, when exactly one has it.
    pub fn match_unique_title(&self, title: &str) -> Option<usize> {
        match self.by_title.get(title).map(Vec::as_slice) {
            Some([i]) => Some(*i),
            _ => None,
        }
    }

    /// The first corpus entry with this title.
    pub fn match_first_title(&self, title: &str) -> Option<usize> {
        self.by_title.get(title).and_then(|v| v.first()).copied()
    }

    /// The corpus entry registered under `(kind, value)` with [`CorpusBuilder::add_key`].
    pub fn match_key(&self, kind: &str, value: &str) -> Option<usize> {
        self.by_key
            .get(&(kind.to_string(), value.to_string()))
            .copied()
    }

    pub fn finish(self) -> (Vec<Document>, usize) {
        (self.docs, self.duplicates)
    }
}

/// Accumulates the gold passages of one question.
#[derive(Default)]
pub(crate) struct GoldSet {
    gold: Vec<usize>,
    unmatched: Vec<String>,
}

impl GoldSet {
    pub fn add(&mut self, found: Option<usize>, title: &str) {
        match found {
            Some(i) => {
                if !self.gold.contains(&i) {
                    self.gold.push(i);
                }
            }
            None => {
                if !self.unmatched.iter().any(|t| t == title) {
                    self.unmatched.push(title.to_string());
                }
            }
        }
    }

    pub fn finish(mut self) -> (Vec<usize>, Vec<String>) {
        self.gold.sort_unstable();
        (self.gold, self.unmatched)
    }
}

/// The files of a dataset directory, as [`load_dir`] finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetFiles {
    /// The questions (queries) file.
    pub questions: PathBuf,
    /// The corpus file.
    pub corpus: PathBuf,
    /// The format, when the file names alone decide it (`*.jsonl`, `MultiHopRAG.json`).
    pub format: Option<DatasetFormat>,
}

/// Find the question and corpus files in `dir`.
///
/// Looked for, in this order: `questions.jsonl` + `corpus.jsonl` (JSONL);
/// `MultiHopRAG.json` + `corpus.json` (MultiHop-RAG); `questions.json` + `corpus.json`;
/// `NAME.json` + `NAME_corpus.json` (the naming of the HippoRAG repository, for exactly one
/// `NAME`).
pub fn find_files(dir: &Path) -> Result<DatasetFiles> {
    if !dir.is_dir() {
        return Err(Error::UnknownLayout {
            path: dir.to_path_buf(),
            message: "not a directory".into(),
        });
    }
    let has = |name: &str| dir.join(name).is_file();
    let files = |q: &str, c: &str, format| DatasetFiles {
        questions: dir.join(q),
        corpus: dir.join(c),
        format,
    };
    if has("queries.jsonl") && has("corpus.jsonl") && dir.join("qrels").is_dir() {
        return Ok(files(
            "queries.jsonl",
            "corpus.jsonl",
            Some(DatasetFormat::Beir),
        ));
    }
    if has("questions.jsonl") && has("corpus.jsonl") {
        return Ok(files(
            "questions.jsonl",
            "corpus.jsonl",
            Some(DatasetFormat::Jsonl),
        ));
    }
    if has("MultiHopRAG.json") && has("corpus.json") {
        return Ok(files(
            "MultiHopRAG.json",
            "corpus.json",
            Some(DatasetFormat::MultiHopRag),
        ));
    }
    if has("questions.json") && has("corpus.json") {
        return Ok(files("questions.json", "corpus.json", None));
    }
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut stems: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix("_corpus.json").map(str::to_string))
        .filter(|stem| has(&format!("{stem}.json")))
        .collect();
    stems.sort();
    match stems.as_slice() {
        [stem] => Ok(files(
            &format!("{stem}.json"),
            &format!("{stem}_corpus.json"),
            None,
        )),
        [] => Err(Error::UnknownLayout {
            path: dir.to_path_buf(),
            message: "no dataset files found (expected questions.json + corpus.json, \
                      NAME.json + NAME_corpus.json, MultiHopRAG.json + corpus.json, or \
                      questions.jsonl + corpus.jsonl)"
                .into(),
        }),
        _ => Err(Error::UnknownLayout {
            path: dir.to_path_buf(),
            message: format!(
                "several datasets in one directory ({}); point at one of them",
                stems.join(", ")
            ),
        }),
    }
}

/// Load the dataset in `dir`, finding its files with [`find_files`] and its format from the
/// file names or, failing that, from the first question record (a record with
/// `evidence_list` or `query` is MultiHop-RAG, anything else the HippoRAG family).
///
/// `format` overrides the detection.
pub fn load_dir(dir: impl AsRef<Path>, format: Option<DatasetFormat>) -> Result<Dataset> {
    let dir = dir.as_ref();
    let files = find_files(dir)?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into());
    let mut ds = match format.or(files.format) {
        Some(DatasetFormat::Beir) => load_beir(dir, None)?,
        Some(DatasetFormat::Jsonl) => load_jsonl(&files.questions, &files.corpus)?,
        Some(DatasetFormat::MultiHopRag) => load_multihop_rag(&files.questions, &files.corpus)?,
        Some(DatasetFormat::HippoRag) => load_hipporag(&files.questions, &files.corpus)?,
        None => {
            let text = json::read_text(&files.questions)?;
            let records = json::parse_list(&files.questions, &text)?;
            let multihop = records
                .first()
                .and_then(|r| r.as_object())
                .is_some_and(|o| {
                    o.contains_key("evidence_list")
                        || (o.contains_key("query") && !o.contains_key("question"))
                });
            if multihop {
                multihop_rag::from_records(&files.questions, &records, &files.corpus)?
            } else {
                hipporag::from_records(&files.questions, &records, &files.corpus)?
            }
        }
    };
    ds.name = name;
    Ok(ds)
}

/// The file stem of `path`, as a dataset name.
pub(crate) fn stem_name(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into())
}

#[cfg(test)]
pub(crate) mod tests;
