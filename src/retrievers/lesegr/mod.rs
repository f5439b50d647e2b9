//! CG-RAG's **LeSeGR** (Lexical-Semantic Graph Retrieval): sparse
//! and dense relevance inside message passing over a contextual chunk graph.
//!
//! # The chunk graph
//! - **Intra-document edges**: consecutive chunks of a document, `c_j → c_i` when `c_j`
//!   precedes `c_i` (the paper's adjacency; explicit cross-references are not detected).
//! - **Inter-document edges**: for every document link `(v, u)` — `u` cites `v` — each
//!   chunk `c_i` of `u` gets edges from the top-n (n = 4) chunks `c_j` of `v` by
//!   `r_ij = cos(sparse_i, sparse_j) + cos(dense_i, dense_j)`. Citations come from
//!   [`LesegrRagBuilder::document_links`]; a corpus without them (the default, and every
//!   HippoRAG-format benchmark) links each document to its `document_knn` nearest
//!   documents by mean chunk embedding.
//!
//! # Scoring
//! Per query, `δ_qj = 1 + w · bm25(q, c_j) / maxₖ bm25(q, c_k)` (1 everywhere when no chunk
//! shares a term with the query), gates `α_ij` per edge (`α_ii = 1`), and `K` layers of
//! δ·α-weighted mean aggregation; the score is `q · h⁽ᴷ⁾_i`
//! ([`lprag_model::lesegr`] has the formulas and lprag's choices). Two variants:
//! - [`LesegrVariant::Trained`] (default): α = σ(MLP(c_i − c_j)) and linear messages
//!   `h·(I + Δ_k)`, K = 2, trained in burn with cross-entropy over all chunks on gold
//!   chunks — from [`LesegrRagBuilder::labelled`] questions when the user has them, else
//!   from synthetic queries (the offline [`HeuristicQueryGenerator`] over pairs of linked
//!   chunks, as LP-RAG trains on its own).
//! - [`LesegrVariant::Lite`] (zero-shot): α = max(0, cos(c_i, c_j)), identity messages,
//!   one layer.
//!
//! # Per-query cost: the candidate subgraph
//! With `candidates = M > 0` (default 100), a query scores only the union of the dense
//! top-M and the BM25 top-M chunks (at least `k` of each), passing messages over those
//! chunks and their `K`-hop in-neighbours. What that changes: **the scores of the
//! candidates are exactly the whole-graph scores** (everything within `K` hops is in the
//! subgraph), but a chunk outside both top-M lists cannot be returned, however high its
//! graph score would have been. `candidates = 0` scores every chunk.
//!
//! # Updates
//! [`LesegrRag::add_documents`], `update_documents` and `remove_documents` embed only the
//! new chunks and redo what depends on the whole corpus (BM25, document links, the chunk
//! graph) with the build's code; the trained variant gates new edges with its stored gate
//! network instead of retraining ([`LesegrRag::add_documents_with`] says what that means).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Document, Embeddings, Encoder, Error, QueryGenerator, Result, ScoredChunk,
    Selection, SparseEncoder, SparseIndex, TrainReport,
};
use lprag_graph::KnnBackend;
use lprag_model::lesegr::{
    lite_alpha, propagate, train_lesegr_resumable, transform_query, InEdges, LesegrExample,
    LesegrTrainConfig, LesegrWeights,
};
use lprag_model::ComputeDevice;
use lprag_text::{Bm25, HeuristicQueryGenerator};
use serde::{Deserialize, Serialize};

mod state;
mod update;

pub use state::LESEGR_FORMAT_VERSION;
use state::{LesegrRuntime, LesegrState, LESEGR_DIR, LESEGR_FILE};

use crate::retrievers::common::{
    blocking, build_from, embed_all_queries, input_setters, select_hits, BuildInputs, Docs,
    Labelled, Peer, PeerState, Started,
};

/// Which LeSeGR scorer to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LesegrVariant {
    /// Learned gates and message transforms (K = `train.layers`).
    Trained,
    /// Zero-shot: α = max(0, cos), identity messages, `lite_layers` layers.
    Lite,
}

