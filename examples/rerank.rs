//! A reranker after a retriever: BM25 proposes, a second stage re-orders.
//!
//! ```text
//! cargo run --example rerank
//! LPRAG_CROSS_ENCODER_DIR=path/to/ms-marco-MiniLM-L-6-v2 cargo run --example rerank
//! ```
//!
//! With `LPRAG_CROSS_ENCODER_DIR` (a Hugging Face cross-encoder directory: config.json,
//! tokenizer.json, model.safetensors) the second stage is lprag's BERT `CrossEncoder`;
//! without it, a reranker written here in a few lines (how your own model plugs in).

use async_trait::async_trait;
use lprag::{
    Bm25Retriever, CrossEncoder, Document, Reranked, Reranker, Result, Retriever, Selection,
};

/// Your own second stage: here, the share of the query's words a text contains.
struct WordOverlap;

#[async_trait]
impl Reranker for WordOverlap {
    fn name(&self) -> &str {
        "word-overlap"
    }

    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_lowercase)
            .collect();
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                words.iter().filter(|w| t.contains(w.as_str())).count() as f32
                    / words.len().max(1) as f32
            })
            .collect())
    }
}

async fn show(search: &dyn Retriever, query: &str) -> Result<()> {
    println!("{} — {query}", search.name());
    for hit in search.retrieve(query, Selection::TopK(3)).await? {
        println!("  {:>7.3}  {}", hit.score, hit.chunk.text);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let docs = vec![
        Document::new("1", "Curie", "Marie Curie was born in Warsaw in 1867."),
        Document::new(
            "2",
            "Warsaw",
            "Warsaw is the capital of Poland, on the Vistula.",
        ),
        Document::new(
            "3",
            "Nobel",
            "Curie won the Nobel Prize in Physics and in Chemistry.",
        ),
        Document::new(
            "4",
            "Paris",
            "Curie worked in Paris, where she died in 1934.",
        ),
    ];
    let query = "In which city was Marie Curie born?";
    let bm25 = Bm25Retriever::builder().build(&docs).await?;
    show(&bm25, query).await?;

    match std::env::var_os("LPRAG_CROSS_ENCODER_DIR") {
        Some(dir) => {
            let ce = CrossEncoder::from_dir(dir, &lprag::model::Device::flex())?;
            show(&Reranked::new(bm25, ce).with_candidates(20), query).await
        }
        None => show(&Reranked::new(bm25, WordOverlap), query).await,
    }
}
