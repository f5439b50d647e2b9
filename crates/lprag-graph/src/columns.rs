//! Exact nearest rows by cosine, read column by column: [`ColumnIndex`].
//!
//! The rows are stored unit-normalised, quantised to 16 bits and transposed in blocks of
//! [`BLOCK`] rows, so a query reads only the columns where it is non-zero (a hashing
//! encoder's query touches about 5 % of them) at half the bytes of an `f32` row scan, on
//! every core. Quantised scores are within a proven bound `ε` of the exact ones, so every
//! row whose quantised score is within `2ε` of the `m`-th best is scored again exactly
//! the way [`crate::nearest_by_cosine_where`] scores it: the answer is that function's,
//! to the bit, ties included.

use rayon::prelude::*;

use crate::kernels::{best_first, nearest_by_cosine_where};
use crate::GraphError;
use lprag_core::{dot, Embeddings};

/// Rows per block: a block's scores (16 KiB) stay in the L1 cache while its columns stream.
pub const BLOCK: usize = 4096;

/// Rows per transposition tile while building (64 rows of 1,024 floats stay in L2).
const TILE: usize = 64;

/// Quantisation scale: a unit-norm coordinate `x` is stored as `round(x · SCALE)`.
const SCALE: f32 = 32767.0;

/// An exact cosine search over the first `n` rows of an [`Embeddings`] matrix that reads
/// the matrix column-wise (see the module docs). Memory: `2 · n · dim` bytes, half the rows'.
///
/// ```
/// use lprag_core::Embeddings;
/// use lprag_graph::{inverse_norms, nearest_by_cosine, ColumnIndex};
///
/// let rows = Embeddings::from_rows(3, &[
///     vec![1.0, 0.0, 0.0], vec![0.0, 2.0, 0.0], vec![1.0, 1.0, 0.0], vec![0.0, 0.0, 5.0],
/// ])?;
/// let inv = inverse_norms(&rows, rows.rows());
/// let index = ColumnIndex::build(&rows, &inv)?;
/// let query = [0.9, 0.0, 0.1];
/// assert_eq!(
///     index.nearest_where(&rows, &inv, &query, 2, &|_| true),
///     nearest_by_cosine(&rows, &inv, &query, 2),
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ColumnIndex {
    n: usize,
    dim: usize,
    /// Block `b` holds rows `b·BLOCK ..` column-major: `blocks[(b·dim + d)·BLOCK + j]` is
    /// coordinate `d` of row `b·BLOCK + j` (zero past the last row).
    blocks: Vec<i16>,
}

impl ColumnIndex {
    /// Index the first `inv_norms.len()` rows of `rows` (`inv_norms` from
    /// [`crate::inverse_norms`]; a zero row scores 0, as in the row scan).
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `inv_norms` is longer than `rows`;
    /// [`GraphError::NonFinite`] for a row with a NaN or infinite value.
    pub fn build(rows: &Embeddings, inv_norms: &[f32]) -> Result<Self, GraphError> {
        let n = inv_norms.len();
        let dim = rows.dim();
        if n > rows.rows() {
            return Err(GraphError::arg(
                "inv_norms",
                format!("{n} norms for {} rows", rows.rows()),
            ));
        }
        if let Some(row) = (0..n).find(|&i| rows.row(i).iter().any(|v| !v.is_finite())) {
            return Err(GraphError::NonFinite {
                matrix: "chunk embeddings",
                row,
            });
        }
        let nblocks = n.div_ceil(BLOCK);
        let mut blocks = vec![0i16; nblocks * dim * BLOCK];
        if dim > 0 {
            blocks
                .par_chunks_mut(dim * BLOCK)
                .enumerate()
                .for_each(|(b, block)| {
                    let lo = b * BLOCK;
                    let hi = (lo + BLOCK).min(n);
                    for t in (lo..hi).step_by(TILE) {
                        let te = (t + TILE).min(hi);
                        for d in 0..dim {
                            let out = &mut block[d * BLOCK + (t - lo)..d * BLOCK + (te - lo)];
                            for (o, i) in out.iter_mut().zip(t..te) {
                                *o = quantise(rows.row(i)[d] * inv_norms[i]);
                            }
                        }
                    }
                });
        }
        Ok(Self { n, dim, blocks })
    }

