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

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};
use lprag_core::{ChunkId, Error, LinkGraph, LinkPredictor, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoints;
use crate::config::{InferenceMode, TrainConfig};
use crate::context::ChunkContext;
use crate::host::{pair_key, HostGraph};
use crate::positional::{laplacian_eigenmaps, mean_rows, ITERATIONS as PE_ITERATIONS};
use crate::seeding::{seed_generator, seeded};
use crate::shared::{
    bce, normalize_vec, read_versioned, rows_tensor, scalar, unit_rows, write_json, NegativeDraw,
};
use crate::training::{run_link_epochs, LinkLoop, Split};

/// Version of the directory [`BurnLinkPredictor`] saves.
pub const BURN_PREDICTOR_FORMAT_VERSION: u32 = 1;

const META_FILE: &str = "burn-predictor.json";
const WEIGHTS_FILE: &str = "weights.bpk";

/// Most held-out queries scored per validation (each is its own forward pass).
const MAX_VALIDATION: usize = 256;

/// Most held-out queries per validation under [`InferenceMode::JoinAll`], where each
/// forward pass covers the whole graph.
const MAX_JOIN_ALL_VALIDATION: usize = 32;

/// A graph batch on the device: the nodes a model encodes, the messages between them and
/// each node's weighted degree in the whole graph.
///
/// Edges are directed messages `src → dst`, both directions of every undirected edge that
/// ends at a node whose representation is needed; weights are the graph's (chunk–chunk:
/// cosine, query–chunk: 1), negative ones clamped to 0 and dropped. Nodes on the outer rim of
/// a neighbourhood receive no messages: only their input features are used.
#[derive(Debug, Clone)]
pub struct GraphBatch {
    num_nodes: usize,
    graph_nodes: usize,
    num_edges: usize,
    /// Source node of each message, `[E]`.
    pub src: Tensor<1, Int>,
    /// Destination node of each message, `[E]`.
    pub dst: Tensor<1, Int>,
    /// Weight of each message, `[E, 1]`.
    pub weight: Tensor<2>,
    /// Weighted degree of each node in the whole graph (the step's masked targets
    /// excluded), `[N, 1]`.
    pub degree: Tensor<2>,
    inv_degree: Tensor<2>,
    gcn_coef: Tensor<2>,
    gcn_self: Tensor<2>,
    positional: Option<Tensor<2>>,
    noise_seed: u64,
    host: Arc<BatchHost>,
}

/// The host-side copy of a [`GraphBatch`]'s structure, for pair-level models that cut
/// their own subgraphs.
#[derive(Debug)]
struct BatchHost {
    nodes: Vec<u32>,
    src: Vec<i64>,
    dst: Vec<i64>,
    weight: Vec<f32>,
}

impl GraphBatch {
    /// `n` nodes without edges, cut from a graph of `graph_nodes` nodes (unit tests).
    #[cfg(test)]
    pub(crate) fn isolated(n: usize, graph_nodes: usize, device: &Device) -> Self {
        LocalGraph::build(&(0..n as u32).collect::<Vec<_>>(), 0, &|_, _| {}, &|_| 0.0)
            .to_device(graph_nodes, device)
    }

    /// A batch of the undirected graph `adj` (every node receives its messages; degrees
    /// from `adj`) with positional rows `positional` (`[n, dim]`, row-major) (unit tests).
    #[cfg(test)]
    pub(crate) fn from_adjacency(
        adj: &[Vec<(u32, f32)>],
        dim: usize,
        positional: &[f32],
        device: &Device,
    ) -> Self {
        let n = adj.len() as u32;
        let nodes: Vec<u32> = (0..n).collect();
        let mut g = LocalGraph::build(
            &nodes,
            1,
            &|i, out| out.extend_from_slice(&adj[i as usize]),
            &|i| adj[i as usize].iter().map(|e| e.1.max(0.0)).sum(),
        );
        // Seeds are every node: give all of them their messages.
        g.src.clear();
        g.dst.clear();
        g.weight.clear();
        for (i, list) in adj.iter().enumerate() {
            for &(j, w) in list {
                if w > 0.0 {
                    g.src.push(j as i64);
                    g.dst.push(i as i64);
                    g.weight.push(w);
                }
            }
        }
        g.to_device_with(
            n as usize,
            dim,
            |i| &positional[i as usize * dim..(i as usize + 1) * dim],
            device,
        )
    }

    /// The graph node behind each batch node (chunks first, then query nodes in the
    /// index's numbering; the user query is node `num_chunks`), `[N]` on the host.
    pub fn node_ids(&self) -> &[u32] {
        &self.host.nodes
    }

    /// The messages on the host: `(src, dst, weight)` per message, batch positions, in the
    /// order of [`GraphBatch::src`] / [`GraphBatch::dst`].
    pub fn messages(&self) -> impl Iterator<Item = (u32, u32, f32)> + '_ {
        let h = &*self.host;
        (0..h.src.len()).map(move |k| (h.src[k] as u32, h.dst[k] as u32, h.weight[k]))
    }

    /// Number of nodes `N`.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of messages `E`.
    pub fn num_edges(&self) -> usize {
        self.num_edges
    }

    /// Number of nodes of the whole graph this batch was cut from (for losses scaled by
    /// the graph's size, such as VGAE's `KL / N`).
    pub fn graph_nodes(&self) -> usize {
        self.graph_nodes
    }

    /// The nodes' positional encodings, `[N, p]` with `p` =
    /// [`LinkModel::positional_dim`], for a model that asked for them (`None` otherwise).
    ///
    /// Chunks: Laplacian eigenmaps of the index graph (chunks and synthetic queries; the
    /// `p` smallest eigenvectors of `I − D^-½AD^-½` by seeded subspace iteration, defined
    /// up to a rotation within each eigenspace), scaled so that the mean squared distance
    /// across the graph's edges is 1. Query nodes,
    /// synthetic or the user's: the mean of the rows of the chunks they join under the
    /// predictor's [`InferenceMode`] (zeros when isolated), the same rule in training and
    /// at inference.
    pub fn positional(&self) -> Option<Tensor<2>> {
        self.positional.clone()
    }

    /// Standard-normal noise shaped like `like`, on its device: what a sampling model
    /// (VGAE's reparameterisation) draws in [`LinkModel::encode_train`]. The trainer seeds
    /// it per step from [`TrainConfig::seed`], so the draws are the same on every run,
    /// whatever else trains in the process; burn's `random_like` shares one generator
    /// across the process and would not be.
    ///
    /// # Shapes
    /// `like: [R, C] → [R, C]`
    pub fn standard_normal_like(&self, like: &Tensor<2>) -> Tensor<2> {
        let [r, c] = like.dims();
        let values = crate::seeding::standard_normal(self.noise_seed, r * c);
        Tensor::<2>::from_data(TensorData::new(values, [r, c]), &like.device())
    }

    fn scatter(&self, h: Tensor<2>, coef: &Tensor<2>) -> Tensor<2> {
        let [n, d] = h.dims();
        let out = Tensor::<2>::zeros([n, d], &h.device());
        if self.num_edges == 0 {
            return out;
        }
        let msgs = h.select(0, self.src.clone()) * coef.clone();
        out.select_assign(0, self.dst.clone(), msgs, IndexingUpdateOp::Add)
    }

    /// `Σ_j w_ij h_j` for every node `i`.
    ///
    /// # Shapes
    /// `[N, d] → [N, d]`
    pub fn sum(&self, h: Tensor<2>) -> Tensor<2> {
        self.scatter(h, &self.weight)
    }

    /// The weighted neighbourhood mean `Σ_j w_ij h_j / Σ_j w_ij` (0 for an isolated node),
    /// the aggregation of GraphSAGE's mean variant.
    ///
    /// # Shapes
    /// `[N, d] → [N, d]`
    pub fn mean(&self, h: Tensor<2>) -> Tensor<2> {
        self.sum(h) * self.inv_degree.clone()
    }

    /// GCN propagation with self loops: `Σ_j w_ij h_j / sqrt((1 + d_i)(1 + d_j)) +
    /// h_i / (1 + d_i)` (Kipf & Welling's `D^-½(A+I)D^-½`, weighted).
    ///
    /// # Shapes
    /// `[N, d] → [N, d]`
    pub fn gcn(&self, h: Tensor<2>) -> Tensor<2> {
        self.scatter(h.clone(), &self.gcn_coef) + h * self.gcn_self.clone()
    }

    /// [`GraphBatch::gcn`] with a factor on every message and self loop:
    /// `Σ_j c_ij e_ij h_j + c_ii s_i h_i` (PEG scales each message by a function of the two
    /// nodes' positional distance).
    ///
    /// # Shapes
    /// `h: [N, d]`, `edge: [E, 1]`, `self_loop: [N, 1]` `→ [N, d]`
    pub fn gcn_scaled(&self, h: Tensor<2>, edge: Tensor<2>, self_loop: Tensor<2>) -> Tensor<2> {
        let own = h.clone() * (self.gcn_self.clone() * self_loop);
        if self.num_edges == 0 {
            return own;
        }
        self.scatter(h, &(self.gcn_coef.clone() * edge)) + own
    }
}

