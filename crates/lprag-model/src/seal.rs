//! SEAL (Zhang & Chen 2018, "Link Prediction Based on Graph Neural Networks"), one of
//! LP-RAG's Table 6 predictors, written as a [`PairModel`] and trained by
//! [`BurnLinkPredictor`].
//!
//! For every pair `(a, b)` SEAL cuts the `h`-hop enclosing subgraph (the nodes within `h`
//! hops of `a` or `b` and every edge among them, the link `a–b` itself removed), labels
//! each node by Double-Radius Node Labelling (DRNL: `1` for `a` and `b`; for a node at
//! distance `x` from `a` (paths avoiding `b`) and `y` from `b` (avoiding `a`),
//! `1 + min(x, y) + (d/2)·(d/2 + d%2 − 1)` with `d = x + y`; `0` if either is unreachable),
//! and runs a GNN on the subgraph: input `[embedding(label) ‖ x]`, GCN layers
//! (`D^-½(A+I)D^-½` of the subgraph, weighted) with ReLU between them, then centre
//! pooling, `Linear(ReLU(Linear(h_a ⊙ h_b)))`. This is the GCN variant of the SEAL_OGB
//! reference code (the 2018 paper's DGCNN with sort pooling is its other variant).
//!
//! Where neither LP-RAG nor SEAL fixes a value: `max_nodes_per_hop` defaults to 100 (a
//! query joined to every chunk would otherwise make each pair's subgraph the whole
//! corpus); over the cap a hop keeps a deterministic pseudo-random sample (keyed by the
//! pair's graph nodes, so a pair always gets the same subgraph); labels above
//! `max_label` share its embedding.
//!
//! # Shapes
//! `x: [N, d_in]`; all pairs' subgraphs side by side, `T` nodes: input `[T, hidden + d_in]`,
//! layers `[T, hidden]`; logits `[P]`.

use std::collections::{HashMap, HashSet, VecDeque};

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::link_model::{BurnLinkPredictor, GraphBatch, PairModel, Pairs};

/// Sizes of a [`Seal`]. Default: LP-RAG Table 8 (3 layers, hidden 32) and SEAL's 1-hop
/// enclosing subgraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SealConfig {
    /// Radius of the enclosing subgraph (SEAL: 1).
    pub hops: usize,
    /// GCN layers (Table 8: 3).
    pub layers: usize,
    /// Width of the labels' embedding and of every layer (Table 8: 32).
    pub hidden: usize,
    /// Largest DRNL label with its own embedding; larger ones share it.
    pub max_label: usize,
    /// Most new nodes each hop adds to a subgraph (`None`: no cap).
    pub max_nodes_per_hop: Option<usize>,
}

impl SealConfig {
    /// Check the sizes (widths in `1..=MAX_HIDDEN`, at most `MAX_LAYERS` layers); the
    /// predictor checks them before training and when restoring.
    pub fn validate(&self) -> lprag_core::Result<()> {
        crate::config::check_sizes("SealConfig", self.hidden, self.layers)?;
        if self.hops == 0 || self.hops > 4 || self.max_label > crate::config::MAX_HIDDEN {
            return Err(lprag_core::Error::invalid(
                "SealConfig",
                format!(
                    "hops must be in 1..=4 and max_label at most {}, got {} and {}",
                    crate::config::MAX_HIDDEN,
                    self.hops,
                    self.max_label
                ),
            ));
        }
        Ok(())
    }

    /// A lower bound on the weights of a [`Seal`] for `d_in`-wide features (its matrices
    /// and label embeddings; biases are the rest), saturating: restoring compares it with
    /// the weights file's size before the model is built.
    pub fn min_parameters(&self, d_in: usize) -> u128 {
        let (d, h, layers, labels) = (
            d_in as u128,
            self.hidden.max(1) as u128,
            self.layers.max(1) as u128,
            (self.max_label as u128).saturating_add(1),
        );
        let hh = h.saturating_mul(h);
        // Labels (max_label + 1) × h; first layer (h + d) × h, the others h × h; the
        // readout h × h and h × 1.
        labels
            .saturating_mul(h)
            .saturating_add(h.saturating_add(d).saturating_mul(h))
            .saturating_add(layers.saturating_mul(hh))
            .saturating_add(h)
    }
}

impl Default for SealConfig {
    fn default() -> Self {
        Self {
            hops: 1,
            layers: 3,
            hidden: 32,
            max_label: 50,
            max_nodes_per_hop: Some(100),
        }
    }
}

