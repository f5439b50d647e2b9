//! The saved state of a G²RAG index (`g2.json`): its fields, float arrays and checks.

use lprag_core::{Chunk, ChunkId, Embeddings};
use serde::{Deserialize, Serialize};

use super::{Community, G2Config, G2Stats};

/// Version of the file written by [`G2Rag::save`](super::G2Rag::save).
pub const G2_FORMAT_VERSION: u32 = 1;
pub(super) const G2_FILE: &str = "g2.json";
/// Where a save may write (its file and nothing else of the directory).
pub(super) const G2_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a G²RAG index", G2_FILE);

/// What a G²RAG index saves, and the state of a [`super::G2Rag`].
#[derive(Serialize, Deserialize)]
pub struct G2State {
    pub(crate) version: u32,
    pub(crate) encoder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) encoder_fingerprint: Option<String>,
    pub(crate) config: G2Config,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) chunk_emb: Embeddings,
    pub(crate) communities: Vec<Community>,
    pub(crate) outliers: Vec<ChunkId>,
    pub(crate) stats: G2Stats,
}

impl crate::retrievers::common::FloatFields for G2State {
    fn float_fields(&self) -> Vec<(String, &[f32])> {
        let mut out = vec![("chunk_emb".to_string(), self.chunk_emb.as_slice())];
        for (i, c) in self.communities.iter().enumerate() {
            out.push((format!("communities[{i}].centroid"), c.centroid.as_slice()));
        }
        out
    }
}

impl crate::retrievers::common::SavedState for G2State {
    crate::retrievers::common::saved_state_header!(G2_FORMAT_VERSION, chunk_emb);

    fn check(&self) -> std::result::Result<(), String> {
        let n = self.chunks.len();
        let dim = self.chunk_emb.dim();
        if self.chunk_emb.rows() != n
            || self.communities.iter().any(|c| {
                c.centroid.len() != dim || c.members.is_empty() || c.members.iter().any(|&m| m >= n)
            })
            || self.outliers.iter().any(|&m| m >= n)
        {
            return Err("inconsistent sizes".into());
        }
        self.config.validate().map_err(|e| e.to_string())
    }
}
