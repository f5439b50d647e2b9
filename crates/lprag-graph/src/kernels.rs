//! The numeric kernels the searches share: inverse norms and exact nearest rows by cosine
//! for one query (the candidate stage of LP-RAG queries), unit-normalised rows, the
//! running top-k with its tie rule, and the blocked GEMM tile of the k-NN backends.
//!
//! The exact, IVF and NN-descent k-NN backends, [`crate::ColumnIndex`] and the candidate
//! search take these from here, not from each other: ivf, nndescent and columns import
//! only this module, and knn (which dispatches to the backends) imports them one way.

use lprag_core::{dot, Embeddings};
use rayon::prelude::*;

use crate::GraphError;

/// `1/‖row‖` for the first `n` rows of `rows` (0 for a zero row, so it scores 0).
pub fn inverse_norms(rows: &Embeddings, n: usize) -> Vec<f32> {
    rows.iter()
        .take(n)
        .map(|r| {
            let norm = dot(r, r).sqrt();
            if norm > 0.0 {
                1.0 / norm
            } else {
                0.0
            }
        })
        .collect()
}

/// The `m` rows among the first `inv_norms.len()` of `rows` most cosine-similar to `query`,
/// best first, as `(row, cosine × ‖query‖)` (the query's norm does not change the order).
/// Ties go to the lower row index. `m` larger than the row count returns every row.
pub fn nearest_by_cosine(
    rows: &Embeddings,
    inv_norms: &[f32],
    query: &[f32],
    m: usize,
) -> Vec<(u32, f32)> {
    nearest_by_cosine_where(rows, inv_norms, query, m, &|_| true)
}

/// [`nearest_by_cosine`] among the rows `keep` admits (a metadata filter, say); rows it
/// rejects are not scored.
///
/// From [`PARALLEL_SCAN_FROM`] rows on, blocks of rows are scanned on rayon's threads, each
/// keeping its own best `m` (the answer is the serial scan's: the same rows, scores and
/// tie rule).
pub fn nearest_by_cosine_where(
    rows: &Embeddings,
    inv_norms: &[f32],
    query: &[f32],
    m: usize,
    keep: &(dyn Fn(usize) -> bool + Sync),
) -> Vec<(u32, f32)> {
    let n = inv_norms.len().min(rows.rows());
    if m == 0 || n == 0 {
        return Vec::new();
    }
    let d = rows.dim();
    let data = &rows.as_slice()[..n * d];
    let score = |i: usize, r: &[f32]| (i as u32, dot(r, query) * inv_norms[i]);
    if n < PARALLEL_SCAN_FROM || d == 0 {
        let scored = data
            .chunks_exact(d.max(1))
            .take(n)
            .enumerate()
            .filter(|&(i, _)| keep(i))
            .map(|(i, r)| score(i, r))
            .collect();
        return best_first(scored, m);
    }
    // Each block keeps its best m (all of its admitted rows when m is as large as a block),
    // then the blocks' lists are merged.
    let block = SCAN_BLOCK_ROWS;
    let lists: Vec<Vec<(u32, f32)>> = data
        .par_chunks(block * d)
        .enumerate()
        .map(|(b, chunk)| {
            let first = b * block;
            let scored: Vec<(u32, f32)> = chunk
                .chunks_exact(d)
                .enumerate()
                .map(|(j, r)| (first + j, r))
                .filter(|&(i, _)| keep(i))
                .map(|(i, r)| score(i, r))
                .collect();
            best_first(scored, m)
        })
        .collect();
    best_first(lists.concat(), m)
}

/// Rows from which [`nearest_by_cosine_where`] scans blocks of rows in parallel.
pub const PARALLEL_SCAN_FROM: usize = 16_384;

/// Rows per block of a parallel scan.
const SCAN_BLOCK_ROWS: usize = 4_096;

/// The best `m` of `scored`, best first: higher score, ties to the lower row (by
/// `total_cmp`, so the order is total).
pub(crate) fn best_first(mut scored: Vec<(u32, f32)>, m: usize) -> Vec<(u32, f32)> {
    let m = m.min(scored.len());
    if m == 0 {
        return Vec::new();
    }
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if m < scored.len() {
        scored.select_nth_unstable_by(m - 1, order);
        scored.truncate(m);
    }
    scored.sort_unstable_by(order);
    scored
}

