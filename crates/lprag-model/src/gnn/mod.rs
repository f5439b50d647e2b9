//! [`GnnLinkPredictor`]: the built-in NCN, GAE and MLP link predictors, served by the same
//! engine as every other burn model ([`BurnLinkPredictor`]).
//!
//! The network ([`LinkNet`]) is a [`PairModel`] like VGAE, PEG, SEAL or a user's model;
//! its fast paths are the engine's [`FastPath`] overrides: training on full-graph or
//! host-aggregated steps with the residual penalty (`train.rs`), and scoring through the
//! exact cache of the chunks' layer outputs ([`CachedScorer`]). The generic path (a
//! forward pass over a neighbourhood batch) is the reference the cache is tested against
//! ([`GnnLinkPredictor::score_full_graph`]).
//!
//! Saved as the engine saves every model (`burn-predictor.json` with the architecture,
//! burnpack weights) plus the chunk graph, so [`GnnLinkPredictor::from_dir`] needs nothing
//! else; directories of the earlier format (`predictor.json`) still open.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::{Device, Tensor};
use lprag_core::{
    ChunkId, Embeddings, Error, LinkGraph, LinkPredictor, Progress, Result, TrainReport,
};
use serde::{Deserialize, Serialize};

use crate::cached::CachedScorer;
use crate::config::{InferenceMode, ModelConfig, PredictorKind, TrainConfig};
use crate::context::ChunkContext;
use crate::host::PairBatch;
use crate::link_model::{BurnLinkPredictor, FastPath, GraphBatch, PairModel, Pairs};
use crate::net::LinkNet;
use crate::shared::read_versioned;

mod rows;
mod train;

pub use rows::{FetchedRows, GnnRowScorer};

/// Version of the manifest (`predictor.json`) that [`GnnLinkPredictor`] wrote before it
/// was served by [`BurnLinkPredictor`]; such directories still open. New saves write the
/// engine's manifest ([`crate::BURN_PREDICTOR_FORMAT_VERSION`]).
pub const PREDICTOR_FORMAT_VERSION: u32 = 1;

const LEGACY_META_FILE: &str = "predictor.json";
const GRAPH_FILE: &str = "chunks.graph";

/// A GNN (or MLP) link predictor trained in burn: NCN, GAE or MLP per [`ModelConfig`].
///
/// ```no_run
/// use lprag_model::{GnnLinkPredictor, ModelConfig, TrainConfig};
/// let predictor = GnnLinkPredictor::new(ModelConfig::ncn(), TrainConfig::default());
/// ```
pub struct GnnLinkPredictor {
    model: ModelConfig,
    engine: BurnLinkPredictor<LinkNet>,
}

impl std::fmt::Debug for GnnLinkPredictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GnnLinkPredictor")
            .field("model", &self.model)
            .field("train", self.engine.train_config())
            .field("trained", &self.engine.model().is_some())
            .finish()
    }
}

/// The built-ins' own training and scoring, as overrides of the engine.
struct GnnPath {
    model: ModelConfig,
    /// Where the cached representations are written and mapped from
    /// ([`GnnLinkPredictor::with_representations_file`]); `None`: on the heap.
    file: Option<PathBuf>,
}

impl FastPath<LinkNet> for GnnPath {
    fn fit(
        &self,
        train: &TrainConfig,
        device: &Device,
        checkpoints: Option<&Path>,
        graph: &LinkGraph,
        progress: &dyn Progress,
    ) -> Result<(LinkNet, ChunkContext, TrainReport)> {
        let train::Fitted { net, ctx, report } =
            train::fit_net(&self.model, train, device, checkpoints, graph, progress)?;
        Ok((net, ctx, report))
    }

    fn cache(
        &self,
        net: &LinkNet,
        ctx: &ChunkContext,
        mode: InferenceMode,
        stored: Option<Embeddings>,
    ) -> Result<CachedScorer> {
        let (net, join_all) = (net.to_host()?, mode == InferenceMode::JoinAll);
        let (x, host, aggregation) = (&ctx.features, &ctx.host, self.model.aggregation);
        match (stored, &self.file) {
            (Some(rows), _) => CachedScorer::with_stored(net, aggregation, x, host, rows, join_all),
            (None, Some(path)) => {
                CachedScorer::new_in_file(net, aggregation, x, host, join_all, path)
            }
            (None, None) => CachedScorer::new(net, aggregation, x, host, join_all),
        }
    }

