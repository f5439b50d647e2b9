//! Host-side graph structures: adjacency for common-neighbour look-ups and the message-passing
//! coefficients that are uploaded to the device.

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::config::Aggregation;

pub(crate) use lprag_graph::{pair_key, WeightedAdjacency as HostGraph};

/// A set of undirected edges (keys from [`pair_key`]), hashed with FxHash: a training step
/// looks up every neighbour of its neighbourhood in its masked targets.
pub(crate) type EdgeSet = rustc_hash::FxHashSet<(u32, u32)>;

/// A map from graph node ids to local ids, hashed with FxHash.
type LocalIds = rustc_hash::FxHashMap<u32, u32>;

/// Message passing over a [`HostGraph`]: its coefficients uploaded whole, or a training
/// step's neighbourhood with its target edges masked.
pub(crate) trait MessagePassing {
    /// Upload the message-passing structure for `aggregation`.
    fn to_device(&self, aggregation: Aggregation, device: &Device) -> MessageGraph;

    /// The computation graph of `seeds` for `hops` layers (see [`Subgraph`]). `wsum`: the
    /// unmasked graph's [`HostGraph::weight_sums`].
    fn subgraph(
        &self,
        wsum: &[f32],
        masked: &EdgeSet,
        seeds: &[u32],
        hops: usize,
        aggregation: Aggregation,
    ) -> Subgraph;
}