/// `emb` with every row scaled to unit L2 norm (zero rows stay zero); the norm is
/// accumulated in f64 so huge finite values do not overflow.
///
/// A matrix whose rows all have norm 1 (within 1e-5, what an encoder's own f32
/// normalisation leaves) or 0 is borrowed, not copied: most encoders normalise their
/// output, and a copy took 0.4 GB at 100,000 1024-d chunks.
pub(crate) fn normalized_rows<'a>(
    emb: &'a Embeddings,
    matrix: &'static str,
) -> Result<std::borrow::Cow<'a, [f32]>, GraphError> {
    check_finite(emb, matrix)?;
    let unit = emb.as_slice().par_chunks(emb.dim().max(1)).all(|r| {
        let n = r
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt();
        n == 0.0 || (n - 1.0).abs() <= 1e-5
    });
    if unit {
        return Ok(std::borrow::Cow::Borrowed(emb.as_slice()));
    }
    let d = emb.dim();
    let mut out = emb.as_slice().to_vec();
    out.par_chunks_mut(d).for_each(|row| {
        let norm = row
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt();
        if norm > 0.0 {
            row.iter_mut()
                .for_each(|v| *v = (f64::from(*v) / norm) as f32);
        }
    });
    Ok(std::borrow::Cow::Owned(out))
}

/// The unit rows of the first `rows` rows of `emb` (see [`normalized_rows`]), for an index
/// over a prefix of a matrix (LP-RAG's graph holds the chunks first, then the synthetic
/// queries).
///
/// # Errors
/// [`GraphError::InvalidArgument`] when `rows` exceeds the matrix or `u32` node ids;
/// [`GraphError::NonFinite`] naming the first row with a NaN or infinity.
pub(crate) fn unit_prefix(
    emb: &Embeddings,
    rows: usize,
) -> Result<std::borrow::Cow<'_, [f32]>, GraphError> {
    if rows > emb.rows() {
        return Err(GraphError::arg(
            "rows",
            format!("{rows} rows asked of a matrix with {}", emb.rows()),
        ));
    }
    if rows > u32::MAX as usize {
        return Err(GraphError::arg(
            "emb",
            format!("{rows} rows do not fit u32 node ids"),
        ));
    }
    Ok(match normalized_rows(emb, "embeddings")? {
        std::borrow::Cow::Borrowed(x) => std::borrow::Cow::Borrowed(&x[..rows * emb.dim()]),
        std::borrow::Cow::Owned(mut x) => {
            x.truncate(rows * emb.dim());
            std::borrow::Cow::Owned(x)
        }
    })
}

/// [`GraphError::NonFinite`] for the first row with a NaN or infinity.
pub(crate) fn check_finite(emb: &Embeddings, matrix: &'static str) -> Result<(), GraphError> {
    match emb.iter().position(|r| r.iter().any(|v| !v.is_finite())) {
        Some(row) => Err(GraphError::NonFinite { matrix, row }),
        None => Ok(()),
    }
}

/// `true` when `(j, s)` ranks before `(i, t)`: higher score, ties by lower index.
#[inline]
pub(crate) fn ranks_before(s: f32, j: u32, t: f32, i: u32) -> bool {
    s > t || (s == t && j < i)
}

/// A row's running top k, sorted best first.
pub(crate) struct TopK {
    k: usize,
    pub(crate) items: Vec<(u32, f32)>,
    /// Score of the worst kept item once full (fast rejection), else −∞.
    pub(crate) floor: f32,
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        Self {
            k,
            items: Vec::with_capacity(k + 1),
            floor: f32::NEG_INFINITY,
        }
    }

    pub(crate) fn offer(&mut self, idx: u32, s: f32) {
        if self.items.len() == self.k {
            let (li, ls) = self.items[self.k - 1];
            if !ranks_before(s, idx, ls, li) {
                return;
            }
            self.items.pop();
        }
        let pos = self
            .items
            .partition_point(|&(j, t)| ranks_before(t, j, s, idx));
        self.items.insert(pos, (idx, s));
        if self.items.len() == self.k {
            self.floor = self.items[self.k - 1].1;
        }
    }

    /// Offer every score of a tile row whose columns start at `c0`, skipping `skip`.
    pub(crate) fn scan(&mut self, scores: &[f32], c0: usize, skip: usize) {
        for (j, &s) in scores.iter().enumerate() {
            if s < self.floor {
                continue;
            }
            let idx = c0 + j;
            if idx != skip {
                self.offer(idx as u32, s);
            }
        }
    }
}

