//! Partitioned nearest-neighbour search (an inverted-file index, IVF): rows are split into
//! lists by spherical k-means, and a search scans exactly only the rows of the `probes`
//! lists whose centroids are nearest.
//!
//! Built by [`IvfIndex::build`]: k-means on a seeded sample of the rows (centroids are
//! unit-norm means), then every row assigned to its nearest centroid by blocked GEMM.
//! [`IvfIndex::search`] answers one query; the k-NN graph backend [`crate::KnnBackend::Ivf`]
//! searches, for each list, the rows of the lists nearest to its centroid, one GEMM tile
//! at a time. Cost of a full k-NN pass: about `probes / lists` of the exact one, plus the
//! k-means; a row whose true neighbour sits in a list that was not probed misses it.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::kernels::{gemm_abt, unit_prefix, TopK, COL_TILE};
use crate::GraphError;
use lprag_core::{dot, Embeddings};

/// Rows of the k-means training sample per list.
const SAMPLE_PER_LIST: usize = 64;

/// Most k-means iterations [`IvfParams::validate`] accepts.
const MAX_ITERATIONS: usize = 1000;

/// Parameters of an [`IvfIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IvfParams {
    /// Number of lists (k-means centroids); 0 picks `⌈√rows⌉`. Clamped to the row count.
    pub lists: usize,
    /// Lists scanned per search (nearest centroids first); at least 1. More is slower and
    /// more accurate; `probes == lists` is exact.
    pub probes: usize,
    /// k-means iterations over the training sample (1..=1000).
    pub iterations: usize,
    /// Seed of the sample and the initial centroids.
    pub seed: u64,
}

impl Default for IvfParams {
    /// `⌈√rows⌉` lists, 16 probes, 10 iterations, seed 0.
    fn default() -> Self {
        Self {
            lists: 0,
            probes: 16,
            iterations: 10,
            seed: 0,
        }
    }
}

impl IvfParams {
    /// Check the parameters.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `probes` is 0 or `iterations` is outside
    /// 1..=1000.
    pub fn validate(&self) -> Result<(), GraphError> {
        if self.probes == 0 {
            return Err(GraphError::arg("IvfParams.probes", "must be at least 1"));
        }
        if !(1..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(GraphError::arg(
                "IvfParams.iterations",
                format!("must be in 1..={MAX_ITERATIONS}, got {}", self.iterations),
            ));
        }
        Ok(())
    }

    /// The number of lists used for `rows` rows.
    pub fn lists_for(&self, rows: usize) -> usize {
        let l = if self.lists == 0 {
            (rows as f64).sqrt().ceil() as usize
        } else {
            self.lists
        };
        l.clamp(1, rows.max(1))
    }
}

/// An inverted-file index over unit-normalised rows: centroids and each list's row ids.
///
/// It holds no copy of the rows; searches take the same matrix the index was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IvfIndex {
    dim: usize,
    rows: usize,
    /// `lists × dim`, unit rows (a list whose members are all zero rows has a zero centroid).
    centroids: Vec<f32>,
    /// Row ids per list, ascending.
    members: Vec<Vec<u32>>,
    probes: usize,
}

