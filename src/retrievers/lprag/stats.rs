//! What a build reports ([`IndexStats`]) and the progress wrapper that collects its warnings.

use std::collections::BTreeMap;
use std::sync::Arc;

use lprag_core::{Progress, TrainReport};
use lprag_llm::StageUsage;
use serde::{Deserialize, Serialize};

/// What indexing produced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexStats {
    /// Documents given.
    pub documents: usize,
    /// Chunks made.
    pub chunks: usize,
    /// Synthetic queries written.
    pub queries: usize,
    /// Of [`IndexStats::queries`], the labelled questions given to
    /// [`LpRagBuilder::labelled`](crate::LpRagBuilder::labelled) or [`LpRagBuilder::labelled_only`](crate::LpRagBuilder::labelled_only).
    #[serde(default)]
    pub labelled_queries: usize,
    /// Chunk–chunk edges (mutual k-NN and bridges).
    pub chunk_edges: usize,
    /// Of those, bridge edges.
    #[serde(default)]
    pub bridge_edges: usize,
    /// Chunks with no mutual k-NN neighbour.
    pub isolated_chunks: usize,
    /// Query–chunk edges.
    pub query_edges: usize,
    /// Seconds per stage: chunk, embed, graph, queries, train.
    pub seconds: Vec<(String, f64)>,
    /// The training report.
    pub train: TrainReport,
    /// Warnings raised while indexing (for example the encoder fallback).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// LLM calls and tokens per stage (`"chunking"`, `"queries"`) when the index was built
    /// with [`LpRagBuilder::llm`](crate::LpRagBuilder::llm); empty otherwise.
    #[serde(default)]
    pub llm_usage: BTreeMap<String, StageUsage>,
    /// Stages loaded from [`LpRagBuilder::work_dir`](crate::LpRagBuilder::work_dir) instead of computed (`"chunk"`,
    /// `"embed"`, `"graph"`, `"queries"`, `"query-embed"`).
    #[serde(default)]
    pub reused_stages: Vec<String>,
    /// What [`Anchor::Selected`](super::Anchor::Selected) measured on the held-out
    /// questions and the weight it kept (`None` for the other anchors and for indexes
    /// saved before it existed, which rank with the predictor alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<super::AnchorSelection>,
}

/// Forwards to another [`Progress`] and keeps a copy of every warning.
pub(super) struct RecordingProgress {
    inner: Arc<dyn Progress>,
    warnings: std::sync::Mutex<Vec<String>>,
}

impl RecordingProgress {
    pub(super) fn new(inner: Arc<dyn Progress>) -> Self {
        Self {
            inner,
            warnings: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(super) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Progress for RecordingProgress {
    fn start(&self, stage: &str, total: Option<u64>) {
        self.inner.start(stage, total);
    }
    fn update(&self, stage: &str, done: u64, message: &str) {
        self.inner.update(stage, done, message);
    }
    fn tick(&self, stage: &str, message: &str) {
        self.inner.tick(stage, message);
    }
    fn finish(&self, stage: &str) {
        self.inner.finish(stage);
    }
    fn warn(&self, message: &str) {
        self.inner.warn(message);
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message.to_string());
    }
}
