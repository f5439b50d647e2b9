//! **G²RAG**: chunks grouped into communities by HDBSCAN, k-NN
//! graphs, weakly connected components, a distance split and (LLM-guided) merging, then
//! retrieved at two levels — single chunks and whole communities.
//!
//! # Indexing
//! 1. **Embed** every chunk with the encoder and L2-normalise the vectors.
//! 2. **Cluster** with HDBSCAN (the [`hdbscan`] crate, 0.12: pure Rust, exact, and the only
//!    maintained Rust HDBSCAN with the paper's ε — `cluster_selection_epsilon`; see
//!    [`hdbscan_clusters`] for the measured alternative). The distances are computed by
//!    lprag into an n × n matrix handed to the crate as precalculated:
//!    [`ClusterDistance::Cosine`] (1 − cos, default: the unit of δ as well) or
//!    [`ClusterDistance::Euclidean`] on the unit vectors (√(2 − 2 cos)). This is O(n²)
//!    memory: 14 MB for 1,890 chunks, 1.6 GB for 20,000.
//!    HDBSCAN's noise points follow [`OutlierPolicy`]: the paper **drops** them from the
//!    index (the default); [`OutlierPolicy::Singletons`] keeps each as a one-chunk
//!    community. Either way a dropped chunk is left out of the *communities* only: the
//!    chunk-level search always covers every chunk.
//!    The paper's GoT refinement of clusters (Eq. 3) is an LLM pass with no published
//!    prompt; lprag applies the identity (C′ = C). The entity–relation extraction of
//!    Eq. 4 is not used by retrieval and is skipped: the graph's nodes are the chunks.
//! 3. Per cluster, a **k-NN graph** (each chunk → its `knn_k` most similar chunks of the
//!    cluster by cosine, ties to the lower chunk id) and its **weakly connected
//!    components** (edges taken as undirected).
//! 4. **Distance filtering**: inside each component, edges with cosine distance above δ
//!    (`split_distance`) are dropped and the components taken again: the *subgroups*.
//! 5. **Merging** (Eq. 8): for every pair of subgroups of one component, M(ω_r, ω_s) ∈
//!    {0, 1}. With an LLM ([`G2RagBuilder::llm`]) the model answers yes/no
//!    ([`lprag_llm::LlmMergeJudge`], each group shown by its most central passages);
//!    offline, the pair merges when cos(centroid_r, centroid_s) ≥ θ (`merge_threshold`).
//!    Every pair is judged on the *original* subgroups, then merged groups are the
//!    connected components of the "yes" pairs (union-find): the result does not depend
//!    on the order pairs are asked in.
//!    The merged groups are the **communities**; each keeps its members and its centroid
//!    (the normalised mean of the members' unit vectors).
//!
//! # Retrieval (dual level)
//! - **Chunk level** (the paper's entity level): the `chunk_top_k` chunks most similar to
//!   the query.
//! - **Community level**: the `community_top_k` communities whose centroid is most similar
//!   to the query, in that order; each contributes its members by cosine to the query, at
//!   most `community_chunk_cap` of them.
//! - **Merge** ([`MergeOrder`]): by default the two lists are interleaved (chunk 1,
//!   community chunk 1, chunk 2, …), repeats dropped; [`Retriever::retrieve`] with
//!   `TopK(k)` fills a list the two levels cannot fill with dense search order
//!   (`pad_with_dense`, as QCG-RAG). A hit's score is its cosine to the query capped by
//!   the score before it, so the list is sorted by score in merge order; threshold
//!   selections apply to those scores, without padding.
//!
//! # Defaults for what the paper leaves open
//! | field | default | why |
//! |---|---|---|
//! | `min_cluster_size` (minPts) | 5 | the HDBSCAN reference implementation's default |
//! | `min_samples` | = `min_cluster_size` | the same implementation's rule |
//! | `epsilon` (ε) | 0 | plain HDBSCAN (the reference default); > 0 merges clusters closer than ε |
//! | `knn_k` | 3 | below the smallest cluster size minus one (4), so the k-NN graph of a minimal cluster is not complete and the WCC step can split; QCG-RAG's k in lprag |
//! | `split_distance` (δ) | 0.5 | cosine ≥ 0.5: the edge joins clearly related passages for sentence encoders (all-MiniLM's related pairs score above it, unrelated ones well below) |
//! | `merge_threshold` (θ) | 0.5 | = 1 − δ: two subgroups merge back when their centres are as close as δ lets two linked members be |
//! | `chunk_top_k`, `community_top_k` | 5, 5 | the paper's retrieval top-k = 5 |
//! | `community_chunk_cap` | 5 | a community contributes at most as many chunks as the chunk level |
//! | `merge_order` | interleave | the only order in which the community level shows at every cut-off; chunk-first equals dense search for k ≤ `chunk_top_k` |
//!
//! None of these were tuned on benchmark questions; `docs/benchmarks.md` has a small,
//! labelled sensitivity table.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    dot, Chunk, ChunkId, Document, Embeddings, Error, Result, ScoredChunk, Selection,
};
pub use lprag_graph::{cluster_knn, components};
use lprag_llm::{ChatModel, LlmMergeJudge};
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{
    blocking, dense_padding, input_setters, BuildInputs, Peer, PeerState, Started,
};

mod state;

pub use state::G2_FORMAT_VERSION;
use state::{G2State, G2_DIR, G2_FILE};

/// The distance HDBSCAN clusters with (on L2-normalised embeddings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterDistance {
    /// 1 − cos, in [0, 2]: the unit of δ, so ε and δ are comparable. Default.
    Cosine,
    /// Euclidean distance between the unit vectors, √(2 − 2 cos), in [0, 2]: a metric,
    /// with the same single-linkage tree as cosine (a monotone transform) but different
    /// cluster stabilities and ε scale.
    Euclidean,
}

