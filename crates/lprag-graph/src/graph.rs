//! Compact adjacency: [`Csr`] (compressed sparse rows, with a COO export) and
//! [`ChunkGraph`], the symmetric chunk–chunk graph the A.2 sampler and message passing use.

use lprag_core::{LinkEdge, LinkGraph};
use petgraph::graph::UnGraph;
use serde::{Deserialize, Serialize};

use crate::GraphError;

/// A sparse matrix in compressed-sparse-row form.
///
/// Row `i` holds columns `indices[offsets[i]..offsets[i + 1]]` with the matching
/// `weights`; `offsets` has `num_nodes + 1` entries starting at 0. Within a row, columns are
/// sorted ascending (duplicates, if the input had any, keep their input order).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Csr {
    /// Row start positions into `indices` / `weights`; length `num_nodes + 1`.
    pub offsets: Vec<u32>,
    /// Column index of each entry.
    pub indices: Vec<u32>,
    /// Weight of each entry.
    pub weights: Vec<f32>,
}

impl Csr {
    /// Build from edges over nodes `0..num_nodes`.
    ///
    /// With `symmetric`, each edge `(a, b)` becomes the entries `a → b` and `b → a` (a
    /// self-loop only once); without, only `a → b`. Duplicate edges are kept as they are
    /// (use [`ChunkGraph::from_edges`] for a deduplicated graph).
    ///
    /// # Errors
    /// [`GraphError::InvalidGraph`] naming the edge when an end is `>= num_nodes` or the
    /// weight is not finite; [`GraphError::InvalidArgument`] when the node or entry count
    /// does not fit `u32`.
    pub fn from_edges(
        num_nodes: usize,
        edges: &[LinkEdge],
        symmetric: bool,
    ) -> Result<Csr, GraphError> {
        if num_nodes >= u32::MAX as usize {
            return Err(GraphError::arg(
                "num_nodes",
                format!("{num_nodes} nodes do not fit u32 offsets"),
            ));
        }
        let counts = row_starts(num_nodes, edges, symmetric)?;
        let total = counts[num_nodes];
        if total > u32::MAX as usize {
            return Err(GraphError::arg(
                "edges",
                format!("{total} adjacency entries do not fit u32 offsets"),
            ));
        }
        let (mut indices, mut weights) = scatter(&counts, edges, symmetric);
        sort_rows(&counts, &mut indices, &mut weights);
        Ok(Csr {
            offsets: counts.into_iter().map(|c| c as u32).collect(),
            indices,
            weights,
        })
    }

