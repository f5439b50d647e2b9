//! [`LiveIndex`]: an index that serves queries while documents are written into it. The
//! facade's `lprag::Live` implements it; the rig and swiftide adapters write through it, so
//! a rig `InsertDocuments` call or a swiftide indexing pipeline feeds an index that keeps
//! answering.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{Document, Result, Retriever};

/// An index that answers from snapshots and takes document writes meanwhile.
#[async_trait]
pub trait LiveIndex: Send + Sync {
    /// A short name (the served retriever's, say).
    fn name(&self) -> &str;

    /// The index as it is now: a complete retriever that later writes do not change.
    fn snapshot(&self) -> Arc<dyn Retriever>;

    /// Add `documents`, replacing those whose id is already indexed, in one update that
    /// queries never wait for. Nothing changes when it fails.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when an id repeats in `documents`; those of the
    /// chunker, the encoder and the model.
    async fn upsert(&self, documents: &[Document]) -> Result<UpsertReport>;
}

/// What one [`LiveIndex::upsert`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertReport {
    /// Documents that were not in the index.
    pub added: usize,
    /// Documents that replaced one with the same id.
    pub replaced: usize,
    /// Chunks in the index after the update.
    pub chunks: usize,
}
