//! The stage cache behind [`LpRagBuilder::work_dir`](crate::LpRagBuilder::work_dir).
//!
//! Each indexing stage's output is written to the work directory as soon as it is done,
//! beside a key: a 64-bit FNV-1a hash of everything the stage's output depends on (its
//! input's key, the component names, the configuration fields it reads). A later build
//! with the same work directory loads every stage whose key still matches and recomputes
//! the rest, so an interrupted build resumes after its last finished stage. Files are
//! written atomically (temporary file, then rename); an unreadable file is recomputed
//! with a warning, never trusted.

use std::path::{Path, PathBuf};

use lprag_core::{Embeddings, Error, LinkGraph, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A stage key: FNV-1a over length-prefixed parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StageKey(pub u64);

/// A [`StageKey`] computed part by part as the bytes arrive: each part's length first
/// ([`KeyHasher::part`]), then its bytes in any number of pieces ([`KeyHasher::eat`]), so
/// the key of a large input needs no copy of it.
pub(crate) struct KeyHasher(u64);

impl KeyHasher {
    /// A hasher with no part yet.
    pub(crate) fn new() -> Self {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }

    /// Start a part of `len` bytes.
    pub(crate) fn part(&mut self, len: usize) {
        self.eat(&(len as u64).to_le_bytes());
    }

    /// Hash the next bytes of the current part.
    pub(crate) fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The key of the parts hashed.
    pub(crate) fn finish(self) -> StageKey {
        StageKey(self.0)
    }
}

impl std::io::Write for KeyHasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.eat(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl StageKey {
    /// The key of `parts`, each length-prefixed so `["ab", "c"]` and `["a", "bc"]` differ.
    pub(crate) fn of(parts: &[&[u8]]) -> Self {
        let mut h = KeyHasher::new();
        for p in parts {
            h.part(p.len());
            h.eat(p);
        }
        h.finish()
    }

    /// This key extended by `parts` (a stage's key from its input's key).
    pub(crate) fn then(self, parts: &[&[u8]]) -> Self {
        let k = self.0.to_le_bytes();
        let mut all: Vec<&[u8]> = vec![&k];
        all.extend_from_slice(parts);
        StageKey::of(&all)
    }

    /// The key of a value's JSON form (`StageKey::of(&[json])`), serialised twice (its
    /// length, then its bytes) instead of held: a million documents' JSON is never whole
    /// in memory.
    pub(crate) fn of_json<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        let mut h = KeyHasher::new();
        h.part(Self::json_len(value)?);
        serde_json::to_writer(&mut h, value)
            .map_err(|e| Error::invalid("work directory key", e.to_string()))?;
        Ok(h.finish())
    }

    /// The length of a value's JSON form, as [`StageKey::of_json`] writes it (for
    /// [`StageKey::of_source`]'s first pass).
    pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> Result<usize> {
        let mut count = ByteCount(0);
        serde_json::to_writer(&mut count, value)
            .map_err(|e| Error::invalid("work directory key", e.to_string()))?;
        Ok(count.0)
    }

    /// The key [`StageKey::of_json`] gives the list of every document of `source`, read
    /// in blocks instead of held: `json_len` is that list's JSON length, measured by a
    /// first pass (`[`, the documents' [`StageKey::json_len`] joined by commas, `]`).
    /// The same key as the slice's, so a work directory resumes either way.
    pub(crate) async fn of_source(
        source: &dyn lprag_core::DocumentSource,
        json_len: usize,
    ) -> Result<Self> {
        let bad = |e: serde_json::Error| Error::invalid("work directory key", e.to_string());
        let mut h = KeyHasher::new();
        h.part(json_len);
        h.eat(b"[");
        let mut blocks = lprag_core::DocumentBlocks::new(source);
        while let Some((start, block)) = blocks.next().await? {
            for (i, d) in block.iter().enumerate() {
                if start + i > 0 {
                    h.eat(b",");
                }
                serde_json::to_writer(&mut h, d).map_err(bad)?;
            }
        }
        h.eat(b"]");
        Ok(h.finish())
    }

    fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The file that marks a directory as a work directory (written when it is first used).
const MARKER: &str = "workdir.json";

/// The stages a build keeps in its work directory, in the order it runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The chunks of the documents.
    Chunks,
    /// One embedding per chunk.
    ChunkEmbeddings,
    /// The chunk graph's edges (mutual k-NN and bridges).
    ChunkGraph,
    /// The synthetic queries and the chunks each links.
    Queries,
    /// One embedding per query.
    QueryEmbeddings,
}

impl Stage {
    /// Every stage, in build order.
    pub(crate) const ALL: [Stage; 5] = [
        Stage::Chunks,
        Stage::ChunkEmbeddings,
        Stage::ChunkGraph,
        Stage::Queries,
        Stage::QueryEmbeddings,
    ];

    /// The stem of the stage's files (`STEM.json` or `STEM.bin`, and `STEM.key`).
    pub(crate) fn file(self) -> &'static str {
        match self {
            Stage::Chunks => "chunks",
            Stage::ChunkEmbeddings => "chunk-embeddings",
            Stage::ChunkGraph => "chunk-graph",
            Stage::Queries => "queries",
            Stage::QueryEmbeddings => "query-embeddings",
        }
    }

    /// The stage's name in `IndexStats::reused_stages` when it was loaded, not computed.
    pub(crate) fn reused_as(self) -> &'static str {
        match self {
            Stage::Chunks => "chunk",
            Stage::ChunkEmbeddings => "embed",
            Stage::ChunkGraph => "graph",
            Stage::Queries => "queries",
            Stage::QueryEmbeddings => "query-embed",
        }
    }
}

