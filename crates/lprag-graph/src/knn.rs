//! k-nearest-neighbour search by cosine similarity and mutual k-NN edges (LP-RAG §3, step 2).
//!
//! Two backends compute the same thing:
//!
//! * **Exact**: rows are L2-normalised, then the similarity matrix is computed tile by tile
//!   with a blocked single-precision GEMM (`matrixmultiply`), rayon running one block of
//!   rows per task; each tile is scanned once to keep every row's top k. Memory stays at
//!   one `rows_per_block × 2048` tile per thread, never `N × N`.
//! * **HNSW**: `hnsw_rs` over the normalised rows with the distance `1 − ⟨a, b⟩`, parallel
//!   insertion, then one search per row. Approximate: a row may miss a true neighbour.
//! * **IVF** ([`crate::IvfIndex`]) and **NN-descent** ([`crate::NnDescentParams`]): approximate
//!   too, opt-in.
//!
//! [`KnnBackend::Auto`] picks exact below a row count ([`DEFAULT_APPROXIMATE_FROM`]) and
//! NN-descent from it: the exact cost grows as `N²·d`, NN-descent's about as `N·d` times its
//! iterations, and on real text NN-descent (32 candidates per row) found 94 % of the exact
//! neighbours at 100k rows in less than half the time (`docs/benchmarks.md`, "Graph
//! building"). HNSW builds were slower than exact search at every size measured on 2 cores.

use std::panic::AssertUnwindSafe;

use anndists::dist::Distance;
use hnsw_rs::hnsw::Hnsw;
use lprag_core::{EdgeKind, Embeddings, LinkEdge};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::ivf::{ivf_knn, IvfParams};
use crate::kernels::{gemm_abt, normalized_rows, ranks_before, TopK, COL_TILE};
use crate::nndescent::{nndescent_knn, NnDescentParams};
use crate::GraphError;
use lprag_core::dot;

/// Default number of neighbours for the mutual k-NN chunk graph (LP-RAG: k = 5).
pub const DEFAULT_K: usize = 5;

/// Row count from which [`KnnBackend::default`] switches from exact search to NN-descent
/// (default [`NnDescentParams`]). Exact search takes ≈ 11 min at this size on two cores;
/// NN-descent is already 2.2× faster at 100k rows, at 94 % of the exact neighbours
/// (`benches/knn.rs`; figures in `docs/benchmarks.md`).
pub const DEFAULT_APPROXIMATE_FROM: usize = 200_000;

/// Parameters of the HNSW index (`hnsw_rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Maximum number of links per node and layer (`M`; layer 0 keeps `2·M`). 1..=255.
    pub m: usize,
    /// Candidate-list width while building (`ef_construction`); larger is slower and more
    /// accurate.
    pub ef_construction: usize,
    /// Candidate-list width while searching (`ef`); raised to `k + 1` when smaller.
    pub ef_search: usize,
}

impl Default for HnswParams {
    /// `M = 16`, `ef_construction = 200`, `ef_search = 64`: recall@10 ≈ 1.0 on clustered
    /// 384-d data at 100k rows.
    fn default() -> Self {
        Self {
            m: 16,
            ef_construction: 200,
            ef_search: 64,
        }
    }
}