/// What happens to the chunks HDBSCAN calls noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutlierPolicy {
    /// In no community (the paper: outliers are filtered from the index). Chunk-level
    /// search still finds them. Default.
    Drop,
    /// Each becomes a community of its own (centroid = the chunk).
    Singletons,
}

/// How the chunk-level and community-level lists become one ranking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MergeOrder {
    /// Alternate: chunk level 1, community level 1, chunk level 2, … (repeats skipped;
    /// when one list runs out the other continues). Default.
    Interleave,
    /// The whole chunk-level list, then the community-level list.
    ChunkFirst,
    /// The whole community-level list, then the chunk-level list.
    CommunityFirst,
}

/// G²RAG's settings. Every number the paper leaves unstated is a field here; the module
/// documentation says why each default is what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct G2Config {
    /// HDBSCAN's minimum cluster size (the paper's minPts), at least 2. Default 5.
    pub min_cluster_size: usize,
    /// HDBSCAN's `min_samples` (neighbours, self included, that make a point core);
    /// `None` uses `min_cluster_size`. Default `None`.
    pub min_samples: Option<usize>,
    /// HDBSCAN's cluster-selection ε (the paper's ε), in [`ClusterDistance`] units, ≥ 0.
    /// Default 0.
    pub epsilon: f32,
    /// Distance HDBSCAN uses. Default [`ClusterDistance::Cosine`].
    pub distance: ClusterDistance,
    /// Let HDBSCAN return the whole corpus as one cluster. Default false (the reference
    /// implementation's).
    pub allow_single_cluster: bool,
    /// What to do with HDBSCAN's noise points. Default [`OutlierPolicy::Drop`].
    pub outliers: OutlierPolicy,
    /// Neighbours per chunk in each cluster's k-NN graph, k ≥ 1. Default 3.
    pub knn_k: usize,
    /// δ: k-NN edges with cosine distance (1 − cos) above it are cut before the
    /// subgroups are taken; in [0, 2]. Default 0.5.
    pub split_distance: f32,
    /// θ: without an LLM, two subgroups of a component merge when their centroids'
    /// cosine is at least θ; in [-1, 1]. Default 0.5.
    pub merge_threshold: f32,
    /// Chunks retrieved at the chunk level. Default 5.
    pub chunk_top_k: usize,
    /// Communities retrieved at the community level. Default 5.
    pub community_top_k: usize,
    /// Most chunks one retrieved community contributes (its best by cosine), ≥ 1.
    /// Default 5.
    pub community_chunk_cap: usize,
    /// How the two levels' lists are merged. Default [`MergeOrder::Interleave`].
    pub merge_order: MergeOrder,
    /// Fill a `TopK` list the two levels cannot fill with dense search order.
    /// Default true.
    pub pad_with_dense: bool,
    /// LLM merging: passages shown per subgroup (most central first), ≥ 1. Default 5.
    pub llm_max_chunks: usize,
    /// LLM merging: characters shown per passage, ≥ 1. Default 400.
    pub llm_chunk_chars: usize,
    /// Most chunks HDBSCAN may cluster: it runs on an `n × n` distance matrix (4 bytes per
    /// entry: 1.6 GB at the default 20,000, 40 GB at 100,000), so a larger corpus is an
    /// error before any allocation rather than an out-of-memory abort. Raise it if the
    /// machine has the memory; `0` removes the bound.
    pub max_cluster_chunks: usize,
    /// The longest query, in bytes of UTF-8, that `retrieve` and `explain` embed; a longer
    /// one is [`lprag_core::Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an encoder's
    /// 512-token window).
    pub max_query_bytes: usize,
}