/// Node pairs to score, as positions in the [`GraphBatch`].
#[derive(Debug, Clone)]
pub struct Pairs {
    len: usize,
    ids: Vec<(u32, u32)>,
    /// First node of each pair (the query, for retrieval), `[P]`.
    pub src: Tensor<1, Int>,
    /// Second node of each pair (the chunk), `[P]`.
    pub dst: Tensor<1, Int>,
}

impl Pairs {
    pub(crate) fn new(pairs: &[(u32, u32)], device: &Device) -> Self {
        let len = pairs.len();
        let a: Vec<i64> = pairs.iter().map(|p| p.0 as i64).collect();
        let b: Vec<i64> = pairs.iter().map(|p| p.1 as i64).collect();
        Self {
            len,
            ids: pairs.to_vec(),
            src: Tensor::<1, Int>::from_data(TensorData::new(a, [len]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(b, [len]), device),
        }
    }

    /// The pairs on the host, as batch positions (`(src, dst)` per pair).
    pub fn ids(&self) -> &[(u32, u32)] {
        &self.ids
    }

    /// Number of pairs `P`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `h_i ⊙ h_j` for every pair.
    ///
    /// # Shapes
    /// `[N, d] → [P, d]`
    pub fn hadamard(&self, h: Tensor<2>) -> Tensor<2> {
        h.clone().select(0, self.src.clone()) * h.select(0, self.dst.clone())
    }

    /// `⟨h_i, h_j⟩` for every pair.
    ///
    /// # Shapes
    /// `[N, d] → [P]`
    pub fn dot(&self, h: Tensor<2>) -> Tensor<1> {
        self.hadamard(h).sum_dim(1).reshape([self.len])
    }
}

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

/// Appends a node's `(neighbour, weight)` pairs to the buffer.
type Neighbours<'a> = dyn Fn(u32, &mut Vec<(u32, f32)>) + 'a;

/// A host-side neighbourhood: local nodes (seeds first), messages into the nodes whose
/// representations are needed, and degrees.
struct LocalGraph {
    nodes: Vec<u32>,
    local: HashMap<u32, u32>,
    src: Vec<i64>,
    dst: Vec<i64>,
    weight: Vec<f32>,
    degree: Vec<f32>,
}

impl LocalGraph {
    /// The `hops`-hop neighbourhood of `seeds`. `neighbours(i, out)` appends node `i`'s
    /// `(neighbour, weight)` pairs; `degree(i)` is its weighted degree.
    fn build(
        seeds: &[u32],
        hops: usize,
        neighbours: &Neighbours<'_>,
        degree: &dyn Fn(u32) -> f32,
    ) -> Self {
        let mut local: HashMap<u32, u32> = HashMap::with_capacity(seeds.len() * 4);
        let mut nodes: Vec<u32> = Vec::with_capacity(seeds.len() * 4);
        let mut add = |g: u32, nodes: &mut Vec<u32>| {
            if let std::collections::hash_map::Entry::Vacant(e) = local.entry(g) {
                e.insert(nodes.len() as u32);
                nodes.push(g);
            }
        };
        for &s in seeds {
            add(s, &mut nodes);
        }
        let mut buf = Vec::new();
        let (mut lo, mut receivers) = (0usize, 0usize);
        for _ in 0..hops {
            let hi = nodes.len();
            for idx in lo..hi {
                buf.clear();
                neighbours(nodes[idx], &mut buf);
                for &(j, _) in &buf {
                    add(j, &mut nodes);
                }
            }
            lo = hi;
            receivers = hi;
        }
        let (mut src, mut dst, mut weight) = (Vec::new(), Vec::new(), Vec::new());
        for (li, &node) in nodes.iter().enumerate().take(receivers) {
            buf.clear();
            neighbours(node, &mut buf);
            for &(j, w) in &buf {
                let w = w.max(0.0);
                if w > 0.0 {
                    src.push(local[&j] as i64);
                    dst.push(li as i64);
                    weight.push(w);
                }
            }
        }
        let degree = nodes.iter().map(|&g| degree(g)).collect();
        Self {
            nodes,
            local,
            src,
            dst,
            weight,
            degree,
        }
    }

