//! Approximate nearest rows from a proximity graph ([`GraphIndex`]).
//!
//! Every row is linked to its `degree` nearest rows (NN-descent lists,
//! [`crate::NnDescentParams`]; exact lists for small matrices) and to the rows that list
//! it. A search starts from rows spread over the matrix and walks the links best first,
//! keeping the `beam` best rows seen (HNSW's bottom layer, without the upper layers: the
//! spread entry rows stand in for them). It reads a few thousand rows per query instead of
//! every row, and scores each exactly, so the rows it returns carry the exact scan's
//! scores; a row the walk never reaches is missed.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use lprag_core::{dot, Embeddings};
use serde::{Deserialize, Serialize};

use crate::kernels::{best_first, gemm_abt, nearest_by_cosine_where, unit_prefix};
use crate::nndescent::nndescent_knn;
use crate::{GraphError, NnDescentParams};

/// Below this many rows the links come from exact lists (cheaper than NN-descent there).
const EXACT_LISTS_BELOW: usize = 4_096;

/// Parameters of a [`GraphIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GraphParams {
    /// Each row's nearest rows it links to (at least 1); with the rows that list it, a row
    /// keeps at most `2 · degree` links, the most similar.
    pub degree: usize,
    /// Rows a search keeps while walking (FAISS's `efSearch`; at least 1, raised to the
    /// number of rows asked for). Larger finds more of the exact nearest rows and reads
    /// more rows.
    pub beam: usize,
    /// Rows a search scores first and starts from, a seeded sample of the rows (a coarse
    /// layer: a walk on links alone cannot leave a cluster that no link leaves); 0 (the
    /// default) takes `⌈√rows⌉`, at least 16.
    pub entry_points: usize,
    /// The entry rows nearest to the query whose links a search reads before it walks
    /// (each entry row links to the rows nearest to it: the query's nearest rows may sit in
    /// a second cluster that the walk from the first would not enter). 0 reads none.
    pub probes: usize,
    /// The NN-descent that finds each row's nearest rows (from 4,096 rows; exact lists below).
    pub nn_descent: NnDescentParams,
}

impl Default for GraphParams {
    /// `degree = 24`, `beam = 256`, `entry_points = 0` (`⌈√rows⌉`), `probes = 4`, default
    /// NN-descent (list 32).
    fn default() -> Self {
        Self {
            degree: 24,
            beam: 256,
            entry_points: 0,
            probes: 4,
            nn_descent: NnDescentParams::default(),
        }
    }
}

impl GraphParams {
    /// Check the parameters.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] naming the first field that is 0.
    pub fn validate(&self) -> Result<(), GraphError> {
        for (name, v) in [
            ("GraphParams.degree", self.degree),
            ("GraphParams.beam", self.beam),
        ] {
            if v == 0 {
                return Err(GraphError::arg(name, "must be at least 1"));
            }
        }
        self.nn_descent.validate()
    }
}

/// A proximity graph over the first rows of a matrix, searched best first
/// ([`GraphIndex::search`]).
///
/// It holds no copy of the rows (its links are `4 · rows · 2 · degree` bytes at most);
/// searches take the matrix it was built from.
///
/// ```
/// use lprag_core::Embeddings;
/// use lprag_graph::{inverse_norms, nearest_by_cosine, GraphIndex, GraphParams};
///
/// let rows: Vec<Vec<f32>> = (0..200)
///     .map(|i| vec![(i as f32 * 0.1).cos(), (i as f32 * 0.1).sin(), 0.5])
///     .collect();
/// let emb = Embeddings::from_rows(3, &rows)?;
/// let index = GraphIndex::build_prefix(&emb, 200, &GraphParams::default())?;
/// let inv = inverse_norms(&emb, 200);
/// let query = [1.0, 0.2, 0.5];
/// let found = index.search(&emb, &inv, &query, 5, &|_| true)?;
/// assert_eq!(found, nearest_by_cosine(&emb, &inv, &query, 5)); // the same rows and scores
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphIndex {
    rows: usize,
    dim: usize,
    /// Row `i`'s links are `links[offsets[i]..offsets[i + 1]]`, most similar first.
    offsets: Vec<u64>,
    links: Vec<u32>,
    entries: Vec<u32>,
    beam: usize,
    #[serde(default)]
    probes: usize,
}

