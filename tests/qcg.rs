//! QCG-RAG end to end with the offline components.

use std::sync::Arc;

use lprag::{
    Document, Error, HashingEncoder, QcgConfig, QcgRag, Retriever, Selection, SentenceChunker,
};

fn corpus() -> Vec<Document> {
    vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
        ),
        Document::new(
            "warsaw",
            "Warsaw",
            "Warsaw is the capital of Poland. The city lies on the Vistula River.",
        ),
        Document::new(
            "nobel",
            "Alfred Nobel",
            "Alfred Nobel invented dynamite in 1867. His will established the Nobel Prizes.",
        ),
        Document::new(
            "tokyo",
            "Tokyo",
            "Tokyo is the capital of Japan. Tokyo hosted the Summer Olympics in 1964.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level. It lies in the Himalayas.",
        ),
    ]
}

async fn build() -> QcgRag {
    QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&corpus())
        .await
        .unwrap()
}

#[tokio::test]
async fn retrieves_through_the_query_graph() {
    let rag = build().await;
    let stats = rag.stats().clone();
    assert_eq!(stats.chunks, 5);
    assert!(stats.queries_kept > 0 && stats.queries_kept <= stats.queries_generated);
    assert_eq!(rag.neighbors().len(), rag.queries().len());
    assert!(rag.neighbors().iter().all(|n| n.len() <= 3));

    let hits = rag
        .retrieve(
            "Which city hosted the Summer Olympics in 1964?",
            Selection::TopK(2),
        )
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "tokyo", "{hits:#?}");

    // The seeds are the best query nodes, and the explanation matches the ranking.
    let why = rag
        .explain("Which city hosted the Summer Olympics in 1964?")
        .await
        .unwrap();
    assert!(!why.seeds.is_empty() && why.seeds.len() <= 15);
    assert_eq!(why.chunks[0].0, hits[0].chunk.id);
}

#[tokio::test]
async fn top_k_is_filled_with_dense_search_and_stays_sorted() {
    let rag = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .chunker(Arc::new(SentenceChunker::default()))
        .config(QcgConfig {
            max_seeds: 1,
            hops: 0,
            ..QcgConfig::default()
        })
        .build(&corpus())
        .await
        .unwrap();
    let n = rag.chunks().len();
    let hits = rag
        .retrieve("Vistula River", Selection::TopK(n))
        .await
        .unwrap();
    assert_eq!(hits.len(), n, "padded to k");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let mut ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);

    // Without padding only the graph's chunks come back.
    let rag = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(QcgConfig {
            max_seeds: 1,
            hops: 0,
            pad_with_dense: false,
            ..QcgConfig::default()
        })
        .build(&corpus())
        .await
        .unwrap();
    let hits = rag
        .retrieve("Vistula River", Selection::TopK(5))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
}

#[tokio::test]
async fn save_load_and_typed_errors() {
    let rag = build().await;
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let loaded = QcgRag::load(dir.path(), Arc::new(HashingEncoder::default())).unwrap();
    let q = "Who invented dynamite?";
    let a = rag.retrieve(q, Selection::TopK(3)).await.unwrap();
    let b = loaded.retrieve(q, Selection::TopK(3)).await.unwrap();
    assert_eq!(a, b);

    let other = lprag::text::HashingEncoder::new(lprag::text::HashingEncoderConfig {
        dim: 64,
        ..Default::default()
    })
    .unwrap();
    let err = QcgRag::load(dir.path(), Arc::new(other)).err().unwrap();
    assert!(err.to_string().contains("encoder"), "{err}");

    // Ids out of range are format errors naming what is wrong, not panics at retrieve.
    let file = dir.path().join("qcg.json");
    let pristine = std::fs::read(&file).unwrap();
    let corrupt = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&pristine).unwrap();
        edit(&mut v);
        std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
        QcgRag::load(dir.path(), Arc::new(HashingEncoder::default()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let err = corrupt(&|v| v["queries"][0]["chunk_ids"][0] = serde_json::json!(10_000));
    assert!(err.contains("out of range for"), "{err}");
    let err = corrupt(&|v| v["neighbors"][0] = serde_json::json!([99_999]));
    assert!(err.contains("neighbour 99999"), "{err}");
    let err = corrupt(&|v| v["config"]["keep_fraction"] = serde_json::json!(7.0));
    assert!(err.contains("keep_fraction"), "{err}");
    let err = corrupt(&|v| v["chunk_emb"]["dim"] = serde_json::json!(0));
    assert!(!err.is_empty(), "dim 0 loads");

    // A file of a newer format says so, even when its fields changed too.
    let mut v: serde_json::Value = serde_json::from_slice(&pristine).unwrap();
    v["version"] = serde_json::json!(99);
    v.as_object_mut().unwrap().remove("chunks");
    std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = QcgRag::load(dir.path(), Arc::new(HashingEncoder::default()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("format version 99"), "{err}");

    assert!(matches!(
        rag.retrieve("  ", Selection::TopK(3)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        rag.retrieve("x", Selection::TopK(0)).await,
        Err(Error::InvalidInput { .. })
    ));
    let err = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(QcgConfig {
            keep_fraction: 1.5,
            ..QcgConfig::default()
        })
        .build(&corpus())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("keep_fraction"), "{err}");
    let err = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&[])
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");
}