impl Default for G2Config {
    fn default() -> Self {
        Self {
            min_cluster_size: 5,
            min_samples: None,
            epsilon: 0.0,
            distance: ClusterDistance::Cosine,
            allow_single_cluster: false,
            outliers: OutlierPolicy::Drop,
            knn_k: 3,
            split_distance: 0.5,
            merge_threshold: 0.5,
            chunk_top_k: 5,
            community_top_k: 5,
            community_chunk_cap: 5,
            merge_order: MergeOrder::Interleave,
            pad_with_dense: true,
            llm_max_chunks: 5,
            llm_chunk_chars: 400,
            max_cluster_chunks: 20_000,
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl G2Config {
    /// Check every field's range; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, msg: String| Err(Error::invalid(format!("G2Config.{field}"), msg));
        if self.min_cluster_size < 2 {
            return bad(
                "min_cluster_size",
                format!("must be at least 2, got {}", self.min_cluster_size),
            );
        }
        if self.min_samples == Some(0) {
            return bad("min_samples", "must be at least 1 (or null)".into());
        }
        if !(self.epsilon.is_finite() && self.epsilon >= 0.0) {
            return bad(
                "epsilon",
                format!("must be finite and >= 0, got {}", self.epsilon),
            );
        }
        if self.knn_k == 0 {
            return bad("knn_k", "must be at least 1".into());
        }
        if !(0.0..=2.0).contains(&self.split_distance) {
            return bad(
                "split_distance",
                format!("a cosine distance in [0, 2], got {}", self.split_distance),
            );
        }
        if !(-1.0..=1.0).contains(&self.merge_threshold) {
            return bad(
                "merge_threshold",
                format!("a cosine in [-1, 1], got {}", self.merge_threshold),
            );
        }
        if self.chunk_top_k == 0 && self.community_top_k == 0 {
            return bad(
                "chunk_top_k",
                "chunk_top_k and community_top_k cannot both be 0".into(),
            );
        }
        if self.community_chunk_cap == 0 || self.llm_max_chunks == 0 || self.llm_chunk_chars == 0 {
            return bad(
                "community_chunk_cap",
                "community_chunk_cap, llm_max_chunks and llm_chunk_chars must be at least 1".into(),
            );
        }
        Ok(())
    }

    fn min_samples(&self) -> usize {
        self.min_samples.unwrap_or(self.min_cluster_size)
    }
}

/// One community: chunks and their centroid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Community {
    /// Member chunks, ascending.
    pub members: Vec<ChunkId>,
    /// Normalised mean of the members' unit embeddings.
    pub centroid: Vec<f32>,
    /// The HDBSCAN cluster it came from (`None`: an outlier kept as a singleton).
    pub cluster: Option<usize>,
}

/// What indexing produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct G2Stats {
    /// Chunks indexed.
    pub chunks: usize,
    /// HDBSCAN clusters.
    pub clusters: usize,
    /// HDBSCAN noise points.
    pub outliers: usize,
    /// Weakly connected components of the per-cluster k-NN graphs.
    pub components: usize,
    /// Subgroups after the δ split.
    pub subgroups: usize,
    /// Subgroup pairs judged for merging (LLM calls when an LLM decides).
    pub merge_pairs: usize,
    /// Pairs judged "merge".
    pub merges_accepted: usize,
    /// Whether an LLM decided the merges (else the θ rule).
    pub llm_merge: bool,
    /// Of [`G2Stats::merge_pairs`], pairs whose LLM answer had no yes/no even after the
    /// judge's parse retries, decided by the θ rule instead.
    #[serde(default)]
    pub merge_fallbacks: usize,
    /// Communities (including outlier singletons under [`OutlierPolicy::Singletons`]).
    pub communities: usize,
    /// Members of the largest community.
    pub largest_community: usize,
    /// Seconds embedding the chunks.
    pub seconds_embed: f64,
    /// Seconds in HDBSCAN (distance matrix included).
    pub seconds_cluster: f64,
    /// Seconds building k-NN graphs, components and subgroups.
    pub seconds_graph: f64,
    /// Seconds deciding merges (LLM calls included).
    pub seconds_merge: f64,
    /// Seconds to build, all stages.
    pub seconds: f64,
}

/// Which level put a chunk into the ranked list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum G2Source {
    /// The chunk-level search.
    Chunk,
    /// The community-level search: the community's index in [`G2Rag::communities`].
    Community(usize),
    /// Padding by dense search order.
    Dense,
}

/// One entry of the ranked list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct G2Hit {
    /// The chunk.
    pub chunk: ChunkId,
    /// Its cosine to the query.
    pub cosine: f32,
    /// Its score in the list: the cosine capped by the score before it.
    pub score: f32,
    /// Where it came from (the first level that gave it, in merge order).
    pub source: G2Source,
}

/// Both levels of one query and their merge (see [`G2Rag::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct G2Explanation {
    /// Chunk level: `(chunk, cosine)`, best first.
    pub chunk_level: Vec<(ChunkId, f32)>,
    /// Retrieved communities: `(community, cosine to its centroid)`, best first.
    pub communities: Vec<(usize, f32)>,
    /// Community level: `(chunk, cosine, community)`, by community rank, then by cosine
    /// within a community (at most `community_chunk_cap` each).
    pub community_level: Vec<(ChunkId, f32, usize)>,
    /// The merged ranking, repeats removed, before any dense padding.
    pub merged: Vec<G2Hit>,
}

/// HDBSCAN over the rows of `emb` (normalised here): `Some(cluster)` per chunk, `None`
/// for noise. Clusters are numbered in the crate's order.
///
/// Fewer chunks than `min_cluster_size` or `min_samples` make no cluster (all noise)
/// without running HDBSCAN.
///
/// # Why the `hdbscan` crate
/// Measured on 1,890 × 384-d unit vectors (60-centre mixture, min size 5, one core):
/// `hdbscan` 0.12 on a precalculated cosine matrix 1.36 s (1.25 s of it computing the
/// matrix naively — this function's symmetric loop brings the whole call to 0.30 s on
/// MuSiQue-100's 1,890 MiniLM vectors), on raw vectors with brute force
/// 2.06 s, with its k-d tree 2.71 s; `petal-clustering` 0.14 0.90 s with Prim's MST and
/// 2.44 s with Borůvka. `petal-clustering` has no cluster-selection ε (the paper's ε) and
/// ties the workspace to its ndarray and rustc 1.90; `hdbscan` has ε, precalculated
/// distances and only `kdtree`/`num-traits` as dependencies.
pub fn hdbscan_clusters(emb: &Embeddings, config: &G2Config) -> Result<Vec<Option<usize>>> {
    let n = emb.rows();
    if n < 2 || n < config.min_cluster_size || n < config.min_samples() {
        return Ok(vec![None; n]);
    }
    if config.max_cluster_chunks > 0 && n > config.max_cluster_chunks {
        return Err(Error::invalid(
            "G2Config.max_cluster_chunks",
            format!(
                "{n} chunks to cluster; HDBSCAN's {n} × {n} distance matrix would take \
                 {:.1} GB, above the bound of {} chunks (raise it if the memory is there)",
                (n as f64) * (n as f64) * 4.0 / 1e9,
                config.max_cluster_chunks
            ),
        ));
    }
    let mut unit = emb.clone();
    unit.normalize();
    let mut dist = vec![vec![0.0f32; n]; n];
    for i in 0..n {
        let a = unit.row(i);
        let (head, tail) = dist.split_at_mut(i + 1);
        let row_i = &mut head[i];
        for (off, row_j) in tail.iter_mut().enumerate() {
            let j = i + 1 + off;
            let c = dot(a, unit.row(j));
            let d = (1.0 - c).clamp(0.0, 2.0);
            let d = match config.distance {
                ClusterDistance::Cosine => d,
                ClusterDistance::Euclidean => (2.0 * d).sqrt(),
            };
            let d = if d.is_nan() { 1.0 } else { d };
            row_i[j] = d;
            row_j[i] = d;
        }
    }
    let params = hdbscan::HdbscanHyperParams::builder()
        .min_cluster_size(config.min_cluster_size)
        .min_samples(config.min_samples())
        .epsilon(config.epsilon as f64)
        .allow_single_cluster(config.allow_single_cluster)
        .dist_metric(hdbscan::DistanceMetric::Precalculated)
        .build();
    // The crate panics on some inputs it does not validate; none should reach it after
    // the checks above, but a panic must not escape lprag.
    let labels = std::panic::catch_unwind(|| hdbscan::Hdbscan::new(&dist, params).cluster())
        .map_err(|_| Error::backend("hdbscan", "HDBSCAN panicked"))?
        .map_err(|e| Error::backend("hdbscan", e.to_string()))?;
    Ok(labels
        .into_iter()
        .map(|l| usize::try_from(l).ok())
        .collect())
}

