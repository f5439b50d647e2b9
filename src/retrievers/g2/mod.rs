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
//!   community chunk 1, chunk 2, …), repeats dropped; [`retrieve`](lprag_core::Retriever::retrieve) with
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
    blocking, build_from, dense_padding, input_setters, BuildInputs, Docs, Peer, PeerState, Started,
};

mod build;
mod cluster;
mod config;
mod search;
mod state;

pub use build::G2RagBuilder;
pub use cluster::{centroid, hdbscan_clusters, merge_groups, split_cluster};
pub use config::{ClusterDistance, G2Config, MergeOrder, OutlierPolicy};
pub use search::dual_level;

pub use state::G2_FORMAT_VERSION;
use state::{G2State, G2_DIR, G2_FILE};

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

/// The G²RAG retriever: a [`Peer`] over its state (retrieval, `save` and `load` are the
/// peers' shared ones). `Send + Sync`; retrieval is read-only.
pub type G2Rag = Peer<G2State>;

impl G2Rag {
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
