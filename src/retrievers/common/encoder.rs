//! The encoder an index uses when none is given: the sentence-transformers model when its
//! weights are found locally, else a [`HashingEncoder`] fitted on the chunks; recorded in
//! the index so that opening it rebuilds the same encoder.

use std::path::Path;
use std::sync::Arc;

use lprag_core::{Chunk, Encoder, Result};
use lprag_model::bert::SentenceEncoder;
use lprag_text::{HashingEncoder, HashingEncoderConfig, HashingIdf};
use serde::{Deserialize, Serialize};

/// The encoder [`LpRag`](crate::LpRag) chose by itself when none was given, recorded in
/// the index so [`LpRag::open`](crate::LpRag::open) can rebuild it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefaultEncoder {
    /// A sentence-transformers model (all-MiniLM-L6-v2 unless `LPRAG_MODEL_DIR` points
    /// elsewhere), found by [`lprag_model::bert::resolve_model_dir`].
    SentenceTransformer {
        /// The Hugging Face model id (for example `sentence-transformers/all-MiniLM-L6-v2`),
        /// resolved again on the machine that opens the index (its Hugging Face cache, or
        /// `LPRAG_MODEL_DIR`). Indexes saved before this release hold the directory here;
        /// it is used when it exists, else the id and revision are read from its
        /// `models--org--name/snapshots/REV` path.
        model: String,
        /// The snapshot (commit) of the model in the Hugging Face cache that built the
        /// index, when it came from there; opening with another snapshot logs a warning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<String>,
    },
    /// The offline [`HashingEncoder`] with inverse document frequencies fitted on the
    /// chunks' embedding texts (refitted on load: fitting is deterministic).
    FittedHashing {
        /// Its feature configuration.
        config: HashingEncoderConfig,
    },
}

impl DefaultEncoder {
    /// Choose the default encoder for a corpus whose chunk embedding texts are
    /// `chunk_texts`: the sentence-transformers model when it can be found locally,
    /// otherwise the fitted [`HashingEncoder`]. The second value is the warning to show
    /// when the fallback was taken.
    pub fn choose(chunk_texts: &[String]) -> Result<(Self, Arc<dyn Encoder>, Option<String>)> {
        Self::choose_fitting(|config| HashingIdf::fit(config, chunk_texts))
    }

    /// [`DefaultEncoder::choose`] for `chunks`: the fallback's IDF table is fitted on their
    /// embedding texts made a block at a time ([`HashingIdf::fit_iter`]), never all at once.
    pub fn choose_for_chunks(chunks: &[Chunk]) -> Result<(Self, Arc<dyn Encoder>, Option<String>)> {
        Self::choose_fitting(|config| {
            HashingIdf::fit_iter(config, chunks.iter().map(Chunk::embedding_text))
        })
    }

    /// The sentence-transformers model when it can be found, else the hashing encoder
    /// with the IDF table `fit` gives for the default configuration.
    fn choose_fitting(
        fit: impl FnOnce(&HashingEncoderConfig) -> Result<HashingIdf>,
    ) -> Result<(Self, Arc<dyn Encoder>, Option<String>)> {
        match SentenceEncoder::load(None) {
            Ok(enc) => {
                let spec = DefaultEncoder::SentenceTransformer {
                    model: enc.name().to_string(),
                    revision: hub_snapshot(enc.model_dir()).map(|(_, rev)| rev),
                };
                Ok((spec, Arc::new(enc), None))
            }
            Err(e) => {
                let config = HashingEncoderConfig::default();
                let enc = HashingEncoder::new(config.clone())?.with_idf(fit(&config)?)?;
                let warning = format!(
                    "using the offline HashingEncoder, which retrieves markedly worse than \
                     all-MiniLM-L6-v2: {e}"
                );
                Ok((
                    DefaultEncoder::FittedHashing { config },
                    Arc::new(enc),
                    Some(warning),
                ))
            }
        }
    }

    /// Rebuild this encoder for an index whose chunk embedding texts are `chunk_texts`.
    pub fn rebuild(&self, chunk_texts: &[String]) -> Result<Arc<dyn Encoder>> {
        Ok(match self {
            DefaultEncoder::SentenceTransformer { model, revision } => {
                let path = Path::new(model);
                if path.is_dir() {
                    return Ok(Arc::new(SentenceEncoder::load(Some(model))?));
                }
                // An id, or the cache path of an index saved on another machine.
                let (id, revision) = match hub_snapshot(path) {
                    Some((id, rev)) => (id, Some(rev)),
                    None => (model.clone(), revision.clone()),
                };
                let enc = SentenceEncoder::load(Some(&id))?;
                let found = hub_snapshot(enc.model_dir()).map(|(_, rev)| rev);
                if let (Some(want), Some(have)) = (&revision, &found) {
                    if want != have {
                        tracing::warn!(
                            target: "lprag",
                            model = %id,
                            built_with = %want,
                            found = %have,
                            "the index was built with another snapshot of its encoder"
                        );
                    }
                }
                Arc::new(enc)
            }
            DefaultEncoder::FittedHashing { config } => {
                Arc::new(HashingEncoder::fitted(config.clone(), chunk_texts)?)
            }
        })
    }
}

/// `(model id, revision)` of a Hugging Face cache snapshot directory
/// (`…/models--org--name/snapshots/REV`), or `None` for any other path.
fn hub_snapshot(dir: &Path) -> Option<(String, String)> {
    let rev = dir.file_name()?.to_str()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    let repo = snapshots.parent()?.file_name()?.to_str()?;
    let id = repo.strip_prefix("models--")?.replacen("--", "/", 1);
    (!id.is_empty() && !rev.is_empty()).then(|| (id, rev.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_snapshot_paths_give_id_and_revision() {
        let p = Path::new(
            "/root/.cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/c9745ed1",
        );
        assert_eq!(
            hub_snapshot(p),
            Some((
                "sentence-transformers/all-MiniLM-L6-v2".to_string(),
                "c9745ed1".to_string()
            ))
        );
        assert_eq!(hub_snapshot(Path::new("/models/minilm")), None);
        assert_eq!(
            hub_snapshot(Path::new("sentence-transformers/all-MiniLM-L6-v2")),
            None
        );
        // An index saved elsewhere names a path that does not exist here: the id is used.
        let spec = DefaultEncoder::SentenceTransformer {
            model: "/nowhere/models--org--name/snapshots/abc".into(),
            revision: None,
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert!(!json.contains("revision"), "{json}");
    }
}