/// Steps 3–4 for one cluster: the weakly connected components of its k-NN graph, each as
/// its list of subgroups (components of the edges with distance ≤ δ), as chunk ids.
pub fn split_cluster(
    emb: &Embeddings,
    members: &[ChunkId],
    k: usize,
    delta: f32,
) -> Vec<Vec<Vec<ChunkId>>> {
    let edges = cluster_knn(emb, members, k);
    let comps = components(members.len(), edges.iter().map(|&(a, b, _)| (a, b)));
    let subs = components(
        members.len(),
        edges
            .iter()
            .filter(|&&(_, _, d)| d <= delta)
            .map(|&(a, b, _)| (a, b)),
    );
    // Every subgroup lies inside one component (its edges are a subset).
    let mut comp_of = vec![0usize; members.len()];
    for (c, comp) in comps.iter().enumerate() {
        for &x in comp {
            comp_of[x] = c;
        }
    }
    let mut out: Vec<Vec<Vec<ChunkId>>> = vec![Vec::new(); comps.len()];
    for s in subs {
        let c = comp_of[s[0]];
        out[c].push(s.into_iter().map(|x| members[x]).collect());
    }
    out
}

/// The normalised mean of the members' unit vectors (all zeros for an empty list or
/// zero vectors).
pub fn centroid(emb: &Embeddings, members: &[ChunkId]) -> Vec<f32> {
    let mut c = vec![0.0f32; emb.dim()];
    for &m in members {
        let row = emb.row(m);
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            c.iter_mut().zip(row).for_each(|(a, x)| *a += x / n);
        }
    }
    let n = c.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        c.iter_mut().for_each(|x| *x /= n);
    }
    c
}

/// Step 5's union: `groups` merged along the pairs `(r, s)` judged "merge", as the
/// connected components of those pairs (each result sorted; order of first group).
pub fn merge_groups(groups: &[Vec<ChunkId>], merge: &[(usize, usize)]) -> Vec<Vec<ChunkId>> {
    components(groups.len(), merge.iter().copied())
        .into_iter()
        .map(|set| {
            let mut members: Vec<ChunkId> = set.iter().flat_map(|&g| groups[g].clone()).collect();
            members.sort_unstable();
            members
        })
        .collect()
}

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

/// Assembles a [`G2Rag`].
pub struct G2RagBuilder {
    inputs: BuildInputs,
    llm: Option<Arc<dyn ChatModel>>,
    judge: Option<LlmMergeJudge>,
    config: G2Config,
}

impl G2RagBuilder {
    input_setters!(G2Config);

    /// Let this model decide the merges (the paper's M_LLM) with lprag's default merge
    /// prompt, `llm_max_chunks` passages of `llm_chunk_chars` characters per subgroup.
    /// One call per subgroup pair; wrap the model in a
    /// [`CachedChat`](lprag_llm::CachedChat) so a rebuild pays nothing. Without a model the
    /// θ rule decides.
    pub fn llm(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.llm = Some(model);
        self
    }

    /// Let this judge decide the merges, used as given (custom prompts, concurrency,
    /// token meter); it overrides [`G2RagBuilder::llm`].
    pub fn merge_judge(mut self, judge: LlmMergeJudge) -> Self {
        self.judge = Some(judge);
        self
    }

