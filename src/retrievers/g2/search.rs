//! G²RAG's retrieval rule: the chunk level (dense search) and the community level (the
//! chunks of the communities nearest the query), merged in the configured order.

use super::*;

/// The dual-level ranking for one query. `chunk_cos[c]` is the cosine between the query
/// and chunk `c`; `community_cos[i]` between the query and community `i`'s centroid.
pub fn dual_level(
    chunk_cos: &[f32],
    community_cos: &[f32],
    communities: &[Community],
    config: &G2Config,
) -> G2Explanation {
    let best = |scores: &[f32], k: usize| -> Vec<(usize, f32)> {
        let mut order: Vec<(usize, f32)> = scores.iter().copied().enumerate().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        order.truncate(k);
        order
    };
    let chunk_level = best(chunk_cos, config.chunk_top_k);
    let top_communities = best(community_cos, config.community_top_k);
    let mut community_level = Vec::new();
    for &(i, _) in &top_communities {
        let mut members: Vec<(ChunkId, f32)> = communities[i]
            .members
            .iter()
            .map(|&c| (c, chunk_cos[c]))
            .collect();
        members.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        community_level.extend(
            members
                .into_iter()
                .take(config.community_chunk_cap)
                .map(|(c, s)| (c, s, i)),
        );
    }

    let a: Vec<(ChunkId, f32, G2Source)> = chunk_level
        .iter()
        .map(|&(c, s)| (c, s, G2Source::Chunk))
        .collect();
    let b: Vec<(ChunkId, f32, G2Source)> = community_level
        .iter()
        .map(|&(c, s, i)| (c, s, G2Source::Community(i)))
        .collect();
    let order: Vec<(ChunkId, f32, G2Source)> = match config.merge_order {
        MergeOrder::ChunkFirst => a.into_iter().chain(b).collect(),
        MergeOrder::CommunityFirst => b.into_iter().chain(a).collect(),
        MergeOrder::Interleave => {
            let mut out = Vec::with_capacity(a.len() + b.len());
            let mut seen = HashSet::new();
            let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
            loop {
                let x = ia.by_ref().find(|h| seen.insert(h.0));
                let y = ib.by_ref().find(|h| seen.insert(h.0));
                if x.is_none() && y.is_none() {
                    break;
                }
                out.extend(x);
                out.extend(y);
            }
            out
        }
    };
    let mut seen = HashSet::new();
    let mut cap = f32::INFINITY;
    let merged = order
        .into_iter()
        .filter(|h| seen.insert(h.0))
        .map(|(chunk, cosine, source)| {
            cap = cap.min(cosine);
            G2Hit {
                chunk,
                cosine,
                score: cap,
                source,
            }
        })
        .collect();
    G2Explanation {
        chunk_level,
        communities: top_communities,
        community_level,
        merged,
    }
}
