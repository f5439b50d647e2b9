//! Incremental updates: documents added, replaced and removed without a rebuild, scored by
//! the trained model, saved and reopened; the k-NN graph repaired exactly; errors leave the
//! index unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use lprag::{
    core::EdgeKind, Document, HashingEncoder, LpRag, LpRagConfig, Retriever, Selection, TrainConfig,
};

use crate::common;

const QUERIES: [&str; 4] = [
    "Which river flows through Warsaw?",
    "highest mountain above sea level",
    "imperial capital of Japan",
    "Who invented dynamite?",
];

fn config() -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs: 2,
            ..TrainConfig::default()
        },
        ..LpRagConfig::default()
    }
}

async fn build(docs: &[Document]) -> LpRag {
    LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config())
        .build(docs)
        .await
        .unwrap()
}

/// Every chunk's score for `query`, by (document id, chunk text).
async fn scores(rag: &LpRag, query: &str) -> HashMap<(String, String), f32> {
    let mut rag_all = rag.retrieve(query, Selection::TopK(1000)).await.unwrap();
    rag_all.sort_by_key(|h| h.chunk.id);
    rag_all
        .into_iter()
        .map(|h| ((h.chunk.provenance.document_id, h.chunk.text), h.score))
        .collect()
}

fn same_scores(a: &HashMap<(String, String), f32>, b: &HashMap<(String, String), f32>, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: chunk count");
    for (k, s) in a {
        let t = b.get(k).unwrap_or_else(|| panic!("{what}: {k:?} missing"));
        assert!((s - t).abs() <= 1e-5, "{what}: {k:?} {s} vs {t}");
    }
}

/// The similarity edges of `rag` equal a fresh mutual k-NN over its chunk embeddings.
fn graph_is_fresh(rag: &LpRag) {
    let g = rag.graph();
    let emb = g.features.select(&(0..g.num_chunks).collect::<Vec<_>>());
    let fresh =
        lprag::graph::mutual_knn_edges(&emb, rag.config().knn_k, &lprag::graph::KnnBackend::Exact)
            .unwrap();
    let mut have: Vec<(u32, u32)> = g
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Similarity)
        .map(|e| (e.a, e.b))
        .collect();
    have.sort_unstable();
    let want: Vec<(u32, u32)> = fresh.iter().map(|e| (e.a, e.b)).collect();
    assert!(!want.is_empty());
    assert_eq!(have, want, "similarity edges differ from a fresh build");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_documents_are_found_saved_and_reopened() {
    let docs = common::corpus();
    let mut rag = build(&docs[..4]).await;
    assert!(rag.chunks_without_queries().is_empty());
    let before = rag.stats().chunks;
    let report = rag.add_documents(&docs[4..]).await.unwrap();
    assert_eq!((report.added_documents, report.added_chunks), (2, 2));
    assert_eq!(report.chunks, before + 2);
    assert_eq!(rag.stats().chunks, before + 2);
    assert_eq!(rag.chunks().len(), rag.graph().num_chunks);
    assert!(rag.chunks().iter().enumerate().all(|(i, c)| c.id == i));
    graph_is_fresh(&rag);
    let hits = rag.retrieve(QUERIES[1], Selection::TopK(1)).await.unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "everest");
    // The new chunks have no synthetic query until a retrain.
    let fresh: Vec<usize> = rag.chunks_without_queries();
    assert_eq!(fresh.len(), 2);
    // Saved and reopened, the updated index answers the same.
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path().join("i")).unwrap();
    let reopened = LpRag::load(dir.path().join("i"), Arc::new(HashingEncoder::default())).unwrap();
    for q in QUERIES {
        same_scores(&scores(&rag, q).await, &scores(&reopened, q).await, q);
    }
    // A reopened index updates too (its k-NN lists were saved).
    let mut reopened = reopened;
    reopened.remove_documents(&["kyoto".into()]).await.unwrap();
    graph_is_fresh(&reopened);
    // Retraining writes queries for the new chunks and trains again.
    let report = rag.retrain().await.unwrap();
    assert!(report.epochs_run >= 1, "{report:?}");
    assert!(rag.chunks_without_queries().len() < fresh.len());
    let hits = rag.retrieve(QUERIES[1], Selection::TopK(1)).await.unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "everest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_and_re_adding_a_document_restores_every_score() {
    let docs = common::corpus();
    let mut rag = build(&docs).await;
    let original: Vec<_> = futures_scores(&rag).await;
    let queries_before = rag.synthetic_queries().len();
    let report = rag.remove_documents(&["warsaw".into()]).await.unwrap();
    assert_eq!(report.removed_documents, 1);
    assert_eq!(report.removed_chunks, 1);
    assert!(rag.synthetic_queries().len() + report.removed_queries == queries_before);
    graph_is_fresh(&rag);
    for q in QUERIES {
        let hits = rag.retrieve(q, Selection::TopK(10)).await.unwrap();
        assert!(hits
            .iter()
            .all(|h| h.chunk.provenance.document_id != "warsaw"));
    }
    assert!(rag
        .synthetic_queries()
        .iter()
        .all(|q| q.chunk_ids.iter().all(|&c| c < rag.chunks().len())));
    // Back in (at the end of the chunk list): the chunk graph is the same up to the
    // order of its nodes, so the trained model gives every chunk its old score.
    rag.add_documents(&docs[1..2]).await.unwrap();
    graph_is_fresh(&rag);
    let again: Vec<_> = futures_scores(&rag).await;
    for ((q, a), (_, b)) in original.iter().zip(&again) {
        same_scores(a, b, q);
    }
    // An update replaces the document's chunks.
    let new = Document::new("warsaw", "Warsaw", "Warsaw hosts the Chopin airport.");
    let report = rag.update_documents(&[new]).await.unwrap();
    assert_eq!((report.removed_chunks, report.added_chunks), (1, 1));
    let texts: Vec<&str> = rag
        .chunks()
        .iter()
        .filter(|c| c.provenance.document_id == "warsaw")
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(texts, ["Warsaw hosts the Chopin airport."]);
}