    /// Rows indexed.
    pub fn rows(&self) -> usize {
        self.n
    }

    /// Width of the indexed rows.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bytes held by the quantised columns.
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<i16>()
    }

    /// The `m` rows `keep` admits that are most cosine-similar to `query`, best first, as
    /// `(row, cosine × ‖query‖)`: exactly [`crate::nearest_by_cosine_where`]`(rows,
    /// inv_norms, query, m, keep)`, which it falls back to for a query of the wrong width
    /// or with a non-finite value. `rows` and `inv_norms` must be the ones the index was
    /// built from.
    pub fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        let n = self.n.min(inv_norms.len()).min(rows.rows());
        if query.len() != self.dim
            || n != self.n
            || self.dim == 0
            || query.iter().any(|v| !v.is_finite())
        {
            return nearest_by_cosine_where(rows, inv_norms, query, m, keep);
        }
        if m == 0 || n == 0 {
            return Vec::new();
        }
        // The query's non-zero coordinates, pre-divided by the quantisation scale.
        let sparse: Vec<(usize, f32)> = query
            .iter()
            .enumerate()
            .filter(|&(_, &q)| q != 0.0)
            .map(|(d, &q)| (d, q / SCALE))
            .collect();
        let l1: f32 = query.iter().map(|q| q.abs()).sum();
        let l2 = dot(query, query).sqrt();
        // |quantised score − row-scan score| ≤ eps: rounding to 1/SCALE steps moves a score
        // by at most ‖q‖₁ / (2·SCALE); both sums round in f32, each within
        // (terms + 2)·2⁻²⁴·‖q‖₂ of the real value for unit rows (counted at 2⁻²³ here).
        let terms = (sparse.len() + self.dim + 4) as f32;
        let eps = 1.01 * (l1 * (0.5 / SCALE) + terms * f32::EPSILON * l2) + f32::MIN_POSITIVE;

        let approx = self.quantised_scores(n, &sparse, keep);
        let threshold = rescore_threshold(&approx, m, eps);
        let scored: Vec<(u32, f32)> = approx
            .par_iter()
            .enumerate()
            .filter(|&(_, &a)| a > f32::NEG_INFINITY && a >= threshold)
            .map(|(i, _)| (i as u32, dot(rows.row(i), query) * inv_norms[i]))
            .collect();
        best_first(scored, m)
    }

    /// Every row's quantised score against the query's non-zero coordinates `sparse`
    /// (pre-divided by the scale); `-∞` for the rows past `n` and those `keep` rejects.
    fn quantised_scores(
        &self,
        n: usize,
        sparse: &[(usize, f32)],
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<f32> {
        let mut approx = vec![0f32; self.blocks.len() / self.dim];
        let accumulate = accumulator();
        approx
            .par_chunks_mut(BLOCK)
            .zip(self.blocks.par_chunks(self.dim * BLOCK))
            .enumerate()
            .for_each(|(b, (acc, block))| {
                accumulate(acc, block, sparse);
                let lo = b * BLOCK;
                for (j, a) in acc.iter_mut().enumerate() {
                    if lo + j >= n || !keep(lo + j) {
                        *a = f32::NEG_INFINITY;
                    }
                }
            });
        approx
    }
}

/// The quantised score from which rows are scored again exactly: the `m`-th best of
/// `approx` (each block's best `m`, then the best `m` of those) less `2·eps`, or `-∞` when
/// fewer than `m` rows are admitted.
fn rescore_threshold(approx: &[f32], m: usize, eps: f32) -> f32 {
    let best: Vec<f32> = approx
        .par_chunks(BLOCK)
        .flat_map_iter(|acc| top_values(acc, m))
        .collect();
    if best.len() >= m {
        top_values(&best, m)
            .last()
            .copied()
            .unwrap_or(f32::NEG_INFINITY)
            - 2.0 * eps
    } else {
        f32::NEG_INFINITY
    }
}

