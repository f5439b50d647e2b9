//! [`GnnLinkPredictor`]: the burn link predictors behind [`lprag_core::LinkPredictor`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;
use lprag_core::{
    ChunkId, Embeddings, Error, LinkGraph, LinkPredictor, Progress, Result, TrainReport,
};
use serde::{Deserialize, Serialize};

use crate::cached::{CachedScorer, Join};
use crate::config::{InferenceMode, ModelConfig, PredictorKind, TrainConfig};
use crate::context::ChunkContext;
use crate::host::{MessagePassing, PairBatch};
use crate::net::LinkNet;
use crate::shared::{normalize_vec, read_versioned, write_json};

mod train;

/// Version of the on-disk format written by [`GnnLinkPredictor::save`].
pub const PREDICTOR_FORMAT_VERSION: u32 = 1;

const META_FILE: &str = "predictor.json";
const WEIGHTS_FILE: &str = "weights.bpk";
const GRAPH_FILE: &str = "chunks.graph";

/// A GNN (or MLP) link predictor trained in burn: NCN, GAE or MLP per [`ModelConfig`].
///
/// ```no_run
/// use lprag_model::{GnnLinkPredictor, ModelConfig, TrainConfig};
/// let predictor = GnnLinkPredictor::new(ModelConfig::ncn(), TrainConfig::default());
/// ```
pub struct GnnLinkPredictor {
    model: ModelConfig,
    train: TrainConfig,
    device: Device,
    state: Option<Trained>,
    checkpoints: Option<PathBuf>,
}

impl std::fmt::Debug for GnnLinkPredictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GnnLinkPredictor")
            .field("model", &self.model)
            .field("train", &self.train)
            .field("trained", &self.state.as_ref().map(|s| s.net.is_some()))
            .finish()
    }
}

struct Trained {
    /// `None` until trained or loaded (an attached but untrained predictor cannot score).
    net: Option<LinkNet>,
    d_in: usize,
    ctx: ChunkContext,
    /// The chunks' node representations under `net` (present whenever `net` is).
    cache: Option<CachedScorer>,
}

impl Trained {
    fn new(
        net: Option<LinkNet>,
        d_in: usize,
        ctx: ChunkContext,
        mc: &ModelConfig,
        mode: InferenceMode,
    ) -> Result<Self> {
        let cache = match &net {
            Some(net) => Some(CachedScorer::new(
                net.to_host()?,
                mc.aggregation,
                &ctx.features,
                &ctx.host,
                mode == InferenceMode::JoinAll,
            )?),
            None => None,
        };
        Ok(Self {
            net,
            d_in,
            ctx,
            cache,
        })
    }
}

impl GnnLinkPredictor {
    /// An untrained predictor on the CPU (burn's flex backend).
    pub fn new(model: ModelConfig, train: TrainConfig) -> Self {
        Self::with_device(model, train, Device::flex())
    }

    /// An untrained predictor on `device` (for example `Device::cuda(0)` with the `cuda`
    /// feature). Training runs on `device.autodiff()`.
    pub fn with_device(model: ModelConfig, train: TrainConfig, device: Device) -> Self {
        Self {
            model,
            train,
            device,
            state: None,
            checkpoints: None,
        }
    }