    /// Chunk, embed, cluster, split, merge: the communities.
    pub async fn build(self, documents: &[Document]) -> Result<G2Rag> {
        let config = self.config.clone();
        config.validate()?;
        let Started {
            progress,
            at: started,
            chunks,
            encoder,
            chunk_emb: mut emb,
            embed_seconds,
            ..
        } = self.inputs.start(documents).await?;
        emb.normalize();
        let mut stats = G2Stats {
            chunks: chunks.len(),
            seconds_embed: embed_seconds,
            ..G2Stats::default()
        };

        // 2. HDBSCAN.
        let t = std::time::Instant::now();
        progress.start("HDBSCAN", None);
        let labels = {
            let (e, c) = (emb.clone(), config.clone());
            blocking(move || hdbscan_clusters(&e, &c)).await?
        };
        progress.finish("HDBSCAN");
        let n_clusters = labels.iter().flatten().map(|&l| l + 1).max().unwrap_or(0);
        let mut clusters: Vec<Vec<ChunkId>> = vec![Vec::new(); n_clusters];
        let mut outliers = Vec::new();
        for (c, l) in labels.iter().enumerate() {
            match l {
                Some(l) => clusters[*l].push(c),
                None => outliers.push(c),
            }
        }
        clusters.retain(|c| !c.is_empty());
        stats.clusters = clusters.len();
        stats.outliers = outliers.len();
        stats.seconds_cluster = t.elapsed().as_secs_f64();

        // 3–4. k-NN graphs, components, δ split.
        let t = std::time::Instant::now();
        let split: Vec<Vec<Vec<Vec<ChunkId>>>> = {
            let (e, cl, k, delta) = (
                emb.clone(),
                clusters.clone(),
                config.knn_k,
                config.split_distance,
            );
            blocking(move || Ok(cl.iter().map(|m| split_cluster(&e, m, k, delta)).collect()))
                .await?
        };
        stats.components = split.iter().map(Vec::len).sum();
        stats.subgroups = split.iter().flatten().map(Vec::len).sum();
        stats.seconds_graph = t.elapsed().as_secs_f64();

        // 5. Merge decisions on every subgroup pair of a component.
        let t = std::time::Instant::now();
        let mut pairs: Vec<(usize, usize, usize, usize)> = Vec::new(); // cluster, comp, r, s
        for (ci, comps) in split.iter().enumerate() {
            for (mi, subs) in comps.iter().enumerate() {
                for r in 0..subs.len() {
                    for s in r + 1..subs.len() {
                        pairs.push((ci, mi, r, s));
                    }
                }
            }
        }
        let judge = self.judge.or_else(|| {
            self.llm.map(|m| {
                LlmMergeJudge::new(m)
                    .max_passages(config.llm_max_chunks)
                    .max_chars(config.llm_chunk_chars)
                    .with_progress(progress.clone())
            })
        });
        let verdicts: Vec<bool> = match &judge {
            Some(judge) => {
                // Each subgroup shown by its most central passages first.
                let central = |g: &[ChunkId]| -> Vec<&str> {
                    let c = centroid(&emb, g);
                    let mut order: Vec<(ChunkId, f32)> =
                        g.iter().map(|&x| (x, dot(&c, emb.row(x)))).collect();
                    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    order
                        .into_iter()
                        .map(|(x, _)| chunks[x].text.as_str())
                        .collect()
                };
                let shown: Vec<(Vec<&str>, Vec<&str>)> = pairs
                    .iter()
                    .map(|&(ci, mi, r, s)| (central(&split[ci][mi][r]), central(&split[ci][mi][s])))
                    .collect();
                let verdicts = judge.judge_all(&shown).await?;
                stats.merge_fallbacks = verdicts.iter().filter(|v| v.is_none()).count();
                pairs
                    .iter()
                    .zip(verdicts)
                    .map(|(&(ci, mi, r, s), v)| {
                        v.unwrap_or_else(|| {
                            let a = centroid(&emb, &split[ci][mi][r]);
                            let b = centroid(&emb, &split[ci][mi][s]);
                            dot(&a, &b) >= config.merge_threshold
                        })
                    })
                    .collect()
            }
            None => pairs
                .iter()
                .map(|&(ci, mi, r, s)| {
                    let a = centroid(&emb, &split[ci][mi][r]);
                    let b = centroid(&emb, &split[ci][mi][s]);
                    dot(&a, &b) >= config.merge_threshold
                })
                .collect(),
        };
        stats.merge_pairs = pairs.len();
        stats.merges_accepted = verdicts.iter().filter(|&&v| v).count();
        stats.llm_merge = judge.is_some();

        let mut communities = Vec::new();
        for (ci, comps) in split.iter().enumerate() {
            for (mi, subs) in comps.iter().enumerate() {
                let yes: Vec<(usize, usize)> = pairs
                    .iter()
                    .zip(&verdicts)
                    .filter(|&(&(c, m, _, _), &v)| v && c == ci && m == mi)
                    .map(|(&(_, _, r, s), _)| (r, s))
                    .collect();
                for members in merge_groups(subs, &yes) {
                    communities.push(Community {
                        centroid: centroid(&emb, &members),
                        members,
                        cluster: Some(ci),
                    });
                }
            }
        }
        if config.outliers == OutlierPolicy::Singletons {
            for &c in &outliers {
                communities.push(Community {
                    members: vec![c],
                    centroid: centroid(&emb, &[c]),
                    cluster: None,
                });
            }
        }
        stats.seconds_merge = t.elapsed().as_secs_f64();
        stats.communities = communities.len();
        stats.largest_community = communities
            .iter()
            .map(|c| c.members.len())
            .max()
            .unwrap_or(0);
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(G2Rag {
            runtime: (),
            state: Arc::new(G2State {
                version: G2_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                config,
                chunks,
                chunk_emb: emb,
                communities,
                outliers,
                stats,
            }),
            encoder,
        })
    }
}

/// The G²RAG retriever: a [`Peer`] over its state (retrieval, `save` and `load` are the
/// peers' shared ones). `Send + Sync`; retrieval is read-only.
pub type G2Rag = Peer<G2State>;

impl G2Rag {
    /// A builder with the offline defaults (no LLM: the θ rule merges).
    pub fn builder() -> G2RagBuilder {
        G2RagBuilder {
            inputs: BuildInputs::default(),
            llm: None,
            judge: None,
            config: G2Config::default(),
        }
    }

    /// The communities, in build order (cluster, component, merged group).
    pub fn communities(&self) -> &[Community] {
        &self.state.communities
    }

    /// The chunks HDBSCAN called noise, ascending.
    pub fn outliers(&self) -> &[ChunkId] {
        &self.state.outliers
    }

