//! [`BurnLinkPredictor`]: a [`PairModel`] served as an [`lprag_core::LinkPredictor`]: its
//! state (chunk context, degrees, positional rows, cached chunk representations), scoring
//! per query neighbourhood, attach, save and restore.

use std::path::Path;
use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};
use lprag_core::{
    ChunkId, Embeddings, Error, LinkGraph, LinkPredictor, Progress, Result, TrainReport,
};
use serde::{Deserialize, Serialize};

use super::local::{full_graph, LocalGraph, QueryView};
use super::train::{train, Run};
use super::*;
use crate::cached::{CachedScorer, Join};
use crate::config::{InferenceMode, ModelConfig, TrainConfig};
use crate::context::ChunkContext;
use crate::host::HostGraph;
use crate::positional::{laplacian_eigenmaps, mean_rows, ITERATIONS as PE_ITERATIONS};
use crate::shared::{normalize_vec, read_versioned, rows_tensor, write_json};

/// What [`BurnLinkPredictor`] writes beside the weights.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct BurnMeta {
    pub(super) format_version: u32,
    pub(crate) name: String,
    pub(crate) train: TrainConfig,
    pub(crate) d_in: usize,
    /// The architecture of a built-in GNN ([`crate::GnnLinkPredictor`]); absent for any
    /// other model, whose `init` the caller passes back to restore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<ModelConfig>,
}

/// What a built-in model does its own way instead of the engine's generic path: the
/// NCN/GAE/MLP family trains on full-graph or host-aggregated steps with its residual
/// penalty, and scores through an exact cache of the chunks' layer outputs (the query's
/// messages added on the host). Everything else (state, checks, attach, save, restore)
/// is the engine's.
pub(crate) trait FastPath<M>: Send + Sync {
    /// Train a model on `graph` (replaces the engine's trainer).
    fn fit(
        &self,
        train: &TrainConfig,
        device: &Device,
        checkpoints: Option<&Path>,
        graph: &LinkGraph,
        progress: &dyn Progress,
    ) -> Result<(M, ChunkContext, TrainReport)>;

    /// The chunk-side state that scores queries without a pass over the graph; `stored`:
    /// the chunks' representations computed before (saved with an index), used instead of
    /// computing them.
    fn cache(
        &self,
        model: &M,
        ctx: &ChunkContext,
        mode: InferenceMode,
        stored: Option<Embeddings>,
    ) -> Result<CachedScorer>;

    /// The architecture, recorded in the manifest.
    fn model_config(&self) -> &ModelConfig;
}

pub(super) struct Served<M> {
    pub(super) model: Option<M>,
    pub(super) d_in: usize,
    pub(super) ctx: ChunkContext,
    pub(super) wsum: Vec<f32>,
    pub(super) positions: ChunkPositions,
    /// Every chunk's representation without a query, for a model that has them
    /// ([`PairModel::node_representations`]).
    pub(super) reps: Option<ChunkReps>,
    /// The fast path's cache, for a model that has one ([`FastPath::cache`]).
    pub(super) cached: Option<CachedScorer>,
}

/// The chunks' node representations, `[num_chunks, width]`, row-major.
pub(super) struct ChunkReps {
    pub(super) width: usize,
    pub(super) rows: Vec<f32>,
}