/// Adds `q · column` of each `(column, q)` of `sparse` to `acc` (one block's scores).
type Accumulate = fn(&mut [f32], &[i16], &[(usize, f32)]);

/// The widest accumulation this CPU runs. Every variant computes each score with the same
/// operations in the same order, so the scores do not depend on the CPU.
fn accumulator() -> Accumulate {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        return |acc, block, sparse| {
            // SAFETY: the CPU supports AVX2 (detected above); the function only reads and
            // writes through safe slices.
            unsafe { accumulate_avx2(acc, block, sparse) }
        };
    }
    accumulate
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn accumulate_avx2(acc: &mut [f32], block: &[i16], sparse: &[(usize, f32)]) {
    accumulate(acc, block, sparse)
}

/// Four columns per pass over `acc`: `acc[j] += ((q₀c₀ + q₁c₁) + q₂c₂) + q₃c₃`.
#[inline(always)]
fn accumulate(acc: &mut [f32], block: &[i16], sparse: &[(usize, f32)]) {
    let acc = &mut acc[..BLOCK];
    let col = |d: usize| &block[d * BLOCK..(d + 1) * BLOCK];
    let mut groups = sparse.chunks_exact(4);
    for g in &mut groups {
        let (c0, c1, c2, c3) = (col(g[0].0), col(g[1].0), col(g[2].0), col(g[3].0));
        let (q0, q1, q2, q3) = (g[0].1, g[1].1, g[2].1, g[3].1);
        for ((((a, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(c0).zip(c1).zip(c2).zip(c3) {
            *a += q0 * f32::from(x0) + q1 * f32::from(x1) + q2 * f32::from(x2) + q3 * f32::from(x3);
        }
    }
    for &(d, q) in groups.remainder() {
        for (a, &x) in acc.iter_mut().zip(col(d)) {
            *a += q * f32::from(x);
        }
    }
}

fn quantise(x: f32) -> i16 {
    (x.clamp(-1.0, 1.0) * SCALE).round() as i16
}

/// The (up to) `m` largest values of `values` above `-∞`, sorted descending.
fn top_values(values: &[f32], m: usize) -> Vec<f32> {
    let mut v: Vec<f32> = values
        .iter()
        .copied()
        .filter(|a| *a > f32::NEG_INFINITY)
        .collect();
    let desc = |a: &f32, b: &f32| b.total_cmp(a);
    if m < v.len() {
        v.select_nth_unstable_by(m - 1, desc);
        v.truncate(m);
    }
    v.sort_unstable_by(desc);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{inverse_norms, nearest_by_cosine_where};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Rows with few non-zero coordinates (like hashing features), some duplicated (exact
    /// ties), one zero row; queries sparse and dense.
    fn corpus(n: usize, dim: usize, seed: u64) -> (Embeddings, Vec<Vec<f32>>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut data = vec![0f32; n * dim];
        for i in 0..n {
            if i == 3 {
                continue;
            }
            if i % 97 == 5 {
                let (a, b) = data.split_at_mut(i * dim);
                b[..dim].copy_from_slice(&a[(i - 5) * dim..(i - 4) * dim]);
                continue;
            }
            for _ in 0..dim / 4 {
                data[i * dim + rng.random_range(0..dim)] += rng.random_range(-1.0..1.0f32);
            }
            // Unnormalised rows: the index normalises them.
            let s = rng.random_range(0.1..10.0f32);
            data[i * dim..(i + 1) * dim]
                .iter_mut()
                .for_each(|v| *v *= s);
        }
        let rows = Embeddings::new(dim, data).unwrap();
        let mut queries = Vec::new();
        for k in 0..12 {
            let mut q = vec![0f32; dim];
            let nz = if k % 3 == 0 { dim } else { 1 + k };
            for _ in 0..nz {
                q[rng.random_range(0..dim)] = rng.random_range(-2.0..2.0f32);
            }
            queries.push(q);
        }
        // A query equal to a row: many near-ties at the top.
        queries.push(rows.row(10).to_vec());
        (rows, queries)
    }

    #[test]
    fn equals_the_row_scan_to_the_bit() {
        // More than one block, the last one partial.
        let (rows, queries) = corpus(2 * BLOCK + 321, 48, 7);
        let inv = inverse_norms(&rows, rows.rows() - 5);
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        assert_eq!(index.rows(), rows.rows() - 5);
        assert_eq!(index.memory_bytes(), 3 * BLOCK * 48 * 2);
        let odd = |i: usize| i % 2 == 1;
        let few = |i: usize| i.is_multiple_of(1000);
        for q in &queries {
            for m in [1, 3, 20, 257] {
                let keeps: [&(dyn Fn(usize) -> bool + Sync); 3] = [&|_| true, &odd, &few];
                for keep in keeps {
                    let want = nearest_by_cosine_where(&rows, &inv, q, m, keep);
                    let got = index.nearest_where(&rows, &inv, q, m, keep);
                    assert_eq!(got, want, "m = {m}");
                }
            }
        }
        // Every row asked for, and none.
        let q = &queries[1];
        let all = index.nearest_where(&rows, &inv, q, usize::MAX, &|_| true);
        assert_eq!(all.len(), inv.len());
        assert_eq!(
            all,
            nearest_by_cosine_where(&rows, &inv, q, usize::MAX, &|_| true)
        );
        assert!(index.nearest_where(&rows, &inv, q, 0, &|_| true).is_empty());
    }

    #[test]
    fn near_ties_closer_than_the_quantisation_step_keep_their_exact_order() {
        // Rows a hair apart (1e-4 of a unit vector, below the 1/32767 step): the quantised
        // scores alone would order them wrongly; the exact second pass must not.
        let (dim, n) = (32, BLOCK + 900);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let base: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0..1.0f32)).collect();
        let mut data = Vec::with_capacity(n * dim);
        for _ in 0..n {
            data.extend(base.iter().map(|b| b + rng.random_range(-1e-4..1e-4f32)));
        }
        let rows = Embeddings::new(dim, data).unwrap();
        let inv = inverse_norms(&rows, n);
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        for k in 0..5 {
            let q: Vec<f32> = base
                .iter()
                .map(|b| b + rng.random_range(-1e-3..1e-3f32) * k as f32)
                .collect();
            for m in [1, 10, 100] {
                assert_eq!(
                    index.nearest_where(&rows, &inv, &q, m, &|_| true),
                    nearest_by_cosine_where(&rows, &inv, &q, m, &|_| true),
                    "query {k}, m = {m}"
                );
            }
        }
    }

    #[test]
    fn a_query_it_cannot_read_goes_to_the_row_scan() {
        let (rows, queries) = corpus(300, 16, 3);
        let inv = inverse_norms(&rows, rows.rows());
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        let mut bad = queries[0].clone();
        bad[2] = f32::NAN;
        let ids = |v: Vec<(u32, f32)>| v.into_iter().map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(
            ids(index.nearest_where(&rows, &inv, &bad, 5, &|_| true)),
            ids(nearest_by_cosine_where(&rows, &inv, &bad, 5, &|_| true))
        );
        let short = &queries[1][..15];
        assert_eq!(
            index.nearest_where(&rows, &inv, short, 5, &|_| true),
            nearest_by_cosine_where(&rows, &inv, short, 5, &|_| true)
        );
        // An all-zero query scores every row 0: the lowest indices win.
        let zero = vec![0f32; 16];
        let got = index.nearest_where(&rows, &inv, &zero, 4, &|_| true);
        assert_eq!(
            got.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn refuses_non_finite_rows_and_too_many_norms() {
        let mut rows = Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let inv = inverse_norms(&rows, 2);
        assert!(matches!(
            ColumnIndex::build(&rows, &[1.0, 1.0, 1.0]),
            Err(GraphError::InvalidArgument { .. })
        ));
        let mut data = rows.clone().into_vec();
        data[3] = f32::INFINITY;
        rows = Embeddings::new(2, data).unwrap();
        assert!(matches!(
            ColumnIndex::build(&rows, &inv),
            Err(GraphError::NonFinite { row: 1, .. })
        ));
    }
}