impl MessagePassing for HostGraph {
    fn to_device(&self, aggregation: Aggregation, device: &Device) -> MessageGraph {
        let n = self.len();
        let (mut src, mut dst, mut coef) = (Vec::new(), Vec::new(), Vec::new());
        let wsum: Vec<f32> = self
            .lists()
            .iter()
            .map(|l| l.iter().map(|&(_, w)| w.max(0.0)).sum())
            .collect();
        let mut self_coef = vec![0.0f32; n];
        for (i, list) in self.lists().iter().enumerate() {
            for &(j, w) in list {
                let w = w.max(0.0);
                let c = match aggregation {
                    Aggregation::Sage if wsum[i] > 0.0 => w / wsum[i],
                    Aggregation::Sage => 0.0,
                    Aggregation::Gcn => w / ((1.0 + wsum[i]) * (1.0 + wsum[j as usize])).sqrt(),
                };
                if c > 0.0 {
                    src.push(j as i64);
                    dst.push(i as i64);
                    coef.push(c);
                }
            }
            if aggregation == Aggregation::Gcn {
                self_coef[i] = 1.0 / (1.0 + wsum[i]);
            }
        }
        let e = src.len();
        MessageGraph {
            num_edges: e,
            src: Tensor::<1, Int>::from_data(TensorData::new(src, [e]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(dst, [e]), device),
            coef: Tensor::<2>::from_data(TensorData::new(coef, [e, 1]), device),
            self_coef: Tensor::<2>::from_data(TensorData::new(self_coef, [n, 1]), device),
        }
    }

    fn subgraph(
        &self,
        wsum: &[f32],
        masked: &EdgeSet,
        seeds: &[u32],
        hops: usize,
        aggregation: Aggregation,
    ) -> Subgraph {
        let mut local = LocalIds::with_capacity_and_hasher(seeds.len() * 4, Default::default());
        let mut nodes: Vec<u32> = Vec::with_capacity(seeds.len() * 4);
        for &s in seeds {
            if let std::collections::hash_map::Entry::Vacant(e) = local.entry(s) {
                e.insert(nodes.len() as u32);
                nodes.push(s);
            }
        }
        let (mut lo, mut inner) = (0usize, nodes.len());
        for _ in 0..hops {
            inner = nodes.len();
            for idx in lo..inner {
                let i = nodes[idx];
                for (j, _) in self.unmasked(i, masked) {
                    if let std::collections::hash_map::Entry::Vacant(e) = local.entry(j) {
                        e.insert(nodes.len() as u32);
                        nodes.push(j);
                    }
                }
            }
            lo = inner;
        }
        // Masked edges no longer count towards degrees. Summed in sorted order: a hash
        // set's iteration order differs between processes, and float sums with it.
        let mut less: rustc_hash::FxHashMap<u32, f32> = Default::default();
        let mut sorted: Vec<(u32, u32)> = masked.iter().copied().collect();
        sorted.sort_unstable();
        for &(a, b) in &sorted {
            if let Ok(p) = self.neighbors(a).binary_search_by_key(&b, |&(j, _)| j) {
                let w = self.neighbors(a)[p].1.max(0.0);
                *less.entry(a).or_default() += w;
                *less.entry(b).or_default() += w;
            }
        }
        let ws = |i: u32| wsum[i as usize] - less.get(&i).copied().unwrap_or(0.0);
        let (mut src, mut dst, mut coef) = (Vec::new(), Vec::new(), Vec::new());
        let mut self_coef = vec![0.0f32; nodes.len()];
        // Nodes whose layer outputs are read: all but the last hop's frontier.
        let receivers = if hops == 0 { 0 } else { inner };
        for (li, &i) in nodes.iter().enumerate().take(receivers) {
            let si = ws(i);
            for (j, w) in self.unmasked(i, masked) {
                let w = w.max(0.0);
                let c = match aggregation {
                    Aggregation::Sage if si > 0.0 => w / si,
                    Aggregation::Sage => 0.0,
                    Aggregation::Gcn => w / ((1.0 + si) * (1.0 + ws(j))).sqrt(),
                };
                if c > 0.0 {
                    src.push(local[&j] as i64);
                    dst.push(li as i64);
                    coef.push(c);
                }
            }
            if aggregation == Aggregation::Gcn {
                self_coef[li] = 1.0 / (1.0 + si);
            }
        }
        Subgraph {
            nodes,
            local,
            src,
            dst,
            coef,
            self_coef,
            receivers,
        }
    }
}

/// A training step's computation graph: the seeds' `hops`-hop neighbourhood in the
/// message-passing graph with the step's target edges removed, relabelled to local ids
/// (local id = position in `nodes`). Every edge into a node within `hops − 1` of a seed is
/// kept, with coefficients from the whole (masked) graph's degrees, so the seeds' rows after
/// `hops` layers equal a full-graph forward pass.
#[derive(Debug, Clone)]
pub(crate) struct Subgraph {
    /// Global ids of the local nodes, seeds first.
    pub nodes: Vec<u32>,
    local: LocalIds,
    src: Vec<i64>,
    dst: Vec<i64>,
    coef: Vec<f32>,
    self_coef: Vec<f32>,
    /// Nodes `nodes[..receivers]` receive messages (all but the last hop's frontier).
    receivers: usize,
}

impl Subgraph {
    /// Host-side first layer input for a one-layer encoder: for each receiver `r` (the
    /// seeds, when `hops == 1`), its own features `x_r` and its aggregated neighbourhood
    /// `Σ_j coef_rj · x_j`, plus `self_coef_r · x_r` when `fold_self` (GCN). Row-major
    /// `[receivers, d]` each. `x` holds every node's features, `d` wide.
    ///
    /// A linear layer commutes with the aggregation (`Σ c·(x W) = (Σ c·x) W`), so the
    /// layer can be applied to these `receivers` rows instead of to every node of the
    /// neighbourhood; the features are constants, so no gradient is lost.
    pub(crate) fn aggregate_inputs(
        &self,
        x: &[f32],
        d: usize,
        fold_self: bool,
    ) -> (Vec<f32>, Vec<f32>) {
        use rayon::prelude::*;
        let r = self.receivers;
        let mut own = vec![0f32; r * d];
        own.par_chunks_mut(d).enumerate().for_each(|(li, row)| {
            let g = self.nodes[li] as usize;
            row.copy_from_slice(&x[g * d..(g + 1) * d]);
        });
        // Edges are grouped by receiver (they are pushed receiver by receiver).
        let mut starts = vec![0usize; r + 1];
        for &t in &self.dst {
            starts[t as usize + 1] += 1;
        }
        for i in 0..r {
            starts[i + 1] += starts[i];
        }
        let mut agg = vec![0f32; r * d];
        let source = |e: usize| self.nodes[self.src[e] as usize] as usize;
        agg.par_chunks_mut(d).enumerate().for_each(|(li, row)| {
            for e in starts[li]..starts[li + 1] {
                // The rows are scattered over the feature matrix: ask for the next edge's
                // row (this receiver's or the next one's) while this one is summed.
                if e + 1 < self.src.len() {
                    let next = source(e + 1);
                    prefetch_row(&x[next * d..(next + 1) * d]);
                }
                let g = source(e);
                let c = self.coef[e];
                for (o, &v) in row.iter_mut().zip(&x[g * d..(g + 1) * d]) {
                    *o += c * v;
                }
            }
            if fold_self {
                let c = self.self_coef[li];
                let g = self.nodes[li] as usize;
                for (o, &v) in row.iter_mut().zip(&x[g * d..(g + 1) * d]) {
                    *o += c * v;
                }
            }
        });
        (own, agg)
    }

