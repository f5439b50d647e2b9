//! The query path: candidate chunks from the nearest-chunk search and the chunk graph, then
//! the link predictor's scores.

use std::sync::Arc;

use super::anchor::{cosines, fuse, Ranked};
use super::{Anchor, LpRag, LpRagConfig};

use async_trait::async_trait;
use lprag_core::{
    Chunk, Error, Filter, LinkGraph, LinkPredictor, Result, Retriever, ScoredChunk, Selection,
    RETRIEVE_BATCH_CONCURRENCY,
};
use lprag_graph::{CandidateRequest, CandidateSearch};

use lprag_model::InferenceMode;

use crate::retrievers::common::{blocking, embed_queries, embed_query, Parents};

/// The candidate search `config` asks for over `graph`'s chunks: exact scans, the
/// column-wise copy from [`LpRagConfig::column_scan_from`] chunks, or the inverted-file
/// index of [`LpRagConfig::candidate_index`].
pub(crate) fn search_for(graph: &LinkGraph, config: &LpRagConfig) -> Result<CandidateSearch> {
    Ok(CandidateSearch::build(
        graph,
        config.candidate_index.as_ref(),
        config.column_scan_from,
    )?)
}

impl LpRag {
    /// Rank chunks for an already embedded query (the encoder's vector).
    pub async fn retrieve_embedded(
        &self,
        query: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        self.rank_embedded(query, selection, None).await
    }

    /// [`LpRag::retrieve_embedded`] over the chunks `filter` admits (see
    /// [`Retriever::retrieve_filtered`]).
    pub async fn retrieve_embedded_filtered(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        filter.validate()?;
        let filter = (!filter.is_all()).then(|| filter.clone());
        self.rank_embedded(query, selection, filter).await
    }

    /// The ranking behind every `retrieve` method: the candidate stage (restricted to the
    /// admitted chunks under a filter; the query still joins its nearest chunks of the
    /// whole corpus, as the model was trained), then the predictor.
    async fn rank_embedded(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: Option<Filter>,
    ) -> Result<Vec<ScoredChunk>> {
        use tracing::Instrument;
        let span = tracing::info_span!(
            "lprag.retrieve",
            pool = ?self.config.candidate_pool,
            filtered = filter.is_some(),
            candidates = tracing::field::Empty,
        );
        selection.validate()?;
        let allowed: Option<Vec<bool>> =
            filter.map(|f| self.chunks.iter().map(|c| f.matches(c)).collect());
        let view = self.view();
        let (weight, mode) = (self.anchor_weight(), self.config.parents);
        let inner = span.clone();
        let ranked = blocking(move || {
            let mut r = view.score(&query, allowed.as_deref())?;
            inner.record("candidates", r.candidates.len());
            fuse(&mut r.logits, &r.cos, weight);
            let scored = r.candidates.into_iter().zip(r.logits).collect();
            // Documents are scored on the logits; the caller sees (and a threshold reads)
            // their σ.
            Ok(view.parents.rank(scored, mode, Some(selection), sigmoid))
        })
        .instrument(span)
        .await?;
        Ok(ranked
            .into_iter()
            .map(|(c, score)| ScoredChunk {
                chunk: self.chunks[c].clone(),
                score,
            })
            .collect())
    }

    /// The weight of the predictor against the dense order ([`LpRagConfig::anchor`]).
    pub(super) fn anchor_weight(&self) -> f32 {
        match self.config.anchor {
            Anchor::Off => 1.0,
            Anchor::Fixed { weight } => weight,
            Anchor::Selected { .. } => self.stats.anchor.as_ref().map_or(1.0, |a| a.weight),
        }
    }

    /// What the query path reads, shared with a blocking thread.
    pub(super) fn view(&self) -> RankView {
        RankView {
            graph: self.graph.clone(),
            search: self.search.clone(),
            predictor: self.predictor.clone(),
            parents: self.parents.clone(),
            config: self.config.clone(),
        }
    }
}

/// The parts of an index one query's ranking reads.
pub(super) struct RankView {
    pub(super) graph: Arc<LinkGraph>,
    pub(super) search: Arc<CandidateSearch>,
    pub(super) predictor: Arc<dyn LinkPredictor>,
    pub(super) parents: Arc<Parents>,
    pub(super) config: LpRagConfig,
}

impl RankView {
    /// The candidate stage (restricted to `allowed`; with [`crate::ParentScoring::Mean`] every
    /// chunk of a candidate's document added) and the predictor's logits, with each
    /// candidate's cosine to the query.
    pub(super) fn score(&self, query: &[f32], allowed: Option<&[bool]>) -> Result<Ranked> {
        let join = match self.config.train.inference {
            InferenceMode::JoinTopK(k) => k,
            _ => 0,
        };
        let request = CandidateRequest {
            pool: self.config.candidate_pool,
            neighbours: self.config.candidate_neighbours,
            join,
            allowed,
        };
        let (nearest, mut candidates) =
            self.search
                .candidates(&self.graph.features, query, &request);
        if self.config.parents.scores_siblings() {
            candidates = self.parents.with_siblings(&candidates, allowed);
        }
        let logits = self.predictor.score_near(query, &nearest, &candidates)?;
        let cos = cosines(&self.graph, query, &candidates);
        Ok(Ranked {
            candidates,
            logits,
            cos,
        })
    }
}

/// The logistic function: a logit as a score in (0, 1).
pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[async_trait]
impl Retriever for LpRag {
    fn name(&self) -> &str {
        "lprag"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        let q = embed_query(&*self.encoder, query).await?;
        self.retrieve_embedded(q, selection).await
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        selection.validate()?;
        filter.validate()?;
        let q = embed_query(&*self.encoder, query).await?;
        self.retrieve_embedded_filtered(q, selection, filter).await
    }

    /// All queries are embedded in one encoder call, then ranked on blocking threads.
    async fn retrieve_batch(
        &self,
        queries: &[String],
        selection: Selection,
    ) -> Result<Vec<Vec<ScoredChunk>>> {
        selection.validate()?;
        for q in queries {
            lprag_core::check_query_len(q, self.config.max_query_bytes)?;
        }
        if let Some(i) = queries.iter().position(|q| q.trim().is_empty()) {
            return Err(Error::invalid(
                format!("LpRag::retrieve_batch (query {i})"),
                "query is empty",
            ));
        }
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = embed_queries(&*self.encoder, queries).await?;
        let mut out = Vec::with_capacity(queries.len());
        for group in vectors.chunks(RETRIEVE_BATCH_CONCURRENCY) {
            let running: Vec<_> = group
                .iter()
                .map(|v| self.rank_embedded(v.clone(), selection, None))
                .collect();
            out.extend(futures::future::try_join_all(running).await?);
        }
        Ok(out)
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}
