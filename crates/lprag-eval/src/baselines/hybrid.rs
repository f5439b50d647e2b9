//! Reciprocal-rank fusion of several retrievers.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Document, Encoder, Error, Result, Retriever, ScoredChunk, Selection,
};
use serde::{Deserialize, Serialize};

use super::{passage_chunks, Bm25Config, Bm25Retriever, DenseRetriever};

/// Parameters of [`HybridRetriever`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RrfConfig {
    /// The rank offset `k` of RRF (Cormack et al., 2009). Default 60.
    pub k: f64,
    /// How many chunks to take from each retriever before fusing (more when the caller
    /// asks for more). Default 100.
    pub candidates: usize,
}

impl Default for RrfConfig {
    fn default() -> Self {
        Self {
            k: 60.0,
            candidates: 100,
        }
    }
}

/// Hybrid retrieval by reciprocal-rank fusion (RRF): each part ranks the chunks, and a
/// chunk's fused score is `Σ_parts 1 / (k + rank)` with 1-based ranks (a part that did
/// not return the chunk adds nothing).
///
/// Each part is asked for `max(candidates, requested k)` chunks ([`RrfConfig`]); with
/// [`Selection::Threshold`] the threshold applies to the fused score (at most
/// `parts / (k + 1)`). Equal fused scores are ordered by the best rank any part gave, then
/// by chunk id. The parts must index the same chunk list (checked at construction), and
/// fuse by chunk id.
pub struct HybridRetriever {
    parts: Vec<Box<dyn Retriever>>,
    config: RrfConfig,
}

impl std::fmt::Debug for HybridRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.parts.iter().map(|p| p.name()).collect();
        f.debug_struct("HybridRetriever")
            .field("parts", &names)
            .field("config", &self.config)
            .finish()
    }
}

impl HybridRetriever {
    /// Fuse `parts` (at least one), which must return the same chunks: equal chunk lists
    /// (same length; same document id and text at every position).
    pub fn new(parts: Vec<Box<dyn Retriever>>, config: RrfConfig) -> Result<Self> {
        if !(config.k.is_finite() && config.k >= 0.0) {
            return Err(Error::invalid(
                "RrfConfig.k",
                format!("must be finite and >= 0, got {}", config.k),
            ));
        }
        if config.candidates == 0 {
            return Err(Error::invalid("RrfConfig.candidates", "must be at least 1"));
        }
        let Some(first) = parts.first() else {
            return Err(Error::invalid(
                "HybridRetriever::new",
                "no retriever to fuse",
            ));
        };
        let reference = first.chunks();
        for p in &parts[1..] {
            let c = p.chunks();
            let same = c.len() == reference.len()
                && c.iter().zip(reference).all(|(a, b)| {
                    a.id == b.id
                        && a.provenance.document_id == b.provenance.document_id
                        && a.text == b.text
                });
            if !same {
                return Err(Error::invalid(
                    format!("HybridRetriever part `{}`", p.name()),
                    format!("indexes other chunks than `{}`", first.name()),
                ));
            }
        }
        Ok(Self { parts, config })
    }

    /// Dense (flat cosine with `encoder`) + BM25 (default parameters) over whole passages,
    /// fused with the default [`RrfConfig`].
    pub async fn dense_bm25(docs: &[Document], encoder: Arc<dyn Encoder>) -> Result<Self> {
        let chunks = passage_chunks(docs)?;
        let dense = DenseRetriever::from_chunks(chunks.clone(), encoder).await?;
        let bm25 = Bm25Retriever::from_chunks(chunks, Bm25Config::default())?;
        Self::new(vec![Box::new(dense), Box::new(bm25)], RrfConfig::default())
    }

    /// The fused retrievers.
    pub fn parts(&self) -> &[Box<dyn Retriever>] {
        &self.parts
    }
}

