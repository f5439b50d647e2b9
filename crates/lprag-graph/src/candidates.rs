//! The candidate stage of an LP-RAG query: the chunks nearest to the query and the chunks
//! the link predictor scores.
//!
//! A [`NearestSearch`] strategy finds the nearest chunks: [`ExactScan`] (one scan with
//! inverse norms), [`ColumnIndex`] (the same answer read column-wise), [`IvfIndex`]
//! (the probed lists only) or [`GraphIndex`] (a walk on a proximity graph); the last two
//! fall back to an exact scan when a filter leaves them too few hits.
//! [`CandidateSearch`] owns the strategy, the chunks' inverse norms and the chunk graph's
//! neighbour lists, and [`CandidateSearch::candidates`] turns a [`CandidateRequest`] into
//! the nearest chunks and the candidate set (the pool and its graph neighbours, or every
//! admitted chunk).

use std::fmt::Debug;
use std::sync::Arc;

use lprag_core::{Embeddings, LinkEdge, LinkGraph};

use crate::kernels::{inverse_norms, nearest_by_cosine_where};
use crate::{ColumnIndex, GraphError, GraphIndex, GraphParams, IvfIndex, IvfParams};

/// A way to find the rows nearest to a query by cosine (the candidate stage's search).
pub trait NearestSearch: Send + Sync + Debug {
    /// The (up to) `m` rows among the first `inv_norms.len()` of `rows` that `keep`
    /// admits, nearest to `query` first, ties to the lower row, as `(row, score)`.
    ///
    /// `inv_norms` comes from [`crate::inverse_norms`] over `rows`, the matrix the
    /// strategy was built from. Scores are higher for nearer rows; their scale is the
    /// strategy's ([`ExactScan`] and [`ColumnIndex`]: cosine × ‖query‖; [`IvfIndex`]:
    /// cosine, unless it fell back to the exact scan).
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)>;
}

/// Exact search: one scan over the rows, [`crate::nearest_by_cosine_where`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExactScan;

impl NearestSearch for ExactScan {
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        nearest_by_cosine_where(rows, inv_norms, query, m, keep)
    }
}

/// Exact search read column-wise: [`ColumnIndex::nearest_where`], the same answer as
/// [`ExactScan`] to the bit.
impl NearestSearch for ColumnIndex {
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        ColumnIndex::nearest_where(self, rows, inv_norms, query, m, keep)
    }
}

/// Approximate search in the probed lists ([`IvfIndex::search`]). When the probed lists
/// hold fewer than `m.min(inv_norms.len())` rows `keep` admits (a selective filter), or the
/// search fails, the answer is [`ExactScan`]'s.
impl NearestSearch for IvfIndex {
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        // Too few admitted rows in the probed lists (a selective filter): scan all.
        match self.search(rows, query, m, keep) {
            Ok(hits) if hits.len() >= m.min(inv_norms.len()) => hits,
            _ => nearest_by_cosine_where(rows, inv_norms, query, m, keep),
        }
    }
}

/// A shared strategy searches as the strategy does (a [`CandidateSearch`] keeps its
/// [`GraphIndex`] this way, to hand it back for saving).
impl<T: NearestSearch + ?Sized> NearestSearch for Arc<T> {
    fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        NearestSearch::nearest_where(&**self, rows, inv_norms, query, m, keep)
    }
}

/// Which [`NearestSearch`] a [`CandidateSearch`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchKind {
    /// [`ExactScan`].
    Exact,
    /// [`ColumnIndex`].
    Columns,
    /// [`IvfIndex`].
    Ivf,
    /// [`GraphIndex`].
    Graph,
    /// A strategy given to [`CandidateSearch::with_strategy`].
    Custom,
}

/// What [`CandidateSearch::candidates`] is asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CandidateRequest<'a> {
    /// Score only the `pool` chunks nearest to the query (and, with `neighbours`, their
    /// graph neighbours); `None`, or a pool of at least every chunk, scores every admitted
    /// chunk. A pool of 0 counts as 1.
    pub pool: Option<usize>,
    /// Add the pool's neighbours in the chunk graph to the candidates.
    pub neighbours: bool,
    /// How many of the query's nearest chunks (in the whole corpus, whatever `allowed`
    /// says) to return besides the candidates (the predictor's join; 0 for none).
    pub join: usize,
    /// The chunks a filter admits (`allowed[chunk]`, at least one entry per chunk); `None`
    /// admits every chunk.
    pub allowed: Option<&'a [bool]>,
}

