//! # An lprag retriever as a swiftide retrieval step
//!
//! Indexes the bundled ten-article corpus (BM25 from `lprag-core` stands in for `LpRag`,
//! so the example builds without burn; an `LpRag` goes in the same way) and runs swiftide-core's `Retrieve` on it, with swiftide's
//! default strategy and with `LpragSearch` (an lprag selection and metadata filter). In a
//! full swiftide query pipeline the same value goes to `then_retrieve(...)`.
//!
//! ```text
//! cargo run -p lprag-adapters --features swiftide --example swiftide_retrieve
//! ```

use std::sync::Arc;

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

#[path = "support/bm25_retriever.rs"]
mod bm25_retriever;

use lprag_adapters::swiftide::{LpragSearch, SwiftideRetriever};
use lprag_core::Filter;
use swiftide_core::querying::search_strategies::SimilaritySingleEmbedding;
use swiftide_core::querying::Query;
use swiftide_core::Retrieve;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut docs = mini_corpus::documents();
    for (i, d) in docs.iter_mut().enumerate() {
        d.metadata.insert("shelf".into(), format!("{}", i % 3));
    }
    // Any lprag retriever: with the `lprag` crate this is `LpRag::builder().build(&docs)`.
    let rag = bm25_retriever::Bm25Retriever::new(&docs)?;
    let retriever = SwiftideRetriever::new(Arc::new(rag));

    let question = "Which river flows through Warsaw?";
    let mut strategy = SimilaritySingleEmbedding::default();
    strategy.with_top_k(3);
    let answered = retriever.retrieve(&strategy, Query::from(question)).await?;
    println!("{question} (swiftide's default strategy, top 3)");
    for doc in answered.documents() {
        let meta = doc.metadata();
        println!(
            "  score {:.3}  chunk {}  {}",
            meta.get("score")
                .and_then(|v| v.as_f64())
                .unwrap_or_default(),
            meta.get("chunk_id").cloned().unwrap_or_default(),
            doc.content().chars().take(70).collect::<String>()
        );
    }

    let search = LpragSearch::top_k(2).with_filter(Filter::eq("shelf", "1"));
    let answered = retriever.retrieve(&search, Query::from(question)).await?;
    println!("the same, shelf 1 only, top 2");
    for doc in answered.documents() {
        println!("  {}", doc.content().chars().take(70).collect::<String>());
    }
    Ok(())
}
