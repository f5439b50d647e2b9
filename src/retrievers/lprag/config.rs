//! LP-RAG's settings: the pipeline's configuration, its paper presets and the built-in
//! predictor choice.

use std::path::Path;
use std::sync::Arc;

use lprag_core::{Embeddings, Error, LinkGraph, LinkPredictor, Result};
use lprag_graph::{BridgeConfig, GraphParams, IvfParams, KnnBackend};

use lprag_model::peg::{peg_predictor, restore_peg};
use lprag_model::seal::{restore_seal, seal_predictor};
use lprag_model::vgae::{restore_vgae, vgae_predictor};
use lprag_model::{
    ComputeDevice, GnnLinkPredictor, InferenceMode, ModelConfig, PegConfig, SealConfig,
    TrainConfig, VgaeConfig,
};
use serde::{Deserialize, Serialize};

use super::Anchor;
use crate::retrievers::common::ParentScoring;

/// Default [`LpRagConfig::candidate_pool`]: the 20 nearest chunks and their graph
/// neighbours are scored.
pub const DEFAULT_CANDIDATE_POOL: usize = 20;

/// Default [`LpRagConfig::column_scan_from`]: indexes of 10,000 chunks or more read the
/// chunk embeddings column-wise in the exact candidate scan (faster from about that size
/// with the hashing encoder's sparse queries and with MiniLM's dense ones alike;
/// `docs/benchmarks.md`, "Against what a user runs instead").
pub const DEFAULT_COLUMN_SCAN_FROM: usize = 10_000;

