//! The saved state of a LeSeGR index (`lesegr.json`): its fields, float arrays and checks.

use std::sync::Arc;

use lprag_core::{Chunk, Embeddings, SparseEncoder, SparseIndex};
use lprag_model::lesegr::{InEdges, LesegrGate};
use serde::{Deserialize, Serialize};

use super::{LesegrConfig, LesegrStats};

/// Version of the file written by [`LesegrRag::save`](super::LesegrRag::save).
pub const LESEGR_FORMAT_VERSION: u32 = 1;
pub(super) const LESEGR_FILE: &str = "lesegr.json";
/// Where a save may write (its file and nothing else of the directory).
pub(super) const LESEGR_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a LeSeGR index", LESEGR_FILE);

/// What a LeSeGR index saves, and the state of a [`super::LesegrRag`].
#[derive(Serialize, Deserialize)]
pub struct LesegrState {
    pub(crate) version: u32,
    pub(crate) encoder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) encoder_fingerprint: Option<String>,
    pub(crate) sparse: String,
    pub(crate) config: LesegrConfig,
    pub(crate) chunks: Vec<Chunk>,
    /// Normalised chunk embeddings.
    pub(crate) emb: Embeddings,
    pub(crate) graph: InEdges,
    pub(crate) alpha: Vec<f32>,
    /// `M`, row-major, for the trained variant.
    pub(crate) transform: Option<Vec<f32>>,
    /// The trained variant's gate network, which gates the edges an update adds (indexes
    /// saved before it was kept have none and cannot be updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gate: Option<LesegrGate>,
    /// The `(citing, cited)` document links the index was built with, when given; `None`
    /// when the links are document k-NN (recomputed by every update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) citations: Option<Vec<(String, String)>>,
    pub(crate) stats: LesegrStats,
}

impl crate::retrievers::common::FloatFields for LesegrState {
    fn float_fields(&self) -> Vec<(String, &[f32])> {
        let mut out = vec![
            ("emb".to_string(), self.emb.as_slice()),
            ("alpha".to_string(), self.alpha.as_slice()),
        ];
        if let Some(t) = &self.transform {
            out.push(("transform".to_string(), t.as_slice()));
        }
        if let Some(g) = &self.gate {
            for (i, l) in g.layers.iter().enumerate() {
                out.push((format!("gate.layers[{i}].weight"), l.weight.as_slice()));
                out.push((format!("gate.layers[{i}].bias"), l.bias.as_slice()));
            }
        }
        if let Some(t) = &self.stats.train {
            out.push((
                "stats.train.train_loss".to_string(),
                t.train_loss.as_slice(),
            ));
            out.push(("stats.train.val_loss".to_string(), t.val_loss.as_slice()));
        }
        out
    }
}

impl crate::retrievers::common::SavedState for LesegrState {
    crate::retrievers::common::saved_state_header!(LESEGR_FORMAT_VERSION, emb);

    fn check(&self) -> std::result::Result<(), String> {
        let d = self.emb.dim();
        if self.emb.rows() != self.chunks.len()
            || self.graph.num_nodes() != self.chunks.len()
            || self.alpha.len() != self.graph.num_edges()
            || self.transform.as_ref().is_some_and(|m| m.len() != d * d)
            || self.gate.as_ref().is_some_and(|g| g.dim != d)
            || self
                .graph
                .sources()
                .iter()
                .any(|&s| s as usize >= self.chunks.len())
        {
            return Err("inconsistent sizes".into());
        }
        if let Some(g) = &self.gate {
            g.validate().map_err(|e| e.to_string())?;
        }
        // The configuration drives retrieval (the layer count is the number of
        // propagation steps per query): the builder's checks apply to a loaded one too.
        self.config.validate().map_err(|e| e.to_string())
    }
}

/// What a [`super::LesegrRag`] rebuilds at load: its sparse encoder and index (refitted on the
/// chunks, and by every update).
#[derive(Clone)]
pub struct LesegrRuntime {
    pub(crate) sparse_encoder: Arc<dyn SparseEncoder>,
    pub(crate) sparse: Arc<dyn SparseIndex>,
}
