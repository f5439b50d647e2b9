//! # An lprag retriever behind rig's `VectorStoreIndex`
//!
//! Indexes the bundled ten-article corpus (BM25 from `lprag-core` stands in for `LpRag`,
//! so the example builds without burn; an `LpRag` goes in the same way) and queries it through rig-core's vector-store trait, the
//! one a rig agent's `dynamic_context` uses: the top chunks as documents, their ids, and a
//! metadata filter.
//!
//! ```text
//! cargo run -p lprag-adapters --features rig --example rig_index
//! ```

use std::sync::Arc;

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

#[path = "support/bm25_retriever.rs"]
mod bm25_retriever;

use lprag_adapters::rig::{RigIndex, RigJsonFilter};
use lprag_core::Chunk;
use rig_core::vector_store::request::{SearchFilter, VectorSearchRequest};
use rig_core::vector_store::VectorStoreIndex;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut docs = mini_corpus::documents();
    for d in &mut docs {
        let topic = if d.title.contains("Prize") {
            "prizes"
        } else {
            "people and places"
        };
        d.metadata.insert("topic".into(), topic.into());
    }
    // Any lprag retriever: with the `lprag` crate this is `LpRag::builder().build(&docs)`.
    let rag = bm25_retriever::Bm25Retriever::new(&docs)?;
    let index = RigIndex::new(Arc::new(rag));

    let question = "Who invented dynamite?";
    let request = VectorSearchRequest::<RigJsonFilter>::builder()
        .query(question)
        .samples(3)
        .build();
    println!("{question}");
    for hit in index.top_n::<Chunk>(request).await? {
        println!(
            "  {:.3}  chunk {:>3}  [{}] {}",
            hit.score,
            hit.id,
            hit.document.provenance.title,
            hit.document.text.chars().take(70).collect::<String>()
        );
    }

    let filtered = VectorSearchRequest::<RigJsonFilter>::builder()
        .query(question)
        .samples(3)
        .filter(RigJsonFilter::eq(
            "topic",
            serde_json::json!("people and places"),
        ))
        .build();
    println!("the same, only chunks with topic = \"people and places\" (ids and scores):");
    for hit in index.top_n_ids(filtered).await? {
        println!("  {:.3}  chunk {:>3}", hit.score, hit.id);
    }
    Ok(())
}
