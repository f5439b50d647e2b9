//! Graph construction shared by the peer retrievers: connected components (union–find)
//! and the exact k-NN graph of a small cluster (G²RAG's per-cluster graphs).

use lprag_core::{ChunkId, Embeddings};

/// Connected components of `n` nodes under `edges` (undirected), each sorted, ordered by
/// their smallest node.
pub fn components(n: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> Vec<Vec<usize>> {
    let mut uf = UnionFind::new(n);
    for (a, b) in edges {
        uf.union(a, b);
    }
    uf.groups()
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        Self((0..n).collect())
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    /// `true` when `a` and `b` were in different sets.
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.0[hi] = lo;
        true
    }
    fn groups(&mut self) -> Vec<Vec<usize>> {
        let n = self.0.len();
        let mut by_root: Vec<Vec<usize>> = vec![Vec::new(); n];
        for x in 0..n {
            let r = self.find(x);
            by_root[r].push(x);
        }
        // Roots are the smallest members, so root order is smallest-member order.
        by_root.into_iter().filter(|g| !g.is_empty()).collect()
    }
}

/// The k-NN graph of one cluster: for each member (by position in `members`), its `k`
/// most similar other members by cosine (ties to the lower position), as
/// `(from, to, cosine distance)`.
pub fn cluster_knn(emb: &Embeddings, members: &[ChunkId], k: usize) -> Vec<(usize, usize, f32)> {
    let m = members.len();
    let mut edges = Vec::with_capacity(m * k.min(m.saturating_sub(1)));
    for i in 0..m {
        let mut others: Vec<(usize, f32)> = (0..m)
            .filter(|&j| j != i)
            .map(|j| {
                let c = lprag_core::cosine(emb.row(members[i]), emb.row(members[j]));
                (j, 1.0 - c)
            })
            .collect();
        others.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        edges.extend(others.into_iter().take(k).map(|(j, d)| (i, j, d)));
    }
    edges
}