impl GraphIndex {
    /// Link the first `rows` rows of `emb` (compared by cosine).
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] for invalid parameters, `rows` beyond the matrix or
    /// more than `u32::MAX` rows; [`GraphError::NonFinite`] naming the first row with a
    /// NaN or infinity.
    pub fn build_prefix(
        emb: &Embeddings,
        rows: usize,
        params: &GraphParams,
    ) -> Result<Self, GraphError> {
        params.validate()?;
        let (n, d) = (rows, emb.dim());
        let x = unit_prefix(emb, n)?;
        let x = &x[..];
        let k = params.degree.min(n.saturating_sub(1));
        let lists = if k == 0 {
            vec![Vec::new(); n]
        } else if n < EXACT_LISTS_BELOW {
            crate::knn::exact_knn(x, n, d, k)
        } else {
            nndescent_knn(x, n, d, k, &params.nn_descent, Vec::new())
        };
        // Each row's links: its list and the rows that list it, most similar first.
        let mut adj: Vec<Vec<(u32, f32)>> = lists.clone();
        for (i, list) in lists.iter().enumerate() {
            for &(j, s) in list {
                adj[j as usize].push((i as u32, s));
            }
        }
        drop(lists);
        let cap = 2 * params.degree;
        for l in &mut adj {
            l.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            l.dedup_by_key(|e| e.0);
            l.truncate(cap);
        }
        // The coarse layer: every row linked to its nearest entry row and back, so a walk
        // from the entry rows reaches clusters that no k-NN link leaves.
        let entries = entry_rows(n, params);
        for (i, e) in nearest_entries(x, d, &entries).into_iter().enumerate() {
            if e as usize != i {
                adj[i].push((e, 0.0));
                adj[e as usize].push((i as u32, 0.0));
            }
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut links = Vec::with_capacity(adj.iter().map(Vec::len).sum());
        offsets.push(0u64);
        for l in adj {
            links.extend(l.iter().map(|e| e.0));
            offsets.push(links.len() as u64);
        }
        Ok(Self {
            rows: n,
            dim: d,
            offsets,
            links,
            entries,
            beam: params.beam,
            probes: params.probes,
        })
    }

    /// Every row's links as k-NN lists (similarity 0: only the order is kept), the form
    /// [`crate::save_knn_lists`] writes.
    pub fn link_lists(&self) -> Vec<Vec<(u32, f32)>> {
        (0..self.rows)
            .map(|i| self.links(i).iter().map(|&j| (j, 0.0)).collect())
            .collect()
    }

    /// The index [`GraphIndex::link_lists`] came from, over rows of width `dim`, searched
    /// with `params`' beam and entry points.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] for invalid parameters, or a link to a row out of
    /// range.
    pub fn from_link_lists(
        lists: &[Vec<(u32, f32)>],
        dim: usize,
        params: &GraphParams,
    ) -> Result<Self, GraphError> {
        params.validate()?;
        let n = lists.len();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut links = Vec::with_capacity(lists.iter().map(Vec::len).sum());
        offsets.push(0u64);
        for (i, l) in lists.iter().enumerate() {
            if let Some(&(j, _)) = l.iter().find(|e| e.0 as usize >= n) {
                return Err(GraphError::arg(
                    "lists",
                    format!("row {i} links to row {j} of {n}"),
                ));
            }
            links.extend(l.iter().map(|e| e.0));
            offsets.push(links.len() as u64);
        }
        Ok(Self {
            rows: n,
            dim,
            offsets,
            links,
            entries: entry_rows(n, params),
            beam: params.beam,
            probes: params.probes,
        })
    }

    /// Number of rows indexed.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Rows a search keeps while walking, unless more are asked for.
    pub fn beam(&self) -> usize {
        self.beam
    }

    /// Set the beam of later searches (at least 1).
    pub fn set_beam(&mut self, beam: usize) {
        self.beam = beam.max(1);
    }

    /// Row `row`'s links, most similar first.
    ///
    /// # Panics
    /// When `row` is not below [`GraphIndex::rows`].
    pub fn links(&self, row: usize) -> &[u32] {
        &self.links[self.offsets[row] as usize..self.offsets[row + 1] as usize]
    }

    /// Bytes held by the links and offsets.
    pub fn memory_bytes(&self) -> usize {
        self.links.len() * 4 + self.offsets.len() * 8 + self.entries.len() * 4
    }

    /// Up to `m` rows that `keep` admits among those the walk reaches, nearest to `query`
    /// first, as `(row, cosine × ‖query‖)` (the score of [`crate::nearest_by_cosine`];
    /// ties to the lower row). Fewer come back when the walk keeps fewer admitted rows
    /// (a selective filter). `rows` and `inv_norms` ([`crate::inverse_norms`]) must be the
    /// matrix the index was built from and its inverse norms.
    ///
    /// # Errors
    /// [`GraphError::DimensionMismatch`] when `rows` or `inv_norms` has fewer rows than the
    /// index, or `rows` or `query` another width.
    pub fn search(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<Vec<(u32, f32)>, GraphError> {
        if rows.dim() != self.dim || query.len() != self.dim {
            return Err(GraphError::DimensionMismatch {
                location: "GraphIndex::search (row or query width)".into(),
                expected: self.dim,
                actual: if rows.dim() != self.dim {
                    rows.dim()
                } else {
                    query.len()
                },
            });
        }
        let available = rows.rows().min(inv_norms.len());
        if available < self.rows {
            return Err(GraphError::DimensionMismatch {
                location: "GraphIndex::search (rows)".into(),
                expected: self.rows,
                actual: available,
            });
        }
        if m == 0 || self.rows == 0 {
            return Ok(Vec::new());
        }
        let ef = self.beam.max(m);
        let score = |i: u32| Near(dot(rows.row(i as usize), query) * inv_norms[i as usize], i);
        let mut seen = vec![0u64; self.rows.div_ceil(64)];
        let mut visit = |i: u32| {
            let (w, b) = (i as usize / 64, 1u64 << (i % 64));
            let new = seen[w] & b == 0;
            seen[w] |= b;
            new
        };
        // Frontier: best first. Kept: the `ef` best seen, worst on top.
        let mut frontier: BinaryHeap<Near> = BinaryHeap::with_capacity(ef * 2);
        let mut kept: BinaryHeap<Reverse<Near>> = BinaryHeap::with_capacity(ef + 1);
        let offer =
            |s: Near, frontier: &mut BinaryHeap<Near>, kept: &mut BinaryHeap<Reverse<Near>>| {
                if kept.len() < ef || kept.peek().is_some_and(|w| s > w.0) {
                    frontier.push(s);
                    kept.push(Reverse(s));
                    if kept.len() > ef {
                        kept.pop();
                    }
                }
            };
        let mut entries: Vec<Near> = Vec::with_capacity(self.entries.len());
        for &e in &self.entries {
            if visit(e) {
                let s = score(e);
                entries.push(s);
                offer(s, &mut frontier, &mut kept);
            }
        }
        // The nearest entry rows' links first, whatever the walk would have kept.
        entries.sort_unstable_by(|a, b| b.cmp(a));
        for e in entries.iter().take(self.probes) {
            for &j in self.links(e.1 as usize) {
                if visit(j) {
                    offer(score(j), &mut frontier, &mut kept);
                }
            }
        }
        while let Some(c) = frontier.pop() {
            if kept.len() >= ef && kept.peek().is_some_and(|w| c < w.0) {
                break;
            }
            for &j in self.links(c.1 as usize) {
                if visit(j) {
                    offer(score(j), &mut frontier, &mut kept);
                }
            }
        }
        let hits = kept
            .into_iter()
            .filter(|r| keep(r.0 .1 as usize))
            .map(|r| (r.0 .1, r.0 .0))
            .collect();
        Ok(best_first(hits, m))
    }
}

/// Each unit row of `x` (`n × d`)'s most similar row among `entries` (ties to the first),
/// by blocks of rows on rayon's threads.
fn nearest_entries(x: &[f32], d: usize, entries: &[u32]) -> Vec<u32> {
    use rayon::prelude::*;
    let n = x.len().checked_div(d).unwrap_or(0);
    if entries.is_empty() || d == 0 {
        return vec![0; n];
    }
    let e = entries.len();
    let centres: Vec<f32> = entries
        .iter()
        .flat_map(|&r| x[r as usize * d..(r as usize + 1) * d].iter().copied())
        .collect();
    const BLOCK: usize = 256;
    x.par_chunks(BLOCK * d)
        .flat_map_iter(|block| {
            let m = block.len() / d;
            let mut c = vec![0.0f32; m * e];
            gemm_abt(block, &centres, m, e, d, &mut c);
            (0..m)
                .map(|i| {
                    let row = &c[i * e..(i + 1) * e];
                    let mut best = 0;
                    for (j, &v) in row.iter().enumerate() {
                        if v > row[best] {
                            best = j;
                        }
                    }
                    entries[best]
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The entry rows of `params` among `n`: a sample seeded by the NN-descent seed, ascending.
fn entry_rows(n: usize, params: &GraphParams) -> Vec<u32> {
    use rand::SeedableRng;
    let count = match params.entry_points {
        0 => (n as f64).sqrt().ceil() as usize,
        e => e,
    };
    let count = count.max(16).min(n);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(params.nn_descent.seed ^ 0x9e37_79b9);
    let mut entries: Vec<u32> = rand::seq::index::sample(&mut rng, n, count)
        .into_iter()
        .map(|i| i as u32)
        .collect();
    entries.sort_unstable();
    entries
}

/// Approximate search on the proximity graph ([`GraphIndex::search`]). When the walk
/// keeps fewer than `m.min(inv_norms.len())` rows `keep` admits (a selective filter), or
/// the search fails, the answer is the exact scan's.
impl crate::NearestSearch for GraphIndex {
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        match self.search(rows, inv_norms, query, m, keep) {
            Ok(hits) if hits.len() >= m.min(inv_norms.len()) => hits,
            _ => nearest_by_cosine_where(rows, inv_norms, query, m, keep),
        }
    }
}

/// A scored row, ordered by score, then by the lower row (the greater is the better).
#[derive(Debug, Clone, Copy)]
struct Near(f32, u32);

impl PartialEq for Near {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Near {}

impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Near {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{inverse_norms, nearest_by_cosine};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `n` rows near `clusters` random centres (clustered, as sentence embeddings are).
    fn clustered(n: usize, d: usize, clusters: usize, seed: u64) -> Embeddings {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let centres: Vec<Vec<f32>> = (0..clusters)
            .map(|_| (0..d).map(|_| rng.random_range(-1.0..1.0f32)).collect())
            .collect();
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let c = &centres[i % clusters];
                c.iter()
                    .map(|v| v + rng.random_range(-0.4..0.4f32))
                    .collect()
            })
            .collect();
        Embeddings::from_rows(d, &rows).unwrap()
    }

    /// `n` rows near `clusters` random centres, each displaced within a random 4-d subspace
    /// (low intrinsic dimension, as sentence embeddings have).
    pub(super) fn manifold(n: usize, d: usize, clusters: usize, seed: u64) -> Embeddings {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = |k: usize| -> Vec<Vec<f32>> {
            (0..k)
                .map(|_| (0..d).map(|_| rng.random_range(-1.0..1.0f32)).collect())
                .collect()
        };
        let centres = draw(clusters);
        let basis = draw(4);
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 1);
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let w: Vec<f32> = (0..4).map(|_| rng.random_range(-0.5..0.5f32)).collect();
                (0..d)
                    .map(|j| {
                        centres[i % clusters][j] + (0..4).map(|b| w[b] * basis[b][j]).sum::<f32>()
                    })
                    .collect()
            })
            .collect();
        Embeddings::from_rows(d, &rows).unwrap()
    }

    fn recall(found: &[(u32, f32)], exact: &[(u32, f32)]) -> f64 {
        let f: std::collections::HashSet<u32> = found.iter().map(|h| h.0).collect();
        exact.iter().filter(|h| f.contains(&h.0)).count() as f64 / exact.len() as f64
    }

    #[test]
    fn finds_the_exact_nearest_rows_with_their_exact_scores() {
        // 6,000 rows: the NN-descent path (EXACT_LISTS_BELOW is 4,096).
        let emb = manifold(6_000, 32, 60, 7);
        let inv = inverse_norms(&emb, emb.rows());
        let mut index =
            GraphIndex::build_prefix(&emb, emb.rows(), &GraphParams::default()).unwrap();
        assert!(!index.links(0).is_empty());
        let queries = manifold(40, 32, 60, 8);
        let mean = |index: &GraphIndex| {
            let mut total = 0.0;
            for q in queries.iter() {
                let exact = nearest_by_cosine(&emb, &inv, q, 20);
                let found = index.search(&emb, &inv, q, 20, &|_| true).unwrap();
                assert_eq!(found.len(), 20);
                // Every row found carries the exact scan's score.
                for &(i, s) in &found {
                    let want = dot(emb.row(i as usize), q) * inv[i as usize];
                    assert_eq!(s, want);
                }
                total += recall(&found, &exact);
            }
            total / 40.0
        };
        // Clusters here overlap in pairs, so a query's 20 nearest rows often sit in two
        // clusters; a beam of 128 found 90 % of them, a beam of 1,000 nearly all.
        index.set_beam(128);
        let default = mean(&index);
        index.set_beam(1_000);
        let wide = mean(&index);
        assert!(
            default >= 0.85 && wide >= 0.99,
            "recall of the exact 20 nearest rows: beam 128 {default}, beam 1,000 {wide}"
        );
    }

    /// Rows displaced in every dimension (high intrinsic dimension, the hard case of a
    /// graph walk): a wider beam finds more, and a beam of every row finds the exact rows
    /// (every row is reachable from the entry rows).
    #[test]
    fn a_wider_beam_finds_at_least_as_much() {
        let emb = clustered(5_000, 24, 200, 3);
        let inv = inverse_norms(&emb, emb.rows());
        let narrow = GraphParams {
            beam: 8,
            degree: 4,
            entry_points: 16,
            ..GraphParams::default()
        };
        let mut index = GraphIndex::build_prefix(&emb, emb.rows(), &narrow).unwrap();
        let queries = clustered(30, 24, 200, 4);
        let mean = |index: &GraphIndex| {
            queries
                .iter()
                .map(|q| {
                    let exact = nearest_by_cosine(&emb, &inv, q, 10);
                    recall(&index.search(&emb, &inv, q, 10, &|_| true).unwrap(), &exact)
                })
                .sum::<f64>()
                / 30.0
        };
        let low = mean(&index);
        index.set_beam(400);
        let high = mean(&index);
        assert!(high > low, "beam 8: {low}, beam 400: {high}");
        index.set_beam(5_000);
        assert_eq!(mean(&index), 1.0);
    }

    #[test]
    fn small_matrices_filters_and_bad_inputs() {
        let emb = clustered(50, 8, 5, 1);
        let inv = inverse_norms(&emb, 50);
        let index = GraphIndex::build_prefix(&emb, 50, &GraphParams::default()).unwrap();
        let q = emb.row(3).to_vec();
        // Exact lists on a small matrix, a beam over every row: the exact answer.
        assert_eq!(
            index.search(&emb, &inv, &q, 7, &|_| true).unwrap(),
            nearest_by_cosine(&emb, &inv, &q, 7)
        );
        // A filter: only admitted rows come back.
        let odd = |i: usize| i % 2 == 1;
        let hits = index.search(&emb, &inv, &q, 5, &odd).unwrap();
        assert!(hits.iter().all(|h| h.0 % 2 == 1));
        // Through the trait, a filter the walk cannot satisfy falls back to the exact scan.
        use crate::NearestSearch;
        let rare = |i: usize| i == 49;
        assert_eq!(index.nearest_where(&emb, &inv, &q, 1, &rare)[0].0, 49);
        // Wrong widths and too few rows are errors, not panics.
        assert!(index.search(&emb, &inv, &[1.0], 3, &|_| true).is_err());
        assert!(index.search(&emb, &inv[..10], &q, 3, &|_| true).is_err());
        // One row, no rows, bad parameters.
        let one = GraphIndex::build_prefix(&emb, 1, &GraphParams::default()).unwrap();
        assert_eq!(one.search(&emb, &inv, &q, 3, &|_| true).unwrap().len(), 1);
        let none = GraphIndex::build_prefix(&emb, 0, &GraphParams::default()).unwrap();
        assert!(none
            .search(&emb, &inv, &q, 3, &|_| true)
            .unwrap()
            .is_empty());
        let bad = GraphParams {
            degree: 0,
            ..GraphParams::default()
        };
        assert!(matches!(
            GraphIndex::build_prefix(&emb, 50, &bad),
            Err(GraphError::InvalidArgument {
                name: "GraphParams.degree",
                ..
            })
        ));
        assert!(GraphIndex::build_prefix(&emb, 51, &GraphParams::default()).is_err());
    }

    #[test]
    fn saved_and_read_back() {
        let emb = clustered(100, 8, 5, 2);
        let index = GraphIndex::build_prefix(&emb, 100, &GraphParams::default()).unwrap();
        let text = serde_json::to_string(&index).unwrap();
        let back: GraphIndex = serde_json::from_str(&text).unwrap();
        assert_eq!(back, index);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.bin");
        crate::save_knn_lists(&index.link_lists(), &path).unwrap();
        let lists = crate::load_knn_lists(&path).unwrap();
        let back = GraphIndex::from_link_lists(&lists, 8, &GraphParams::default()).unwrap();
        assert_eq!(back, index);
        let mut bad = lists.clone();
        bad[3].push((100, 0.0));
        assert!(GraphIndex::from_link_lists(&bad, 8, &GraphParams::default()).is_err());
        let p: GraphParams = serde_json::from_str(r#"{"beam": 64}"#).unwrap();
        assert_eq!(p.beam, 64);
        assert_eq!(p.degree, GraphParams::default().degree);
    }
}