#[async_trait]
impl Retriever for HybridRetriever {
    fn name(&self) -> &str {
        "hybrid"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, lprag_core::DEFAULT_MAX_QUERY_BYTES)?;
        selection.validate()?;
        let depth = match selection {
            Selection::TopK(k) | Selection::ThresholdTopK { k, .. } => {
                k.max(self.config.candidates)
            }
            Selection::Threshold(_) => self.config.candidates,
        };
        // chunk id → (fused score, best rank)
        let mut fused: HashMap<ChunkId, (f64, usize)> = HashMap::new();
        for part in &self.parts {
            let hits = part.retrieve(query, Selection::TopK(depth)).await?;
            for (r, hit) in hits.iter().enumerate() {
                let rank = r + 1;
                let e = fused.entry(hit.chunk.id).or_insert((0.0, rank));
                e.0 += 1.0 / (self.config.k + rank as f64);
                e.1 = e.1.min(rank);
            }
        }
        let mut ranked: Vec<(ChunkId, f64, usize)> =
            fused.into_iter().map(|(id, (s, r))| (id, s, r)).collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
        let chunks = self.chunks();
        let mut out = Vec::with_capacity(ranked.len());
        for (id, score, _) in ranked {
            let chunk = chunks.get(id).ok_or_else(|| {
                Error::invalid(
                    "HybridRetriever",
                    format!("a part returned unknown chunk id {id}"),
                )
            })?;
            out.push(ScoredChunk {
                chunk: chunk.clone(),
                score: score as f32,
            });
        }
        Ok(selection.apply(out, |s| s.score))
    }

    fn chunks(&self) -> &[Chunk] {
        self.parts[0].chunks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{FixedRetriever, KeywordEncoder};

    const CHUNKS: [(&str, &str); 4] = [("a", "x"), ("b", "y"), ("c", "z"), ("d", "w")];

    #[tokio::test]
    async fn fuses_ranks_hand_computed() {
        let p1 = FixedRetriever::new("p1", &CHUNKS, vec![0, 1, 2]);
        let p2 = FixedRetriever::new("p2", &CHUNKS, vec![2, 0, 3]);
        let h =
            HybridRetriever::new(vec![Box::new(p1), Box::new(p2)], RrfConfig::default()).unwrap();
        let hits = h.retrieve("q", Selection::TopK(10)).await.unwrap();
        // 0: 1/61 + 1/62; 2: 1/63 + 1/61; 1: 1/62; 3: 1/63
        let ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
        assert_eq!(ids, vec![0, 2, 1, 3]);
        let expect = 1.0 / 61.0 + 1.0 / 62.0;
        assert!((f64::from(hits[0].score) - expect).abs() < 1e-6);
        let top2 = h.retrieve("q", Selection::TopK(2)).await.unwrap();
        assert_eq!(top2.len(), 2);
        let above = h.retrieve("q", Selection::Threshold(0.02)).await.unwrap();
        assert_eq!(above.len(), 2);
    }

    #[tokio::test]
    async fn rejects_parts_over_other_chunks() {
        let p1 = FixedRetriever::new("p1", &CHUNKS, vec![0]);
        let p2 = FixedRetriever::new("p2", &CHUNKS[..3], vec![0]);
        let e = HybridRetriever::new(vec![Box::new(p1), Box::new(p2)], RrfConfig::default())
            .unwrap_err();
        assert!(e.to_string().contains("p2"), "{e}");
        assert!(HybridRetriever::new(vec![], RrfConfig::default()).is_err());
    }

    #[tokio::test]
    async fn dense_bm25_over_passages() {
        let docs = vec![
            Document::new("0", "", "apple pie"),
            Document::new("1", "", "banana bread"),
            Document::new("2", "", "cherry tart"),
        ];
        let h = HybridRetriever::dense_bm25(&docs, Arc::new(KeywordEncoder))
            .await
            .unwrap();
        let hits = h.retrieve("banana", Selection::TopK(1)).await.unwrap();
        assert_eq!(hits[0].chunk.provenance.document_id, "1");
        assert_eq!(h.parts().len(), 2);
    }
}
