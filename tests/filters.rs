//! Metadata travels to every hit, filters apply before truncation in every retriever, and
//! `retrieve_batch` answers like one `retrieve` per query.

use std::collections::HashMap;
use std::sync::Arc;

use lprag::{
    Document, Encoder, Filter, HashingEncoder, LpRag, LpRagConfig, Retriever, Selection,
    TrainConfig,
};

use crate::common;

/// The shared corpus with a `region` on every document and a `year` on some.
fn corpus() -> Vec<Document> {
    common::corpus()
        .into_iter()
        .map(|d| {
            let region = match d.id.as_str() {
                "tokyo" | "kyoto" | "everest" => "asia",
                _ => "europe",
            };
            let d = d.with_metadata("region", region);
            if d.id == "curie" || d.id == "tokyo" {
                d.with_metadata("year", "1867")
            } else {
                d
            }
        })
        .collect()
}

fn hashing() -> Arc<dyn Encoder> {
    Arc::new(HashingEncoder::default())
}

#[tokio::test]
async fn every_retriever_returns_metadata_and_only_admitted_chunks() {
    let docs = corpus();
    let meta: HashMap<&str, _> = docs.iter().map(|d| (d.id.as_str(), &d.metadata)).collect();
    for (name, r) in common::build_each_on(&docs, hashing).await {
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        let hits = r
            .retrieve("Which river flows through Warsaw?", Selection::TopK(6))
            .await
            .unwrap();
        assert!(!hits.is_empty(), "{name}");
        for h in &hits {
            // Every chunk also records its document's content hash (for `sync`).
            let mut m = h.chunk.metadata.clone();
            let hash = m.remove(lprag::DOCUMENT_HASH_KEY);
            let doc = docs
                .iter()
                .find(|d| d.id == h.chunk.provenance.document_id)
                .unwrap();
            assert_eq!(hash, Some(doc.content_hash()), "{name}");
            assert_eq!(
                &m,
                meta[h.chunk.provenance.document_id.as_str()],
                "{name}: a hit lost its document's metadata"
            );
        }
        let asia = Filter::eq("region", "asia");
        let filtered = r
            .retrieve_filtered(
                "Which river flows through Warsaw?",
                Selection::TopK(2),
                &asia,
            )
            .await
            .unwrap();
        assert!(!filtered.is_empty(), "{name}: the filter left nothing");
        assert!(filtered.len() <= 2, "{name}");
        for h in &filtered {
            assert_eq!(h.chunk.metadata["region"], "asia", "{name}: {:?}", h.chunk);
        }
        // Filtering comes before truncation: the admitted chunks' order and scores are
        // the unfiltered ranking's, restricted to them.
        let all = r
            .retrieve("Which river flows through Warsaw?", Selection::TopK(100))
            .await
            .unwrap();
        let reference: Vec<_> = all
            .iter()
            .filter(|h| asia.matches(&h.chunk))
            .take(2)
            .map(|h| (h.chunk.id, h.score))
            .collect();
        let got: Vec<_> = filtered.iter().map(|h| (h.chunk.id, h.score)).collect();
        assert_eq!(got, reference, "{name}");
        let bad = r
            .retrieve_filtered("Warsaw", Selection::TopK(2), &Filter::exists(""))
            .await
            .unwrap_err()
            .to_string();
        assert!(bad.contains("key is empty"), "{name}: {bad}");
    }
}

#[tokio::test]
async fn lprag_draws_its_candidates_from_the_admitted_chunks() {
    let mut rag = LpRag::builder()
        .encoder(hashing())
        .config(LpRagConfig {
            train: TrainConfig {
                epochs: 2,
                ..TrainConfig::default()
            },
            ..LpRagConfig::default()
        })
        .build(&corpus())
        .await
        .unwrap();
    let query = "Which river flows through Warsaw?";
    rag.set_candidates(None, false);
    let exhaustive = rag.retrieve(query, Selection::TopK(100)).await.unwrap();
    let score_of: HashMap<usize, f32> = exhaustive.iter().map(|h| (h.chunk.id, h.score)).collect();
    // A pool of one chunk: unfiltered, only the nearest chunk is scored, so a filter
    // applied after ranking would leave nothing of the Asian documents.
    rag.set_candidates(Some(1), false);
    let pooled = rag.retrieve(query, Selection::TopK(100)).await.unwrap();
    assert_eq!(pooled.len(), 1);
    assert_ne!(pooled[0].chunk.metadata["region"], "asia");
    let asia = Filter::eq("region", "asia");
    let hits = rag
        .retrieve_filtered(query, Selection::TopK(3), &asia)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "a pool of one admitted chunk");
    assert_eq!(hits[0].chunk.metadata["region"], "asia");
    // Its score is the exhaustive one: the query still joins the corpus's nearest chunks.
    assert!((hits[0].score - score_of[&hits[0].chunk.id]).abs() <= 1e-5);
    rag.set_candidates(Some(3), true);
    let hits = rag
        .retrieve_filtered(query, Selection::TopK(3), &asia)
        .await
        .unwrap();
    assert_eq!(hits.len(), 3, "{hits:?}");
    for h in &hits {
        assert_eq!(h.chunk.metadata["region"], "asia");
        assert!((h.score - score_of[&h.chunk.id]).abs() <= 1e-5);
    }
    let years = rag
        .retrieve_filtered(query, Selection::TopK(5), &Filter::exists("year"))
        .await
        .unwrap();
    let mut docs: Vec<_> = years
        .iter()
        .map(|h| h.chunk.provenance.document_id.as_str())
        .collect();
    docs.sort();
    assert_eq!(docs, ["curie", "tokyo"]);
}

#[tokio::test]
async fn retrieve_batch_matches_one_query_at_a_time() {
    let queries: Vec<String> = [
        "Which river flows through Warsaw?",
        "Who invented dynamite?",
        "capital of Japan",
    ]
    .map(String::from)
    .to_vec();
    for (name, r) in common::build_each_on(&corpus(), hashing).await {
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        let batch = r
            .retrieve_batch(&queries, Selection::TopK(3))
            .await
            .unwrap();
        assert_eq!(batch.len(), queries.len(), "{name}");
        for (q, got) in queries.iter().zip(&batch) {
            let one = r.retrieve(q, Selection::TopK(3)).await.unwrap();
            let ids = |v: &[lprag::ScoredChunk]| {
                v.iter()
                    .map(|h| (h.chunk.id, (h.score * 1e5).round() as i64))
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(got), ids(&one), "{name}: {q}");
        }
        assert!(r
            .retrieve_batch(&[], Selection::TopK(3))
            .await
            .unwrap()
            .is_empty());
        let err = r
            .retrieve_batch(&queries, Selection::TopK(0))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("k must be at least 1"), "{name}: {err}");
    }
}
