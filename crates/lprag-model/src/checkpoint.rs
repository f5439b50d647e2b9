//! Per-epoch training checkpoints (see [`GnnLinkPredictor::with_checkpoints`],
//! [`crate::BurnLinkPredictor::with_checkpoints`], [`crate::lesegr::train_lesegr`] and
//! [`crate::gfm::GfmModel::train`]).
//!
//! After every epoch the current weights, the best weights so far, the optimizer's state
//! (Adam's moment estimates, keyed by the parameters' ids, which the weight files keep)
//! and a small JSON state (epochs done, the report, early-stopping counters, a key of the
//! run's inputs) are written to the checkpoint directory, each file atomically. A later run
//! with the same key starts after the last finished epoch exactly where the interrupted
//! one was, or returns the finished result at once when the run had ended.
//!
//! [`GnnLinkPredictor::with_checkpoints`]: crate::GnnLinkPredictor::with_checkpoints

use std::path::{Path, PathBuf};

use burn::optim::ModuleOptimizer;
use burn::store::ModuleSnapshot;
use burn::tensor::Bytes;
use lprag_core::{Error, LinkGraph, Result, TrainReport};
use serde::{Deserialize, Serialize};

use crate::early_stop::EarlyStopping;
use crate::predictor::write_atomic;
use crate::weights::{load_weights, save_weights};

const STATE: &str = "train-state.json";
const CURRENT: &str = "current.bpk";
const BEST: &str = "best.bpk";
const OPTIMIZER: &str = "optimizer.bpk";

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
}

/// A checkpoint directory for one training run.
pub(crate) struct Checkpoints {
    dir: PathBuf,
    key: String,
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
    pub(crate) fn open_keyed(dir: &Path, key: String) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            key,
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

    /// The saved state when it belongs to this run; weights are loaded into `current`
    /// and, when there are best weights, into `best`. `None` (start afresh) when there is
    /// no checkpoint or it belongs to another run.
    pub(crate) fn load<M: ModuleSnapshot>(
        &self,
        current: &mut M,
        best: &mut M,
    ) -> Result<Option<SavedState>> {
        let path = self.dir.join(STATE);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        let state: SavedState =
            serde_json::from_slice(&bytes).map_err(|e| Error::format(&path, e.to_string()))?;
        if state.key != self.key {
            return Ok(None);
        }
        load_weights(current, &self.dir.join(CURRENT))?;
        if state.best_loss.is_some() {
            load_weights(best, &self.dir.join(BEST))?;
        }
        Ok(Some(state))
    }

    /// Record a finished epoch: the `current` weights, the `best` weights when they changed
    /// this epoch, the optimizer's state, then the state. Each file is replaced
    /// atomically; the state goes last.
    pub(crate) fn save<M: ModuleSnapshot>(
        &self,
        state: &SavedState,
        current: &M,
        best: Option<&M>,
        optimizer: &ModuleOptimizer,
    ) -> Result<()> {
        save_weights(current, &self.dir.join(CURRENT))?;
        if let Some(b) = best {
            save_weights(b, &self.dir.join(BEST))?;
        }
        let path = self.dir.join(OPTIMIZER);
        let bytes = optimizer
            .into_bytes()
            .map_err(|e| Error::format(&path, format!("{e:?}")))?;
        write_atomic(&path, &bytes)?;
        let mut state = state.clone();
        state.key = self.key.clone();
        state.optimizer = true;
        let json = serde_json::to_vec_pretty(&state)
            .map_err(|e| Error::format(self.dir.join(STATE), e.to_string()))?;
        write_atomic(&self.dir.join(STATE), &json)
    }

    /// Continue a run: when this directory holds this run's checkpoint, load its weights
    /// into `current` (and the best ones into `best`) and its state into `optimizer`,
    /// restore `stopping` and `report`, and return `(epochs done, finished)`; otherwise
    /// `(0, false)`.
    pub(crate) fn resume<M: ModuleSnapshot>(
        &self,
        current: &mut M,
        mut best: M,
        stopping: &mut EarlyStopping<M>,
        report: &mut TrainReport,
        optimizer: &mut ModuleOptimizer,
    ) -> Result<(usize, bool)> {
        match self.load(current, &mut best)? {
            Some(saved) => {
                if saved.optimizer {
                    let path = self.dir.join(OPTIMIZER);
                    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                    *optimizer = optimizer
                        .clone()
                        .from_bytes(Bytes::from_bytes_vec(bytes))
                        .map_err(|e| Error::format(&path, format!("{e:?}")))?;
                }
                *report = saved.report;
                stopping.restore(saved.best_loss.map(|l| (l, best)), saved.since_best);
                Ok((saved.epochs_done, saved.finished))
            }
            None => Ok((0, false)),
        }
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
