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

use std::collections::HashSet;
use std::sync::Arc;

use lprag_core::{Chunker, Document, Error, NoProgress, Result, TripleExtractor};
use lprag_text::CooccurrenceExtractor;

use super::{extract_checked, knowledge_graph, EntityIndex, GfmRag, GfmState, Kg};
use crate::retrievers::common::{
    begin_update, blocking, document_ids, extend_embeddings, refuse_present, refuse_unknown,
    replaced_ids, Renumbered,
};
use crate::UpdateReport;

impl GfmRag {
    /// Add documents with the builders' default chunker
    /// ([`BoundedPassageChunker`](crate::BoundedPassageChunker)) and the default offline
    /// extractor ([`CooccurrenceExtractor`] with the index's `offline_extractor` settings);
    /// see [`GfmRag::add_documents_with`].
    ///
    /// # Errors
    /// Those of [`GfmRag::add_documents_with`].
    pub async fn add_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        let extractor = self.default_extractor();
        self.add_documents_with(documents, &crate::BoundedPassageChunker, &extractor)
            .await
    }

    /// Add documents chunked by `chunker` with triples from `extractor` (use the ones the
    /// index was built with, e.g. `LlmTripleExtractor`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a document id repeats or is already in the index (use
    /// [`GfmRag::update_documents_with`]), or when the index was saved without its
    /// chunks' extractions (by an older lprag; rebuild it); the errors of the chunker, the
    /// extractor and the encoder.
    pub async fn add_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
        extractor: &dyn TripleExtractor,
    ) -> Result<UpdateReport> {
        refuse_present(&self.document_ids(), documents, "GfmRag::add_documents")?;
        self.apply(&[], documents, chunker, extractor).await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index, with the default chunker and extractor; see [`GfmRag::update_documents_with`].
    ///
    /// # Errors
    /// Those of [`GfmRag::update_documents_with`].
    pub async fn update_documents(&mut self, documents: &[Document]) -> Result<UpdateReport> {
        let extractor = self.default_extractor();
        self.update_documents_with(documents, &crate::BoundedPassageChunker, &extractor)
            .await
    }

    /// Replace documents (matched by id) with new versions, and add those not yet in the
    /// index, in one update.
    ///
    /// # Errors
    /// Those of [`GfmRag::add_documents_with`] (a repeated id included).
    pub async fn update_documents_with(
        &mut self,
        documents: &[Document],
        chunker: &dyn Chunker,
        extractor: &dyn TripleExtractor,
    ) -> Result<UpdateReport> {
        let replaced = replaced_ids(&self.document_ids(), documents);
        self.apply(&replaced, documents, chunker, extractor).await
    }

    /// Remove documents by id, with their chunks and what was extracted from them
    /// (entities no remaining chunk mentions go too).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the ids that are not in the index (nothing is
    /// removed then), or when every chunk would go (an index cannot be empty).
    pub async fn remove_documents(&mut self, ids: &[String]) -> Result<UpdateReport> {
        refuse_unknown(&self.document_ids(), ids, "GfmRag::remove_documents")?;
        let extractor = self.default_extractor();
        self.apply(ids, &[], &crate::BoundedPassageChunker, &extractor)
            .await
    }

    /// The ids of the documents in the index (those that produced a chunk).
    pub fn document_ids(&self) -> HashSet<&str> {
        document_ids(&self.state.chunks)
    }

    fn default_extractor(&self) -> CooccurrenceExtractor {
        CooccurrenceExtractor::new(self.state.config.offline_extractor.clone())
    }

    /// Remove the chunks of `remove` (document ids), add `add`.
    async fn apply(
        &mut self,
        remove: &[String],
        add: &[Document],
        chunker: &dyn Chunker,
        extractor: &dyn TripleExtractor,
    ) -> Result<UpdateReport> {
        let old = self.state.clone();
        let location = "GfmRag update";
        let Some(old_extractions) = &old.extractions else {
            return Err(Error::invalid(
                location,
                "this index was saved without its chunks' extractions (by an older lprag), \
                 so its knowledge graph cannot be rebuilt; rebuild the index",
            ));
        };
        // 1. The chunks: the kept ones renumbered, then the new ones.
        let (
            Renumbered {
                chunks,
                kept,
                first_new,
                ..
            },
            mut report,
            mut laps,
        ) = begin_update(&old.chunks, (remove, add), chunker, &self.encoder, location).await?;

        // 2. The new chunks' embeddings (dense padding) and extractions.
        let new = &chunks[first_new..];
        let chunk_emb =
            extend_embeddings(&old.chunk_emb, &kept, &*self.encoder, new, false).await?;
        laps.lap(&mut report, "embed");
        let fresh = extract_checked(extractor, new, &NoProgress).await?;
        let mut extractions: Vec<lprag_core::Extraction> =
            kept.iter().map(|&i| old_extractions[i].clone()).collect();
        extractions.extend(fresh);
        laps.lap(&mut report, "extract");

        // 3. The knowledge graph, as a build makes it; known names keep their embeddings.
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
            &*self.encoder,
            &old.config,
            &NoProgress,
            Some((
                (&old.entities, &old.entity_emb),
                (&old.relations, &old.relation_emb),
            )),
        )
        .await?;
        laps.lap(&mut report, "graph");

        // 4. The trained network on the new graph.
        let model = {
            let (model, edges, rel) = (self.model.clone(), edges, relation_emb);
            blocking(move || model.rebind(edges, rel)).await?
        };
        laps.lap(&mut report, "model");

        let mentions = kg.mentions_sorted();
        let index = EntityIndex {
            names: kg.names.clone(),
            keys: kg.ids.clone(),
            emb: entity_emb.clone(),
        };
        let mut stats = old.stats.clone();
        stats.chunks = chunks.len();
        stats.entities = kg.names.len();
        stats.relations = relation_names.len();
        stats.triples = kg.triples.len() - equivalent_pairs.len();
        stats.equivalent_pairs = equivalent_pairs.len();
        stats.edges = model.edges().len();
        report.chunks = chunks.len();
        self.state = Arc::new(GfmState {
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
        self.index = Arc::new(index);
        self.model = Arc::new(model);
        Ok(report)
    }
}

#[async_trait::async_trait]
impl crate::Updatable for GfmRag {
    /// One update: `inputs.extractor` (else the index's offline co-occurrence extractor)
    /// reads the new chunks' triples.
    async fn apply_changes(
        &mut self,
        upsert: &[Document],
        remove: &[String],
        inputs: &crate::UpdateInputs,
    ) -> Result<UpdateReport> {
        let gone =
            crate::live::check_changes(&self.document_ids(), upsert, remove, "GfmRag update")?;
        match &inputs.extractor {
            Some(e) => self.apply(&gone, upsert, &*inputs.chunker, &**e).await,
            None => {
                let e = self.default_extractor();
                self.apply(&gone, upsert, &*inputs.chunker, &e).await
            }
        }
    }

    fn save_index(&self, dir: &std::path::Path) -> Result<()> {
        self.save(dir)
    }
}
