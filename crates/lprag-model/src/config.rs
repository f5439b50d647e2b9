//! Configuration of the link predictors and their training.

use serde::{Deserialize, Serialize};

/// Which link-prediction architecture to train (LP-RAG Table 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PredictorKind {
    /// Neural Common Neighbor (Wang et al. 2024, `cn1`): GNN node encoder, common-neighbour
    /// aggregation and a Hadamard pair MLP, with target-link masking during training.
    Ncn,
    /// Graph auto-encoder: a GNN node encoder with a pair decoder.
    Gae(Decoder),
    /// No graph: an MLP on node features with a Hadamard decoder (the Table 6 baseline).
    Mlp,
}

/// How a [`PredictorKind::Gae`] turns two node vectors into a logit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decoder {
    /// `⟨h_i, h_j⟩`.
    Dot,
    /// `MLP(h_i ⊙ h_j)`.
    Hadamard,
}

/// How a GNN layer mixes a node with its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Aggregation {
    /// `h'_i = W Σ_{j ∈ N(i) ∪ {i}} w_ij / sqrt(d_i d_j) h_j` (Kipf & Welling; Â = D^-½(A+I)D^-½).
    Gcn,
    /// `h'_i = W_self h_i + W_nbr (Σ_j w_ij h_j / Σ_j w_ij)`: the node's own features keep a
    /// separate path, so a node joined to many others (the LP-RAG query at inference) is not
    /// washed out into the neighbourhood mean.
    Sage,
}

/// How the user's query joins the chunk graph at inference (LP-RAG §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum InferenceMode {
    /// The paper's inference: the query is joined to **all** chunks; these edges carry
    /// messages only.
    JoinAll,
    /// The query is joined to its `k` most cosine-similar chunks, as a synthetic query is
    /// joined to its batch during training.
    JoinTopK(usize),
    /// The query stays an isolated node: its representation is its own features only.
    Isolated,
}

/// Which graph edges are link-prediction targets during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Targets {
    /// Query–chunk edges only (the retrieval task).
    QueryChunk,
    /// Every edge, chunk–chunk included (the paper's loss over all of E).
    All,
}

/// How negatives are drawn for each positive edge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Negatives {
    /// Uniformly over chunks.
    Uniform,
    /// Proportionally to `(degree + 1)^power` (degree-based, Aiyappa et al. 2025).
    Degree(f32),
}

/// Which graph a training step runs the node encoder over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum StepGraph {
    /// Only the step's neighbourhood: the target pairs' endpoints (and, for NCN, their
    /// common neighbours) with every node within `layers` hops, in the graph with the step's
    /// targets masked. No fan-out limit, so the gradients equal [`StepGraph::Full`]'s while a
    /// step costs in proportion to its batch, not to the graph (PyG's
    /// `LinkNeighborLoader` with all neighbours).
    #[default]
    Neighbourhood,
    /// The whole message-passing graph at every step (the cost of a step grows with the
    /// graph; kept for comparison).
    Full,
}

/// Architecture of a [`crate::GnnLinkPredictor`]. Defaults follow LP-RAG Table 8 for NCN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelConfig {
    /// The architecture.
    pub kind: PredictorKind,
    /// Neighbour aggregation of the GNN encoder (ignored by [`PredictorKind::Mlp`]).
    pub aggregation: Aggregation,
    /// Width of hidden representations (Table 8, NCN: 256).
    pub hidden: usize,
    /// Number of GNN (or MLP-encoder) layers (Table 8, NCN: 1).
    pub layers: usize,
    /// Add `a·cos(x_q, x_c) + b` (learned `a`, `b`) to the logit, with the learned part
    /// starting at zero: an untrained or weak model then ranks exactly like dense search.
    pub residual: bool,
}

impl Default for ModelConfig {
    /// [`ModelConfig::ncn`] with the dense residual on: the paper's NCN, anchored on cosine
    /// similarity so an untrained or weak model ranks like dense search (the paper's plain
    /// NCN, `residual: false`, measured worse than dense on MuSiQue-100; see
    /// `docs/benchmarks.md`).
    fn default() -> Self {
        Self {
            residual: true,
            ..Self::ncn()
        }
    }
}