/// LeSeGR's settings. Every number the paper leaves unstated is a field here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LesegrConfig {
    /// Trained or lite. Default [`LesegrVariant::Trained`].
    pub variant: LesegrVariant,
    /// Layers of the lite variant. Default 1.
    pub lite_layers: usize,
    /// Inter-document edges per chunk and linked document, n. Default 4 (the paper's).
    pub inter_top_n: usize,
    /// Nearest documents linked to each document when no citations are given. Default 5;
    /// 0 adds no k-NN links.
    pub document_knn: usize,
    /// Weight w of the lexical signal in δ = 1 + w·bm25/max bm25. Default 1.
    pub sparse_weight: f32,
    /// Candidate chunks per retrieval list, M (dense top-M ∪ sparse top-M); 0 scores every
    /// chunk. Default 100.
    pub candidates: usize,
    /// Synthetic training questions per chunk pair (trained variant without labels).
    /// Default 2.
    pub queries_per_batch: usize,
    /// Training of the trained variant.
    pub train: LesegrTrainConfig,
    /// The longest query, in bytes of UTF-8, that `retrieve` and `explain` embed; a longer
    /// one is [`lprag_core::Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an encoder's
    /// 512-token window).
    pub max_query_bytes: usize,
}

impl Default for LesegrConfig {
    fn default() -> Self {
        Self {
            variant: LesegrVariant::Trained,
            lite_layers: 1,
            inter_top_n: 4,
            document_knn: 5,
            sparse_weight: 1.0,
            candidates: 100,
            queries_per_batch: 2,
            train: LesegrTrainConfig::default(),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl LesegrConfig {
    /// The untrained "LeSeGR-lite" settings (everything else default).
    pub fn lite() -> Self {
        Self {
            variant: LesegrVariant::Lite,
            ..Self::default()
        }
    }

    /// Layers used at retrieval.
    pub fn layers(&self) -> usize {
        match self.variant {
            LesegrVariant::Trained => self.train.layers,
            LesegrVariant::Lite => self.lite_layers,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.layers() == 0 || self.lite_layers > lprag_model::MAX_LAYERS {
            return Err(Error::invalid(
                "LesegrConfig",
                format!(
                    "layers must be in 1..={}, got {} (lite_layers {})",
                    lprag_model::MAX_LAYERS,
                    self.layers(),
                    self.lite_layers
                ),
            ));
        }
        if !(self.sparse_weight.is_finite() && self.sparse_weight >= 0.0) {
            return Err(Error::invalid(
                "LesegrConfig.sparse_weight",
                format!("must be finite and >= 0, got {}", self.sparse_weight),
            ));
        }
        if self.queries_per_batch == 0 {
            return Err(Error::invalid(
                "LesegrConfig.queries_per_batch",
                "must be at least 1",
            ));
        }
        self.train.validate()
    }
}

/// What indexing produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LesegrStats {
    /// Chunks (graph nodes).
    pub chunks: usize,
    /// Intra-document (adjacency) edges.
    pub intra_edges: usize,
    /// Inter-document edges (after removing repeats of intra-document ones).
    pub inter_edges: usize,
    /// Document links used (citations or k-NN).
    pub document_links: usize,
    /// Training queries (0 for the lite variant).
    pub training_queries: usize,
    /// The training run, when there was one.
    pub train: Option<TrainReport>,
    /// Seconds to build.
    pub seconds: f64,
}

/// One query's candidates, lexical gates and scores (see [`LesegrRag::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LesegrScores {
    /// Candidate chunks with their score and δ, best first (ties by lower id).
    pub chunks: Vec<(ChunkId, f32)>,
    /// δ_qj of each candidate, in the order of `chunks`.
    pub delta: Vec<f32>,
    /// Nodes the messages ran over (candidates and their K-hop in-neighbours).
    pub subgraph_size: usize,
}

/// Assembles a [`LesegrRag`].
pub struct LesegrRagBuilder {
    inputs: BuildInputs,
    sparse: Option<Arc<dyn SparseEncoder>>,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    labelled: Labelled,
    document_links: Option<Vec<(String, String)>>,
    device: ComputeDevice,
    config: LesegrConfig,
    checkpoints: Option<std::path::PathBuf>,
}

impl LesegrRagBuilder {
    input_setters!(LesegrConfig);

    /// Use this sparse encoder for δ and for inter-document relevance (default [`Bm25`]).
    pub fn sparse(mut self, sparse: Arc<dyn SparseEncoder>) -> Self {
        self.sparse = Some(sparse);
        self
    }

    /// Generate the synthetic training questions with this generator (trained variant
    /// without labels). Default: [`HeuristicQueryGenerator`] with
    /// `queries_per_batch` from the config.
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Train on these `(question, gold document ids)` pairs instead of synthetic queries
    /// (all chunks of a gold document are gold). Unknown document ids are an error.
    pub fn labelled(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self
    }

    /// Document links as `(citing, cited)` document ids; they replace the k-NN links.
    /// Unknown ids are an error.
    pub fn document_links(mut self, links: Vec<(String, String)>) -> Self {
        self.document_links = Some(links);
        self
    }

    /// Train on this device (default [`ComputeDevice::Cpu`]; `ComputeDevice::Cuda(0)` or
    /// `ComputeDevice::Wgpu(0)` with the `cuda` / `wgpu` features). Retrieval runs on the
    /// host.
    pub fn device(mut self, device: ComputeDevice) -> Self {
        self.device = device;
        self
    }

    /// Checkpoint training (trained variant) after every epoch in `dir`
    /// ([`lprag_model::lesegr::train_lesegr_resumable`]): a build interrupted during
    /// training and started again with the same documents and settings resumes after the
    /// last finished epoch (a finished training returns at once). Default none.
    pub fn checkpoints(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// Chunk, embed, fit the sparse index, build the chunk graph and (trained variant)
    /// train the scorer.
    pub async fn build(self, documents: &[Document]) -> Result<LesegrRag> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(LesegrRag);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<LesegrRag> {
        let config = self.config.clone();
        config.validate()?;
        let Started {
            progress,
            at: started,
            chunks,
            texts,
            encoder,
            chunk_emb: mut emb,
            ..
        } = self.inputs.start(documents).await?;
        emb.normalize();
        let (sparse, sparse_index) = fit_sparse(self.sparse.clone(), &texts, chunks.len())?;
        let cg = chunk_graph(
            &chunks,
            &emb,
            &*sparse_index,
            &config,
            self.document_links.as_deref(),
        )
        .await?;

        let mut stats = graph_stats(chunks.len(), &cg);
        let training = Training {
            chunks: &chunks,
            emb: &emb,
            cg: &cg,
            sparse_index: &*sparse_index,
            encoder: &*encoder,
            progress: &progress,
            config: &config,
        };
        let supervision = (&self.labelled, self.query_generator);
        let checkpoints = self.checkpoints.as_deref();
        let (alpha, transform, gate) = training
            .gates(supervision, self.device, checkpoints, &mut stats)
            .await?;
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(LesegrRag {
            state: Arc::new(LesegrState {
                version: LESEGR_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                sparse: sparse.name().to_string(),
                config,
                chunks,
                emb,
                graph: cg.graph,
                alpha,
                transform,
                gate,
                citations: self.document_links,
                stats,
            }),
            encoder,
            runtime: LesegrRuntime {
                sparse_encoder: sparse,
                sparse: sparse_index,
            },
        })
    }
}

/// The sparse encoder (`sparse`, default [`Bm25`]) and its index fitted on `texts`,
/// checked to hold `n_chunks` chunks.
fn fit_sparse(
    sparse: Option<Arc<dyn SparseEncoder>>,
    texts: &[String],
    n_chunks: usize,
) -> Result<(Arc<dyn SparseEncoder>, Arc<dyn SparseIndex>)> {
    let sparse = sparse.unwrap_or_else(|| Arc::new(Bm25::default()));
    let sparse_index: Arc<dyn SparseIndex> = Arc::from(sparse.fit(texts)?);
    check_sparse_len(&*sparse_index, n_chunks, "sparse index")?;
    Ok((sparse, sparse_index))
}

/// Where the trained variant's training questions come from: the labelled `(question,
/// gold document ids)` pairs, else the builder's query generator (default: the heuristic
/// one).
type Supervision<'a> = (&'a Labelled, Option<Arc<dyn QueryGenerator>>);

/// The build's statistics of the chunk graph `cg` over `n_chunks` chunks; training fills
/// the rest.
fn graph_stats(n_chunks: usize, cg: &ChunkGraph) -> LesegrStats {
    LesegrStats {
        chunks: n_chunks,
        intra_edges: cg.intra,
        inter_edges: cg.inter,
        document_links: cg.links.len(),
        ..LesegrStats::default()
    }
}

/// The gates α of a chunk graph's edges, with the trained variant's query transform and
/// gate network.
type Gates = (
    Vec<f32>,
    Option<Vec<f32>>,
    Option<lprag_model::lesegr::LesegrGate>,
);

/// What the gates of a build are computed, and the trained variant trained, on.
struct Training<'a> {
    /// The chunks.
    chunks: &'a [Chunk],
    /// Their normalised embeddings.
    emb: &'a Embeddings,
    /// The contextual chunk graph, with the documents' chunks.
    cg: &'a ChunkGraph,
    /// The fitted sparse index (δ of the training questions).
    sparse_index: &'a dyn SparseIndex,
    /// Embeds the training questions.
    encoder: &'a dyn Encoder,
    /// Progress of embedding and training.
    progress: &'a Arc<dyn lprag_core::Progress>,
    /// The build's settings.
    config: &'a LesegrConfig,
}

impl Training<'_> {
    /// The gates α, and for the trained variant the query transform and the gate network,
    /// trained on `device` (checkpointed in `checkpoints`) with its count and report
    /// written to `stats`.
    async fn gates(
        &self,
        supervision: Supervision<'_>,
        device: ComputeDevice,
        checkpoints: Option<&Path>,
        stats: &mut LesegrStats,
    ) -> Result<Gates> {
        Ok(match self.config.variant {
            LesegrVariant::Lite => (lite_alpha(self.emb, &self.cg.graph), None, None),
            LesegrVariant::Trained => {
                let questions = self.questions(supervision).await?;
                let examples = self.examples(questions).await?;
                stats.training_queries = examples.len();
                let LesegrWeights {
                    alpha,
                    transform,
                    gate,
                    ..
                } = self.train(examples, device, checkpoints, stats).await?;
                (alpha, Some(transform), Some(gate))
            }
        })
    }

