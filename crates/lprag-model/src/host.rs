//! Host-side graph structures: adjacency for common-neighbour look-ups and the message-passing
//! coefficients that are uploaded to the device.

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::config::Aggregation;

/// An undirected weighted graph kept on the host as sorted adjacency lists.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostGraph {
    adj: Vec<Vec<(u32, f32)>>,
}

impl HostGraph {
    /// A graph of `n` nodes from undirected edges `(a, b, w)`; self loops and duplicates are
    /// dropped (the first weight wins).
    pub(crate) fn from_edges(n: usize, edges: impl IntoIterator<Item = (u32, u32, f32)>) -> Self {
        let mut adj: Vec<Vec<(u32, f32)>> = vec![Vec::new(); n];
        for (a, b, w) in edges {
            if a == b {
                continue;
            }
            adj[a as usize].push((b, w));
            adj[b as usize].push((a, w));
        }
        for list in &mut adj {
            list.sort_by_key(|&(j, _)| j);
            list.dedup_by_key(|&mut (j, _)| j);
        }
        Self { adj }
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.adj.len()
    }

    /// Add a node joined to `neighbours` (weight `w`); returns its index.
    pub(crate) fn push_node(&mut self, neighbours: &[u32], w: f32) -> u32 {
        let id = self.adj.len() as u32;
        let mut list: Vec<(u32, f32)> = neighbours.iter().map(|&j| (j, w)).collect();
        list.sort_by_key(|&(j, _)| j);
        list.dedup_by_key(|&mut (j, _)| j);
        for &(j, _) in &list {
            let l = &mut self.adj[j as usize];
            // The new node has the largest index, so pushing keeps the list sorted.
            l.push((id, w));
        }
        self.adj.push(list);
        id
    }

    /// Neighbours of `i`, sorted by index.
    pub(crate) fn neighbors(&self, i: u32) -> &[(u32, f32)] {
        &self.adj[i as usize]
    }

    /// Append the common neighbours of `i` and `j` (sorted-list merge) to `out`.
    pub(crate) fn common_neighbors(&self, i: u32, j: u32, out: &mut Vec<u32>) {
        let (a, b) = (self.neighbors(i), self.neighbors(j));
        let (mut x, mut y) = (0, 0);
        while x < a.len() && y < b.len() {
            match a[x].0.cmp(&b[y].0) {
                std::cmp::Ordering::Less => x += 1,
                std::cmp::Ordering::Greater => y += 1,
                std::cmp::Ordering::Equal => {
                    out.push(a[x].0);
                    x += 1;
                    y += 1;
                }
            }
        }
    }

    /// Upload the message-passing structure for `aggregation`.
    pub(crate) fn to_device(&self, aggregation: Aggregation, device: &Device) -> MessageGraph {
        let n = self.len();
        let (mut src, mut dst, mut coef) = (Vec::new(), Vec::new(), Vec::new());
        let wsum: Vec<f32> = self
            .adj
            .iter()
            .map(|l| l.iter().map(|&(_, w)| w.max(0.0)).sum())
            .collect();
        let mut self_coef = vec![0.0f32; n];
        for (i, list) in self.adj.iter().enumerate() {
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
    /// For each common-neighbour entry: the pair it belongs to and the neighbour node.
    pub cn_pair: Option<(Tensor<1, Int>, Tensor<1, Int>)>,
}

impl PairBatch {
    /// Upload `pairs`; common neighbours are computed in `graph` when `with_cn`.
    pub(crate) fn new(
        pairs: &[(u32, u32)],
        graph: &HostGraph,
        with_cn: bool,
        device: &Device,
    ) -> Self {
        let len = pairs.len();
        let src: Vec<i64> = pairs.iter().map(|p| p.0 as i64).collect();
        let dst: Vec<i64> = pairs.iter().map(|p| p.1 as i64).collect();
        let cn_pair = if with_cn {
            let (mut pi, mut node, mut buf) = (Vec::new(), Vec::new(), Vec::new());
            for (k, &(a, b)) in pairs.iter().enumerate() {
                buf.clear();
                graph.common_neighbors(a, b, &mut buf);
                for &u in &buf {
                    pi.push(k as i64);
                    node.push(u as i64);
                }
            }
            let m = pi.len();
            (m > 0).then(|| {
                (
                    Tensor::<1, Int>::from_data(TensorData::new(pi, [m]), device),
                    Tensor::<1, Int>::from_data(TensorData::new(node, [m]), device),
                )
            })
        } else {
            None
        };
        Self {
            len,
            src: Tensor::<1, Int>::from_data(TensorData::new(src, [len]), device),
            dst: Tensor::<1, Int>::from_data(TensorData::new(dst, [len]), device),
            cn_pair,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_neighbours_and_push_node() {
        // 0-1, 0-2, 1-2, 2-3
        let mut g = HostGraph::from_edges(
            4,
            [
                (0, 1, 1.0),
                (0, 2, 1.0),
                (1, 2, 1.0),
                (2, 3, 1.0),
                (3, 3, 1.0),
            ],
        );
        let mut out = Vec::new();
        g.common_neighbors(0, 1, &mut out);
        assert_eq!(out, vec![2]);
        out.clear();
        g.common_neighbors(0, 3, &mut out);
        assert_eq!(out, vec![2]);
        let q = g.push_node(&[1, 3, 3], 1.0);
        assert_eq!(q, 4);
        out.clear();
        g.common_neighbors(q, 2, &mut out);
        assert_eq!(out, vec![1, 3]);
        assert!(
            g.neighbors(3).iter().all(|&(j, _)| j != 3),
            "self loop dropped"
        );
    }
}
