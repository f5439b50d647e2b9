//! # A swiftide indexing pipeline feeding an LP-RAG index
//!
//! swiftide's own loader and chunker read the bundled Markdown notes (`examples/notes`);
//! `lprag_adapters::swiftide::LpragPersist`, the pipeline's storage, writes their chunks
//! into a `Live` LP-RAG index (built first over the bundled ten-article corpus), which
//! keeps serving meanwhile. swiftide's retrieval step (`SwiftideRetriever`) then answers
//! from the grown index.
//!
//! ```text
//! cargo run --example swiftide_persist
//! ```

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{Live, LiveIndex, LpRag};
use lprag_adapters::swiftide::{LpragPersist, LpragSearch, SwiftideRetriever};
use swiftide_core::querying::{states, Query};
use swiftide_core::Retrieve;
use swiftide_indexing::loaders::FileLoader;
use swiftide_indexing::transformers::ChunkMarkdown;
use swiftide_indexing::Pipeline;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    logging::init();
    let rag = LpRag::builder().build(&mini_corpus::documents()).await?;
    let live: Arc<dyn LiveIndex> = Arc::new(Live::new(rag));
    let before = live.snapshot().chunks().len();

    let notes = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/notes");
    Pipeline::from_loader(FileLoader::new(notes).with_extensions(&["md"]))
        .then_chunk(ChunkMarkdown::from_chunk_range(100..600))
        .then_store_with(LpragPersist::new(live.clone()).batch_size(32))
        .run()
        .await
        .map_err(|e| format!("swiftide pipeline: {e:#}"))?;
    let after = live.snapshot();
    println!(
        "swiftide stored {} Markdown chunks: {} chunks in the index, from {before}",
        after.chunks().len() - before,
        after.chunks().len()
    );

    let retriever = SwiftideRetriever::live(live.clone());
    for question in [
        "What does the borrow checker rule out?",
        "Who invented dynamite?",
    ] {
        let query: Query<states::Pending> = Query::from(question);
        let answered = retriever
            .retrieve(&LpragSearch::top_k(2), query)
            .await
            .map_err(|e| format!("retrieve: {e:#}"))?;
        println!("\n{question}");
        for doc in answered.documents() {
            let path = doc
                .metadata()
                .get("path")
                .and_then(|p| p.as_str())
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
                .unwrap_or_else(|| "bundled corpus".into());
            let text: String = doc.content().chars().take(110).collect();
            println!("  [{path}] {}", text.replace('\n', " "));
        }
    }
    Ok(())
}