/// What one stage reads: every value that determines its output. The stage's key is
/// derived from the whole input ([`StageInput::key`]), and a saved output is used only
/// under the same key, so an input cannot be left out of the key and still reach the
/// computation. Each implementation also says how its output is stored and checked.
pub(crate) trait StageInput {
    /// What the stage produces.
    type Output;
    /// Which stage this is.
    const STAGE: Stage;
    /// The key of every input that determines the output.
    fn key(&self) -> Result<StageKey>;
    /// The output saved under `key`, when it is there and usable (`warn` hears why not).
    fn load(&self, work: &WorkDir, key: StageKey, warn: &dyn Fn(String)) -> Option<Self::Output>;
    /// Save `output` under `key` and hand it back.
    fn save(&self, work: &WorkDir, key: StageKey, output: Self::Output) -> Result<Self::Output>;
}

/// A stage's output, its key (a placeholder without a work directory) and whether it was
/// loaded from the work directory rather than computed.
pub(crate) struct Done<T> {
    pub(crate) output: T,
    pub(crate) key: StageKey,
    pub(crate) reused: bool,
}

/// Run the stage `input` describes: without a work directory, `compute`; with one, the
/// saved output when its key matches, else `compute` and save. `state` is handed to
/// `compute` and back (values the computation moves to another thread and returns), and
/// returned untouched when the stage is loaded.
pub(crate) async fn run_stage<I, S, F, Fut>(
    work: Option<&WorkDir>,
    input: &I,
    warn: &dyn Fn(String),
    state: S,
    compute: F,
) -> Result<(Done<I::Output>, S)>
where
    I: StageInput,
    F: FnOnce(S) -> Fut,
    Fut: std::future::Future<Output = Result<(I::Output, S)>>,
{
    let Some(w) = work else {
        let (output, state) = compute(state).await?;
        let done = Done {
            output,
            key: StageKey(0),
            reused: false,
        };
        return Ok((done, state));
    };
    let key = input.key()?;
    if let Some(output) = input.load(w, key, warn) {
        let done = Done {
            output,
            key,
            reused: true,
        };
        return Ok((done, state));
    }
    let (output, state) = compute(state).await?;
    let output = input.save(w, key, output)?;
    let done = Done {
        output,
        key,
        reused: false,
    };
    Ok((done, state))
}