impl HnswParams {
    /// Check the parameters (`hnsw_rs` aborts the process on `M > 256`, so this matters).
    pub fn validate(&self) -> Result<(), GraphError> {
        if self.m == 0 || self.m > 255 {
            return Err(GraphError::arg(
                "HnswParams.m",
                format!("must be in 1..=255, got {}", self.m),
            ));
        }
        if self.ef_construction == 0 {
            return Err(GraphError::arg(
                "HnswParams.ef_construction",
                "must be at least 1",
            ));
        }
        if self.ef_search == 0 {
            return Err(GraphError::arg(
                "HnswParams.ef_search",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// How [`knn`] and [`mutual_knn_edges`] find neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KnnBackend {
    /// Exact below `approximate_from` rows, NN-descent with default [`NnDescentParams`] at
    /// or above it.
    Auto {
        /// Row count from which NN-descent is used (also read from a saved configuration's
        /// `hnsw_threshold`, its name when HNSW was the approximate backend).
        #[serde(alias = "hnsw_threshold")]
        approximate_from: usize,
    },
    /// Exact search by blocked matrix multiplication.
    Exact,
    /// Approximate search with an HNSW index.
    Hnsw(HnswParams),
    /// Approximate search in an inverted-file index ([`crate::IvfIndex`]): k-means lists,
    /// each list's rows searched exactly among the rows of its nearest lists.
    Ivf(IvfParams),
    /// Approximate lists by NN-descent ([`crate::NnDescentParams`]): random lists refined by
    /// comparing each row's neighbours with each other; cost about linear in the rows,
    /// deterministic for a seed.
    NnDescent(NnDescentParams),
}

impl Default for KnnBackend {
    /// `Auto { approximate_from: DEFAULT_APPROXIMATE_FROM }`.
    fn default() -> Self {
        KnnBackend::Auto {
            approximate_from: DEFAULT_APPROXIMATE_FROM,
        }
    }
}

impl KnnBackend {
    /// The concrete backend used for `rows` rows: [`KnnBackend::Exact`] or
    /// [`KnnBackend::NnDescent`] for `Auto`, any other backend as it is; never `Auto`.
    pub fn resolve(&self, rows: usize) -> KnnBackend {
        match *self {
            KnnBackend::Auto { approximate_from } if rows >= approximate_from => {
                KnnBackend::NnDescent(NnDescentParams::default())
            }
            KnnBackend::Auto { .. } => KnnBackend::Exact,
            other => other,
        }
    }
}

/// For each row, its `k` most cosine-similar *other* rows as `(row index, cosine)`.
///
/// Lists are sorted by similarity descending, ties by lower index. The row itself is never
/// in its own list, but an identical row is. `k` larger than `rows − 1` is clamped to
/// `rows − 1`; an empty matrix gives an empty result. A zero row has cosine 0 with every
/// row. The HNSW backend is approximate and nondeterministic (`hnsw_rs` draws node levels
/// from an unseeded generator): a list may miss a true neighbour, or, rarely, be shorter
/// than `k`; its similarities are recomputed exactly.
///
/// # Errors
/// [`GraphError::InvalidArgument`] when `k == 0`, the matrix has more than `u32::MAX`
/// rows, or the HNSW parameters are invalid; [`GraphError::NonFinite`] naming the first row
/// with a NaN or infinity; [`GraphError::Hnsw`] when the HNSW backend fails.
pub fn knn(
    emb: &Embeddings,
    k: usize,
    backend: &KnnBackend,
) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    let n = emb.rows();
    if k == 0 {
        return Err(GraphError::arg("k", "must be at least 1"));
    }
    if n > u32::MAX as usize {
        return Err(GraphError::arg(
            "emb",
            format!("{n} rows do not fit u32 node ids"),
        ));
    }
    let backend = backend.resolve(n);
    match &backend {
        KnnBackend::Hnsw(p) => p.validate()?,
        KnnBackend::Ivf(p) => p.validate()?,
        KnnBackend::NnDescent(p) => p.validate()?,
        _ => {}
    }
    let x = normalized_rows(emb, "embeddings")?;
    let k = k.min(n.saturating_sub(1));
    if k == 0 {
        return Ok(vec![Vec::new(); n]);
    }
    let d = emb.dim();
    match backend {
        KnnBackend::Hnsw(p) => hnsw_knn(&x, n, d, k, &p),
        KnnBackend::Ivf(p) => Ok(ivf_knn(&x, n, d, k, &p)),
        KnnBackend::NnDescent(p) => Ok(nndescent_from_ivf(&x, n, d, k, &p)),
        _ => Ok(exact_knn(&x, n, d, k)),
    }
}

/// Mutual k-NN edges: `(i, j)` with `i < j` iff `j` is among `i`'s top `k` and `i` among
/// `j`'s (by [`knn`], so the same clamping, tie and error rules apply).
///
/// Each edge is stored once with `a < b`, weight = cosine similarity, kind
/// [`EdgeKind::Similarity`]; edges are sorted by `(a, b)`. LP-RAG uses `k = `[`DEFAULT_K`].
pub fn mutual_knn_edges(
    emb: &Embeddings,
    k: usize,
    backend: &KnnBackend,
) -> Result<Vec<LinkEdge>, GraphError> {
    let lists = knn(emb, k, backend)?;
    Ok(mutual_edges(&lists))
}

/// Exact k-NN lists after rows are removed and appended, from the lists before: the
/// incremental path of an index update.
///
/// `lists` are the old rows' lists (as [`knn`] returns them, exact or HNSW); `keep[i]` says
/// whether old row `i` stays; `emb` holds the kept rows in their old order, then the new
/// rows. New rows are scanned exactly against every row, and each scan also offers the new
/// row to the kept rows' lists (cosine is symmetric); a kept row that lost a neighbour to a
/// removal is rescanned. So the cost is one scan of `emb` per new row and per kept row
/// that lost a neighbour, not a rebuild; the result equals `knn(emb, k, Exact)` when the
/// old lists were exact (same tie rule; similarities may differ in the last bits, which
/// the blocked GEMM of a full build rounds differently).
///
/// # Errors
/// [`GraphError::InvalidArgument`] when `k == 0`, `keep` and `lists` differ in length, or
/// `emb` has fewer rows than `keep` keeps; [`GraphError::NonFinite`] for a NaN row.
pub fn update_knn(
    lists: &[Vec<(u32, f32)>],
    keep: &[bool],
    emb: &Embeddings,
    k: usize,
) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    if k == 0 {
        return Err(GraphError::arg("k", "must be at least 1"));
    }
    if keep.len() != lists.len() {
        return Err(GraphError::arg(
            "keep",
            format!("{} flags for {} lists", keep.len(), lists.len()),
        ));
    }
    let (n, d) = (emb.rows(), emb.dim());
    if n > u32::MAX as usize {
        return Err(GraphError::arg(
            "emb",
            format!("{n} rows do not fit u32 node ids"),
        ));
    }
    let (new_id, kept) = kept_ids(keep);
    if kept > n {
        return Err(GraphError::arg(
            "emb",
            format!("{n} rows, but {kept} old rows are kept"),
        ));
    }
    let x = normalized_rows(emb, "embeddings")?;
    let k = k.min(n.saturating_sub(1));
    if k == 0 {
        return Ok(vec![Vec::new(); n]);
    }
    let (mut out, rescan) = remap_kept(lists, keep, &new_id, k, n);
    scan_new_rows(&x, (n, d), kept, k, &mut out);
    rescan_rows(&x, (n, d), k, rescan, &mut out);
    Ok(out)
}

/// Each old row's id after the removals (`u32::MAX` when removed) and the number kept.
fn kept_ids(keep: &[bool]) -> (Vec<u32>, usize) {
    let mut new_id = vec![u32::MAX; keep.len()];
    let mut kept = 0usize;
    for (i, &k) in keep.iter().enumerate() {
        if k {
            new_id[i] = kept as u32;
            kept += 1;
        }
    }
    (new_id, kept)
}

/// Kept rows: their lists with ids remapped (at most `k` entries; room for `n` lists),
/// and the new ids of the rows that lost an entry (to rescan).
fn remap_kept(
    lists: &[Vec<(u32, f32)>],
    keep: &[bool],
    new_id: &[u32],
    k: usize,
    n: usize,
) -> (Vec<Vec<(u32, f32)>>, Vec<usize>) {
    let mut out: Vec<Vec<(u32, f32)>> = Vec::with_capacity(n);
    let mut rescan: Vec<usize> = Vec::new();
    for (i, list) in lists.iter().enumerate().filter(|&(i, _)| keep[i]) {
        let mut l: Vec<(u32, f32)> = Vec::with_capacity(k);
        let mut lost = false;
        for &(j, s) in list {
            match new_id.get(j as usize) {
                Some(&id) if id != u32::MAX => l.push((id, s)),
                _ => lost = true,
            }
        }
        l.truncate(k);
        if lost {
            rescan.push(new_id[i] as usize);
        }
        out.push(l);
    }
    (out, rescan)
}

/// New rows (`kept..n` of the unit rows `x`, `n × d`): one exact scan each, whose scores
/// are offered to the `kept` rows' lists in `out` too; their lists are appended.
fn scan_new_rows(
    x: &[f32],
    (n, d): (usize, usize),
    kept: usize,
    k: usize,
    out: &mut Vec<Vec<(u32, f32)>>,
) {
    let row = |i: usize| &x[i * d..(i + 1) * d];
    // Per new row: its own list, and its offers to the kept rows' lists.
    type Scan = (Vec<(u32, f32)>, Vec<(u32, f32)>);
    let scans: Vec<Scan> = (kept..n)
        .into_par_iter()
        .map(|j| {
            let q = row(j);
            let mut top = TopK::new(k);
            let mut offers = Vec::new();
            for i in (0..n).filter(|&i| i != j) {
                let s = dot(q, row(i));
                top.offer(i as u32, s);
                if let Some(l) = out.get(i).filter(|_| i < kept) {
                    let admits = l.len() < k || {
                        let (li, ls) = l[l.len() - 1];
                        ranks_before(s, j as u32, ls, li)
                    };
                    if admits {
                        offers.push((i as u32, s));
                    }
                }
            }
            (top.items, offers)
        })
        .collect();
    for (j, (_, offers)) in (kept..n).zip(&scans) {
        for &(i, s) in offers {
            let mut top = TopK::new(k);
            for &(id, t) in &out[i as usize] {
                top.offer(id, t);
            }
            top.offer(j as u32, s);
            out[i as usize] = top.items;
        }
    }
    out.extend(scans.into_iter().map(|(list, _)| list));
}

/// Kept rows that lost a neighbour: rescan against every row of the unit rows `x`
/// (`n × d`), new ones included.
fn rescan_rows(
    x: &[f32],
    (n, d): (usize, usize),
    k: usize,
    rescan: Vec<usize>,
    out: &mut [Vec<(u32, f32)>],
) {
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let fresh: Vec<(usize, Vec<(u32, f32)>)> = rescan
        .into_par_iter()
        .map(|i| {
            let q = row(i);
            let mut top = TopK::new(k);
            for j in (0..n).filter(|&j| j != i) {
                top.offer(j as u32, dot(q, row(j)));
            }
            (i, top.items)
        })
        .collect();
    for (i, list) in fresh {
        out[i] = list;
    }
}

/// Mutual k-NN edges from k-NN lists (as [`knn`] or [`update_knn`] return them), the rule
/// of [`mutual_knn_edges`].
///
/// # Errors
/// [`GraphError::InvalidArgument`] when a list names a row out of range.
pub fn mutual_edges_of(lists: &[Vec<(u32, f32)>]) -> Result<Vec<LinkEdge>, GraphError> {
    if let Some((i, j)) = lists.iter().enumerate().find_map(|(i, l)| {
        l.iter()
            .find(|&&(j, _)| j as usize >= lists.len() || j as usize == i)
            .map(|&(j, _)| (i, j))
    }) {
        return Err(GraphError::arg(
            "lists",
            format!("row {i} lists row {j} (of {} rows)", lists.len()),
        ));
    }
    Ok(mutual_edges(lists))
}

/// Mutual edges from k-NN lists whose ids are all `< lists.len()`.
fn mutual_edges(lists: &[Vec<(u32, f32)>]) -> Vec<LinkEdge> {
    let sets: Vec<Vec<u32>> = lists
        .par_iter()
        .map(|l| {
            let mut ids: Vec<u32> = l.iter().map(|&(j, _)| j).collect();
            ids.sort_unstable();
            ids
        })
        .collect();
    let mut edges: Vec<LinkEdge> = lists
        .par_iter()
        .enumerate()
        .flat_map_iter(|(i, list)| {
            let sets = &sets;
            list.iter().filter_map(move |&(j, s)| {
                let ju = j as usize;
                let mutual =
                    ju > i && ju < sets.len() && sets[ju].binary_search(&(i as u32)).is_ok();
                mutual.then_some(LinkEdge {
                    a: i as u32,
                    b: j,
                    weight: s,
                    kind: EdgeKind::Similarity,
                })
            })
        })
        .collect();
    edges.sort_unstable_by_key(|e| (e.a, e.b));
    edges
}

/// NN-descent over unit rows `x` (`n × d`), `1 <= k < n`, started from an inverted file's
/// lists when `p.init_probes > 0` (`⌈√n⌉` lists, `init_probes` probes, `p.seed`).
fn nndescent_from_ivf(
    x: &[f32],
    n: usize,
    d: usize,
    k: usize,
    p: &NnDescentParams,
) -> Vec<Vec<(u32, f32)>> {
    let start = if p.init_probes > 0 {
        let ivf = IvfParams {
            probes: p.init_probes,
            seed: p.seed,
            ..IvfParams::default()
        };
        ivf_knn(x, n, d, p.list_len(n, k), &ivf)
    } else {
        Vec::new()
    };
    nndescent_knn(x, n, d, k, p, start)
}

/// Exact top-k over unit rows `x` (`n × d`), `1 <= k < n`.
pub(crate) fn exact_knn(x: &[f32], n: usize, d: usize, k: usize) -> Vec<Vec<(u32, f32)>> {
    // Enough blocks to keep every thread busy, but at most 256 rows so a tile stays small.
    let block = n.div_ceil(rayon::current_num_threads() * 4).clamp(32, 256);
    let tile_cols = COL_TILE.min(n);
    let mut out = vec![Vec::new(); n];
    out.par_chunks_mut(block)
        .enumerate()
        .for_each(|(bi, outs)| {
            let r0 = bi * block;
            let rb = outs.len();
            let a = &x[r0 * d..(r0 + rb) * d];
            let mut tile = vec![0f32; rb * tile_cols];
            let mut tops: Vec<TopK> = (0..rb).map(|_| TopK::new(k)).collect();
            let mut c0 = 0;
            while c0 < n {
                let cb = tile_cols.min(n - c0);
                let c = &mut tile[..rb * cb];
                gemm_abt(a, &x[c0 * d..(c0 + cb) * d], rb, cb, d, c);
                for (r, top) in tops.iter_mut().enumerate() {
                    top.scan(&c[r * cb..(r + 1) * cb], c0, r0 + r);
                }
                c0 += cb;
            }
            for (o, t) in outs.iter_mut().zip(tops) {
                *o = t.items;
            }
        });
    out
}

/// `1 − ⟨a, b⟩` for unit vectors, clamped at 0 (anndists' `DistDot` asserts on rounding
/// just below 0 for duplicates; this never panics).
#[derive(Debug, Clone, Copy, Default)]
struct UnitCosine;

impl Distance<f32> for UnitCosine {
    fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        (1.0 - dot(va, vb)).max(0.0)
    }
}

/// Approximate top-k over unit rows with `hnsw_rs`, `1 <= k < n`.
fn hnsw_knn(
    x: &[f32],
    n: usize,
    d: usize,
    k: usize,
    p: &HnswParams,
) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    let run = || {
        let mut index: Hnsw<f32, UnitCosine> = Hnsw::new(p.m, n, 16, p.ef_construction, UnitCosine);
        let data: Vec<(&[f32], usize)> =
            x.chunks_exact(d).enumerate().map(|(i, r)| (r, i)).collect();
        index.parallel_insert_slice(&data);
        index.set_searching_mode(true);
        let ef = p.ef_search.max(k + 1);
        (0..n)
            .into_par_iter()
            .map(|i| {
                let q = &x[i * d..(i + 1) * d];
                let mut cand: Vec<(u32, f32)> = index
                    .search(q, k + 1, ef)
                    .iter()
                    .filter(|nb| nb.d_id != i && nb.d_id < n)
                    .map(|nb| (nb.d_id as u32, dot(q, &x[nb.d_id * d..(nb.d_id + 1) * d])))
                    .collect();
                cand.sort_unstable_by(|&(j, s), &(i, t)| t.total_cmp(&s).then(j.cmp(&i)));
                cand.dedup_by_key(|c| c.0);
                cand.truncate(k);
                cand
            })
            .collect::<Vec<_>>()
    };
    std::panic::catch_unwind(AssertUnwindSafe(run))
        .map_err(|payload| GraphError::Hnsw(lprag_core::panic_message(&*payload)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_emb(n: usize, d: usize, seed: u64) -> Embeddings {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let data = (0..n * d).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        Embeddings::new(d, data).unwrap()
    }

    /// Reference: naive per-pair cosine, full sort.
    fn naive_knn(emb: &Embeddings, k: usize) -> Vec<Vec<(u32, f32)>> {
        let n = emb.rows();
        (0..n)
            .map(|i| {
                let mut all: Vec<(u32, f32)> = (0..n)
                    .filter(|&j| j != i)
                    .map(|j| (j as u32, lprag_core::cosine(emb.row(i), emb.row(j))))
                    .collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                all.truncate(k.min(n - 1));
                all
            })
            .collect()
    }

    fn hnsw_strong() -> KnnBackend {
        KnnBackend::Hnsw(HnswParams {
            m: 32,
            ef_construction: 400,
            ef_search: 300,
        })
    }

    #[test]
    fn hand_computed_tiny_case() {
        // 0 and 1 point almost the same way, 2 lies between 1 and 3, 3 is nearly orthogonal to 0.
        let emb = Embeddings::from_rows(
            2,
            &[
                vec![1.0, 0.0],
                vec![2.0, 0.1],
                vec![1.0, 1.0],
                vec![-0.1, 3.0],
            ],
        )
        .unwrap();
        // cos: 01 .999, 02 .707, 03 -.033, 12 .742, 13 .017, 23 .683
        let lists = knn(&emb, 1, &KnnBackend::Exact).unwrap();
        let ids: Vec<u32> = lists.iter().map(|l| l[0].0).collect();
        assert_eq!(ids, vec![1, 0, 1, 2]);
        let cos23 = lprag_core::cosine(emb.row(2), emb.row(3));
        assert!((lists[3][0].1 - cos23).abs() < 1e-6);

        // k = 1: 0↔1 mutual; 2→1 but 1→0; 3→2 but 2→1.
        let edges = mutual_knn_edges(&emb, 1, &KnnBackend::Exact).unwrap();
        assert_eq!(edges.len(), 1);
        assert_eq!((edges[0].a, edges[0].b), (0, 1));
        assert_eq!(edges[0].kind, EdgeKind::Similarity);
        let cos01 = lprag_core::cosine(emb.row(0), emb.row(1));
        assert!((edges[0].weight - cos01).abs() < 1e-6);

        // k = 2: lists 0:{1,2} 1:{0,2} 2:{1,0} 3:{2,1} → edges 01, 02, 12.
        let edges = mutual_knn_edges(&emb, 2, &KnnBackend::Exact).unwrap();
        let pairs: Vec<(u32, u32)> = edges.iter().map(|e| (e.a, e.b)).collect();
        assert_eq!(pairs, vec![(0, 1), (0, 2), (1, 2)]);
    }

    #[test]
    fn exact_matches_naive_reference() {
        for seed in 0..5 {
            let emb = random_emb(150 + 37 * seed as usize, 24, seed);
            let got = knn(&emb, 7, &KnnBackend::Exact).unwrap();
            let want = naive_knn(&emb, 7);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let gi: Vec<u32> = g.iter().map(|x| x.0).collect();
                let wi: Vec<u32> = w.iter().map(|x| x.0).collect();
                assert_eq!(gi, wi, "seed {seed} row {i}");
                for (a, b) in g.iter().zip(w) {
                    assert!((a.1 - b.1).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn unit_rows_are_borrowed_and_give_the_lists_of_their_scaled_copies() {
        let mut unit = random_emb(300, 16, 4);
        unit.normalize();
        assert!(matches!(
            normalized_rows(&unit, "e").unwrap(),
            std::borrow::Cow::Borrowed(_)
        ));
        // The same directions at other lengths take the copying path.
        let scaled = Embeddings::from_rows(
            16,
            &unit
                .iter()
                .enumerate()
                .map(|(i, r)| r.iter().map(|v| v * (1.5 + i as f32)).collect())
                .collect::<Vec<Vec<f32>>>(),
        )
        .unwrap();
        assert!(matches!(
            normalized_rows(&scaled, "e").unwrap(),
            std::borrow::Cow::Owned(_)
        ));
        let a = knn(&unit, 5, &KnnBackend::Exact).unwrap();
        let b = knn(&scaled, 5, &KnnBackend::Exact).unwrap();
        for (x, y) in a.iter().zip(&b) {
            let (xi, yi): (Vec<u32>, Vec<u32>) = (
                x.iter().map(|p| p.0).collect(),
                y.iter().map(|p| p.0).collect(),
            );
            assert_eq!(xi, yi);
            assert!(x.iter().zip(y).all(|(p, q)| (p.1 - q.1).abs() < 1e-5));
        }
    }

    #[test]
    fn exact_spans_several_tiles_and_blocks() {
        // More rows than one column tile and one row block.
        let emb = random_emb(2300, 8, 11);
        let got = knn(&emb, 3, &KnnBackend::Exact).unwrap();
        let want = naive_knn(&emb, 3);
        let mismatches = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| {
                g.iter().map(|x| x.0).collect::<Vec<_>>()
                    != w.iter().map(|x| x.0).collect::<Vec<_>>()
            })
            .count();
        // Rounding differs between GEMM and the naive loop; allow a near-tie or two.
        assert!(mismatches <= 2, "{mismatches} rows differ");
        for (i, l) in got.iter().enumerate() {
            assert!(l.iter().all(|&(j, _)| j as usize != i));
            assert!(l.windows(2).all(|w| w[0].1 >= w[1].1));
        }
    }

    #[test]
    fn ties_break_by_lower_index_and_self_is_excluded() {
        // Rows 1..=4 are identical; row 0 is different.
        let emb = Embeddings::from_rows(
            2,
            &[
                vec![0.0, 1.0],
                vec![1.0, 0.0],
                vec![1.0, 0.0],
                vec![1.0, 0.0],
                vec![1.0, 0.0],
            ],
        )
        .unwrap();
        let lists = knn(&emb, 2, &KnnBackend::Exact).unwrap();
        let ids = |i: usize| lists[i].iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(ids(1), vec![2, 3]);
        assert_eq!(ids(3), vec![1, 2]);
        assert_eq!(ids(4), vec![1, 2]);
        assert_eq!(ids(0), vec![1, 2]);
    }

    #[test]
    fn k_is_clamped_and_empty_input_is_fine() {
        let emb = random_emb(4, 3, 1);
        let lists = knn(&emb, 10, &KnnBackend::Exact).unwrap();
        assert!(lists.iter().all(|l| l.len() == 3));
        let one = random_emb(1, 3, 1);
        assert_eq!(knn(&one, 5, &KnnBackend::Exact).unwrap(), vec![vec![]]);
        let empty = Embeddings::empty(3);
        assert!(knn(&empty, 5, &KnnBackend::Exact).unwrap().is_empty());
        assert!(mutual_knn_edges(&empty, 5, &hnsw_strong())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_input_gives_typed_errors() {
        let emb = random_emb(5, 3, 1);
        assert!(matches!(
            knn(&emb, 0, &KnnBackend::Exact),
            Err(GraphError::InvalidArgument { name: "k", .. })
        ));
        let mut data = emb.as_slice().to_vec();
        data[3 * 3 + 1] = f32::NAN;
        let bad = Embeddings::new(3, data).unwrap();
        let err = knn(&bad, 2, &KnnBackend::Exact).unwrap_err();
        assert!(matches!(err, GraphError::NonFinite { row: 3, .. }), "{err}");
        assert!(err.to_string().contains("row 3"));
        let bad_hnsw = KnnBackend::Hnsw(HnswParams {
            m: 300,
            ..HnswParams::default()
        });
        assert!(matches!(
            knn(&emb, 2, &bad_hnsw),
            Err(GraphError::InvalidArgument {
                name: "HnswParams.m",
                ..
            })
        ));
    }

    #[test]
    fn zero_rows_and_huge_values_are_handled() {
        let emb = Embeddings::from_rows(
            2,
            &[
                vec![0.0, 0.0],
                vec![3e38, 3e38],
                vec![1.0, 1.0],
                vec![-1.0, 0.0],
            ],
        )
        .unwrap();
        let lists = knn(&emb, 3, &KnnBackend::Exact).unwrap();
        // Rows 1 and 2 point the same way despite the overflow-prone magnitude.
        assert_eq!(lists[1][0].0, 2);
        assert!((lists[1][0].1 - 1.0).abs() < 1e-6);
        // The zero row has cosine 0 with everyone.
        assert!(lists[0].iter().all(|&(_, s)| s == 0.0));
    }

    #[test]
    fn exact_and_hnsw_agree_on_small_random_inputs() {
        for seed in 0..3 {
            let emb = random_emb(300, 32, 100 + seed);
            let exact = mutual_knn_edges(&emb, DEFAULT_K, &KnnBackend::Exact).unwrap();
            let approx = mutual_knn_edges(&emb, DEFAULT_K, &hnsw_strong()).unwrap();
            assert!(!exact.is_empty());
            // HNSW inserts in parallel, so its graph (and, rarely, one of its 10-NN lists on
            // random data full of near ties) differs from run to run: it must find nearly
            // every exact edge and no weight of its own.
            let weights: std::collections::HashMap<(u32, u32), f32> =
                exact.iter().map(|e| ((e.a, e.b), e.weight)).collect();
            let shared = approx
                .iter()
                .filter(|y| match weights.get(&(y.a, y.b)) {
                    Some(w) => {
                        assert!((w - y.weight).abs() < 1e-5, "seed {seed}: weight differs");
                        true
                    }
                    None => false,
                })
                .count();
            let recall = shared as f64 / exact.len() as f64;
            let precision = shared as f64 / approx.len().max(1) as f64;
            assert!(
                recall >= 0.99 && precision >= 0.99,
                "seed {seed}: recall {recall:.4}, precision {precision:.4} of {} exact edges",
                exact.len()
            );
        }
    }

    #[test]
    fn hnsw_handles_tiny_and_duplicate_inputs() {
        let emb =
            Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let lists = knn(&emb, 5, &hnsw_strong()).unwrap();
        assert_eq!(lists[0][0].0, 1);
        assert_eq!(lists[1][0].0, 0);
        assert!(lists
            .iter()
            .enumerate()
            .all(|(i, l)| l.iter().all(|x| x.0 as usize != i)));
    }

    #[test]
    fn mutual_edges_are_symmetric_property() {
        for seed in 0..10 {
            let emb = random_emb(60 + seed as usize * 13, 6, 1000 + seed);
            let k = 1 + (seed as usize % 6);
            let lists = knn(&emb, k, &KnnBackend::Exact).unwrap();
            let edges = mutual_knn_edges(&emb, k, &KnnBackend::Exact).unwrap();
            for e in &edges {
                assert!(e.a < e.b);
                assert!(lists[e.a as usize].iter().any(|x| x.0 == e.b));
                assert!(lists[e.b as usize].iter().any(|x| x.0 == e.a));
            }
            // And every mutual pair is an edge.
            let count = (0..lists.len())
                .flat_map(|i| lists[i].iter().map(move |x| (i as u32, x.0)))
                .filter(|&(i, j)| i < j && lists[j as usize].iter().any(|x| x.0 == i))
                .count();
            assert_eq!(count, edges.len());
            assert!(edges
                .windows(2)
                .all(|w| (w[0].a, w[0].b) < (w[1].a, w[1].b)));
        }
    }

    #[test]
    fn auto_resolves_by_threshold() {
        let auto = KnnBackend::Auto {
            approximate_from: 10,
        };
        assert_eq!(auto.resolve(9), KnnBackend::Exact);
        assert_eq!(
            auto.resolve(10),
            KnnBackend::NnDescent(NnDescentParams::default())
        );
        assert_eq!(
            KnnBackend::default(),
            KnnBackend::Auto {
                approximate_from: DEFAULT_APPROXIMATE_FROM
            }
        );
        // A configuration saved with the old field name still reads.
        let old: KnnBackend = serde_json::from_str(r#"{"Auto":{"hnsw_threshold":7}}"#).unwrap();
        assert_eq!(
            old,
            KnnBackend::Auto {
                approximate_from: 7
            }
        );
    }

    /// Ids of each list (similarities compared separately, to 1e-5).
    fn same_lists(got: &[Vec<(u32, f32)>], want: &[Vec<(u32, f32)>], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: row count");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ids = |l: &[(u32, f32)]| l.iter().map(|&(j, _)| j).collect::<Vec<_>>();
            assert_eq!(ids(g), ids(w), "{what}: row {i}");
            for (a, b) in g.iter().zip(w) {
                assert!((a.1 - b.1).abs() <= 1e-5, "{what}: row {i}: {a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn updated_lists_equal_a_fresh_exact_build() {
        let (n, d, k) = (160, 12, 5);
        let all = random_emb(n + 40, d, 11);
        let old = all.select(&(0..n).collect::<Vec<_>>());
        let lists = knn(&old, k, &KnnBackend::Exact).unwrap();
        // Remove every seventh row, append 40 new rows.
        let keep: Vec<bool> = (0..n).map(|i| i % 7 != 3).collect();
        let mut rows: Vec<usize> = (0..n).filter(|&i| keep[i]).collect();
        rows.extend(n..n + 40);
        let after = all.select(&rows);
        let got = update_knn(&lists, &keep, &after, k).unwrap();
        let want = knn(&after, k, &KnnBackend::Exact).unwrap();
        same_lists(&got, &want, "remove and add");
        let (ge, we) = (mutual_edges_of(&got).unwrap(), mutual_edges(&want));
        let ends = |e: &[LinkEdge]| e.iter().map(|e| (e.a, e.b)).collect::<Vec<_>>();
        assert!(ends(&ge) == ends(&we), "mutual edges differ");
        assert!(ge
            .iter()
            .zip(&we)
            .all(|(a, b)| (a.weight - b.weight).abs() <= 1e-5));
        // Only additions, only removals, and nothing at all.
        let got = update_knn(&lists, &vec![true; n], &all, k).unwrap();
        same_lists(&got, &knn(&all, k, &KnnBackend::Exact).unwrap(), "add only");
        let kept = all.select(&rows[..rows.len() - 40]);
        let got = update_knn(&lists, &keep, &kept, k).unwrap();
        same_lists(
            &got,
            &knn(&kept, k, &KnnBackend::Exact).unwrap(),
            "remove only",
        );
        let got = update_knn(&lists, &vec![true; n], &old, k).unwrap();
        same_lists(&got, &lists, "no change");
    }

    #[test]
    fn updates_from_tiny_graphs_and_bad_arguments() {
        // Two rows, then eight: lists that were shorter than k grow to k.
        let all = random_emb(8, 4, 5);
        let two = all.select(&[0, 1]);
        let lists = knn(&two, 3, &KnnBackend::Exact).unwrap();
        let got = update_knn(&lists, &[true, true], &all, 3).unwrap();
        same_lists(&got, &knn(&all, 3, &KnnBackend::Exact).unwrap(), "grow");
        // Everything removed but one row.
        let got = update_knn(&lists, &[false, true], &all.select(&[1]), 3).unwrap();
        assert_eq!(got, vec![Vec::<(u32, f32)>::new()]);
        assert!(update_knn(&lists, &[true], &all, 3).is_err());
        assert!(update_knn(&lists, &[true, true], &all, 0).is_err());
        assert!(update_knn(&lists, &[true, true], &all.select(&[0]), 3).is_err());
        assert!(mutual_edges_of(&[vec![(5, 0.5)]]).is_err());
        assert!(mutual_edges_of(&[vec![(0, 0.5)]]).is_err());
    }
}
