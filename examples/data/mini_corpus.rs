//! The small bundled corpus the examples index (ten encyclopedia-style articles).

use lprag_core::Document;

/// The articles of `mini_corpus.json` as documents.
pub fn documents() -> Vec<Document> {
    let raw = include_str!("mini_corpus.json");
    serde_json::from_str::<Vec<serde_json::Value>>(raw)
        .expect("bundled corpus is valid JSON")
        .into_iter()
        .map(|d| {
            Document::new(
                d["id"].as_str().unwrap_or_default(),
                d["title"].as_str().unwrap_or_default(),
                d["text"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}