/// Remove the file `path` when it is there (a missing file is not an error).
pub(crate) fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

/// The work directory's file of every feature row of the link graph (chunks, then
/// questions), written and memory-mapped by a build that keeps its features on disk
/// (`LpRagBuilder::features_on_disk`); rewritten by every such build, never a stage.
pub(crate) const FEATURES_FILE: &str = "features.bin";

/// The work directory's file of the column-wise copy of the chunk rows
/// (`lprag_graph::ColumnIndex::build_in_file`), written and memory-mapped by a build that
/// keeps its features on disk and scans columns; rewritten by every such build, never a
/// stage.
pub(crate) const COLUMNS_FILE: &str = "columns.bin";

/// The work directory's file of the chunk graph stage's k-NN lists (the lists behind its
/// mutual edges, which updates extend): written with the stage, before its key, so that a
/// resumed build keeps them; removed whenever the stage is computed again.
pub(crate) const KNN_FILE: &str = "chunk-knn.bin";

/// The work directory's file of the built-in predictor's cached chunk representations
/// (`GnnLinkPredictor::with_representations_file`), written and memory-mapped by a build
/// that keeps its features on disk; rewritten whenever they are computed, never a stage.
pub(crate) const REPRESENTATIONS_FILE: &str = "representations.bin";

/// Whether `name` is something a build writes into its work directory: the marker, a
/// stage's data (`.json`, `.bin`), key or temporary file, a temporary file of an atomic
/// write (`.tmp…`), the training checkpoints (`train`), or the features, columns, k-NN
/// and representations files ([`FEATURES_FILE`], [`COLUMNS_FILE`], [`KNN_FILE`],
/// [`REPRESENTATIONS_FILE`]).
fn owned(name: &str) -> bool {
    if name == MARKER || name == "train" || name.starts_with(crate::durable::TMP_PREFIX) {
        return true;
    }
    for file in [FEATURES_FILE, COLUMNS_FILE, KNN_FILE, REPRESENTATIONS_FILE] {
        if name == file
            || name
                .strip_prefix('.')
                .is_some_and(|rest| rest.starts_with(file) && rest.contains(".tmp"))
        {
            return true;
        }
    }
    // The graph files' own temporary names: `.STAGE.bin.tmp-…`.
    if let Some(rest) = name.strip_prefix('.') {
        if Stage::ALL.iter().any(|st| rest.starts_with(st.file())) && rest.contains(".tmp") {
            return true;
        }
    }
    Stage::ALL.iter().any(|stage| {
        name.strip_prefix(stage.file()).is_some_and(|rest| {
            matches!(rest, ".json" | ".bin" | ".key" | ".bin.tmp")
                || (rest.starts_with(".bin.") && rest.ends_with(".tmp"))
        })
    })
}

/// What only a build writes into its work directory (a stage key, a temporary file of
/// its atomic writes): a marker-less directory with one of these, and nothing a build
/// does not write, is a work directory of an earlier release or of a build killed before
/// its marker was in place.
fn trace(name: &str) -> bool {
    name.ends_with(".key") || name.starts_with(crate::durable::TMP_PREFIX)
}

/// Where a build may keep its stages: a new or empty directory, or a work directory
/// (its marker, and nothing a build did not write).
const WORK_DIR: lprag_core::dirs::DirSpec = lprag_core::dirs::DirSpec {
    kind: "a work directory",
    marker: MARKER,
    marker_key: Some("lprag_work_dir"),
    owns: Some(owned),
};

/// A work directory holding finished stages, locked for this build while it exists.
#[derive(Debug)]
pub(crate) struct WorkDir {
    dir: PathBuf,
    _lock: lprag_core::dirs::DirLock,
}

