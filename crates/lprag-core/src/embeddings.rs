//! A dense row-major matrix of embeddings.
//!
//! The buffer is reference-counted: cloning an [`Embeddings`] or taking its first rows
//! ([`Embeddings::leading_rows`]) shares the memory instead of copying it (a million
//! 1,024-wide rows are 4 GB), and a mutation copies only when the buffer is shared.
//! The buffer is a `Vec` on the heap, or rows kept elsewhere behind [`RowStorage`] (a
//! memory-mapped file: `lprag_graph::map_feature_rows`), which a mutation copies to the
//! heap first.

use std::fmt::Debug;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Row-major `rows × dim` matrix of `f32` embeddings (one row per text).
///
/// Clones share one buffer (copy on write; see the module docs). Deserialising checks
/// what [`Embeddings::new`] checks (a width of at least 1 and a buffer that is a whole
/// number of rows), so a corrupt file is an error, not a panic later.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawEmbeddings")]
pub struct Embeddings {
    dim: usize,
    /// The shared buffer; this matrix is `data[start..start + len]`.
    data: Arc<Buffer>,
    start: usize,
    len: usize,
}

/// Rows of `f32` kept outside the heap, for [`Embeddings::from_storage`]: a memory-mapped
/// file (the rows of a graph file, `lprag_graph::map_feature_rows`), or memory another
/// library owns. The floats must not change while the storage lives.
pub trait RowStorage: Send + Sync + Debug {
    /// Every float, row-major.
    fn floats(&self) -> &[f32];
}

/// Where an [`Embeddings`] buffer lives.
#[derive(Debug)]
enum Buffer {
    /// On the heap, owned.
    Heap(Vec<f32>),
    /// Behind a [`RowStorage`], read-only.
    Stored(Box<dyn RowStorage>),
}

impl Buffer {
    fn floats(&self) -> &[f32] {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Stored(s) => s.floats(),
        }
    }
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

impl Serialize for Embeddings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Raw<'a> {
            dim: usize,
            data: &'a [f32],
        }
        Raw {
            dim: self.dim,
            data: self.as_slice(),
        }
        .serialize(s)
    }
}

impl PartialEq for Embeddings {
    fn eq(&self, other: &Self) -> bool {
        self.dim == other.dim && self.as_slice() == other.as_slice()
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
        Ok(Self::wrap(dim, data))
    }

    fn wrap(dim: usize, data: Vec<f32>) -> Self {
        Self {
            dim,
            len: data.len(),
            data: Arc::new(Buffer::Heap(data)),
            start: 0,
        }
    }

    /// Rows kept in `storage` (a memory-mapped file, say) instead of on the heap; its
    /// float count must be a multiple of `dim`. Reading rows reads the storage; a mutation
    /// ([`Embeddings::extend`], [`Embeddings::normalize`]) copies the rows to the heap
    /// first, and [`Embeddings::into_vec`] copies them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as for [`Embeddings::new`].
    pub fn from_storage(dim: usize, storage: Box<dyn RowStorage>) -> Result<Self> {
        let len = storage.floats().len();
        if dim == 0 || !len.is_multiple_of(dim) {
            return Err(Error::invalid(
                "Embeddings::from_storage",
                format!("{len} floats are not a whole number of rows of width {dim}"),
            ));
        }
        Ok(Self {
            dim,
            len,
            data: Arc::new(Buffer::Stored(storage)),
            start: 0,
        })
    }

    /// `true` when the rows are read from a [`RowStorage`] rather than held on the heap.
    pub fn is_stored(&self) -> bool {
        matches!(*self.data, Buffer::Stored(_))
    }

    /// An empty matrix of the given width.
    pub fn empty(dim: usize) -> Self {
        Self::wrap(dim, Vec::new())
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
        self.len.checked_div(self.dim).unwrap_or(0)
    }

