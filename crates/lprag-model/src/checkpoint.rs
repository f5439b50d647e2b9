//! Per-epoch training checkpoints (see [`GnnLinkPredictor::with_checkpoints`],
//! [`crate::BurnLinkPredictor::with_checkpoints`], [`crate::lesegr::train_lesegr`] and
//! [`crate::gfm::GfmModel::train`]).
//!
//! After every epoch the current weights, the best weights so far and the optimizer's
//! state (Adam's moment estimates, keyed by the parameters' ids, which the weight files
//! keep) are written as one set into a fresh subdirectory `set-…`, synced; then a small
//! JSON state (epochs done, the report, early-stopping counters, a key of the run's
//! inputs, the set's name) replaces `train-state.json` atomically — that rename commits the
//! epoch, and older sets are removed. A crash anywhere leaves the last committed epoch
//! whole. A later run with the same key starts after the last finished epoch exactly where
//! the interrupted one was, or returns the finished result at once when the run had ended;
//! a checkpoint that cannot be read whole is reported as a warning and training starts
//! afresh. One run holds the directory at a time ([`lprag_core::dirs::DirLock`]).
//!
//! [`GnnLinkPredictor::with_checkpoints`]: crate::GnnLinkPredictor::with_checkpoints

use std::path::{Path, PathBuf};

use burn::optim::ModuleOptimizer;
use burn::store::ModuleSnapshot;
use burn::tensor::Bytes;
use lprag_core::{Error, LinkGraph, Progress, Result, TrainReport};
use serde::{Deserialize, Serialize};

use crate::early_stop::EarlyStopping;
use crate::shared::write_atomic;
use crate::weights::{load_weights, save_weights};

const STATE: &str = "train-state.json";
const CURRENT: &str = "current.bpk";
const BEST: &str = "best.bpk";
const OPTIMIZER: &str = "optimizer.bpk";
/// The marker written when a checkpoint directory is first used.
const MARKER: &str = "checkpoints.json";
/// Name prefix of one epoch's set of files.
const SET_PREFIX: &str = "set-";

/// Whether `name` is something a training writes into its checkpoint directory.
fn owned(name: &str) -> bool {
    let stem = name.strip_suffix(".fnv1a64").unwrap_or(name);
    // Temporary names: of atomic writes, and of weights files (`current.tmp`,
    // `current.bpk.tmp` for its checksum) in checkpoints of earlier releases.
    let tmp = name
        .strip_suffix(".tmp")
        .is_some_and(|s| ["current", "best", "current.bpk", "best.bpk"].contains(&s));
    matches!(stem, STATE | CURRENT | BEST | OPTIMIZER | MARKER)
        || name.starts_with(SET_PREFIX)
        || name.starts_with(lprag_core::dirs::TMP_PREFIX)
        || tmp
}

/// Where checkpoints may be written: a new or empty directory, or a checkpoint directory
/// (its marker, and nothing a training did not write).
const CHECKPOINT_DIR: lprag_core::dirs::DirSpec = lprag_core::dirs::DirSpec {
    kind: "a training checkpoint directory",
    marker: MARKER,
    marker_key: Some("lprag_checkpoints"),
    owns: Some(owned),
};

/// What only a training writes into its checkpoint directory: a marker-less directory
/// with one of these (and nothing a training does not write) is a checkpoint directory
/// of an earlier release, or of a training killed before its marker was in place.
fn trace(name: &str) -> bool {
    name == STATE || name.starts_with(SET_PREFIX) || name.starts_with(lprag_core::dirs::TMP_PREFIX)
}