    /// The training questions as `(question, gold chunks)`: generated when there are no
    /// labels, else the labelled ones.
    async fn questions(
        &self,
        (labelled, generator): Supervision<'_>,
    ) -> Result<Vec<(String, Vec<u32>)>> {
        let config = self.config;
        Ok(if labelled.is_empty() {
            let generator = generator.unwrap_or_else(|| {
                Arc::new(HeuristicQueryGenerator::new(
                    lprag_text::HeuristicQueryGeneratorConfig {
                        queries_per_batch: config.queries_per_batch,
                        ..Default::default()
                    },
                ))
            });
            generated_questions(&*generator, self.chunks, &self.cg.graph).await?
        } else {
            labelled_questions(labelled, &self.cg.doc_of, &self.cg.doc_chunks)?
        })
    }

    /// The training examples of `questions`: each embedded, with its δ excess from the
    /// sparse index.
    async fn examples(&self, questions: Vec<(String, Vec<u32>)>) -> Result<Vec<LesegrExample>> {
        let qtexts: Vec<String> = questions.iter().map(|(q, _)| q.clone()).collect();
        let qemb =
            embed_all_queries(self.encoder, &qtexts, "embed queries", &**self.progress).await?;
        Ok(questions
            .into_iter()
            .enumerate()
            .map(|(k, (text, positives))| LesegrExample {
                query: qemb.row(k).to_vec(),
                delta_excess: delta_excess(
                    &self.sparse_index.scores(&text),
                    self.config.sparse_weight,
                ),
                positives,
            })
            .collect())
    }