    /// `true` when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Row `i`. Panics when `i >= rows()` like slice indexing.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.as_slice()[i * self.dim..(i + 1) * self.dim]
    }

    /// The flat row-major buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data.floats()[self.start..self.start + self.len]
    }

    /// Consume into the flat row-major buffer (without a copy when it is on the heap,
    /// nothing else shares it and this matrix is all of it).
    pub fn into_vec(mut self) -> Vec<f32> {
        if self.start == 0 && self.len == self.data.floats().len() {
            if let Some(Buffer::Heap(v)) = Arc::get_mut(&mut self.data) {
                return std::mem::take(v);
            }
        }
        self.as_slice().to_vec()
    }

    /// Iterate over rows.
    pub fn iter(&self) -> impl Iterator<Item = &[f32]> {
        self.as_slice().chunks_exact(self.dim)
    }

    /// The first `rows` rows (all of them when there are fewer), sharing this matrix's
    /// buffer: no copy is made.
    pub fn leading_rows(&self, rows: usize) -> Embeddings {
        Self {
            dim: self.dim,
            data: self.data.clone(),
            start: self.start,
            len: rows.min(self.rows()) * self.dim,
        }
    }

    /// `true` when `self` and `other` read one buffer (a clone, or
    /// [`Embeddings::leading_rows`] of one another), so neither holds a copy.
    pub fn shares_buffer_with(&self, other: &Embeddings) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }

    /// The buffer, owned by this matrix alone and exactly its rows (copied first when
    /// shared or a view of a larger one).
    fn owned(&mut self) -> &mut Vec<f32> {
        let whole = self.start == 0 && self.len == self.data.floats().len();
        if !whole || !matches!(Arc::get_mut(&mut self.data), Some(Buffer::Heap(_))) {
            *self = Self::wrap(self.dim, self.as_slice().to_vec());
        }
        match Arc::get_mut(&mut self.data) {
            Some(Buffer::Heap(v)) => v,
            _ => unreachable!("a sole heap buffer was made just above"),
        }
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
        let data = self.owned();
        data.extend_from_slice(other.as_slice());
        self.len = self.data.floats().len();
        Ok(())
    }

    /// Scale every row to unit L2 norm (zero rows stay zero).
    pub fn normalize(&mut self) {
        let dim = self.dim;
        for row in self.owned().chunks_exact_mut(dim) {
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
        Self::wrap(self.dim, data)
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

    #[test]
    fn clones_and_leading_rows_share_the_buffer_until_one_is_changed() {
        let e =
            Embeddings::from_rows(2, &[vec![3.0, 4.0], vec![1.0, 0.0], vec![0.0, 2.0]]).unwrap();
        let head = e.leading_rows(2);
        assert!(head.shares_buffer_with(&e));
        assert_eq!(head.rows(), 2);
        assert_eq!(head.row(1), &[1.0, 0.0]);
        assert_eq!(head.as_slice(), &e.as_slice()[..4]);
        assert_eq!(head.iter().count(), 2);
        assert_eq!(e.leading_rows(9).rows(), 3);
        assert_eq!(
            head,
            Embeddings::from_rows(2, &[vec![3.0, 4.0], vec![1.0, 0.0]]).unwrap()
        );
        // Serialised as its own rows only.
        let json = serde_json::to_string(&head).unwrap();
        assert_eq!(json, r#"{"dim":2,"data":[3.0,4.0,1.0,0.0]}"#);
        let back: Embeddings = serde_json::from_str(&json).unwrap();
        assert_eq!(back, head);
        // Changing a view or a clone copies it first; the original keeps its rows.
        let mut view = head.clone();
        view.normalize();
        assert!(!view.shares_buffer_with(&e));
        assert_eq!(view.row(0), &[0.6, 0.8]);
        assert_eq!(e.row(0), &[3.0, 4.0]);
        let mut grown = e.leading_rows(1);
        grown.extend(&e.leading_rows(1)).unwrap();
        assert_eq!(grown.as_slice(), &[3.0, 4.0, 3.0, 4.0]);
        assert_eq!(e.rows(), 3);
        assert_eq!(head.clone().into_vec(), vec![3.0, 4.0, 1.0, 0.0]);
        // A sole owner changes and gives up its buffer in place.
        let mut alone = Embeddings::new(2, vec![0.0, 5.0]).unwrap();
        let before = alone.as_slice().as_ptr();
        alone.normalize();
        assert_eq!(alone.as_slice().as_ptr(), before);
        let back = alone.into_vec();
        assert_eq!(back.as_ptr(), before);
    }

    /// Rows kept outside the heap buffer type.
    #[derive(Debug)]
    struct Kept(Vec<f32>);

    impl RowStorage for Kept {
        fn floats(&self) -> &[f32] {
            &self.0
        }
    }

    #[test]
    fn stored_rows_are_read_in_place_and_copied_only_to_change() {
        assert!(Embeddings::from_storage(3, Box::new(Kept(vec![1.0; 4]))).is_err());
        assert!(Embeddings::from_storage(0, Box::new(Kept(vec![]))).is_err());
        let e = Embeddings::from_storage(2, Box::new(Kept(vec![3.0, 4.0, 0.0, 2.0]))).unwrap();
        let at = e.as_slice().as_ptr();
        assert!(e.is_stored());
        assert_eq!((e.rows(), e.row(1)), (2, &[0.0, 2.0][..]));
        let head = e.leading_rows(1);
        assert!(head.is_stored() && head.shares_buffer_with(&e));
        assert_eq!(head.as_slice().as_ptr(), at);
        assert_eq!(e, Embeddings::new(2, vec![3.0, 4.0, 0.0, 2.0]).unwrap());
        // A change copies the rows to the heap; the storage keeps its floats.
        let mut changed = e.clone();
        changed.normalize();
        assert!(!changed.is_stored());
        assert_eq!(changed.row(0), &[0.6, 0.8]);
        assert_eq!(e.row(0), &[3.0, 4.0]);
        let mut grown = head.clone();
        grown.extend(&e).unwrap();
        assert_eq!(grown.rows(), 3);
        assert!(!grown.is_stored());
        // Even a sole owner copies out of the storage.
        let v = e.clone().into_vec();
        assert_eq!(v, vec![3.0, 4.0, 0.0, 2.0]);
        assert_ne!(v.as_ptr(), at);
        drop(head);
        assert_eq!(e.into_vec().len(), 4);
    }
}
