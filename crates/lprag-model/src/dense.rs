//! Dense layers on the host: burn `Linear` weights copied out once, applied with plain
//! loops (few rows) or a blocked GEMM (many rows). Used where a query touches a handful of
//! nodes and a device round trip would cost more than the arithmetic.

use burn::nn::Linear;
use burn::tensor::Tensor;
use lprag_core::{Error, Result};

/// Rows from which [`Dense::forward`] switches from per-row loops to `matrixmultiply`.
const GEMM_ROWS: usize = 32;

/// A dense layer on the host: `y = x·W + b`, `W` row-major `[d_in, d_out]`.
#[derive(Debug, Clone)]
pub(crate) struct Dense {
    pub(crate) w: Vec<f32>,
    pub(crate) b: Vec<f32>,
    pub(crate) d_out: usize,
}

impl Dense {
    /// Copy a burn `Linear` to the host (a missing bias becomes zeros).
    pub(crate) fn export(l: &Linear) -> Result<Self> {
        let [_, d_out] = l.weight.dims();
        let w = to_vec(l.weight.val())?;
        let b = match &l.bias {
            Some(b) => to_vec(b.val())?,
            None => vec![0.0; d_out],
        };
        Ok(Self { w, b, d_out })
    }

    /// `x` row-major `[rows, d_in]` → `[rows, d_out]`, rows in parallel.
    pub(crate) fn forward(&self, x: &[f32], d_in: usize) -> Vec<f32> {
        let rows = x.len() / d_in.max(1);
        let mut out = vec![0.0f32; rows * self.d_out];
        self.forward_into(x, d_in, &mut out, false);
        out
    }

    /// `out (+)= x·W + b`: with `accumulate` the product is added to `out`.
    pub(crate) fn forward_into(&self, x: &[f32], d_in: usize, out: &mut [f32], accumulate: bool) {
        use rayon::prelude::*;
        let d_out = self.d_out;
        let rows = x.len() / d_in.max(1);
        debug_assert_eq!(out.len(), rows * d_out);
        if rows >= GEMM_ROWS {
            out.par_chunks_mut(d_out).for_each(|o| {
                if accumulate {
                    o.iter_mut().zip(&self.b).for_each(|(a, b)| *a += b);
                } else {
                    o.copy_from_slice(&self.b);
                }
            });
            // One GEMM per block of rows, blocks in parallel (at most 256 rows, and as many
            // blocks as threads when there are fewer rows: 270 rows made blocks of 256 and
            // 14); beta = 1 keeps the bias.
            let block = rows
                .div_ceil(rayon::current_num_threads().max(1))
                .clamp(GEMM_ROWS / 2, 256);
            out.par_chunks_mut(block * d_out)
                .zip(x.par_chunks(block * d_in))
                .for_each(|(o, xb)| {
                    let m = xb.len() / d_in;
                    // SAFETY: the slices hold m×d_in, d_in×d_out and m×d_out floats, row-major
                    // with the strides given.
                    unsafe {
                        matrixmultiply::sgemm(
                            m,
                            d_in,
                            d_out,
                            1.0,
                            xb.as_ptr(),
                            d_in as isize,
                            1,
                            self.w.as_ptr(),
                            d_out as isize,
                            1,
                            1.0,
                            o.as_mut_ptr(),
                            d_out as isize,
                            1,
                        );
                    }
                });
            return;
        }
        out.par_chunks_mut(d_out)
            .zip(x.par_chunks(d_in))
            .for_each(|(o, xi)| {
                if accumulate {
                    o.iter_mut().zip(&self.b).for_each(|(a, b)| *a += b);
                } else {
                    o.copy_from_slice(&self.b);
                }
                for (k, &v) in xi.iter().enumerate() {
                    if v != 0.0 {
                        let wk = &self.w[k * d_out..(k + 1) * d_out];
                        for (a, &w) in o.iter_mut().zip(wk) {
                            *a += v * w;
                        }
                    }
                }
            });
    }
}

/// A tensor's values on the host.
pub(crate) fn to_vec<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>> {
    t.into_data()
        .try_into_vec::<f32>()
        .map_err(|e| Error::backend("model weights", format!("{e:?}")))
}

/// An MLP on the host: `x` row-major `[rows, d_in]` through `layers`, ReLU between them
/// (none after the last).
pub(crate) fn mlp(layers: &[Dense], x: &[f32], d_in: usize) -> Vec<f32> {
    let mut x = x.to_vec();
    let mut width = d_in;
    for (i, l) in layers.iter().enumerate() {
        x = l.forward(&x, width);
        width = l.d_out;
        if i + 1 < layers.len() {
            relu_in_place(&mut x);
        }
    }
    x
}

/// `max(0, ·)` in place.
pub(crate) fn relu_in_place(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = v.max(0.0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_and_loop_paths_agree() {
        let (d_in, d_out) = (7, 5);
        let layer = Dense {
            w: (0..d_in * d_out).map(|i| (i as f32 * 0.37).sin()).collect(),
            b: (0..d_out).map(|i| i as f32 * 0.1).collect(),
            d_out,
        };
        for rows in [1, 3, GEMM_ROWS, 300] {
            let x: Vec<f32> = (0..rows * d_in).map(|i| (i as f32 * 0.11).cos()).collect();
            let y = layer.forward(&x, d_in);
            for r in 0..rows {
                for j in 0..d_out {
                    let want: f32 = layer.b[j]
                        + (0..d_in)
                            .map(|k| x[r * d_in + k] * layer.w[k * d_out + j])
                            .sum::<f32>();
                    assert!((y[r * d_out + j] - want).abs() < 1e-4, "rows {rows}");
                }
            }
            let mut acc = vec![1.0f32; rows * d_out];
            layer.forward_into(&x, d_in, &mut acc, true);
            assert!(acc.iter().zip(&y).all(|(a, b)| (a - 1.0 - b).abs() < 1e-4));
        }
    }
}
