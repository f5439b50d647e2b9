//! Feature-hashing encoder. (stub: being written)
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use crate::{Embeddings, Encoder, Result};

/// Configuration of [`HashingEncoder`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HashingEncoderConfig { /// width
    pub dim: usize }
impl Default for HashingEncoderConfig { fn default() -> Self { Self { dim: 1024 } } }

/// Feature-hashed word + char n-gram vectors.
#[derive(Debug, Clone, Default)]
pub struct HashingEncoder { /// config
    pub config: HashingEncoderConfig }

#[async_trait]
impl Encoder for HashingEncoder {
    fn name(&self) -> &str { "hashing" }
    fn dimension(&self) -> usize { self.config.dim }
    async fn embed(&self, _texts: &[String]) -> Result<Embeddings> { todo!() }
}