impl WorkDir {
    /// Use `dir` for one build: it must be new, empty or a work directory (one written
    /// before the marker existed passes when it holds only stage files); it is created,
    /// marked, and locked until this value is dropped.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] for a directory with anything else in it;
    /// [`Error::Busy`] when another build holds it.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        WORK_DIR.check_or_unmarked(dir, trace)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = lprag_core::dirs::DirLock::acquire(dir, "build")?;
        let marker = dir.join(MARKER);
        if !marker.exists() {
            crate::durable::write_file(&marker, br#"{"lprag_work_dir":1}"#)?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    fn key_path(&self, stage: &str) -> PathBuf {
        self.dir.join(format!("{stage}.key"))
    }

    /// `true` when `stage` was finished with this `key`.
    fn has(&self, stage: &str, key: StageKey) -> bool {
        std::fs::read_to_string(self.key_path(stage)).is_ok_and(|k| k.trim() == key.hex())
    }

    /// Record `stage` as finished with `key` (after its data file is in place), atomically.
    fn mark(&self, stage: &str, key: StageKey) -> Result<()> {
        let path = self.key_path(stage);
        let mut tmp = tempfile::Builder::new()
            .prefix(crate::durable::TMP_PREFIX)
            .tempfile_in(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        std::io::Write::write_all(&mut tmp, key.hex().as_bytes())
            .map_err(|e| Error::io(&path, e))?;
        tmp.persist(&path).map_err(|e| Error::io(&path, e.error))?;
        Ok(())
    }

    /// Forget `stage` (before its data file is rewritten).
    fn unmark(&self, stage: &str) -> Result<()> {
        remove_if_there(&self.key_path(stage))
    }

    /// The JSON output of `stage` when it was finished with `key`; `warn` hears about a
    /// file that could not be read (the stage is then recomputed).
    pub(crate) fn load_json<T: DeserializeOwned>(
        &self,
        stage: &str,
        key: StageKey,
        warn: &dyn Fn(String),
    ) -> Option<T> {
        if !self.has(stage, key) {
            return None;
        }
        let path = self.dir.join(format!("{stage}.json"));
        let read = std::fs::File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                serde_json::from_reader(std::io::BufReader::new(f)).map_err(|e| e.to_string())
            });
        match read {
            Ok(v) => Some(v),
            Err(e) => {
                warn(format!(
                    "work directory: {} unreadable ({e}); recomputing",
                    path.display()
                ));
                None
            }
        }
    }

    /// Save the JSON output of `stage` under `key`.
    pub(crate) fn save_json<T: Serialize>(
        &self,
        stage: &str,
        key: StageKey,
        value: &T,
    ) -> Result<()> {
        self.unmark(stage)?;
        crate::retrievers::common::save_json_atomic(&self.dir, &format!("{stage}.json"), value)?;
        self.mark(stage, key)
    }

    /// The graph output of `stage` when it was finished with `key` (see
    /// [`WorkDir::load_json`]).
    pub(crate) fn load_graph(
        &self,
        stage: &str,
        key: StageKey,
        warn: &dyn Fn(String),
    ) -> Option<LinkGraph> {
        if !self.has(stage, key) {
            return None;
        }
        let path = self.dir.join(format!("{stage}.bin"));
        match lprag_graph::load_link_graph(&path) {
            Ok(g) => Some(g),
            Err(e) => {
                warn(format!(
                    "work directory: {} unreadable ({e}); recomputing",
                    path.display()
                ));
                None
            }
        }
    }

    /// Save the graph output of `stage` under `key` (written to a temporary name, then
    /// renamed).
    pub(crate) fn save_graph(&self, stage: &str, key: StageKey, graph: &LinkGraph) -> Result<()> {
        self.unmark(stage)?;
        let path = self.dir.join(format!("{stage}.bin"));
        let tmp = self.dir.join(format!("{stage}.bin.tmp"));
        lprag_graph::save_link_graph(graph, &tmp)?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        self.mark(stage, key)
    }
}

impl WorkDir {
    /// Embeddings saved as `stage` under `key` with `rows` rows (see
    /// [`WorkDir::load_graph`]).
    pub(crate) fn load_embeddings(
        &self,
        stage: &str,
        key: StageKey,
        rows: usize,
        warn: &dyn Fn(String),
    ) -> Option<Embeddings> {
        self.load_graph(stage, key, warn)
            .map(|g| g.features)
            .filter(|e| e.rows() == rows)
    }

