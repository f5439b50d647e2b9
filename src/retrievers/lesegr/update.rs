//! Incremental updates of a [`LesegrRag`] index: add, replace and remove documents without
//! re-embedding the chunks already indexed, and without retraining.
//!
//! What an update redoes is what depends on the whole corpus: BM25 is refitted on all
//! chunks (its idf changes with every document), the document links are recomputed
//! (document k-NN; or the stored citations, kept between surviving documents and extended
//! by the caller's), and so is the contextual chunk graph — by the build's own code, so the
//! graph is the one a build on the same chunks makes. Only the new chunks are embedded.
//! The gates: the lite variant recomputes `max(0, cos)`; the trained variant keeps the
//! learned gate of every edge whose two chunks were already indexed and gates the others
//! with the stored gate network ([`lprag_model::lesegr::LesegrGate`], the same function of
//! `c_dst − c_src` training learned), and keeps its query transform. So the lite variant's
//! update is exact (appending documents gives the index a build on all of them gives),
//! and the trained one scores new chunks with a model that never saw them, as LP-RAG does;
//! rebuild to retrain.
//!
//! The index changes only once every step has succeeded; an error leaves it as it was.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use lprag_core::{Chunk, Chunker, Document, Embeddings, Error, Result, SparseEncoder, SparseIndex};
use lprag_model::lesegr::{lite_alpha, InEdges, LesegrGate};

use super::{
    check_sparse_len, chunk_graph, ChunkGraph, LesegrRag, LesegrState, LesegrStats, LesegrVariant,
};
use crate::retrievers::common::{blocking, PeerUpdate, Renumbered};
use crate::UpdateReport;

impl LesegrRag {
    /// The `(citing, cited)` citations the index links documents by, or `None` when it
    /// links them by document k-NN.
    pub fn citations(&self) -> Option<&[(String, String)]> {
        self.state.citations.as_deref()
    }
}

#[async_trait::async_trait]
impl PeerUpdate for LesegrState {
    /// `(citing, cited)` document ids for an index built with
    /// [`document_links`](super::LesegrRagBuilder::document_links) (either end may be an
    /// old or a new document); an index linked by document k-NN recomputes its links.
    type With = [(String, String)];
    type Owned = Vec<(String, String)>;

