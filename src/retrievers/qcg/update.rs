//! Incremental updates of a [`QcgRag`] index: add, replace and remove documents without a
//! rebuild.
//!
//! QCG-RAG is training-free and its queries are local to their chunk, so an update is
//! exact: the new chunks get their Doc2Query questions (filtered per chunk, as in a build),
//! the queries of removed chunks go, and the query–query k-NN lists are repaired (one
//! exact scan per new query and per query that lost a neighbour,
//! [`lprag_graph::update_knn`]; recomputed as a build does when a quarter or more of the
//! queries are new, which is then faster). Appending documents gives the index a build on all of
//! them would give (same chunk ids, same queries, same lists); after a removal the kept
//! chunks are renumbered and keep the queries they had.
//!
//! The index changes only once every step has succeeded; an error leaves it as it was.

use std::sync::Arc;

use lprag_core::{
    ChunkId, Chunker, Document, Embeddings, NoProgress, QueryGenerator, Result, SyntheticQuery,
};

use super::{default_generator, doc2query, QcgRag, QcgState};
use crate::retrievers::common::{blocking, PeerUpdate, Renumbered};
use crate::UpdateReport;

#[async_trait::async_trait]
impl PeerUpdate for QcgState {
    type With = dyn QueryGenerator;
    type Owned = Arc<dyn QueryGenerator>;

    /// The offline [`HeuristicQueryGenerator`](crate::HeuristicQueryGenerator) with
    /// `queries_per_chunk` questions.
    fn default_with(&self) -> Arc<dyn QueryGenerator> {
        default_generator(&self.config)
    }

    /// `inputs.query_generator`, else the offline default.
    fn with_from(&self, inputs: &crate::UpdateInputs) -> Arc<dyn QueryGenerator> {
        inputs
            .query_generator
            .clone()
            .unwrap_or_else(|| default_generator(&self.config))
    }

    /// Remove the chunks of `remove` (document ids), add `add`.
    async fn apply(
        peer: &mut QcgRag,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
        generator: &dyn QueryGenerator,
    ) -> Result<UpdateReport> {
        let old = peer.state.clone();
        // 1-2. The chunks (the kept ones renumbered, then the new ones), their embeddings.
        let (
            Renumbered {
                chunks,
                new_id,
                first_new,
                ..
            },
            chunk_emb,
            mut report,
            mut laps,
        ) = peer
            .start_update((remove, add), chunker, &old.chunk_emb, false)
            .await?;
        let dim = chunk_emb.dim();

        // 3. The new chunks' questions, and the kept chunks' old ones remapped.
        let targets: Vec<ChunkId> = (first_new..chunks.len()).collect();
        let (generated, new_queries, new_query_emb) = doc2query(
            generator,
            &*peer.encoder,
            (&chunks, &chunk_emb),
            &targets,
            old.config.keep_fraction,
            &NoProgress,
        )
        .await?;
        let (keep_query, mut queries) = remap_queries(&old.queries, &new_id);
        report.removed_queries = old.queries.len() - queries.len();
        queries.extend(new_queries);
        let kept_rows: Vec<usize> = (0..keep_query.len()).filter(|&i| keep_query[i]).collect();
        let mut qrows = old.query_emb.select(&kept_rows).into_vec();
        qrows.extend_from_slice(new_query_emb.as_slice());
        let query_emb = Embeddings::new(dim, qrows)?;
        laps.lap(&mut report, "queries");

        // 4. The query–query k-NN lists, repaired.
        let (k, old_emb, old_lists) = (
            old.config.knn_k,
            old.query_emb.clone(),
            old.neighbors.clone(),
        );
        let emb = query_emb.clone();
        let neighbors =
            blocking(move || repair_knn(k, &old_emb, &old_lists, &keep_query, &emb)).await?;
        laps.lap(&mut report, "graph");

        let mut stats = old.stats.clone();
        stats.chunks = chunks.len();
        stats.queries_generated += generated;
        stats.queries_kept = queries.len();
        report.chunks = chunks.len();
        peer.state = Arc::new(QcgState {
            version: old.version,
            encoder: old.encoder.clone(),
            encoder_fingerprint: old.encoder_fingerprint.clone(),
            config: old.config.clone(),
            chunks,
            queries,
            query_emb,
            chunk_emb,
            neighbors,
            stats,
            parents: Default::default(),
        });
        Ok(report)
    }
}

/// The queries of the kept chunks, their chunk ids renumbered by `new_id` (`usize::MAX`:
/// removed), and which of `queries` were kept (a query goes when all its chunks go).
fn remap_queries(queries: &[SyntheticQuery], new_id: &[usize]) -> (Vec<bool>, Vec<SyntheticQuery>) {
    let mut keep_query = Vec::with_capacity(queries.len());
    let mut kept: Vec<SyntheticQuery> = Vec::new();
    for q in queries {
        let ids: Vec<ChunkId> = q
            .chunk_ids
            .iter()
            .filter_map(|&c| new_id.get(c).copied().filter(|&n| n != usize::MAX))
            .collect();
        keep_query.push(!ids.is_empty());
        if !ids.is_empty() {
            kept.push(SyntheticQuery {
                chunk_ids: ids,
                ..q.clone()
            });
        }
    }
    (keep_query, kept)
}

/// The query–query k-NN lists of the updated queries `emb` (CPU work): `old_lists` (over
/// `old_emb`) repaired for the rows `keep_query` kept and the new rows, or computed as a
/// build does when a quarter or more of the rows are new.
fn repair_knn(
    k: usize,
    old_emb: &Embeddings,
    old_lists: &[Vec<u32>],
    keep_query: &[bool],
    emb: &Embeddings,
) -> Result<Vec<Vec<u32>>> {
    if emb.rows() <= 1 {
        return Ok(vec![Vec::new(); emb.rows()]);
    }
    // One scan per new query costs more than the build's blocked k-NN once a
    // quarter of the rows are new: then the lists are computed as a build does.
    let fresh = emb.rows() - keep_query.iter().filter(|&&k| k).count();
    let lists = if old_emb.rows() <= 1 || fresh * 4 >= emb.rows() {
        lprag_graph::knn(emb, k, &lprag_graph::KnnBackend::default())?
    } else {
        // The saved lists hold ids only: their similarities are recomputed
        // (cosine, as the build's k-NN ranks them).
        let lists: Vec<Vec<(u32, f32)>> = old_lists
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let row = old_emb.row(i);
                l.iter()
                    .map(|&j| (j, lprag_core::cosine(row, old_emb.row(j as usize))))
                    .collect()
            })
            .collect();
        lprag_graph::update_knn(&lists, keep_query, emb, k)?
    };
    Ok(lists
        .into_iter()
        .map(|l| l.into_iter().map(|(j, _)| j).collect())
        .collect())
}
