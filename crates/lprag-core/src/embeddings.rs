//! A dense row-major matrix of embeddings.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Row-major `rows × dim` matrix of `f32` embeddings (one row per text).
///
/// Deserialising checks what [`Embeddings::new`] checks (a width of at least 1 and a
/// buffer that is a whole number of rows), so a corrupt file is an error, not a panic later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawEmbeddings")]
pub struct Embeddings {
    dim: usize,
    data: Vec<f32>,
}

/// The serialised form of [`Embeddings`], checked on the way in.
#[derive(Deserialize)]
struct RawEmbeddings {
    dim: usize,
    data: Vec<f32>,
}

impl TryFrom<RawEmbeddings> for Embeddings {
    type Error = Error;

    fn try_from(raw: RawEmbeddings) -> Result<Self> {
        Embeddings::new(raw.dim, raw.data)
    }
}

impl Embeddings {
    /// Wrap a flat row-major buffer; its length must be a multiple of `dim`.
    pub fn new(dim: usize, data: Vec<f32>) -> Result<Self> {
        if dim == 0 {
            return Err(Error::invalid(
                "Embeddings::new",
                "dimension must be at least 1",
            ));
        }
        if !data.len().is_multiple_of(dim) {
            return Err(Error::invalid(
                "Embeddings::new",
                format!(
                    "buffer of {} floats is not a multiple of dim {dim}",
                    data.len()
                ),
            ));
        }
        Ok(Self { dim, data })
    }

    /// An empty matrix of the given width.
    pub fn empty(dim: usize) -> Self {
        Self {
            dim,
            data: Vec::new(),
        }
    }

    /// Build from rows; every row must have length `dim`.
    pub fn from_rows(dim: usize, rows: &[Vec<f32>]) -> Result<Self> {
        let mut data = Vec::with_capacity(rows.len() * dim);
        for (i, r) in rows.iter().enumerate() {
            if r.len() != dim {
                return Err(Error::DimensionMismatch {
                    location: format!("Embeddings::from_rows row {i}"),
                    expected: dim,
                    actual: r.len(),
                });
            }
            data.extend_from_slice(r);
        }
        Self::new(dim, data)
    }

    /// Width of each row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows (0 for a zero-width matrix from [`Embeddings::empty`]).
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    /// `true` when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Row `i`. Panics when `i >= rows()` like slice indexing.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// The flat row-major buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Consume into the flat row-major buffer.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }

    /// Iterate over rows.
    pub fn iter(&self) -> impl Iterator<Item = &[f32]> {
        self.data.chunks_exact(self.dim)
    }

    /// Append the rows of `other` (same width).
    pub fn extend(&mut self, other: &Embeddings) -> Result<()> {
        if other.dim != self.dim {
            return Err(Error::DimensionMismatch {
                location: "Embeddings::extend".into(),
                expected: self.dim,
                actual: other.dim,
            });
        }
        self.data.extend_from_slice(&other.data);
        Ok(())
    }

    /// Scale every row to unit L2 norm (zero rows stay zero).
    pub fn normalize(&mut self) {
        let dim = self.dim;
        for row in self.data.chunks_exact_mut(dim) {
            let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n > 0.0 {
                row.iter_mut().for_each(|x| *x /= n);
            }
        }
    }

    /// Rows selected by index, in that order.
    pub fn select(&self, rows: &[usize]) -> Embeddings {
        let mut data = Vec::with_capacity(rows.len() * self.dim);
        for &r in rows {
            data.extend_from_slice(self.row(r));
        }
        Embeddings {
            dim: self.dim,
            data,
        }
    }
}

/// Dot product with eight independent accumulators (vectorises without reassociation).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_corrupt_serialised_matrix_is_an_error_not_a_panic() {
        for bad in [
            r#"{"dim":0,"data":[]}"#,
            r#"{"dim":0,"data":[1.0]}"#,
            r#"{"dim":3,"data":[1.0,2.0]}"#,
        ] {
            let r: std::result::Result<Embeddings, _> = serde_json::from_str(bad);
            assert!(r.is_err(), "{bad}");
        }
        let ok: Embeddings = serde_json::from_str(r#"{"dim":2,"data":[1.0,2.0]}"#).unwrap();
        assert_eq!(ok.rows(), 1);
        assert_eq!(Embeddings::empty(0).rows(), 0);
    }

    use super::*;

    #[test]
    fn rejects_ragged_buffers() {
        assert!(Embeddings::new(3, vec![1.0; 7]).is_err());
        assert!(Embeddings::new(0, vec![]).is_err());
        let e = Embeddings::from_rows(2, &[vec![1.0, 2.0], vec![3.0]]).unwrap_err();
        assert!(e.to_string().contains("row 1"), "{e}");
    }

    #[test]
    fn normalize_and_cosine() {
        let mut e = Embeddings::from_rows(2, &[vec![3.0, 4.0], vec![0.0, 0.0]]).unwrap();
        e.normalize();
        assert!((e.row(0)[0] - 0.6).abs() < 1e-6);
        assert_eq!(e.row(1), &[0.0, 0.0]);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - 0.70710677).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