    /// No citations.
    fn default_with(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Remove the chunks of `remove` (document ids), add `add` with `citations`.
    async fn apply(
        peer: &mut LesegrRag,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
        citations: &[(String, String)],
    ) -> Result<UpdateReport> {
        let old = peer.state.clone();
        check_update(&old, citations)?;
        // 1. The chunks: the kept ones renumbered, then the new ones.
        // 2. Embeddings: the kept (normalised) rows, the new ones embedded and normalised.
        let (Renumbered { chunks, new_id, .. }, emb, mut report, mut laps) = peer
            .start_update((remove, add), chunker, &old.emb, true)
            .await?;

        // 3. The corpus-wide parts, as a build makes them: BM25, document links, graph.
        let sparse_index = refit_sparse(peer.runtime.sparse_encoder.clone(), &chunks).await?;
        let stored = old
            .citations
            .as_ref()
            .map(|c| kept_citations(c, remove, add, citations));
        let cg = chunk_graph(
            &chunks,
            &emb,
            &*sparse_index,
            &old.config,
            stored.as_deref(),
        )
        .await?;
        laps.lap(&mut report, "graph");

        // 4. The gates.
        let alpha = updated_alpha(&old, &new_id, &emb, &cg.graph).await?;
        laps.lap(&mut report, "gates");

        let stats = updated_stats(&old.stats, chunks.len(), &cg);
        report.chunks = chunks.len();
        peer.state = Arc::new(LesegrState {
            version: old.version,
            encoder: old.encoder.clone(),
            encoder_fingerprint: old.encoder_fingerprint.clone(),
            sparse: old.sparse.clone(),
            config: old.config.clone(),
            chunks,
            emb,
            graph: cg.graph,
            alpha,
            transform: old.transform.clone(),
            gate: old.gate.clone(),
            citations: stored,
            stats,
        });
        peer.runtime.sparse = sparse_index;
        Ok(report)
    }
}

/// Where an update's errors are located.
const LOCATION: &str = "LesegrRag update";

/// The error of a trained index saved without its gate network.
fn no_gate() -> Error {
    Error::invalid(
        LOCATION,
        "this trained index was saved without its gate network (by an older lprag), \
         so new edges cannot be gated; rebuild it",
    )
}

/// Whether `old` can take this update: `citations` only on an index linked by citations,
/// and a trained index only with its gate network.
fn check_update(old: &LesegrState, citations: &[(String, String)]) -> Result<()> {
    if old.citations.is_none() && !citations.is_empty() {
        return Err(Error::invalid(
            format!("{LOCATION} (citations)"),
            "the index links documents by k-NN (it was built without document_links); \
             rebuild it with document_links to use citations",
        ));
    }
    if old.config.variant == LesegrVariant::Trained && old.gate.is_none() {
        return Err(no_gate());
    }
    Ok(())
}

/// The `stored` citations whose two documents are still indexed after removing `remove`
/// and adding `add`, then the caller's new `citations`.
fn kept_citations(
    stored: &[(String, String)],
    remove: &[String],
    add: &[Document],
    citations: &[(String, String)],
) -> Vec<(String, String)> {
    let gone: HashSet<&str> = remove.iter().map(String::as_str).collect();
    let mut kept: Vec<(String, String)> = stored
        .iter()
        .filter(|(a, b)| {
            // A replaced document is re-added: its citations stay.
            let back = |id: &str| !gone.contains(id) || add.iter().any(|d| d.id == id);
            back(a) && back(b)
        })
        .cloned()
        .collect();
    kept.extend_from_slice(citations);
    kept
}

/// `old` statistics with the updated counts: `n_chunks` chunks and the edges and document
/// links of the chunk graph `cg`.
fn updated_stats(old: &LesegrStats, n_chunks: usize, cg: &ChunkGraph) -> LesegrStats {
    let mut stats = old.clone();
    stats.chunks = n_chunks;
    stats.intra_edges = cg.intra;
    stats.inter_edges = cg.inter;
    stats.document_links = cg.links.len();
    stats
}

/// The sparse index `sparse` fits on all `chunks` (off the async runtime), checked to hold
/// them all.
async fn refit_sparse(
    sparse: Arc<dyn SparseEncoder>,
    chunks: &[Chunk],
) -> Result<Arc<dyn SparseIndex>> {
    let all_texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let sparse_index: Arc<dyn SparseIndex> =
        Arc::from(blocking(move || sparse.fit(&all_texts)).await?);
    check_sparse_len(&*sparse_index, chunks.len(), "sparse index")?;
    Ok(sparse_index)
}

/// The gates of the updated `graph`: `max(0, cos)` for the lite variant, the learned or
/// gate-network ones for the trained variant (see [`trained_alpha`]).
async fn updated_alpha(
    old: &LesegrState,
    new_id: &[usize],
    emb: &Embeddings,
    graph: &InEdges,
) -> Result<Vec<f32>> {
    Ok(match (&old.config.variant, &old.gate) {
        (LesegrVariant::Lite, _) => lite_alpha(emb, graph),
        (LesegrVariant::Trained, None) => return Err(no_gate()),
        (LesegrVariant::Trained, Some(gate)) => {
            trained_alpha(gate.clone(), old, new_id, emb, graph).await?
        }
    })
}

/// The trained variant's gates of `graph`: the learned gate of every edge whose two chunks
/// `old` already indexed (`new_id` maps old chunk ids to new ones), `gate` run on `emb`
/// for the others.
async fn trained_alpha(
    gate: LesegrGate,
    old: &LesegrState,
    new_id: &[usize],
    emb: &Embeddings,
    graph: &InEdges,
) -> Result<Vec<f32>> {
    let known = known_gates(old, new_id);
    let dst = graph.destinations();
    let pairs: Vec<(u32, u32)> = graph.sources().iter().copied().zip(dst).collect();
    let fresh: Vec<(u32, u32)> = pairs
        .iter()
        .filter(|p| !known.contains_key(p))
        .copied()
        .collect();
    let emb2 = emb.clone();
    let gated = blocking(move || gate.alpha(&emb2, &fresh)).await?;
    let mut gated = gated.into_iter();
    Ok(pairs
        .iter()
        .map(|p| match known.get(p) {
            Some(&a) => a,
            None => gated.next().unwrap_or(0.0),
        })
        .collect())
}

/// The learned gate of every old edge between kept chunks, by new ids.
fn known_gates(old: &LesegrState, new_id: &[usize]) -> HashMap<(u32, u32), f32> {
    let mut known: HashMap<(u32, u32), f32> = HashMap::new();
    let old_dst = old.graph.destinations();
    for (e, (&s, &d)) in old.graph.sources().iter().zip(&old_dst).enumerate() {
        let (s, d) = (new_id[s as usize], new_id[d as usize]);
        if s != usize::MAX && d != usize::MAX {
            known.insert((s as u32, d as u32), old.alpha[e]);
        }
    }
    known
}
