//! GFM-RAG: a query-dependent GNN over a knowledge-graph index.
//!
//! **Index.** A [`TripleExtractor`] reads entities and `(subject, relation, object)` triples
//! out of every chunk — an LLM with the OpenIE prompt (`lprag::llm::LlmTripleExtractor`) or,
//! offline, the [`CooccurrenceExtractor`] (capitalised spans, sentence co-occurrence,
//! title mentions). Entity names are normalised (lower case, single spaces) and merged by
//! string; **entity resolution** then embeds every name and adds
//! `(e, equivalent, e')` where cos(e, e') ≥ 0.8 among each entity's nearest neighbours.
//! Every triple gets an **inverse edge** with its own relation (`"inverse of r"`), so
//! messages flow both ways. The entity × chunk incidence (which chunks mention which
//! entity) is kept for document ranking.
//!
//! **Query entities** — the paper does not say how query entities are found; lprag's
//! choice: the extractor's spans of the question (capitalised runs, years) are linked to an
//! entity with the same normalised name, else to the entity whose name embedding is most
//! similar if cos ≥ `link_threshold` (0.8). A question with no linked span starts from the
//! `fallback_entities` (5) entities whose names are most similar to the whole question.
//!
//! **Retrieval.** The GNN ([`lprag_model::gfm`]: DistMult messages, sum + boundary,
//! Linear(2d→d) + LayerNorm + ReLU + residual; the paper's L = 6, d = 512, which the builder
//! uses on a GPU device, while on the CPU it defaults to [`GfmConfig::cpu`]'s L = 3, d = 32
//! and shorter training so that indexing finishes in minutes) scores every entity; the
//! top T = 20 entities weighted 1/df rank the chunks (eq. 14–16,
//! [`lprag_model::gfm::rank_documents`]). Chunks that mention none of the top entities
//! follow in dense order when `pad_with_dense` is on (their scores capped so the list stays
//! sorted), as in [`crate::QcgRag`].
//!
//! **Training.** Unsupervised KG-completion pre-training always runs: triples sampled from
//! the index with the head or the tail masked, asked as the text `"head relation"` or
//! `"relation tail"` from the kept entity, every true answer a target, and the asked edges
//! hidden from the graph for that query. With labelled `(question, gold document ids)`
//! pairs ([`GfmRagBuilder::labelled`]) a supervised fine-tuning stage follows, its targets
//! the entities of the gold documents; without labels (lprag's choice, the paper always
//! has them) the fine-tuning questions are synthetic — `synthetic_queries` (500) sampled
//! chunks, one question each from the builder's query generator (offline: the heuristic
//! one), the chunk's entities as targets. Both use the paper's loss (α·BCE + (1 − α)·ranking,
//! α = 0.3) and AdamW 5e-4. A model trained elsewhere can be started from
//! ([`GfmRagBuilder::weights`]) — the GNN reads only sentence embeddings, so weights
//! transfer across corpora built with the same encoder.
//!
//! **Cost.** A query runs L layers over every edge: about `L·|E|·d` multiply-adds for the
//! messages plus `L·N·2d·d` for the updates, so query latency grows with the KG (see
//! `docs/benchmarks.md`). Queries run on the host with the trained weights (the same
//! arithmetic as the burn module); training runs the burn module on the builder's device.
//! On a CPU, [`GfmConfig::cpu`] (d = 32, L = 3, shorter training) is far cheaper; the
//! defaults are the paper's.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Document, Embeddings, Encoder, Error, QueryGenerator, Result, ScoredChunk,
    Selection, TrainReport, TripleExtractor,
};
use lprag_graph::KnnBackend;
use lprag_model::gfm::{
    rank_documents, GfmExample, GfmModel, GfmModelConfig, GfmTrainConfig, KgEdges,
};
use lprag_model::ComputeDevice;
use lprag_text::{
    CooccurrenceConfig, CooccurrenceExtractor, HeuristicQueryGenerator,
    HeuristicQueryGeneratorConfig,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

mod build;
mod config;
mod kg;
mod state;
mod update;

pub use build::GfmRagBuilder;
pub use config::GfmConfig;
use kg::{
    entity_index, extract_checked, knowledge_graph, link_query, pretrain_queries, set_graph_stats,
    EntityIndex, Kg,
};

pub use state::GFM_FORMAT_VERSION;
use state::{GfmRuntime, GfmState, GFM_DIR, GFM_FILE};

use crate::retrievers::common::{
    blocking, build_from, embed_all, embed_all_queries, input_setters, labelled_queries,
    select_hits, BuildInputs, Docs, Labelled, Peer, PeerState, Started,
};

/// The relation added by entity resolution.
pub const EQUIVALENT: &str = "equivalent";

pub use lprag_graph::{entity_key, KgBuilder, NO_RELATION};

/// What indexing produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GfmStats {
    /// Chunks indexed.
    pub chunks: usize,
    /// Distinct entities after name normalisation.
    pub entities: usize,
    /// Relation types, inverses included.
    pub relations: usize,
    /// Extracted triples (distinct, before inverses).
    pub triples: usize,
    /// `equivalent` pairs added by entity resolution.
    pub equivalent_pairs: usize,
    /// Edges the GNN runs over (triples, equivalences and their inverses).
    pub edges: usize,
    /// KG-completion pre-training queries.
    pub pretrain_queries: usize,
    /// Fine-tuning questions used.
    pub finetune_queries: usize,
    /// Where they came from: `"labelled"`, `"synthetic"`, or empty when there was no
    /// fine-tuning.
    pub finetune_source: String,
    /// Pre-training report.
    pub pretrain: Option<TrainReport>,
    /// Fine-tuning report.
    pub finetune: Option<TrainReport>,
    /// Wall-clock seconds of the whole build.
    pub seconds: f64,
}

