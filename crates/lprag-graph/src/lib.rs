//! # lprag-graph
//!
//! The graphs of lprag's LP-RAG pipeline:
//!
//! * **Chunk graph**: [`knn`] and [`mutual_knn_edges`] connect chunks that are in each
//!   other's top-k by cosine (LP-RAG: k = [`DEFAULT_K`] = 5), exactly by blocked GEMM or
//!   approximately with HNSW or an inverted-file index ([`KnnBackend`], [`IvfIndex`]).
//! * **Nearest rows for one query**: [`nearest_by_cosine`] scans the rows; [`ColumnIndex`]
//!   gives the same answer from a 16-bit column-wise copy, reading only the query's
//!   non-zero columns and rescoring exactly every row near the cut; [`GraphIndex`] walks a
//!   proximity graph (approximate, a few thousand rows read per query).
//! * **Candidates of a query**: [`CandidateSearch`] finds a query's nearest chunks with a
//!   [`NearestSearch`] strategy (exact scan, [`ColumnIndex`], [`IvfIndex`] or
//!   [`GraphIndex`]) and adds
//!   the pool's chunk-graph neighbours, under a filter ([`CandidateRequest`]).
//! * **Chunk store**: [`MemoryStore`], the in-memory [`lprag_core::ChunkStore`] (records,
//!   vectors, representations; exact nearest chunks under a filter).
//! * **Adjacency**: [`ChunkGraph`] (sorted neighbour lists) on top of a compact [`Csr`]
//!   with a COO export, for message passing without petgraph in the hot loop;
//!   [`WeightedAdjacency`], growable by query nodes, with common-neighbour merges for the
//!   link predictors.
//! * **Batches** (Appendix A.2): [`sample_batches`] gives each chunk `v` the batch
//!   `{v} ∪` a uniformly-sized random subset of its neighbours, for query generation.
//! * **Training graph**: [`build_link_graph`] joins chunks and synthetic queries into a
//!   [`lprag_core::LinkGraph`] with query–chunk edges of weight 1.
//! * **Negatives**: [`NegativeSampler`] draws chunk ids uniformly or by degree.
//! * **Persistence**: [`save_link_graph`] / [`load_link_graph`] (and the chunk-graph
//!   pair) write a versioned, checksummed file atomically; link graphs stream through
//!   64 KiB blocks, so saving or loading one needs no second copy of its features
//!   ([`save_feature_rows`] / [`append_feature_rows`] for rows inside a larger buffer).
//!   [`map_link_graph`] / [`map_link_graph_chunks`] / [`map_feature_rows`] memory-map the
//!   rows instead of reading them to the heap; [`FeatureRowsWriter`] writes rows block by
//!   block.
//!
//! Every function returns a typed [`GraphError`] on bad input instead of panicking; it
//! converts into [`lprag_core::Error`] with `?`.
//!
//! ```
//! use lprag_core::{Embeddings, SyntheticQuery};
//! use lprag_graph::{
//!     build_link_graph, mutual_knn_edges, sample_batches, ChunkGraph, KnnBackend,
//!     NegativeSampler, NegativeSampling, DEFAULT_K,
//! };
//! use rand::SeedableRng;
//!
//! # fn main() -> Result<(), lprag_core::Error> {
//! // Six chunk embeddings: two clusters of three.
//! let chunks = Embeddings::from_rows(2, &[
//!     vec![1.0, 0.0], vec![0.9, 0.1], vec![0.8, 0.3],
//!     vec![0.0, 1.0], vec![0.1, 0.9], vec![0.3, 0.8],
//! ])?;
//!
//! // Mutual k-NN chunk graph (k = 2 here; LP-RAG uses DEFAULT_K = 5).
//! let edges = mutual_knn_edges(&chunks, 2, &KnnBackend::default())?;
//! let graph = ChunkGraph::from_edges(chunks.rows(), &edges)?;
//! assert_eq!(graph.neighbors(0), &[1, 2]);
//! assert_eq!(graph.isolated_count(), 0);
//! assert!(DEFAULT_K == 5);
//!
//! // A.2 batches: one per chunk, starting with the chunk itself; deterministic per seed.
//! let batches = sample_batches(&graph, 42);
//! assert_eq!(batches.len(), 6);
//! assert!(batches.iter().enumerate().all(|(v, b)| b[0] == v));
//!
//! // One synthetic query per batch (an LLM writes them in the real pipeline).
//! let queries: Vec<SyntheticQuery> = batches
//!     .iter()
//!     .map(|b| SyntheticQuery { text: "…".into(), chunk_ids: b.clone(), answer: None })
//!     .collect();
//! let query_emb = chunks.clone(); // stand-in for the queries' embeddings
//! let link_graph = build_link_graph(&chunks, &edges, &queries, &query_emb)?;
//! assert_eq!(link_graph.num_nodes(), 12);
//!
//! // Negative chunks for training, biased towards high-degree chunks.
//! let sampler = NegativeSampler::from_link_graph(
//!     &link_graph,
//!     NegativeSampling::Degree { power: 0.75 },
//! )?;
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
//! let positives: Vec<u32> = queries[0].chunk_ids.iter().map(|&c| c as u32).collect();
//! let negatives = sampler.sample_excluding(&mut rng, 4, &positives)?;
//! assert!(negatives.iter().all(|c| !positives.contains(c)));
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod adjacency;
mod bridge;
mod candidates;
mod columns;
mod components;
mod error;
mod graph;
mod ivf;
mod kernels;
mod kg;
mod knn;
mod link;
mod mapped;
mod nndescent;
mod persist;
mod proximity;
mod sampling;
mod store;
mod typed;

pub use adjacency::{pair_key, WeightedAdjacency};
pub use bridge::{bridge_edges, BridgeConfig};
pub use candidates::{
    expand_pool, neighbour_lists, CandidateRequest, CandidateSearch, ExactScan, NearestSearch,
    SearchKind,
};
pub use columns::ColumnIndex;
pub use components::{cluster_knn, components};
pub use error::GraphError;
pub use graph::{ChunkGraph, Csr};
pub use ivf::{IvfIndex, IvfParams};
pub use kernels::{inverse_norms, nearest_by_cosine, nearest_by_cosine_where, PARALLEL_SCAN_FROM};
pub use kg::{entity_key, KgBuilder, NO_RELATION};
pub use knn::{
    knn, mutual_edges_of, mutual_knn_edges, update_knn, HnswParams, KnnBackend,
    DEFAULT_APPROXIMATE_FROM, DEFAULT_K,
};
pub use link::{build_link_graph, link_graph_from_features};
pub use mapped::{map_feature_rows, map_link_graph, map_link_graph_chunks, FeatureRowsWriter};
pub use nndescent::NnDescentParams;
pub use persist::{
    append_feature_rows, chunk_graph_from_bytes, fnv1a64, knn_lists_from_bytes,
    link_graph_checksum, link_graph_from_bytes, load_chunk_graph, load_knn_lists, load_link_graph,
    load_link_graph_chunk_edges, load_link_graph_chunks, save_chunk_graph, save_feature_rows,
    save_knn_lists, save_link_graph, ChunkEdges, FORMAT_VERSION,
};
pub use proximity::{GraphIndex, GraphParams};
pub use sampling::{sample_batches, NegativeSampler, NegativeSampling};
pub use store::MemoryStore;
pub use typed::{contextual_chunk_graph, InEdges, KgEdges};
