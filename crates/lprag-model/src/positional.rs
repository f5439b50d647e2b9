//! Positional encodings for models that ask for them ([`crate::LinkModel::positional_dim`]):
//! Laplacian eigenmaps of the index graph, as PEG (Wang et al. 2022) uses them.
//!
//! The eigenvectors of the normalised Laplacian `L = I − D^-½ A D^-½` with the smallest
//! eigenvalues are the eigenvectors of `S = (I + D^-½ A D^-½) / 2` with the largest, found by
//! block subspace iteration on `S` (seeded random start, modified Gram–Schmidt each step,
//! Rayleigh–Ritz at the end with a Jacobi solve of the small block). The predictor then
//! scales all rows by one factor so that the mean squared distance across the graph's
//! edges is 1, whatever the corpus size. Eigenvectors are only defined up
//! to a rotation within each eigenspace (and a sign), which is exactly what a PEG layer is
//! invariant to.
//!
//! Query nodes (synthetic or the user's) are not given eigenmap rows: their encoding is
//! the mean of the chunks they join under the predictor's [`crate::InferenceMode`], the
//! same rule at training and at inference (their own eigenmap row would encode their
//! target links, which masking cannot remove).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Extra block columns beyond the requested dimension (faster, steadier convergence).
const OVERSAMPLE: usize = 8;

/// Subspace iterations run by [`laplacian_eigenmaps`] callers in this crate.
pub(crate) const ITERATIONS: usize = 300;