    /// Append the embedding rows saved as `stage` under `key` to `out` when there are
    /// exactly `rows` of them, `dim` wide (read straight into `out`, no second copy);
    /// `false` (with `out` unchanged) when the stage is not there or unusable, which
    /// `warn` hears about.
    pub(crate) fn append_embeddings(
        &self,
        stage: &str,
        key: StageKey,
        rows: usize,
        dim: usize,
        out: &mut Vec<f32>,
        warn: &dyn Fn(String),
    ) -> bool {
        if !self.has(stage, key) {
            return false;
        }
        let path = self.dir.join(format!("{stage}.bin"));
        let before = out.len();
        match lprag_graph::append_feature_rows(&path, dim, out) {
            Ok(n) if n == rows => true,
            Ok(n) => {
                out.truncate(before);
                warn(format!(
                    "work directory: {} holds {n} rows, expected {rows}; recomputing",
                    path.display()
                ));
                false
            }
            Err(e) => {
                warn(format!(
                    "work directory: {} unreadable ({e}); recomputing",
                    path.display()
                ));
                false
            }
        }
    }

    /// The path of `name` in this directory.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The rows `stage` saved under `key`, memory-mapped ([`lprag_graph::map_feature_rows`])
    /// instead of read to the heap: `None` when the stage is not saved under `key`, or its
    /// file is unreadable or not `rows` rows of width `dim` (`warn` hears why; the stage is
    /// then recomputed).
    pub(crate) fn map_rows(
        &self,
        stage: &str,
        key: StageKey,
        rows: usize,
        dim: usize,
        warn: &dyn Fn(String),
    ) -> Option<lprag_core::Embeddings> {
        if !self.has(stage, key) {
            return None;
        }
        let path = self.dir.join(format!("{stage}.bin"));
        match lprag_graph::map_feature_rows(&path, dim) {
            Ok(e) if e.rows() == rows => Some(e),
            Ok(e) => {
                warn(format!(
                    "work directory: {} holds {} rows, expected {rows}; recomputing",
                    path.display(),
                    e.rows()
                ));
                None
            }
            Err(e) => {
                warn(format!(
                    "work directory: {} unreadable ({e}); recomputing",
                    path.display()
                ));
                None
            }
        }
    }

    /// A writer of `stage`'s rows, streamed to its file; the stage is forgotten until
    /// [`WorkDir::finish_rows`] marks it.
    pub(crate) fn rows_writer(
        &self,
        stage: &str,
        dim: usize,
    ) -> Result<lprag_graph::FeatureRowsWriter> {
        self.unmark(stage)?;
        Ok(lprag_graph::FeatureRowsWriter::create(
            self.dir.join(format!("{stage}.bin")),
            dim,
        )?)
    }

    /// Finish a [`WorkDir::rows_writer`] of `stage` and mark the stage done under `key`.
    pub(crate) fn finish_rows(
        &self,
        stage: &str,
        key: StageKey,
        rows: lprag_graph::FeatureRowsWriter,
    ) -> Result<()> {
        rows.finish()?;
        self.mark(stage, key)
    }

    /// Save embedding rows (`dim` wide, row-major, possibly part of a larger buffer) as
    /// `stage` under `key`, readable by [`WorkDir::load_embeddings`] and
    /// [`WorkDir::append_embeddings`].
    pub(crate) fn save_rows(
        &self,
        stage: &str,
        key: StageKey,
        dim: usize,
        rows: &[f32],
    ) -> Result<()> {
        self.unmark(stage)?;
        // Written to a temporary file and renamed by `save_feature_rows` itself.
        lprag_graph::save_feature_rows(dim, rows, self.dir.join(format!("{stage}.bin")))?;
        self.mark(stage, key)
    }
}

