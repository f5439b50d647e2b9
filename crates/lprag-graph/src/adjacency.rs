//! A growable weighted adjacency list: what message passing and common-neighbour link
//! predictors read, one sorted `(neighbour, weight)` list per node.
//!
//! Build it with [`WeightedAdjacency::from_edges`], add a query node with
//! [`WeightedAdjacency::push_node`], and merge two nodes' lists with
//! [`WeightedAdjacency::common_neighbors`] (optionally ignoring masked edges, as training
//! does with its target links).

use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::GraphError;

/// An undirected weighted graph as sorted adjacency lists (self loops dropped, the first
/// weight of a duplicate edge kept).
///
/// ```
/// use lprag_graph::WeightedAdjacency;
///
/// # fn main() -> Result<(), lprag_graph::GraphError> {
/// let mut g = WeightedAdjacency::from_edges(3, [(0, 1, 1.0), (1, 2, 0.5)])?;
/// let q = g.push_node(&[0, 2], 1.0)?; // a query node joined to chunks 0 and 2
/// let mut common = Vec::new();
/// g.common_neighbors(q, 1, &mut common);
/// assert_eq!(common, vec![0, 2]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WeightedAdjacency {
    adj: Vec<Vec<(u32, f32)>>,
}

/// The unordered pair `(min, max)`: the key of an undirected edge in a mask.
pub fn pair_key(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

impl WeightedAdjacency {
    /// A graph of `n` nodes from undirected edges `(a, b, w)`. An endpoint `>= n` is
    /// [`GraphError::InvalidGraph`] naming the edge.
    pub fn from_edges(
        n: usize,
        edges: impl IntoIterator<Item = (u32, u32, f32)>,
    ) -> Result<Self, GraphError> {
        let mut adj: Vec<Vec<(u32, f32)>> = vec![Vec::new(); n];
        for (k, (a, b, w)) in edges.into_iter().enumerate() {
            if a as usize >= n || b as usize >= n {
                return Err(GraphError::InvalidGraph {
                    location: format!("edges[{k}]"),
                    message: format!("({a}, {b}) is out of range for {n} nodes"),
                });
            }
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
        Ok(Self { adj })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Add a node joined to `neighbours` with weight `w` (duplicates ignored); returns its
    /// index. A neighbour that does not exist is [`GraphError::InvalidGraph`].
    pub fn push_node(&mut self, neighbours: &[u32], w: f32) -> Result<u32, GraphError> {
        let id = self.adj.len() as u32;
        if let Some(&j) = neighbours.iter().find(|&&j| j >= id) {
            return Err(GraphError::InvalidGraph {
                location: "push_node neighbours".into(),
                message: format!("node {j} is out of range for {id} nodes"),
            });
        }
        let mut list: Vec<(u32, f32)> = neighbours.iter().map(|&j| (j, w)).collect();
        list.sort_by_key(|&(j, _)| j);
        list.dedup_by_key(|&mut (j, _)| j);
        for &(j, _) in &list {
            // The new node has the largest index, so pushing keeps the list sorted.
            self.adj[j as usize].push((id, w));
        }
        self.adj.push(list);
        Ok(id)
    }

    /// Every node's `(neighbour, weight)` list.
    pub fn lists(&self) -> &[Vec<(u32, f32)>] {
        &self.adj
    }

    /// The `(neighbour, weight)` list of node `i`, sorted by neighbour (empty for a node
    /// that does not exist).
    pub fn neighbors(&self, i: u32) -> &[(u32, f32)] {
        self.adj.get(i as usize).map_or(&[], Vec::as_slice)
    }

    /// Sum of positive edge weights per node.
    pub fn weight_sums(&self) -> Vec<f32> {
        self.adj
            .iter()
            .map(|l| l.iter().map(|&(_, w)| w.max(0.0)).sum())
            .collect()
    }

    /// Append the common neighbours of `i` and `j` (in increasing order) to `out`.
    pub fn common_neighbors(&self, i: u32, j: u32, out: &mut Vec<u32>) {
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

    /// The neighbours of `i` except through `masked` edges (keys from [`pair_key`]).
    pub fn unmasked<'a, S: BuildHasher>(
        &'a self,
        i: u32,
        masked: &'a HashSet<(u32, u32), S>,
    ) -> impl Iterator<Item = (u32, f32)> + 'a {
        self.neighbors(i)
            .iter()
            .copied()
            .filter(move |&(j, _)| masked.is_empty() || !masked.contains(&pair_key(i, j)))
    }

    /// [`WeightedAdjacency::common_neighbors`] except through `masked` edges.
    pub fn common_neighbors_masked<S: BuildHasher>(
        &self,
        i: u32,
        j: u32,
        masked: &HashSet<(u32, u32), S>,
        out: &mut Vec<u32>,
    ) {
        let start = out.len();
        self.common_neighbors(i, j, out);
        if !masked.is_empty() {
            let mut k = start;
            for r in start..out.len() {
                let u = out[r];
                if !masked.contains(&pair_key(i, u)) && !masked.contains(&pair_key(j, u)) {
                    out[k] = u;
                    k += 1;
                }
            }
            out.truncate(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_neighbours_masks_and_push_node() {
        // 0-1, 0-2, 1-2, 2-3, and a self loop that is dropped.
        let edges = [
            (0, 1, 1.0),
            (0, 2, 1.0),
            (1, 2, 1.0),
            (2, 3, 1.0),
            (3, 3, 1.0),
        ];
        let mut g = WeightedAdjacency::from_edges(4, edges).unwrap();
        let mut out = Vec::new();
        g.common_neighbors(0, 1, &mut out);
        assert_eq!(out, vec![2]);
        out.clear();
        g.common_neighbors(0, 3, &mut out);
        assert_eq!(out, vec![2]);
        out.clear();
        let masked: HashSet<(u32, u32)> = [pair_key(2, 0)].into_iter().collect();
        g.common_neighbors_masked(0, 1, &masked, &mut out);
        assert!(out.is_empty(), "0-2 is masked, so 2 is no common neighbour");
        let q = g.push_node(&[1, 3, 3], 1.0).unwrap();
        assert_eq!(q, 4);
        out.clear();
        g.common_neighbors(q, 2, &mut out);
        assert_eq!(out, vec![1, 3]);
        assert!(
            g.neighbors(3).iter().all(|&(j, _)| j != 3),
            "self loop dropped"
        );
        assert_eq!(g.weight_sums(), vec![2.0, 3.0, 3.0, 2.0, 2.0]);
    }

    #[test]
    fn out_of_range_nodes_are_typed_errors() {
        let e = WeightedAdjacency::from_edges(2, [(0, 1, 1.0), (1, 2, 1.0)]).unwrap_err();
        assert!(e.to_string().contains("edges[1]"), "{e}");
        let mut g = WeightedAdjacency::from_edges(2, [(0, 1, 1.0)]).unwrap();
        let e = g.push_node(&[0, 5], 1.0).unwrap_err();
        assert!(e.to_string().contains("node 5"), "{e}");
        assert_eq!(g.len(), 2, "a refused node is not added");
    }
}
