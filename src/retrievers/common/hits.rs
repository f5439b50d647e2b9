//! A peer's ranked list turned into results: the selection applied, and a short top-k
//! list padded by dense search with scores capped so that it stays sorted.

use std::collections::HashSet;

use lprag_core::{Chunk, ChunkId, Embeddings, ScoredChunk, Selection};

/// The chunks to append to a result list of `have` chunks (whose last score is `last`) to
/// reach `k`: the others by descending `score` (ties to the lower id), each as `(chunk,
/// score, capped score)` with the capped score never above the one before it, so the list
/// stays sorted.
pub(crate) fn dense_padding(
    have: &HashSet<ChunkId>,
    last: Option<f32>,
    scores: impl Iterator<Item = (ChunkId, f32)>,
    k: usize,
) -> Vec<(ChunkId, f32, f32)> {
    let mut dense: Vec<(ChunkId, f32)> = scores.filter(|(c, _)| !have.contains(c)).collect();
    dense.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut cap = last.unwrap_or(f32::INFINITY);
    dense
        .into_iter()
        .take(k.saturating_sub(have.len()))
        .map(|(c, s)| {
            cap = cap.min(s);
            (c, s, cap)
        })
        .collect()
}

/// Fill `out` up to `k` chunks with the chunks not in it, by cosine to `query`; the added
/// scores are capped by the last score already in `out`, so the list stays sorted.
pub(crate) fn pad_with_dense(
    out: &mut Vec<(ChunkId, f32)>,
    chunk_emb: &Embeddings,
    query: &[f32],
    k: usize,
) {
    let have: HashSet<ChunkId> = out.iter().map(|&(c, _)| c).collect();
    let cosines = chunk_emb
        .iter()
        .enumerate()
        .map(|(c, row)| (c, lprag_core::cosine(query, row)));
    let last = out.last().map(|&(_, s)| s);
    out.extend(
        dense_padding(&have, last, cosines, k)
            .into_iter()
            .map(|(c, _, capped)| (c, capped)),
    );
}

/// The hits of a peer's ranked `(chunk, score)` list under `selection`. A `TopK` list
/// shorter than `k` is filled by dense search when `pad` holds the chunk embeddings and the
/// query's ([`pad_with_dense`]); thresholds apply to the retriever's own scores, unpadded.
pub(crate) fn select_hits(
    chunks: &[Chunk],
    ranked: Vec<(ChunkId, f32)>,
    selection: Selection,
    pad: Option<(&Embeddings, &[f32])>,
) -> Vec<ScoredChunk> {
    let picked = match (selection, pad) {
        (Selection::TopK(k), Some((chunk_emb, query))) => {
            let mut out: Vec<(ChunkId, f32)> = ranked.into_iter().take(k).collect();
            if out.len() < k {
                pad_with_dense(&mut out, chunk_emb, query, k);
            }
            out
        }
        (other, _) => other.apply(ranked, |&(_, s)| s),
    };
    picked
        .into_iter()
        .map(|(c, score)| ScoredChunk {
            chunk: chunks[c].clone(),
            score,
        })
        .collect()
}
