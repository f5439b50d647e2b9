//! Incremental updates of an [`LpRag`] index: add, replace and remove documents without a
//! rebuild, and retrain when the corpus has drifted.
//!
//! LP-RAG is inductive: the trained predictor scores chunks it never saw. An update
//! chunks and embeds the new documents, repairs the mutual k-NN graph locally (one exact
//! scan per new chunk and per chunk that lost a neighbour, [`lprag_graph::update_knn`]),
//! recomputes the bridge edges, drops the synthetic queries of removed chunks and attaches
//! the trained predictor to the new graph ([`LinkPredictor::attach`]); nothing is
//! retrained. [`LpRag::retrain`] writes synthetic queries for the chunks that have none and
//! trains the model again on the whole graph.
//!
//! The index changes only once every step has succeeded; an error leaves it as it was.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use lprag_core::{
    Chunk, ChunkId, Chunker, Document, EdgeKind, Embeddings, Error, LinkPredictor, NoProgress,
    Progress, QueryGenerator, Result, SyntheticQuery, TrainReport,
};
use lprag_graph::ChunkGraph;
use lprag_text::HeuristicQueryGenerator;
use serde::{Deserialize, Serialize};

use super::{search_for, PredictorSource};
use crate::cpu::run_cpu;
use crate::retrievers::common::{
    blocking, document_ids, embed_all_chunks, embed_queries_into, refuse_present, refuse_unknown,
    replaced_ids, update_chunks, Parents,
};
use crate::{BuiltinPredictor, LpRag};

/// What an index update changed, with the time of each stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateReport {
    /// Documents added (or re-added by an update).
    pub added_documents: usize,
    /// Chunks those documents produced.
    pub added_chunks: usize,
    /// Documents removed (or replaced by an update).
    pub removed_documents: usize,
    /// Chunks removed with them.
    pub removed_chunks: usize,
    /// Synthetic queries dropped because every chunk they were linked to was removed.
    pub removed_queries: usize,
    /// Chunks in the index afterwards.
    pub chunks: usize,
    /// Seconds per stage: `chunk`, `embed`, `graph`, `attach`.
    pub seconds: Vec<(String, f64)>,
    /// The `graph` stage in parts: `copy` (the kept and new chunk rows), `knn` (k-NN
    /// lists repaired, mutual edges), `bridges`, `assemble` (queries remapped, the link
    /// graph checked and built).
    pub graph_seconds: Vec<(String, f64)>,
    /// What the user should know (new chunks split or too long for the encoder).
    pub warnings: Vec<String>,
}

