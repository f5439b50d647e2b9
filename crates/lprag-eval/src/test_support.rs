//! Test doubles shared by unit tests.

use async_trait::async_trait;
use lprag_core::{
    Chunk, Embeddings, Encoder, Provenance, Result, Retriever, ScoredChunk, Selection,
};

/// Counts the words `apple`, `banana`, `cherry`, `date` (one dimension each).
pub(crate) struct KeywordEncoder;

pub(crate) const KEYWORDS: [&str; 4] = ["apple", "banana", "cherry", "date"];

#[async_trait]
impl Encoder for KeywordEncoder {
    fn name(&self) -> &str {
        "keyword"
    }
    fn dimension(&self) -> usize {
        KEYWORDS.len()
    }
    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        let rows: Vec<Vec<f32>> = texts
            .iter()
            .map(|t| {
                KEYWORDS
                    .iter()
                    .map(|k| {
                        t.split_whitespace()
                            .filter(|w| w.to_lowercase() == *k)
                            .count() as f32
                    })
                    .collect()
            })
            .collect();
        Embeddings::from_rows(KEYWORDS.len(), &rows)
    }
}

/// A retriever that returns a fixed ranking of chunks (by chunk id) for every query.
pub(crate) struct FixedRetriever {
    pub name: String,
    pub chunks: Vec<Chunk>,
    pub ranking: Vec<usize>,
}

impl FixedRetriever {
    /// Chunks `(document_id, text)` in order; ranking by chunk id.
    pub fn new(name: &str, chunks: &[(&str, &str)], ranking: Vec<usize>) -> Self {
        let chunks = chunks
            .iter()
            .enumerate()
            .map(|(i, (doc, text))| Chunk {
                id: i,
                text: text.to_string(),
                provenance: Provenance {
                    document_id: doc.to_string(),
                    title: String::new(),
                    span: 0..text.len(),
                },
                metadata: Default::default(),
            })
            .collect();
        Self {
            name: name.into(),
            chunks,
            ranking,
        }
    }
}

#[async_trait]
impl Retriever for FixedRetriever {
    fn name(&self) -> &str {
        &self.name
    }
    async fn retrieve(&self, _query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        let n = self.ranking.len();
        let scored: Vec<ScoredChunk> = self
            .ranking
            .iter()
            .enumerate()
            .map(|(r, &id)| ScoredChunk {
                chunk: self.chunks[id].clone(),
                score: (n - r) as f32,
            })
            .collect();
        Ok(selection.apply(scored, |s| s.score))
    }
    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}