    /// Number of nodes that receive messages (they come first in `nodes`).
    pub(crate) fn receivers(&self) -> usize {
        self.receivers
    }

    /// The local id of global node `g` (which must be in the subgraph).
    pub(crate) fn local(&self, g: u32) -> u32 {
        self.local[&g]
    }

    /// Upload the message-passing structure.
    pub(crate) fn to_device(&self, device: &Device) -> MessageGraph {
        let (e, n) = (self.src.len(), self.nodes.len());
        MessageGraph {
            num_edges: e,
            src: Tensor::<1, Int>::from_data(TensorData::new(self.src.clone(), [e]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(self.dst.clone(), [e]), device),
            coef: Tensor::<2>::from_data(TensorData::new(self.coef.clone(), [e, 1]), device),
            self_coef: Tensor::<2>::from_data(
                TensorData::new(self.self_coef.clone(), [n, 1]),
                device,
            ),
        }
    }
}

/// Ask the CPU to bring `row` into its caches (a hint; nothing on other architectures).
#[inline(always)]
fn prefetch_row(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // One hint per 64-byte line of `row`.
        for value in row.iter().step_by(16) {
            let line: *const f32 = value;
            // SAFETY: a prefetch is a hint that never faults; `line` points into `row`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// Message-passing structure on a device: messages flow `src → dst` scaled by `coef`.
#[derive(Debug, Clone)]
pub(crate) struct MessageGraph {
    pub num_edges: usize,
    pub src: Tensor<1, Int>,
    pub dst: Tensor<1, Int>,
    /// `[E, 1]` per-message coefficient.
    pub coef: Tensor<2>,
    /// `[N, 1]` self-loop coefficient (GCN only; zeros for SAGE).
    pub self_coef: Tensor<2>,
}

/// Target pairs and their common neighbours, uploaded for scoring.
#[derive(Debug, Clone)]
pub(crate) struct PairBatch {
    pub len: usize,
    pub src: Tensor<1, Int>,
    pub dst: Tensor<1, Int>,
    /// The pairs with at least one common neighbour, and those neighbours.
    pub cn: Option<CommonNeighbours>,
}

/// The common neighbours of a batch's pairs, compacted to the pairs that have any: NCN's
/// common-neighbour MLP runs on those rows only, and once on a zero row for the rest.
#[derive(Debug, Clone)]
pub(crate) struct CommonNeighbours {
    /// Pairs with at least one common neighbour, in increasing order, `[C]`.
    pub rows: Tensor<1, Int>,
    /// Number of such pairs `C`.
    pub count: usize,
    /// For each (pair, neighbour) entry: the pair's position in `rows`, `[M]`.
    pub slot: Tensor<1, Int>,
    /// For each entry: the neighbour node, `[M]`.
    pub node: Tensor<1, Int>,
}

impl CommonNeighbours {
    /// Upload `(pair index, node)` entries, grouped by pair in increasing pair order (as
    /// every builder emits them); `None` when there are none.
    fn upload(pair: Vec<i64>, node: Vec<i64>, device: &Device) -> Option<Self> {
        if pair.is_empty() {
            return None;
        }
        let mut rows: Vec<i64> = Vec::new();
        let slot: Vec<i64> = pair
            .iter()
            .map(|&p| {
                if rows.last() != Some(&p) {
                    debug_assert!(rows.last().is_none_or(|&l| l < p), "entries out of order");
                    rows.push(p);
                }
                rows.len() as i64 - 1
            })
            .collect();
        let (m, count) = (pair.len(), rows.len());
        let int = |v: Vec<i64>, len: usize| {
            Tensor::<1, Int>::from_data(TensorData::new(v, [len]), device)
        };
        Some(Self {
            rows: int(rows, count),
            count,
            slot: int(slot, m),
            node: int(node, m),
        })
    }
}

impl PairBatch {
    /// Upload `pairs` with their common neighbours given as `(pair index, node)` entries,
    /// grouped by pair in increasing pair order.
    pub(crate) fn from_parts(
        pairs: &[(u32, u32)],
        cn: Option<(Vec<i64>, Vec<i64>)>,
        device: &Device,
    ) -> Self {
        let len = pairs.len();
        let src: Vec<i64> = pairs.iter().map(|p| p.0 as i64).collect();
        let dst: Vec<i64> = pairs.iter().map(|p| p.1 as i64).collect();
        Self {
            len,
            src: Tensor::<1, Int>::from_data(TensorData::new(src, [len]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(dst, [len]), device),
            cn: cn.and_then(|(pair, node)| CommonNeighbours::upload(pair, node, device)),
        }
    }

    /// Upload `pairs`; common neighbours are computed in `graph` when `with_cn`.
    pub(crate) fn new(
        pairs: &[(u32, u32)],
        graph: &HostGraph,
        with_cn: bool,
        device: &Device,
    ) -> Self {
        let cn = with_cn.then(|| {
            let (mut pi, mut node, mut buf) = (Vec::new(), Vec::new(), Vec::new());
            for (k, &(a, b)) in pairs.iter().enumerate() {
                buf.clear();
                graph.common_neighbors(a, b, &mut buf);
                for &u in &buf {
                    pi.push(k as i64);
                    node.push(u as i64);
                }
            }
            (pi, node)
        });
        Self::from_parts(pairs, cn, device)
    }
}

#[cfg(test)]
mod subgraph_tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn coefs(
        src: &[i64],
        dst: &[i64],
        coef: &[f32],
        map: impl Fn(i64) -> u32,
    ) -> HashMap<(u32, u32), f32> {
        src.iter()
            .zip(dst)
            .zip(coef)
            .map(|((&s, &d), &c)| ((map(d), map(s)), c))
            .collect()
    }

    #[test]
    fn subgraph_coefficients_equal_the_masked_full_graph() {
        // chunks 0..6 in a chain with a chord, queries 6..9 joined to two chunks each.
        let edges = vec![
            (0, 1, 0.5),
            (1, 2, 0.7),
            (2, 3, 0.9),
            (3, 4, 0.4),
            (4, 5, 0.6),
            (0, 3, 0.8),
            (6, 0, 1.0),
            (6, 1, 1.0),
            (7, 2, 1.0),
            (7, 3, 1.0),
            (8, 4, 1.0),
            (8, 0, 1.0),
        ];
        let full = HostGraph::from_edges(9, edges.iter().copied()).unwrap();
        let masked: EdgeSet = [pair_key(6, 0), pair_key(7, 3)].into_iter().collect();
        let m = HostGraph::from_edges(
            9,
            edges
                .iter()
                .copied()
                .filter(|&(a, b, _)| !masked.contains(&pair_key(a, b))),
        )
        .unwrap();
        let wsum = full.weight_sums();
        for agg in [Aggregation::Sage, Aggregation::Gcn] {
            for hops in [1, 2] {
                let seeds = [6, 0, 7, 5];
                let sub = full.subgraph(&wsum, &masked, &seeds, hops, agg);
                let got = coefs(&sub.src, &sub.dst, &sub.coef, |l| sub.nodes[l as usize]);
                // Reference: the masked graph's coefficients into the receivers.
                let dev = m.to_device(agg, &Device::flex());
                let v =
                    |t: Tensor<1, Int>| t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
                let c: Vec<f32> = dev
                    .coef
                    .clone()
                    .reshape([dev.num_edges])
                    .into_data()
                    .try_to_vec::<f32>()
                    .unwrap();
                let want = coefs(&v(dev.src.clone()), &v(dev.dst.clone()), &c, |g| g as u32);
                let receivers: HashSet<u32> = got.keys().map(|k| k.0).collect();
                for (k, w) in &want {
                    if receivers.contains(&k.0) {
                        let g = got.get(k).copied().unwrap_or(f32::NAN);
                        assert!(
                            (g - w).abs() < 1e-6,
                            "{agg:?} hops {hops} edge {k:?}: {g} vs {w}"
                        );
                    }
                }
                assert!(seeds
                    .iter()
                    .all(|s| receivers.contains(s) || m.neighbors(*s).is_empty()));
            }
        }
    }
}