/// Columns per GEMM tile.
pub(crate) const COL_TILE: usize = 2048;

/// `c (m × n) = a (m × d) · bᵀ` where `b` is `n × d` row-major.
pub(crate) fn gemm_abt(a: &[f32], b: &[f32], m: usize, n: usize, d: usize, c: &mut [f32]) {
    assert!(a.len() == m * d && b.len() == n * d && c.len() == m * n);
    // SAFETY: the assertion above guarantees that every element addressed through the
    // strides below lies inside `a`, `b` and `c`: A is m×d with strides (d, 1), B (= bᵀ) is
    // d×n with strides (1, d), C is m×n with strides (n, 1) and does not alias A or B
    // (`c` is a unique borrow).
    unsafe {
        matrixmultiply::sgemm(
            m,
            d,
            n,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Above `PARALLEL_SCAN_FROM` rows the blocks run in parallel: the answer is every
    /// row scored and sorted once (ties across blocks, a filter, `m` of every row).
    #[test]
    fn the_parallel_scan_is_the_serial_scan() {
        use rand::{Rng, SeedableRng};
        let n = PARALLEL_SCAN_FROM + 5_000;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut data: Vec<f32> = (0..n * 6).map(|_| rng.random_range(-1.0..1.0f32)).collect();
        // Equal rows in different blocks: ties go to the lower row.
        let copy = data[..6].to_vec();
        for r in [4_100, 9_000, n - 1] {
            data[r * 6..(r + 1) * 6].copy_from_slice(&copy);
        }
        let rows = Embeddings::new(6, data).unwrap();
        let inv = inverse_norms(&rows, n);
        let query = copy.clone();
        let keep = |i: usize| i % 3 != 1;
        let reference = |m: usize, keep: &dyn Fn(usize) -> bool| {
            let scored: Vec<(u32, f32)> = (0..n)
                .filter(|&i| keep(i))
                .map(|i| (i as u32, dot(rows.row(i), &query) * inv[i]))
                .collect();
            best_first(scored, m)
        };
        for m in [1, 5, 20, 4_096, n] {
            assert_eq!(
                nearest_by_cosine(&rows, &inv, &query, m),
                reference(m, &|_| true)
            );
            assert_eq!(
                nearest_by_cosine_where(&rows, &inv, &query, m, &keep),
                reference(m, &keep)
            );
        }
        let top = nearest_by_cosine(&rows, &inv, &query, 4);
        assert_eq!(
            top.iter().map(|h| h.0).collect::<Vec<_>>(),
            vec![0, 4_100, 9_000, n as u32 - 1]
        );
    }

    #[test]
    fn nearest_rows_best_first_with_ties_to_the_lower_index() {
        let rows = Embeddings::from_rows(
            2,
            &[
                vec![1.0, 0.0],
                vec![0.0, 2.0],
                vec![3.0, 3.0],
                vec![0.0, 0.0],
                vec![2.0, 0.0],
                vec![9.0, 9.0],
            ],
        )
        .unwrap();
        // The last row is excluded by passing five norms.
        let inv = inverse_norms(&rows, 5);
        assert_eq!(inv.len(), 5);
        assert_eq!(inv[3], 0.0);
        let got = nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 3);
        let ids: Vec<u32> = got.iter().map(|p| p.0).collect();
        // rows 0 and 4 tie at cos ≈ 0.995·‖q‖, then row 2.
        assert_eq!(ids, vec![0, 4, 2]);
        assert!((got[0].1 - got[1].1).abs() < 1e-6);
        assert_eq!(nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 99).len(), 5);
        assert!(nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 0).is_empty());
        // A full scan agrees with sorting every cosine.
        let all = nearest_by_cosine(&rows, &inv, &[0.2, 1.0], 5);
        let cos: Vec<f32> = (0..5)
            .map(|i| lprag_core::cosine(rows.row(i), &[0.2, 1.0]))
            .collect();
        for w in all.windows(2) {
            assert!(cos[w[0].0 as usize] >= cos[w[1].0 as usize]);
        }
        assert!((dot(&[1.0; 19], &[2.0; 19]) - 38.0).abs() < 1e-5);
    }
}
