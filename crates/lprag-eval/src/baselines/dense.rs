//! Exact flat cosine search.

use std::sync::Arc;

use async_trait::async_trait;
use lprag::core::dot;
use lprag_core::{
    Chunk, Document, Embeddings, Encoder, Error, Result, Retriever, ScoredChunk, Selection,
};

use super::{check_chunks, passage_chunks, select};

/// Dense retrieval by exact (brute-force) cosine similarity: the "naive RAG" baseline.
///
/// At build time every chunk's [`Chunk::embedding_text`] is embedded with the encoder and
/// the rows are L2-normalised; a query is embedded with the same encoder and scored
/// against every row by a dot product (= cosine similarity, in `[-1, 1]`). Cost per query:
/// one encoder call plus `chunks × dimension` multiply-adds; no approximation, so it is the
/// reference any approximate index is measured against.
///
/// Scoring runs inside the `async fn` without `spawn_blocking`: at benchmark sizes (up to
/// ~10⁵ chunks × 10³ dimensions) it takes milliseconds.
pub struct DenseRetriever {
    chunks: Vec<Chunk>,
    vectors: Embeddings,
    encoder: Arc<dyn Encoder>,
}

impl std::fmt::Debug for DenseRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseRetriever")
            .field("chunks", &self.chunks.len())
            .field("dimension", &self.vectors.dim())
            .field("encoder", &self.encoder.name())
            .finish()
    }
}

impl DenseRetriever {
    /// Texts per [`Encoder::embed`] call while indexing.
    pub const BATCH: usize = 512;

    /// Index whole passages (one chunk per document, see [`passage_chunks`]).
    pub async fn build(docs: &[Document], encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::from_chunks(passage_chunks(docs)?, encoder).await
    }

    /// Index the given chunks (ids must be their positions). Embeds
    /// [`Chunk::embedding_text`] in batches of [`DenseRetriever::BATCH`].
    pub async fn from_chunks(chunks: Vec<Chunk>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        check_chunks(&chunks, "dense")?;
        let mut vectors = Embeddings::empty(encoder.dimension().max(1));
        for batch in chunks.chunks(Self::BATCH) {
            let texts: Vec<String> = batch.iter().map(Chunk::embedding_text).collect();
            let e = encoder.embed(&texts).await?;
            if e.rows() != texts.len() {
                return Err(Error::DimensionMismatch {
                    location: format!("encoder {} rows", encoder.name()),
                    expected: texts.len(),
                    actual: e.rows(),
                });
            }
            vectors.extend(&e)?;
        }
        Self::from_embeddings(chunks, vectors, encoder)
    }

    /// Use precomputed chunk embeddings (one row per chunk, made by `encoder`).
    pub fn from_embeddings(
        chunks: Vec<Chunk>,
        mut vectors: Embeddings,
        encoder: Arc<dyn Encoder>,
    ) -> Result<Self> {
        check_chunks(&chunks, "dense")?;
        if vectors.rows() != chunks.len() {
            return Err(Error::DimensionMismatch {
                location: "DenseRetriever embeddings rows".into(),
                expected: chunks.len(),
                actual: vectors.rows(),
            });
        }
        if vectors.dim() != encoder.dimension() {
            return Err(Error::DimensionMismatch {
                location: format!("DenseRetriever embeddings vs encoder {}", encoder.name()),
                expected: encoder.dimension(),
                actual: vectors.dim(),
            });
        }
        vectors.normalize();
        Ok(Self {
            chunks,
            vectors,
            encoder,
        })
    }

    /// The L2-normalised chunk embeddings, one row per chunk.
    pub fn embeddings(&self) -> &Embeddings {
        &self.vectors
    }

    /// Cosine similarity of a query vector to every chunk, in chunk order.
    pub fn scores(&self, query: &[f32]) -> Result<Vec<f32>> {
        if query.len() != self.vectors.dim() {
            return Err(Error::DimensionMismatch {
                location: "DenseRetriever query vector".into(),
                expected: self.vectors.dim(),
                actual: query.len(),
            });
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        Ok(self
            .vectors
            .iter()
            .map(|row| dot(row, query) * inv)
            .collect())
    }
}

#[async_trait]
impl Retriever for DenseRetriever {
    fn name(&self) -> &str {
        "dense"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, lprag_core::DEFAULT_MAX_QUERY_BYTES)?;
        selection.validate()?;
        let e = self.encoder.embed_queries(&[query.to_string()]).await?;
        if e.rows() != 1 {
            return Err(lprag::Error::DimensionMismatch {
                location: format!("encoder '{}' query embedding rows", self.encoder.name()),
                expected: 1,
                actual: e.rows(),
            });
        }
        let q = e.row(0).to_vec();
        let scores: Vec<f64> = self.scores(&q)?.into_iter().map(f64::from).collect();
        Ok(select(&scores, selection)?
            .into_iter()
            .map(|(i, s)| ScoredChunk {
                chunk: self.chunks[i].clone(),
                score: s as f32,
            })
            .collect())
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::KeywordEncoder;

    #[tokio::test]
    async fn ranks_by_cosine() {
        let docs = vec![
            Document::new("0", "", "apple apple"),
            Document::new("1", "", "banana"),
            Document::new("2", "", "apple banana"),
        ];
        let r = DenseRetriever::build(&docs, Arc::new(KeywordEncoder))
            .await
            .unwrap();
        let hits = r.retrieve("apple", Selection::TopK(3)).await.unwrap();
        let ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
        // cosines: doc0 = 1, doc2 = 1/√2, doc1 = 0
        assert_eq!(ids, vec![0, 2, 1]);
        assert!((hits[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        let hits = r
            .retrieve("apple", Selection::Threshold(0.5))
            .await
            .unwrap();
        assert_eq!(hits.len(), 2);
        assert!(r.retrieve("apple", Selection::TopK(0)).await.is_err());
        assert_eq!(r.chunks().len(), 3);
    }

    #[test]
    fn dot_matches_naive_sum() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.25).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
        assert_eq!(dot(&[], &[]), 0.0);
    }
}