/// Query entities, top entities and chunk scores of one query (see [`GfmRag::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GfmScores {
    /// Entity names the query started from.
    pub query_entities: Vec<String>,
    /// True when no span linked and the fallback (nearest names) was used.
    pub fallback: bool,
    /// The top T entities with their relevance, best first.
    pub top_entities: Vec<(String, f32)>,
    /// Chunks mentioning a top entity with their eq. 16 scores, best first.
    pub chunks: Vec<(ChunkId, f32)>,
}

/// The GFM-RAG retriever: a [`Peer`] over its state (retrieval, `save`, `load` and the
/// updates of the `update` module are the peers' shared ones). `Send + Sync`; retrieval is
/// read-only.
pub type GfmRag = Peer<GfmState>;

impl GfmRag {
    /// The configuration.
    pub fn config(&self) -> &GfmConfig {
        &self.state.config
    }

    /// The encoder of chunks, entity names, relations and queries.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// What indexing produced.
    pub fn stats(&self) -> &GfmStats {
        &self.state.stats
    }

    /// Entity names, by entity id.
    pub fn entities(&self) -> &[String] {
        &self.state.entities
    }

    /// Chunks mentioning each entity, by entity id.
    pub fn mentions(&self) -> &[Vec<u32>] {
        &self.state.mentions
    }

    /// Relation names, by relation id (inverses in the second half, then none).
    pub fn relations(&self) -> &[String] {
        &self.state.relations
    }

    /// The KG's edges.
    pub fn edges(&self) -> &KgEdges {
        &self.state.edges
    }

    /// Query entities, top entities and chunk scores for `query`.
    pub async fn explain(&self, query: &str) -> Result<GfmScores> {
        let q = self.embed_query(query).await?;
        self.scores_for(query.trim(), &q).await
    }

    async fn scores_for(&self, query: &str, q: &[f32]) -> Result<GfmScores> {
        let (entities, fallback) = link_query(
            &self.runtime.index,
            &*self.encoder,
            query,
            q,
            &self.state.config,
        )
        .await?;
        // The GNN pass and the ranking are CPU work: a blocking thread, not the async one.
        let (model, state) = (self.runtime.model.clone(), self.state.clone());
        let (qv, ents) = (q.to_vec(), entities.clone());
        let t = self.state.config.top_entities;
        let (chunks, top) = blocking(move || {
            let relevance = model.score(&qv, &ents)?;
            let chunks: Vec<(ChunkId, f32)> = rank_documents(&relevance, &state.mentions, t)
                .into_iter()
                .map(|(c, s)| (c as ChunkId, s))
                .collect();
            let mut top: Vec<(usize, f32)> = relevance.iter().copied().enumerate().collect();
            top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Ok((chunks, top))
        })
        .await?;
        Ok(GfmScores {
            query_entities: entities
                .iter()
                .map(|&e| self.state.entities[e as usize].clone())
                .collect(),
            fallback,
            top_entities: top
                .into_iter()
                .take(t)
                .map(|(e, p)| (self.state.entities[e].clone(), p))
                .collect(),
            chunks,
        })
    }

    /// [`GfmRag::load`] onto `device`.
    pub fn load_on(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        device: ComputeDevice,
    ) -> Result<Self> {
        Self::load_opened(dir.as_ref(), encoder, device)
    }
}

