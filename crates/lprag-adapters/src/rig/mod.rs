//! rig both ways: an lprag index as rig's vector store, rig's models as lprag's parts.
//!
//! Out of lprag, [`RigIndex`] implements rig-core's `VectorStoreIndex`, so it serves a rig
//! agent's dynamic context (`rig_agent::AgentBuilder::dynamic_context`) or any code written
//! against that trait. A request maps onto one retrieve call: `samples` is the number of
//! chunks (`Selection::TopK`), a `threshold` makes it `Selection::ThresholdTopK`, and a
//! filter becomes an lprag [`Filter`] applied before ranking. Each result's id is the chunk
//! id (its position in the index) and its document is the chunk as JSON (`id`, `text`,
//! `provenance`, `metadata`; deserialise it as [`lprag_core::Chunk`] or
//! `serde_json::Value`). Scores are the retriever's own (LP-RAG: link probabilities in
//! [0, 1]). Built with [`RigIndex::live`] over a [`LiveIndex`] (the facade's `lprag::Live`),
//! it also implements rig's `InsertDocuments` (see [`document_from_rig`] for how a rig
//! document becomes an lprag one).
//!
//! Into lprag, any rig provider model serves lprag: [`RigEncoder`] (an embedding model as
//! an [`Encoder`](lprag_core::Encoder)), [`RigChat`] (a completion model as an
//! [`lprag_llm::ChatModel`], for LLM chunking, question writing and answers) and
//! [`RigReranker`] (a rerank model as a [`Reranker`](lprag_core::Reranker)). Each takes a
//! `rig_core::DynModel` of its operation, or anything that converts into one (a provider's
//! `Model`).
//!
//! Filters: lprag metadata is a map of strings, so `Eq` compares the value's text (a
//! JSON string as is, a number or boolean as written); `Gt` and `Lt` have no lprag
//! counterpart and are refused with a `FilterError`.
//!
//! ```no_run
//! # async fn demo(rag: std::sync::Arc<dyn lprag_core::Retriever>) -> Result<(), Box<dyn std::error::Error>> {
//! use lprag_adapters::rig::RigIndex;
//! use rig_core::vector_store::{request::VectorSearchRequest, VectorStoreIndex};
//!
//! let index = RigIndex::new(rag);
//! let request = VectorSearchRequest::builder().query("Who invented dynamite?").samples(3).build();
//! for hit in index.top_n::<lprag_core::Chunk>(request).await? {
//!     println!("{:.3} {} {}", hit.score, hit.id, hit.document.text);
//! }
//! # Ok(()) }
//! ```

mod insert;
mod models;
#[cfg(test)]
mod tests;

pub use insert::document_from_rig;
pub use models::{RigChat, RigEncoder, RigReranker};

pub use crate::source::IndexSource;

use std::sync::Arc;

use lprag_core::{Filter, LiveIndex, Retriever, ScoredChunk, Selection, MAX_FILTER_DEPTH};
use rig_core::vector_store::request::{Filter as RigFilter, FilterError, VectorSearchRequest};
use rig_core::vector_store::{
    VectorSearchIdResult, VectorSearchResult, VectorStoreError, VectorStoreIndex,
};
use rig_core::wasm_compat::WasmCompatSend;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// rig's canonical filter over JSON values, the filter type of [`RigIndex`].
pub type RigJsonFilter = RigFilter<Value>;

/// Any lprag [`Retriever`] as a rig `VectorStoreIndex` (cheap to clone: one `Arc`).
///
/// `RigIndex` (the default type) serves one retriever as it is; `RigIndex<Arc<dyn
/// LiveIndex>>`, made by [`RigIndex::live`], answers each request from the live index's
/// current snapshot and takes rig's `InsertDocuments`.
#[derive(Clone)]
pub struct RigIndex<S: IndexSource + Clone = Arc<dyn Retriever>> {
    source: S,
}

impl RigIndex {
    /// Wrap a retriever (an `LpRag`, a peer, or your own).
    pub fn new(retriever: Arc<dyn Retriever>) -> Self {
        Self { source: retriever }
    }

    /// Serve a live index (the facade's `lprag::Live`): each request reads its current
    /// snapshot, and rig's `InsertDocuments` writes into it.
    pub fn live(index: Arc<dyn LiveIndex>) -> RigIndex<Arc<dyn LiveIndex>> {
        RigIndex { source: index }
    }

    /// The wrapped retriever.
    pub fn retriever(&self) -> &Arc<dyn Retriever> {
        &self.source
    }
}

impl RigIndex<Arc<dyn LiveIndex>> {
    /// The live index this serves.
    pub fn index(&self) -> &Arc<dyn LiveIndex> {
        &self.source
    }
}