/// What a checkpoint records besides the weights.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SavedState {
    /// Key of the graph and configurations the run was started with.
    pub key: String,
    /// Epochs finished.
    pub epochs_done: usize,
    /// `true` once training ended (all epochs run or stopped early).
    pub finished: bool,
    /// The report so far (`seconds` excluded).
    pub report: TrainReport,
    /// Best validation loss so far, when `best.bpk` holds its weights.
    pub best_loss: Option<f32>,
    /// Epochs since the best one.
    pub since_best: usize,
    /// Whether `optimizer.bpk` holds the optimizer's state after `epochs_done` (checkpoints
    /// written before it was saved have none; their runs resume with fresh moments).
    #[serde(default)]
    pub optimizer: bool,
    /// The subdirectory holding this epoch's files; `None` in checkpoints written before
    /// sets existed (their files lie in the directory itself).
    #[serde(default)]
    pub set: Option<String>,
}

/// A checkpoint directory for one training run, locked while this value exists.
pub(crate) struct Checkpoints {
    dir: PathBuf,
    key: String,
    _lock: lprag_core::dirs::DirLock,
}

/// A run's key: FNV-1a over everything that determines the run (inputs, configuration,
/// starting weights), fed in pieces. Two runs with the same key resume each other.
pub(crate) struct RunKey(u64);