    /// Number of rows (nodes).
    pub fn num_nodes(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of stored entries (for a symmetric matrix, twice the undirected edges
    /// minus self-loops).
    pub fn num_entries(&self) -> usize {
        self.indices.len()
    }

    /// Columns and weights of row `i`; empty when `i` is out of range.
    pub fn row(&self, i: usize) -> (&[u32], &[f32]) {
        match self.range(i) {
            Some(r) => (&self.indices[r.clone()], &self.weights[r]),
            None => (&[], &[]),
        }
    }

    fn range(&self, i: usize) -> Option<std::ops::Range<usize>> {
        let s = *self.offsets.get(i)? as usize;
        let t = *self.offsets.get(i + 1)? as usize;
        (s <= t && t <= self.indices.len() && t <= self.weights.len()).then_some(s..t)
    }

    /// Number of entries in each row.
    pub fn degrees(&self) -> Vec<u32> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Export as coordinate lists `(rows, cols, weights)`, in row-major order.
    pub fn to_coo(&self) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        let mut rows = Vec::with_capacity(self.indices.len());
        for (i, w) in self.offsets.windows(2).enumerate() {
            rows.extend(std::iter::repeat_n(i as u32, (w[1] - w[0]) as usize));
        }
        (rows, self.indices.clone(), self.weights.clone())
    }

    /// Check the structure: `offsets` starts at 0, never decreases and ends at the entry
    /// count; `indices` and `weights` have equal length; every column is a node; every
    /// weight is finite. Useful for CSRs built by hand or read from elsewhere.
    pub fn validate(&self) -> Result<(), GraphError> {
        let bad = |m: String| Err(GraphError::graph("Csr", m));
        if self.offsets.first() != Some(&0) {
            return bad("offsets must start with 0".into());
        }
        if self.indices.len() != self.weights.len() {
            return bad(format!(
                "{} indices but {} weights",
                self.indices.len(),
                self.weights.len()
            ));
        }
        if let Some(i) = self.offsets.windows(2).position(|w| w[0] > w[1]) {
            return bad(format!("offsets decrease at row {i}"));
        }
        let last = *self.offsets.last().unwrap_or(&0) as usize;
        if last != self.indices.len() {
            return bad(format!(
                "last offset {last} != number of entries {}",
                self.indices.len()
            ));
        }
        let n = self.num_nodes();
        if let Some(p) = self.indices.iter().position(|&j| j as usize >= n) {
            return bad(format!(
                "entry {p} names column {} but there are {n} nodes",
                self.indices[p]
            ));
        }
        if let Some(p) = self.weights.iter().position(|w| !w.is_finite()) {
            return bad(format!("entry {p} has a non-finite weight"));
        }
        Ok(())
    }
}

/// Each row's start in the entries (`num_nodes + 1` prefix sums), after checking every
/// edge (ends in range, finite weight).
fn row_starts(
    num_nodes: usize,
    edges: &[LinkEdge],
    symmetric: bool,
) -> Result<Vec<usize>, GraphError> {
    let mut counts = vec![0usize; num_nodes + 1];
    for (i, e) in edges.iter().enumerate() {
        if e.a as usize >= num_nodes || e.b as usize >= num_nodes {
            return Err(GraphError::graph(
                format!("edges[{i}]"),
                format!(
                    "node {} or {} out of range (graph has {num_nodes} nodes)",
                    e.a, e.b
                ),
            ));
        }
        if !e.weight.is_finite() {
            return Err(GraphError::graph(
                format!("edges[{i}]"),
                format!("weight {} is not finite", e.weight),
            ));
        }
        counts[e.a as usize + 1] += 1;
        if symmetric && e.a != e.b {
            counts[e.b as usize + 1] += 1;
        }
    }
    for i in 0..num_nodes {
        counts[i + 1] += counts[i];
    }
    Ok(counts)
}

/// The entries `(column, weight)` of every edge in its row, in edge order.
fn scatter(counts: &[usize], edges: &[LinkEdge], symmetric: bool) -> (Vec<u32>, Vec<f32>) {
    let total = counts[counts.len() - 1];
    let mut cursor = counts.to_vec();
    let mut indices = vec![0u32; total];
    let mut weights = vec![0f32; total];
    let mut put = |from: u32, to: u32, w: f32| {
        let p = &mut cursor[from as usize];
        indices[*p] = to;
        weights[*p] = w;
        *p += 1;
    };
    for e in edges {
        put(e.a, e.b, e.weight);
        if symmetric && e.a != e.b {
            put(e.b, e.a, e.weight);
        }
    }
    (indices, weights)
}

/// Sort each row's entries by column (stable: duplicates keep their order).
fn sort_rows(counts: &[usize], indices: &mut [u32], weights: &mut [f32]) {
    let mut row: Vec<(u32, f32)> = Vec::new();
    for i in 0..counts.len() - 1 {
        let (s, t) = (counts[i], counts[i + 1]);
        if indices[s..t].windows(2).any(|w| w[0] > w[1]) {
            row.clear();
            row.extend(
                indices[s..t]
                    .iter()
                    .copied()
                    .zip(weights[s..t].iter().copied()),
            );
            row.sort_by_key(|&(j, _)| j);
            for (p, &(j, w)) in row.iter().enumerate() {
                indices[s + p] = j;
                weights[s + p] = w;
            }
        }
    }
}

/// The undirected chunk–chunk graph: for every chunk, its neighbours sorted ascending.
///
/// Self-loops are dropped and parallel edges merged (keeping the largest weight), so
/// `neighbors(i)` lists each neighbour once. Stored as a symmetric [`Csr`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkGraph {
    csr: Csr,
}

impl ChunkGraph {
    /// Build from undirected edges over chunks `0..num_chunks` (any [`lprag_core::EdgeKind`]).
    ///
    /// # Errors
    /// As [`Csr::from_edges`]: an edge naming a node `>= num_chunks`, a non-finite weight,
    /// or a size beyond `u32`.
    pub fn from_edges(num_chunks: usize, edges: &[LinkEdge]) -> Result<ChunkGraph, GraphError> {
        let raw = Csr::from_edges(num_chunks, edges, true)?;
        let mut offsets = Vec::with_capacity(num_chunks + 1);
        let mut indices = Vec::with_capacity(raw.indices.len());
        let mut weights = Vec::with_capacity(raw.weights.len());
        offsets.push(0u32);
        for i in 0..num_chunks {
            let (cols, ws) = raw.row(i);
            for (&j, &w) in cols.iter().zip(ws) {
                if j as usize == i {
                    continue;
                }
                if indices.len() > *offsets.last().unwrap_or(&0) as usize
                    && indices.last() == Some(&j)
                {
                    let last = weights.len() - 1;
                    if w > weights[last] {
                        weights[last] = w;
                    }
                } else {
                    indices.push(j);
                    weights.push(w);
                }
            }
            offsets.push(indices.len() as u32);
        }
        Ok(ChunkGraph {
            csr: Csr {
                offsets,
                indices,
                weights,
            },
        })
    }

