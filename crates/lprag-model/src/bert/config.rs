//! The JSON files of a Hugging Face / sentence-transformers model directory.

use std::path::Path;

use lprag_core::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Read and parse a JSON file: [`Error::Io`] when it cannot be read (missing included),
/// [`Error::Format`] naming the file when it does not parse as `T`.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))
}

/// Like [`read_json`], but `Ok(None)` when the file does not exist.
pub(crate) fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    if !path.exists() {
        return Ok(None);
    }
    read_json(path).map(Some)
}

/// The feed-forward activation of a BERT layer (`hidden_act` in `config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HiddenAct {
    /// Exact GELU, `x·Φ(x)` with the error function (`"gelu"`, BERT's and MiniLM's).
    #[serde(rename = "gelu")]
    Gelu,
    /// The tanh approximation of GELU (`"gelu_new"`, `"gelu_pytorch_tanh"`, `"gelu_fast"`).
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh", alias = "gelu_fast")]
    #[serde(rename = "gelu_tanh")]
    GeluTanh,
    /// `max(x, 0)` (`"relu"`).
    #[serde(rename = "relu")]
    Relu,
}

/// The architecture of a BERT encoder, as in Hugging Face's `config.json`.
///
/// Missing fields take the values of Hugging Face's `BertConfig` defaults (bert-base).
/// Fields of `config.json` that do not concern inference (dropout, initializer range...)
/// are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BertConfig {
    /// Number of WordPiece tokens (rows of the word embedding).
    pub vocab_size: usize,
    /// Width of every hidden state.
    pub hidden_size: usize,
    /// Number of encoder layers.
    pub num_hidden_layers: usize,
    /// Number of attention heads; must divide `hidden_size`.
    pub num_attention_heads: usize,
    /// Width of the feed-forward block.
    pub intermediate_size: usize,
    /// Feed-forward activation.
    pub hidden_act: HiddenAct,
    /// Longest input the position embedding covers.
    pub max_position_embeddings: usize,
    /// Number of token types (segments).
    pub type_vocab_size: usize,
    /// Epsilon of every layer normalisation.
    pub layer_norm_eps: f64,
    /// Id of the padding token.
    pub pad_token_id: u32,
    /// Kind of position embedding; only `"absolute"` is supported.
    pub position_embedding_type: String,
}

impl Default for BertConfig {
    fn default() -> Self {
        Self {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: HiddenAct::Gelu,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: "absolute".into(),
        }
    }
}

impl BertConfig {
    /// Read `config.json`, then [`BertConfig::validate`] it.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, [`Error::Format`] naming it when it is
    /// not valid JSON or describes an unsupported or inconsistent model.
    pub fn from_file(path: &Path) -> Result<Self> {
        let cfg: Self = read_json(path)?;
        cfg.validate().map_err(|m| Error::format(path, m))?;
        Ok(cfg)
    }

    /// Check that the numbers make a model this crate can run; the message says what
    /// is wrong.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported (only \"absolute\")",
                self.position_embedding_type
            ));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(format!(
                "layer_norm_eps must be positive, got {}",
                self.layer_norm_eps
            ));
        }
        Ok(())
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// `sentence_bert_config.json`: how sentence-transformers feeds the transformer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SentenceBertConfig {
    /// Inputs are truncated to this many tokens (special tokens included).
    #[serde(default)]
    pub max_seq_length: Option<usize>,
    /// Lower-case the text before tokenising.
    #[serde(default)]
    pub do_lower_case: bool,
}

/// `1_Pooling/config.json` of sentence-transformers: which token poolings to concatenate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolingConfig {
    /// Width of the token embeddings being pooled.
    #[serde(default)]
    pub word_embedding_dimension: Option<usize>,
    /// The `[CLS]` token's hidden state.
    #[serde(default)]
    pub pooling_mode_cls_token: bool,
    /// Mean over non-padding tokens.
    #[serde(default)]
    pub pooling_mode_mean_tokens: bool,
    /// Element-wise maximum over non-padding tokens.
    #[serde(default)]
    pub pooling_mode_max_tokens: bool,
    /// Sum over non-padding tokens divided by the square root of their number.
    #[serde(default)]
    pub pooling_mode_mean_sqrt_len_tokens: bool,
    /// Position-weighted mean (not supported).
    #[serde(default)]
    pub pooling_mode_weightedmean_tokens: bool,
    /// The last token's hidden state (not supported).
    #[serde(default)]
    pub pooling_mode_lasttoken: bool,
}

impl Default for PoolingConfig {
    /// Mean pooling, sentence-transformers' default.
    fn default() -> Self {
        Self {
            word_embedding_dimension: None,
            pooling_mode_cls_token: false,
            pooling_mode_mean_tokens: true,
            pooling_mode_max_tokens: false,
            pooling_mode_mean_sqrt_len_tokens: false,
            pooling_mode_weightedmean_tokens: false,
            pooling_mode_lasttoken: false,
        }
    }
}

impl PoolingConfig {
    /// Read a pooling `config.json` and check that it asks for supported modes only.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::Format`] naming the file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let cfg: Self = read_json(path)?;
        cfg.validate().map_err(|m| Error::format(path, m))?;
        Ok(cfg)
    }

    /// Check the modes: at least one, none unsupported.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.pooling_mode_weightedmean_tokens || self.pooling_mode_lasttoken {
            return Err("weighted-mean and last-token pooling are not supported".into());
        }
        if self.modes() == 0 {
            return Err("no pooling mode is enabled".into());
        }
        Ok(())
    }

    /// Number of enabled (concatenated) modes.
    pub fn modes(&self) -> usize {
        [
            self.pooling_mode_cls_token,
            self.pooling_mode_max_tokens,
            self.pooling_mode_mean_tokens,
            self.pooling_mode_mean_sqrt_len_tokens,
        ]
        .iter()
        .filter(|&&m| m)
        .count()
    }
}

/// One entry of `modules.json`.
#[derive(Debug, Clone, Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// What `modules.json` says happens after the transformer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Pipeline {
    /// Directory of the pooling module, relative to the model directory.
    pub pooling_dir: Option<String>,
    /// An L2 normalisation module follows the pooling.
    pub normalize: bool,
}

impl Pipeline {
    /// Read `modules.json`; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`Error::Format`] naming the file for bad JSON and for modules other than
    /// Transformer, Pooling and Normalize (a Dense projection, say), which this encoder
    /// cannot run.
    pub fn from_file(path: &Path) -> Result<Option<Self>> {
        let Some(entries) = read_json_opt::<Vec<ModuleEntry>>(path)? else {
            return Ok(None);
        };
        let mut p = Pipeline::default();
        let mut transformer = false;
        for e in entries {
            let kind = e.kind.rsplit('.').next().unwrap_or(&e.kind);
            match kind {
                "Transformer" => transformer = true,
                "Pooling" => p.pooling_dir = Some(e.path),
                "Normalize" => p.normalize = true,
                other => {
                    return Err(Error::format(
                        path,
                        format!("module type {other:?} ({}) is not supported", e.kind),
                    ))
                }
            }
        }
        if !transformer {
            return Err(Error::format(path, "no Transformer module"));
        }
        Ok(Some(p))
    }
}
