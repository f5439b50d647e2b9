//! A [fastembed](https://crates.io/crates/fastembed) text-embedding model (ONNX Runtime)
//! as an lprag [`Encoder`].
//!
//! [`FastembedEncoder::from_dir`] reads a model directory in the Hugging Face layout with
//! an ONNX export beside it (`model.onnx`, `tokenizer.json`, `config.json`,
//! `special_tokens_map.json`, `tokenizer_config.json`; `scripts/export-onnx.py` writes the
//! ONNX file from `model.safetensors` without PyTorch), mean-pools and L2-normalises.
//! [`FastembedEncoder::new`] wraps a `TextEmbedding` you built yourself, e.g. one of
//! fastembed's catalogue models with its `hf-hub` feature.
//!
//! How ONNX Runtime is linked is the user's choice, as in fastembed itself:
//! `fastembed-load-dynamic` loads it at run time from `ORT_DYLIB_PATH` (≥ 1.24;
//! `scripts/fetch-onnx.sh` unpacks one from the `onnxruntime` wheel on PyPI; nothing is
//! downloaded at build time; what this repository tests with), `fastembed-download` lets
//! ort download it at build time, and plain `fastembed` leaves the choice to your own
//! `fastembed` dependency (its default features download it).
//!
//! [`FastembedReranker`] is fastembed's `TextRerank` (an ONNX cross-encoder) as an lprag
//! [`Reranker`](lprag_core::Reranker).
//!
//! ```no_run
//! use lprag_adapters::fastembed::FastembedEncoder;
//! use lprag_core::Encoder;
//!
//! # async fn run() -> lprag_core::Result<()> {
//! let encoder = FastembedEncoder::from_dir("models/all-MiniLM-L6-v2")?;
//! let emb = encoder.embed(&["The Eiffel Tower is in Paris.".to_string()]).await?;
//! assert_eq!(emb.dim(), 384);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};
use lprag_core::{Embeddings, Encoder, Error, Result};

/// Texts per ONNX Runtime call.
const BATCH: usize = 64;

/// A fastembed `TextEmbedding` behind lprag's [`Encoder`] trait. `Send + Sync`: the model
/// sits behind a mutex and runs on tokio's blocking pool.
#[derive(Clone)]
pub struct FastembedEncoder {
    model: Arc<Mutex<TextEmbedding>>,
    /// An untruncated copy of the model's tokenizer, for [`Encoder::count_tokens`].
    counter: Arc<tokenizers::Tokenizer>,
    name: String,
    dim: usize,
    max_tokens: usize,
    query_prefix: String,
    document_prefix: String,
    weights_hash: Option<String>,
}

impl std::fmt::Debug for FastembedEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastembedEncoder")
            .field("name", &self.name)
            .field("dim", &self.dim)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl FastembedEncoder {
    /// Load `dir/model.onnx` with the tokenizer files beside it. The width is
    /// `config.json`'s `hidden_size`, the input limit `sentence_bert_config.json`'s
    /// `max_seq_length` (else `tokenizer_config.json`'s `model_max_length`, at most 512),
    /// the name `fastembed:` plus the model id (the Hugging Face cache's repository name
    /// when `dir` is a snapshot there, else the directory's name). A missing file, a
    /// missing `ORT_DYLIB_PATH` or a model ONNX Runtime refuses is an error naming it.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let (onnx, tokenizer_files) = read_model(dir)?;
        let config: serde_json::Value = serde_json::from_slice(&tokenizer_files.config_file)
            .map_err(|e| Error::format(dir.join("config.json"), e.to_string()))?;
        let dim = config["hidden_size"]
            .as_u64()
            .ok_or_else(|| Error::format(dir.join("config.json"), "no integer `hidden_size`"))?
            as usize;
        let max_tokens = max_seq_length(dir, &tokenizer_files.tokenizer_config_file);
        let hash = fnv1a64(&[&onnx, &tokenizer_files.tokenizer_file]);
        check_runtime()?;
        let model =
            UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new().with_max_length(max_tokens);
        let model = start(dir, || {
            TextEmbedding::try_new_from_user_defined(model, options)
        })?;
        let mut enc = Self::new(
            model,
            format!("fastembed:{}", model_id(dir)),
            dim,
            max_tokens,
        )?;
        enc.weights_hash = Some(format!("{hash:016x}"));
        Ok(enc)
    }

    /// Wrap a `TextEmbedding` built by hand (any of fastembed's constructors). `dim` is
    /// its output width (checked on every batch), `max_tokens` its truncation length;
    /// `name` is recorded in saved indexes. No fingerprint: two models under one name are
    /// not told apart.
    pub fn new(
        model: TextEmbedding,
        name: impl Into<String>,
        dim: usize,
        max_tokens: usize,
    ) -> Result<Self> {
        if dim == 0 || max_tokens == 0 {
            return Err(Error::invalid(
                "FastembedEncoder::new",
                "dim and max_tokens must be at least 1",
            ));
        }
        let mut counter = model.tokenizer.clone();
        counter.with_padding(None);
        counter
            .with_truncation(None)
            .map_err(|e| Error::backend("fastembed tokenizer", e.to_string()))?;
        Ok(Self {
            model: Arc::new(Mutex::new(model)),
            counter: Arc::new(counter),
            name: name.into(),
            dim,
            max_tokens,
            query_prefix: String::new(),
            document_prefix: String::new(),
            weights_hash: None,
        })
    }

    /// Prepend these to queries and documents (e5: `"query: "` / `"passage: "`; bge: its
    /// query instruction and `""`). They are part of the fingerprint.
    pub fn with_prefixes(mut self, query: impl Into<String>, document: impl Into<String>) -> Self {
        self.query_prefix = query.into();
        self.document_prefix = document.into();
        self
    }

    async fn run(&self, texts: &[String], prefix: &str) -> Result<Embeddings> {
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let (model, dim) = (self.model.clone(), self.dim);
        lprag_core::blocking(move || {
            let mut model = model
                .lock()
                .map_err(|_| Error::backend("fastembed", "a previous call panicked"))?;
            let rows = model
                .embed(&inputs, Some(BATCH))
                .map_err(|e| Error::backend("fastembed", e.to_string()))?;
            if rows.len() != inputs.len() {
                return Err(Error::DimensionMismatch {
                    location: "fastembed output rows".into(),
                    expected: inputs.len(),
                    actual: rows.len(),
                });
            }
            let mut flat = Vec::with_capacity(rows.len() * dim);
            for (i, r) in rows.iter().enumerate() {
                if r.len() != dim {
                    return Err(Error::DimensionMismatch {
                        location: format!("fastembed output row {i}"),
                        expected: dim,
                        actual: r.len(),
                    });
                }
                flat.extend_from_slice(r);
            }
            Embeddings::new(dim, flat)
        })
        .await
    }
}