impl IvfIndex {
    /// Build the index over `emb` (rows are compared by cosine).
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] for invalid parameters or more than `u32::MAX` rows;
    /// [`GraphError::NonFinite`] naming the first row with a NaN or infinity.
    pub fn build(emb: &Embeddings, params: &IvfParams) -> Result<Self, GraphError> {
        Self::build_prefix(emb, emb.rows(), params)
    }

    /// Build the index over the first `rows` rows of `emb` only (LP-RAG's graph holds the
    /// chunks first, then the synthetic queries).
    ///
    /// # Errors
    /// As [`IvfIndex::build`], and [`GraphError::InvalidArgument`] when `rows` exceeds the
    /// matrix.
    pub fn build_prefix(
        emb: &Embeddings,
        rows: usize,
        params: &IvfParams,
    ) -> Result<Self, GraphError> {
        params.validate()?;
        let (n, d) = (rows, emb.dim());
        let x = unit_prefix(emb, n)?;
        Ok(build_unit(&x, n, d, params))
    }

    /// Number of lists.
    pub fn lists(&self) -> usize {
        self.members.len()
    }

    /// Lists scanned per search unless [`IvfIndex::search_probes`] says otherwise.
    pub fn probes(&self) -> usize {
        self.probes
    }

    /// Number of rows indexed.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row ids of every list (ascending within a list).
    pub fn members(&self) -> &[Vec<u32>] {
        &self.members
    }

    /// The `m` rows of `emb` most cosine-similar to `query` among the probed lists, best
    /// first (ties by lower id), as `(row, cosine)`; `keep(row)` filters rows. `emb` is the
    /// matrix the index was built from (rows past the indexed ones are never returned).
    /// Fewer than `m` rows come back when the probed lists hold fewer that `keep` admits.
    ///
    /// # Errors
    /// [`GraphError::DimensionMismatch`] when `emb` has fewer rows than the index or
    /// another width, or `query` another width.
    pub fn search(
        &self,
        emb: &Embeddings,
        query: &[f32],
        m: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Result<Vec<(u32, f32)>, GraphError> {
        self.search_probes(emb, query, m, self.probes, keep)
    }

    /// [`IvfIndex::search`] scanning `probes` lists.
    ///
    /// # Errors
    /// As [`IvfIndex::search`].
    pub fn search_probes(
        &self,
        emb: &Embeddings,
        query: &[f32],
        m: usize,
        probes: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Result<Vec<(u32, f32)>, GraphError> {
        if emb.rows() < self.rows || emb.dim() != self.dim {
            return Err(GraphError::DimensionMismatch {
                location: "IvfIndex::search (rows × dim of the matrix)".into(),
                expected: self.rows * self.dim,
                actual: emb.rows() * emb.dim(),
            });
        }
        if query.len() != self.dim {
            return Err(GraphError::DimensionMismatch {
                location: "IvfIndex::search (query)".into(),
                expected: self.dim,
                actual: query.len(),
            });
        }
        if m == 0 || self.rows == 0 {
            return Ok(Vec::new());
        }
        let qn = dot(query, query).sqrt();
        let q: Vec<f32> = if qn > 0.0 {
            query.iter().map(|v| v / qn).collect()
        } else {
            query.to_vec()
        };
        let mut top = TopK::new(m);
        for list in self.nearest_lists(&q, probes.max(1)) {
            for &i in &self.members[list] {
                let row = emb.row(i as usize);
                if !keep(i as usize) {
                    continue;
                }
                let norm = dot(row, row).sqrt();
                let s = if norm > 0.0 { dot(row, &q) / norm } else { 0.0 };
                top.offer(i, s);
            }
        }
        Ok(top.items)
    }

    /// The `p` lists whose centroids are most similar to the unit vector `q`.
    fn nearest_lists(&self, q: &[f32], p: usize) -> Vec<usize> {
        let mut scored: Vec<(f32, usize)> = self
            .centroids
            .chunks_exact(self.dim.max(1))
            .map(|c| dot(c, q))
            .enumerate()
            .map(|(i, s)| (s, i))
            .collect();
        let p = p.min(scored.len());
        let order = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if p < scored.len() {
            scored.select_nth_unstable_by(p.saturating_sub(1), order);
            scored.truncate(p);
        }
        scored.into_iter().map(|s| s.1).collect()
    }
}

/// Index over unit rows `x` (`n × d`); parameters already checked.
pub(crate) fn build_unit(x: &[f32], n: usize, d: usize, params: &IvfParams) -> IvfIndex {
    let lists = params.lists_for(n);
    if n == 0 {
        return IvfIndex {
            dim: d,
            rows: 0,
            centroids: Vec::new(),
            members: Vec::new(),
            probes: params.probes,
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let sample_n = (lists * SAMPLE_PER_LIST).min(n);
    let mut sample_ids: Vec<usize> = sample(&mut rng, n, sample_n).into_vec();
    sample_ids.sort_unstable();
    let sample_rows: Vec<f32> = sample_ids
        .iter()
        .flat_map(|&i| x[i * d..(i + 1) * d].iter().copied())
        .collect();
    // Initial centroids: distinct sample rows drawn with the same generator.
    let mut centroids: Vec<f32> = sample(&mut rng, sample_n, lists)
        .into_iter()
        .flat_map(|i| sample_rows[i * d..(i + 1) * d].iter().copied())
        .collect();
    for _ in 0..params.iterations {
        let (assign, score) = assign_rows(&sample_rows, sample_n, &centroids, lists, d);
        let mut sums = vec![0f64; lists * d];
        let mut counts = vec![0usize; lists];
        for (i, &c) in assign.iter().enumerate() {
            counts[c as usize] += 1;
            let row = &sample_rows[i * d..(i + 1) * d];
            for (s, &v) in sums[c as usize * d..(c as usize + 1) * d]
                .iter_mut()
                .zip(row)
            {
                *s += f64::from(v);
            }
        }
        // An empty list takes the sample row its centroid serves worst (not already taken).
        let mut worst: Vec<usize> = (0..sample_n).collect();
        worst.sort_unstable_by(|&a, &b| score[a].total_cmp(&score[b]).then(a.cmp(&b)));
        let mut spare = worst.into_iter();
        for c in 0..lists {
            let dst = &mut centroids[c * d..(c + 1) * d];
            if counts[c] == 0 {
                if let Some(i) = spare.next() {
                    dst.copy_from_slice(&sample_rows[i * d..(i + 1) * d]);
                }
                continue;
            }
            let src = &sums[c * d..(c + 1) * d];
            let norm = src.iter().map(|v| v * v).sum::<f64>().sqrt();
            for (o, &s) in dst.iter_mut().zip(src) {
                *o = if norm > 0.0 { (s / norm) as f32 } else { 0.0 };
            }
        }
    }
    let (assign, _) = assign_rows(x, n, &centroids, lists, d);
    let mut members = vec![Vec::new(); lists];
    for (i, &c) in assign.iter().enumerate() {
        members[c as usize].push(i as u32);
    }
    IvfIndex {
        dim: d,
        rows: n,
        centroids,
        members,
        probes: params.probes,
    }
}

/// Each row's nearest centroid (ties: lower list) and its similarity.
fn assign_rows(
    x: &[f32],
    n: usize,
    centroids: &[f32],
    lists: usize,
    d: usize,
) -> (Vec<u32>, Vec<f32>) {
    const BLOCK: usize = 256;
    let mut out = vec![(0u32, f32::NEG_INFINITY); n];
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(bi, outs)| {
            let r0 = bi * BLOCK;
            let rb = outs.len();
            let a = &x[r0 * d..(r0 + rb) * d];
            let cols = COL_TILE.min(lists);
            let mut tile = vec![0f32; rb * cols];
            let mut c0 = 0;
            while c0 < lists {
                let cb = cols.min(lists - c0);
                let t = &mut tile[..rb * cb];
                gemm_abt(a, &centroids[c0 * d..(c0 + cb) * d], rb, cb, d, t);
                for (r, o) in outs.iter_mut().enumerate() {
                    for (j, &s) in t[r * cb..(r + 1) * cb].iter().enumerate() {
                        if s > o.1 {
                            *o = ((c0 + j) as u32, s);
                        }
                    }
                }
                c0 += cb;
            }
        });
    out.into_iter().unzip()
}

/// A row and its k-NN list.
type RowList = (u32, Vec<(u32, f32)>);

/// Approximate top-k over unit rows through an IVF index, `1 <= k < n`: each list's rows
/// are scanned against the rows of the `probes` lists nearest to its centroid.
pub(crate) fn ivf_knn(
    x: &[f32],
    n: usize,
    d: usize,
    k: usize,
    params: &IvfParams,
) -> Vec<Vec<(u32, f32)>> {
    let index = build_unit(x, n, d, params);
    let lists = index.lists();
    let probes = params.probes.min(lists);
    // Each list's probed lists: itself first, then the nearest other centroids.
    let probed: Vec<Vec<usize>> = (0..lists)
        .into_par_iter()
        .map(|c| {
            let mut p = index.nearest_lists(&index.centroids[c * d..(c + 1) * d], probes);
            p.retain(|&l| l != c);
            p.insert(0, c);
            p.truncate(probes);
            p
        })
        .collect();
    // Largest lists first, so that rayon does not end on one long task.
    let mut order: Vec<usize> = (0..lists).collect();
    order.sort_unstable_by_key(|&c| std::cmp::Reverse(index.members[c].len()));
    let results: Vec<Vec<RowList>> = order
        .into_par_iter()
        .map(|c| {
            let rows = &index.members[c];
            if rows.is_empty() {
                return Vec::new();
            }
            let cand: Vec<u32> = probed[c]
                .iter()
                .flat_map(|&l| index.members[l].iter().copied())
                .collect();
            let gather = |ids: &[u32]| -> Vec<f32> {
                ids.iter()
                    .flat_map(|&i| x[i as usize * d..(i as usize + 1) * d].iter().copied())
                    .collect()
            };
            let mut tops: Vec<TopK> = rows.iter().map(|_| TopK::new(k)).collect();
            const BLOCK: usize = 256;
            for (rbi, rchunk) in rows.chunks(BLOCK).enumerate() {
                let a = gather(rchunk);
                let cols = COL_TILE.min(cand.len());
                let mut tile = vec![0f32; rchunk.len() * cols];
                for cchunk in cand.chunks(cols) {
                    let b = gather(cchunk);
                    let t = &mut tile[..rchunk.len() * cchunk.len()];
                    gemm_abt(&a, &b, rchunk.len(), cchunk.len(), d, t);
                    for (r, &row) in rchunk.iter().enumerate() {
                        let top = &mut tops[rbi * BLOCK + r];
                        let scores = &t[r * cchunk.len()..(r + 1) * cchunk.len()];
                        for (&j, &s) in cchunk.iter().zip(scores) {
                            if j != row && s >= top.floor {
                                top.offer(j, s);
                            }
                        }
                    }
                }
            }
            rows.iter()
                .copied()
                .zip(tops.into_iter().map(|t| t.items))
                .collect()
        })
        .collect();
    let mut out = vec![Vec::new(); n];
    for (row, list) in results.into_iter().flatten() {
        out[row as usize] = list;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn clustered(n: usize, d: usize, centres: usize, seed: u64) -> Embeddings {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let c: Vec<f32> = (0..centres * d)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let mut data = Vec::with_capacity(n * d);
        for _ in 0..n {
            let k = rng.random_range(0..centres);
            for j in 0..d {
                data.push(c[k * d + j] + rng.random_range(-0.6f32..0.6));
            }
        }
        Embeddings::new(d, data).unwrap()
    }

    #[test]
    fn every_row_is_in_exactly_one_list_and_the_build_is_reproducible() {
        let emb = clustered(3_000, 16, 20, 1);
        let p = IvfParams::default();
        let a = IvfIndex::build(&emb, &p).unwrap();
        assert_eq!(a.lists(), 55); // ⌈√3000⌉
        let mut all: Vec<u32> = a.members().iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..3_000).collect::<Vec<u32>>());
        assert_eq!(a, IvfIndex::build(&emb, &p).unwrap());
        let other = IvfIndex::build(&emb, &IvfParams { seed: 9, ..p }).unwrap();
        assert_ne!(a.members(), other.members());
    }

    #[test]
    fn search_with_every_list_probed_is_exact_search() {
        let emb = clustered(2_000, 12, 10, 2);
        let index = IvfIndex::build(&emb, &IvfParams::default()).unwrap();
        let inv: Vec<f32> = emb.iter().map(|r| 1.0 / dot(r, r).sqrt()).collect();
        for qi in [0usize, 17, 1_999] {
            let q = emb.row(qi).to_vec();
            let got = index
                .search_probes(&emb, &q, 10, index.lists(), &|_| true)
                .unwrap();
            let want = crate::kernels::nearest_by_cosine_where(&emb, &inv, &q, 10, &|_| true);
            let ids = |v: &[(u32, f32)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(ids(&got), ids(&want));
            let keep_odd = index
                .search_probes(&emb, &q, 5, index.lists(), &|i| i % 2 == 1)
                .unwrap();
            assert!(keep_odd.iter().all(|&(i, _)| i % 2 == 1));
        }
    }

    #[test]
    fn knn_lists_recall_most_exact_neighbours_and_exact_when_all_lists_are_probed() {
        let emb = clustered(4_000, 24, 40, 3);
        let x = crate::kernels::normalized_rows(&emb, "e").unwrap();
        // The exact backend's lists of the same unit rows.
        let exact = crate::knn(&emb, 5, &crate::KnnBackend::Exact).unwrap();
        let p = IvfParams::default();
        let approx = ivf_knn(&x, 4_000, 24, 5, &p);
        let hits: usize = exact
            .iter()
            .zip(&approx)
            .map(|(e, a)| e.iter().filter(|x| a.iter().any(|y| y.0 == x.0)).count())
            .sum();
        let recall = hits as f64 / (4_000 * 5) as f64;
        assert!(recall > 0.9, "recall {recall}");
        assert!(approx
            .iter()
            .enumerate()
            .all(|(i, l)| l.len() == 5 && l.iter().all(|&(j, _)| j as usize != i)));
        let all = IvfParams {
            probes: usize::MAX,
            ..p
        };
        let full = ivf_knn(&x, 4_000, 24, 5, &all);
        for (e, f) in exact.iter().zip(&full) {
            assert_eq!(
                e.iter().map(|x| x.0).collect::<Vec<_>>(),
                f.iter().map(|x| x.0).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn bad_parameters_and_shapes_are_typed_errors() {
        let emb = clustered(50, 4, 2, 4);
        for p in [
            IvfParams {
                probes: 0,
                ..IvfParams::default()
            },
            IvfParams {
                iterations: 0,
                ..IvfParams::default()
            },
        ] {
            assert!(matches!(
                IvfIndex::build(&emb, &p),
                Err(GraphError::InvalidArgument { .. })
            ));
        }
        let index = IvfIndex::build(&emb, &IvfParams::default()).unwrap();
        assert!(matches!(
            index.search(&emb, &[1.0, 0.0], 3, &|_| true),
            Err(GraphError::DimensionMismatch { .. })
        ));
        let other = clustered(49, 4, 2, 4);
        assert!(index.search(&other, &[1.0; 4], 3, &|_| true).is_err());
        let mut bad = emb.as_slice().to_vec();
        bad[4 * 7] = f32::NAN;
        let bad = Embeddings::new(4, bad).unwrap();
        assert!(matches!(
            IvfIndex::build(&bad, &IvfParams::default()),
            Err(GraphError::NonFinite { row: 7, .. })
        ));
    }
}