impl RunKey {
    pub(crate) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self
    }

    pub(crate) fn usize(&mut self, v: usize) -> &mut Self {
        self.bytes(&(v as u64).to_le_bytes())
    }

    /// A length-prefixed list of `u32`s.
    pub(crate) fn u32s(&mut self, vs: &[u32]) -> &mut Self {
        self.usize(vs.len());
        for v in vs {
            self.bytes(&v.to_le_bytes());
        }
        self
    }

    /// A length-prefixed list of `f32`s (bit patterns).
    pub(crate) fn f32s(&mut self, vs: &[f32]) -> &mut Self {
        self.usize(vs.len());
        for v in vs {
            self.bytes(&v.to_le_bytes());
        }
        self
    }

    /// A configuration, as JSON.
    pub(crate) fn json(&mut self, config: &impl Serialize) -> Result<&mut Self> {
        let bytes = serde_json::to_vec(config)
            .map_err(|e| Error::invalid("training checkpoint key", e.to_string()))?;
        Ok(self.bytes(&bytes))
    }

    pub(crate) fn finish(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// FNV-1a over the graph (sizes, features, edges) and the run's configuration (for the
/// built-in predictor, `(model, train)`).
fn run_key(graph: &LinkGraph, config: &impl Serialize) -> Result<String> {
    let mut h = RunKey::new();
    h.usize(graph.num_chunks)
        .usize(graph.features.rows())
        .usize(graph.features.dim());
    for v in graph.features.as_slice() {
        h.bytes(&v.to_le_bytes());
    }
    for e in &graph.edges {
        h.bytes(&e.a.to_le_bytes())
            .bytes(&e.b.to_le_bytes())
            .bytes(&e.weight.to_le_bytes())
            .bytes(&[e.kind as u8]);
    }
    Ok(h.json(config)?.finish())
}

impl Checkpoints {
    /// Checkpoints in `dir` (created) for a run on `graph` with `config`.
    pub(crate) fn open(dir: &Path, graph: &LinkGraph, config: &impl Serialize) -> Result<Self> {
        Self::open_keyed(dir, run_key(graph, config)?)
    }

    /// Checkpoints in `dir` (created) for the run with this key ([`RunKey`]).
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` holds anything a training did not write;
    /// [`Error::Busy`] when another training holds it.
    pub(crate) fn open_keyed(dir: &Path, key: String) -> Result<Self> {
        CHECKPOINT_DIR.check_or_unmarked(dir, trace)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = lprag_core::dirs::DirLock::acquire(dir, "training")?;
        let marker = dir.join(MARKER);
        if !marker.exists() {
            write_atomic(&marker, br#"{"lprag_checkpoints":1}"#)?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            key,
            _lock: lock,
        })
    }

    /// [`Checkpoints::open_keyed`] when a directory is given (the key is computed only
    /// then); `None` without one.
    pub(crate) fn open_if(
        dir: Option<&Path>,
        key: impl FnOnce() -> Result<String>,
    ) -> Result<Option<Self>> {
        dir.map(|dir| Self::open_keyed(dir, key()?)).transpose()
    }

    /// The saved state when it belongs to this run, with its weights loaded into copies
    /// of `current` and `best` (`(state, current, best)`); `Ok(None)` (start afresh) when
    /// there is no checkpoint or it belongs to another run. A checkpoint that cannot be
    /// read whole (a corrupt state, a missing or damaged weights file) is an `Err` with
    /// what was wrong, which the caller reports before starting afresh.
    fn load<M: ModuleSnapshot + Clone>(
        &self,
        current: &M,
        best: &M,
    ) -> Result<Option<(SavedState, M, M)>> {
        let path = self.dir.join(STATE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let state: SavedState =
            serde_json::from_slice(&bytes).map_err(|e| Error::format(&path, e.to_string()))?;
        if state.key != self.key {
            return Ok(None);
        }
        let files = self.files_of(&state)?;
        let (mut current, mut best) = (current.clone(), best.clone());
        load_weights(&mut current, &files.join(CURRENT))?;
        if state.best_loss.is_some() {
            load_weights(&mut best, &files.join(BEST))?;
        }
        Ok(Some((state, current, best)))
    }

    /// The directory holding `state`'s files: its set, or (older checkpoints) the
    /// checkpoint directory itself.
    fn files_of(&self, state: &SavedState) -> Result<PathBuf> {
        match &state.set {
            None => Ok(self.dir.clone()),
            Some(set) if set.starts_with(SET_PREFIX) && !set.contains(['/', '\\', '.']) => {
                Ok(self.dir.join(set))
            }
            Some(set) => Err(Error::format(
                self.dir.join(STATE),
                format!("`set` names `{set}`, not a set of this directory"),
            )),
        }
    }

    /// Record a finished epoch as one set: a fresh `set-…` subdirectory with the `current`
    /// weights, the best weights (`best` when they changed this epoch, else linked from
    /// the previous set) and the optimizer's state, synced; then the state naming the set
    /// replaces `train-state.json` atomically, and older sets are removed.
    pub(crate) fn save<M: ModuleSnapshot>(
        &self,
        state: &SavedState,
        current: &M,
        best: Option<&M>,
        optimizer: &ModuleOptimizer,
    ) -> Result<()> {
        let previous = self.committed_set();
        let set_dir = tempfile::Builder::new()
            .prefix(SET_PREFIX)
            .tempdir_in(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        let set_path = set_dir.path().to_path_buf();
        save_weights(current, &set_path.join(CURRENT))?;
        match best {
            Some(b) => save_weights(b, &set_path.join(BEST))?,
            None if state.best_loss.is_some() => {
                let from = previous.clone().ok_or_else(|| {
                    Error::format(
                        self.dir.join(STATE),
                        "the best weights are not in any committed checkpoint",
                    )
                })?;
                for name in [BEST.to_string(), format!("{BEST}.fnv1a64")] {
                    let (src, dst) = (from.join(&name), set_path.join(&name));
                    if src.exists() {
                        std::fs::hard_link(&src, &dst)
                            .or_else(|_| std::fs::copy(&src, &dst).map(|_| ()))
                            .map_err(|e| Error::io(&dst, e))?;
                    }
                }
            }
            None => {}
        }
        let path = set_path.join(OPTIMIZER);
        let bytes = optimizer
            .into_bytes()
            .map_err(|e| Error::format(&path, format!("{e:?}")))?;
        write_atomic(&path, &bytes)?;
        lprag_core::dirs::sync_dir(&set_path)?;
        let name = set_dir
            .keep()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        lprag_core::dirs::sync_dir(&self.dir)?;
        let mut state = state.clone();
        state.key = self.key.clone();
        state.optimizer = true;
        state.set = Some(name.clone());
        let json = serde_json::to_vec_pretty(&state)
            .map_err(|e| Error::format(self.dir.join(STATE), e.to_string()))?;
        write_atomic(&self.dir.join(STATE), &json)?;
        self.remove_stale(&name);
        Ok(())
    }

    /// The set the committed state names, when there is one.
    fn committed_set(&self) -> Option<PathBuf> {
        let bytes = std::fs::read(self.dir.join(STATE)).ok()?;
        let state: SavedState = serde_json::from_slice(&bytes).ok()?;
        state.key.eq(&self.key).then_some(())?;
        self.files_of(&state).ok()
    }

    /// Remove every set but `keep` and the files of pre-set checkpoints (best effort:
    /// what cannot be removed now goes at the next epoch).
    fn remove_stale(&self, keep: &str) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(SET_PREFIX) && name != keep {
                let _ = std::fs::remove_dir_all(e.path());
            }
            let stem = name.strip_suffix(".fnv1a64").unwrap_or(&name);
            if matches!(stem, CURRENT | BEST | OPTIMIZER) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Continue a run: when this directory holds this run's checkpoint, load its weights
    /// into `current` (and the best ones into `best`) and its state into `optimizer`,
    /// restore `stopping` and `report`, and return `(epochs done, finished)`; otherwise
    /// `(0, false)`.
    ///
    /// A checkpoint that cannot be read whole is never trusted: `progress` hears what was
    /// wrong and the run starts afresh (`(0, false)`), with nothing of it loaded.
    pub(crate) fn resume<M: ModuleSnapshot + Clone>(
        &self,
        current: &mut M,
        best: M,
        stopping: &mut EarlyStopping<M>,
        report: &mut TrainReport,
        optimizer: &mut ModuleOptimizer,
        progress: &dyn Progress,
    ) -> Result<(usize, bool)> {
        match self.read_whole(current, &best, optimizer) {
            Ok(Some((saved, weights, best, restored))) => {
                *current = weights;
                if let Some(o) = restored {
                    *optimizer = o;
                }
                *report = saved.report;
                stopping.restore(saved.best_loss.map(|l| (l, best)), saved.since_best);
                Ok((saved.epochs_done, saved.finished))
            }
            Ok(None) => Ok((0, false)),
            Err(e) => {
                progress.warn(&format!(
                    "training checkpoint in {} is unusable ({e}); training from the start",
                    self.dir.display()
                ));
                Ok((0, false))
            }
        }
    }

    /// This run's checkpoint read whole: state, weights, best weights and (when saved)
    /// the optimizer's state, or the first thing that failed.
    #[allow(clippy::type_complexity)]
    fn read_whole<M: ModuleSnapshot + Clone>(
        &self,
        current: &M,
        best: &M,
        optimizer: &ModuleOptimizer,
    ) -> Result<Option<(SavedState, M, M, Option<ModuleOptimizer>)>> {
        let Some((saved, weights, best)) = self.load(current, best)? else {
            return Ok(None);
        };
        let restored = if saved.optimizer {
            let path = self.files_of(&saved)?.join(OPTIMIZER);
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            Some(
                optimizer
                    .clone()
                    .from_bytes(Bytes::from_bytes_vec(bytes))
                    .map_err(|e| Error::format(&path, format!("{e:?}")))?,
            )
        } else {
            None
        };
        Ok(Some((saved, weights, best, restored)))
    }

    /// Record epoch `epochs_done` (1-based) after it ran: `current` weights, the best
    /// ones when this epoch improved them, the optimizer's state and the run's state.
    pub(crate) fn record<M: ModuleSnapshot>(
        &self,
        epochs_done: usize,
        finished: bool,
        report: &TrainReport,
        stopping: &EarlyStopping<M>,
        current: &M,
        optimizer: &ModuleOptimizer,
    ) -> Result<()> {
        let state = SavedState {
            key: String::new(),
            epochs_done,
            finished,
            report: report.clone(),
            best_loss: stopping.best_loss(),
            since_best: stopping.since_best(),
            optimizer: true,
            set: None,
        };
        let best_changed = stopping.since_best() == 0 && stopping.best_loss().is_some();
        self.save(
            &state,
            current,
            best_changed.then(|| stopping.best()).flatten(),
            optimizer,
        )
    }
}