/// Chunks within `hops` edges of `start` (`start` included): those whose representation a
/// query node joined to `start` can change (its messages reach `hops − 1` further, and
/// the joined chunks' degrees one more).
pub(super) fn within_hops(
    host: &HostGraph,
    start: &[u32],
    hops: usize,
) -> std::collections::HashSet<u32> {
    let mut seen: std::collections::HashSet<u32> = start.iter().copied().collect();
    let mut frontier: Vec<u32> = start.to_vec();
    for _ in 0..hops {
        let mut next = Vec::new();
        for &i in &frontier {
            for &(j, _) in host.neighbors(i) {
                if seen.insert(j) {
                    next.push(j);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    seen
}

/// Positional encodings of the chunks, `[num_chunks, dim]`, for a model that asks for them
/// ([`LinkModel::positional_dim`]; `dim` 0: none).
pub(super) struct ChunkPositions {
    pub(super) dim: usize,
    pub(super) rows: Vec<f32>,
}

impl ChunkPositions {
    /// Laplacian eigenmaps of the whole `graph` (seeded), the chunks' rows kept.
    pub(super) fn new(graph: &LinkGraph, dim: usize, seed: u64) -> Result<Self> {
        if dim == 0 {
            return Ok(Self {
                dim,
                rows: Vec::new(),
            });
        }
        let host = HostGraph::from_edges(
            graph.num_nodes(),
            graph.edges.iter().map(|e| (e.a, e.b, e.weight)),
        )?;
        let mut rows = laplacian_eigenmaps(host.lists(), dim, PE_ITERATIONS, seed);
        // One global scale (rotation invariance is kept): the mean squared distance across
        // the graph's edges becomes 1, whatever the corpus size.
        let mut sum = 0.0f64;
        for e in &graph.edges {
            let (a, b) = (e.a as usize * dim, e.b as usize * dim);
            sum += (0..dim)
                .map(|k| ((rows[a + k] - rows[b + k]) as f64).powi(2))
                .sum::<f64>();
        }
        let mean = sum / graph.edges.len().max(1) as f64;
        if mean > 0.0 {
            let s = (1.0 / mean.sqrt()) as f32;
            rows.iter_mut().for_each(|x| *x *= s);
        }
        rows.truncate(graph.num_chunks * dim);
        Ok(Self { dim, rows })
    }

    pub(super) fn chunk(&self, i: u32) -> &[f32] {
        &self.rows[i as usize * self.dim..(i as usize + 1) * self.dim]
    }

    /// A query node's row: the mean of the chunks it joins (`None`: every chunk).
    pub(super) fn query(&self, join: Option<&[u32]>) -> Vec<f32> {
        if self.dim == 0 {
            return Vec::new();
        }
        match join {
            Some(j) => mean_rows(&self.rows, self.dim, j.iter().copied()),
            None => mean_rows(&self.rows, self.dim, 0..(self.rows.len() / self.dim) as u32),
        }
    }
}

/// Any [`LinkModel`] (or [`PairModel`]) as an [`lprag_core::LinkPredictor`]: trained by the
/// library's trainer
/// (mini-batches of target edges with their `hops`-hop neighbourhoods, uniform or
/// degree-based negatives, target-link masking, BCE, Adam with weight decay, validation on
/// held-out synthetic queries with early stopping, the step limit of [`TrainConfig`]),
/// scored per query on the query's neighbourhood, saved as burnpack weights with a
/// versioned manifest.
///
/// Not taken from [`TrainConfig`]: `correction_penalty` (a custom model has no residual
/// the trainer knows of) and `step_graph` (steps always use the neighbourhood).
pub struct BurnLinkPredictor<M: PairModel> {
    pub(super) name: String,
    pub(super) init: Arc<ModelInit<M>>,
    pub(super) train: TrainConfig,
    pub(super) device: Device,
    pub(super) state: Option<Served<M>>,
    pub(super) checkpoints: Option<std::path::PathBuf>,
    /// A built-in model's own training and scoring ([`FastPath`]).
    pub(super) fast: Option<Arc<dyn FastPath<M>>>,
}

impl<M: PairModel> std::fmt::Debug for BurnLinkPredictor<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BurnLinkPredictor")
            .field("name", &self.name)
            .field("train", &self.train)
            .field(
                "trained",
                &self.state.as_ref().is_some_and(|s| s.model.is_some()),
            )
            .finish()
    }
}

impl<M: PairModel> BurnLinkPredictor<M> {
    /// An untrained predictor named `name` (recorded in saved indexes) that makes its
    /// model with `init(d_in, device)` and trains it as `train` says, on the CPU.
    pub fn new(
        name: impl Into<String>,
        train: TrainConfig,
        init: impl Fn(usize, &Device) -> M + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            init: Arc::new(init),
            train,
            device: Device::flex(),
            state: None,
            checkpoints: None,
            fast: None,
        }
    }

    /// A built-in model with its own fast path, named `name`, on `device`.
    pub(crate) fn with_fast_path(
        name: impl Into<String>,
        train: TrainConfig,
        device: Device,
        init: impl Fn(usize, &Device) -> M + Send + Sync + 'static,
        fast: Arc<dyn FastPath<M>>,
    ) -> Self {
        Self {
            fast: Some(fast),
            ..Self::new(name, train, init).with_device(device)
        }
    }

    /// Checkpoint training in `dir` after every epoch and resume from it, as
    /// [`crate::GnnLinkPredictor::with_checkpoints`] does: a later
    /// [`LinkPredictor::fit`] on the same graph with the same name and [`TrainConfig`]
    /// starts after the last finished epoch (or returns the finished result at once);
    /// anything else starts afresh. Adam's moment estimates are saved with the weights, so
    /// a resumed run continues as the uninterrupted one would.
    pub fn with_checkpoints(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// Train and score on `device` (for example `Device::cuda(0)` with the `cuda`
    /// feature); training runs on `device.autodiff()`.
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The training configuration.
    pub fn train_config(&self) -> &TrainConfig {
        &self.train
    }

    /// Replace the built-in model's fast path.
    pub(crate) fn set_fast_path(&mut self, fast: Arc<dyn FastPath<M>>) {
        self.fast = Some(fast);
    }

    /// The fast path's cache, once the model is trained or restored.
    pub(crate) fn cached_scorer(&self) -> Option<&CachedScorer> {
        self.state.as_ref().and_then(|s| s.cached.as_ref())
    }

    /// How many chunks the model serves on, once trained or restored.
    pub(crate) fn num_chunks(&self) -> Option<usize> {
        self.state.as_ref().map(|s| s.ctx.num_chunks())
    }

    /// The trained model, once [`LinkPredictor::fit`] or [`BurnLinkPredictor::restore`]
    /// made one.
    pub fn model(&self) -> Option<&M> {
        self.state.as_ref().and_then(|s| s.model.as_ref())
    }

    /// Refuse, before `init` allocates anything, a restore whose model needs at least
    /// `min_parameters` weights while the weights file in `dir` cannot hold them (two bytes
    /// each, the least any float format stores). `restore` builds the model with the
    /// graph's width, which it checks against the manifest, so only sizes a custom `init`
    /// takes from elsewhere (a configuration file, say) need this; the built-in VGAE, PEG
    /// and SEAL restorers call it with their configuration's bound.
    ///
    /// # Errors
    /// [`Error::Io`] when the weights file cannot be read, [`Error::Format`] when it is too
    /// small for `min_parameters`.
    pub fn check_capacity(dir: &Path, min_parameters: u128) -> Result<()> {
        crate::weights::check_capacity(&dir.join(WEIGHTS_FILE), min_parameters)
    }

    /// Restore a predictor from the directory [`LinkPredictor::save`] wrote, with the
    /// same `init` the saved model was made with, attached to `graph` (for
    /// `LpRag::load_with`, the index's graph).
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::Format`] for a missing or unreadable manifest, another
    /// format version, or weights that do not fit the model `init` makes.
    pub fn restore(
        dir: &Path,
        graph: &LinkGraph,
        init: impl Fn(usize, &Device) -> M + Send + Sync + 'static,
    ) -> Result<Self> {
        Self::restore_on(dir, graph, init, Device::flex())
    }

    /// [`BurnLinkPredictor::restore`] on `device`.
    pub fn restore_on(
        dir: &Path,
        graph: &LinkGraph,
        init: impl Fn(usize, &Device) -> M + Send + Sync + 'static,
        device: Device,
    ) -> Result<Self> {
        let path = dir.join(META_FILE);
        let meta: BurnMeta = read_versioned(&path, BURN_PREDICTOR_FORMAT_VERSION)?;
        if graph.features.dim() != meta.d_in {
            return Err(Error::DimensionMismatch {
                location: format!("BurnLinkPredictor::restore ({})", path.display()),
                expected: meta.d_in,
                actual: graph.features.dim(),
            });
        }
        let mut model = init(meta.d_in, &device);
        crate::weights::load_weights(&mut model, &dir.join(WEIGHTS_FILE))?;
        let mut p = Self {
            name: meta.name,
            init: Arc::new(init),
            train: meta.train,
            device,
            state: None,
            checkpoints: None,
            fast: None,
        };
        p.serve(Some(model), graph, None)?;
        Ok(p)
    }

    /// Serve `model` (trained or restored) on `graph`; `stored`: the fast path's cached
    /// chunk representations for this model on this graph, read back from a save.
    pub(crate) fn serve_model(
        &mut self,
        model: Option<M>,
        graph: &LinkGraph,
        stored: Option<Embeddings>,
    ) -> Result<()> {
        let ctx = ChunkContext::new(graph)?;
        self.serve_context(model, graph, ctx, None, stored)
    }

    /// Whether the fast path's cached chunk representations are read from a mapped file.
    pub(crate) fn representations_mapped(&self) -> bool {
        self.cached_scorer().is_some_and(CachedScorer::rows_mapped)
    }

    /// Serve `model` on `graph`; `positions` are the chunks' encodings when the caller
    /// already computed them for this graph (training does), else they are computed here.
    pub(super) fn serve(
        &mut self,
        model: Option<M>,
        graph: &LinkGraph,
        positions: Option<ChunkPositions>,
    ) -> Result<()> {
        let ctx = ChunkContext::new(graph)?;
        self.serve_context(model, graph, ctx, positions, None)
    }

    /// [`Self::serve`] with the chunk context already built from `graph` (and the fast
    /// path's `stored` representations, when read back from a save).
    pub(super) fn serve_context(
        &mut self,
        model: Option<M>,
        graph: &LinkGraph,
        ctx: ChunkContext,
        positions: Option<ChunkPositions>,
        stored: Option<Embeddings>,
    ) -> Result<()> {
        let wsum = ctx.host.weight_sums();
        let dim = model.as_ref().map_or(0, |m| m.pair_positional_dim());
        let positions = match positions {
            Some(p) if p.dim == dim => p,
            _ => ChunkPositions::new(graph, dim, self.train.seed)?,
        };
        let mut st = Served {
            model,
            d_in: graph.features.dim(),
            ctx,
            wsum,
            positions,
            reps: None,
            cached: None,
        };
        match (&st.model, &self.fast) {
            (Some(m), Some(fast)) => {
                st.cached = Some(fast.cache(m, &st.ctx, self.train.inference, stored)?);
            }
            (Some(m), None) => st.reps = chunk_representations(m, &st, &self.device),
            (None, _) => {}
        }
        self.state = Some(st);
        Ok(())
    }

    /// Whether this predictor keeps every chunk's node representation and re-encodes, per
    /// query, only the candidates near the chunks the query joins (a trained or restored
    /// [`LinkModel`]; a pair-level [`PairModel`] such as SEAL encodes each query's whole
    /// neighbourhood).
    pub fn caches_representations(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.reps.is_some())
    }

    pub(super) fn served(&self) -> Result<(&M, &Served<M>)> {
        let st = self.state.as_ref().ok_or_else(|| {
            Error::NotReady(format!(
                "the link predictor '{}' has not been trained or restored",
                self.name
            ))
        })?;
        let m = st.model.as_ref().ok_or_else(|| {
            Error::NotReady(format!(
                "the link predictor '{}' has a graph but no trained weights",
                self.name
            ))
        })?;
        Ok((m, st))
    }

    /// The chunks a query joins (sorted), `None` for every chunk.
    pub(super) fn join_of(
        &self,
        st: &Served<M>,
        q: &[f32],
        nearest: &[ChunkId],
    ) -> Option<Vec<u32>> {
        let mut j = match self.train.inference {
            InferenceMode::JoinAll => return None,
            InferenceMode::Isolated => Vec::new(),
            InferenceMode::JoinTopK(k) => {
                let k = k.min(st.ctx.num_chunks());
                if nearest.len() >= k {
                    nearest[..k].iter().map(|&c| c as u32).collect()
                } else {
                    st.ctx.join(q, self.train.inference)
                }
            }
        };
        j.sort_unstable();
        j.dedup();
        Some(j)
    }

    /// Logits of `q` (normalised) against `cands` on the neighbourhood of the query and the
    /// candidates (`full`: on the whole chunk graph).
    pub(super) fn score_query(
        &self,
        model: &M,
        st: &Served<M>,
        q: &[f32],
        nearest: &[ChunkId],
        cands: &[u32],
        full: bool,
    ) -> Vec<f32> {
        let view = QueryView {
            ctx: &st.ctx,
            wsum: &st.wsum,
            join: self.join_of(st, q, nearest),
        };
        let qid = view.qid();
        let q_pos = st.positions.query(view.join.as_deref());
        if let (false, Some(reps), Some(join)) = (full, &st.reps, &view.join) {
            let near = within_hops(&st.ctx.host, join, model.pair_hops());
            if cands.iter().any(|c| !near.contains(c)) {
                if let Some(logits) =
                    self.score_cached(model, st, reps, &view, q, &q_pos, cands, &near)
                {
                    return logits;
                }
            }
        }
        let g = if full {
            full_graph(&view, model.pair_hops())
        } else {
            let mut seeds = vec![qid];
            seeds.extend_from_slice(cands);
            LocalGraph::build(
                &seeds,
                model.pair_hops(),
                &|i, out| view.neighbours(i, out),
                &|i| view.degree(i),
            )
        };
        let (x, batch) = query_inputs(&g, st, q, &q_pos, &self.device);
        let pairs: Vec<(u32, u32)> = cands.iter().map(|&c| (0, g.local[&c])).collect();
        let logits = model.score_pairs(x, &batch, &Pairs::new(&pairs, &self.device));
        logits
            .into_data()
            .try_into_vec::<f32>()
            .unwrap_or_else(|_| vec![f32::NAN; cands.len()])
    }

    /// [`Self::score_query`] with the kept chunk representations: the query and the
    /// candidates in `near` are encoded on their neighbourhood, the other candidates' rows
    /// come from `reps`; `None` when the model gives no representations.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn score_cached(
        &self,
        model: &M,
        st: &Served<M>,
        reps: &ChunkReps,
        view: &QueryView<'_>,
        q: &[f32],
        q_pos: &[f32],
        cands: &[u32],
        near: &std::collections::HashSet<u32>,
    ) -> Option<Vec<f32>> {
        let qid = view.qid();
        let mut seeds = vec![qid];
        seeds.extend(cands.iter().copied().filter(|c| near.contains(c)));
        let g = LocalGraph::build(
            &seeds,
            model.pair_hops(),
            &|i, out| view.neighbours(i, out),
            &|i| view.degree(i),
        );
        let (x, batch) = query_inputs(&g, st, q, q_pos, &self.device);
        let h_local = model.node_representations(x, &batch)?;
        // Rows: the local ones (query first, then the near candidates), then the kept ones.
        let far: Vec<u32> = cands
            .iter()
            .copied()
            .filter(|c| !near.contains(c))
            .collect();
        let w = reps.width;
        let mut kept = Vec::with_capacity(far.len() * w);
        for &c in &far {
            kept.extend_from_slice(&reps.rows[c as usize * w..(c as usize + 1) * w]);
        }
        let local_rows: Vec<i64> = seeds.iter().map(|s| g.local[s] as i64).collect();
        let h_near = h_local.select(
            0,
            Tensor::<1, Int>::from_data(TensorData::new(local_rows, [seeds.len()]), &self.device),
        );
        let h = Tensor::cat(
            vec![h_near, rows_tensor(kept, far.len(), w, &self.device)],
            0,
        );
        let (mut next_near, mut next_far) = (1u32, seeds.len() as u32);
        let pairs: Vec<(u32, u32)> = cands
            .iter()
            .map(|c| {
                let row = if near.contains(c) {
                    next_near += 1;
                    next_near - 1
                } else {
                    next_far += 1;
                    next_far - 1
                };
                (0, row)
            })
            .collect();
        let logits = model.score_representations(h, &Pairs::new(&pairs, &self.device))?;
        Some(
            logits
                .into_data()
                .try_into_vec::<f32>()
                .unwrap_or_else(|_| vec![f32::NAN; cands.len()]),
        )
    }

    pub(super) fn checked(
        &self,
        query: &[f32],
        candidates: &[ChunkId],
    ) -> Result<(&M, &Served<M>, Vec<u32>)> {
        let (m, st) = self.served()?;
        lprag_core::check_score_args(
            &format!("BurnLinkPredictor '{}'", self.name),
            st.d_in,
            st.ctx.num_chunks(),
            query,
            candidates,
        )?;
        Ok((m, st, candidates.iter().map(|&c| c as u32).collect()))
    }

    /// A copy that shares the trained weights (burn parameters are shared handles),
    /// attached to `graph`, whose feature width must be the model's.
    pub(crate) fn attached_copy(&self, graph: &LinkGraph) -> Result<Self> {
        if let Some(st) = &self.state {
            if st.model.is_some() && st.d_in != graph.features.dim() {
                return Err(Error::DimensionMismatch {
                    location: format!(
                        "BurnLinkPredictor '{}' attach_copy (feature width)",
                        self.name
                    ),
                    expected: st.d_in,
                    actual: graph.features.dim(),
                });
            }
        }
        let mut copy = BurnLinkPredictor {
            name: self.name.clone(),
            init: self.init.clone(),
            train: self.train.clone(),
            device: self.device.clone(),
            state: None,
            checkpoints: self.checkpoints.clone(),
            fast: self.fast.clone(),
        };
        let model = self.state.as_ref().and_then(|s| s.model.clone());
        copy.serve(model, graph, None)?;
        Ok(copy)
    }

    /// The chunk graph the predictor is attached to (normalised chunk features and
    /// chunk–chunk edges).
    pub(crate) fn chunk_graph(&self) -> Result<LinkGraph> {
        let (_, st) = self.served()?;
        Ok(LinkGraph {
            features: st.ctx.features.clone(),
            num_chunks: st.ctx.num_chunks(),
            edges: st.ctx.edges.clone(),
        })
    }

    /// Logits from one forward pass over the whole chunk graph plus the query node (the
    /// reference [`LinkPredictor::score`]'s neighbourhood path is tested against; each call
    /// costs a pass over every chunk and edge).
    pub fn score_full_graph(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        let (m, st, cands) = self.checked(query, candidates)?;
        Ok(self.score_query(m, st, &normalize_vec(query), &[], &cands, true))
    }
}

/// The features (`q` for the query node) and the batch (with `q_pos` as the query's
/// positional row) of `g`, a neighbourhood of the chunk graph plus the query node.
pub(super) fn query_inputs<M>(
    g: &LocalGraph,
    st: &Served<M>,
    q: &[f32],
    q_pos: &[f32],
    device: &Device,
) -> (Tensor<2>, GraphBatch) {
    let qid = st.ctx.num_chunks() as u32;
    let x = g.features(
        st.d_in,
        |i| {
            if i == qid {
                q
            } else {
                st.ctx.features.row(i as usize)
            }
        },
        device,
    );
    let batch = g.to_device_with(
        qid as usize + 1,
        st.positions.dim,
        |i| {
            if i == qid {
                q_pos
            } else {
                st.positions.chunk(i)
            }
        },
        device,
    );
    (x, batch)
}

/// Every chunk's representation on the chunk graph without a query (one pass over the
/// whole graph), or `None` for a model without node representations.
pub(super) fn chunk_representations<M: PairModel>(
    model: &M,
    st: &Served<M>,
    device: &Device,
) -> Option<ChunkReps> {
    let view = QueryView {
        ctx: &st.ctx,
        wsum: &st.wsum,
        join: Some(Vec::new()),
    };
    let qid = view.qid();
    let g = full_graph(&view, model.pair_hops());
    let zeros = vec![0.0f32; st.d_in];
    let q_pos = st.positions.query(Some(&[]));
    let (x, batch) = query_inputs(&g, st, &zeros, &q_pos, device);
    let h = model.node_representations(x, &batch)?;
    let [_, width] = h.dims();
    let all = h.into_data().try_into_vec::<f32>().ok()?;
    let mut rows = vec![0.0f32; qid as usize * width];
    for c in 0..qid {
        let li = g.local[&c] as usize;
        rows[c as usize * width..(c as usize + 1) * width]
            .copy_from_slice(&all[li * width..(li + 1) * width]);
    }
    Some(ChunkReps { width, rows })
}

impl<M: PairModel> LinkPredictor for BurnLinkPredictor<M> {
    fn name(&self) -> &str {
        &self.name
    }

    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> Result<TrainReport> {
        if let Some(fast) = self.fast.clone() {
            let started = std::time::Instant::now();
            let (model, ctx, mut report) = fast.fit(
                &self.train,
                &self.device,
                self.checkpoints.as_deref(),
                graph,
                progress,
            )?;
            self.serve_context(Some(model), graph, ctx, None, None)?;
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
        let run = Run {
            name: &self.name,
            init: &*self.init,
            train: &self.train,
            device: &self.device,
            checkpoints: self.checkpoints.as_deref(),
        };
        let (model, report, positions) = train(&run, graph, progress)?;
        self.serve(Some(model), graph, positions)?;
        Ok(report)
    }

    fn copies_on_attach(&self) -> bool {
        true
    }

    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        Some(
            self.attached_copy(graph)
                .map(|copy| Box::new(copy) as Box<dyn LinkPredictor>),
        )
    }

    fn attach(&mut self, graph: &LinkGraph) -> Result<()> {
        if let Some(st) = &self.state {
            if st.model.is_some() && st.d_in != graph.features.dim() {
                return Err(Error::DimensionMismatch {
                    location: format!("BurnLinkPredictor '{}' attach (feature width)", self.name),
                    expected: st.d_in,
                    actual: graph.features.dim(),
                });
            }
        }
        let model = self.state.take().and_then(|s| s.model);
        self.serve(model, graph, None)
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.score_near(query, &[], candidates)
    }

    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        let (m, st, cands) = self.checked(query, candidates)?;
        if let Some(&bad) = nearest.iter().find(|&&c| c >= st.ctx.num_chunks()) {
            return Err(Error::invalid(
                format!("BurnLinkPredictor '{}' (nearest)", self.name),
                format!("chunk id {bad} out of range"),
            ));
        }
        if cands.is_empty() {
            return Ok(Vec::new());
        }
        let q = normalize_vec(query);
        if let Some(cache) = &st.cached {
            let join = Join::for_query(&st.ctx, self.train.inference, &q, nearest);
            return Ok(cache.score(&st.ctx.features, &st.ctx.host, &q, &join, &cands));
        }
        Ok(self.score_query(m, st, &q, nearest, &cands, false))
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let (m, st) = self.served()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let meta = BurnMeta {
            format_version: BURN_PREDICTOR_FORMAT_VERSION,
            name: self.name.clone(),
            train: self.train.clone(),
            d_in: st.d_in,
            model: self.fast.as_ref().map(|f| f.model_config().clone()),
        };
        write_json(&dir.join(META_FILE), &meta)?;
        crate::weights::save_weights(m, &dir.join(WEIGHTS_FILE))
    }
}