    fn model_config(&self) -> &ModelConfig {
        &self.model
    }
}

/// The generic path: the network on a neighbourhood batch (common neighbours and the
/// residual's cosine read from the batch). Each layer reaches one hop further, and NCN's
/// common neighbours need their own representations, one hop beyond the endpoints.
impl PairModel for LinkNet {
    fn pair_hops(&self) -> usize {
        self.gnn_layers() + usize::from(self.uses_common_neighbors())
    }

    fn score_pairs(&self, x: Tensor<2>, graph: &GraphBatch, pairs: &Pairs) -> Tensor<1> {
        let messages = graph.message_graph(self.aggregation());
        let h = self.encode(x.clone(), &messages);
        let device = x.device();
        let cn = self
            .uses_common_neighbors()
            .then(|| graph.common_neighbour_entries(pairs.ids()));
        let batch = PairBatch::from_parts(pairs.ids(), cn, &device);
        self.score_pairs(h, &x, &batch)
    }
}

fn engine(model: ModelConfig, train: TrainConfig, device: Device) -> BurnLinkPredictor<LinkNet> {
    let name = match model.kind {
        PredictorKind::Ncn => "ncn",
        PredictorKind::Gae(_) => "gae",
        PredictorKind::Mlp => "mlp",
    };
    let arch = model.clone();
    BurnLinkPredictor::with_fast_path(
        name,
        train,
        device,
        move |d_in, device| LinkNet::new(&arch, d_in, device),
        Arc::new(GnnPath { model, file: None }),
    )
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
            engine: engine(model.clone(), train, device),
            model,
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
        self.engine = self.engine.with_checkpoints(dir);
        self
    }

    /// Keep the chunks' cached representations (one row per chunk: every layer's output
    /// side by side, 256 floats for the default model, 1 GB at a million chunks) in the
    /// file `path` instead of on the heap: each time they are computed (after training,
    /// [`LinkPredictor::attach`]) they are written there (to a temporary file renamed over
    /// it) and memory-mapped, and the one-layer default streams them to the file a block
    /// of chunks at a time, so they are never on the heap whole. The scores are the same.
    /// Keep the file while the predictor lives and do not change it in place (a later
    /// computation replaces it by a rename, which leaves a mapping of the old one intact);
    /// `LpRagBuilder::features_on_disk` puts it in the work directory.
    pub fn with_representations_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.engine.set_fast_path(Arc::new(GnnPath {
            model: self.model.clone(),
            file: Some(path.into()),
        }));
        self
    }

    /// A predictor restored from a directory written by [`LinkPredictor::save`] (this
    /// version's or the earlier `predictor.json` format).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        Self::from_dir_on(dir, Device::flex())
    }

    /// [`GnnLinkPredictor::from_dir`] on `device`.
    pub fn from_dir_on(dir: &Path, device: Device) -> Result<Self> {
        let graph = lprag_graph::load_link_graph(dir.join(GRAPH_FILE))?;
        Self::restore_serving(dir, &graph, &dir.join(GRAPH_FILE), device, None)
    }

    /// [`GnnLinkPredictor::from_dir_on`] serving on `graph` — the graph the predictor was
    /// saved with, as an index keeps it (question nodes may be there or not: only its
    /// chunk rows and the edges between chunks are read) — instead of reading the chunk
    /// graph saved beside the weights: the same predictor, without a second copy of the
    /// chunk rows in memory (`LpRag::load` passes its index's graph; the predictor's
    /// rows share its buffer).
    ///
    /// # Errors
    /// As [`GnnLinkPredictor::from_dir_on`]; [`Error::Format`] when `graph` is not as
    /// wide as the model's input.
    pub fn from_dir_on_graph(dir: &Path, graph: &LinkGraph, device: Device) -> Result<Self> {
        Self::on_chunks_of(dir, graph, device, None)
    }

    /// [`GnnLinkPredictor::from_dir_on_graph`] with the chunks' cached representations
    /// given instead of computed: `representations` are
    /// [`LinkPredictor::stored_representations`] of this predictor (these weights, see
    /// [`GnnLinkPredictor::weights_checksum`]) on this graph's chunks, saved and read back
    /// — on the heap, or memory-mapped ([`lprag_graph::map_feature_rows`]) so a process
    /// that answers queries does not hold them
    /// ([`LinkPredictor::representations_mapped`]). Opening then costs no pass over the
    /// graph. Whether the rows belong to these weights and this graph is the caller's to
    /// know (`LpRag` binds its saved copy to both by checksum); only their shape is
    /// checked here.
    ///
    /// # Errors
    /// As [`GnnLinkPredictor::from_dir_on_graph`]; [`Error::DimensionMismatch`] when
    /// `representations` is not one row per chunk, as wide as
    /// [`LinkPredictor::stored_representation_dim`].
    pub fn from_dir_on_graph_with_representations(
        dir: &Path,
        graph: &LinkGraph,
        representations: Embeddings,
        device: Device,
    ) -> Result<Self> {
        Self::on_chunks_of(dir, graph, device, Some(representations))
    }

    /// FNV-1a 64 of the manifest and weights saved in `dir` (by [`LinkPredictor::save`]):
    /// what a file derived from these weights (the saved representations) records to be
    /// bound to them. Reads both files (a few MB for the default model).
    ///
    /// # Errors
    /// [`Error::Io`] when either file cannot be read; [`Error::Format`] for a manifest of
    /// another format version.
    pub fn weights_checksum(dir: &Path) -> Result<u64> {
        let manifest = match crate::link_model::read_manifest(dir)? {
            Some((path, _)) => path,
            None => dir.join(LEGACY_META_FILE),
        };
        let weights = dir.join(crate::link_model::WEIGHTS_FILE);
        let mut bytes = Vec::new();
        for path in [&manifest, &weights] {
            let mut b = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            bytes.extend_from_slice(&(b.len() as u64).to_le_bytes());
            bytes.append(&mut b);
        }
        Ok(lprag_graph::fnv1a64(&bytes))
    }

    /// The chunk nodes of `graph` served with the weights in `dir`.
    fn on_chunks_of(
        dir: &Path,
        graph: &LinkGraph,
        device: Device,
        stored: Option<Embeddings>,
    ) -> Result<Self> {
        let nc = graph.num_chunks;
        let chunks = LinkGraph {
            features: graph.features.leading_rows(nc),
            num_chunks: nc,
            edges: graph
                .edges
                .iter()
                .filter(|e| (e.a as usize) < nc && (e.b as usize) < nc)
                .copied()
                .collect(),
        };
        Self::restore_serving(dir, &chunks, dir, device, stored)
    }

    /// The weights in `dir` served on `graph` (its chunk graph; `from` names it in errors)
    /// with the `stored` representations when given.
    fn restore_serving(
        dir: &Path,
        graph: &LinkGraph,
        from: &Path,
        device: Device,
        stored: Option<Embeddings>,
    ) -> Result<Self> {
        let meta = read_meta(dir)?;
        if graph.features.dim() != meta.d_in {
            return Err(Error::format(
                from,
                format!(
                    "feature width {} but the model expects {}",
                    graph.features.dim(),
                    meta.d_in
                ),
            ));
        }
        let weights = dir.join(crate::link_model::WEIGHTS_FILE);
        crate::weights::check_capacity(&weights, meta.model.min_parameters(meta.d_in))?;
        let mut net = LinkNet::new(&meta.model, meta.d_in, &device);
        crate::weights::load_weights(&mut net, &weights)?;
        let mut p = Self::with_device(meta.model, meta.train, device);
        p.engine.serve_model(Some(net), graph, stored)?;
        Ok(p)
    }

    /// The architecture.
    pub fn model_config(&self) -> &ModelConfig {
        &self.model
    }

    /// The training configuration.
    pub fn train_config(&self) -> &TrainConfig {
        self.engine.train_config()
    }

    /// Logits through the engine's generic path: the network on the whole chunk graph plus
    /// the query node, on the predictor's device (the reference that
    /// [`LinkPredictor::score`]'s cached path is tested against; each query costs a pass
    /// over every chunk and edge).
    pub fn score_full_graph(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.engine.score_full_graph(query, candidates)
    }
}