impl ModelConfig {
    /// NCN with Table 8 sizes (1 layer, hidden 256) and a SAGE encoder, as in the paper
    /// (no residual).
    pub fn ncn() -> Self {
        Self {
            kind: PredictorKind::Ncn,
            aggregation: Aggregation::Sage,
            hidden: 256,
            layers: 1,
            residual: false,
        }
    }

    /// A GCN encoder with a Hadamard decoder (the PyG reference model of the benchmark).
    pub fn gae() -> Self {
        Self {
            kind: PredictorKind::Gae(Decoder::Hadamard),
            aggregation: Aggregation::Gcn,
            hidden: 256,
            layers: 1,
            residual: false,
        }
    }

    /// The MLP baseline (Table 8: 2 layers; hidden reduced from 1000 to 256 by default).
    pub fn mlp() -> Self {
        Self {
            kind: PredictorKind::Mlp,
            aggregation: Aggregation::Sage,
            hidden: 256,
            layers: 2,
            residual: false,
        }
    }
}

/// Training hyperparameters. Defaults follow LP-RAG Table 8 for NCN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// Adam learning rate (NCN: 0.0043).
    pub learning_rate: f64,
    /// Weight decay (NCN: 1e-8).
    pub weight_decay: f32,
    /// Maximum number of epochs (NCN: 100 in Exp. III).
    pub epochs: usize,
    /// Maximum number of optimisation steps over the whole run; `0` means no limit.
    /// Training ends at whichever comes first: `epochs`, this many steps (the last
    /// epoch is then cut short and validated), or early stopping.
    ///
    /// Default 1,000, a departure from the paper (which trains a fixed number of epochs):
    /// an epoch has one step per `batch_size` training edges, so a fixed epoch count
    /// makes training cost grow with the corpus. MuSiQue-100 (2 steps per epoch) never
    /// reaches the limit; 10,000 passages (11 per epoch) stop after 91 epochs and 100,000
    /// passages (about 118 per epoch) after 9, instead of 100. Set `0` for the paper's
    /// epoch-only schedule.
    pub max_steps: usize,
    /// Positive target edges per optimisation step; `0` means the whole epoch in one step.
    pub batch_size: usize,
    /// Negatives drawn per positive edge.
    pub negatives_per_positive: usize,
    /// How negatives are drawn.
    pub negatives: Negatives,
    /// Which edges are targets.
    pub targets: Targets,
    /// Remove the step's target edges from the message-passing graph (NCN's target-link
    /// masking), so the model cannot read the answer from its input.
    pub mask_targets: bool,
    /// Fraction of synthetic queries held out for early stopping (0 disables it).
    pub validation_fraction: f32,
    /// Stop after this many epochs without a better validation loss.
    pub patience: usize,
    /// How the user query joins the graph at inference (also used for validation queries).
    pub inference: InferenceMode,
    /// Seed for parameter initialisation, splits and sampling.
    pub seed: u64,
    /// With [`ModelConfig::residual`], add `λ · mean(correction²)` to the loss, where the
    /// correction is the learned part of the logit: the model keeps the dense ranking
    /// unless a change lowers the link loss by more than it costs. `0` disables it.
    /// Default 10 (on MuSiQue-100, 0.1 collapsed the ranking, 1 lost 0.8 R@2, 100 reproduced
    /// dense exactly; see `docs/benchmarks.md`).
    pub correction_penalty: f32,
    /// Which graph each step encodes (default: the step's neighbourhood).
    pub step_graph: StepGraph,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            learning_rate: 0.0043,
            weight_decay: 1e-8,
            epochs: 100,
            max_steps: 1000,
            batch_size: 2048,
            negatives_per_positive: 1,
            negatives: Negatives::Uniform,
            targets: Targets::QueryChunk,
            mask_targets: true,
            validation_fraction: 0.1,
            patience: 10,
            inference: InferenceMode::JoinTopK(3),
            seed: 42,
            correction_penalty: 10.0,
            step_graph: StepGraph::Neighbourhood,
        }
    }
}