impl LpRag {
    /// Add documents with the builders' default chunker
    /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)); see
    /// [`LpRag::add_documents_with`].
    ///
    /// # Errors
    /// Those of [`LpRag::add_documents_with`].
    pub async fn add_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        self.add_documents_with(documents, &crate::BoundedPassageChunker)
            .await
    }

    /// Add documents, chunked by `chunker` (use the one the index was built with): their
    /// chunks are embedded, joined to the chunk graph and scored by the trained predictor
    /// without retraining. [`LpRag::retrain`] later writes synthetic queries for them and
    /// trains again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a document id repeats or is already in the index (use
    /// [`LpRag::update_documents_with`]) or the predictor cannot be attached to a new
    /// graph (a custom predictor without [`LinkPredictor::attach`], or one still shared
    /// with a running query), or in an index opened to answer only
    /// ([`LpRag::open_to_answer`]); the errors of the chunker and the encoder.
    pub async fn add_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
    ) -> Result<UpdateReport> {
        self.refuse_answer_only("LpRag::add_documents")?;
        refuse_present(&self.document_ids(), documents, "LpRag::add_documents")?;
        self.apply(&[], documents, chunker).await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index, with the default chunker; see [`LpRag::update_documents_with`].
    ///
    /// # Errors
    /// Those of [`LpRag::update_documents_with`].
    pub async fn update_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        self.update_documents_with(documents, &crate::BoundedPassageChunker)
            .await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index: the old versions' chunks are removed and the new ones added in one update.
    ///
    /// # Errors
    /// Those of [`LpRag::add_documents_with`] (a repeated id included).
    pub async fn update_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
    ) -> Result<UpdateReport> {
        self.refuse_answer_only("LpRag::update_documents")?;
        let replaced = replaced_ids(&self.document_ids(), documents);
        self.apply(&replaced, documents, chunker).await
    }

    /// Remove documents by id, with their chunks and the synthetic queries that were
    /// linked only to them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the ids that are not in the index (nothing is
    /// removed then), or when every chunk would go (an index cannot be empty); the
    /// attach errors of [`LpRag::add_documents_with`].
    pub async fn remove_documents(&mut self, ids: &[String]) -> Result<UpdateReport> {
        self.refuse_answer_only("LpRag::remove_documents")?;
        refuse_unknown(&self.document_ids(), ids, "LpRag::remove_documents")?;
        self.apply(ids, &[], &crate::BoundedPassageChunker).await
    }

    /// The ids of the documents in the index (those that produced a chunk).
    pub fn document_ids(&self) -> HashSet<&str> {
        document_ids(&self.chunks)
    }

    /// Chunks that no synthetic query is linked to: those added since the model was
    /// trained (and chunks the query writer skipped). [`LpRag::retrain`] writes queries
    /// for them. None in an index opened to answer only ([`LpRag::open_to_answer`]: its
    /// questions were not read).
    pub fn chunks_without_queries(&self) -> Vec<ChunkId> {
        if self.answer_only {
            return Vec::new();
        }
        let mut linked = vec![false; self.chunks.len()];
        for q in &self.queries {
            for &c in &q.chunk_ids {
                if let Some(l) = linked.get_mut(c) {
                    *l = true;
                }
            }
        }
        (0..self.chunks.len()).filter(|&c| !linked[c]).collect()
    }

    /// Write synthetic queries for the chunks that have none (the offline
    /// [`HeuristicQueryGenerator`], with the index's A.2 batches) and train the model again
    /// on the whole graph; see [`LpRag::retrain_with`].
    ///
    /// # Errors
    /// Those of [`LpRag::retrain_with`].
    pub async fn retrain(&mut self) -> Result<TrainReport> {
        self.retrain_with(&HeuristicQueryGenerator::default(), Arc::new(NoProgress))
            .await
    }

    /// [`LpRag::retrain`] with the query writer of your choice (an LLM one, say) and
    /// progress reporting. The built-in predictor is trained from scratch with the
    /// index's configuration on its device and replaces the old one only once trained; a
    /// custom predictor's [`LinkPredictor::fit`] is called again; an index around a
    /// training-free scorer only gets the new queries.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) in an index opened to answer
    /// only ([`LpRag::open_to_answer`]); the errors of the query writer, the encoder and
    /// training. The index is unchanged
    /// after any of them, except that a custom predictor whose `fit` failed half-way is
    /// left as its `fit` left it.
    pub async fn retrain_with(
        &mut self,
        generator: &dyn QueryGenerator,
        progress: Arc<dyn Progress>,
    ) -> Result<TrainReport> {
        self.refuse_answer_only("LpRag::retrain")?;
        let missing = self.chunks_without_queries();
        let mut queries = self.queries.clone();
        let mut features = self.graph.features.as_slice().to_vec();
        let (dim, nc) = (self.graph.features.dim(), self.chunks.len());
        let chunk_edges: Vec<_> = self
            .graph
            .edges
            .iter()
            .filter(|e| e.kind != EdgeKind::QueryChunk)
            .copied()
            .collect();
        if !missing.is_empty() {
            let (edges, seed) = (chunk_edges.clone(), self.config.seed);
            let batches = blocking(move || {
                let graph = ChunkGraph::from_edges(nc, &edges)?;
                Ok(lprag_graph::sample_batches(&graph, seed))
            })
            .await?;
            let wanted: Vec<Vec<ChunkId>> = missing.iter().map(|&c| batches[c].clone()).collect();
            let new = generator.generate(&self.chunks, &wanted).await?;
            let texts: Vec<String> = new.iter().map(|q| q.text.clone()).collect();
            embed_queries_into(
                &*self.encoder,
                &texts,
                "embed queries",
                &*progress,
                &mut features,
            )
            .await?;
            queries.extend(new);
        }
        let graph = Arc::new(lprag_graph::link_graph_from_features(
            Embeddings::new(dim, features)?,
            nc,
            &chunk_edges,
            &queries,
        )?);
        let (predictor, report): (Arc<dyn LinkPredictor>, TrainReport) = match self.source {
            PredictorSource::Builtin => {
                let mut p = BuiltinPredictor::make(&self.config, None, self.device, None)?;
                let g = graph.clone();
                let progress = progress.clone();
                blocking(move || {
                    let report = p.fit(&g, &*progress)?;
                    Ok((Arc::from(p), report))
                })
                .await?
            }
            PredictorSource::Custom => {
                let p = self.exclusive_predictor("LpRag::retrain")?;
                let report = run_cpu(|| p.fit(&graph, &*progress))?;
                (self.predictor.clone(), report)
            }
            PredictorSource::Scorer => {
                let p = self.exclusive_predictor("LpRag::retrain")?;
                run_cpu(|| p.attach(&graph))?;
                (self.predictor.clone(), TrainReport::default())
            }
        };
        self.predictor = predictor;
        // The chunks are the same: an attached store still holds them.
        self.search = Arc::new(match self.store {
            Some(_) => lprag_graph::CandidateSearch::exact(&graph),
            None => search_for(&graph, &self.config)?,
        });
        self.stats.queries = queries.len();
        self.stats.query_edges = graph.edges.len() - chunk_edges.len();
        self.stats.train = report.clone();
        self.queries = queries;
        self.graph = graph;
        Ok(report)
    }

    /// The predictor, mutably, or an error when a query still holds it.
    fn exclusive_predictor(
        &mut self,
        location: &str,
    ) -> Result<&mut (dyn LinkPredictor + 'static)> {
        Arc::get_mut(&mut self.predictor).ok_or_else(|| {
            Error::invalid(
                location,
                "the model is shared: a clone of LpRag::predictor() is alive, or a \
                 cancelled retrieve's blocking task still runs; retry once it is dropped",
            )
        })
    }

    /// Remove the chunks of `remove` (document ids), add `add` chunked by `chunker`: the
    /// stages `chunk`, `embed`, `graph` and `attach`, then the new state in one step.
    async fn apply(
        &mut self,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
    ) -> Result<UpdateReport> {
        // Checked before anything is paid for: a predictor that cannot be copied is
        // attached in place, which needs it to itself.
        if !self.predictor.copies_on_attach() {
            self.exclusive_predictor("LpRag update")?;
        }
        let mut report = UpdateReport::default();
        let mut lap = {
            let mut t = Instant::now();
            move |report: &mut UpdateReport, stage: &str| {
                report
                    .seconds
                    .push((stage.to_string(), t.elapsed().as_secs_f64()));
                t = Instant::now();
            }
        };

        // 1. New chunks, and which old ones stay.
        let (new_chunks, keep) = update_chunks(
            &self.chunks,
            (remove, add),
            chunker,
            &self.encoder,
            &mut report.warnings,
            "LpRag update",
        )
        .await?;
        let kept = keep.iter().filter(|&&k| k).count();
        report.added_documents = add.len();
        report.added_chunks = new_chunks.len();
        report.removed_documents = remove.len();
        report.removed_chunks = self.chunks.len() - kept;
        lap(&mut report, "chunk");

        // 2. Their embeddings.
        let new_emb = self.embed_new_chunks(&new_chunks).await?;
        lap(&mut report, "embed");

        // 3. The new graph: k-NN lists repaired, bridges recomputed, queries remapped.
        let input = GraphUpdate {
            old: self.graph.clone(),
            lists: self.knn.clone(),
            k: self.config.knn_k,
            backend: self.config.knn_backend,
            bridges: self.config.bridges,
            chunks: self.chunks.clone(),
            queries: self.queries.clone(),
            keep,
            new_chunks,
            new_emb,
        };
        let updated = blocking(move || updated_graph(input)).await?;
        report.removed_queries = updated.dropped_queries;
        lap(&mut report, "graph");
        report.graph_seconds = updated.laps.clone();

        // 4. Attach the trained model to the new graph. No await from here on: the update
        //    cannot be cancelled half-way.
        let graph = Arc::new(updated.graph);
        self.attach_predictor(&graph)?;
        lap(&mut report, "attach");

        self.search = Arc::new(search_for(&graph, &self.config)?);
        report.warnings.extend(self.detach_store_after_update());
        let UpdatedGraph {
            chunks,
            queries,
            lists,
            chunk_edges,
            bridges,
            isolated,
            ..
        } = updated;
        self.stats.documents = chunks
            .iter()
            .map(|c| c.provenance.document_id.as_str())
            .collect::<HashSet<_>>()
            .len();
        self.stats.chunks = chunks.len();
        self.stats.chunk_edges = chunk_edges;
        self.stats.bridge_edges = bridges;
        self.stats.isolated_chunks = isolated;
        self.stats.queries = queries.len();
        self.stats.query_edges = graph.edges.len() - chunk_edges;
        report.chunks = chunks.len();
        self.parents = Arc::new(Parents::of(&chunks));
        self.chunks = chunks;
        self.queries = queries;
        self.graph = graph;
        self.knn = Some(Arc::new(lists));
        Ok(report)
    }

    /// The new chunks' embeddings, checked against the index's width.
    async fn embed_new_chunks(&self, new_chunks: &[Chunk]) -> Result<Embeddings> {
        let new_emb = if new_chunks.is_empty() {
            Embeddings::empty(self.encoder.dimension())
        } else {
            embed_all_chunks(&*self.encoder, new_chunks, "embed chunks", &NoProgress).await?
        };
        if new_emb.dim() != self.graph.features.dim() {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' chunk embeddings", self.encoder.name()),
                expected: self.graph.features.dim(),
                actual: new_emb.dim(),
            });
        }
        Ok(new_emb)
    }

    /// The trained model on `graph`: a copy attached to it, the old one untouched (clones
    /// of this index keep answering with it); a predictor without copies is attached in
    /// place (exclusive, checked before the update paid for anything) and, on failure,
    /// put back on the old graph as far as it goes.
    fn attach_predictor(&mut self, graph: &Arc<lprag_core::LinkGraph>) -> Result<()> {
        let predictor = self.predictor.clone();
        let copy = run_cpu(|| predictor.attach_copy(graph));
        match copy {
            Some(copy) => self.predictor = Arc::from(copy?),
            None => {
                let attached = self
                    .exclusive_predictor("LpRag update")
                    .and_then(|p| run_cpu(|| p.attach(graph)));
                if let Err(e) = attached {
                    let old = self.graph.clone();
                    if let Some(p) = Arc::get_mut(&mut self.predictor) {
                        let _ = run_cpu(|| p.attach(&old));
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// What the graph stage of an update takes: the index's graph, k-NN lists, graph settings,
/// chunks and queries, which chunks stay, and the new chunks with their embeddings.
struct GraphUpdate {
    old: Arc<lprag_core::LinkGraph>,
    lists: Option<Arc<super::KnnLists>>,
    k: usize,
    backend: lprag_graph::KnnBackend,
    bridges: lprag_graph::BridgeConfig,
    chunks: Vec<Chunk>,
    queries: Vec<SyntheticQuery>,
    keep: Vec<bool>,
    new_chunks: Vec<Chunk>,
    new_emb: Embeddings,
}

/// The graph stage's result.
struct UpdatedGraph {
    chunks: Vec<Chunk>,
    queries: Vec<SyntheticQuery>,
    graph: lprag_core::LinkGraph,
    lists: super::KnnLists,
    /// Chunk–chunk edges (k-NN and bridges), bridges among them, isolated chunks.
    chunk_edges: usize,
    bridges: usize,
    isolated: usize,
    /// Synthetic queries dropped with their last chunk.
    dropped_queries: usize,
    /// Seconds per part: `copy`, `knn`, `bridges`, `assemble`.
    laps: Vec<(String, f64)>,
}

/// The kept chunks renumbered (old id → new id, `usize::MAX` when removed) followed by
/// the new ones, and their rows in one buffer, kept rows first.
fn renumbered_chunks(
    old: &lprag_core::LinkGraph,
    chunks: Vec<Chunk>,
    keep: &[bool],
    new_chunks: Vec<Chunk>,
    new_emb: &Embeddings,
) -> Result<(Vec<Chunk>, Vec<usize>, Embeddings)> {
    let (dim, feats) = (old.features.dim(), old.features.as_slice());
    let kept = keep.iter().filter(|&&k| k).count();
    let mut new_id = vec![usize::MAX; old.num_chunks];
    let mut out: Vec<Chunk> = Vec::with_capacity(kept + new_chunks.len());
    // One buffer for the new graph's features: chunk rows now, query rows later.
    let capacity = (kept + new_chunks.len() + old.num_queries()) * dim;
    let mut rows: Vec<f32> = Vec::with_capacity(capacity);
    for (i, c) in chunks.into_iter().enumerate().filter(|&(i, _)| keep[i]) {
        new_id[i] = out.len();
        out.push(Chunk { id: out.len(), ..c });
        rows.extend_from_slice(&feats[i * dim..(i + 1) * dim]);
    }
    for c in new_chunks {
        out.push(Chunk { id: out.len(), ..c });
    }
    rows.extend_from_slice(new_emb.as_slice());
    Ok((out, new_id, Embeddings::new(dim, rows)?))
}

/// The queries that keep a chunk, linked to the new ids, with their rows of `old` after
/// `features`; and how many were dropped (every chunk they were linked to removed).
fn remapped_queries(
    old: &lprag_core::LinkGraph,
    queries: Vec<SyntheticQuery>,
    new_id: &[usize],
    features: &mut Vec<f32>,
) -> (Vec<SyntheticQuery>, usize) {
    let (dim, feats, nc_old) = (old.features.dim(), old.features.as_slice(), old.num_chunks);
    let mut out: Vec<SyntheticQuery> = Vec::with_capacity(queries.len());
    let mut dropped = 0;
    for (qi, q) in queries.into_iter().enumerate() {
        let ids: Vec<ChunkId> = q
            .chunk_ids
            .iter()
            .filter_map(|&c| new_id.get(c).copied().filter(|&n| n != usize::MAX))
            .collect();
        if ids.is_empty() && !q.chunk_ids.is_empty() {
            dropped += 1;
            continue;
        }
        let row = nc_old + qi;
        features.extend_from_slice(&feats[row * dim..(row + 1) * dim]);
        out.push(SyntheticQuery {
            chunk_ids: ids,
            ..q
        });
    }
    (out, dropped)
}

/// The graph stage of an update (on a blocking thread): chunks renumbered, k-NN lists
/// repaired ([`lprag_graph::update_knn`]), the chunk edges rebuilt as a build makes them
/// ([`super::stages::chunk_edges`]), queries remapped, the link graph assembled.
fn updated_graph(input: GraphUpdate) -> Result<UpdatedGraph> {
    let mut t = Instant::now();
    let mut laps: Vec<(String, f64)> = Vec::new();
    let mut lap = |stage: &str| {
        laps.push((stage.to_string(), t.elapsed().as_secs_f64()));
        t = Instant::now();
    };
    let GraphUpdate {
        old,
        lists,
        k,
        backend,
        bridges,
        chunks,
        queries,
        keep,
        new_chunks,
        new_emb,
    } = input;
    let (chunks, new_id, chunk_emb) = renumbered_chunks(&old, chunks, &keep, new_chunks, &new_emb)?;
    drop(new_emb);
    let lists = match lists {
        Some(l) => l,
        None => {
            let (dim, nc_old) = (old.features.dim(), old.num_chunks);
            let before = Embeddings::new(dim, old.features.as_slice()[..nc_old * dim].to_vec())?;
            Arc::new(lprag_graph::knn(&before, k, &backend)?)
        }
    };
    lap("copy");
    let lists = lprag_graph::update_knn(&lists, &keep, &chunk_emb, k)?;
    let edges = super::stages::chunk_edges(&lists, &chunks, &bridges, &mut lap)?;
    let mut features = chunk_emb.into_vec();
    let (queries, dropped_queries) = remapped_queries(&old, queries, &new_id, &mut features);
    let nc = chunks.len();
    let dim = old.features.dim();
    let graph = lprag_graph::link_graph_from_features(
        Embeddings::new(dim, features)?,
        nc,
        &edges,
        &queries,
    )?;
    let isolated = ChunkGraph::from_edges(nc, &edges)?.isolated_count();
    let n_bridges = edges.iter().filter(|e| e.kind == EdgeKind::Bridge).count();
    lap("assemble");
    Ok(UpdatedGraph {
        chunks,
        queries,
        graph,
        lists,
        chunk_edges: edges.len(),
        bridges: n_bridges,
        isolated,
        dropped_queries,
        laps,
    })
}

#[async_trait::async_trait]
impl crate::Updatable for LpRag {
    /// One update through [`LpRag::update_documents_with`]'s path; the model is attached
    /// to a copy of the graph, not retrained. `inputs.chunker` chunks the new versions.
    async fn apply_changes(
        &mut self,
        upsert: &[Document],
        remove: &[String],
        inputs: &crate::UpdateInputs,
    ) -> Result<UpdateReport> {
        self.refuse_answer_only("LpRag update")?;
        let gone =
            crate::live::check_changes(&self.document_ids(), upsert, remove, "LpRag update")?;
        self.apply(&gone, upsert, &*inputs.chunker).await
    }

    fn save_index(&self, dir: &std::path::Path) -> Result<()> {
        self.save(dir)
    }
}