    /// The scorer trained on `examples` off the async runtime, on `device`, checkpointed in
    /// `checkpoints`; the report goes to `stats`.
    async fn train(
        &self,
        examples: Vec<LesegrExample>,
        device: ComputeDevice,
        checkpoints: Option<&Path>,
        stats: &mut LesegrStats,
    ) -> Result<LesegrWeights> {
        let (e2, g2, tc, dev, progress) = (
            self.emb.clone(),
            self.cg.graph.clone(),
            self.config.train.clone(),
            device.to_burn()?,
            self.progress.clone(),
        );
        let dir = checkpoints.map(Path::to_path_buf);
        let (weights, report) = blocking(move || {
            train_lesegr_resumable(&e2, &g2, &examples, &tc, &dev, &*progress, dir.as_deref())
        })
        .await?;
        stats.train = Some(report);
        Ok(weights)
    }
}

/// Training questions written by `generator`, one batch per chunk, as `(question, gold
/// chunks)`; a question that links no chunk or is blank is dropped, one that links a chunk
/// out of range is an error.
async fn generated_questions(
    generator: &dyn QueryGenerator,
    chunks: &[Chunk],
    graph: &InEdges,
) -> Result<Vec<(String, Vec<u32>)>> {
    // One batch per chunk: the chunk and one of its in-neighbours (in
    // turn), so two-chunk questions follow the graph's edges.
    let batches: Vec<Vec<ChunkId>> = (0..chunks.len())
        .map(|i| {
            let nb = graph.in_neighbors(i);
            match nb.get(i % nb.len().max(1)) {
                Some(&j) => vec![i, j as usize],
                None => vec![i],
            }
        })
        .collect();
    generator
        .generate(chunks, &batches)
        .await?
        .into_iter()
        .filter(|q| !q.text.trim().is_empty() && !q.chunk_ids.is_empty())
        .map(|q| {
            if let Some(&c) = q.chunk_ids.iter().find(|&&c| c >= chunks.len()) {
                return Err(Error::invalid(
                    "LeSeGR query generator output",
                    format!("query {:?} links to chunk {c}, out of range", q.text),
                ));
            }
            Ok((q.text, q.chunk_ids.iter().map(|&c| c as u32).collect()))
        })
        .collect()
}