    /// Checkpoint training in `dir` after every epoch and resume from it: a later
    /// [`LinkPredictor::fit`] on the same graph with the same configurations starts after
    /// the last finished epoch (or returns the finished result at once), so an interrupted
    /// training run loses at most one epoch. Another graph or configuration starts afresh
    /// and overwrites the checkpoint.
    ///
    /// Each epoch draws its shuffle and negatives from its own generator (seeded by
    /// [`TrainConfig::seed`] and the epoch number), so a resumed run sees the same batches
    /// as an uninterrupted one, and Adam's moment estimates are saved with the weights
    /// (`optimizer.bpk`), so the resumed run trains on exactly as the uninterrupted one
    /// would have. A checkpoint written before the optimizer state was saved still
    /// resumes, with fresh moments.
    pub fn with_checkpoints(mut self, dir: impl Into<PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// A predictor restored from a directory written by [`LinkPredictor::save`].
    pub fn from_dir(dir: &Path) -> Result<Self> {
        Self::from_dir_on(dir, Device::flex())
    }

    /// [`GnnLinkPredictor::from_dir`] on `device`.
    pub fn from_dir_on(dir: &Path, device: Device) -> Result<Self> {
        let meta = read_meta(dir)?;
        let mut p = Self::with_device(meta.model, meta.train, device);
        p.restore(dir)?;
        Ok(p)
    }

    /// Restore what [`LinkPredictor::save`] wrote under `dir` into this instance (on its
    /// device).
    fn restore(&mut self, dir: &Path) -> Result<()> {
        let meta = read_meta(dir)?;
        let graph = lprag_graph::load_link_graph(dir.join(GRAPH_FILE))?;
        if graph.features.dim() != meta.d_in {
            return Err(Error::format(
                dir.join(GRAPH_FILE),
                format!(
                    "feature width {} but the model expects {}",
                    graph.features.dim(),
                    meta.d_in
                ),
            ));
        }
        crate::weights::check_capacity(
            &dir.join(WEIGHTS_FILE),
            meta.model.min_parameters(meta.d_in),
        )?;
        let mut net = LinkNet::new(&meta.model, meta.d_in, &self.device);
        crate::weights::load_weights(&mut net, &dir.join(WEIGHTS_FILE))?;
        self.model = meta.model;
        self.train = meta.train;
        let ctx = ChunkContext::new(&graph)?;
        self.state = Some(Trained::new(
            Some(net),
            meta.d_in,
            ctx,
            &self.model,
            self.train.inference,
        )?);
        Ok(())
    }

    /// The architecture.
    pub fn model_config(&self) -> &ModelConfig {
        &self.model
    }

    /// The training configuration.
    pub fn train_config(&self) -> &TrainConfig {
        &self.train
    }

    fn trained(&self) -> Result<(&LinkNet, &Trained)> {
        let st = self.state.as_ref().ok_or_else(|| {
            Error::NotReady("the link predictor has not been trained or loaded".into())
        })?;
        let net = st.net.as_ref().ok_or_else(|| {
            Error::NotReady("the link predictor has a graph but no trained weights".into())
        })?;
        Ok((net, st))
    }

    /// Check query width, finiteness and candidate ids; the candidates as node ids.
    fn checked(
        &self,
        queries: &Embeddings,
        candidates: &[ChunkId],
    ) -> Result<(&LinkNet, &Trained, Vec<u32>)> {
        let (net, st) = self.trained()?;
        if queries.dim() != st.d_in {
            return Err(Error::DimensionMismatch {
                location: "GnnLinkPredictor::score (query vector)".into(),
                expected: st.d_in,
                actual: queries.dim(),
            });
        }
        let nc = st.ctx.num_chunks();
        if let Some(&bad) = candidates.iter().find(|&&c| c >= nc) {
            return Err(Error::invalid(
                "GnnLinkPredictor::score (candidates)",
                format!("chunk id {bad} out of range: the graph has {nc} chunks"),
            ));
        }
        if let Some(i) = queries
            .iter()
            .position(|q| q.iter().any(|x| !x.is_finite()))
        {
            return Err(Error::invalid(
                format!("GnnLinkPredictor::score (query {i})"),
                "query vector has a non-finite value",
            ));
        }
        Ok((net, st, candidates.iter().map(|&c| c as u32).collect()))
    }

    /// The chunks the query joins under the inference mode; `nearest` (best first) saves
    /// the search for [`InferenceMode::JoinTopK`] when it is long enough.
    fn join_for(&self, st: &Trained, q: &[f32], nearest: Option<&[ChunkId]>) -> Join {
        let mode = self.train.inference;
        match mode {
            InferenceMode::JoinAll => Join::All,
            InferenceMode::Isolated => Join::List(Vec::new()),
            InferenceMode::JoinTopK(k) => {
                let k = k.min(st.ctx.num_chunks());
                match nearest {
                    Some(n) if n.len() >= k => {
                        Join::list(n[..k].iter().map(|&c| c as u32).collect())
                    }
                    _ => Join::list(st.ctx.join(q, mode)),
                }
            }
        }
    }

    /// Scores through the cached chunk representations (`q` normalised).
    fn score_cached(
        &self,
        st: &Trained,
        q: &[f32],
        nearest: Option<&[ChunkId]>,
        cands: &[u32],
    ) -> Result<Vec<f32>> {
        let cache = st.cache.as_ref().ok_or_else(|| {
            Error::NotReady("the link predictor has no cached chunk representations".into())
        })?;
        let join = self.join_for(st, q, nearest);
        Ok(cache.score(&st.ctx.features, &st.ctx.host, q, &join, cands))
    }

    /// Logits through a forward pass over the whole graph on the predictor's device (the
    /// reference that [`LinkPredictor::score`]'s cached path is tested against; each query
    /// costs a pass over every chunk and edge).
    pub fn score_full_graph(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        let queries = Embeddings::new(query.len().max(1), query.to_vec())?;
        let (net, st, cands) = self.checked(&queries, candidates)?;
        Self::score_group(
            net,
            st,
            &self.model,
            self.train.inference,
            &[normalize_vec(query)],
            std::slice::from_ref(&cands),
            &self.device,
        )
    }

    /// Logits of each query in `queries` (normalised) against `candidates`, all queries in
    /// one forward pass (they interact only through shared chunks).
    fn score_group(
        net: &LinkNet,
        st: &Trained,
        cfg: &ModelConfig,
        mode: InferenceMode,
        queries: &[Vec<f32>],
        candidates: &[Vec<u32>],
        device: &Device,
    ) -> Result<Vec<f32>> {
        let (host, x, ids) = st.ctx.with_queries(queries, mode, device)?;
        let g = host.to_device(cfg.aggregation, device);
        let h = net.encode(x.clone(), &g);
        let pairs: Vec<(u32, u32)> = ids
            .iter()
            .zip(candidates)
            .flat_map(|(&q, cs)| cs.iter().map(move |&c| (q, c)))
            .collect();
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let batch = PairBatch::new(&pairs, &host, net.uses_common_neighbors(), device);
        let logits = net.score_pairs(h, &x, &batch);
        Ok(logits
            .into_data()
            .try_into_vec::<f32>()
            .expect("logits are f32"))
    }
}

impl LinkPredictor for GnnLinkPredictor {
    fn name(&self) -> &str {
        match self.model.kind {
            PredictorKind::Ncn => "ncn",
            PredictorKind::Gae(_) => "gae",
            PredictorKind::Mlp => "mlp",
        }
    }

    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> Result<TrainReport> {
        let started = Instant::now();
        let d_in = graph.features.dim();
        let train::Fitted {
            net,
            ctx,
            mut report,
        } = train::fit_net(
            &self.model,
            &self.train,
            &self.device,
            self.checkpoints.as_deref(),
            graph,
            progress,
        )?;
        self.state = Some(Trained::new(
            Some(net),
            d_in,
            ctx,
            &self.model,
            self.train.inference,
        )?);
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    fn copies_on_attach(&self) -> bool {
        true
    }

    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        let mut copy = GnnLinkPredictor {
            model: self.model.clone(),
            train: self.train.clone(),
            device: self.device.clone(),
            state: None,
            checkpoints: self.checkpoints.clone(),
        };
        let attached = match &self.state {
            // The trained weights travel with the copy (burn parameters are shared
            // handles); the width is checked against the new graph.
            Some(st) => {
                let d_in = graph.features.dim();
                if st.d_in != d_in {
                    return Some(Err(Error::DimensionMismatch {
                        location: "GnnLinkPredictor::attach_copy (feature width)".into(),
                        expected: st.d_in,
                        actual: d_in,
                    }));
                }
                ChunkContext::new(graph).and_then(|ctx| {
                    let net = st.net.clone();
                    copy.state = Some(Trained::new(
                        net,
                        d_in,
                        ctx,
                        &copy.model,
                        copy.train.inference,
                    )?);
                    Ok(())
                })
            }
            None => copy.attach(graph),
        };
        Some(attached.map(|()| Box::new(copy) as Box<dyn LinkPredictor>))
    }