    /// The configuration.
    pub fn config(&self) -> &G2Config {
        &self.state.config
    }

    /// What indexing produced.
    pub fn stats(&self) -> &G2Stats {
        &self.state.stats
    }

    /// Both retrieval levels for `query` and their merge (before dense padding).
    pub async fn explain(&self, query: &str) -> Result<G2Explanation> {
        let e = self.embed_query(query).await?;
        Ok(self.explain_embedded(&e).1)
    }

    fn explain_embedded(&self, e: &[f32]) -> (Vec<f32>, G2Explanation) {
        let chunk_cos: Vec<f32> = self
            .state
            .chunk_emb
            .iter()
            .map(|row| lprag_core::cosine(e, row))
            .collect();
        let community_cos: Vec<f32> = self
            .state
            .communities
            .iter()
            .map(|c| lprag_core::cosine(e, &c.centroid))
            .collect();
        let why = dual_level(
            &chunk_cos,
            &community_cos,
            &self.state.communities,
            &self.state.config,
        );
        (chunk_cos, why)
    }
}

#[async_trait]
impl PeerState for G2State {
    type Runtime = ();
    type Open = ();
    const TYPE_NAME: &'static str = "G2Rag";
    const FILE: &'static str = G2_FILE;
    const DIR: lprag_core::dirs::DirSpec = G2_DIR;