/// The labelled questions as `(question, gold chunks)`: every chunk of their gold
/// documents (an unknown id is an error naming `labelled[k]`; a question whose gold
/// documents have no chunk is dropped).
fn labelled_questions(
    labelled: &Labelled,
    doc_of: &HashMap<String, usize>,
    doc_chunks: &[Vec<u32>],
) -> Result<Vec<(String, Vec<u32>)>> {
    labelled
        .iter()
        .enumerate()
        .map(|(k, (question, docs))| {
            let mut gold = Vec::new();
            for id in docs {
                let d = doc_of.get(id).ok_or_else(|| {
                    Error::invalid(
                        format!("labelled[{k}]"),
                        format!("unknown document id {id:?}"),
                    )
                })?;
                gold.extend_from_slice(&doc_chunks[*d]);
            }
            Ok((question.clone(), gold))
        })
        .filter(|r| r.as_ref().map_or(true, |(_, g)| !g.is_empty()))
        .collect::<Result<_>>()
}

/// The chunk graph and the document structure behind it.
struct ChunkGraph {
    /// Document id → document number (order of first appearance).
    doc_of: HashMap<String, usize>,
    /// Each document's chunks, in chunk order.
    doc_chunks: Vec<Vec<u32>>,
    /// `(cited, citing)` document numbers.
    links: Vec<(usize, usize)>,
    graph: InEdges,
    intra: usize,
    inter: usize,
}

