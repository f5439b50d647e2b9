//! What the chunk-store tests of `lprag` (`tests/chunk_store.rs`) and of `lprag-lance`
//! (`crates/lprag-lance/tests/lprag.rs`) both ask: a labelled corpus, an LP-RAG index whose
//! pool comes from a search, and every query's hits with and without a filter.
// Every test binary that includes `common` compiles this; not all of them use it.
#![allow(dead_code)]

use lprag::{Document, Filter, LpRag, LpRagConfig, Retriever, Selection, TrainConfig};

/// The questions every test asks.
pub const QUERIES: [&str; 4] = [
    "Which river flows through Warsaw?",
    "Who won the Nobel Prize in Physics?",
    "What is the tallest mountain?",
    "Where was the physicist born?",
];

/// `docs` with a `half` label on each (`a` or `b`, alternating).
pub fn labelled(docs: Vec<Document>) -> Vec<Document> {
    docs.into_iter()
        .enumerate()
        .map(|(i, d)| d.with_metadata("half", if i % 2 == 0 { "a" } else { "b" }))
        .collect()
}

/// LP-RAG on `docs` with the hashing encoder, two epochs, and a pool of 3 (fewer than the
/// chunks: the pool comes from a search).
pub async fn index(docs: &[Document]) -> LpRag {
    LpRag::builder()
        .encoder(std::sync::Arc::new(lprag::HashingEncoder::default()))
        .config(LpRagConfig {
            train: TrainConfig {
                epochs: 2,
                ..TrainConfig::default()
            },
            candidate_pool: Some(3),
            ..LpRagConfig::default()
        })
        .build(docs)
        .await
        .unwrap()
}

/// Every query's hits (chunk id and score), unfiltered and under `filter`; every hit is
/// one the filter admits.
pub async fn answers(rag: &LpRag, filter: &Filter) -> Vec<Vec<(usize, f32)>> {
    let mut out = Vec::new();
    for q in QUERIES {
        for f in [&Filter::All, filter] {
            let hits = rag
                .retrieve_filtered(q, Selection::TopK(5), f)
                .await
                .unwrap();
            assert!(!hits.is_empty(), "{q}");
            assert!(hits.iter().all(|h| f.matches(&h.chunk)), "{q}: {f:?}");
            out.push(hits.iter().map(|h| (h.chunk.id, h.score)).collect());
        }
    }
    out
}