    fn attach(&mut self, graph: &LinkGraph) -> Result<()> {
        let ctx = ChunkContext::new(graph)?;
        let d_in = graph.features.dim();
        match &mut self.state {
            Some(st) => {
                if st.d_in != d_in {
                    return Err(Error::DimensionMismatch {
                        location: "GnnLinkPredictor::attach (feature width)".into(),
                        expected: st.d_in,
                        actual: d_in,
                    });
                }
                let net = st.net.take();
                *st = Trained::new(net, d_in, ctx, &self.model, self.train.inference)?;
            }
            None => {
                self.state = Some(Trained::new(
                    None,
                    d_in,
                    ctx,
                    &self.model,
                    self.train.inference,
                )?)
            }
        }
        Ok(())
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        let queries = Embeddings::new(query.len().max(1), query.to_vec())?;
        Ok(self
            .score_batch(&queries, candidates)?
            .pop()
            .unwrap_or_default())
    }

    fn score_batch(&self, queries: &Embeddings, candidates: &[ChunkId]) -> Result<Vec<Vec<f32>>> {
        let (_, st, cands) = self.checked(queries, candidates)?;
        queries
            .iter()
            .map(|q| self.score_cached(st, &normalize_vec(q), None, &cands))
            .collect()
    }

    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        let queries = Embeddings::new(query.len().max(1), query.to_vec())?;
        let (_, st, cands) = self.checked(&queries, candidates)?;
        let nc = st.ctx.num_chunks();
        if let Some(&bad) = nearest.iter().find(|&&c| c >= nc) {
            return Err(Error::invalid(
                "GnnLinkPredictor::score_near (nearest)",
                format!("chunk id {bad} out of range: the graph has {nc} chunks"),
            ));
        }
        self.score_cached(st, &normalize_vec(query), Some(nearest), &cands)
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let (net, st) = self.trained()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let meta = Meta {
            format_version: PREDICTOR_FORMAT_VERSION,
            model: self.model.clone(),
            train: self.train.clone(),
            d_in: st.d_in,
        };
        write_json(&dir.join(META_FILE), &meta)?;
        let graph = LinkGraph {
            features: st.ctx.features.clone(),
            num_chunks: st.ctx.num_chunks(),
            edges: st.ctx.edges.clone(),
        };
        lprag_graph::save_link_graph(&graph, dir.join(GRAPH_FILE))?;
        crate::weights::save_weights(net, &dir.join(WEIGHTS_FILE))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    format_version: u32,
    model: ModelConfig,
    train: TrainConfig,
    d_in: usize,
}

fn read_meta(dir: &Path) -> Result<Meta> {
    let path = dir.join(META_FILE);
    let meta: Meta = read_versioned(&path, PREDICTOR_FORMAT_VERSION)?;
    meta.model
        .validate()
        .map_err(|e| Error::format(&path, e.to_string()))?;
    Ok(meta)
}