/// The candidate stage over a [`LinkGraph`]'s chunks: a [`NearestSearch`] strategy, the
/// chunks' inverse norms and the chunk graph's neighbour lists.
///
/// It holds no copy of the features: [`CandidateSearch::candidates`] takes the matrix it
/// was built from.
///
/// ```
/// use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph};
/// use lprag_graph::{CandidateRequest, CandidateSearch};
///
/// let features = Embeddings::from_rows(2, &[
///     vec![1.0, 0.0], vec![0.9, 0.2], vec![0.0, 1.0], vec![0.1, 1.0],
/// ])?;
/// let edge = |a, b| LinkEdge { a, b, weight: 1.0, kind: EdgeKind::Similarity };
/// let graph = LinkGraph { features, num_chunks: 4, edges: vec![edge(0, 3)] };
/// let search = CandidateSearch::build(&graph, None, None)?;
/// let request = CandidateRequest { pool: Some(1), neighbours: true, join: 2, allowed: None };
/// let (nearest, candidates) = search.candidates(&graph.features, &[1.0, 0.1], &request);
/// assert_eq!(nearest, vec![0, 1]); // the two nearest chunks, best first
/// assert_eq!(candidates, vec![0, 3]); // the pool (chunk 0) and its neighbour, sorted
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CandidateSearch {
    inv_norms: Vec<f32>,
    neighbours: Vec<Vec<u32>>,
    strategy: Box<dyn NearestSearch>,
    kind: SearchKind,
    /// The proximity graph when it is the strategy ([`SearchKind::Graph`]).
    proximity: Option<Arc<GraphIndex>>,
    /// The column-wise copy when it is the strategy ([`SearchKind::Columns`]).
    columns: Option<Arc<ColumnIndex>>,
}

impl CandidateSearch {
    /// Exact scans ([`ExactScan`]) over `graph`'s chunks.
    pub fn exact(graph: &LinkGraph) -> Self {
        Self::with_kind(graph, Box::new(ExactScan), SearchKind::Exact)
    }

    /// The search over `graph`'s chunks: an [`IvfIndex`] of the chunks when `ivf` is
    /// given; else a [`ColumnIndex`] when `column_scan_from` is given and the graph has at
    /// least that many chunks (at least 1); else exact scans.
    ///
    /// # Errors
    /// As [`IvfIndex::build_prefix`] or [`ColumnIndex::build`].
    pub fn build(
        graph: &LinkGraph,
        ivf: Option<&IvfParams>,
        column_scan_from: Option<usize>,
    ) -> Result<Self, GraphError> {
        Self::build_at(graph, ivf, column_scan_from, None)
    }

    /// [`CandidateSearch::build`], with a [`ColumnIndex`] (when that is the strategy)
    /// written to the file `columns` and memory-mapped instead of held on the heap
    /// ([`ColumnIndex::build_in_file`]); `None` keeps it on the heap.
    ///
    /// # Errors
    /// As [`CandidateSearch::build`] and [`ColumnIndex::build_in_file`].
    pub fn build_at(
        graph: &LinkGraph,
        ivf: Option<&IvfParams>,
        column_scan_from: Option<usize>,
        columns: Option<&std::path::Path>,
    ) -> Result<Self, GraphError> {
        let mut search = Self::exact(graph);
        if let Some(params) = ivf {
            search.strategy = Box::new(IvfIndex::build_prefix(
                &graph.features,
                graph.num_chunks,
                params,
            )?);
            search.kind = SearchKind::Ivf;
        } else if Self::scans_columns_for(None, column_scan_from, graph.num_chunks) {
            let index = match columns {
                Some(path) => ColumnIndex::build_in_file(&graph.features, &search.inv_norms, path)?,
                None => ColumnIndex::build(&graph.features, &search.inv_norms)?,
            };
            search.set_columns(index);
        }
        Ok(search)
    }