/// The contextual chunk graph over `chunks` (normalised embeddings `emb`, fitted sparse
/// index): documents in order of first appearance, links from `citations`
/// (`(citing, cited)` ids) or else by document k-NN. A build and an index update both
/// come here, so an update makes the graph a build on the same chunks makes.
async fn chunk_graph(
    chunks: &[Chunk],
    emb: &Embeddings,
    sparse_index: &dyn SparseIndex,
    config: &LesegrConfig,
    citations: Option<&[(String, String)]>,
) -> Result<ChunkGraph> {
    let mut doc_of: HashMap<String, usize> = HashMap::new();
    let mut doc_chunks: Vec<Vec<u32>> = Vec::new();
    for c in chunks {
        let next = doc_of.len();
        let d = *doc_of
            .entry(c.provenance.document_id.clone())
            .or_insert(next);
        if d == doc_chunks.len() {
            doc_chunks.push(Vec::new());
        }
        doc_chunks[d].push(c.id as u32);
    }
    let links: Vec<(usize, usize)> = match citations {
        Some(pairs) => pairs
            .iter()
            .enumerate()
            .map(|(k, (citing, cited))| {
                let find = |id: &str| {
                    doc_of.get(id).copied().ok_or_else(|| {
                        Error::invalid(
                            format!("document_links[{k}]"),
                            format!("unknown document id {id:?}"),
                        )
                    })
                };
                Ok((find(cited)?, find(citing)?))
            })
            .collect::<Result<_>>()?,
        None => knn_document_links(emb, &doc_chunks, config.document_knn).await?,
    };
    let (graph, intra, inter) = {
        let vectors = sparse_index.vectors();
        let emb = emb.clone();
        let top_n = config.inter_top_n;
        let doc_chunks = doc_chunks.clone();
        let links = links.clone();
        blocking(move || {
            Ok(lprag_graph::contextual_chunk_graph(
                &emb,
                &vectors,
                &doc_chunks,
                &links,
                top_n,
            )?)
        })
        .await?
    };
    Ok(ChunkGraph {
        doc_of,
        doc_chunks,
        links,
        graph,
        intra,
        inter,
    })
}

fn check_sparse_len(index: &dyn SparseIndex, n: usize, what: &str) -> Result<()> {
    if index.len() != n {
        return Err(Error::DimensionMismatch {
            location: format!("{what} (texts fitted vs chunks)"),
            expected: n,
            actual: index.len(),
        });
    }
    Ok(())
}

/// δ_qj − 1 = w · s_j / max s for the chunks with `s_j > 0`.
fn delta_excess(scores: &[f64], weight: f32) -> Vec<(u32, f32)> {
    let max = scores.iter().copied().fold(0.0f64, f64::max);
    if max <= 0.0 || weight == 0.0 {
        return Vec::new();
    }
    scores
        .iter()
        .enumerate()
        .filter(|(_, &s)| s > 0.0)
        .map(|(j, &s)| (j as u32, weight * (s / max) as f32))
        .collect()
}

/// `(cited, citing)` document pairs: each document's `k` nearest by normalised mean chunk
/// embedding.
async fn knn_document_links(
    emb: &Embeddings,
    doc_chunks: &[Vec<u32>],
    k: usize,
) -> Result<Vec<(usize, usize)>> {
    if k == 0 || doc_chunks.len() < 2 {
        return Ok(Vec::new());
    }
    let d = emb.dim();
    let mut rows = Vec::with_capacity(doc_chunks.len());
    for cs in doc_chunks {
        let mut m = vec![0.0f32; d];
        for &c in cs {
            for (a, b) in m.iter_mut().zip(emb.row(c as usize)) {
                *a += b;
            }
        }
        rows.push(m);
    }
    let mut docs = Embeddings::from_rows(d, &rows)?;
    docs.normalize();
    let lists = blocking(move || Ok(lprag_graph::knn(&docs, k, &KnnBackend::default())?)).await?;
    Ok(lists
        .into_iter()
        .enumerate()
        .flat_map(|(u, l)| l.into_iter().map(move |(v, _)| (v as usize, u)))
        .collect())
}

/// The LeSeGR retriever: a [`Peer`] over its state (retrieval, `save`, `load` and the
/// updates of the `update` module are the peers' shared ones). `Send + Sync`; retrieval
/// is read-only and runs on the host.
pub type LesegrRag = Peer<LesegrState>;