#[async_trait]
impl PeerState for GfmState {
    type Runtime = GfmRuntime;
    /// The device the GNN is loaded onto (`load`: the CPU).
    type Open = ComputeDevice;
    const TYPE_NAME: &'static str = "GfmRag";
    const FILE: &'static str = GFM_FILE;
    const DIR: lprag_core::dirs::DirSpec = GFM_DIR;

    fn name(&self) -> &str {
        "gfm"
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn query_shape(&self) -> (usize, usize) {
        (self.chunk_emb.dim(), self.config.max_query_bytes)
    }

    fn span() -> tracing::Span {
        tracing::info_span!("gfm.retrieve")
    }

    fn open(&self, dir: &Path, device: ComputeDevice) -> Result<GfmRuntime> {
        state::open(self, dir, device)
    }

    fn save_files(peer: &GfmRag, dir: &Path) -> Result<()> {
        state::save_files(peer, dir)
    }

    async fn rank(
        peer: &GfmRag,
        query: &str,
        q: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        let scores = peer.scores_for(query.trim(), &q).await?;
        let state = &peer.state;
        let pad = state.config.pad_with_dense;
        let pad = pad.then_some((&state.chunk_emb, q.as_slice()));
        Ok(select_hits(&state.chunks, scores.chunks, selection, pad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_model::Device;

    #[test]
    fn kg_builder_merges_names_adds_inverses_and_keeps_mentions() {
        let mut kg = KgBuilder::default();
        kg.triple("Bob  Dylan", "born in", "Duluth", 0);
        kg.triple("bob dylan", "Born in", "Duluth", 1); // same triple, another chunk
        kg.triple("Duluth", "in", "Minnesota", 1);
        kg.triple("Duluth", "in", "duluth", 1); // self loop: dropped
        kg.mention("Hibbing", 2);
        assert_eq!(
            kg.names,
            vec!["Bob Dylan", "Duluth", "Minnesota", "Hibbing"]
        );
        assert_eq!(kg.relation_names, vec!["born in", "in"]);
        assert_eq!(kg.triples.len(), 2);
        assert_eq!(
            kg.mentions_sorted(),
            vec![vec![0, 1], vec![0, 1], vec![1], vec![2]]
        );
        let (edges, names) = kg.edges().unwrap();
        assert_eq!(
            names,
            vec!["born in", "in", "inverse of born in", "inverse of in"]
        );
        assert_eq!(edges.len(), 4);
        assert_eq!(edges.edge(0), (0, 0, 1));
        assert_eq!(edges.edge(1), (1, 1, 2));
        // Inverses follow, in the same order, with relation r + R.
        assert_eq!(edges.edge(2), (1, 2, 0));
        assert_eq!(edges.edge(3), (2, 3, 1));
    }

    #[test]
    fn pretraining_queries_mask_one_end_and_hide_the_asked_edges() {
        let mut kg = KgBuilder::default();
        kg.triple("A", "r", "B", 0);
        kg.triple("A", "r", "C", 0);
        let (edges, _) = kg.edges().unwrap();
        let rel = Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let model = GfmModel::new(
            edges,
            rel,
            GfmModelConfig {
                hidden: 4,
                layers: 1,
            },
            0,
            &Device::default(),
        )
        .unwrap();
        let (texts, ex) = pretrain_queries(&kg, &model, 10, 3);
        assert_eq!(texts.len(), 2, "at most one query per forward triple");
        for (t, e) in texts.iter().zip(&ex) {
            if t == "A r" {
                // Tail masked: both B and C answer (A, r, ?); both edges and inverses hidden.
                assert_eq!(e.query_entities, vec![0]);
                assert_eq!(e.targets.len(), 2);
                let mut h = e.hidden_edges.clone();
                h.sort_unstable();
                assert_eq!(h, vec![0, 1, 2, 3]);
            } else {
                // Head masked: (?, r, B) or (?, r, C), answer A.
                assert!(t == "r B" || t == "r C", "{t}");
                assert_eq!(e.targets, vec![0]);
                assert_eq!(e.hidden_edges.len(), 2);
            }
        }
    }

    #[test]
    fn a_kg_without_triples_has_one_unused_relation() {
        let mut kg = KgBuilder::default();
        kg.mention("Apple", 0);
        kg.mention("Banana", 1);
        let (edges, names) = kg.edges().unwrap();
        assert_eq!((edges.len(), edges.num_relations()), (0, 1));
        assert_eq!(names, vec![NO_RELATION]);
    }

    #[test]
    fn config_is_checked() {
        let bad = GfmConfig {
            resolution_threshold: 1.5,
            ..GfmConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("resolution_threshold"));
        let bad = GfmConfig {
            top_entities: 0,
            ..GfmConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
