//! An lprag retriever as a swiftide query-pipeline retriever.
//!
//! [`SwiftideRetriever`] implements swiftide-core's `Retrieve` for two search strategies:
//!
//! - `SimilaritySingleEmbedding` (swiftide's default): its `top_k` becomes
//!   `Selection::TopK`. lprag embeds the query itself, so the pipeline needs no
//!   embedding step before this retriever (one that ran is ignored).
//! - [`LpragSearch`]: any lprag [`Selection`] and an optional [`Filter`].
//!
//! The query text is swiftide's current query (after any transformation), else the
//! original. Each hit becomes a swiftide `Document` whose content is the chunk's text and
//! whose metadata holds the chunk's metadata plus `chunk_id`, `document_id` and `score`.
//!
//! ```no_run
//! # async fn demo(rag: std::sync::Arc<dyn lprag_core::Retriever>) -> anyhow::Result<()> {
//! use lprag_adapters::swiftide::{LpragSearch, SwiftideRetriever};
//! use swiftide_core::querying::{states, Query};
//! use swiftide_core::Retrieve;
//!
//! let retriever = SwiftideRetriever::new(rag);
//! let query: Query<states::Pending> = Query::from("Who invented dynamite?");
//! let answered = retriever.retrieve(&LpragSearch::top_k(3), query).await?;
//! for doc in answered.documents() {
//!     println!("{}", doc.content());
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Filter, Retriever, ScoredChunk, Selection};
use swiftide_core::indexing::Metadata;
use swiftide_core::querying::search_strategies::SimilaritySingleEmbedding;
use swiftide_core::querying::{states, Document, Query};
use swiftide_core::{Retrieve, SearchStrategy};

/// A swiftide search strategy carrying an lprag [`Selection`] and an optional metadata
/// [`Filter`] (applied before ranking). The default is the ten best chunks, unfiltered.
#[derive(Debug, Clone, PartialEq)]
pub struct LpragSearch {
    /// How many chunks to return.
    pub selection: Selection,
    /// Which chunks may be returned (`None`: all).
    pub filter: Option<Filter>,
}

impl LpragSearch {
    /// The `k` best chunks.
    pub fn top_k(k: usize) -> Self {
        Self {
            selection: Selection::TopK(k),
            filter: None,
        }
    }

    /// The same search, restricted to the chunks `filter` admits.
    pub fn with_filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }
}

impl Default for LpragSearch {
    fn default() -> Self {
        Self::top_k(10)
    }
}

impl SearchStrategy for LpragSearch {}

/// Any lprag [`Retriever`] as a swiftide `Retrieve` step (cheap to clone: one `Arc`).
#[derive(Clone)]
pub struct SwiftideRetriever {
    retriever: Arc<dyn Retriever>,
}

impl SwiftideRetriever {
    /// Wrap a retriever (an `LpRag`, a peer, or your own).
    pub fn new(retriever: Arc<dyn Retriever>) -> Self {
        Self { retriever }
    }

    /// The wrapped retriever.
    pub fn retriever(&self) -> &Arc<dyn Retriever> {
        &self.retriever
    }

    async fn run(
        &self,
        search: &LpragSearch,
        query: Query<states::Pending>,
    ) -> anyhow::Result<Query<states::Retrieved>> {
        let text = if query.current().is_empty() {
            query.original().to_string()
        } else {
            query.current().to_string()
        };
        let hits = match &search.filter {
            Some(f) => {
                self.retriever
                    .retrieve_filtered(&text, search.selection, f)
                    .await?
            }
            None => self.retriever.retrieve(&text, search.selection).await?,
        };
        Ok(query.retrieved_documents(hits.into_iter().map(to_document).collect()))
    }
}

impl std::fmt::Debug for SwiftideRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwiftideRetriever")
            .field("retriever", &self.retriever.name())
            .finish()
    }
}

/// A hit as a swiftide document: the chunk's text, its metadata, and `chunk_id`,
/// `document_id` and `score`.
pub fn to_document(hit: ScoredChunk) -> Document {
    let mut metadata = Metadata::default();
    for (k, v) in &hit.chunk.metadata {
        metadata.insert(k.clone(), v.clone());
    }
    metadata.insert("chunk_id", hit.chunk.id);
    metadata.insert("document_id", hit.chunk.provenance.document_id.clone());
    metadata.insert("score", f64::from(hit.score));
    Document::new(hit.chunk.text, Some(metadata))
}

#[async_trait]
impl Retrieve<LpragSearch> for SwiftideRetriever {
    async fn retrieve(
        &self,
        search_strategy: &LpragSearch,
        query: Query<states::Pending>,
    ) -> anyhow::Result<Query<states::Retrieved>> {
        self.run(search_strategy, query).await
    }

    fn name(&self) -> &'static str {
        "lprag"
    }
}

#[async_trait]
impl Retrieve<SimilaritySingleEmbedding> for SwiftideRetriever {
    async fn retrieve(
        &self,
        search_strategy: &SimilaritySingleEmbedding,
        query: Query<states::Pending>,
    ) -> anyhow::Result<Query<states::Retrieved>> {
        let k = usize::try_from(search_strategy.top_k()).unwrap_or(usize::MAX);
        self.run(&LpragSearch::top_k(k), query).await
    }

    fn name(&self) -> &'static str {
        "lprag"
    }
}