#[async_trait]
impl Encoder for FastembedEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        self.run(texts, &self.document_prefix).await
    }

    async fn embed_queries(&self, texts: &[String]) -> Result<Embeddings> {
        self.run(texts, &self.query_prefix).await
    }

    fn embeds_queries_apart(&self) -> bool {
        self.query_prefix != self.document_prefix
    }

    fn fingerprint(&self) -> Option<String> {
        let weights = self.weights_hash.as_ref()?;
        let prefixes = fnv1a64(&[
            self.query_prefix.as_bytes(),
            b"\0",
            self.document_prefix.as_bytes(),
        ]);
        Some(format!(
            "onnx:{weights};max:{};prefixes:{prefixes:016x}",
            self.max_tokens
        ))
    }

    fn max_input_tokens(&self) -> Option<usize> {
        Some(self.max_tokens)
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        let text = format!("{}{text}", self.document_prefix);
        self.counter.encode(text, true).ok().map(|e| e.len())
    }
}

/// `dir/model.onnx` and the tokenizer files beside it, each missing one an error naming it.
fn read_model(dir: &Path) -> Result<(Vec<u8>, TokenizerFiles)> {
    let read = |file: &str| -> Result<Vec<u8>> {
        let path = dir.join(file);
        std::fs::read(&path).map_err(|e| Error::io(path, e))
    };
    let onnx = read("model.onnx")?;
    let tokenizer_files = TokenizerFiles {
        tokenizer_file: read("tokenizer.json")?,
        config_file: read("config.json")?,
        special_tokens_map_file: read("special_tokens_map.json")?,
        tokenizer_config_file: read("tokenizer_config.json")?,
    };
    Ok((onnx, tokenizer_files))
}

/// Start a fastembed model on ONNX Runtime: a refusal is an error naming `dir`'s
/// `model.onnx`, and ort's panic on a library it cannot load an error too.
fn start<T>(dir: &Path, new: impl FnOnce() -> fastembed::Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(new))
        .map_err(|p| {
            Error::backend(
                "fastembed",
                format!(
                    "ONNX Runtime failed to start ({}); check ORT_DYLIB_PATH",
                    lprag_core::panic_message(&*p)
                ),
            )
        })?
        .map_err(|e| {
            Error::backend(
                "fastembed",
                format!("{}: {e}", dir.join("model.onnx").display()),
            )
        })
}

/// Refuse early, with a message a person can act on, when ONNX Runtime is loaded at run
/// time (`fastembed-load-dynamic`) and cannot be found (ort would otherwise fail deep
/// inside the first session). Linked or downloaded runtimes need no check.
fn check_runtime() -> Result<()> {
    if cfg!(not(feature = "fastembed-load-dynamic")) {
        return Ok(());
    }
    match std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from) {
        Some(p) if p.is_file() => Ok(()),
        Some(p) => Err(Error::invalid(
            "ORT_DYLIB_PATH",
            format!(
                "{} is not a file (the ONNX Runtime shared library)",
                p.display()
            ),
        )),
        None => Err(Error::invalid(
            "ORT_DYLIB_PATH",
            "not set: point it at libonnxruntime (scripts/fetch-onnx.sh unpacks one from PyPI)",
        )),
    }
}