async fn futures_scores(rag: &LpRag) -> Vec<(&'static str, HashMap<(String, String), f32>)> {
    let mut out = Vec::new();
    for q in QUERIES {
        out.push((q, scores(rag, q).await));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_updates_are_refused_and_change_nothing() {
    let docs = common::corpus();
    let mut rag = build(&docs).await;
    let before = futures_scores(&rag).await;
    let err = rag.add_documents(&docs[..1]).await.unwrap_err().to_string();
    assert!(err.contains("already in the index"), "{err}");
    let twice = [docs[0].clone(), docs[0].clone()];
    let err = rag.update_documents(&twice).await.unwrap_err().to_string();
    assert!(err.contains("appears twice"), "{err}");
    let err = rag
        .remove_documents(&["nope".into(), "curie".into()])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope") && !err.contains("curie"), "{err}");
    let all: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
    let err = rag.remove_documents(&all).await.unwrap_err().to_string();
    assert!(err.contains("cannot be empty"), "{err}");
    let empty = Document::new("blank", "", "   ");
    assert!(rag.add_documents(&[empty]).await.is_err());
    // A model shared outside the index no longer stops an update: the update attaches a
    // copy to its new graph and the shared one keeps scoring the old graph.
    let shared = rag.predictor().clone();
    let mut copy = rag.clone();
    copy.add_documents(&[Document::new("x", "X", "Text about x.")])
        .await
        .unwrap();
    assert_eq!(copy.chunks().len(), docs.len() + 1);
    assert!(shared
        .score(&vec![0.1; rag.graph().features.dim()], &[0])
        .is_ok());
    drop(shared);
    assert_eq!(rag.chunks().len(), docs.len());
    let after = futures_scores(&rag).await;
    for ((q, a), (_, b)) in before.iter().zip(&after) {
        same_scores(a, b, q);
    }
}
