//! A BERT sentence encoder in burn: sentence-transformers models such as
//! [all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2)
//! behind [`lprag_core::Encoder`].
//!
//! ```no_run
//! use lprag_core::Encoder;
//! use lprag_model::bert::SentenceEncoder;
//!
//! # async fn demo() -> lprag_core::Result<()> {
//! // Finds all-MiniLM-L6-v2 via $LPRAG_MODEL_DIR or the Hugging Face cache
//! // (scripts/fetch-model.sh puts it there), and runs it on the CPU.
//! let encoder = SentenceEncoder::load(None)?;
//! let vectors = encoder.embed(&["A cat sat on the mat.".to_string()]).await?;
//! assert_eq!(vectors.dim(), 384);
//! # Ok(()) }
//! ```
//!
//! - [`resolve_model_dir`] finds a model directory (explicit path, `LPRAG_MODEL_DIR`, the
//!   Hugging Face cache, or — with the `hf-hub` feature — a download).
//! - [`SentenceEncoder`] loads it ([`SentenceEncoder::from_dir`] /
//!   [`SentenceEncoder::load`]) and embeds texts, batched and sorted by length.
//! - [`CrossEncoder`] scores query–text pairs with a BERT cross-encoder (a
//!   [`lprag_core::Reranker`] for `lprag::Reranked`).
//! - [`TokenCounter`] reads only the tokenizer, to count tokens as the encoder would.
//! - [`BertModel`] is the transformer itself as a burn module, loaded from
//!   `model.safetensors` with the architecture of [`BertConfig`].
//!
//! Missing files are [`lprag_core::Error::Io`] and malformed ones
//! [`lprag_core::Error::Format`], each naming the file.

mod config;
mod cpu;
mod cross;
mod encoder;
mod model;
mod resolve;
mod tokens;
mod weights;

#[cfg(test)]
mod cross_tests;
#[cfg(all(test, feature = "hf-hub"))]
mod hub_tests;
#[cfg(test)]
mod tests;

pub use config::{BertConfig, HiddenAct, PoolingConfig};
pub use cross::{CrossEncoder, CROSS_ENCODER_BATCH_SIZE};
pub use encoder::{SentenceEncoder, DEFAULT_BATCH_SIZE};
pub use model::{BertAttention, BertEmbeddings, BertLayer, BertModel};
pub use resolve::{
    hf_hub_cache_dir, resolve_model_dir, DEFAULT_MODEL_ID, HF_ENDPOINT_ENV, MODEL_DIR_ENV,
};
pub use tokens::TokenCounter;