/// `max_seq_length` of `sentence_bert_config.json`, else the tokenizer's
/// `model_max_length`, at most 512 (BERT's position table); 512 when neither is there.
fn max_seq_length(dir: &Path, tokenizer_config: &[u8]) -> usize {
    let from = |bytes: &[u8], key: &str| {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|v| v[key].as_u64())
    };
    std::fs::read(dir.join("sentence_bert_config.json"))
        .ok()
        .and_then(|b| from(&b, "max_seq_length"))
        .or_else(|| from(tokenizer_config, "model_max_length"))
        .map_or(512, |n| n.clamp(1, 512) as usize)
}

/// The model id of `dir`: `org/name` for a Hugging Face cache snapshot
/// (`…/models--org--name/snapshots/<rev>`), else the directory's own name.
fn model_id(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let repo = dir
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "snapshots"))
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("models--"))
        .map(|n| n.replacen("--", "/", 1));
    repo.unwrap_or_else(|| {
        dir.file_name()
            .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned())
    })
}

/// FNV-1a (64-bit) over the concatenation of `parts`: a content fingerprint, not a
/// security hash.
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_id_reads_the_hugging_face_cache_layout() {
        let snap =
            Path::new("/x/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/abc");
        assert_eq!(model_id(snap), "sentence-transformers/all-MiniLM-L6-v2");
        assert_eq!(model_id(Path::new("/models/my-model")), "my-model");
    }

    #[test]
    fn max_seq_length_prefers_sentence_bert_config_and_caps_at_512() {
        let dir = std::env::temp_dir().join(format!("lprag-fe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            max_seq_length(&dir, br#"{"model_max_length": 1000000}"#),
            512
        );
        assert_eq!(max_seq_length(&dir, br#"{"model_max_length": 128}"#), 128);
        std::fs::write(
            dir.join("sentence_bert_config.json"),
            br#"{"max_seq_length": 256}"#,
        )
        .unwrap();
        assert_eq!(max_seq_length(&dir, br#"{"model_max_length": 128}"#), 256);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_model_file_is_an_io_error_naming_it() {
        let e = FastembedEncoder::from_dir("/nonexistent-lprag-model").unwrap_err();
        assert!(e.to_string().contains("model.onnx"), "{e}");
    }
}

/// A fastembed `TextRerank` (an ONNX cross-encoder such as `BAAI/bge-reranker-base` or
/// ms-marco-MiniLM) behind lprag's [`Reranker`](lprag_core::Reranker) trait, for
/// `lprag::Reranked`. `Send + Sync`: the model sits behind a mutex and runs on tokio's
/// blocking pool. Scores are the model's logits (`logits[:, 0]`), in input order.
#[derive(Clone)]
pub struct FastembedReranker {
    model: Arc<Mutex<fastembed::TextRerank>>,
    name: String,
}

impl std::fmt::Debug for FastembedReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastembedReranker")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl FastembedReranker {
    /// Load `dir/model.onnx` (a cross-encoder export whose output is `logits`) with the
    /// tokenizer files beside it (`tokenizer.json`, `config.json`,
    /// `special_tokens_map.json`, `tokenizer_config.json`). The input limit is
    /// `tokenizer_config.json`'s `model_max_length` (at most 512). A missing file, a
    /// missing `ORT_DYLIB_PATH` or a model ONNX Runtime refuses is an error naming it.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let (onnx, tokenizer_files) = read_model(dir)?;
        let max_tokens = max_seq_length(dir, &tokenizer_files.tokenizer_config_file);
        check_runtime()?;
        let model = fastembed::UserDefinedRerankingModel::new(onnx, tokenizer_files);
        let options = fastembed::RerankInitOptionsUserDefined::new().with_max_length(max_tokens);
        let model = start(dir, || {
            fastembed::TextRerank::try_new_from_user_defined(model, options)
        })?;
        Ok(Self::new(model, format!("fastembed:{}", model_id(dir))))
    }

    /// Wrap a `TextRerank` built by hand (any of fastembed's constructors, its catalogue
    /// models included).
    pub fn new(model: fastembed::TextRerank, name: impl Into<String>) -> Self {
        Self {
            model: Arc::new(Mutex::new(model)),
            name: name.into(),
        }
    }
}

#[async_trait]
impl lprag_core::Reranker for FastembedReranker {
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let model = Arc::clone(&self.model);
        let query = query.to_string();
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        lprag_core::blocking(move || {
            let mut model = model
                .lock()
                .map_err(|_| Error::backend("fastembed", "a previous call panicked"))?;
            let ranked = model
                .rerank(query.clone(), &texts, false, Some(BATCH))
                .map_err(|e| Error::backend("fastembed reranker", e.to_string()))?;
            // fastembed answers sorted by score; put the scores back in input order.
            let mut scores = vec![f32::NAN; texts.len()];
            for r in ranked {
                if let Some(s) = scores.get_mut(r.index) {
                    *s = r.score;
                }
            }
            Ok(scores)
        })
        .await
    }
}