    fn to_device(&self, graph_nodes: usize, device: &Device) -> GraphBatch {
        let (n, e) = (self.nodes.len(), self.src.len());
        let d = |i: i64| self.degree[i as usize];
        let inv: Vec<f32> = self
            .degree
            .iter()
            .map(|&x| if x > 0.0 { 1.0 / x } else { 0.0 })
            .collect();
        let gcn_coef: Vec<f32> = (0..e)
            .map(|k| self.weight[k] / ((1.0 + d(self.src[k])) * (1.0 + d(self.dst[k]))).sqrt())
            .collect();
        let gcn_self: Vec<f32> = self.degree.iter().map(|&x| 1.0 / (1.0 + x)).collect();
        let col = |v: Vec<f32>, rows: usize| {
            Tensor::<2>::from_data(TensorData::new(v, [rows, 1]), device)
        };
        GraphBatch {
            num_nodes: n,
            graph_nodes,
            num_edges: e,
            src: Tensor::<1, Int>::from_data(TensorData::new(self.src.clone(), [e]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(self.dst.clone(), [e]), device),
            weight: col(self.weight.clone(), e),
            degree: col(self.degree.clone(), n),
            inv_degree: col(inv, n),
            gcn_coef: col(gcn_coef, e),
            gcn_self: col(gcn_self, n),
            positional: None,
            noise_seed: 0,
            host: Arc::new(BatchHost {
                nodes: self.nodes.clone(),
                src: self.src.clone(),
                dst: self.dst.clone(),
                weight: self.weight.clone(),
            }),
        }
    }

    /// [`LocalGraph::to_device`] with the nodes' positional rows, `row(g)` for each, when
    /// `dim > 0`.
    fn to_device_with<'a>(
        &self,
        graph_nodes: usize,
        dim: usize,
        row: impl Fn(u32) -> &'a [f32],
        device: &Device,
    ) -> GraphBatch {
        let mut batch = self.to_device(graph_nodes, device);
        if dim > 0 {
            batch.positional = Some(self.features(dim, row, device));
        }
        batch
    }