/// Settings of the LP-RAG pipeline.
///
/// The default keeps the paper's graph (mutual k-NN with k = 5) and NCN's Table 8
/// optimiser settings but departs from the paper where a field says so, each measured in
/// `docs/benchmarks.md`: bridge edges beside the k-NN edges, a dense residual with a
/// correction penalty in the model, training on query–chunk targets with early stopping
/// and a step limit, the query joined to its 3 nearest chunks, and a candidate pool
/// instead of scoring every chunk. [`LpRagConfig::paper`] is LP-RAG as published.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LpRagConfig {
    /// k of the mutual k-NN chunk graph.
    pub knn_k: usize,
    /// Exact or HNSW neighbour search.
    pub knn_backend: KnnBackend,
    /// Bridge edges added beside mutual k-NN (title mentions, same-document neighbours).
    pub bridges: BridgeConfig,
    /// Seed of A.2 batch sampling.
    pub seed: u64,
    /// Which built-in link predictor is trained when no custom one is given (default:
    /// [`BuiltinPredictor::Gnn`], the [`GnnLinkPredictor`] of [`LpRagConfig::model`]).
    pub predictor: BuiltinPredictor,
    /// The link predictor's architecture (used by [`BuiltinPredictor::Gnn`]).
    pub model: ModelConfig,
    /// The link predictor's training (used when no custom predictor is given).
    pub train: TrainConfig,
    /// Candidate stage: score only the query's `P` most cosine-similar chunks (one exact
    /// scan, shared with the query's join under [`InferenceMode::JoinTopK`](crate::InferenceMode::JoinTopK)) plus, with
    /// [`LpRagConfig::candidate_neighbours`], their chunk-graph neighbours. `None` scores
    /// every chunk, as the paper does (exhaustive; the cost of the pair decoder then grows
    /// with the corpus). Default [`DEFAULT_CANDIDATE_POOL`], which departs from the paper's
    /// exhaustive scoring for speed; `docs/benchmarks.md` ("LP-RAG at scale") measures the
    /// recall it costs.
    pub candidate_pool: Option<usize>,
    /// Add the chunk-graph neighbours of the pool's chunks to the candidates (a chunk
    /// reached through a bridge or k-NN edge can outrank its dense score).
    pub candidate_neighbours: bool,
    /// Where the candidate stage finds the query's nearest chunks (the pool and the
    /// join): `None` (default) scans every chunk exactly; `Some(params)` searches an
    /// inverted-file index over the chunk embeddings ([`IvfIndex`](crate::graph::IvfIndex): k-means lists, the
    /// `probes` nearest lists scanned), which is made when the index is built, opened or
    /// updated (seeded, so the same every time; about 1.5 s at 100,000 chunks). Approximate:
    /// a nearest chunk in a list that is not probed is missed. It suits semantic
    /// embeddings, which cluster; `docs/benchmarks.md` ("Candidate index") measures the
    /// recall it costs with MiniLM and with the hashing encoder, whose features do not
    /// cluster well.
    pub candidate_index: Option<IvfParams>,
    /// Find the query's nearest chunks (the pool and the join) by a walk on a proximity
    /// graph of the chunk embeddings ([`GraphIndex`](lprag_graph::GraphIndex): each chunk linked to its nearest
    /// chunks by NN-descent and to the chunks that list it; the walk keeps the
    /// [`GraphParams::beam`] best chunks it reads). Approximate: it reads a few thousand
    /// chunks per query instead of all, and misses a nearest chunk it does not reach.
    /// Made when the index is built, opened or updated (NN-descent over the chunks: about
    /// a minute at 100,000 chunks on 2 cores). Default `None`; not together with
    /// [`LpRagConfig::candidate_index`]. `docs/benchmarks.md` ("ANN candidates") measures
    /// its recall and speed against FAISS HNSW.
    pub candidate_graph: Option<GraphParams>,
    /// From this many chunks on, the exact candidate scan reads a column-wise copy of the
    /// chunk embeddings ([`ColumnIndex`](crate::graph::ColumnIndex): unit-normalised, 16-bit, built when the index is
    /// built, opened or updated) instead of the rows: the same nearest chunks to the bit
    /// (the quantised scores are within a proven bound of the exact ones, and every chunk
    /// that could be among the nearest is scored again exactly), read faster because a
    /// query reads only the columns where it is non-zero (a hashing encoder's query: about
    /// 5 % of them), in half the bytes, on every core. Costs `2 · chunks · dim` bytes (half
    /// the embeddings'). `Some(0)` always, `None` never. Default
    /// `Some(`[`DEFAULT_COLUMN_SCAN_FROM`]`)`; not used under
    /// [`LpRagConfig::candidate_index`], whose lists are scanned as rows.
    pub column_scan_from: Option<usize>,
    /// The longest query, in bytes of UTF-8, that `retrieve`, `retrieve_filtered` and
    /// `retrieve_batch` embed; a longer one is [`Error::InvalidInput`] before any work.
    /// Default [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an
    /// encoder's 512-token window). Change it on a built or opened index with
    /// [`LpRag::set_max_query_bytes`](crate::LpRag::set_max_query_bytes).
    pub max_query_bytes: usize,
    /// How the chunks of one document compete: default [`ParentScoring::Mean`] (a
    /// document ranked by the mean score of all its chunks, which are returned together,
    /// `Selection::TopK(k)` counting documents), a departure from the paper, which ranks
    /// chunks ([`ParentScoring::Chunks`]). `docs/benchmarks.md` measures each: on
    /// MuSiQue-100 with MiniLM, where the default chunker splits 40 long passages, the mean
    /// is 0.5 R@2 and 0.8 R@5 above ranking chunks or documents by their best chunk.
    pub parents: ParentScoring,
    /// How much of the ranking the link predictor decides against the dense order of the
    /// same candidates: default [`Anchor::Selected`] (chosen on held-out training
    /// questions at build time), a departure from the paper ([`Anchor::Off`]).
    pub anchor: Anchor,
}

