//! `Embeddings` to and from `ndarray` (feature `ndarray`): a view without a copy, an owned
//! array moved in and out, and a mean-centred copy computed with ndarray's own operations.
//!
//! `cargo run -p lprag-core --features ndarray --example ndarray_embeddings`

use lprag_core::{Embeddings, Result};
use ndarray::{Array2, Axis};

fn main() -> Result<()> {
    // Three 4-wide vectors, as an encoder would return them.
    let emb = Embeddings::new(
        4,
        vec![
            1.0, 0.0, 0.0, 0.0, //
            0.0, 1.0, 0.0, 0.0, //
            1.0, 1.0, 0.0, 0.0,
        ],
    )?;

    // A view reads lprag's buffer in place.
    let view = emb.view();
    assert_eq!(view.as_ptr(), emb.as_slice().as_ptr());
    let mean = view.mean_axis(Axis(0)).expect("three rows");
    println!("shape {:?}, column means {mean}", view.dim());
    println!("similarity matrix (dot products):\n{}", view.dot(&view.t()));

    // Compute with ndarray, hand the result back to lprag without a copy.
    let centred: Array2<f32> = &view - &mean;
    let ptr = centred.as_ptr();
    let back = Embeddings::try_from(centred)?;
    assert_eq!(back.as_slice().as_ptr(), ptr, "moved in, not copied");
    println!("centred row 2: {:?}", back.row(2));

    // And out again: a sole owner moves its buffer into the array.
    let array: Array2<f32> = back.into();
    println!("as an Array2 again: {:?}", array.dim());
    Ok(())
}