/// Positional encodings of the `n` nodes of the undirected graph `adj` (`adj[i]` lists
/// `(neighbour, weight)`; negative weights count as 0): the `dim` eigenvectors of the
/// normalised Laplacian with the smallest eigenvalues, row-major `[n, dim]`, each column
/// scaled to squared norm `n`. Columns beyond `n` are zero. Deterministic for a given `seed`.
pub(crate) fn laplacian_eigenmaps(
    adj: &[Vec<(u32, f32)>],
    dim: usize,
    iterations: usize,
    seed: u64,
) -> Vec<f32> {
    let n = adj.len();
    let mut out = vec![0.0f32; n * dim];
    if n == 0 || dim == 0 {
        return out;
    }
    let b = (dim + OVERSAMPLE).min(n);
    let inv_sqrt: Vec<f64> = adj
        .iter()
        .map(|l| {
            let d: f64 = l.iter().map(|&(_, w)| w.max(0.0) as f64).sum();
            if d > 0.0 {
                1.0 / d.sqrt()
            } else {
                0.0
            }
        })
        .collect();
    let apply = |v: &[f64], y: &mut [f64]| {
        for (i, list) in adj.iter().enumerate() {
            let mut acc = 0.0;
            for &(j, w) in list {
                acc += w.max(0.0) as f64 * inv_sqrt[j as usize] * v[j as usize];
            }
            y[i] = 0.5 * v[i] + 0.5 * inv_sqrt[i] * acc;
        }
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<Vec<f64>> = (0..b)
        .map(|_| (0..n).map(|_| rng.random_range(-1.0..1.0)).collect())
        .collect();
    orthonormalise(&mut v, &mut rng);
    let mut y = vec![vec![0.0f64; n]; b];
    for _ in 0..iterations {
        for (vc, yc) in v.iter().zip(y.iter_mut()) {
            apply(vc, yc);
        }
        std::mem::swap(&mut v, &mut y);
        orthonormalise(&mut v, &mut rng);
    }
    // Rayleigh–Ritz: H = Vᵀ S V, rotate V by H's eigenvectors, largest eigenvalues first.
    for (vc, yc) in v.iter().zip(y.iter_mut()) {
        apply(vc, yc);
    }
    let mut h = vec![vec![0.0f64; b]; b];
    for i in 0..b {
        for j in i..b {
            let x: f64 = v[i].iter().zip(&y[j]).map(|(a, c)| a * c).sum();
            h[i][j] = x;
            h[j][i] = x;
        }
    }
    let (values, vectors) = jacobi_eigen(h);
    let mut order: Vec<usize> = (0..b).collect();
    order.sort_by(|&a, &c| values[c].total_cmp(&values[a]).then(a.cmp(&c)));
    let scale = (n as f64).sqrt();
    for (col, &k) in order.iter().take(dim).enumerate() {
        for i in 0..n {
            let x: f64 = (0..b).map(|r| v[r][i] * vectors[r][k]).sum();
            out[i * dim + col] = (x * scale) as f32;
        }
    }
    out
}

/// Modified Gram–Schmidt on the columns `v`; a column that collapses (rank deficiency) is
/// redrawn at random and orthogonalised again.
fn orthonormalise(v: &mut [Vec<f64>], rng: &mut StdRng) {
    for c in 0..v.len() {
        for attempt in 0..4 {
            let (done, rest) = v.split_at_mut(c);
            let col = &mut rest[0];
            let before: f64 = col.iter().map(|x| x * x).sum::<f64>().sqrt();
            for prev in done.iter() {
                let p: f64 = prev.iter().zip(col.iter()).map(|(a, b)| a * b).sum();
                for (x, a) in col.iter_mut().zip(prev) {
                    *x -= p * a;
                }
            }
            let norm: f64 = col.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 1e-10 * before.max(1e-300) && norm > 1e-300 {
                col.iter_mut().for_each(|x| *x /= norm);
                break;
            }
            if attempt == 3 {
                // No direction left (more columns than the space has): a zero column.
                col.iter_mut().for_each(|x| *x = 0.0);
                break;
            }
            col.iter_mut()
                .for_each(|x| *x = rng.random_range(-1.0..1.0));
        }
    }
}

/// Eigen-decomposition of a small symmetric matrix by cyclic Jacobi rotations: the
/// eigenvalues and the eigenvectors as columns (`vectors[r][k]` is row `r` of vector `k`).
fn jacobi_eigen(mut a: Vec<Vec<f64>>) -> (Vec<f64>, Vec<Vec<f64>>) {
    let n = a.len();
    let mut q = vec![vec![0.0f64; n]; n];
    for (i, row) in q.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        let scale: f64 = (0..n).map(|i| a[i][i] * a[i][i]).sum::<f64>().max(1e-300);
        if off <= 1e-24 * scale {
            break;
        }
        for p in 0..n {
            for r in p + 1..n {
                if a[p][r].abs() < 1e-300 {
                    continue;
                }
                let theta = (a[r][r] - a[p][p]) / (2.0 * a[p][r]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for row in a.iter_mut() {
                    let (akp, akr) = (row[p], row[r]);
                    row[p] = c * akp - s * akr;
                    row[r] = s * akp + c * akr;
                }
                let (top, bottom) = a.split_at_mut(r);
                for (x, y) in top[p].iter_mut().zip(bottom[0].iter_mut()) {
                    let (apk, ark) = (*x, *y);
                    *x = c * apk - s * ark;
                    *y = s * apk + c * ark;
                }
                for row in q.iter_mut() {
                    let (qp, qr) = (row[p], row[r]);
                    row[p] = c * qp - s * qr;
                    row[r] = s * qp + c * qr;
                }
            }
        }
    }
    ((0..n).map(|i| a[i][i]).collect(), q)
}

/// The mean of the rows `ids` of the row-major `[_, dim]` table `table` (zeros for none).
pub(crate) fn mean_rows(table: &[f32], dim: usize, ids: impl Iterator<Item = u32>) -> Vec<f32> {
    let mut out = vec![0.0f32; dim];
    let mut count = 0usize;
    for i in ids {
        let row = &table[i as usize * dim..(i as usize + 1) * dim];
        out.iter_mut().zip(row).for_each(|(o, &x)| *o += x);
        count += 1;
    }
    if count > 0 {
        out.iter_mut().for_each(|o| *o /= count as f32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize) -> Vec<Vec<(u32, f32)>> {
        (0..n)
            .map(|i| {
                let mut l = vec![(((i + 1) % n) as u32, 1.0), (((i + n - 1) % n) as u32, 1.0)];
                l.sort_by_key(|e| e.0);
                l
            })
            .collect()
    }

    /// `‖L v − λ v‖` for the column `col` of the `[n, dim]` output, with its Rayleigh quotient.
    fn residual(adj: &[Vec<(u32, f32)>], pe: &[f32], dim: usize, col: usize) -> (f64, f64) {
        let n = adj.len();
        let v: Vec<f64> = (0..n).map(|i| pe[i * dim + col] as f64).collect();
        let d: Vec<f64> = adj
            .iter()
            .map(|l| l.iter().map(|e| e.1 as f64).sum())
            .collect();
        let lv: Vec<f64> = (0..n)
            .map(|i| {
                v[i] - adj[i]
                    .iter()
                    .map(|&(j, w)| w as f64 * v[j as usize] / (d[i] * d[j as usize]).sqrt())
                    .sum::<f64>()
            })
            .collect();
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let lambda = v.iter().zip(&lv).map(|(a, b)| a * b).sum::<f64>() / vv;
        let r: f64 = lv
            .iter()
            .zip(&v)
            .map(|(a, b)| (a - lambda * b).powi(2))
            .sum::<f64>()
            .sqrt()
            / vv.sqrt();
        (lambda, r)
    }

    #[test]
    fn a_ring_gives_its_known_smallest_laplacian_eigenpairs() {
        // Normalised Laplacian of a 40-ring: 1 − cos(2πk/40), k = 0, ±1, ±2, …
        let n = 40;
        let adj = ring(n);
        let dim = 5;
        let pe = laplacian_eigenmaps(&adj, dim, ITERATIONS, 7);
        let two_pi = 2.0 * std::f64::consts::PI;
        let expected = [
            0.0,
            1.0 - (two_pi / 40.0).cos(),
            1.0 - (two_pi / 40.0).cos(),
            1.0 - (2.0 * two_pi / 40.0).cos(),
            1.0 - (2.0 * two_pi / 40.0).cos(),
        ];
        for (col, &want) in expected.iter().enumerate() {
            let (lambda, r) = residual(&adj, &pe, dim, col);
            assert!(
                (lambda - want).abs() < 1e-6,
                "column {col}: λ {lambda} vs {want}"
            );
            assert!(r < 1e-4, "column {col}: residual {r}");
        }
        // Rows scaled by √n: each column has squared norm n.
        for col in 0..dim {
            let sq: f64 = (0..n).map(|i| (pe[i * dim + col] as f64).powi(2)).sum();
            assert!((sq - n as f64).abs() < 1e-3, "column {col}: ‖v‖² = {sq}");
        }
        assert_eq!(pe, laplacian_eigenmaps(&adj, dim, ITERATIONS, 7), "seeded");
    }

    #[test]
    fn isolated_nodes_tiny_graphs_and_wide_requests_stay_finite() {
        let mut adj = ring(6);
        adj.push(Vec::new());
        let pe = laplacian_eigenmaps(&adj, 12, 50, 1);
        assert_eq!(pe.len(), 7 * 12);
        assert!(pe.iter().all(|x| x.is_finite()));
        // Only 7 directions exist: the columns past them are zero.
        assert!((0..7).all(|i| pe[i * 12 + 11] == 0.0));
        assert!(laplacian_eigenmaps(&[], 4, 10, 1).is_empty());
        assert_eq!(mean_rows(&pe, 12, std::iter::empty()), vec![0.0; 12]);
        let m = mean_rows(&pe, 12, [0u32, 1].into_iter());
        assert!((m[0] - (pe[0] + pe[12]) / 2.0).abs() < 1e-6);
    }

    #[test]
    fn jacobi_diagonalises_a_symmetric_matrix() {
        let a = vec![
            vec![4.0, 1.0, 0.5],
            vec![1.0, 3.0, 0.2],
            vec![0.5, 0.2, 1.0],
        ];
        let (vals, q) = jacobi_eigen(a.clone());
        for k in 0..3 {
            for r in 0..3 {
                let av: f64 = (0..3).map(|c| a[r][c] * q[c][k]).sum();
                assert!((av - vals[k] * q[r][k]).abs() < 1e-10);
            }
        }
        let trace: f64 = vals.iter().sum();
        assert!((trace - 8.0).abs() < 1e-10);
    }
}