    fn name(&self) -> &str {
        "g2"
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn query_shape(&self) -> (usize, usize) {
        (self.chunk_emb.dim(), self.config.max_query_bytes)
    }

    fn span() -> tracing::Span {
        tracing::info_span!("g2.retrieve")
    }

    fn open(&self, _dir: &Path, _open: ()) -> Result<()> {
        Ok(())
    }

    async fn rank(
        peer: &G2Rag,
        _query: &str,
        e: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        let me = peer.clone();
        let (chunk_cos, why) = blocking(move || Ok(me.explain_embedded(&e))).await?;
        let hit = |h: &G2Hit| ScoredChunk {
            chunk: peer.state.chunks[h.chunk].clone(),
            score: h.score,
        };
        match selection {
            Selection::TopK(k) => {
                let mut out: Vec<G2Hit> = why.merged.into_iter().take(k).collect();
                if out.len() < k && peer.state.config.pad_with_dense {
                    let have: HashSet<ChunkId> = out.iter().map(|h| h.chunk).collect();
                    let last = out.last().map(|h| h.score);
                    let cosines = chunk_cos.iter().copied().enumerate();
                    out.extend(dense_padding(&have, last, cosines, k).into_iter().map(
                        |(chunk, cosine, score)| G2Hit {
                            chunk,
                            cosine,
                            score,
                            source: G2Source::Dense,
                        },
                    ));
                }
                Ok(out.iter().map(hit).collect())
            }
            other => Ok(other
                .apply(why.merged, |h| h.score)
                .iter()
                .map(hit)
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::Encoder;

    /// Unit vectors at these angles (degrees).
    fn at(degrees: &[f32]) -> Embeddings {
        let rows: Vec<Vec<f32>> = degrees
            .iter()
            .map(|d| vec![d.to_radians().cos(), d.to_radians().sin()])
            .collect();
        Embeddings::from_rows(2, &rows).unwrap()
    }

    #[test]
    fn knn_components_delta_split_and_theta_merge_by_hand() {
        // Chunks 0..5 at 0°, 10°, 22°, 90°, 100°.
        let emb = at(&[0.0, 10.0, 22.0, 90.0, 100.0]);
        let members = [0, 1, 2, 3, 4];

        // k = 1: 0→1, 1→0 (10° beats 12°), 2→1, 3→4, 4→3.
        let knn = cluster_knn(&emb, &members, 1);
        let arcs: Vec<(usize, usize)> = knn.iter().map(|&(a, b, _)| (a, b)).collect();
        assert_eq!(arcs, vec![(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]);
        assert!((knn[0].2 - (1.0 - 10f32.to_radians().cos())).abs() < 1e-6);
        // Two weakly connected components, no cut at δ = 0.1.
        assert_eq!(
            split_cluster(&emb, &members, 1, 0.1),
            vec![vec![vec![0, 1, 2]], vec![vec![3, 4]]]
        );

        // k = 2: 3→{4, 2} (10°, 68°) and 4→{3, 2} (10°, 78°) join everything into one
        // component...
        assert_eq!(
            split_cluster(&emb, &members, 2, 2.0),
            vec![vec![vec![0, 1, 2, 3, 4]]]
        );
        // ...and δ = 0.1 keeps 0→2 (1 − cos 22° = 0.073) but cuts 68° (0.625) and 78°
        // (0.792): two subgroups of the one component.
        let split = split_cluster(&emb, &members, 2, 0.1);
        assert_eq!(split, vec![vec![vec![0, 1, 2], vec![3, 4]]]);
        // δ = 0.66 keeps the 68° edge and cuts only 78°: one subgroup.
        assert_eq!(
            split_cluster(&emb, &members, 2, 0.66),
            vec![vec![vec![0, 1, 2, 3, 4]]]
        );

        // Centroids: atan2(sin 10° + sin 22°, 1 + cos 10° + cos 22°) = 10.6625°, and 95°;
        // their cosine is cos 84.3375° = 0.0987.
        let subs = &split[0];
        let (a, b) = (centroid(&emb, &subs[0]), centroid(&emb, &subs[1]));
        let ca = 10.6625f32.to_radians();
        assert!((a[0] - ca.cos()).abs() < 1e-5 && (a[1] - ca.sin()).abs() < 1e-5);
        assert!((b[0] - 95f32.to_radians().cos()).abs() < 1e-6);
        assert!((b[1] - 95f32.to_radians().sin()).abs() < 1e-6);
        let cos_ab = dot(&a, &b);
        assert!((cos_ab - 0.0987).abs() < 1e-4, "{cos_ab}");
        // θ = 0.09 merges, θ = 0.11 does not.
        assert!((0.09..0.11).contains(&cos_ab));
        assert_eq!(merge_groups(subs, &[(0, 1)]), vec![vec![0, 1, 2, 3, 4]]);
        assert_eq!(merge_groups(subs, &[]), subs.clone());
    }

    #[test]
    fn centroid_is_the_normalised_mean_of_unit_vectors() {
        let emb = Embeddings::from_rows(2, &[vec![2.0, 0.0], vec![0.0, 5.0]]).unwrap();
        let c = centroid(&emb, &[0, 1]);
        let h = std::f32::consts::FRAC_1_SQRT_2;
        assert!((c[0] - h).abs() < 1e-6 && (c[1] - h).abs() < 1e-6);
        assert_eq!(centroid(&emb, &[]), vec![0.0, 0.0]);
    }

    #[test]
    fn merge_groups_is_transitive_and_order_free() {
        let g = vec![vec![5], vec![1, 2], vec![7], vec![0]];
        // 0–1 and 1–3 chain: {5, 1, 2, 0}; 2 alone.
        assert_eq!(
            merge_groups(&g, &[(1, 3), (0, 1)]),
            vec![vec![0, 1, 2, 5], vec![7]]
        );
        assert_eq!(
            merge_groups(&g, &[(0, 1), (1, 3)]),
            merge_groups(&g, &[(1, 3), (0, 1)])
        );
    }

    fn community(members: &[ChunkId]) -> Community {
        Community {
            members: members.to_vec(),
            centroid: vec![],
            cluster: Some(0),
        }
    }

    #[test]
    fn dual_level_merge_orders_by_hand() {
        // Six chunks' cosines to the query.
        let chunk_cos = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1];
        // Communities: A = {1, 5}, B = {3, 4, 2}; B's centroid is closer to the query.
        let comms = [community(&[1, 5]), community(&[2, 3, 4])];
        let comm_cos = [0.2, 0.6];
        let config = G2Config {
            chunk_top_k: 2,         // chunks 0, 1
            community_top_k: 2,     // B, then A
            community_chunk_cap: 2, // B → 2, 3; A → 1, 5
            ..G2Config::default()
        };
        let why = dual_level(&chunk_cos, &comm_cos, &comms, &config);
        assert_eq!(why.chunk_level, vec![(0, 0.9), (1, 0.8)]);
        assert_eq!(why.communities, vec![(1, 0.6), (0, 0.2)]);
        assert_eq!(
            why.community_level,
            vec![(2, 0.7, 1), (3, 0.6, 1), (1, 0.8, 0), (5, 0.1, 0)]
        );
        let ids = |w: &G2Explanation| w.merged.iter().map(|h| h.chunk).collect::<Vec<_>>();
        // Interleave: 0 (chunk), 2 (B), 1 (chunk), 3 (B), then the chunk level is done;
        // 1 again (A) is skipped, 5 (A).
        assert_eq!(ids(&why), vec![0, 2, 1, 3, 5]);
        assert_eq!(why.merged[1].source, G2Source::Community(1));
        assert_eq!(why.merged[2].source, G2Source::Chunk);
        // Scores are cosines capped to stay sorted: 0.9, 0.7, min(0.8, 0.7), 0.6, 0.1.
        let scores: Vec<f32> = why.merged.iter().map(|h| h.score).collect();
        assert_eq!(scores, vec![0.9, 0.7, 0.7, 0.6, 0.1]);
        assert_eq!(why.merged[2].cosine, 0.8);

        let chunk_first = G2Config {
            merge_order: MergeOrder::ChunkFirst,
            ..config.clone()
        };
        assert_eq!(
            ids(&dual_level(&chunk_cos, &comm_cos, &comms, &chunk_first)),
            vec![0, 1, 2, 3, 5]
        );
        let community_first = G2Config {
            merge_order: MergeOrder::CommunityFirst,
            ..config.clone()
        };
        let cf = dual_level(&chunk_cos, &comm_cos, &comms, &community_first);
        assert_eq!(ids(&cf), vec![2, 3, 1, 5, 0]);
        // Chunk 1 came first from community A.
        assert_eq!(cf.merged[2].source, G2Source::Community(0));

        // One community only, capped at one chunk: B → 2.
        let narrow = G2Config {
            community_top_k: 1,
            community_chunk_cap: 1,
            ..config
        };
        assert_eq!(
            ids(&dual_level(&chunk_cos, &comm_cos, &comms, &narrow)),
            vec![0, 2, 1]
        );
    }

    #[test]
    fn hdbscan_finds_two_groups_and_an_outlier() {
        // Two tight arcs of four and one stray direction.
        let emb = at(&[0.0, 1.0, 2.0, 3.0, 90.0, 91.0, 92.0, 93.0, 200.0]);
        let config = G2Config {
            min_cluster_size: 3,
            min_samples: Some(2),
            ..G2Config::default()
        };
        for distance in [ClusterDistance::Cosine, ClusterDistance::Euclidean] {
            let labels = hdbscan_clusters(
                &emb,
                &G2Config {
                    distance,
                    ..config.clone()
                },
            )
            .unwrap();
            assert!(labels[..4].iter().all(|l| l.is_some() && *l == labels[0]));
            assert!(labels[4..8].iter().all(|l| l.is_some() && *l == labels[4]));
            assert_ne!(labels[0], labels[4]);
            assert_eq!(labels[8], None, "{labels:?}");
        }
        // Too few chunks for a cluster: all noise, no panic.
        assert_eq!(
            hdbscan_clusters(&at(&[0.0, 1.0]), &G2Config::default()).unwrap(),
            vec![None, None]
        );
        assert_eq!(hdbscan_clusters(&at(&[0.0]), &config).unwrap(), vec![None]);
    }

    #[test]
    fn too_many_chunks_to_cluster_is_an_error_before_the_matrix() {
        // 30 one-dimensional chunks against a bound of 20: refused with the size it would
        // take; 0 lifts the bound.
        let emb = Embeddings::new(1, (0..30).map(|i| 1.0 + i as f32).collect()).unwrap();
        let tight = G2Config {
            max_cluster_chunks: 20,
            ..G2Config::default()
        };
        let err = hdbscan_clusters(&emb, &tight).unwrap_err().to_string();
        assert!(
            err.contains("max_cluster_chunks") && err.contains("30 × 30"),
            "{err}"
        );
        let open = G2Config {
            max_cluster_chunks: 0,
            ..G2Config::default()
        };
        assert_eq!(hdbscan_clusters(&emb, &open).unwrap().len(), 30);
    }

    #[test]
    fn config_ranges_are_checked() {
        assert!(G2Config::default().validate().is_ok());
        let field_of = |c: G2Config| c.validate().unwrap_err().to_string();
        let d = G2Config::default;
        assert!(field_of(G2Config { knn_k: 0, ..d() }).contains("knn_k"));
        assert!(field_of(G2Config {
            split_distance: 2.5,
            ..d()
        })
        .contains("split_distance"));
        assert!(field_of(G2Config {
            split_distance: -0.1,
            ..d()
        })
        .contains("split_distance"));
        assert!(field_of(G2Config {
            split_distance: f32::NAN,
            ..d()
        })
        .contains("split_distance"));
        assert!(field_of(G2Config {
            merge_threshold: 1.5,
            ..d()
        })
        .contains("merge_threshold"));
        assert!(field_of(G2Config {
            min_cluster_size: 1,
            ..d()
        })
        .contains("min_cluster_size"));
        assert!(field_of(G2Config {
            min_samples: Some(0),
            ..d()
        })
        .contains("min_samples"));
        assert!(field_of(G2Config {
            epsilon: -1.0,
            ..d()
        })
        .contains("epsilon"));
        assert!(field_of(G2Config {
            chunk_top_k: 0,
            community_top_k: 0,
            ..d()
        })
        .contains("chunk_top_k"));
        assert!(field_of(G2Config {
            community_chunk_cap: 0,
            ..d()
        })
        .contains("community_chunk_cap"));
        // One level alone is allowed (ablations).
        assert!(G2Config {
            chunk_top_k: 0,
            ..d()
        }
        .validate()
        .is_ok());
        // Serde: missing fields take their defaults.
        let c: G2Config =
            serde_json::from_str(r#"{"knn_k": 7, "outliers": "Singletons"}"#).unwrap();
        assert_eq!(c.knn_k, 7);
        assert_eq!(c.outliers, OutlierPolicy::Singletons);
        assert_eq!(c.split_distance, 0.5);
    }

    /// Embeds a text ending in a number as the unit vector at that many degrees.
    struct AngleEncoder;

    #[async_trait]
    impl Encoder for AngleEncoder {
        fn name(&self) -> &str {
            "angle"
        }
        fn dimension(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
            let degrees: Vec<f32> = texts
                .iter()
                .map(|t| {
                    t.split_whitespace()
                        .filter_map(|w| w.parse::<f32>().ok())
                        .next_back()
                        .unwrap_or(45.0)
                })
                .collect();
            Ok(at(&degrees))
        }
    }

    async fn build_angles(degrees: &[f32], config: G2Config) -> G2Rag {
        let docs: Vec<Document> = degrees
            .iter()
            .enumerate()
            .map(|(i, d)| Document::new(i.to_string(), "", format!("direction {d}")))
            .collect();
        G2Rag::builder()
            .encoder(Arc::new(AngleEncoder))
            .config(config)
            .build(&docs)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn outlier_policy_drops_or_keeps_noise_as_singletons() {
        let degrees = [0.0, 1.0, 2.0, 3.0, 90.0, 91.0, 92.0, 93.0, 200.0];
        let config = G2Config {
            min_cluster_size: 3,
            min_samples: Some(2),
            ..G2Config::default()
        };
        let dropped = build_angles(&degrees, config.clone()).await;
        let s = dropped.stats();
        assert_eq!((s.clusters, s.outliers, s.communities), (2, 1, 2), "{s:?}");
        assert_eq!(dropped.outliers(), &[8]);
        let members: Vec<Vec<ChunkId>> = dropped
            .communities()
            .iter()
            .map(|c| c.members.clone())
            .collect();
        assert_eq!(members, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // A query at 200° finds the dropped chunk through the chunk level only.
        let why = dropped.explain("toward 199").await.unwrap();
        assert_eq!(why.chunk_level[0].0, 8);
        assert!(why.community_level.iter().all(|&(c, _, _)| c != 8));

        let kept = build_angles(
            &degrees,
            G2Config {
                outliers: OutlierPolicy::Singletons,
                ..config
            },
        )
        .await;
        assert_eq!(kept.stats().communities, 3);
        let last = kept.communities().last().unwrap();
        assert_eq!((last.members.clone(), last.cluster), (vec![8], None));
        let why = kept.explain("toward 199").await.unwrap();
        assert_eq!(why.communities[0].0, 2);
        assert_eq!(why.community_level[0].0, 8);
    }
}
