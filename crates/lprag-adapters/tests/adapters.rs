//! Both adapters against a retriever (BM25 over the bundled corpus; any lprag `Retriever`
//! goes through the same code): what rig and swiftide get back is exactly what the
//! retriever returns for the same query, selection and filter.

use std::sync::Arc;

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

#[path = "../examples/support/bm25_retriever.rs"]
mod bm25_retriever;

use bm25_retriever::Bm25Retriever;
use lprag_adapters::rig::{RigIndex, RigJsonFilter};
use lprag_adapters::swiftide::{LpragSearch, SwiftideRetriever};
use lprag_core::{Chunk, Document, Filter, Retriever, ScoredChunk, Selection};
use rig_core::vector_store::request::{SearchFilter, VectorSearchRequest};
use rig_core::vector_store::VectorStoreIndex;
use swiftide_core::querying::search_strategies::SimilaritySingleEmbedding;
use swiftide_core::querying::{states, Query};
use swiftide_core::Retrieve;

const QUESTION: &str = "Which river flows through the capital of Poland?";

/// The bundled corpus, every other document tagged `"kind": "even"`.
fn documents() -> Vec<Document> {
    let mut docs = mini_corpus::documents();
    for (i, d) in docs.iter_mut().enumerate() {
        let kind = if i % 2 == 0 { "even" } else { "odd" };
        d.metadata.insert("kind".into(), kind.into());
    }
    docs
}

async fn index() -> Arc<dyn Retriever> {
    Arc::new(Bm25Retriever::new(&documents()).expect("index the bundled corpus"))
}

fn ids_and_scores(hits: &[ScoredChunk]) -> Vec<(String, f64)> {
    hits.iter()
        .map(|h| (h.chunk.id.to_string(), f64::from(h.score)))
        .collect()
}

#[tokio::test]
async fn rig_and_swiftide_return_what_the_retriever_returns() {
    let rag = index().await;
    let direct = rag.retrieve(QUESTION, Selection::TopK(3)).await.unwrap();
    assert_eq!(direct.len(), 3);

    // rig: top_n, top_n_ids
    let rig = RigIndex::new(rag.clone());
    let request = || {
        VectorSearchRequest::<RigJsonFilter>::builder()
            .query(QUESTION)
            .samples(3)
            .build()
    };
    let docs = rig.top_n::<Chunk>(request()).await.unwrap();
    assert_eq!(
        docs.iter()
            .map(|d| (d.id.clone(), d.score))
            .collect::<Vec<_>>(),
        ids_and_scores(&direct)
    );
    for (d, h) in docs.iter().zip(&direct) {
        assert_eq!(d.document, h.chunk);
    }
    let ids = rig.top_n_ids(request()).await.unwrap();
    assert_eq!(
        ids.iter()
            .map(|d| (d.id.clone(), d.score))
            .collect::<Vec<_>>(),
        ids_and_scores(&direct)
    );

    // swiftide: LpragSearch and the default strategy
    let swift = SwiftideRetriever::new(rag.clone());
    let pending: Query<states::Pending> = Query::from(QUESTION);
    let retrieved = swift
        .retrieve(&LpragSearch::top_k(3), pending)
        .await
        .unwrap();
    let texts: Vec<&str> = retrieved.documents().iter().map(|d| d.content()).collect();
    let expected: Vec<&str> = direct.iter().map(|h| h.chunk.text.as_str()).collect();
    assert_eq!(texts, expected);
    let first = &retrieved.documents()[0];
    assert_eq!(
        first.metadata().get("chunk_id"),
        Some(&serde_json::json!(direct[0].chunk.id))
    );
    assert_eq!(
        first.metadata().get("document_id"),
        Some(&serde_json::json!(direct[0].chunk.provenance.document_id))
    );
    let default_k = swift
        .retrieve(&SimilaritySingleEmbedding::default(), Query::from(QUESTION))
        .await
        .unwrap();
    let ten = rag.retrieve(QUESTION, Selection::TopK(10)).await.unwrap();
    assert_eq!(default_k.documents().len(), ten.len());
}

#[tokio::test]
async fn thresholds_and_filters_reach_the_retriever() {
    let rag = index().await;
    let even = Filter::eq("kind", "even");
    let direct = rag
        .retrieve_filtered(QUESTION, Selection::TopK(4), &even)
        .await
        .unwrap();
    assert!(!direct.is_empty());
    assert!(direct.iter().all(|h| h.chunk.metadata["kind"] == "even"));

    let rig = RigIndex::new(rag.clone());
    let filtered = VectorSearchRequest::<RigJsonFilter>::builder()
        .query(QUESTION)
        .samples(4)
        .filter(RigJsonFilter::eq("kind", serde_json::json!("even")))
        .build();
    let ids = rig.top_n_ids(filtered).await.unwrap();
    assert_eq!(
        ids.iter()
            .map(|d| (d.id.clone(), d.score))
            .collect::<Vec<_>>(),
        ids_and_scores(&direct)
    );

    // a threshold between the best and the worst of ten hits keeps exactly those above it
    let ten = rag.retrieve(QUESTION, Selection::TopK(10)).await.unwrap();
    let cut = (ten[0].score + ten[ten.len() - 1].score) / 2.0;
    let above = ten.iter().filter(|h| h.score >= cut).count();
    let thresholded = VectorSearchRequest::<RigJsonFilter>::builder()
        .query(QUESTION)
        .samples(10)
        .threshold(f64::from(cut))
        .build();
    assert_eq!(rig.top_n_ids(thresholded).await.unwrap().len(), above);

    // an order comparison has no lprag counterpart: an error, not a silent full list
    let gt = VectorSearchRequest::<RigJsonFilter>::builder()
        .query(QUESTION)
        .samples(4)
        .filter(RigJsonFilter::gt("kind", serde_json::json!("a")))
        .build();
    assert!(rig.top_n_ids(gt).await.is_err());

    let swift = SwiftideRetriever::new(rag);
    let retrieved = swift
        .retrieve(
            &LpragSearch::top_k(4).with_filter(even),
            Query::from(QUESTION),
        )
        .await
        .unwrap();
    assert_eq!(retrieved.documents().len(), direct.len());
    assert!(retrieved
        .documents()
        .iter()
        .all(|d| d.metadata().get("kind") == Some(&serde_json::json!("even"))));
}