impl LinkPredictor for GnnLinkPredictor {
    fn name(&self) -> &str {
        self.engine.name()
    }

    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> Result<TrainReport> {
        self.engine.fit(graph, progress)
    }

    fn copies_on_attach(&self) -> bool {
        true
    }

    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        Some(self.engine.attached_copy(graph).map(|engine| {
            Box::new(GnnLinkPredictor {
                model: self.model.clone(),
                engine,
            }) as Box<dyn LinkPredictor>
        }))
    }

    fn attach(&mut self, graph: &LinkGraph) -> Result<()> {
        self.engine.attach(graph)
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.engine.score(query, candidates)
    }

    fn score_batch(&self, queries: &Embeddings, candidates: &[ChunkId]) -> Result<Vec<Vec<f32>>> {
        self.engine.score_batch(queries, candidates)
    }

    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        self.engine.score_near(query, nearest, candidates)
    }

    /// Whether the cached representations are read through a map: given back mapped
    /// ([`GnnLinkPredictor::from_dir_on_graph_with_representations`]) or kept in a file
    /// ([`GnnLinkPredictor::with_representations_file`]).
    fn representations_mapped(&self) -> bool {
        self.engine.representations_mapped()
    }

    /// Every layer's cached output side by side: the hidden width for the default
    /// one-layer NCN; `None` until the predictor is trained or restored.
    fn stored_representation_dim(&self) -> Option<usize> {
        self.engine.cached_scorer().map(CachedScorer::stored_width)
    }

    /// The chunks' cached layer outputs as a [`lprag_core::ChunkStore`] keeps them for
    /// [`GnnRowScorer`].
    fn stored_representations(&self, range: std::ops::Range<usize>) -> Result<Embeddings> {
        let scorer = self.engine.cached_scorer().ok_or_else(|| {
            Error::NotReady("the predictor has not been trained or restored".into())
        })?;
        let n = self.engine.num_chunks().unwrap_or(0);
        if range.end > n || range.start > range.end {
            return Err(Error::invalid(
                "GnnLinkPredictor::stored_representations",
                format!("chunks {}..{} asked, {n} chunks", range.start, range.end),
            ));
        }
        let rows = scorer.stored_rows(range).ok_or_else(|| {
            Error::NotReady("the predictor holds no cached representations".into())
        })?;
        Embeddings::new(scorer.stored_width(), rows)
    }

    /// The engine's manifest and weights, and the chunk graph [`GnnLinkPredictor::from_dir`]
    /// reopens them on.
    fn save(&self, dir: &Path) -> Result<()> {
        self.engine.save(dir)?;
        let graph = self.engine.chunk_graph()?;
        lprag_graph::save_link_graph(&graph, dir.join(GRAPH_FILE))?;
        Ok(())
    }
}

