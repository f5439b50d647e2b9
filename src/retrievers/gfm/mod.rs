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

mod state;
mod update;

pub use state::GFM_FORMAT_VERSION;
use state::{GfmState, GFM_DIR, GFM_FILE};

use crate::retrievers::common::{
    blocking, embed_all, embed_all_queries, input_setters, labelled_queries, select_hits,
    BuildInputs, Labelled, Peer, PeerState, Started,
};

/// The relation added by entity resolution.
pub const EQUIVALENT: &str = "equivalent";

pub use lprag_graph::{entity_key, KgBuilder, NO_RELATION};

/// GFM-RAG's settings; the defaults are the paper's where it gives one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GfmConfig {
    /// The GNN's shape. Default: d = 512, L = 6.
    pub model: GfmModelConfig,
    /// KG-completion pre-training. Default [`GfmTrainConfig::default`] (10 epochs,
    /// AdamW 5e-4, batch 4, α = 0.3).
    pub pretrain: GfmTrainConfig,
    /// Supervised fine-tuning on labelled questions (when there are any). Same default.
    pub finetune: GfmTrainConfig,
    /// Triples sampled for pre-training queries (each asked once, head or tail masked at
    /// random). Default 2,000; 0 skips pre-training.
    pub pretrain_queries: usize,
    /// Entity resolution: cosine at or above which two entities get an `equivalent` edge.
    /// Default 0.8 (the paper's).
    pub resolution_threshold: f32,
    /// Entity resolution looks at this many nearest entities per entity. Default 10.
    pub resolution_neighbors: usize,
    /// Query spans link to an entity whose name embedding has at least this cosine (when
    /// no entity has the same name). Default 0.8.
    pub link_threshold: f32,
    /// Entities nearest the whole question used as query entities when no span links.
    /// Default 5.
    pub fallback_entities: usize,
    /// Top entities T that rank documents. Default 20 (the paper's).
    pub top_entities: usize,
    /// Fill a top-k list that the entities cannot fill with dense chunk search. Default
    /// true.
    pub pad_with_dense: bool,
    /// Without labelled questions, fine-tune on this many synthetic questions, one per
    /// sampled chunk, from the builder's query generator (default: the offline heuristic
    /// one), the chunk's entities as targets. Default 500; 0 skips it.
    pub synthetic_queries: usize,
    /// Seed of weight initialisation and pre-training sampling. Default 0.
    pub seed: u64,
    /// Settings of the offline [`CooccurrenceExtractor`], used when the builder is given
    /// no other extractor.
    pub offline_extractor: CooccurrenceConfig,
    /// The longest query, in bytes of UTF-8, that `retrieve` and `explain` embed; a longer
    /// one is [`lprag_core::Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an encoder's
    /// 512-token window).
    pub max_query_bytes: usize,
}