/// Save `emb` as `stage` under `key` when there is a work directory (a graph without
/// edges), and hand it back.
pub(crate) fn keep_embeddings(
    work: Option<&WorkDir>,
    stage: &str,
    key: StageKey,
    emb: Embeddings,
) -> Result<Embeddings> {
    let Some(w) = work else {
        return Ok(emb);
    };
    let g = LinkGraph {
        num_chunks: emb.rows(),
        features: emb,
        edges: Vec::new(),
    };
    w.save_graph(stage, key, &g)?;
    Ok(g.features)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_keys_are_the_keys_of_the_whole_bytes() {
        // Work directories written before the keys were streamed keep resuming.
        let value = serde_json::json!({"docs": ["a", "bé", {"k": [1, 2.5, null]}]});
        let bytes = serde_json::to_vec(&value).unwrap();
        assert_eq!(StageKey::of_json(&value).unwrap(), StageKey::of(&[&bytes]));
        let mut h = KeyHasher::new();
        h.part(5);
        h.eat(b"ab");
        h.eat(b"cde");
        h.part(0);
        assert_eq!(h.finish(), StageKey::of(&[b"abcde", b""]));
        assert_ne!(StageKey::of(&[b"ab", b"c"]), StageKey::of(&[b"a", b"bc"]));
    }

    #[test]
    fn a_work_directory_killed_before_its_marker_is_still_its_own() {
        // What a build killed while writing the marker leaves: its temporary file alone.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".lprag-tmpAbC123"), b"{\"lprag_").unwrap();
        let w = WorkDir::open(dir.path()).unwrap();
        assert!(dir.path().join(MARKER).is_file());
        drop(w);
        // A user's folder with a generic temporary file is not.
        let users = tempfile::tempdir().unwrap();
        std::fs::write(users.path().join(".tmpAbC123"), b"mine").unwrap();
        assert!(matches!(
            WorkDir::open(users.path()),
            Err(Error::ForeignDirectory { .. })
        ));
    }

    #[test]
    fn keys_separate_parts_and_chain() {
        assert_ne!(StageKey::of(&[b"ab", b"c"]), StageKey::of(&[b"a", b"bc"]));
        assert_eq!(StageKey::of(&[b"x"]), StageKey::of(&[b"x"]));
        let k = StageKey::of(&[b"x"]);
        assert_ne!(k.then(&[b"y"]), k.then(&[b"z"]));
        assert_ne!(k.then(&[b"y"]), StageKey::of(&[b"y"]));
    }

    #[test]
    fn stages_round_trip_and_mismatches_and_damage_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let w = WorkDir::open(dir.path()).unwrap();
        let warnings = std::cell::RefCell::new(Vec::new());
        let warn = |m: String| warnings.borrow_mut().push(m);
        let k = StageKey::of(&[b"one"]);
        assert!(w.load_json::<Vec<u32>>("s", k, &warn).is_none());
        w.save_json("s", k, &vec![1u32, 2, 3]).unwrap();
        assert_eq!(w.load_json::<Vec<u32>>("s", k, &warn), Some(vec![1, 2, 3]));
        assert!(w
            .load_json::<Vec<u32>>("s", StageKey::of(&[b"two"]), &warn)
            .is_none());
        assert!(warnings.borrow().is_empty());
        std::fs::write(dir.path().join("s.json"), b"[1, 2,").unwrap();
        assert!(w.load_json::<Vec<u32>>("s", k, &warn).is_none());
        assert_eq!(warnings.borrow().len(), 1, "{:?}", warnings.borrow());
        assert!(warnings.borrow()[0].contains("s.json"));

        let g = LinkGraph {
            features: lprag_core::Embeddings::new(2, vec![1.0, 0.0, 0.0, 1.0]).unwrap(),
            num_chunks: 2,
            edges: vec![],
        };
        w.save_graph("g", k, &g).unwrap();
        let back = w.load_graph("g", k, &warn).unwrap();
        assert_eq!(back.features.as_slice(), g.features.as_slice());
        std::fs::write(dir.path().join("g.bin"), b"junk").unwrap();
        assert!(w.load_graph("g", k, &warn).is_none());
        assert_eq!(warnings.borrow().len(), 2);
    }
}
