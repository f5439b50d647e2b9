//! The saved state of a QCG-RAG index (`qcg.json`): its fields, float arrays and checks.

use lprag_core::{Chunk, Embeddings, SyntheticQuery};
use serde::{Deserialize, Serialize};

use super::{QcgConfig, QcgStats};

/// Version of the file written by [`QcgRag::save`](super::QcgRag::save).
pub const QCG_FORMAT_VERSION: u32 = 1;
pub(super) const QCG_FILE: &str = "qcg.json";
/// Where a save may write (its file and nothing else of the directory).
pub(super) const QCG_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a QCG-RAG index", QCG_FILE);

/// What a QCG-RAG index saves, and the state of a [`super::QcgRag`].
#[derive(Serialize, Deserialize)]
pub struct QcgState {
    pub(crate) version: u32,
    pub(crate) encoder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) encoder_fingerprint: Option<String>,
    pub(crate) config: QcgConfig,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) queries: Vec<SyntheticQuery>,
    pub(crate) query_emb: Embeddings,
    pub(crate) chunk_emb: Embeddings,
    pub(crate) neighbors: Vec<Vec<u32>>,
    pub(crate) stats: QcgStats,
    /// Each chunk's document, made at the first query that needs it (not saved).
    #[serde(skip)]
    pub(crate) parents: std::sync::OnceLock<std::sync::Arc<crate::retrievers::common::Parents>>,
}

impl crate::retrievers::common::FloatFields for QcgState {
    fn float_fields(&self) -> Vec<(String, &[f32])> {
        vec![
            ("chunk_emb".into(), self.chunk_emb.as_slice()),
            ("query_emb".into(), self.query_emb.as_slice()),
        ]
    }
}

impl crate::retrievers::common::SavedState for QcgState {
    crate::retrievers::common::saved_state_header!(QCG_FORMAT_VERSION, chunk_emb);

    fn check(&self) -> std::result::Result<(), String> {
        if self.neighbors.len() != self.queries.len()
            || self.query_emb.rows() != self.queries.len()
            || self.chunk_emb.rows() != self.chunks.len()
        {
            return Err("inconsistent sizes".into());
        }
        if self.query_emb.dim() != self.chunk_emb.dim() {
            return Err(format!(
                "query embeddings are {}-d, chunk embeddings {}-d",
                self.query_emb.dim(),
                self.chunk_emb.dim()
            ));
        }
        let (nq, nc) = (self.queries.len(), self.chunks.len());
        for (i, q) in self.queries.iter().enumerate() {
            if let Some(&c) = q.chunk_ids.iter().find(|&&c| c >= nc) {
                return Err(format!(
                    "query {i} links chunk {c}, out of range for {nc} chunks"
                ));
            }
        }
        for (i, list) in self.neighbors.iter().enumerate() {
            if let Some(&j) = list.iter().find(|&&j| j as usize >= nq) {
                return Err(format!(
                    "query {i} has neighbour {j}, out of range for {nq} queries"
                ));
            }
        }
        self.config.validate().map_err(|e| e.to_string())
    }
}