impl LesegrRag {
    /// A builder with the offline defaults (passages, default encoder, BM25, trained).
    pub fn builder() -> LesegrRagBuilder {
        LesegrRagBuilder {
            inputs: BuildInputs::default(),
            sparse: None,
            query_generator: None,
            labelled: Vec::new(),
            document_links: None,
            device: ComputeDevice::Cpu,
            config: LesegrConfig::default(),
            checkpoints: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LesegrConfig {
        &self.state.config
    }

    /// What indexing produced.
    pub fn stats(&self) -> &LesegrStats {
        &self.state.stats
    }

    /// The chunk graph (in-edges by destination).
    pub fn graph(&self) -> &InEdges {
        &self.state.graph
    }

    /// α of every edge of [`LesegrRag::graph`], by edge id.
    pub fn alpha(&self) -> &[f32] {
        &self.state.alpha
    }

    /// Candidates, δ and scores for `query`, best first, without truncation to k.
    pub async fn explain(&self, query: &str) -> Result<LesegrScores> {
        let q = self.embed_query(query).await?;
        Ok(self.scores_for(query, &q, 0))
    }

    /// Score the candidates for a list of at least `k` results.
    fn scores_for(&self, query: &str, q: &[f32], k: usize) -> LesegrScores {
        let st = &self.state;
        let n = st.chunks.len();
        let dot = lprag_core::dot;
        let sparse = self.runtime.sparse.scores(query);
        let mut delta = vec![1.0f32; n];
        for (j, e) in delta_excess(&sparse, st.config.sparse_weight) {
            delta[j as usize] += e;
        }
        let candidates: Vec<u32> = if st.config.candidates == 0 {
            (0..n as u32).collect()
        } else {
            let m = st.config.candidates.max(k);
            let dense: Vec<f32> = st.emb.iter().map(|row| dot(row, q)).collect();
            let mut set: HashSet<u32> = top_m(&dense, m).into_iter().collect();
            let lexical: Vec<f32> = sparse.iter().map(|&s| s as f32).collect();
            set.extend(
                top_m(&lexical, m)
                    .into_iter()
                    .filter(|&j| sparse[j as usize] > 0.0),
            );
            let mut v: Vec<u32> = set.into_iter().collect();
            v.sort_unstable();
            v
        };
        let layers = st.config.layers();
        let nodes = if candidates.len() == n {
            candidates.clone()
        } else {
            st.graph.in_ball(&candidates, layers)
        };
        let qp = match &st.transform {
            Some(m) => transform_query(m, q),
            None => q.to_vec(),
        };
        let mut h0 = vec![0.0f32; n];
        for &j in &nodes {
            h0[j as usize] = dot(st.emb.row(j as usize), &qp);
        }
        let h = propagate(&h0, &delta, &st.graph, &st.alpha, layers, &nodes);
        let mut chunks: Vec<(ChunkId, f32)> = candidates
            .iter()
            .map(|&c| (c as usize, h[c as usize]))
            .collect();
        chunks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let delta = chunks.iter().map(|&(c, _)| delta[c]).collect();
        LesegrScores {
            chunks,
            delta,
            subgraph_size: nodes.len(),
        }
    }

    /// [`LesegrRag::load`] for an index built with another sparse encoder (checked by
    /// name), which is refitted on the stored chunks.
    pub fn load_with_sparse(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        sparse: Arc<dyn SparseEncoder>,
    ) -> Result<Self> {
        Self::load_opened(dir.as_ref(), encoder, Some(sparse))
    }
}

/// Indices of the `m` largest values, ties by lower index.
fn top_m(v: &[f32], m: usize) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..v.len() as u32).collect();
    let cmp = |a: &u32, b: &u32| v[*b as usize].total_cmp(&v[*a as usize]).then(a.cmp(b));
    if m < idx.len() {
        idx.select_nth_unstable_by(m, cmp);
        idx.truncate(m);
    }
    idx
}

#[async_trait]
impl PeerState for LesegrState {
    type Runtime = LesegrRuntime;
    /// The sparse encoder the index was built with (`None`: BM25).
    type Open = Option<Arc<dyn SparseEncoder>>;
    const TYPE_NAME: &'static str = "LesegrRag";
    const FILE: &'static str = LESEGR_FILE;
    const DIR: lprag_core::dirs::DirSpec = LESEGR_DIR;