/// The built-in link predictors an [`LpRag`](crate::LpRag) can train by itself (a custom one goes to
/// [`LpRagBuilder::predictor`](crate::LpRagBuilder::predictor)).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BuiltinPredictor {
    /// [`GnnLinkPredictor`] with [`LpRagConfig::model`] (NCN, GAE or MLP) and
    /// [`LpRagConfig::train`].
    #[default]
    Gnn,
    /// VGAE ([`lprag_model::Vgae`], LP-RAG Table 6) on
    /// [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor), trained with
    /// [`LpRagConfig::train`] ([`TrainConfig::paper_vgae`] for Table 8's values).
    Vgae(VgaeConfig),
    /// PEG ([`lprag_model::Peg`], LP-RAG Table 6: GCN layers whose messages are weighted by
    /// the distance of Laplacian-eigenmap encodings) on
    /// [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor), trained with
    /// [`LpRagConfig::train`] ([`TrainConfig::paper_peg`] for Table 8's values).
    Peg(PegConfig),
    /// SEAL ([`lprag_model::Seal`], LP-RAG Table 6: a GCN on each pair's DRNL-labelled
    /// enclosing subgraph) on [`BurnLinkPredictor`](lprag_model::BurnLinkPredictor),
    /// trained with [`LpRagConfig::train`] ([`TrainConfig::paper_seal`] for Table 8's
    /// values).
    Seal(SealConfig),
}

impl BuiltinPredictor {
    /// Check the chosen model's sizes (see [`ModelConfig::validate`]).
    pub fn validate(&self, model: &ModelConfig) -> Result<()> {
        match self {
            BuiltinPredictor::Gnn => model.validate(),
            BuiltinPredictor::Vgae(c) => c.validate(),
            BuiltinPredictor::Peg(c) => c.validate(),
            BuiltinPredictor::Seal(c) => c.validate(),
        }
    }

