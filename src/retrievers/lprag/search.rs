//! The query path: candidate chunks from the nearest-chunk search and the chunk graph, then
//! the link predictor's scores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::anchor::{cosines, fuse, Ranked};
use super::store::StoreRows;
use super::{Anchor, LpRag, LpRagConfig};

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Error, Filter, LinkGraph, LinkPredictor, Result, Retriever, ScoredChunk,
    Selection, RETRIEVE_BATCH_CONCURRENCY,
};
use lprag_graph::{CandidateRequest, CandidateSearch};
use lprag_model::FetchedRows;

use crate::retrievers::common::{blocking, embed_queries, embed_query, Parents};

/// The candidate search `config` asks for over `graph`'s chunks: the proximity graph of
/// [`LpRagConfig::candidate_graph`], the inverted-file index of
/// [`LpRagConfig::candidate_index`], the column-wise copy from
/// [`LpRagConfig::column_scan_from`] chunks, or exact scans.
pub(crate) fn search_for(graph: &LinkGraph, config: &LpRagConfig) -> Result<CandidateSearch> {
    search_for_at(graph, config, None)
}

/// [`search_for`] with the column-wise copy, when that is the search, written to the file
/// `columns` and memory-mapped (`None`: on the heap).
pub(crate) fn search_for_at(
    graph: &LinkGraph,
    config: &LpRagConfig,
    columns: Option<&std::path::Path>,
) -> Result<CandidateSearch> {
    check_search(config)?;
    if let Some(params) = &config.candidate_graph {
        return Ok(CandidateSearch::proximity(graph, params)?);
    }
    Ok(CandidateSearch::build_at(
        graph,
        config.candidate_index.as_ref(),
        config.column_scan_from,
        columns,
    )?)
}

/// Refuse candidate-search settings that cannot be made: a proximity graph and an
/// inverted file at once, or invalid parameters of either.
pub(crate) fn check_search(config: &LpRagConfig) -> Result<()> {
    if let Some(params) = &config.candidate_graph {
        if config.candidate_index.is_some() {
            return Err(Error::invalid(
                "LpRagConfig.candidate_graph",
                "set candidate_graph or candidate_index, not both",
            ));
        }
        params.validate()?;
    }
    if let Some(params) = &config.candidate_index {
        params.validate()?;
    }
    Ok(())
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
        Ok(self.rank_profiled(query, selection, filter).await?.0)
    }

    /// [`LpRag::retrieve`] with where the query's time went ([`QueryProfile`]): the
    /// embedding, the candidate stage, the predictor and the ranking, each measured once on
    /// this call.
    ///
    /// ```no_run
    /// # async fn f(rag: &lprag::LpRag) -> lprag::Result<()> {
    /// let (hits, profile) = rag.retrieve_profiled("Who founded it?", lprag::Selection::TopK(5)).await?;
    /// println!("{} chunks; {profile}", hits.len());
    /// # Ok(()) }
    /// ```
    pub async fn retrieve_profiled(
        &self,
        query: &str,
        selection: Selection,
    ) -> Result<(Vec<ScoredChunk>, QueryProfile)> {
        let start = Instant::now();
        lprag_core::check_query(query, self.config.max_query_bytes)?;
        let q = embed_query(&*self.encoder, query).await?;
        let embed = start.elapsed();
        let (hits, mut profile) = self.rank_profiled(q, selection, None).await?;
        profile.embed = embed;
        profile.total = start.elapsed();
        Ok((hits, profile))
    }

    /// [`LpRag::rank_embedded`] with its stages' times (`embed` and `total` left for the
    /// caller).
    async fn rank_profiled(
        &self,
        query: Vec<f32>,
        selection: Selection,
        filter: Option<Filter>,
    ) -> Result<(Vec<ScoredChunk>, QueryProfile)> {
        use tracing::Instrument;
        let span = tracing::info_span!(
            "lprag.retrieve",
            pool = ?self.config.candidate_pool,
            filtered = filter.is_some(),
            candidates = tracing::field::Empty,
        );
        selection.validate()?;
        let t = Instant::now();
        let found = self
            .store_candidates(&query, filter.as_ref())
            .instrument(span.clone())
            .await?;
        let store_time = t.elapsed();
        // With the rows in the store, the candidates must come from there and their rows
        // are read now (the predictor's time).
        let t = Instant::now();
        let fetched = match (&self.rows, &found) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::invalid(
                    "LpRag (rows in the store)",
                    "reading the rows from the store needs a candidate pool smaller than \
                     the corpus (LpRag::set_candidates): scoring every chunk reads every row",
                ))
            }
            (Some(_), Some(f)) => self.fetch_rows(&f.nearest, &f.candidates).await?,
        };
        let fetch_time = t.elapsed();
        // The admitted chunks, when the candidates are found here.
        let allowed: Option<Vec<bool>> = match (&filter, &found) {
            (Some(_), None) if self.records.is_some() => {
                return Err(Error::invalid(
                    "LpRag (records in the store)",
                    "a filter over every chunk reads every record: give the index a \
                     candidate pool smaller than the corpus (LpRag::set_candidates)",
                ))
            }
            (Some(f), None) => Some(self.chunks.iter().map(|c| f.matches(c)).collect()),
            _ => None,
        };
        let view = self.view();
        let (weight, mode) = (self.anchor_weight(), self.config.parents);
        let inner = span.clone();
        let (ranked, mut profile) = blocking(move || {
            let mut profile = QueryProfile {
                candidates: store_time,
                predictor: fetch_time,
                ..QueryProfile::default()
            };
            let mut r = match (fetched, found) {
                (Some((rows, fetched)), Some(found)) => {
                    score_read_rows(&rows, &fetched, &query, found, &mut profile)?
                }
                (_, found) => view.score_timed(&query, allowed.as_deref(), found, &mut profile)?,
            };
            inner.record("candidates", r.candidates.len());
            let t = Instant::now();
            fuse(&mut r.logits, &r.cos, weight);
            let scored = r.candidates.into_iter().zip(r.logits).collect();
            // Documents are scored on the logits; the caller sees (and a threshold reads)
            // their σ.
            let ranked = view.parents.rank(scored, mode, Some(selection), sigmoid);
            profile.rank += t.elapsed();
            Ok((ranked, profile))
        })
        .instrument(span)
        .await?;
        let t = Instant::now();
        let hits = match &self.records {
            Some(_) => {
                let store = self.store.as_ref().ok_or_else(|| {
                    Error::invalid(
                        "LpRag (records in the store)",
                        "the records are the store's and no store is attached",
                    )
                })?;
                let ids: Vec<ChunkId> = ranked.iter().map(|&(c, _)| c).collect();
                let records = store.chunks(&ids).await?;
                records
                    .into_iter()
                    .zip(ranked)
                    .map(|(chunk, (_, score))| ScoredChunk { chunk, score })
                    .collect()
            }
            None => ranked
                .into_iter()
                .map(|(c, score)| ScoredChunk {
                    chunk: self.chunks[c].clone(),
                    score,
                })
                .collect(),
        };
        profile.rank += t.elapsed();
        Ok((hits, profile))
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
        self.score_timed(query, allowed, None, &mut QueryProfile::default())
    }

    /// [`RankView::score`], adding its stages' times to `profile` (the cosines count as
    /// ranking).
    ///
    /// `found` is the candidate stage done already (by an attached store's search).
    fn score_timed(
        &self,
        query: &[f32],
        allowed: Option<&[bool]>,
        found: Option<Found>,
        profile: &mut QueryProfile,
    ) -> Result<Ranked> {
        let t = Instant::now();
        let Found {
            nearest,
            candidates,
        } = match found {
            Some(found) => found,
            None => self.find(query, allowed),
        };
        profile.candidates += t.elapsed();
        profile.candidates_scored = candidates.len();
        let t = Instant::now();
        let logits = self.predictor.score_near(query, &nearest, &candidates)?;
        profile.predictor += t.elapsed();
        let t = Instant::now();
        let cos = cosines(&self.graph, query, &candidates);
        profile.rank += t.elapsed();
        Ok(Ranked {
            candidates,
            logits,
            cos,
        })
    }

    /// The candidate stage in memory: the nearest chunks and the candidates (with
    /// [`crate::ParentScoring::Mean`] every admitted chunk of their documents).
    fn find(&self, query: &[f32], allowed: Option<&[bool]>) -> Found {
        let join = self.config.join_size();
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
            candidates = self
                .parents
                .with_siblings(&candidates, &|c| allowed.is_none_or(|a| a[c]));
        }
        Found {
            nearest,
            candidates,
        }
    }
}

