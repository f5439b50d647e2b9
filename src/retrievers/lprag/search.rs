//! The query path: candidate chunks from the nearest-chunk search and the chunk graph, then
//! the link predictor's scores.

use super::{LpRag, LpRagConfig};

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Error, Filter, LinkGraph, Result, Retriever, ScoredChunk, Selection,
    RETRIEVE_BATCH_CONCURRENCY,
};
use lprag_graph::{ColumnIndex, IvfIndex};

use lprag_model::InferenceMode;

use crate::retrievers::common::{blocking, embed_queries, embed_query};

/// What the candidate stage reads: inverse norms of the chunk embeddings, the chunk
/// graph's neighbour lists and, when configured, an inverted-file index of the chunks or
/// their column-wise copy.
#[derive(Debug)]
pub(crate) struct ChunkSearch {
    pub(super) inv_norms: Vec<f32>,
    pub(super) neighbours: Vec<Vec<u32>>,
    pub(super) ivf: Option<IvfIndex>,
    pub(super) columns: Option<ColumnIndex>,
}

impl ChunkSearch {
    /// The search over `graph`'s chunks, with the inverted-file index or the column-wise
    /// copy `config` asks for.
    pub(crate) fn for_config(graph: &LinkGraph, config: &LpRagConfig) -> Result<Self> {
        let mut search = Self::new(graph);
        if let Some(params) = &config.candidate_index {
            search.ivf = Some(IvfIndex::build_prefix(
                &graph.features,
                graph.num_chunks,
                params,
            )?);
        } else if config
            .column_scan_from
            .is_some_and(|from| graph.num_chunks >= from.max(1))
        {
            search.columns = Some(ColumnIndex::build(&graph.features, &search.inv_norms)?);
        }
        Ok(search)
    }

    /// The search over `graph`'s chunks by exact scans.
    pub(crate) fn new(graph: &LinkGraph) -> Self {
        let nc = graph.num_chunks;
        let mut neighbours = vec![Vec::new(); nc];
        for e in &graph.edges {
            if (e.a as usize) < nc && (e.b as usize) < nc && e.a != e.b {
                neighbours[e.a as usize].push(e.b);
                neighbours[e.b as usize].push(e.a);
            }
        }
        Self {
            inv_norms: lprag_graph::inverse_norms(&graph.features, nc),
            neighbours,
            ivf: None,
            columns: None,
        }
    }
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
        self.rank_traced(query, selection, filter)
            .instrument(span)
            .await
    }

    async fn rank_traced(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: Option<Filter>,
    ) -> Result<Vec<ScoredChunk>> {
        selection.validate()?;
        let allowed: Option<Vec<bool>> =
            filter.map(|f| self.chunks.iter().map(|c| f.matches(c)).collect());
        let (graph, search, predictor) = (
            self.graph.clone(),
            self.search.clone(),
            self.predictor.clone(),
        );
        let (pool, neighbours) = (self.config.candidate_pool, self.config.candidate_neighbours);
        let join = match self.config.train.inference {
            InferenceMode::JoinTopK(k) => k,
            _ => 0,
        };
        let span = tracing::Span::current();
        let ranked = blocking(move || {
            let (nearest, candidates) = candidates(
                &graph,
                &search,
                &query,
                pool,
                neighbours,
                join,
                allowed.as_deref(),
            );
            span.record("candidates", candidates.len());
            let logits = predictor.score_near(&query, &nearest, &candidates)?;
            let mut ranked: Vec<(ChunkId, f32)> = candidates.into_iter().zip(logits).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Ok(ranked)
        })
        .await?;
        let scored: Vec<ScoredChunk> = ranked
            .into_iter()
            .map(|(c, l)| ScoredChunk {
                chunk: self.chunks[c].clone(),
                score: sigmoid(l),
            })
            .collect();
        Ok(selection.apply(scored, |s| s.score))
    }
}

/// The query's nearest chunks (best first; as many as the pool and the join need) and the
/// chunks to score: the pool plus its graph neighbours, or every chunk.
pub(super) fn candidates(
    graph: &LinkGraph,
    search: &ChunkSearch,
    query: &[f32],
    pool: Option<usize>,
    neighbours: bool,
    join: usize,
    allowed: Option<&[bool]>,
) -> (Vec<ChunkId>, Vec<ChunkId>) {
    let n = graph.num_chunks;
    let pool = pool.filter(|&p| p < n).map(|p| p.max(1));
    let nearest_where = |m: usize, keep: &(dyn Fn(usize) -> bool + Sync)| -> Vec<ChunkId> {
        if let Some(ivf) = &search.ivf {
            // Too few admitted chunks in the probed lists (a selective filter): scan all.
            match ivf.search(&graph.features, query, m, keep) {
                Ok(hits) if hits.len() >= m.min(n) => {
                    return hits.into_iter().map(|(i, _)| i as ChunkId).collect()
                }
                _ => {}
            }
        }
        let hits = match &search.columns {
            Some(columns) => {
                columns.nearest_where(&graph.features, &search.inv_norms, query, m, keep)
            }
            None => lprag_graph::nearest_by_cosine_where(
                &graph.features,
                &search.inv_norms,
                query,
                m,
                keep,
            ),
        };
        hits.into_iter().map(|(i, _)| i as ChunkId).collect()
    };
    let (nearest, pool_nearest) = match allowed {
        // One scan serves both the join and the pool.
        None => {
            let nearest = nearest_where(pool.unwrap_or(0).max(join), &|_| true);
            let p = pool.unwrap_or(0).min(nearest.len());
            let pooled = nearest[..p].to_vec();
            (nearest, pooled)
        }
        // The join stays the whole corpus's nearest chunks; the pool is the admitted ones'.
        Some(ok) => (
            nearest_where(join, &|_| true),
            nearest_where(pool.unwrap_or(0), &|i| ok[i]),
        ),
    };
    let admitted = |i: usize| allowed.is_none_or(|ok| ok[i]);
    let candidates = match pool {
        Some(_) => {
            let mut c: Vec<ChunkId> = pool_nearest;
            if neighbours {
                for i in 0..c.len() {
                    c.extend(
                        search.neighbours[c[i]]
                            .iter()
                            .map(|&j| j as ChunkId)
                            .filter(|&j| admitted(j)),
                    );
                }
            }
            c.sort_unstable();
            c.dedup();
            c
        }
        None => (0..n).filter(|&i| admitted(i)).collect(),
    };
    (nearest, candidates)
}

pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[async_trait]
impl Retriever for LpRag {
    fn name(&self) -> &str {
        "lprag"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, self.config.max_query_bytes)?;
        if query.trim().is_empty() {
            return Err(Error::invalid("LpRag::retrieve (query)", "query is empty"));
        }
        let q = embed_query(&*self.encoder, query).await?;
        self.retrieve_embedded(q, selection).await
    }

    async fn retrieve_filtered(
        &self,
        query: &str,
        selection: Selection,
        filter: &Filter,
    ) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, self.config.max_query_bytes)?;
        if query.trim().is_empty() {
            return Err(Error::invalid("LpRag::retrieve (query)", "query is empty"));
        }
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
