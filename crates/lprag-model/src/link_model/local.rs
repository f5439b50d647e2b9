//! Host-side neighbourhoods: [`LocalGraph`] (the `hops`-hop neighbourhood of some seeds,
//! uploaded as a [`GraphBatch`]) and [`QueryView`] (the chunk graph with a query node joined
//! to some chunks), and the whole graph as one neighbourhood.

use std::collections::HashMap;
use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::batch::BatchHost;
use super::*;
use crate::context::ChunkContext;
use crate::shared::rows_tensor;

/// Appends a node's `(neighbour, weight)` pairs to the buffer.
pub(super) type Neighbours<'a> = dyn Fn(u32, &mut Vec<(u32, f32)>) + 'a;

/// A host-side neighbourhood: local nodes (seeds first), messages into the nodes whose
/// representations are needed, and degrees.
pub(super) struct LocalGraph {
    pub(super) nodes: Vec<u32>,
    pub(super) local: HashMap<u32, u32>,
    pub(super) src: Vec<i64>,
    pub(super) dst: Vec<i64>,
    pub(super) weight: Vec<f32>,
    pub(super) degree: Vec<f32>,
}

impl LocalGraph {
    /// The `hops`-hop neighbourhood of `seeds`. `neighbours(i, out)` appends node `i`'s
    /// `(neighbour, weight)` pairs; `degree(i)` is its weighted degree.
    pub(super) fn build(
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

    pub(super) fn to_device(&self, graph_nodes: usize, device: &Device) -> GraphBatch {
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
    pub(super) fn to_device_with<'a>(
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
    pub(super) fn features<'a>(
        &self,
        d: usize,
        row: impl Fn(u32) -> &'a [f32],
        device: &Device,
    ) -> Tensor<2> {
        let mut data = Vec::with_capacity(self.nodes.len() * d);
        for &g in &self.nodes {
            data.extend_from_slice(row(g));
        }
        rows_tensor(data, self.nodes.len(), d, device)
    }
}

/// The chunk graph with one extra query node (id `num_chunks`) joined to some chunks.
pub(super) struct QueryView<'a> {
    pub(super) ctx: &'a ChunkContext,
    pub(super) wsum: &'a [f32],
    /// Sorted chunk ids the query joins; `None` joins every chunk.
    pub(super) join: Option<Vec<u32>>,
}

impl QueryView<'_> {
    pub(super) fn qid(&self) -> u32 {
        self.ctx.num_chunks() as u32
    }

    pub(super) fn joined(&self, c: u32) -> bool {
        match &self.join {
            None => true,
            Some(j) => j.binary_search(&c).is_ok(),
        }
    }

    pub(super) fn neighbours(&self, i: u32, out: &mut Vec<(u32, f32)>) {
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

    pub(super) fn degree(&self, i: u32) -> f32 {
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

/// The whole chunk graph plus the query node (local ids: query first, then chunks), every
/// node receiving its messages.
pub(super) fn full_graph(view: &QueryView<'_>, hops: usize) -> LocalGraph {
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