    /// Whether [`CandidateSearch::build`] makes a [`ColumnIndex`] for these settings over
    /// `num_chunks` chunks: no `ivf`, and at least `column_scan_from` chunks (at least 1).
    pub fn scans_columns_for(
        ivf: Option<&IvfParams>,
        column_scan_from: Option<usize>,
        num_chunks: usize,
    ) -> bool {
        ivf.is_none() && column_scan_from.is_some_and(|from| num_chunks >= from.max(1))
    }

    /// The search over `graph`'s chunks with `index`, a [`ColumnIndex`] of its chunk rows
    /// made earlier (read back with [`ColumnIndex::open_file`]). The caller vouches that
    /// it was made from these rows; its shape is checked here.
    ///
    /// # Errors
    /// [`GraphError::DimensionMismatch`] when `index` holds another number of rows than
    /// `graph` has chunks, or rows of another width.
    pub fn with_column_index(graph: &LinkGraph, index: ColumnIndex) -> Result<Self, GraphError> {
        for (what, expected, actual) in [
            ("rows", graph.num_chunks, index.rows()),
            ("width", graph.features.dim(), index.dim()),
        ] {
            if expected != actual {
                return Err(GraphError::DimensionMismatch {
                    location: format!("CandidateSearch::with_column_index ({what})"),
                    expected,
                    actual,
                });
            }
        }
        let mut search = Self::exact(graph);
        search.set_columns(index);
        Ok(search)
    }

    fn set_columns(&mut self, index: ColumnIndex) {
        let index = Arc::new(index);
        self.strategy = Box::new(index.clone());
        self.columns = Some(index);
        self.kind = SearchKind::Columns;
    }

    /// The column-wise copy, when the strategy scans one ([`SearchKind::Columns`]): to
    /// save it beside an index ([`ColumnIndex::save_file`]).
    pub fn column_index(&self) -> Option<&ColumnIndex> {
        self.columns.as_deref()
    }

    /// A walk on a [`GraphIndex`] over `graph`'s chunks (built now: NN-descent lists of the
    /// chunk rows, about linear in the chunks).
    ///
    /// # Errors
    /// As [`GraphIndex::build_prefix`].
    pub fn proximity(graph: &LinkGraph, params: &GraphParams) -> Result<Self, GraphError> {
        let index = GraphIndex::build_prefix(&graph.features, graph.num_chunks, params)?;
        Ok(Self::with_proximity(graph, Arc::new(index)))
    }

    /// A walk on `index`, a [`GraphIndex`] over `graph`'s chunks (built earlier, or read
    /// back from disk).
    ///
    /// # Errors
    /// [`GraphError::DimensionMismatch`] when `index` links another number of rows than
    /// `graph` has chunks.
    pub fn with_graph_index(graph: &LinkGraph, index: GraphIndex) -> Result<Self, GraphError> {
        if index.rows() != graph.num_chunks {
            return Err(GraphError::DimensionMismatch {
                location: "CandidateSearch::with_graph_index (linked rows)".into(),
                expected: graph.num_chunks,
                actual: index.rows(),
            });
        }
        Ok(Self::with_proximity(graph, Arc::new(index)))
    }

    fn with_proximity(graph: &LinkGraph, index: Arc<GraphIndex>) -> Self {
        let mut search = Self::with_kind(graph, Box::new(index.clone()), SearchKind::Graph);
        search.proximity = Some(index);
        search
    }

    /// The proximity graph, when the strategy is a walk on one ([`SearchKind::Graph`]).
    pub fn graph_index(&self) -> Option<&GraphIndex> {
        self.proximity.as_deref()
    }

    /// The search over `graph`'s chunks with a strategy of the caller's (built over the
    /// graph's features; [`SearchKind::Custom`]).
    pub fn with_strategy(graph: &LinkGraph, strategy: Box<dyn NearestSearch>) -> Self {
        Self::with_kind(graph, strategy, SearchKind::Custom)
    }