    /// The untrained predictor for `config`, checkpointing under `work_dir/train` where
    /// it can; the built-in GNN keeps its cached representations in the file
    /// `representations` when given.
    pub(crate) fn make(
        config: &LpRagConfig,
        work_dir: Option<&Path>,
        device: ComputeDevice,
        representations: Option<&Path>,
    ) -> Result<Box<dyn LinkPredictor>> {
        config.predictor.validate(&config.model)?;
        let device = device.to_burn()?;
        Ok(match config.predictor {
            BuiltinPredictor::Gnn => {
                let mut p = GnnLinkPredictor::with_device(
                    config.model.clone(),
                    config.train.clone(),
                    device,
                );
                if let Some(path) = representations {
                    p = p.with_representations_file(path);
                }
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Vgae(v) => {
                let p = vgae_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Peg(v) => {
                let p = peg_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
            BuiltinPredictor::Seal(v) => {
                let p = seal_predictor(v, config.train.clone()).with_device(device);
                Box::new(match work_dir {
                    Some(dir) => p.with_checkpoints(dir.join("train")),
                    None => p,
                })
            }
        })
    }

    /// Restore the predictor `config` describes from `dir`, on `graph`.
    pub(super) fn restore(
        config: &LpRagConfig,
        dir: &Path,
        graph: &LinkGraph,
        device: ComputeDevice,
        stored: Option<Embeddings>,
    ) -> Result<Arc<dyn LinkPredictor>> {
        Ok(Arc::from(Self::make_restored(
            config, dir, graph, device, stored,
        )?))
    }

    /// [`BuiltinPredictor::restore`], boxed (so it can still be attached elsewhere);
    /// `stored`: the GNN's cached chunk representations saved with the index (other
    /// predictors have none).
    pub(super) fn make_restored(
        config: &LpRagConfig,
        dir: &Path,
        graph: &LinkGraph,
        device: ComputeDevice,
        stored: Option<Embeddings>,
    ) -> Result<Box<dyn LinkPredictor>> {
        config
            .predictor
            .validate(&config.model)
            .map_err(|e| Error::format(dir, e.to_string()))?;
        let device = device.to_burn()?;
        Ok(match config.predictor {
            // The index's own chunk rows: no second copy from the predictor's directory.
            BuiltinPredictor::Gnn => Box::new(match stored {
                Some(rows) => GnnLinkPredictor::from_dir_on_graph_with_representations(
                    dir, graph, rows, device,
                )?,
                None => GnnLinkPredictor::from_dir_on_graph(dir, graph, device)?,
            }),
            BuiltinPredictor::Vgae(v) => Box::new(restore_vgae(dir, graph, v, device)?),
            BuiltinPredictor::Peg(v) => Box::new(restore_peg(dir, graph, v, device)?),
            BuiltinPredictor::Seal(v) => Box::new(restore_seal(dir, graph, v, device)?),
        })
    }
}

impl LpRagConfig {
    /// How many nearest chunks a query node joins at inference (its
    /// [`InferenceMode::JoinTopK`]; 0 under the other modes, which need no search).
    pub(crate) fn join_size(&self) -> usize {
        match self.train.inference {
            InferenceMode::JoinTopK(k) => k,
            _ => 0,
        }
    }

    /// LP-RAG as published, with NCN (§3, Table 8): mutual k-NN with k = 5 and no other
    /// chunk edges, the paper's NCN ([`ModelConfig::ncn`]: no residual) trained as
    /// [`TrainConfig::paper_ncn`] says (loss over every edge, 100 epochs, no penalty, no
    /// early stopping), the query joined to **all** chunks at inference and every chunk
    /// scored (no candidate pool), chunks ranked on their own ([`ParentScoring::Chunks`])
    /// and no dense anchor ([`Anchor::Off`]). Retrieve with `Selection::Threshold(0.5)` for
    /// the paper's τ = 0.5.
    ///
    /// Not part of a configuration: the paper chunks and writes its questions with an LLM
    /// (GPT-4o-mini; use [`LpRagBuilder::llm`](crate::LpRagBuilder::llm), n_B = 2 questions per A.2 batch is the
    /// query writers' default) and embeds with Contriever (pass it with
    /// [`LpRagBuilder::encoder`](crate::LpRagBuilder::encoder); the default encoder is all-MiniLM-L6-v2).
    pub fn paper() -> Self {
        Self {
            knn_k: 5,
            bridges: BridgeConfig::none(),
            model: ModelConfig::ncn(),
            train: TrainConfig::paper_ncn(),
            candidate_pool: None,
            candidate_neighbours: false,
            parents: ParentScoring::Chunks,
            anchor: Anchor::Off,
            ..Self::default()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's VGAE (Table 6; Table 8: 2 layers, hidden
    /// 32, learning rate 1e-2, weight decay 1e-4, 400 epochs).
    pub fn paper_vgae() -> Self {
        Self {
            predictor: BuiltinPredictor::Vgae(VgaeConfig::default()),
            train: TrainConfig::paper_vgae(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's PEG (Table 6; Table 8: 2 layers, hidden 32,
    /// learning rate 1e-2, weight decay 1e-4, 400 epochs; 32 eigenvectors, which the
    /// paper does not give).
    pub fn paper_peg() -> Self {
        Self {
            predictor: BuiltinPredictor::Peg(PegConfig::default()),
            train: TrainConfig::paper_peg(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's SEAL (Table 6; Table 8: 3 layers, hidden 32,
    /// learning rate 1e-4, weight decay 1e-8, 50 epochs; 1-hop enclosing subgraphs as in
    /// SEAL, at most 100 new nodes per hop, which the paper does not give).
    pub fn paper_seal() -> Self {
        Self {
            predictor: BuiltinPredictor::Seal(SealConfig::default()),
            train: TrainConfig::paper_seal(),
            ..Self::paper()
        }
    }

    /// [`LpRagConfig::paper`] with the paper's MLP baseline (Table 6; Table 8: 2 layers,
    /// hidden 1000, learning rate 1e-3, weight decay 5e-4, 1,000 epochs).
    pub fn paper_mlp() -> Self {
        Self {
            model: ModelConfig::paper_mlp(),
            train: TrainConfig::paper_mlp(),
            ..Self::paper()
        }
    }
}

impl Default for LpRagConfig {
    fn default() -> Self {
        Self {
            knn_k: lprag_graph::DEFAULT_K,
            knn_backend: KnnBackend::default(),
            bridges: BridgeConfig::default(),
            seed: 42,
            predictor: BuiltinPredictor::Gnn,
            model: ModelConfig::default(),
            train: TrainConfig::default(),
            candidate_pool: Some(DEFAULT_CANDIDATE_POOL),
            candidate_neighbours: true,
            candidate_index: None,
            candidate_graph: None,
            column_scan_from: Some(DEFAULT_COLUMN_SCAN_FROM),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
            parents: ParentScoring::Mean,
            anchor: Anchor::default(),
        }
    }
}
