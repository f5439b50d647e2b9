//! swiftide both ways: an lprag retriever as a query-pipeline step, and a live lprag index
//! as the storage of an indexing pipeline ([`LpragPersist`], swiftide's `Persist`: its
//! loaders, chunkers and transformers feed lprag).
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
use lprag_core::{Filter, LiveIndex, Retriever, ScoredChunk, Selection};
use swiftide_core::indexing::{IndexingStream, Metadata, TextNode};
use swiftide_core::querying::search_strategies::SimilaritySingleEmbedding;
use swiftide_core::querying::{states, Document, Query};
use swiftide_core::{Persist, Retrieve, SearchStrategy};

use crate::IndexSource;

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
    source: Arc<dyn IndexSource>,
}

impl SwiftideRetriever {
    /// Wrap a retriever (an `LpRag`, a peer, or your own).
    pub fn new(retriever: Arc<dyn Retriever>) -> Self {
        Self {
            source: Arc::new(retriever),
        }
    }

    /// Serve a live index (the facade's `lprag::Live`, fed by [`LpragPersist`]): each
    /// query reads its current snapshot.
    pub fn live(index: Arc<dyn LiveIndex>) -> Self {
        Self {
            source: Arc::new(index),
        }
    }

    /// The retriever that answers the next query.
    pub fn retriever(&self) -> Arc<dyn Retriever> {
        self.source.current()
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
        let retriever = self.retriever();
        let hits = match &search.filter {
            Some(f) => {
                retriever
                    .retrieve_filtered(&text, search.selection, f)
                    .await?
            }
            None => retriever.retrieve(&text, search.selection).await?,
        };
        Ok(query.retrieved_documents(hits.into_iter().map(to_document).collect()))
    }
}

impl std::fmt::Debug for SwiftideRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwiftideRetriever")
            .field("retriever", &self.retriever().name())
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

/// The storage of a swiftide indexing pipeline (`Pipeline::then_store_with`) writing into
/// a live lprag index (the facade's `lprag::Live`), so swiftide's loaders, chunkers and
/// transformers feed lprag while it serves queries.
///
/// Each batch of nodes (default 256, [`LpragPersist::batch_size`]) is one
/// [`LiveIndex::upsert`]; see [`document_from_node`] for how a node becomes a document.
/// The index's own update chunker then sees each node's text (lprag's default keeps a
/// passage under its bound whole), and its encoder embeds it: vectors a swiftide
/// embedding step computed are not used. A failed upsert fails every node of its batch
/// and writes none of them.
#[derive(Clone)]
pub struct LpragPersist {
    index: Arc<dyn LiveIndex>,
    batch_size: usize,
}

impl LpragPersist {
    /// Write into `index`.
    pub fn new(index: Arc<dyn LiveIndex>) -> Self {
        Self {
            index,
            batch_size: 256,
        }
    }

    /// Nodes per upsert (at least 1). Each upsert is one index update (chunking,
    /// embedding, graph repair), so larger batches cost less per node.
    pub fn batch_size(mut self, nodes: usize) -> Self {
        self.batch_size = nodes.max(1);
        self
    }

    /// The index written into.
    pub fn index(&self) -> &Arc<dyn LiveIndex> {
        &self.index
    }

    async fn upsert(&self, nodes: &[TextNode]) -> anyhow::Result<()> {
        // A node id repeats when a path holds the same chunk twice: one document.
        let mut seen = std::collections::HashSet::new();
        let docs: Vec<lprag_core::Document> = nodes
            .iter()
            .rev()
            .map(document_from_node)
            .filter(|d| seen.insert(d.id.clone()))
            .collect();
        self.index.upsert(&docs).await?;
        Ok(())
    }
}

impl std::fmt::Debug for LpragPersist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LpragPersist")
            .field("index", &self.index.name())
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

/// A swiftide node as an lprag document: id = the node's id (a UUID of its path and
/// chunk, so the same chunk from the same file replaces itself), title = the path's file
/// name, text = the chunk, metadata = the node's string, number and boolean metadata as
/// written, plus `path` and `offset` (bytes into the source).
pub fn document_from_node(node: &TextNode) -> lprag_core::Document {
    let title = node
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut doc = lprag_core::Document::new(node.id().to_string(), title, node.chunk.clone());
    for (k, v) in node.metadata.iter() {
        if let Some(written) = crate::source::scalar_text(v) {
            doc.metadata.insert(k.clone(), written);
        }
    }
    if !node.path.as_os_str().is_empty() {
        doc.metadata
            .insert("path".into(), node.path.display().to_string());
    }
    doc.metadata
        .insert("offset".into(), node.offset.to_string());
    doc
}

#[async_trait]
impl Persist for LpragPersist {
    type Input = String;
    type Output = String;

    async fn setup(&self) -> anyhow::Result<()> {
        Ok(())
    }

    async fn store(&self, node: TextNode) -> anyhow::Result<TextNode> {
        self.upsert(std::slice::from_ref(&node)).await?;
        Ok(node)
    }

    async fn batch_store(&self, nodes: Vec<TextNode>) -> IndexingStream<String> {
        match self.upsert(&nodes).await {
            Ok(()) => IndexingStream::from_nodes(nodes),
            Err(e) => IndexingStream::from(e),
        }
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.batch_size)
    }

    fn name(&self) -> &'static str {
        "lprag"
    }
}