    /// The chunk–chunk part of a [`LinkGraph`]: every edge whose two ends are chunk nodes.
    pub fn from_link_graph(graph: &LinkGraph) -> Result<ChunkGraph, GraphError> {
        let n = graph.num_chunks as u64;
        let edges: Vec<LinkEdge> = graph
            .edges
            .iter()
            .filter(|e| u64::from(e.a) < n && u64::from(e.b) < n)
            .copied()
            .collect();
        ChunkGraph::from_edges(graph.num_chunks, &edges)
    }

    /// Wrap a CSR that must already be a valid chunk graph: [`Csr::validate`], columns
    /// strictly increasing within each row, no self-loops, and symmetric with equal weights.
    pub fn from_csr(csr: Csr) -> Result<ChunkGraph, GraphError> {
        csr.validate()?;
        for i in 0..csr.num_nodes() {
            let (cols, ws) = csr.row(i);
            if cols.windows(2).any(|w| w[0] >= w[1]) {
                return Err(GraphError::graph(
                    format!("Csr row {i}"),
                    "columns are not strictly increasing",
                ));
            }
            for (&j, &w) in cols.iter().zip(ws) {
                if j as usize == i {
                    return Err(GraphError::graph(format!("Csr row {i}"), "self-loop"));
                }
                let (back, bw) = csr.row(j as usize);
                match back.binary_search(&(i as u32)) {
                    Ok(p) if bw[p] == w => {}
                    _ => {
                        return Err(GraphError::graph(
                            format!("Csr row {i}"),
                            format!("entry {i} → {j} has no equal-weight entry {j} → {i}"),
                        ))
                    }
                }
            }
        }
        Ok(ChunkGraph { csr })
    }

    /// Number of chunks (nodes).
    pub fn num_chunks(&self) -> usize {
        self.csr.num_nodes()
    }

    /// Number of undirected edges.
    pub fn num_edges(&self) -> usize {
        self.csr.num_entries() / 2
    }

    /// Neighbours of chunk `i`, ascending; empty when `i` is out of range.
    pub fn neighbors(&self, i: usize) -> &[u32] {
        self.csr.row(i).0
    }

    /// Edge weights to [`ChunkGraph::neighbors`]`(i)`, in the same order.
    pub fn weights(&self, i: usize) -> &[f32] {
        self.csr.row(i).1
    }

    /// Number of neighbours of chunk `i` (0 when out of range).
    pub fn degree(&self, i: usize) -> usize {
        self.neighbors(i).len()
    }

    /// Degree of every chunk.
    pub fn degrees(&self) -> Vec<u32> {
        self.csr.degrees()
    }

    /// Number of chunks without any neighbour.
    pub fn isolated_count(&self) -> usize {
        self.csr.offsets.windows(2).filter(|w| w[0] == w[1]).count()
    }

    /// Number of connected components (an isolated chunk is one), via petgraph.
    pub fn num_components(&self) -> usize {
        petgraph::algo::connected_components(&self.to_petgraph())
    }

    /// The undirected edges, each once with `a < b`, sorted, with kind
    /// [`lprag_core::EdgeKind::Similarity`] (the graph does not keep edge kinds).
    pub fn edges(&self) -> Vec<LinkEdge> {
        let mut out = Vec::with_capacity(self.num_edges());
        for i in 0..self.num_chunks() {
            let (cols, ws) = self.csr.row(i);
            for (&j, &w) in cols.iter().zip(ws) {
                if (i as u32) < j {
                    out.push(LinkEdge {
                        a: i as u32,
                        b: j,
                        weight: w,
                        kind: lprag_core::EdgeKind::Similarity,
                    });
                }
            }
        }
        out
    }

    /// The symmetric adjacency as CSR (both directions stored).
    pub fn csr(&self) -> &Csr {
        &self.csr
    }

    /// Consume into the symmetric CSR.
    pub fn into_csr(self) -> Csr {
        self.csr
    }

