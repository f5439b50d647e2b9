//! [`TokenCounter`]: a model directory's tokenizer alone, to count what the encoder reads.

use std::path::{Path, PathBuf};

use lprag_core::{Error, Result};
use tokenizers::{PostProcessor, Tokenizer};

use super::config::{read_json_opt, BertConfig, SentenceBertConfig};

/// How many tokens a sentence-transformers model directory's encoder reads from a text,
/// and how many it can read, without its weights: `tokenizer.json`, `config.json` and
/// `sentence_bert_config.json` only. [`SentenceEncoder`](super::SentenceEncoder) counts
/// with the same rules ([`lprag_core::Encoder::count_tokens`]), so a chunker bounded by a
/// `TokenCounter` cuts passages exactly where one bounded by the encoder does; e.g. a
/// machine that has the tokenizer but not the weights (`lprag-eval
/// --embedding-cache-only --model-dir DIR`).
#[derive(Clone)]
pub struct TokenCounter {
    /// The tokenizer without padding or truncation.
    tokenizer: Tokenizer,
    max_seq_length: usize,
    do_lower_case: bool,
    dir: PathBuf,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("dir", &self.dir)
            .field("max_seq_length", &self.max_seq_length)
            .field("do_lower_case", &self.do_lower_case)
            .finish()
    }
}

impl TokenCounter {
    /// Read the counting rules of the model in `dir`: `max_seq_length` from
    /// `sentence_bert_config.json` (else `max_position_embeddings` of `config.json`,
    /// and capped by it), `do_lower_case` from the same file, the tokenizer from
    /// `tokenizer.json`. `model.safetensors` is not read and need not exist.
    ///
    /// # Errors
    /// [`Error::Io`] naming the missing or unreadable file; [`Error::Format`] naming the
    /// malformed one, or `sentence_bert_config.json` when its `max_seq_length` leaves no
    /// room beside the special tokens.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let config = BertConfig::from_file(&dir.join("config.json"))?;
        Self::with_config(dir, &config)
    }

    /// [`TokenCounter::from_dir`] with `config.json` already read.
    pub(crate) fn with_config(dir: &Path, config: &BertConfig) -> Result<Self> {
        let sbert_path = dir.join("sentence_bert_config.json");
        let sbert: Option<SentenceBertConfig> = read_json_opt(&sbert_path)?;
        let max_seq_length = sbert
            .as_ref()
            .and_then(|s| s.max_seq_length)
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings);
        let do_lower_case = sbert.as_ref().is_some_and(|s| s.do_lower_case);

        let tokenizer_path = dir.join("tokenizer.json");
        let bytes = std::fs::read(&tokenizer_path).map_err(|e| Error::io(&tokenizer_path, e))?;
        let mut tokenizer = Tokenizer::from_bytes(&bytes)
            .map_err(|e| Error::format(&tokenizer_path, e.to_string()))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| Error::format(&tokenizer_path, e.to_string()))?;
        let special = tokenizer
            .get_post_processor()
            .map(|p| p.added_tokens(false))
            .unwrap_or(0);
        if max_seq_length <= special {
            return Err(Error::format(
                &sbert_path,
                format!("max_seq_length {max_seq_length} leaves no room beside {special} special tokens"),
            ));
        }
        Ok(Self {
            tokenizer,
            max_seq_length,
            do_lower_case,
            dir: dir.to_path_buf(),
        })
    }

    /// The most tokens the encoder reads from one text, special tokens included; the
    /// rest is cut.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Whether texts are lower-cased before tokenisation (`sentence_bert_config.json`).
    pub fn do_lower_case(&self) -> bool {
        self.do_lower_case
    }

    /// The tokenizer without padding or truncation.
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Tokens of `text` as the encoder would read it before cutting, special tokens
    /// included; `None` when the tokenizer fails on it.
    pub fn count(&self, text: &str) -> Option<usize> {
        let lowered;
        let text = if self.do_lower_case {
            lowered = text.to_lowercase();
            lowered.as_str()
        } else {
            text
        };
        self.tokenizer
            .encode_fast(text, true)
            .ok()
            .map(|e| e.get_ids().len())
    }
}
