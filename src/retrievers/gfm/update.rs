//! Incremental updates of a [`GfmRag`] index: add, replace and remove documents without
//! re-extracting or re-embedding what is already indexed, and without retraining.
//!
//! The knowledge graph is a function of the chunks' extractions, which the index keeps:
//! an update extracts triples from the new chunks only (the LLM calls an OpenIE extractor
//! makes are paid once), drops the removed chunks' extractions, and builds the graph
//! again with the build's code — entities merged by name, entity resolution over all
//! entities, inverse edges — embedding only entity and relation names it has not seen.
//! The graph is the one a build on the same chunks makes. The GNN keeps its weights
//! ([`GfmModel::rebind`](lprag_model::gfm::GfmModel::rebind)): it is inductive over
//! entities, so new entities are scored by a model that never saw them; rebuild to
//! retrain. With training off (`pretrain_queries = synthetic_queries = 0`, no labels) an
//! update is exact, scores included.
//!
//! The index changes only once every step has succeeded; an error leaves it as it was.

use std::sync::Arc;

use lprag_core::{
    Chunk, Chunker, Document, Embeddings, Encoder, Error, NoProgress, Result, TripleExtractor,
};
use lprag_model::gfm::{GfmModel, KgEdges};
use lprag_text::CooccurrenceExtractor;

use super::{
    entity_index, extract_checked, knowledge_graph, set_graph_stats, GfmRag, GfmState, Kg,
};
use crate::retrievers::common::{blocking, PeerUpdate, Renumbered};
use crate::UpdateReport;

#[async_trait::async_trait]
impl PeerUpdate for GfmState {
    type With = dyn TripleExtractor;
    type Owned = Arc<dyn TripleExtractor>;

    /// The offline [`CooccurrenceExtractor`] with the index's `offline_extractor` settings.
    fn default_with(&self) -> Arc<dyn TripleExtractor> {
        Arc::new(CooccurrenceExtractor::new(
            self.config.offline_extractor.clone(),
        ))
    }

    /// `inputs.extractor`, else the offline default.
    fn with_from(&self, inputs: &crate::UpdateInputs) -> Arc<dyn TripleExtractor> {
        match &inputs.extractor {
            Some(e) => e.clone(),
            None => self.default_with(),
        }
    }

    /// Remove the chunks of `remove` (document ids), add `add`.
    async fn apply(
        peer: &mut GfmRag,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
        extractor: &dyn TripleExtractor,
    ) -> Result<UpdateReport> {
        let old = peer.state.clone();
        let old_extractions = stored_extractions(&old)?;
        // 1. The chunks: the kept ones renumbered, then the new ones.
        // 2. The new chunks' embeddings (dense padding) and extractions.
        let (renumbered, chunk_emb, mut report, mut laps) = peer
            .start_update((remove, add), chunker, &old.chunk_emb, false)
            .await?;
        let Renumbered {
            chunks,
            kept,
            first_new,
            ..
        } = renumbered;
        let new = &chunks[first_new..];
        let extractions = all_extractions(extractor, new, &kept, old_extractions).await?;
        laps.lap(&mut report, "extract");

        // 3. The knowledge graph, as a build makes it; known names keep their embeddings.
        let graph = updated_graph(&extractions, extractor.name(), &*peer.encoder, &old).await?;
        laps.lap(&mut report, "graph");

        // 4. The trained network on the new graph.
        let model = rebound(peer.runtime.model.clone(), graph.edges, graph.relation_emb).await?;
        laps.lap(&mut report, "model");

        let (kg, entity_emb, relation_names) = (graph.kg, graph.entity_emb, graph.relation_names);
        let mentions = kg.mentions_sorted();
        let index = entity_index(&kg, &entity_emb);
        let mut stats = old.stats.clone();
        let counted = (&relation_names[..], &graph.equivalent_pairs[..]);
        set_graph_stats(&mut stats, chunks.len(), &kg, counted, &model);
        report.chunks = chunks.len();
        peer.state = Arc::new(GfmState {
            weights_file: old.weights_file.clone(),
            version: old.version,
            encoder: old.encoder.clone(),
            encoder_fingerprint: old.encoder_fingerprint.clone(),
            config: old.config.clone(),
            chunks,
            chunk_emb,
            entities: kg.names,
            entity_emb,
            mentions,
            relations: relation_names,
            relation_emb: model.relations().clone(),
            edges: model.edges().clone(),
            extractions: Some(extractions),
            stats,
        });
        peer.runtime.index = Arc::new(index);
        peer.runtime.model = Arc::new(model);
        Ok(report)
    }
}

/// The extractions `old` keeps of its chunks; an index saved without them is an error.
fn stored_extractions(old: &GfmState) -> Result<&[lprag_core::Extraction]> {
    let location = "GfmRag update";
    let Some(old_extractions) = &old.extractions else {
        return Err(Error::invalid(
            location,
            "this index was saved without its chunks' extractions (by an older lprag), \
             so its knowledge graph cannot be rebuilt; rebuild the index",
        ));
    };
    Ok(old_extractions)
}

/// The extractions of the updated chunks: the `kept` old chunks' (`old_extractions`, by
/// old id), then those `extractor` finds in the `new` chunks.
async fn all_extractions(
    extractor: &dyn TripleExtractor,
    new: &[Chunk],
    kept: &[usize],
    old_extractions: &[lprag_core::Extraction],
) -> Result<Vec<lprag_core::Extraction>> {
    let fresh = extract_checked(extractor, new, &NoProgress).await?;
    let mut extractions: Vec<lprag_core::Extraction> =
        kept.iter().map(|&i| old_extractions[i].clone()).collect();
    extractions.extend(fresh);
    Ok(extractions)
}

/// `model` with its weights on the graph of `edges` and `relations` (off the async
/// runtime).
async fn rebound(model: Arc<GfmModel>, edges: KgEdges, relations: Embeddings) -> Result<GfmModel> {
    blocking(move || model.rebind(edges, relations)).await
}

/// The knowledge graph of `extractions`, as a build makes it with `old`'s settings; the
/// entity and relation names `old` knows keep their embeddings.
async fn updated_graph(
    extractions: &[lprag_core::Extraction],
    extractor: &str,
    encoder: &dyn Encoder,
    old: &GfmState,
) -> Result<Kg> {
    knowledge_graph(
        extractions,
        extractor,
        encoder,
        &old.config,
        &NoProgress,
        Some((
            (&old.entities, &old.entity_emb),
            (&old.relations, &old.relation_emb),
        )),
    )
    .await
}