    /// A petgraph copy (node weight = chunk id, edge weight = similarity) for the
    /// algorithms petgraph offers.
    pub fn to_petgraph(&self) -> UnGraph<u32, f32> {
        let mut g = UnGraph::with_capacity(self.num_chunks(), self.num_edges());
        for i in 0..self.num_chunks() {
            g.add_node(i as u32);
        }
        g.extend_with_edges(self.edges().iter().map(|e| (e.a, e.b, e.weight)));
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{EdgeKind, Embeddings};

    fn e(a: u32, b: u32, w: f32) -> LinkEdge {
        LinkEdge {
            a,
            b,
            weight: w,
            kind: EdgeKind::Similarity,
        }
    }

    #[test]
    fn csr_symmetric_and_directed() {
        let edges = [e(2, 0, 0.5), e(0, 1, 0.25), e(1, 1, 1.0)];
        let sym = Csr::from_edges(4, &edges, true).unwrap();
        assert_eq!(sym.offsets, vec![0, 2, 4, 5, 5]);
        assert_eq!(sym.indices, vec![1, 2, 0, 1, 0]);
        assert_eq!(sym.weights, vec![0.25, 0.5, 0.25, 1.0, 0.5]);
        sym.validate().unwrap();
        let (r, c, w) = sym.to_coo();
        assert_eq!(r, vec![0, 0, 1, 1, 2]);
        assert_eq!(c, sym.indices);
        assert_eq!(w, sym.weights);

        let dir = Csr::from_edges(4, &edges, false).unwrap();
        assert_eq!(dir.offsets, vec![0, 1, 2, 3, 3]);
        assert_eq!(dir.indices, vec![1, 1, 0]);
        assert_eq!(dir.row(2), (&[0u32][..], &[0.5f32][..]));
        assert_eq!(dir.row(99), (&[][..], &[][..]));
    }

    #[test]
    fn csr_rejects_bad_edges() {
        let err = Csr::from_edges(3, &[e(0, 1, 1.0), e(1, 3, 1.0)], true).unwrap_err();
        assert!(err.to_string().contains("edges[1]"), "{err}");
        let err = Csr::from_edges(3, &[e(0, 1, f32::NAN)], true).unwrap_err();
        assert!(err.to_string().contains("not finite"), "{err}");
        let bad = Csr {
            offsets: vec![0, 2, 1],
            indices: vec![0],
            weights: vec![1.0],
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn chunk_graph_dedups_and_drops_self_loops() {
        let edges = [e(0, 1, 0.5), e(1, 0, 0.9), e(2, 2, 1.0), e(3, 1, 0.1)];
        let g = ChunkGraph::from_edges(5, &edges).unwrap();
        assert_eq!(g.num_chunks(), 5);
        assert_eq!(g.neighbors(0), &[1]);
        assert_eq!(g.weights(0), &[0.9]);
        assert_eq!(g.neighbors(1), &[0, 3]);
        assert_eq!(g.neighbors(2), &[] as &[u32]);
        assert_eq!(g.degree(1), 2);
        assert_eq!(g.degree(42), 0);
        assert_eq!(g.degrees(), vec![1, 2, 0, 1, 0]);
        assert_eq!(g.isolated_count(), 2);
        assert_eq!(g.num_edges(), 2);
        assert_eq!(g.num_components(), 3);
        let back = g.edges();
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].a, back[0].b, back[0].weight), (0, 1, 0.9));
        assert_eq!(ChunkGraph::from_edges(5, &back).unwrap(), g);
        assert_eq!(ChunkGraph::from_csr(g.csr().clone()).unwrap(), g);
        let pg = g.to_petgraph();
        assert_eq!((pg.node_count(), pg.edge_count()), (5, 2));
    }

    #[test]
    fn from_csr_rejects_asymmetric() {
        let csr = Csr::from_edges(3, &[e(0, 1, 1.0)], false).unwrap();
        assert!(ChunkGraph::from_csr(csr).is_err());
    }

    #[test]
    fn from_link_graph_keeps_chunk_edges_only() {
        let features = Embeddings::new(1, vec![1.0; 4]).unwrap();
        let lg = LinkGraph {
            features,
            num_chunks: 3,
            edges: vec![
                e(0, 1, 0.7),
                LinkEdge {
                    a: 1,
                    b: 3,
                    weight: 1.0,
                    kind: EdgeKind::QueryChunk,
                },
            ],
        };
        let g = ChunkGraph::from_link_graph(&lg).unwrap();
        assert_eq!(g.num_chunks(), 3);
        assert_eq!(g.num_edges(), 1);
    }

    #[test]
    fn neighbours_sorted_property() {
        use rand::{Rng, SeedableRng};
        for seed in 0..20u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let n = rng.random_range(1..40u32);
            let edges: Vec<LinkEdge> = (0..rng.random_range(0..120))
                .map(|_| e(rng.random_range(0..n), rng.random_range(0..n), rng.random()))
                .collect();
            let g = ChunkGraph::from_edges(n as usize, &edges).unwrap();
            for i in 0..n as usize {
                let nb = g.neighbors(i);
                assert!(nb.windows(2).all(|w| w[0] < w[1]));
                for &j in nb {
                    assert_ne!(j as usize, i);
                    assert!(g.neighbors(j as usize).binary_search(&(i as u32)).is_ok());
                }
            }
            ChunkGraph::from_csr(g.csr().clone()).unwrap();
        }
    }
}