/// The predictor's logits and the cosines from rows read from the store
/// ([`super::store::StoreRows`]).
fn score_read_rows(
    rows: &StoreRows,
    fetched: &FetchedRows,
    query: &[f32],
    found: Found,
    profile: &mut QueryProfile,
) -> Result<Ranked> {
    let Found {
        nearest,
        candidates,
    } = found;
    profile.candidates_scored = candidates.len();
    let t = Instant::now();
    let logits = rows.scorer.score(fetched, query, &nearest, &candidates)?;
    profile.predictor += t.elapsed();
    let t = Instant::now();
    let qn = query.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    let cos = candidates
        .iter()
        .map(|&c| {
            fetched.feature(c).map_or(0.0, |row| {
                row.iter().zip(query).map(|(r, q)| r * q).sum::<f32>() / qn
            })
        })
        .collect();
    profile.rank += t.elapsed();
    Ok(Ranked {
        candidates,
        logits,
        cos,
    })
}

/// A query's candidate stage: its nearest chunks (best first; the model's join) and the
/// chunks to score.
pub(super) struct Found {
    pub(super) nearest: Vec<usize>,
    pub(super) candidates: Vec<usize>,
}

/// Where one LP-RAG query's time went ([`LpRag::retrieve_profiled`]); `Display` prints
/// each stage in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryProfile {
    /// Checking and embedding the query text.
    pub embed: Duration,
    /// The candidate stage: the nearest-chunk search, the pool's chunk-graph neighbours
    /// and, when documents rank as one, their other chunks.
    pub candidates: Duration,
    /// The link predictor's scores of the candidates (with
    /// [`crate::AnswerOptions::rows_from_store`], reading their rows from the store too).
    pub predictor: Duration,
    /// The candidates' cosines, the anchor's mix, the documents' ranking, the selection
    /// and the copies of the selected chunks (with
    /// [`crate::AnswerOptions::records_from_store`], reading their records from the store).
    pub rank: Duration,
    /// The whole call, waits for a blocking thread included.
    pub total: Duration,
    /// How many chunks the predictor scored.
    pub candidates_scored: usize,
}

impl std::fmt::Display for QueryProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "embed {:.3} ms, candidates {:.3} ms ({} scored), predictor {:.3} ms, rank {:.3} ms, total {:.3} ms",
            ms(self.embed),
            ms(self.candidates),
            self.candidates_scored,
            ms(self.predictor),
            ms(self.rank),
            ms(self.total)
        )
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

    fn num_chunks(&self) -> usize {
        LpRag::num_chunks(self)
    }
}
