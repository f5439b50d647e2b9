//! G²RAG's configuration: how HDBSCAN clusters, what happens to its noise, how the two
//! retrieval levels merge, and the checks a configuration must pass.

use super::*;

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

    pub(crate) fn min_samples(&self) -> usize {
        self.min_samples.unwrap_or(self.min_cluster_size)
    }
}
