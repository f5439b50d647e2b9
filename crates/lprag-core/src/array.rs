//! [`Embeddings`] to and from [`ndarray`] arrays (feature `ndarray`).
//!
//! A view never copies ([`Embeddings::view`]); an owned array moves its buffer in and out
//! when the layout allows (standard row-major order, nothing else sharing the buffer) and
//! copies otherwise.

use ndarray::{Array2, ArrayView2};

use crate::{Embeddings, Error, Result};

impl Embeddings {
    /// A `rows × dim` view of this matrix: no copy.
    ///
    /// ```
    /// # use lprag_core::Embeddings;
    /// let e = Embeddings::new(2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    /// let v = e.view();
    /// assert_eq!(v.dim(), (2, 2));
    /// assert_eq!(v[[1, 0]], 3.0);
    /// assert_eq!(v.as_ptr(), e.as_slice().as_ptr());
    /// ```
    pub fn view(&self) -> ArrayView2<'_, f32> {
        ArrayView2::from_shape((self.rows(), self.dim()), self.as_slice())
            .expect("an Embeddings buffer is a whole number of rows")
    }

    /// This matrix as an owned `rows × dim` array: the buffer moves without a copy when
    /// nothing else shares it (see [`Embeddings::into_vec`]).
    pub fn into_array(self) -> Array2<f32> {
        let shape = (self.rows(), self.dim());
        Array2::from_shape_vec(shape, self.into_vec())
            .expect("an Embeddings buffer is a whole number of rows")
    }

    /// Copy any 2-D view (any strides) into a new matrix, one row per array row.
    /// An array with no columns is an error, as in [`Embeddings::new`].
    pub fn from_view(view: ArrayView2<'_, f32>) -> Result<Self> {
        let (rows, dim) = view.dim();
        let data = match view.as_slice() {
            Some(flat) => flat.to_vec(),
            None => view.iter().copied().collect(),
        };
        debug_assert_eq!(data.len(), rows * dim);
        Embeddings::new(dim, data)
    }
}

/// Moves the array's buffer in without a copy when it is in standard (C, row-major)
/// layout and starts at its allocation; copies otherwise (a transposed or sliced array).
impl TryFrom<Array2<f32>> for Embeddings {
    type Error = Error;

    fn try_from(array: Array2<f32>) -> Result<Self> {
        let dim = array.ncols();
        if !array.is_standard_layout() {
            return Embeddings::from_view(array.view());
        }
        let (data, offset) = array.into_raw_vec_and_offset();
        match offset {
            Some(0) | None => Embeddings::new(dim, data),
            Some(start) => {
                let len = data.len() - start;
                let mut data = data;
                data.drain(..start);
                debug_assert_eq!(data.len(), len);
                Embeddings::new(dim, data)
            }
        }
    }
}

impl From<Embeddings> for Array2<f32> {
    fn from(e: Embeddings) -> Self {
        e.into_array()
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, s, Array2};

    use crate::Embeddings;

    #[test]
    fn round_trip_moves_the_buffer() {
        let a: Array2<f32> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let ptr = a.as_ptr();
        let e = Embeddings::try_from(a).unwrap();
        assert_eq!(e.as_slice().as_ptr(), ptr, "standard layout moves, no copy");
        assert_eq!(e.rows(), 2);
        assert_eq!(e.row(1), &[4.0, 5.0, 6.0]);
        let back = e.into_array();
        assert_eq!(back.as_ptr(), ptr, "a sole owner moves back out");
        assert_eq!(back, array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    }

    #[test]
    fn shared_buffers_are_copied_not_stolen() {
        let e = Embeddings::new(2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let clone = e.clone();
        let a = e.into_array();
        assert_ne!(a.as_ptr(), clone.as_slice().as_ptr());
        assert_eq!(a, clone.view());
        let head = clone.leading_rows(1);
        assert_eq!(head.view(), array![[1.0, 2.0]]);
        assert_eq!(head.into_array(), array![[1.0, 2.0]]);
    }

    #[test]
    fn transposed_and_sliced_arrays_are_copied_row_by_row() {
        let a: Array2<f32> = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
        let t = Embeddings::try_from(a.t().to_owned()).unwrap();
        assert_eq!(t.as_slice(), &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
        let strided = Embeddings::from_view(a.slice(s![..;2, ..])).unwrap();
        assert_eq!(strided.as_slice(), &[1.0, 2.0, 5.0, 6.0]);
        let column = Embeddings::from_view(a.t()).unwrap();
        assert_eq!(column.dim(), 3);
        assert_eq!(column.row(1), &[2.0, 4.0, 6.0]);
    }

    #[test]
    fn an_array_without_columns_is_an_error() {
        let a = Array2::<f32>::zeros((3, 0));
        assert!(Embeddings::try_from(a).is_err());
        let empty = Array2::<f32>::zeros((0, 4));
        let e = Embeddings::try_from(empty).unwrap();
        assert_eq!((e.rows(), e.dim()), (0, 4));
    }
}
