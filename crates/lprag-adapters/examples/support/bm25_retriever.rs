//! A small BM25 retriever over whole documents, built from `lprag-core` alone. It stands
//! in for `LpRag` (or any peer) so the adapter examples and tests build without burn;
//! with the `lprag` crate, pass `Arc::new(lp_rag)` instead, nothing else changes.

use async_trait::async_trait;
use lprag_core::{
    Chunk, Document, Provenance, Result, Retriever, ScoredChunk, Selection, SparseIndex,
};
use lprag_text::{Bm25Config, Bm25Index};

/// BM25 (rank_bm25's Okapi) over one chunk per document.
pub struct Bm25Retriever {
    chunks: Vec<Chunk>,
    index: Bm25Index,
}

impl Bm25Retriever {
    /// Index `documents`, one chunk each (metadata copied from the document).
    pub fn new(documents: &[Document]) -> Result<Self> {
        let chunks: Vec<Chunk> = documents
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut c = Chunk::new(
                    i,
                    d.text.clone(),
                    Provenance {
                        document_id: d.id.clone(),
                        title: d.title.clone(),
                        span: 0..d.text.len(),
                    },
                );
                c.metadata = d.metadata.clone();
                c
            })
            .collect();
        let texts: Vec<String> = chunks.iter().map(|c| c.text.clone()).collect();
        let index = Bm25Index::fit(&texts, Bm25Config::default())?;
        Ok(Self { chunks, index })
    }
}

#[async_trait]
impl Retriever for Bm25Retriever {
    fn name(&self) -> &str {
        "bm25"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        let mut hits: Vec<ScoredChunk> = self
            .index
            .scores(query)
            .into_iter()
            .zip(&self.chunks)
            .map(|(s, c)| ScoredChunk {
                chunk: c.clone(),
                score: s as f32,
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.chunk.id.cmp(&b.chunk.id))
        });
        Ok(selection.apply(hits, |h| h.score))
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}
