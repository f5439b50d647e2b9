//! Heuristic query generator. (stub: being written)
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use crate::{Chunk, ChunkId, QueryGenerator, Result, SyntheticQuery};

/// Configuration of [`HeuristicQueryGenerator`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HeuristicQueryGeneratorConfig {}

/// Rule-based question writer.
#[derive(Debug, Clone, Default)]
pub struct HeuristicQueryGenerator { /// config
    pub config: HeuristicQueryGeneratorConfig }

#[async_trait]
impl QueryGenerator for HeuristicQueryGenerator {
    fn name(&self) -> &str { "heuristic" }
    async fn generate(&self, _chunks: &[Chunk], _batches: &[Vec<ChunkId>]) -> Result<Vec<SyntheticQuery>> { todo!() }
}
