//! The default encoder as a dependency gets it (feature `hf-hub`): all-MiniLM-L6-v2 is
//! looked up in the Hugging Face cache and, when missing, downloaded into it on first use;
//! later runs read the cache and need no network. `LpRag::builder().build(..)` takes the
//! same path when it chooses its encoder.
//!
//! ```text
//! cargo run --features hf-hub --example default_encoder
//! ```
//!
//! `HF_ENDPOINT` names a mirror instead of https://huggingface.co (CI points it at
//! `scripts/hub-standin.py`, a local stand-in for the hub), `HF_HUB_CACHE` the cache.

use lprag::core::cosine;
use lprag::model::bert::{resolve_model_dir, DEFAULT_MODEL_ID};
use lprag::SentenceEncoder;

fn main() -> lprag::Result<()> {
    // Where the model is, downloading it first when it is not in the cache.
    let dir = resolve_model_dir(None, DEFAULT_MODEL_ID)?;
    println!("{DEFAULT_MODEL_ID} at {}", dir.display());

    let encoder = SentenceEncoder::load(None)?;
    let texts = [
        "Marie Curie was born in Warsaw.",
        "Curie's birthplace is the capital of Poland.",
        "The Vistula is the longest river in Poland.",
    ];
    let emb = encoder.encode(&texts)?;
    println!("{} vectors of {} floats", emb.rows(), emb.dim());
    for j in 1..texts.len() {
        println!(
            "cosine({:?}, {:?}) = {:.3}",
            texts[0],
            texts[j],
            cosine(emb.row(0), emb.row(j))
        );
    }
    Ok(())
}