    fn with_kind(graph: &LinkGraph, strategy: Box<dyn NearestSearch>, kind: SearchKind) -> Self {
        let nc = graph.num_chunks;
        Self {
            inv_norms: inverse_norms(&graph.features, nc),
            neighbours: neighbour_lists(nc, &graph.edges),
            strategy,
            kind,
            proximity: None,
            columns: None,
        }
    }

    /// Which strategy finds the nearest chunks.
    pub fn kind(&self) -> SearchKind {
        self.kind
    }

    /// Whether the exact scan reads the column-wise copy ([`SearchKind::Columns`]).
    pub fn scans_columns(&self) -> bool {
        self.kind == SearchKind::Columns
    }

    /// Whether the column-wise copy is read from a memory-mapped file
    /// ([`CandidateSearch::build_at`] with a path, or [`ColumnIndex::open_file`]).
    pub fn columns_mapped(&self) -> bool {
        self.columns.as_ref().is_some_and(|c| c.is_mapped())
    }

    /// Whether an inverted-file index finds the nearest chunks ([`SearchKind::Ivf`]).
    pub fn uses_ivf(&self) -> bool {
        self.kind == SearchKind::Ivf
    }

    /// The strategy that finds the nearest chunks.
    pub fn strategy(&self) -> &dyn NearestSearch {
        &*self.strategy
    }

    /// Number of chunks searched (the graph's `num_chunks`).
    pub fn num_chunks(&self) -> usize {
        self.neighbours.len()
    }

    /// `1/‖row‖` of every chunk ([`crate::inverse_norms`]).
    pub fn inv_norms(&self) -> &[f32] {
        &self.inv_norms
    }

    /// `chunk`'s neighbours in the chunk graph, in edge order (an edge's other end once
    /// per edge; edges to query nodes and self-loops left out).
    ///
    /// # Panics
    /// When `chunk` is not below [`CandidateSearch::num_chunks`].
    pub fn neighbours(&self, chunk: usize) -> &[u32] {
        &self.neighbours[chunk]
    }

    /// Every chunk's neighbour lists, indexed by chunk (what a `ScoreContext` reads).
    pub fn neighbour_lists(&self) -> &[Vec<u32>] {
        &self.neighbours
    }

