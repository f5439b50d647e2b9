//! [`Reranked`]: any [`Retriever`] followed by a [`Reranker`].
//!
//! The retriever proposes a shortlist (its best [`Reranked::with_candidates`] chunks, 50
//! by default, or `k` when that is more); the reranker scores the query against each of
//! them; the selection is applied to the reranker's scores, best first (ties keep the
//! retriever's order). A reranker that returns the wrong number of scores, or a
//! non-finite one, is an error naming it.

use async_trait::async_trait;
use lprag_core::{
    check_rerank_scores, Chunk, Filter, Reranker, Result, Retriever, ScoredChunk, Selection,
};

/// How many of the retriever's chunks a [`Reranked`] rescores unless told otherwise.
pub const DEFAULT_RERANK_CANDIDATES: usize = 50;

/// A retriever whose shortlist is re-ordered by a reranker (see the module docs).
///
/// ```no_run
/// use lprag::{CrossEncoder, LpRag, Reranked, Retriever, Selection};
/// # async fn demo(rag: LpRag) -> lprag::Result<()> {
/// let reranker = CrossEncoder::from_dir("models/ms-marco-MiniLM-L-6-v2", &lprag::model::Device::flex())?;
/// let search = Reranked::new(rag, reranker).with_candidates(30);
/// let hits = search.retrieve("Where was Marie Curie born?", Selection::TopK(5)).await?;
/// # Ok(()) }
/// ```
pub struct Reranked<R, K> {
    retriever: R,
    reranker: K,
    candidates: usize,
    name: String,
}

impl<R: Retriever, K: Reranker> Reranked<R, K> {
    /// `retriever` followed by `reranker`, rescoring [`DEFAULT_RERANK_CANDIDATES`] chunks.
    pub fn new(retriever: R, reranker: K) -> Self {
        let name = format!("{}+{}", retriever.name(), reranker.name());
        Self {
            retriever,
            reranker,
            candidates: DEFAULT_RERANK_CANDIDATES,
            name,
        }
    }

    /// Rescore the retriever's best `n` chunks (at least 1; more when a `TopK` asks for
    /// more). More candidates find more of what the first stage ranked low, at the cost
    /// of one reranker pass per candidate.
    pub fn with_candidates(mut self, n: usize) -> Self {
        self.candidates = n.max(1);
        self
    }

    /// The first stage.
    pub fn retriever(&self) -> &R {
        &self.retriever
    }

    /// The second stage.
    pub fn reranker(&self) -> &K {
        &self.reranker
    }

    fn shortlist(&self, selection: Selection) -> Selection {
        let k = match selection {
            Selection::TopK(k) | Selection::ThresholdTopK { k, .. } => k,
            Selection::Threshold(_) => 0,
        };
        Selection::TopK(self.candidates.max(k))
    }

    async fn rerank(
        &self,
        query: &str,
        hits: Vec<ScoredChunk>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        if hits.is_empty() {
            return Ok(hits);
        }
        let texts: Vec<&str> = hits.iter().map(|h| h.chunk.text.as_str()).collect();
        let scores = self.reranker.score(query, &texts).await?;
        check_rerank_scores(self.reranker.name(), texts.len(), &scores)?;
        let mut rescored: Vec<ScoredChunk> = hits
            .into_iter()
            .zip(scores)
            .map(|(h, score)| ScoredChunk {
                chunk: h.chunk,
                score,
            })
            .collect();
        // Stable: equal scores keep the first stage's order.
        rescored.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(selection.apply(rescored, |s| s.score))
    }
}

#[async_trait]
impl<R: Retriever, K: Reranker> Retriever for Reranked<R, K> {
    fn name(&self) -> &str {
        &self.name
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        let hits = self
            .retriever
            .retrieve(query, self.shortlist(selection))
            .await?;
        self.rerank(query, hits, selection).await
    }

    fn chunks(&self) -> &[Chunk] {
        self.retriever.chunks()
    }

    fn num_chunks(&self) -> usize {
        self.retriever.num_chunks()
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        let hits = self
            .retriever
            .retrieve_filtered(query, self.shortlist(selection), filter)
            .await?;
        self.rerank(query, hits, selection).await
    }
}