/// What a saved directory says about its network, from either manifest.
pub(crate) struct Meta {
    model: ModelConfig,
    train: TrainConfig,
    d_in: usize,
}

/// The earlier format's manifest.
#[derive(Debug, Serialize, Deserialize)]
struct LegacyMeta {
    format_version: u32,
    model: ModelConfig,
    train: TrainConfig,
    d_in: usize,
}

pub(crate) fn read_meta(dir: &Path) -> Result<Meta> {
    let (path, meta) = match crate::link_model::read_manifest(dir)? {
        Some((path, m)) => {
            let model = m.model.ok_or_else(|| {
                Error::format(
                    &path,
                    format!(
                        "the predictor '{}' is not a built-in GNN (no architecture recorded); \
                         restore it with BurnLinkPredictor::restore and its model's init",
                        m.name
                    ),
                )
            })?;
            let meta = Meta {
                model,
                train: m.train,
                d_in: m.d_in,
            };
            (path, meta)
        }
        None => {
            let path = dir.join(LEGACY_META_FILE);
            let m: LegacyMeta = read_versioned(&path, PREDICTOR_FORMAT_VERSION)?;
            let meta = Meta {
                model: m.model,
                train: m.train,
                d_in: m.d_in,
            };
            (path, meta)
        }
    };
    meta.model
        .validate()
        .map_err(|e| Error::format(&path, e.to_string()))?;
    Ok(meta)
}
