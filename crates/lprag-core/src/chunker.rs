//! Offline chunkers. (stub: being written)
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use crate::{Chunk, Chunker, Document, Result};

/// Configuration of [`SentenceChunker`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SentenceChunkerConfig {}

/// Splits documents into sentence/clause chunks.
#[derive(Debug, Clone, Default)]
pub struct SentenceChunker { /// config
    pub config: SentenceChunkerConfig }

#[async_trait]
impl Chunker for SentenceChunker {
    fn name(&self) -> &str { "sentence" }
    async fn chunk(&self, _documents: &[Document]) -> Result<Vec<Chunk>> { todo!() }
}

/// One chunk per document.
#[derive(Debug, Clone, Default)]
pub struct PassageChunker;

#[async_trait]
impl Chunker for PassageChunker {
    fn name(&self) -> &str { "passage" }
    async fn chunk(&self, _documents: &[Document]) -> Result<Vec<Chunk>> { todo!() }
}
