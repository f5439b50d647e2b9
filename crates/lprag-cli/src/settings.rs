//! What an index directory records about its build (`lprag.json`), and the choices of
//! the command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lprag::core::dirs::{write_atomic, DirSpec, TMP_PREFIX};
use lprag::{Encoder, Error, HashingEncoder, HashingEncoderConfig, Result, SentenceEncoder};
use serde::{Deserialize, Serialize};

use crate::DeviceArg;

/// The settings file of an index directory.
pub const SETTINGS_FILE: &str = "lprag.json";
/// The retriever's saved index, inside the index directory.
pub const INDEX_SUBDIR: &str = "index";
/// LP-RAG's resumable work directory, inside the index directory.
pub const WORK_SUBDIR: &str = "work";
/// The version of [`Settings`].
pub const SETTINGS_VERSION: u32 = 1;

/// An index directory of the `lprag` command: its settings file, the saved index and the
/// work directory, nothing else.
pub const INDEX_DIR: DirSpec = DirSpec {
    kind: "an lprag command index",
    marker: SETTINGS_FILE,
    marker_key: Some("lprag_index_version"),
    owns: Some(|name| {
        name == SETTINGS_FILE
            || name == INDEX_SUBDIR
            || name == WORK_SUBDIR
            || name.starts_with(TMP_PREFIX)
    }),
};

/// The retrievers the command builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RetrieverKind {
    /// LP-RAG: link prediction on a chunk–query graph (trains a GNN).
    Lprag,
    /// QCG-RAG: query-centric graph of generated questions.
    Qcg,
    /// CG-RAG's LeSeGR: lexical-semantic graph retrieval.
    Lesegr,
    /// GFM-RAG: a graph foundation model over an entity graph.
    Gfm,
    /// G²RAG: communities of chunks (rebuilt by `sync`; no in-place updates).
    G2,
    /// Dense search: cosine over chunk embeddings.
    Dense,
    /// BM25 keyword search.
    Bm25,
    /// Dense and BM25 fused by reciprocal rank.
    Hybrid,
}

/// The encoder choices of `lprag index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EncoderChoice {
    /// MiniLM when its weights are found, else the hashing encoder (with a warning).
    Auto,
    /// all-MiniLM-L6-v2 (or `--model`), from LPRAG_MODEL_DIR or the Hugging Face cache.
    Minilm,
    /// The offline hashing encoder: no weights, weaker retrieval.
    Hashing,
}

/// The encoder an index was built with, enough to rebuild it when the index is opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EncoderSpec {
    /// A sentence-transformers model: a directory or a Hugging Face id.
    SentenceTransformer {
        /// What [`SentenceEncoder::load`] was given (`None`: its default model).
        model: Option<String>,
    },
    /// The unfitted hashing encoder (stable across updates: no corpus statistics).
    Hashing {
        /// Its configuration.
        config: HashingEncoderConfig,
    },
}

impl EncoderSpec {
    /// Resolve a command-line choice: `auto` becomes whichever encoder is available now.
    /// A sentence-transformers model runs on `on.device`, in fp16 with `on.fp16` where the
    /// CPU has it (neither is part of the spec: an index built on a GPU opens on the CPU,
    /// one built in fp16 opens in f32, and the other way round).
    pub fn choose(
        choice: EncoderChoice,
        model: Option<String>,
        on: DeviceArg,
    ) -> Result<(Self, Arc<dyn Encoder>)> {
        // A device this build cannot run on is an error, not a reason to fall back.
        let device = on.device.to_burn()?;
        let minilm = |model: Option<String>| -> Result<(Self, Arc<dyn Encoder>)> {
            let enc =
                SentenceEncoder::load_on(model.as_deref(), &device)?.with_fp16_kernels(on.fp16);
            Ok((EncoderSpec::SentenceTransformer { model }, Arc::new(enc)))
        };
        match choice {
            EncoderChoice::Minilm => minilm(model),
            EncoderChoice::Hashing => Self::hashing(),
            EncoderChoice::Auto => match minilm(model) {
                Ok(found) => Ok(found),
                Err(e) => {
                    tracing::warn!(
                        "using the offline hashing encoder, which retrieves markedly worse \
                         than all-MiniLM-L6-v2: {e}"
                    );
                    Self::hashing()
                }
            },
        }
    }

    fn hashing() -> Result<(Self, Arc<dyn Encoder>)> {
        let config = HashingEncoderConfig::default();
        let enc = HashingEncoder::new(config.clone())?;
        Ok((EncoderSpec::Hashing { config }, Arc::new(enc)))
    }

    /// The encoder again, on this machine (a sentence-transformers model on `on.device`,
    /// in fp16 with `on.fp16` where the CPU has it).
    pub fn build(&self, on: DeviceArg) -> Result<Arc<dyn Encoder>> {
        Ok(match self {
            EncoderSpec::SentenceTransformer { model } => Arc::new(
                SentenceEncoder::load_on(model.as_deref(), &on.device.to_burn()?)?
                    .with_fp16_kernels(on.fp16),
            ),
            EncoderSpec::Hashing { config } => Arc::new(HashingEncoder::new(config.clone())?),
        })
    }
}

/// The LLM an index was built with (no key: keys come from the environment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// The model name.
    pub model: String,
    /// The base URL given on the command line (credentials removed), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// `lprag.json`: what was built and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// [`SETTINGS_VERSION`] (also the directory's marker key).
    pub lprag_index_version: u32,
    /// The retriever.
    pub retriever: RetrieverKind,
    /// The encoder.
    pub encoder: EncoderSpec,
    /// The chunker's token bound.
    pub max_tokens: usize,
    /// The folder the index was built from (absolute).
    pub source: PathBuf,
    /// Files over this size are skipped.
    pub max_file_bytes: u64,
    /// LP-RAG's training epochs, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<usize>,
    /// The LLM, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
}

impl Settings {
    /// Read `dir/lprag.json`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `dir` is not an index of the command, or its settings
    /// cannot be parsed; [`Error::Io`].
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(SETTINGS_FILE);
        let bytes = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::invalid(
                    dir.display().to_string(),
                    format!(
                        "not an lprag index (no {SETTINGS_FILE}); create one with `lprag index`"
                    ),
                )
            } else {
                Error::io(&path, e)
            }
        })?;
        let s: Settings = serde_json::from_slice(&bytes).map_err(|e| {
            Error::invalid(path.display().to_string(), format!("cannot be parsed: {e}"))
        })?;
        if s.lprag_index_version > SETTINGS_VERSION {
            return Err(Error::invalid(
                path.display().to_string(),
                format!(
                    "written by a newer lprag (settings version {}, this one reads {})",
                    s.lprag_index_version, SETTINGS_VERSION
                ),
            ));
        }
        Ok(s)
    }

    /// Write `dir/lprag.json` atomically.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn write(&self, dir: &Path) -> Result<()> {
        let body = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::invalid("lprag.json", e.to_string()))?;
        write_atomic(&dir.join(SETTINGS_FILE), &body)
    }
}

/// `dir/index`.
pub fn index_path(dir: &Path) -> PathBuf {
    dir.join(INDEX_SUBDIR)
}
