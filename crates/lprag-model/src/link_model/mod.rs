//! Write your own link model as a burn module: the [`LinkModel`] trait, and
//! [`BurnLinkPredictor`], which trains any such model with the library's trainer and serves
//! it as an [`lprag_core::LinkPredictor`].
//!
//! A model encodes the nodes of a graph batch ([`LinkModel::encode`]) and scores node pairs
//! from their representations ([`LinkModel::decode`]). The trainer hands it, at every step,
//! the `hops`-hop neighbourhood of the step's target pairs and their negatives, in the graph
//! with the step's targets removed, with degrees from the whole graph, so a model whose
//! receptive field is [`LinkModel::hops`] layers sees exactly what a full-graph pass would
//! give those pairs. Queries are scored the same way: the query node joined to the chunk
//! graph per [`InferenceMode`], and the neighbourhood of the query and its candidates.
//!
//! A model that cannot split into node encoding and pair decoding (SEAL labels a subgraph
//! per pair) implements [`PairModel`] instead; every [`LinkModel`] is a [`PairModel`]. A
//! model that wants positional encodings (PEG) says how many columns
//! ([`LinkModel::positional_dim`]) and reads them from [`GraphBatch::positional`].
//!
//! # Shapes
//! - node features `x`: `[N, d_in]`, rows L2-normalised
//! - node representations `h`: `[N, hidden]` (any width the model likes)
//! - pair logits: `[P]`

mod batch;
mod local;
mod predictor;
mod train;

use burn::module::Module;
use burn::tensor::{Device, Tensor};

pub use batch::{GraphBatch, Pairs};
pub use predictor::BurnLinkPredictor;
pub(crate) use predictor::FastPath;

/// Version of the directory [`BurnLinkPredictor`] saves.
pub const BURN_PREDICTOR_FORMAT_VERSION: u32 = 1;

pub(super) const META_FILE: &str = "burn-predictor.json";
pub(crate) const WEIGHTS_FILE: &str = "weights.bpk";

/// The engine's manifest in `dir` with its path, `None` when `dir` has none (a directory
/// of an earlier format).
pub(crate) fn read_manifest(
    dir: &std::path::Path,
) -> lprag_core::Result<Option<(std::path::PathBuf, predictor::BurnMeta)>> {
    let path = dir.join(META_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let meta = crate::shared::read_versioned(&path, BURN_PREDICTOR_FORMAT_VERSION)?;
    Ok(Some((path, meta)))
}

/// Most held-out queries scored per validation (each is its own forward pass).
pub(super) const MAX_VALIDATION: usize = 256;

/// Most held-out queries per validation under [`InferenceMode::JoinAll`], where each
/// forward pass covers the whole graph.
pub(super) const MAX_JOIN_ALL_VALIDATION: usize = 32;

/// A link model written as a burn [`Module`], trained and served by [`BurnLinkPredictor`].
///
/// ```
/// use lprag_model::burn::module::Module;
/// use lprag_model::burn::nn::{Linear, LinearConfig};
/// use lprag_model::burn::tensor::{Device, Tensor};
/// use lprag_model::{GraphBatch, LinkModel, Pairs};
///
/// /// One GCN layer and a dot-product decoder (a graph auto-encoder).
/// #[derive(Module, Debug)]
/// struct Gae {
///     layer: Linear,
/// }
///
/// impl LinkModel for Gae {
///     fn hops(&self) -> usize {
///         1
///     }
///     fn encode(&self, x: Tensor<2>, graph: &GraphBatch) -> Tensor<2> {
///         self.layer.forward(graph.gcn(x))
///     }
///     fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
///         pairs.dot(h)
///     }
/// }
///
/// let init = |d_in: usize, device: &Device| Gae {
///     layer: LinearConfig::new(d_in, 64).init(device),
/// };
/// # let _ = init(8, &Device::flex());
/// ```
pub trait LinkModel: Module + Sync + 'static {
    /// Message-passing layers: the receptive field the trainer and the scorer give every
    /// pair endpoint (0 for a model that reads node features only).
    fn hops(&self) -> usize;

    /// Width of the positional encodings the model reads from
    /// [`GraphBatch::positional`]; 0 (the default) asks for none. PEG asks for Laplacian
    /// eigenmaps this way; the predictor computes them once per graph.
    fn positional_dim(&self) -> usize {
        0
    }

    /// Node representations.
    ///
    /// # Shapes
    /// `x: [N, d_in] → [N, hidden]`
    fn encode(&self, x: Tensor<2>, graph: &GraphBatch) -> Tensor<2>;

    /// Node representations during training, and an extra loss term the trainer adds to
    /// the link loss (for example VGAE's KL divergence, with representations sampled
    /// around their means). The default is [`LinkModel::encode`] and no extra term;
    /// validation and scoring always use [`LinkModel::encode`]. Draw noise with
    /// [`GraphBatch::standard_normal_like`] (seeded per training step), not burn's
    /// `random_like`, whose generator the whole process shares.
    ///
    /// # Shapes
    /// `x: [N, d_in] → ([N, hidden], [1])`
    fn encode_train(&self, x: Tensor<2>, graph: &GraphBatch) -> (Tensor<2>, Option<Tensor<1>>) {
        (self.encode(x, graph), None)
    }

    /// Link logits of `pairs` from the node representations (σ(logit) ≥ 0.5 predicts a
    /// link). Each pair's logit must depend on its two endpoints' rows alone: at inference
    /// `h` holds only the query's and the candidates' rows, some of them kept from an
    /// earlier pass over the chunk graph.
    ///
    /// # Shapes
    /// `h: [N, hidden] → [P]`
    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1>;
}