impl Default for GfmConfig {
    fn default() -> Self {
        Self {
            model: GfmModelConfig::default(),
            pretrain: GfmTrainConfig::default(),
            finetune: GfmTrainConfig::default(),
            pretrain_queries: 2000,
            resolution_threshold: 0.8,
            resolution_neighbors: 10,
            link_threshold: 0.8,
            fallback_entities: 5,
            top_entities: 20,
            pad_with_dense: true,
            synthetic_queries: 500,
            seed: 0,
            offline_extractor: CooccurrenceConfig::default(),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl GfmConfig {
    /// The CPU setting measured in `docs/benchmarks.md`: a smaller network (d = 32,
    /// L = 3), 400 pre-training queries and 300 synthetic fine-tuning questions, one epoch
    /// each (everything else as the default). About 8 minutes on 1,890 passages on two
    /// cores.
    pub fn cpu() -> Self {
        let mut c = Self {
            model: GfmModelConfig {
                hidden: 32,
                layers: 3,
            },
            pretrain_queries: 400,
            synthetic_queries: 300,
            ..Self::default()
        };
        c.pretrain.epochs = 1;
        c.finetune.epochs = 1;
        c
    }

    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        self.pretrain.validate()?;
        self.finetune.validate()?;
        for (name, v) in [
            ("resolution_threshold", self.resolution_threshold),
            ("link_threshold", self.link_threshold),
        ] {
            if !(-1.0..=1.0).contains(&v) {
                return Err(Error::invalid(
                    format!("GfmConfig.{name}"),
                    format!("{v} is not a cosine in [-1, 1]"),
                ));
            }
        }
        if self.top_entities == 0 {
            return Err(Error::invalid(
                "GfmConfig.top_entities",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

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

/// Builder of [`GfmRag`].
pub struct GfmRagBuilder {
    inputs: BuildInputs,
    extractor: Option<Arc<dyn TripleExtractor>>,
    labelled: Labelled,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    weights: Option<std::path::PathBuf>,
    device: ComputeDevice,
    config: Option<GfmConfig>,
    checkpoints: Option<std::path::PathBuf>,
}

impl GfmRagBuilder {
    input_setters!();

    /// Who reads triples out of chunks (default: the offline [`CooccurrenceExtractor`];
    /// `lprag::llm::LlmTripleExtractor` for the paper's OpenIE).
    pub fn extractor(mut self, extractor: Arc<dyn TripleExtractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// Labelled `(question, gold document ids)` pairs for supervised fine-tuning.
    pub fn labelled(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self
    }

    /// Who writes the synthetic fine-tuning questions when there are no labels (default:
    /// the offline [`HeuristicQueryGenerator`]; an `lprag::llm::LlmQueryGenerator` writes
    /// better ones).
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Start from weights saved by [`GfmRag::save`] (`dir/gfm.bpk`) of a model with the
    /// same shape and encoder width, e.g. trained on another corpus; training continues
    /// from them (set `pretrain_queries` to 0 and add no labels to use them as they are).
    pub fn weights(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.weights = Some(path.into());
        self
    }

    /// Where the GNN trains and runs (default [`ComputeDevice::Cpu`]).
    pub fn device(mut self, device: ComputeDevice) -> Self {
        self.device = device;
        self
    }

    /// Checkpoint pre-training and fine-tuning after every epoch in `dir/pretrain` and
    /// `dir/finetune` ([`lprag_model::gfm::GfmModel::train_resumable`]): a build
    /// interrupted during training and started again with the same documents and settings
    /// resumes after the last finished epoch (a finished stage returns at once). Default
    /// none. Triples written by an LLM are kept by the LLM's own response cache.
    pub fn checkpoints(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// The settings. Default: [`GfmConfig::cpu`] on the CPU device (the paper's d = 512,
    /// L = 6 network trains for hours on two cores) and [`GfmConfig::default`], the
    /// paper's setting, on any other device.
    pub fn config(mut self, config: GfmConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Chunk, extract, resolve entities, build the KG and train the GNN.
    pub async fn build(self, documents: &[Document]) -> Result<GfmRag> {
        let started = std::time::Instant::now();
        let config = self.config.clone().unwrap_or_else(|| {
            if self.device == ComputeDevice::Cpu {
                GfmConfig::cpu()
            } else {
                GfmConfig::default()
            }
        });
        config.validate()?;
        // The device is checked before anything is paid for.
        let device = self.device.to_burn()?;
        let Started {
            progress,
            chunks,
            encoder,
            chunk_emb,
            ..
        } = self.inputs.start(documents).await?;

        let extractor = self.extractor.unwrap_or_else(|| {
            Arc::new(CooccurrenceExtractor::new(config.offline_extractor.clone()))
        });
        let extractions = extract_checked(&*extractor, &chunks, &*progress).await?;
        let Kg {
            kg,
            entity_emb,
            equivalent_pairs,
            edges,
            relation_names,
            relation_emb,
        } = knowledge_graph(
            &extractions,
            extractor.name(),
            &*encoder,
            &config,
            &*progress,
            None,
        )
        .await?;
        let mut model = GfmModel::new(
            edges,
            relation_emb,
            config.model.clone(),
            config.seed,
            &device,
        )?;
        if let Some(path) = &self.weights {
            model.load_weights(path)?;
        }

        let mut stats = GfmStats {
            chunks: chunks.len(),
            entities: kg.names.len(),
            relations: relation_names.len(),
            triples: kg.triples.len() - equivalent_pairs.len(),
            equivalent_pairs: equivalent_pairs.len(),
            edges: model.edges().len(),
            ..GfmStats::default()
        };
        let mentions = kg.mentions_sorted();
        let index = EntityIndex {
            names: kg.names.clone(),
            keys: kg.ids.clone(),
            emb: entity_emb.clone(),
        };

        // Pre-training: KG completion.
        let (questions, pre) = pretrain_queries(&kg, &model, config.pretrain_queries, config.seed);
        if !pre.is_empty() {
            let qemb = embed_all_queries(
                &*encoder,
                &questions,
                "embed pretraining queries",
                &*progress,
            )
            .await?;
            let examples: Vec<GfmExample> = pre
                .into_iter()
                .enumerate()
                .map(|(i, mut ex)| {
                    ex.query = qemb.row(i).to_vec();
                    ex
                })
                .collect();
            stats.pretrain_queries = examples.len();
            let (cfg, p) = (config.pretrain.clone(), progress.clone());
            let dir = self.checkpoints.as_ref().map(|d| d.join("pretrain"));
            let (m, report) = blocking(move || {
                let r =
                    model.train_resumable(&examples, &cfg, "pretrain gfm", &*p, dir.as_deref())?;
                Ok((model, r))
            })
            .await?;
            model = m;
            stats.pretrain = Some(report);
        }

        // Fine-tuning: labelled questions, else synthetic ones (see the module docs).
        let questions: Vec<(String, Vec<usize>)> = if !self.labelled.is_empty() {
            labelled_queries(&chunks, &self.labelled)?
                .into_iter()
                .map(|q| (q.text, q.chunk_ids))
                .collect()
        } else if config.synthetic_queries > 0 {
            let mut rng = StdRng::seed_from_u64(config.seed ^ 0x5eed);
            let mut order: Vec<usize> = (0..chunks.len()).collect();
            order.shuffle(&mut rng);
            let batches: Vec<Vec<ChunkId>> = order
                .into_iter()
                .take(config.synthetic_queries)
                .map(|c| vec![c])
                .collect();
            let generator = self.query_generator.unwrap_or_else(|| {
                Arc::new(HeuristicQueryGenerator::new(
                    HeuristicQueryGeneratorConfig {
                        queries_per_batch: 1,
                        seed: config.seed,
                        ..HeuristicQueryGeneratorConfig::default()
                    },
                ))
            });
            generator
                .generate(&chunks, &batches)
                .await?
                .into_iter()
                .filter(|q| !q.text.trim().is_empty())
                .map(|q| {
                    if let Some(&c) = q.chunk_ids.iter().find(|&&c| c >= chunks.len()) {
                        return Err(Error::invalid(
                            "GFM-RAG query generator output",
                            format!("query {:?} links to chunk {c}, out of range", q.text),
                        ));
                    }
                    Ok((q.text, q.chunk_ids))
                })
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        if !questions.is_empty() {
            let mut chunk_entities: Vec<Vec<u32>> = vec![Vec::new(); chunks.len()];
            for (e, docs) in mentions.iter().enumerate() {
                for &c in docs {
                    chunk_entities[c as usize].push(e as u32);
                }
            }
            let qtexts: Vec<String> = questions.iter().map(|(q, _)| q.clone()).collect();
            let qemb = embed_all_queries(
                &*encoder,
                &qtexts,
                "embed fine-tuning questions",
                &*progress,
            )
            .await?;
            let mut examples = Vec::new();
            for (k, (question, gold)) in questions.iter().enumerate() {
                let mut targets: Vec<u32> = gold
                    .iter()
                    .flat_map(|&c| chunk_entities[c].iter().copied())
                    .collect();
                targets.sort_unstable();
                targets.dedup();
                if targets.is_empty() {
                    continue;
                }
                let (query_entities, _) =
                    link_query(&index, &*encoder, question, qemb.row(k), &config).await?;
                examples.push(GfmExample {
                    query: qemb.row(k).to_vec(),
                    query_entities,
                    targets,
                    hidden_edges: Vec::new(),
                });
            }
            stats.finetune_queries = examples.len();
            stats.finetune_source = if self.labelled.is_empty() {
                "synthetic".into()
            } else {
                "labelled".into()
            };
            if !examples.is_empty() {
                let (cfg, p) = (config.finetune.clone(), progress.clone());
                let dir = self.checkpoints.as_ref().map(|d| d.join("finetune"));
                let (m, report) = blocking(move || {
                    let r = model.train_resumable(
                        &examples,
                        &cfg,
                        "finetune gfm",
                        &*p,
                        dir.as_deref(),
                    )?;
                    Ok((model, r))
                })
                .await?;
                model = m;
                stats.finetune = Some(report);
            }
        }
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(GfmRag {
            state: Arc::new(GfmState {
                weights_file: None,
                version: GFM_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                config,
                chunks,
                chunk_emb,
                entities: index.names.clone(),
                entity_emb,
                mentions,
                relations: relation_names,
                relation_emb: model.relations().clone(),
                edges: model.edges().clone(),
                extractions: Some(extractions),
                stats,
            }),
            runtime: GfmRuntime {
                index: Arc::new(index),
                model: Arc::new(model),
            },
            encoder,
        })
    }
}

/// `extractor`'s findings in `chunks`, one per chunk (another count is an error naming the
/// extractor).
async fn extract_checked(
    extractor: &dyn TripleExtractor,
    chunks: &[Chunk],
    progress: &dyn lprag_core::Progress,
) -> Result<Vec<lprag_core::Extraction>> {
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    progress.start("extract triples", Some(chunks.len() as u64));
    let extractions = extractor.extract(chunks).await?;
    progress.finish("extract triples");
    if extractions.len() != chunks.len() {
        return Err(Error::invalid(
            format!("triple extractor {:?}", extractor.name()),
            format!(
                "returned {} extractions for {} chunks",
                extractions.len(),
                chunks.len()
            ),
        ));
    }
    Ok(extractions)
}

/// A knowledge graph with its embeddings, as a build or an update makes it.
struct Kg {
    kg: KgBuilder,
    entity_emb: Embeddings,
    equivalent_pairs: Vec<(u32, u32)>,
    edges: KgEdges,
    relation_names: Vec<String>,
    relation_emb: Embeddings,
}

/// Entity and relation embeddings already computed, by name (an update's old index).
type KnownNames<'a> = (&'a [String], &'a Embeddings);

/// The knowledge graph of `extractions` (one per chunk, by chunk id): entities merged by
/// name, their embeddings (names in `known_entities` reuse their row), entity resolution,
/// inverse edges, and the relations' embeddings (likewise reused from `known_relations`).
/// A build and an update both come here, so an update makes the graph a build on the
/// same chunks makes.
async fn knowledge_graph(
    extractions: &[lprag_core::Extraction],
    extractor: &str,
    encoder: &dyn Encoder,
    config: &GfmConfig,
    progress: &dyn lprag_core::Progress,
    known: Option<(KnownNames<'_>, KnownNames<'_>)>,
) -> Result<Kg> {
    let mut kg = KgBuilder::default();
    for (c, ex) in extractions.iter().enumerate() {
        for e in &ex.entities {
            kg.mention(e, c);
        }
        for t in &ex.triples {
            kg.triple(&t.subject, &t.relation, &t.object, c);
        }
    }
    if kg.names.is_empty() {
        return Err(Error::EmptyCorpus(format!(
            "the triple extractor {extractor:?} found no entity in {} chunks",
            extractions.len()
        )));
    }
    let entity_emb = embed_names(
        encoder,
        &kg.names,
        known.map(|k| k.0),
        "embed entities",
        progress,
    )
    .await?;

    // Entity resolution among each entity's nearest names.
    let equivalent_pairs = if kg.names.len() > 1 {
        let (emb, k, th) = (
            entity_emb.clone(),
            config.resolution_neighbors.max(1),
            config.resolution_threshold,
        );
        let lists =
            blocking(move || Ok(lprag_graph::knn(&emb, k, &KnnBackend::default())?)).await?;
        let mut pairs = HashSet::new();
        for (a, list) in lists.iter().enumerate() {
            for &(b, cos) in list {
                if cos >= th {
                    let (x, y) = (a.min(b as usize), a.max(b as usize));
                    pairs.insert((x as u32, y as u32));
                }
            }
        }
        let mut pairs: Vec<(u32, u32)> = pairs.into_iter().collect();
        pairs.sort_unstable();
        pairs
    } else {
        Vec::new()
    };
    if !equivalent_pairs.is_empty() {
        let eq = kg.relation(EQUIVALENT);
        for &(a, b) in &equivalent_pairs {
            kg.triples.insert((a, eq, b));
        }
    }
    let (edges, relation_names) = kg.edges()?;
    let relation_emb = embed_names(
        encoder,
        &relation_names,
        known.map(|k| k.1),
        "embed relations",
        progress,
    )
    .await?;
    Ok(Kg {
        kg,
        entity_emb,
        equivalent_pairs,
        edges,
        relation_names,
        relation_emb,
    })
}

/// Embeddings of `names`, rows of `known` names reused and only the others embedded.
async fn embed_names(
    encoder: &dyn Encoder,
    names: &[String],
    known: Option<KnownNames<'_>>,
    stage: &str,
    progress: &dyn lprag_core::Progress,
) -> Result<Embeddings> {
    let Some((known_names, known_emb)) = known else {
        return embed_all(encoder, names, stage, progress).await;
    };
    let row: HashMap<&str, usize> = known_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let fresh: Vec<String> = names
        .iter()
        .filter(|n| !row.contains_key(n.as_str()))
        .cloned()
        .collect();
    let dim = known_emb.dim();
    if fresh.is_empty() {
        let rows: Vec<usize> = names.iter().map(|n| row[n.as_str()]).collect();
        return Ok(known_emb.select(&rows));
    }
    let new_emb = embed_all(encoder, &fresh, stage, progress).await?;
    if new_emb.dim() != dim {
        return Err(Error::DimensionMismatch {
            location: format!("encoder '{}' ({stage})", encoder.name()),
            expected: dim,
            actual: new_emb.dim(),
        });
    }
    let mut next = 0;
    let mut rows = Vec::with_capacity(names.len() * dim);
    for n in names {
        match row.get(n.as_str()) {
            Some(&i) => rows.extend_from_slice(known_emb.row(i)),
            None => {
                rows.extend_from_slice(new_emb.row(next));
                next += 1;
            }
        }
    }
    Embeddings::new(dim, rows)
}

/// KG-completion queries: the texts to embed and the examples (query vectors unset).
fn pretrain_queries(
    kg: &KgBuilder,
    model: &GfmModel,
    count: usize,
    seed: u64,
) -> (Vec<String>, Vec<GfmExample>) {
    let edges = model.edges();
    let forward = edges.len() / 2;
    if forward == 0 || count == 0 {
        return (Vec::new(), Vec::new());
    }
    // (head, relation) → [(tail, edge id)] and (relation, tail) → [(head, edge id)].
    let mut by_head: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
    let mut by_tail: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
    for i in 0..forward {
        let (s, r, o) = edges.edge(i);
        by_head.entry((s, r)).or_default().push((o, i as u32));
        by_tail.entry((r, o)).or_default().push((s, i as u32));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut picks: Vec<usize> = (0..forward).collect();
    picks.shuffle(&mut rng);
    let mut texts = Vec::new();
    let mut out = Vec::new();
    for &i in picks.iter().take(count) {
        let (s, r, o) = edges.edge(i);
        let rel = &kg.relation_names[r as usize];
        let (text, start, answers) = if rng.random_bool(0.5) {
            (
                format!("{} {rel}", kg.names[s as usize]),
                s,
                &by_head[&(s, r)],
            )
        } else {
            (
                format!("{rel} {}", kg.names[o as usize]),
                o,
                &by_tail[&(r, o)],
            )
        };
        let targets: Vec<u32> = answers.iter().map(|&(e, _)| e).collect();
        // Hide the asked edges and their inverses (stored `forward` places later).
        let hidden: Vec<u32> = answers
            .iter()
            .flat_map(|&(_, id)| [id, id + forward as u32])
            .collect();
        texts.push(text);
        out.push(GfmExample {
            query: Vec::new(),
            query_entities: vec![start],
            targets,
            hidden_edges: hidden,
        });
    }
    (texts, out)
}

/// Entity names, keys and embeddings, for linking queries.
struct EntityIndex {
    names: Vec<String>,
    keys: HashMap<String, u32>,
    emb: Embeddings,
}

impl EntityIndex {
    fn from_names(names: Vec<String>, emb: Embeddings) -> Self {
        let keys = names
            .iter()
            .enumerate()
            .map(|(i, n)| (entity_key(n), i as u32))
            .collect();
        Self { names, keys, emb }
    }

    /// The entity most similar to `v` and its cosine.
    fn nearest(&self, v: &[f32]) -> Option<(u32, f32)> {
        self.emb
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u32, lprag_core::cosine(v, row)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    }

    fn nearest_k(&self, v: &[f32], k: usize) -> Vec<u32> {
        let mut all: Vec<(u32, f32)> = self
            .emb
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u32, lprag_core::cosine(v, row)))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.into_iter().take(k).map(|(i, _)| i).collect()
    }
}

/// Query entities of `question` (see the module docs) and whether the fallback was used.
async fn link_query(
    index: &EntityIndex,
    encoder: &dyn Encoder,
    question: &str,
    question_emb: &[f32],
    config: &GfmConfig,
) -> Result<(Vec<u32>, bool)> {
    let spans = CooccurrenceExtractor::default().spans(question);
    let mut linked = Vec::new();
    let mut unmatched = Vec::new();
    for s in spans {
        match index.keys.get(&entity_key(&s)) {
            Some(&id) => linked.push(id),
            None => unmatched.push(s),
        }
    }
    if !unmatched.is_empty() {
        let emb = encoder.embed(&unmatched).await?;
        for row in emb.iter() {
            if let Some((id, cos)) = index.nearest(row) {
                if cos >= config.link_threshold {
                    linked.push(id);
                }
            }
        }
    }
    linked.sort_unstable();
    linked.dedup();
    if linked.is_empty() {
        return Ok((
            index.nearest_k(question_emb, config.fallback_entities.max(1)),
            true,
        ));
    }
    Ok((linked, false))
}

/// The GFM-RAG retriever: a [`Peer`] over its state (retrieval, `save`, `load` and the
/// updates of the `update` module are the peers' shared ones). `Send + Sync`; retrieval is
/// read-only.
pub type GfmRag = Peer<GfmState>;

/// What a [`GfmRag`] rebuilds at load: the entity index and the GNN with its weights.
#[derive(Clone)]
pub struct GfmRuntime {
    index: Arc<EntityIndex>,
    model: Arc<GfmModel>,
}

impl GfmRag {
    /// A builder with the offline defaults.
    pub fn builder() -> GfmRagBuilder {
        GfmRagBuilder {
            inputs: BuildInputs::default(),
            extractor: None,
            labelled: Vec::new(),
            query_generator: None,
            weights: None,
            device: ComputeDevice::Cpu,
            config: None,
            checkpoints: None,
        }
    }

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