    /// The local nodes' feature rows: `row(g)` for each.
    fn features<'a>(&self, d: usize, row: impl Fn(u32) -> &'a [f32], device: &Device) -> Tensor<2> {
        let mut data = Vec::with_capacity(self.nodes.len() * d);
        for &g in &self.nodes {
            data.extend_from_slice(row(g));
        }
        rows_tensor(data, self.nodes.len(), d, device)
    }
}

/// The chunk graph with one extra query node (id `num_chunks`) joined to some chunks.
struct QueryView<'a> {
    ctx: &'a ChunkContext,
    wsum: &'a [f32],
    /// Sorted chunk ids the query joins; `None` joins every chunk.
    join: Option<Vec<u32>>,
}

impl QueryView<'_> {
    fn qid(&self) -> u32 {
        self.ctx.num_chunks() as u32
    }

    fn joined(&self, c: u32) -> bool {
        match &self.join {
            None => true,
            Some(j) => j.binary_search(&c).is_ok(),
        }
    }

    fn neighbours(&self, i: u32, out: &mut Vec<(u32, f32)>) {
        if i == self.qid() {
            match &self.join {
                None => out.extend((0..self.qid()).map(|c| (c, 1.0))),
                Some(j) => out.extend(j.iter().map(|&c| (c, 1.0))),
            }
        } else {
            out.extend_from_slice(self.ctx.host.neighbors(i));
            if self.joined(i) {
                out.push((self.qid(), 1.0));
            }
        }
    }

    fn degree(&self, i: u32) -> f32 {
        if i == self.qid() {
            match &self.join {
                None => self.qid() as f32,
                Some(j) => j.len() as f32,
            }
        } else {
            self.wsum[i as usize] + if self.joined(i) { 1.0 } else { 0.0 }
        }
    }
}

