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
//! - [`TokenCounter`] reads only the tokenizer, to count tokens as the encoder would.
//! - [`BertModel`] is the transformer itself as a burn module, loaded from
//!   `model.safetensors` with the architecture of [`BertConfig`].
//!
//! Missing files are [`lprag_core::Error::Io`] and malformed ones
//! [`lprag_core::Error::Format`], each naming the file.

mod config;
mod encoder;
mod model;
mod resolve;
mod tokens;
mod weights;

#[cfg(test)]
mod tests;

pub use config::{BertConfig, HiddenAct, PoolingConfig};
pub use encoder::{SentenceEncoder, DEFAULT_BATCH_SIZE};
pub use model::{BertAttention, BertEmbeddings, BertLayer, BertModel};
pub use resolve::{hf_hub_cache_dir, resolve_model_dir, DEFAULT_MODEL_ID, MODEL_DIR_ENV};
pub use tokens::TokenCounter;
