//! [`GraphBatch`] (a neighbourhood on the device: nodes, messages, degrees, and the
//! sum, mean and GCN aggregations over them) and [`Pairs`] (the node pairs a model scores).

use std::sync::Arc;

use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};

#[cfg(test)]
use super::local::LocalGraph;

/// A graph batch on the device: the nodes a model encodes, the messages between them and
/// each node's weighted degree in the whole graph.
///
/// Edges are directed messages `src → dst`, both directions of every undirected edge that
/// ends at a node whose representation is needed; weights are the graph's (chunk–chunk:
/// cosine, query–chunk: 1), negative ones clamped to 0 and dropped. Nodes on the outer rim of
/// a neighbourhood receive no messages: only their input features are used.
#[derive(Debug, Clone)]
pub struct GraphBatch {
    pub(super) num_nodes: usize,
    pub(super) graph_nodes: usize,
    pub(super) num_edges: usize,
    /// Source node of each message, `[E]`.
    pub src: Tensor<1, Int>,
    /// Destination node of each message, `[E]`.
    pub dst: Tensor<1, Int>,
    /// Weight of each message, `[E, 1]`.
    pub weight: Tensor<2>,
    /// Weighted degree of each node in the whole graph (the step's masked targets
    /// excluded), `[N, 1]`.
    pub degree: Tensor<2>,
    pub(super) inv_degree: Tensor<2>,
    pub(super) gcn_coef: Tensor<2>,
    pub(super) gcn_self: Tensor<2>,
    pub(super) positional: Option<Tensor<2>>,
    pub(super) noise_seed: u64,
    pub(super) host: Arc<BatchHost>,
}

/// The host-side copy of a [`GraphBatch`]'s structure, for pair-level models that cut
/// their own subgraphs.
#[derive(Debug)]
pub(super) struct BatchHost {
    pub(super) nodes: Vec<u32>,
    pub(super) src: Vec<i64>,
    pub(super) dst: Vec<i64>,
    pub(super) weight: Vec<f32>,
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
    /// [`LinkModel::positional_dim`](crate::LinkModel::positional_dim), for a model that
    /// asked for them (`None` otherwise).
    ///
    /// Chunks: Laplacian eigenmaps of the index graph (chunks and synthetic queries; the
    /// `p` smallest eigenvectors of `I − D^-½AD^-½` by seeded subspace iteration, defined
    /// up to a rotation within each eigenspace), scaled so that the mean squared distance
    /// across the graph's edges is 1. Query nodes,
    /// synthetic or the user's: the mean of the rows of the chunks they join under the
    /// predictor's [`InferenceMode`](crate::InferenceMode) (zeros when isolated), the
    /// same rule in training and at inference.
    pub fn positional(&self) -> Option<Tensor<2>> {
        self.positional.clone()
    }

    /// Standard-normal noise shaped like `like`, on its device: what a sampling model
    /// (VGAE's reparameterisation) draws in
    /// [`LinkModel::encode_train`](crate::LinkModel::encode_train). The trainer seeds it
    /// per step from [`TrainConfig::seed`](crate::TrainConfig::seed), so the draws are
    /// the same on every run,
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

    /// The batch's messages as the built-in GNN layers read them: per-message
    /// coefficients of GraphSAGE's weighted mean or of GCN, and GCN's self loops (zero
    /// for SAGE).
    pub(crate) fn message_graph(
        &self,
        aggregation: crate::config::Aggregation,
    ) -> crate::host::MessageGraph {
        use crate::config::Aggregation;
        let (coef, self_coef) = match aggregation {
            Aggregation::Gcn => (self.gcn_coef.clone(), self.gcn_self.clone()),
            Aggregation::Sage => {
                let coef = if self.num_edges == 0 {
                    self.gcn_coef.clone()
                } else {
                    self.weight.clone() * self.inv_degree.clone().select(0, self.dst.clone())
                };
                (coef, self.gcn_self.clone().zeros_like())
            }
        };
        crate::host::MessageGraph {
            num_edges: self.num_edges,
            src: self.src.clone(),
            dst: self.dst.clone(),
            coef,
            self_coef,
        }
    }

    /// The common neighbours of each pair in the batch's messages, as `(pair index, node)`
    /// entries in batch positions (complete for pairs whose endpoints receive all their
    /// messages; neighbours joined by a non-positive weight carry no message and are not
    /// counted).
    pub(crate) fn common_neighbour_entries(&self, pairs: &[(u32, u32)]) -> (Vec<i64>, Vec<i64>) {
        let h = &*self.host;
        let mut into: std::collections::HashMap<u32, Vec<u32>> = pairs
            .iter()
            .flat_map(|&(a, b)| [(a, Vec::new()), (b, Vec::new())])
            .collect();
        for k in 0..h.src.len() {
            if let Some(list) = into.get_mut(&(h.dst[k] as u32)) {
                list.push(h.src[k] as u32);
            }
        }
        for list in into.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        let (mut pair, mut node) = (Vec::new(), Vec::new());
        for (k, (a, b)) in pairs.iter().enumerate() {
            let (la, lb) = (&into[a], &into[b]);
            let (mut x, mut y) = (0, 0);
            while x < la.len() && y < lb.len() {
                match la[x].cmp(&lb[y]) {
                    std::cmp::Ordering::Less => x += 1,
                    std::cmp::Ordering::Greater => y += 1,
                    std::cmp::Ordering::Equal => {
                        pair.push(k as i64);
                        node.push(la[x] as i64);
                        x += 1;
                        y += 1;
                    }
                }
            }
        }
        (pair, node)
    }

    pub(super) fn scatter(&self, h: Tensor<2>, coef: &Tensor<2>) -> Tensor<2> {
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
    pub(super) len: usize,
    pub(super) ids: Vec<(u32, u32)>,
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