    fn name(&self) -> &str {
        match self.config.variant {
            LesegrVariant::Trained => "lesegr",
            LesegrVariant::Lite => "lesegr-lite",
        }
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn query_shape(&self) -> (usize, usize) {
        (self.emb.dim(), self.config.max_query_bytes)
    }

    /// L2-normalised, as the chunk embeddings are.
    fn prepare_query(mut q: Vec<f32>) -> Vec<f32> {
        let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            q.iter_mut().for_each(|x| *x /= n);
        }
        q
    }

    fn span() -> tracing::Span {
        tracing::info_span!("lesegr.retrieve")
    }

    /// The sparse encoder (checked by name) refitted on the stored chunks.
    fn open(&self, dir: &Path, sparse: Self::Open) -> Result<LesegrRuntime> {
        let sparse = sparse.unwrap_or_else(|| Arc::new(Bm25::default()));
        if self.sparse != sparse.name() {
            return Err(Error::invalid(
                dir.join(LESEGR_FILE).display().to_string(),
                format!(
                    "index built with sparse encoder `{}`, given `{}`",
                    self.sparse,
                    sparse.name()
                ),
            ));
        }
        let texts: Vec<String> = self.chunks.iter().map(Chunk::embedding_text).collect();
        let index: Arc<dyn SparseIndex> = Arc::from(sparse.fit(&texts)?);
        check_sparse_len(&*index, self.chunks.len(), "sparse index")?;
        Ok(LesegrRuntime {
            sparse_encoder: sparse,
            sparse: index,
        })
    }

    async fn rank(
        peer: &LesegrRag,
        query: &str,
        q: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        let k = match selection {
            Selection::TopK(k) | Selection::ThresholdTopK { k, .. } => k,
            Selection::Threshold(_) => 0,
        };
        // BM25 and propagation are CPU work: a blocking thread, not the async one.
        let me = peer.clone();
        let text = query.to_string();
        let scores = blocking(move || Ok(me.scores_for(&text, &q, k))).await?;
        Ok(select_hits(
            &peer.state.chunks,
            scores.chunks,
            selection,
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_is_one_plus_weighted_normalised_bm25() {
        let d = delta_excess(&[0.0, 2.0, 4.0], 1.0);
        assert_eq!(d, vec![(1, 0.5), (2, 1.0)]);
        assert_eq!(delta_excess(&[0.0, 2.0], 0.5), vec![(1, 0.5)]);
        assert!(delta_excess(&[0.0, 0.0], 1.0).is_empty());
    }

    #[test]
    fn top_m_breaks_ties_by_index() {
        assert_eq!(top_m(&[0.5, 0.9, 0.5, 0.1], 2), vec![1, 0]);
        assert_eq!(top_m(&[0.5, 0.9], 5).len(), 2);
    }

    #[test]
    fn chunk_graph_by_hand() {
        // Document 0 = chunks 0, 1; document 1 = chunks 2, 3, 4. Link: 1 cites 0.
        let emb = Embeddings::from_rows(
            2,
            &[
                vec![1.0, 0.0],
                vec![0.0, 1.0],
                vec![1.0, 0.0],
                vec![0.6, 0.8],
                vec![0.0, 1.0],
            ],
        )
        .unwrap();
        let sparse = vec![lprag_core::SparseVector::default(); 5];
        let docs = vec![vec![0, 1], vec![2, 3, 4]];
        let (g, intra, inter) =
            lprag_graph::contextual_chunk_graph(&emb, &sparse, &docs, &[(0, 1)], 1).unwrap();
        // Adjacency: 0→1, 2→3, 3→4.
        assert_eq!(intra, 3);
        // Top-1 of document 0 for each chunk of document 1: chunk 2 ← 0, chunk 3 ← 1
        // (cos 0.8 > 0.6), chunk 4 ← 1.
        assert_eq!(inter, 3);
        assert_eq!(g.in_neighbors(2), &[0]);
        assert_eq!(g.in_neighbors(3), &[1, 2]);
        assert_eq!(g.in_neighbors(4), &[1, 3]);
        assert_eq!(g.in_neighbors(0), &[] as &[u32]);
        assert_eq!(g.in_neighbors(1), &[0]);
    }
}