impl<S: IndexSource + Clone> RigIndex<S> {
    /// The hits for one rig request.
    async fn hits(
        &self,
        req: &VectorSearchRequest<RigJsonFilter>,
    ) -> Result<Vec<ScoredChunk>, VectorStoreError> {
        let k = usize::try_from(req.samples()).unwrap_or(usize::MAX);
        let selection = match req.threshold() {
            Some(t) => Selection::ThresholdTopK {
                threshold: t as f32,
                k,
            },
            None => Selection::TopK(k),
        };
        let retriever = self.source.current();
        let result = match req.filter() {
            Some(f) => {
                let filter = to_lprag_filter(f)?;
                retriever
                    .retrieve_filtered(req.query(), selection, &filter)
                    .await
            }
            None => retriever.retrieve(req.query(), selection).await,
        };
        result.map_err(|e| VectorStoreError::DatastoreError(Box::new(e)))
    }
}

impl<S: IndexSource + Clone> std::fmt::Debug for RigIndex<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RigIndex")
            .field("retriever", &self.source.current().name())
            .finish()
    }
}

impl<S: IndexSource + Clone> VectorStoreIndex for RigIndex<S> {
    type Filter = RigJsonFilter;

    async fn top_n<T: DeserializeOwned + WasmCompatSend>(
        &self,
        req: VectorSearchRequest<Self::Filter>,
    ) -> Result<Vec<VectorSearchResult<T>>, VectorStoreError> {
        let hits = self.hits(&req).await?;
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let document = serde_json::from_value(serde_json::to_value(&hit.chunk)?)?;
            out.push(VectorSearchResult {
                score: f64::from(hit.score),
                id: hit.chunk.id.to_string(),
                document,
            });
        }
        Ok(out)
    }

    async fn top_n_ids(
        &self,
        req: VectorSearchRequest<Self::Filter>,
    ) -> Result<Vec<VectorSearchIdResult>, VectorStoreError> {
        Ok(self
            .hits(&req)
            .await?
            .into_iter()
            .map(|hit| VectorSearchIdResult {
                score: f64::from(hit.score),
                id: hit.chunk.id.to_string(),
            })
            .collect())
    }
}

/// Translate rig's canonical filter into an lprag [`Filter`]: `Eq` on a metadata key
/// (strings as they are, numbers and booleans as written), `And`, `Or`. `Gt`, `Lt`,
/// nested arrays or objects as values, and nesting deeper than
/// [`MAX_FILTER_DEPTH`] are errors.
pub fn to_lprag_filter(filter: &RigJsonFilter) -> Result<Filter, FilterError> {
    convert(filter, 0)
}

fn convert(filter: &RigJsonFilter, depth: usize) -> Result<Filter, FilterError> {
    if depth >= MAX_FILTER_DEPTH {
        return Err(FilterError::Must(
            "a filter".into(),
            format!("nest at most {MAX_FILTER_DEPTH} levels"),
        ));
    }
    Ok(match filter {
        RigFilter::Eq(key, value) => Filter::eq(key.as_str(), text_of(key, value)?),
        RigFilter::Gt(key, _) | RigFilter::Lt(key, _) => {
            return Err(FilterError::TypeError(format!(
                "an order comparison on `{key}` (lprag metadata are strings; only Eq, And and Or map onto lprag filters)"
            )))
        }
        RigFilter::And(a, b) => Filter::And(vec![convert(a, depth + 1)?, convert(b, depth + 1)?]),
        RigFilter::Or(a, b) => Filter::Or(vec![convert(a, depth + 1)?, convert(b, depth + 1)?]),
    })
}

fn text_of(key: &str, value: &Value) -> Result<String, FilterError> {
    crate::source::scalar_text(value).ok_or_else(|| FilterError::Expected {
        expected: format!("a string, number or boolean for `{key}`"),
        got: match value {
            Value::Null => "null",
            Value::Array(_) => "an array",
            _ => "an object",
        }
        .into(),
    })
}

#[cfg(test)]
mod filter_tests {
    use super::*;
    use rig_core::vector_store::request::SearchFilter;
    use serde_json::json;

    #[test]
    fn eq_and_or_map_onto_lprag_filters() {
        let f = RigJsonFilter::eq("lang", json!("en")).and(
            RigJsonFilter::eq("year", json!(2024)).or(RigJsonFilter::eq("draft", json!(false))),
        );
        assert_eq!(
            to_lprag_filter(&f).unwrap(),
            Filter::And(vec![
                Filter::eq("lang", "en"),
                Filter::Or(vec![
                    Filter::eq("year", "2024"),
                    Filter::eq("draft", "false")
                ]),
            ])
        );
    }

    #[test]
    fn order_comparisons_null_values_and_deep_nesting_are_refused() {
        let gt = to_lprag_filter(&RigJsonFilter::gt("year", json!(2000))).unwrap_err();
        assert!(gt.to_string().contains("`year`"), "{gt}");
        let null = to_lprag_filter(&RigJsonFilter::eq("lang", Value::Null)).unwrap_err();
        assert!(null.to_string().contains("null"), "{null}");
        let mut deep = RigJsonFilter::eq("a", json!("b"));
        for _ in 0..MAX_FILTER_DEPTH {
            deep = deep.clone().and(RigJsonFilter::eq("a", json!("b")));
        }
        assert!(to_lprag_filter(&deep).is_err());
    }
}