    /// The (up to) `m` chunks `keep` admits nearest to `query`, best first
    /// ([`NearestSearch::nearest_where`] of the strategy, over `features`, the matrix the
    /// search was built from).
    pub fn nearest_where(
        &self,
        features: &Embeddings,
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<usize> {
        self.strategy
            .nearest_where(features, &self.inv_norms, query, m, keep)
            .into_iter()
            .map(|(i, _)| i as usize)
            .collect()
    }

    /// The query's nearest chunks (best first; as many as the pool and the join need) and
    /// the chunks to score (ascending): the pool plus, when asked, its graph neighbours
    /// that `allowed` admits, or every admitted chunk. `features` is the matrix the search
    /// was built from.
    ///
    /// Without `allowed`, one search serves both the join and the pool (the pool is the
    /// first of the nearest chunks); with it, the join's nearest chunks come from the whole
    /// corpus and the pool from the admitted chunks.
    ///
    /// # Panics
    /// When `allowed` has fewer entries than there are chunks.
    pub fn candidates(
        &self,
        features: &Embeddings,
        query: &[f32],
        request: &CandidateRequest<'_>,
    ) -> (Vec<usize>, Vec<usize>) {
        let n = self.num_chunks();
        let pool = request.pool.filter(|&p| p < n).map(|p| p.max(1));
        let (nearest, pool_nearest) = self.nearest_and_pool(features, query, pool, request);
        let candidates = match pool {
            Some(_) => self.pool_and_neighbours(pool_nearest, request),
            None => (0..n).filter(|&i| admitted(request.allowed, i)).collect(),
        };
        (nearest, candidates)
    }

    /// The join's nearest chunks and the pool's (`pool` already clamped).
    fn nearest_and_pool(
        &self,
        features: &Embeddings,
        query: &[f32],
        pool: Option<usize>,
        request: &CandidateRequest<'_>,
    ) -> (Vec<usize>, Vec<usize>) {
        let join = request.join;
        match request.allowed {
            // One scan serves both the join and the pool.
            None => {
                let nearest =
                    self.nearest_where(features, query, pool.unwrap_or(0).max(join), &|_| true);
                let p = pool.unwrap_or(0).min(nearest.len());
                let pooled = nearest[..p].to_vec();
                (nearest, pooled)
            }
            // The join stays the whole corpus's nearest chunks; the pool is the admitted ones'.
            Some(ok) => (
                self.nearest_where(features, query, join, &|_| true),
                self.nearest_where(features, query, pool.unwrap_or(0), &|i| ok[i]),
            ),
        }
    }

    /// The pool plus, when asked, its admitted graph neighbours, sorted and deduplicated.
    fn pool_and_neighbours(&self, pool: Vec<usize>, request: &CandidateRequest<'_>) -> Vec<usize> {
        self.expand_pool(pool, request.neighbours, &|j| admitted(request.allowed, j))
    }

    /// The candidate set of a pool found elsewhere (by a chunk store's search, say):
    /// `pool` plus, with `neighbours`, their graph neighbours `keep` admits, sorted and
    /// deduplicated, as [`CandidateSearch::candidates`] makes it from its own pool.
    ///
    /// # Panics
    /// When a pool entry is not below [`CandidateSearch::num_chunks`].
    pub fn expand_pool(
        &self,
        pool: Vec<usize>,
        neighbours: bool,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<usize> {
        expand_pool(&self.neighbours, pool, neighbours, keep)
    }
}

/// Each chunk's neighbours in the chunk graph: the other ends of the edges between two of
/// the `num_chunks` chunks (self-loops and edges touching other nodes skipped), as
/// [`CandidateSearch::neighbour_lists`] keeps them.
pub fn neighbour_lists(num_chunks: usize, edges: &[LinkEdge]) -> Vec<Vec<u32>> {
    let mut neighbours = vec![Vec::new(); num_chunks];
    for e in edges {
        if (e.a as usize) < num_chunks && (e.b as usize) < num_chunks && e.a != e.b {
            neighbours[e.a as usize].push(e.b);
            neighbours[e.b as usize].push(e.a);
        }
    }
    neighbours
}

/// [`CandidateSearch::expand_pool`] over `lists` ([`neighbour_lists`]): the pool, with
/// `neighbours` the pool's neighbours that `keep` admits, sorted and distinct.
pub fn expand_pool(
    lists: &[Vec<u32>],
    pool: Vec<usize>,
    neighbours: bool,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<usize> {
    let mut c = pool;
    if neighbours {
        for i in 0..c.len() {
            c.extend(lists[c[i]].iter().map(|&j| j as usize).filter(|&j| keep(j)));
        }
    }
    c.sort_unstable();
    c.dedup();
    c
}

/// Whether `allowed` admits chunk `i` (`None` admits every chunk).
fn admitted(allowed: Option<&[bool]>, i: usize) -> bool {
    allowed.is_none_or(|ok| ok[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::EdgeKind;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `nc` random chunks and `nq` query rows of width `dim`, one zero chunk, one duplicated
    /// chunk; chunk–chunk edges (some repeated), chunk–query edges and self-loops.
    fn graph(nc: usize, nq: usize, dim: usize, seed: u64) -> LinkGraph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut data: Vec<f32> = (0..(nc + nq) * dim)
            .map(|_| rng.random_range(-1.0..1.0f32))
            .collect();
        data[2 * dim..3 * dim].iter_mut().for_each(|v| *v = 0.0);
        let (head, tail) = data.split_at_mut(9 * dim);
        tail[..dim].copy_from_slice(&head[4 * dim..5 * dim]);
        let features = Embeddings::new(dim, data).unwrap();
        let edge = |a: usize, b: usize, kind| LinkEdge {
            a: a as u32,
            b: b as u32,
            weight: 1.0,
            kind,
        };
        let mut edges = Vec::new();
        for _ in 0..nc * 2 {
            let (a, b) = (rng.random_range(0..nc), rng.random_range(0..nc));
            edges.push(edge(a, b, EdgeKind::Similarity));
            if a % 5 == 0 {
                edges.push(edge(b, a, EdgeKind::Bridge));
            }
        }
        for q in nc..nc + nq {
            edges.push(edge(q, rng.random_range(0..nc), EdgeKind::QueryChunk));
        }
        LinkGraph {
            features,
            num_chunks: nc,
            edges,
        }
    }

    fn queries(dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..6)
            .map(|_| (0..dim).map(|_| rng.random_range(-1.0..1.0f32)).collect())
            .collect()
    }

    /// The facade's candidate stage as it was before this module (issue 43), verbatim but
    /// for the search's fields passed one by one: the reference `candidates` must equal.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        graph: &LinkGraph,
        inv_norms: &[f32],
        neighbour_lists: &[Vec<u32>],
        ivf: Option<&IvfIndex>,
        columns: Option<&ColumnIndex>,
        query: &[f32],
        pool: Option<usize>,
        neighbours: bool,
        join: usize,
        allowed: Option<&[bool]>,
    ) -> (Vec<usize>, Vec<usize>) {
        let n = graph.num_chunks;
        let pool = pool.filter(|&p| p < n).map(|p| p.max(1));
        let nearest_where = |m: usize, keep: &(dyn Fn(usize) -> bool + Sync)| -> Vec<usize> {
            if let Some(ivf) = ivf {
                match ivf.search(&graph.features, query, m, keep) {
                    Ok(hits) if hits.len() >= m.min(n) => {
                        return hits.into_iter().map(|(i, _)| i as usize).collect()
                    }
                    _ => {}
                }
            }
            let hits = match columns {
                Some(columns) => columns.nearest_where(&graph.features, inv_norms, query, m, keep),
                None => nearest_by_cosine_where(&graph.features, inv_norms, query, m, keep),
            };
            hits.into_iter().map(|(i, _)| i as usize).collect()
        };
        let (nearest, pool_nearest) = match allowed {
            None => {
                let nearest = nearest_where(pool.unwrap_or(0).max(join), &|_| true);
                let p = pool.unwrap_or(0).min(nearest.len());
                let pooled = nearest[..p].to_vec();
                (nearest, pooled)
            }
            Some(ok) => (
                nearest_where(join, &|_| true),
                nearest_where(pool.unwrap_or(0), &|i| ok[i]),
            ),
        };
        let admitted = |i: usize| allowed.is_none_or(|ok| ok[i]);
        let candidates = match pool {
            Some(_) => {
                let mut c: Vec<usize> = pool_nearest;
                if neighbours {
                    for i in 0..c.len() {
                        c.extend(
                            neighbour_lists[c[i]]
                                .iter()
                                .map(|&j| j as usize)
                                .filter(|&j| admitted(j)),
                        );
                    }
                }
                c.sort_unstable();
                c.dedup();
                c
            }
            None => (0..n).filter(|&i| admitted(i)).collect(),
        };
        (nearest, candidates)
    }

    fn bits(v: &[(u32, f32)]) -> Vec<(u32, u32)> {
        v.iter().map(|&(i, s)| (i, s.to_bits())).collect()
    }

    #[test]
    fn the_three_strategies_agree_and_respect_filters() {
        let g = graph(700, 30, 16, 1);
        let nc = g.num_chunks;
        let inv = inverse_norms(&g.features, nc);
        let columns = ColumnIndex::build(&g.features, &inv).unwrap();
        let all_lists = IvfParams {
            probes: usize::MAX,
            ..IvfParams::default()
        };
        let ivf = IvfIndex::build_prefix(&g.features, nc, &all_lists).unwrap();
        let filters: [&(dyn Fn(usize) -> bool + Sync); 3] =
            [&|_| true, &|i| i % 2 == 1, &|i| i % 7 == 3];
        for q in queries(16, 2) {
            for m in [0, 1, 7, 30, nc, nc + 5] {
                for keep in filters {
                    let exact = ExactScan.nearest_where(&g.features, &inv, &q, m, keep);
                    let col =
                        NearestSearch::nearest_where(&columns, &g.features, &inv, &q, m, keep);
                    let approx = NearestSearch::nearest_where(&ivf, &g.features, &inv, &q, m, keep);
                    assert_eq!(bits(&col), bits(&exact), "m {m}");
                    let ids = |v: &[(u32, f32)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
                    assert_eq!(ids(&approx), ids(&exact), "m {m}");
                    let admitted = (0..nc).filter(|&i| keep(i)).count();
                    assert_eq!(exact.len(), m.min(admitted));
                    assert!(exact.iter().all(|&(i, _)| keep(i as usize)));
                }
            }
        }
    }

    #[test]
    fn candidates_equal_the_facade_reference_for_every_strategy() {
        let g = graph(500, 40, 12, 3);
        let nc = g.num_chunks;
        let exact = CandidateSearch::exact(&g);
        let columns = CandidateSearch::build(&g, None, Some(1)).unwrap();
        let few_probes = IvfParams {
            probes: 2,
            ..IvfParams::default()
        };
        let ivf = CandidateSearch::build(&g, Some(&few_probes), Some(1)).unwrap();
        assert_eq!(exact.kind(), SearchKind::Exact);
        assert!(columns.scans_columns() && !columns.uses_ivf());
        assert!(ivf.uses_ivf() && !ivf.scans_columns());
        let ivf_index = IvfIndex::build_prefix(&g.features, nc, &few_probes).unwrap();
        let column_index = ColumnIndex::build(&g.features, exact.inv_norms()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let sparse: Vec<bool> = (0..nc).map(|_| rng.random_range(0..20) == 0).collect();
        let half: Vec<bool> = (0..nc).map(|i| i % 2 == 0).collect();
        let none = vec![false; nc];
        for q in queries(12, 5) {
            for pool in [
                None,
                Some(0),
                Some(1),
                Some(6),
                Some(nc - 1),
                Some(nc),
                Some(nc + 3),
            ] {
                for neighbours in [false, true] {
                    for join in [0, 3, 40] {
                        for allowed in [None, Some(&sparse[..]), Some(&half[..]), Some(&none[..])] {
                            let request = CandidateRequest {
                                pool,
                                neighbours,
                                join,
                                allowed,
                            };
                            for (search, ivf, cols) in [
                                (&exact, None, None),
                                (&columns, None, Some(&column_index)),
                                (&ivf, Some(&ivf_index), None),
                            ] {
                                let want = reference(
                                    &g,
                                    search.inv_norms(),
                                    &search.neighbours,
                                    ivf,
                                    cols,
                                    &q,
                                    pool,
                                    neighbours,
                                    join,
                                    allowed,
                                );
                                let got = search.candidates(&g.features, &q, &request);
                                assert_eq!(got, want, "{request:?} {:?}", search.kind());
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pool_neighbours_filter_and_dedup_by_hand() {
        // Chunks 0..6 on a circle; 6 and 7 are query nodes.
        let angles = [0.0f32, 0.3, 0.7, 1.5, 2.5, 3.0, 0.1, 2.0];
        let rows: Vec<Vec<f32>> = angles.iter().map(|a| vec![a.cos(), a.sin()]).collect();
        let edge = |a: u32, b: u32| LinkEdge {
            a,
            b,
            weight: 1.0,
            kind: EdgeKind::Similarity,
        };
        let g = LinkGraph {
            features: Embeddings::from_rows(2, &rows).unwrap(),
            num_chunks: 6,
            edges: vec![
                edge(0, 4),
                edge(1, 4),
                edge(1, 5),
                edge(2, 2),
                edge(0, 6),
                edge(7, 3),
            ],
        };
        let s = CandidateSearch::exact(&g);
        assert_eq!(s.num_chunks(), 6);
        assert_eq!(s.neighbours(0), &[4]);
        assert_eq!(s.neighbours(1), &[4, 5]);
        assert!(s.neighbours(2).is_empty() && s.neighbours(3).is_empty());
        let q = [1.0, 0.05];
        let ask = |pool, neighbours, join, allowed| {
            s.candidates(
                &g.features,
                &q,
                &CandidateRequest {
                    pool,
                    neighbours,
                    join,
                    allowed,
                },
            )
        };
        // Nearest to angle 0.05: 0, 1, 2, 3, 4, 5.
        assert_eq!(ask(Some(2), false, 0, None), (vec![0, 1], vec![0, 1]));
        assert_eq!(ask(Some(2), false, 4, None), (vec![0, 1, 2, 3], vec![0, 1]));
        // Neighbours 4 (twice) and 5 are added once, sorted.
        assert_eq!(ask(Some(2), true, 0, None), (vec![0, 1], vec![0, 1, 4, 5]));
        // A pool of 0 is 1; a pool of every chunk scores every chunk.
        assert_eq!(ask(Some(0), true, 0, None), (vec![0], vec![0, 4]));
        assert_eq!(ask(Some(6), false, 1, None), (vec![0], (0..6).collect()));
        assert_eq!(ask(None, true, 0, None), (vec![], (0..6).collect()));
        // A filter: the pool is the admitted chunks' nearest, the join the corpus's, and
        // rejected neighbours stay out.
        let ok = [false, true, false, true, true, false];
        assert_eq!(
            ask(Some(2), true, 2, Some(&ok)),
            (vec![0, 1], vec![1, 3, 4])
        );
        assert_eq!(ask(None, true, 1, Some(&ok)), (vec![0], vec![1, 3, 4]));
        let nothing = [false; 6];
        assert_eq!(ask(Some(2), true, 0, Some(&nothing)), (vec![], vec![]));
    }

    #[test]
    fn ivf_falls_back_to_the_exact_scan_when_a_filter_admits_too_few() {
        let g = graph(900, 0, 8, 6);
        let nc = g.num_chunks;
        let one_probe = IvfParams {
            probes: 1,
            ..IvfParams::default()
        };
        let search = CandidateSearch::build(&g, Some(&one_probe), None).unwrap();
        let index = IvfIndex::build_prefix(&g.features, nc, &one_probe).unwrap();
        let inv = search.inv_norms();
        let rare = |i: usize| i % 150 == 7;
        for q in queries(8, 7) {
            // The probed list alone holds fewer than 5 admitted rows.
            let probed = index.search(&g.features, &q, 5, &rare).unwrap();
            assert!(probed.len() < 5);
            let exact = nearest_by_cosine_where(&g.features, inv, &q, 5, &rare);
            assert_eq!(exact.len(), 5);
            let got = search
                .strategy()
                .nearest_where(&g.features, inv, &q, 5, &rare);
            assert_eq!(bits(&got), bits(&exact));
            let ids: Vec<usize> = exact.iter().map(|x| x.0 as usize).collect();
            assert_eq!(search.nearest_where(&g.features, &q, 5, &rare), ids);
            // Unfiltered, one probed list holds enough: its answer is kept.
            let all = search
                .strategy()
                .nearest_where(&g.features, inv, &q, 3, &|_| true);
            assert_eq!(
                bits(&all),
                bits(&index.search(&g.features, &q, 3, &|_| true).unwrap())
            );
        }
    }

    #[test]
    fn the_build_picks_the_strategy_and_passes_errors_on() {
        let g = graph(50, 5, 4, 8);
        let kind =
            |ivf: Option<&IvfParams>, from| CandidateSearch::build(&g, ivf, from).unwrap().kind();
        assert_eq!(kind(None, None), SearchKind::Exact);
        assert_eq!(kind(None, Some(51)), SearchKind::Exact);
        assert_eq!(kind(None, Some(50)), SearchKind::Columns);
        assert_eq!(kind(None, Some(0)), SearchKind::Columns);
        assert_eq!(kind(Some(&IvfParams::default()), Some(1)), SearchKind::Ivf);
        let custom = CandidateSearch::with_strategy(&g, Box::new(ExactScan));
        assert_eq!(custom.kind(), SearchKind::Custom);
        assert!(!custom.scans_columns() && !custom.uses_ivf());
        let bad = IvfParams {
            probes: 0,
            ..IvfParams::default()
        };
        assert!(matches!(
            CandidateSearch::build(&g, Some(&bad), None),
            Err(GraphError::InvalidArgument { .. })
        ));
        let mut nan = g.clone();
        let mut data = nan.features.as_slice().to_vec();
        data[4 * 3] = f32::NAN;
        nan.features = Embeddings::new(4, data).unwrap();
        assert!(CandidateSearch::build(&nan, None, Some(1)).is_err());
    }
}