/// DRNL label of a node at distance `x` from one target and `y` from the other.
pub fn drnl_label(x: Option<u32>, y: Option<u32>) -> u32 {
    match (x, y) {
        (Some(0), _) | (_, Some(0)) => 1,
        (Some(x), Some(y)) => {
            let d = x + y;
            let (h, r) = (d / 2, d % 2);
            1 + x.min(y) + h * (h + r - 1)
        }
        _ => 0,
    }
}

/// One pair's enclosing subgraph, in batch positions: `nodes[0]` and `nodes[1]` are the
/// pair; `edges` are directed messages `(from, to, weight)` as indices into `nodes`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Enclosing {
    pub nodes: Vec<u32>,
    pub labels: Vec<u32>,
    pub edges: Vec<(u32, u32, f32)>,
}

/// A pseudo-random key for keeping a sample of `node` in the subgraph of `(a, b)`
/// (SplitMix64 of the three graph ids).
fn sample_key(a: u32, b: u32, node: u32) -> u64 {
    let mut z = ((a as u64) << 32 | b as u64) ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hop distances from local node `start` over `nbrs` (each node's in-neighbours), never
/// entering `banned`; `None` where unreachable.
fn distances(nbrs: &[Vec<u32>], start: usize, banned: usize) -> Vec<Option<u32>> {
    let mut dist = vec![None; nbrs.len()];
    dist[start] = Some(0);
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        let du = dist[u].unwrap_or(0);
        for &v in &nbrs[u] {
            let v = v as usize;
            if v != banned && dist[v].is_none() {
                dist[v] = Some(du + 1);
                queue.push_back(v);
            }
        }
    }
    dist
}

/// The `hops`-hop enclosing subgraph of `(a, b)` (batch positions) in the undirected graph
/// `adj` (`adj[v]`: `v`'s neighbours and weights), with DRNL labels; `ids` maps batch
/// positions to graph nodes for the sampling key.
pub(crate) fn enclosing_subgraph(
    adj: &[Vec<(u32, f32)>],
    ids: &[u32],
    a: u32,
    b: u32,
    hops: usize,
    cap: Option<usize>,
) -> Enclosing {
    let mut nodes = vec![a, b];
    let mut local: HashMap<u32, u32> = HashMap::from([(a, 0), (b, 1)]);
    if a == b {
        nodes.pop();
        local.insert(a, 0);
    }
    let mut frontier = nodes.clone();
    let (ga, gb) = (ids[a as usize], ids[b as usize]);
    for _ in 0..hops {
        let mut fresh: Vec<u32> = Vec::new();
        let mut seen: HashSet<u32> = HashSet::new();
        for &u in &frontier {
            for &(v, _) in &adj[u as usize] {
                if !local.contains_key(&v) && seen.insert(v) {
                    fresh.push(v);
                }
            }
        }
        if let Some(cap) = cap {
            if fresh.len() > cap {
                fresh.sort_by_key(|&v| (sample_key(ga, gb, ids[v as usize]), v));
                fresh.truncate(cap);
            }
        }
        fresh.sort_unstable();
        for &v in &fresh {
            local.insert(v, nodes.len() as u32);
            nodes.push(v);
        }
        frontier = fresh;
    }
    let target = |x: u32, y: u32| (x == a && y == b) || (x == b && y == a);
    let mut edges = Vec::new();
    for (li, &v) in nodes.iter().enumerate() {
        for &(u, w) in &adj[v as usize] {
            if let Some(&lu) = local.get(&u) {
                if !target(u, v) && u != v && w > 0.0 {
                    edges.push((lu, li as u32, w));
                }
            }
        }
    }
    // Distances from each target with the other removed, over the subgraph's edges.
    let n = nodes.len();
    let mut nbrs: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(u, v, _) in &edges {
        nbrs[v as usize].push(u);
    }
    let bfs = |start: usize, banned: usize| distances(&nbrs, start, banned);
    let labels = if a == b {
        let da = bfs(0, usize::MAX);
        da.iter().map(|&x| drnl_label(x, x)).collect()
    } else {
        let (da, db) = (bfs(0, 1), bfs(1, 0));
        (0..n).map(|i| drnl_label(da[i], db[i])).collect()
    };
    Enclosing {
        nodes,
        labels,
        edges,
    }
}

/// The SEAL link model (see the module documentation).
#[derive(Module, Debug)]
pub struct Seal {
    label: Embedding,
    layers: Vec<Linear>,
    lin1: Linear,
    lin2: Linear,
    hops: usize,
    max_label: usize,
    cap: usize,
}

impl Seal {
    /// A fresh model for `d_in`-wide features on `device`.
    pub fn new(d_in: usize, config: &SealConfig, device: &Device) -> Self {
        let h = config.hidden.max(1);
        let layers = (0..config.layers.max(1))
            .map(|l| LinearConfig::new(if l == 0 { h + d_in } else { h }, h).init(device))
            .collect();
        Self {
            label: EmbeddingConfig::new(config.max_label + 1, h).init(device),
            layers,
            lin1: LinearConfig::new(h, h).init(device),
            lin2: LinearConfig::new(h, 1).init(device),
            hops: config.hops.max(1),
            max_label: config.max_label,
            cap: config.max_nodes_per_hop.unwrap_or(0),
        }
    }
}

impl PairModel for Seal {
    fn pair_hops(&self) -> usize {
        // One more than the radius: the batch then holds every edge among the subgraph's
        // outermost nodes.
        self.hops + 1
    }

    fn score_pairs(&self, x: Tensor<2>, graph: &GraphBatch, pairs: &Pairs) -> Tensor<1> {
        let device = x.device();
        let n = graph.num_nodes();
        let mut adj: Vec<Vec<(u32, f32)>> = vec![Vec::new(); n];
        for (src, dst, w) in graph.messages() {
            adj[dst as usize].push((src, w));
        }
        let cap = (self.cap > 0).then_some(self.cap);
        // All pairs' subgraphs side by side.
        let (mut rows, mut labels) = (Vec::<i64>::new(), Vec::<i64>::new());
        let (mut src, mut dst, mut coef) = (Vec::<i64>::new(), Vec::<i64>::new(), Vec::new());
        let (mut own, mut ca, mut cb) = (Vec::new(), Vec::new(), Vec::new());
        for &(a, b) in pairs.ids() {
            let sub = enclosing_subgraph(&adj, graph.node_ids(), a, b, self.hops, cap);
            let base = rows.len() as i64;
            let mut degree = vec![0.0f32; sub.nodes.len()];
            for &(_, v, w) in &sub.edges {
                degree[v as usize] += w;
            }
            for &(u, v, w) in &sub.edges {
                src.push(base + u as i64);
                dst.push(base + v as i64);
                coef.push(w / ((1.0 + degree[u as usize]) * (1.0 + degree[v as usize])).sqrt());
            }
            own.extend(degree.iter().map(|d| 1.0 / (1.0 + d)));
            rows.extend(sub.nodes.iter().map(|&v| v as i64));
            labels.extend(
                sub.labels
                    .iter()
                    .map(|&l| l.min(self.max_label as u32) as i64),
            );
            ca.push(base);
            cb.push(base + if a == b { 0 } else { 1 });
        }
        let t = rows.len();
        let int = |v: Vec<i64>| {
            let len = v.len();
            Tensor::<1, Int>::from_data(TensorData::new(v, [len]), &device)
        };
        let col = |v: Vec<f32>| {
            let len = v.len();
            Tensor::<2>::from_data(TensorData::new(v, [len, 1]), &device)
        };
        let e = src.len();
        let (src, dst, coef, own) = (int(src), int(dst), col(coef), col(own));
        let z = self
            .label
            .forward(int(labels).reshape([1, t]))
            .reshape([t, self.label.weight.dims()[1]]);
        let mut h = Tensor::cat(vec![z, x.select(0, int(rows))], 1);
        for (l, layer) in self.layers.iter().enumerate() {
            let hw = layer.forward(h);
            let mut next = hw.clone() * own.clone();
            if e > 0 {
                let msgs = hw.clone().select(0, src.clone()) * coef.clone();
                next = next
                    + hw.zeros_like()
                        .select_assign(0, dst.clone(), msgs, IndexingUpdateOp::Add);
            }
            h = if l + 1 < self.layers.len() {
                relu(next)
            } else {
                next
            };
        }
        let centre = h.clone().select(0, int(ca)) * h.select(0, int(cb));
        self.lin2
            .forward(relu(self.lin1.forward(centre)))
            .reshape([pairs.len()])
    }
}

impl TrainConfig {
    /// SEAL's training as LP-RAG Table 8 gives it: Adam with learning rate 1e-4 and
    /// weight decay 1e-8 for 50 epochs; the rest as [`TrainConfig::paper_ncn`] (loss over
    /// every edge, no early stopping or step limit, query joined to all chunks).
    pub fn paper_seal() -> Self {
        Self {
            learning_rate: 1e-4,
            weight_decay: 1e-8,
            epochs: 50,
            ..Self::paper_ncn()
        }
    }
}

/// A [`BurnLinkPredictor`] named `"seal"` running [`Seal`] of `config` with `train`.
pub fn seal_predictor(config: SealConfig, train: TrainConfig) -> BurnLinkPredictor<Seal> {
    BurnLinkPredictor::new("seal", train, move |d, device| {
        Seal::new(d, &config, device)
    })
}

/// Restore a [`seal_predictor`] saved under `dir` onto `graph`.
pub fn restore_seal(
    dir: &std::path::Path,
    graph: &lprag_core::LinkGraph,
    config: SealConfig,
    device: Device,
) -> lprag_core::Result<BurnLinkPredictor<Seal>> {
    config.validate()?;
    BurnLinkPredictor::<Seal>::check_capacity(dir, config.min_parameters(graph.features.dim()))?;
    BurnLinkPredictor::restore_on(
        dir,
        graph,
        move |d, device| Seal::new(d, &config, device),
        device,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn undirected(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<(u32, f32)>> {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges {
            adj[a as usize].push((b, 1.0));
            adj[b as usize].push((a, 1.0));
        }
        adj
    }

    #[test]
    fn drnl_matches_the_papers_table() {
        // SEAL (Zhang & Chen 2018) §4.1: (1,1)→2, (1,2)→3, (1,3)→4, (2,2)→5, (1,4)→6,
        // (2,3)→7, (3,3)→10.
        let cases = [
            ((1, 1), 2),
            ((1, 2), 3),
            ((2, 1), 3),
            ((1, 3), 4),
            ((2, 2), 5),
            ((1, 4), 6),
            ((2, 3), 7),
            ((3, 3), 10),
        ];
        for ((x, y), want) in cases {
            assert_eq!(drnl_label(Some(x), Some(y)), want, "({x}, {y})");
        }
        assert_eq!(drnl_label(Some(0), Some(3)), 1);
        assert_eq!(drnl_label(None, Some(1)), 0);
        assert_eq!(drnl_label(Some(2), None), 0);
    }

    #[test]
    fn the_enclosing_subgraph_drops_the_target_link_and_labels_by_both_radii() {
        //   2 — 0 — 1 — 3        0–1 is the target link; 4 hangs off 2; 5 is two hops
        //    \_______/  \        from 0 only through 1; 6 joins nothing.
        //                 5 … (via 3)
        let adj = undirected(7, &[(0, 1), (0, 2), (1, 2), (1, 3), (2, 4), (3, 5)]);
        let ids: Vec<u32> = (100..107).collect();
        let s = enclosing_subgraph(&adj, &ids, 0, 1, 1, None);
        assert_eq!(s.nodes, vec![0, 1, 2, 3]);
        assert!(
            !s.edges
                .iter()
                .any(|&(u, v, _)| (u, v) == (0, 1) || (u, v) == (1, 0)),
            "the target link is removed: {:?}",
            s.edges
        );
        // 2 is at (1, 1): label 2. 3 is adjacent to 1 only; from 0 (avoiding 1) unreachable.
        assert_eq!(s.labels, vec![1, 1, 2, 0]);
        // Every undirected edge among the nodes appears in both directions, 0–1 excepted.
        assert_eq!(s.edges.len(), 2 * 3);

        // Two hops: 4 (via 2) is at (2, 2) → 5; 5 (via 3) is at (∞, 2) → 0.
        let s2 = enclosing_subgraph(&adj, &ids, 0, 1, 2, None);
        assert_eq!(s2.nodes, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(s2.labels, vec![1, 1, 2, 0, 5, 0]);

        // A cap keeps a fixed sample: the same subgraph every time, at most `cap` per hop.
        let star = undirected(12, &(2..12).map(|v| (0, v)).collect::<Vec<_>>());
        let ids: Vec<u32> = (0..12).collect();
        let c1 = enclosing_subgraph(&star, &ids, 0, 1, 1, Some(3));
        assert_eq!(c1.nodes.len(), 2 + 3);
        assert_eq!(c1, enclosing_subgraph(&star, &ids, 0, 1, 1, Some(3)));
    }

    #[test]
    fn scores_depend_on_the_structure_around_the_pair() {
        let device = Device::flex();
        let _draws = crate::seeding::seed_generator(&device, 2);
        let model = Seal::new(3, &SealConfig::default(), &device);
        // Two pairs with equal features: one with two common neighbours, one with none.
        let adj = undirected(8, &[(0, 2), (1, 2), (0, 3), (1, 3), (4, 6), (5, 7)]);
        let g = GraphBatch::from_adjacency(&adj, 0, &[], &device);
        let x = Tensor::<2>::ones([8, 3], &device);
        let logits: Vec<f32> = model
            .score_pairs(x, &g, &Pairs::new(&[(0, 1), (4, 5), (0, 1)], &device))
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        assert!((logits[0] - logits[2]).abs() < 1e-6, "deterministic");
        assert!(
            (logits[0] - logits[1]).abs() > 1e-4,
            "structure ignored: {logits:?}"
        );
    }
}