/// What [`BurnLinkPredictor`] writes beside the weights.
#[derive(Debug, Serialize, Deserialize)]
struct BurnMeta {
    format_version: u32,
    name: String,
    train: TrainConfig,
    d_in: usize,
}

struct Served<M> {
    model: Option<M>,
    d_in: usize,
    ctx: ChunkContext,
    wsum: Vec<f32>,
    positions: ChunkPositions,
    /// Every chunk's representation without a query, for a model that has them
    /// ([`PairModel::node_representations`]).
    reps: Option<ChunkReps>,
}

/// The chunks' node representations, `[num_chunks, width]`, row-major.
struct ChunkReps {
    width: usize,
    rows: Vec<f32>,
}

/// Chunks within `hops` edges of `start` (`start` included): those whose representation a
/// query node joined to `start` can change (its messages reach `hops − 1` further, and
/// the joined chunks' degrees one more).
fn within_hops(host: &HostGraph, start: &[u32], hops: usize) -> std::collections::HashSet<u32> {
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
struct ChunkPositions {
    dim: usize,
    rows: Vec<f32>,
}

impl ChunkPositions {
    /// Laplacian eigenmaps of the whole `graph` (seeded), the chunks' rows kept.
    fn new(graph: &LinkGraph, dim: usize, seed: u64) -> Result<Self> {
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

    fn chunk(&self, i: u32) -> &[f32] {
        &self.rows[i as usize * self.dim..(i as usize + 1) * self.dim]
    }

    /// A query node's row: the mean of the chunks it joins (`None`: every chunk).
    fn query(&self, join: Option<&[u32]>) -> Vec<f32> {
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
    name: String,
    init: Arc<ModelInit<M>>,
    train: TrainConfig,
    device: Device,
    state: Option<Served<M>>,
    checkpoints: Option<std::path::PathBuf>,
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
        };
        p.serve(Some(model), graph, None)?;
        Ok(p)
    }

    /// Serve `model` on `graph`; `positions` are the chunks' encodings when the caller
    /// already computed them for this graph (training does), else they are computed here.
    fn serve(
        &mut self,
        model: Option<M>,
        graph: &LinkGraph,
        positions: Option<ChunkPositions>,
    ) -> Result<()> {
        let ctx = ChunkContext::new(graph)?;
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
        };
        if let Some(m) = &st.model {
            st.reps = chunk_representations(m, &st, &self.device);
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

    fn served(&self) -> Result<(&M, &Served<M>)> {
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
    fn join_of(&self, st: &Served<M>, q: &[f32], nearest: &[ChunkId]) -> Option<Vec<u32>> {
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
    fn score_query(
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
    fn score_cached(
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

    fn checked(&self, query: &[f32], candidates: &[ChunkId]) -> Result<(&M, &Served<M>, Vec<u32>)> {
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
fn query_inputs<M>(
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
fn chunk_representations<M: PairModel>(
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

/// The whole chunk graph plus the query node (local ids: query first, then chunks), every
/// node receiving its messages.
fn full_graph(view: &QueryView<'_>, hops: usize) -> LocalGraph {
    let qid = view.qid();
    let mut seeds = vec![qid];
    seeds.extend(0..qid);
    let mut g = LocalGraph::build(&seeds, 0, &|i, out| view.neighbours(i, out), &|i| {
        view.degree(i)
    });
    if hops > 0 {
        let mut buf = Vec::new();
        for li in 0..g.nodes.len() {
            buf.clear();
            view.neighbours(g.nodes[li], &mut buf);
            for &(j, w) in &buf {
                let w = w.max(0.0);
                if w > 0.0 {
                    g.src.push(g.local[&j] as i64);
                    g.dst.push(li as i64);
                    g.weight.push(w);
                }
            }
        }
    }
    g
}

impl<M: PairModel> LinkPredictor for BurnLinkPredictor<M> {
    fn name(&self) -> &str {
        &self.name
    }

    fn fit(&mut self, graph: &LinkGraph, progress: &dyn Progress) -> Result<TrainReport> {
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
        if let Some(st) = &self.state {
            if st.model.is_some() && st.d_in != graph.features.dim() {
                return Some(Err(Error::DimensionMismatch {
                    location: format!(
                        "BurnLinkPredictor '{}' attach_copy (feature width)",
                        self.name
                    ),
                    expected: st.d_in,
                    actual: graph.features.dim(),
                }));
            }
        }
        let mut copy = BurnLinkPredictor {
            name: self.name.clone(),
            init: self.init.clone(),
            train: self.train.clone(),
            device: self.device.clone(),
            state: None,
            checkpoints: self.checkpoints.clone(),
        };
        let model = self.state.as_ref().and_then(|s| s.model.clone());
        Some(
            copy.serve(model, graph, None)
                .map(|()| Box::new(copy) as Box<dyn LinkPredictor>),
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
        Ok(self.score_query(m, st, &normalize_vec(query), nearest, &cands, false))
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let (m, st) = self.served()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let meta = BurnMeta {
            format_version: BURN_PREDICTOR_FORMAT_VERSION,
            name: self.name.clone(),
            train: self.train.clone(),
            d_in: st.d_in,
        };
        write_json(&dir.join(META_FILE), &meta)?;
        crate::weights::save_weights(m, &dir.join(WEIGHTS_FILE))
    }
}

/// What one training run needs from its predictor.
struct Run<'a, M> {
    name: &'a str,
    init: &'a ModelInit<M>,
    train: &'a TrainConfig,
    device: &'a Device,
    checkpoints: Option<&'a Path>,
}

/// A held-out query: its node, normalised features, candidate chunks, positives first.
struct Held {
    features: Vec<f32>,
    join: Option<Vec<u32>>,
    cands: Vec<u32>,
    positives: usize,
}

/// The library's trainer for any [`LinkModel`]; returns the best model (validation mode)
/// on `device`.
fn train<M: PairModel>(
    run: &Run<'_, M>,
    graph: &LinkGraph,
    progress: &dyn Progress,
) -> Result<(M, TrainReport, Option<ChunkPositions>)> {
    let (init, tc, device) = (run.init, run.train, run.device);
    let started = Instant::now();
    if tc.epochs == 0 {
        return Err(Error::invalid("TrainConfig.epochs", "must be at least 1"));
    }
    if !(tc.learning_rate.is_finite() && tc.learning_rate > 0.0) {
        return Err(Error::invalid(
            "TrainConfig.learning_rate",
            format!("must be finite and > 0, got {}", tc.learning_rate),
        ));
    }
    graph.validate()?;
    let (nc, n, d_in) = (graph.num_chunks, graph.num_nodes(), graph.features.dim());
    let mut rng = StdRng::seed_from_u64(tc.seed);

    // Inductive split: whole synthetic queries held out for validation.
    let Split {
        val,
        msg_edges,
        targets,
        val_pos,
    } = Split::new(graph, tc, &mut rng);

    if nc < 2 || targets.is_empty() {
        // Nothing to learn from: the initial weights, no epochs.
        let model = seeded(device, tc.seed, || init(d_in, device));
        return Ok((
            model,
            TrainReport {
                seconds: started.elapsed().as_secs_f64(),
                ..TrainReport::default()
            },
            None,
        ));
    }
    let ad = device.clone().autodiff();
    // Held through the first step: parameters are drawn at their first use.
    let draws = seed_generator(&ad, tc.seed);
    let model = init(d_in, &ad);
    let hops = model.pair_hops();
    let xh = unit_rows(&graph.features);
    let host = HostGraph::from_edges(n, msg_edges.iter().copied())?;
    let wsum = host.weight_sums();
    let sampler = NegativeDraw::new(tc.negatives, nc, &host)?;

    // Validation queries, scored as at inference against fixed negatives.
    let ctx = ChunkContext::new(graph)?;
    let ctx_wsum = ctx.host.weight_sums();
    // Positional encodings (for a model that asks): chunks' eigenmap rows, and for every
    // synthetic query the mean of the chunks it would join at inference.
    let positions = ChunkPositions::new(graph, model.pair_positional_dim(), tc.seed)?;
    let train_pos: Vec<f32> = if positions.dim == 0 {
        Vec::new()
    } else {
        let mut rows = positions.rows.clone();
        let all = positions.query(None);
        for q in nc..n {
            match tc.inference {
                InferenceMode::JoinAll => rows.extend_from_slice(&all),
                mode => {
                    let f = normalize_vec(graph.features.row(q));
                    rows.extend(positions.query(Some(&ctx.join(&f, mode))));
                }
            }
        }
        rows
    };
    let pdim = positions.dim;
    let mut held_ids: Vec<u32> = val.iter().copied().collect();
    held_ids.sort_unstable();
    // With the query joined to every chunk each held-out query is a pass over the whole
    // graph: fewer of them.
    held_ids.truncate(if tc.inference == InferenceMode::JoinAll {
        MAX_JOIN_ALL_VALIDATION
    } else {
        MAX_VALIDATION
    });
    let held_features: Vec<Vec<f32>> = held_ids
        .iter()
        .map(|&q| normalize_vec(graph.features.row(q as usize)))
        .collect();
    let mut held_joins = match tc.inference {
        InferenceMode::JoinAll => Vec::new(),
        mode => {
            let queries: Vec<&[f32]> = held_features.iter().map(Vec::as_slice).collect();
            ctx.join_many(&queries, mode)
        }
    }
    .into_iter();
    let held: Vec<Held> = held_ids
        .iter()
        .zip(held_features)
        .map(|(&q, features)| {
            let pos = val_pos.get(&q).cloned().unwrap_or_default();
            let mut cands = pos.clone();
            for &p in &pos {
                for _ in 0..tc.negatives_per_positive {
                    cands.push(sampler.draw(&mut rng, p));
                }
            }
            // In id order, one per held-out query (none with the query joined to all).
            let join = held_joins.next();
            Held {
                features,
                join,
                cands,
                positives: pos.len(),
            }
        })
        .filter(|h| h.positives > 0)
        .collect();

    let checkpoints = run
        .checkpoints
        .map(|dir| Checkpoints::open(dir, graph, &(run.name, tc)))
        .transpose()?;
    let lp = LinkLoop {
        location: "BurnLinkPredictor::fit",
        train: tc,
        targets: &targets,
        sampler: &sampler,
        checkpoints: checkpoints.as_ref(),
        validates: !held.is_empty(),
        progress,
    };
    let chunks = ChunkSide {
        ctx: &ctx,
        wsum: &ctx_wsum,
        positions: &positions,
    };
    let (model, mut report) = run_link_epochs(
        &lp,
        model,
        || init(d_in, device),
        draws,
        |model, step| {
            // Masked targets no longer count towards degrees (summed in sorted order, so
            // that runs are reproducible: hash-set order differs between processes).
            let mut less: HashMap<u32, f32> = HashMap::new();
            let mut sorted: Vec<(u32, u32)> = step.masked.iter().copied().collect();
            sorted.sort_unstable();
            for &(a, b) in &sorted {
                if let Some(&(_, w)) = host.neighbors(a).iter().find(|&&(j, _)| j == b) {
                    *less.entry(a).or_default() += w.max(0.0);
                    *less.entry(b).or_default() += w.max(0.0);
                }
            }
            let seeds: Vec<u32> = step.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
            let g = LocalGraph::build(
                &seeds,
                hops,
                &|i, out| {
                    out.extend(host.neighbors(i).iter().filter(|&&(j, _)| {
                        step.masked.is_empty() || !step.masked.contains(&pair_key(i, j))
                    }))
                },
                &|i| wsum[i as usize] - less.get(&i).copied().unwrap_or(0.0),
            );
            let x = g.features(d_in, |i| xh.row(i as usize), &ad);
            let local: Vec<(u32, u32)> = step
                .pairs
                .iter()
                .map(|&(a, b)| (g.local[&a], g.local[&b]))
                .collect();
            let mut gb = g.to_device_with(
                n,
                pdim,
                |i| &train_pos[i as usize * pdim..(i as usize + 1) * pdim],
                &ad,
            );
            // The step's own noise seed (the epoch's generator is left as it was).
            gb.noise_seed = tc.seed
                ^ (step.epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ (step.index as u64 + 1).wrapping_mul(0xd6e8_feb8_6659_fd93);
            let (logits, extra) = model.score_pairs_train(x, &gb, &Pairs::new(&local, &ad));
            let mut loss = bce(logits, step.targets.len());
            if let Some(extra) = extra {
                loss = loss + extra;
            }
            Ok(loss)
        },
        |valid| Ok(validation_loss(valid, &held, &chunks, hops, d_in, device)),
    )?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok((model, report, Some(positions)))
}

/// What validation reads of the chunk graph.
#[derive(Clone, Copy)]
struct ChunkSide<'a> {
    ctx: &'a ChunkContext,
    wsum: &'a [f32],
    positions: &'a ChunkPositions,
}

/// Mean BCE of the held-out queries, each scored on its own neighbourhood.
fn validation_loss<M: PairModel>(
    model: &M,
    held: &[Held],
    chunks: &ChunkSide<'_>,
    hops: usize,
    d_in: usize,
    device: &Device,
) -> f32 {
    let ChunkSide {
        ctx,
        wsum,
        positions,
    } = *chunks;
    let mut total = 0.0f32;
    for v in held {
        let view = QueryView {
            ctx,
            wsum,
            join: v.join.clone(),
        };
        let qid = view.qid();
        let mut seeds = vec![qid];
        seeds.extend_from_slice(&v.cands);
        let g = LocalGraph::build(&seeds, hops, &|i, out| view.neighbours(i, out), &|i| {
            view.degree(i)
        });
        let x = g.features(
            d_in,
            |i| {
                if i == qid {
                    &v.features
                } else {
                    ctx.features.row(i as usize)
                }
            },
            device,
        );
        let pairs: Vec<(u32, u32)> = v.cands.iter().map(|&c| (0, g.local[&c])).collect();
        let q_pos = positions.query(v.join.as_deref());
        let batch = g.to_device_with(
            qid as usize + 1,
            positions.dim,
            |i| if i == qid { &q_pos } else { positions.chunk(i) },
            device,
        );
        let logits = model.score_pairs(x, &batch, &Pairs::new(&pairs, device));
        total += scalar(bce(logits, v.positives));
    }
    total / held.len().max(1) as f32
}