/// A pair-level link model: scores each pair from the graph batch directly, for models
/// that cannot split into node encoding and pair decoding (SEAL cuts a labelled subgraph
/// around every pair). Every [`LinkModel`] is one (encode, then decode); implement this
/// trait instead of [`LinkModel`] only for such a model. [`BurnLinkPredictor`] trains and
/// serves either.
///
/// The batch holds the [`PairModel::pair_hops`]-hop neighbourhood of every pair endpoint
/// (a node at hop `< pair_hops` has all of its messages, so with `pair_hops = h + 1` the
/// edges among the `h`-hop nodes are complete); the trainer has removed the step's target
/// links.
pub trait PairModel: Module + Sync + 'static {
    /// Hops of graph the batch must hold around every pair endpoint.
    fn pair_hops(&self) -> usize;

    /// Width of the positional encodings read from [`GraphBatch::positional`] (0: none).
    fn pair_positional_dim(&self) -> usize {
        0
    }

    /// Logits of `pairs`, `[P]`, for node features `x: [N, d_in]`.
    fn score_pairs(&self, x: Tensor<2>, graph: &GraphBatch, pairs: &Pairs) -> Tensor<1>;

    /// [`PairModel::score_pairs`] in training, with an optional extra loss term; the
    /// default adds none.
    fn score_pairs_train(
        &self,
        x: Tensor<2>,
        graph: &GraphBatch,
        pairs: &Pairs,
    ) -> (Tensor<1>, Option<Tensor<1>>) {
        (self.score_pairs(x, graph, pairs), None)
    }

    /// Node representations, for a model that scores each pair from its two endpoints'
    /// rows alone (every [`LinkModel`]: its [`LinkModel::encode`]); `None`, the default,
    /// for a pair-level model. With them [`BurnLinkPredictor`] keeps every chunk's
    /// representation and, per query, re-encodes only the candidates within
    /// [`PairModel::pair_hops`] of a chunk the query joins.
    ///
    /// # Shapes
    /// `x: [N, d_in] → [N, hidden]`
    fn node_representations(&self, x: Tensor<2>, graph: &GraphBatch) -> Option<Tensor<2>> {
        let _ = (x, graph);
        None
    }

    /// Logits of `pairs` from rows of [`PairModel::node_representations`] (every
    /// [`LinkModel`]: its [`LinkModel::decode`]); `None` by default.
    ///
    /// # Shapes
    /// `h: [N, hidden] → [P]`
    fn score_representations(&self, h: Tensor<2>, pairs: &Pairs) -> Option<Tensor<1>> {
        let _ = (h, pairs);
        None
    }
}

impl<M: LinkModel> PairModel for M {
    fn pair_hops(&self) -> usize {
        self.hops()
    }

    fn pair_positional_dim(&self) -> usize {
        self.positional_dim()
    }

    fn score_pairs(&self, x: Tensor<2>, graph: &GraphBatch, pairs: &Pairs) -> Tensor<1> {
        self.decode(self.encode(x, graph), pairs)
    }

    fn score_pairs_train(
        &self,
        x: Tensor<2>,
        graph: &GraphBatch,
        pairs: &Pairs,
    ) -> (Tensor<1>, Option<Tensor<1>>) {
        let (h, extra) = self.encode_train(x, graph);
        (self.decode(h, pairs), extra)
    }

    fn node_representations(&self, x: Tensor<2>, graph: &GraphBatch) -> Option<Tensor<2>> {
        Some(self.encode(x, graph))
    }

    fn score_representations(&self, h: Tensor<2>, pairs: &Pairs) -> Option<Tensor<1>> {
        Some(self.decode(h, pairs))
    }
}

/// How a [`BurnLinkPredictor`] makes a fresh model: input width and device.
pub type ModelInit<M> = dyn Fn(usize, &Device) -> M + Send + Sync;
