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

/// Chunks (id, document, text), questions (text, chunk ids) and k-NN lists.
type Snapshot = (
    Vec<(usize, String, String)>,
    Vec<(String, Vec<usize>)>,
    Vec<Vec<u32>>,
);

/// Everything an index holds that retrieval reads, for comparing two indexes.
fn snapshot(rag: &QcgRag) -> Snapshot {
    (
        rag.chunks()
            .iter()
            .map(|c| (c.id, c.provenance.document_id.clone(), c.text.clone()))
            .collect(),
        rag.queries()
            .iter()
            .map(|q| (q.text.clone(), q.chunk_ids.clone()))
            .collect(),
        rag.neighbors().to_vec(),
    )
}

async fn build_on(docs: &[Document]) -> QcgRag {
    QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(docs)
        .await
        .unwrap()
}

const QUESTIONS: [&str; 3] = [
    "Which city hosted the Summer Olympics in 1964?",
    "Who invented dynamite?",
    "Which river flows through the capital of Poland?",
];

#[tokio::test]
async fn documents_added_later_give_the_index_a_full_build_gives() {
    let docs = corpus();
    let full = build_on(&docs).await;
    let mut rag = build_on(&docs[..2]).await;
    let report = rag.add_documents(&docs[2..]).await.unwrap();
    assert_eq!((report.added_documents, report.added_chunks), (3, 3));
    assert_eq!(report.chunks, 5);
    assert_eq!(snapshot(&rag), snapshot(&full));
    assert_eq!(
        rag.stats().queries_generated,
        full.stats().queries_generated
    );
    for q in QUESTIONS {
        let (a, b) = (
            rag.retrieve(q, Selection::TopK(3)).await.unwrap(),
            full.retrieve(q, Selection::TopK(3)).await.unwrap(),
        );
        let ids =
            |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b), "{q}");
    }
}

#[tokio::test]
async fn removing_and_replacing_documents_and_saving_the_result() {
    let docs = corpus();
    let mut rag = build_on(&docs).await;
    let report = rag
        .remove_documents(&["nobel".to_string(), "everest".to_string()])
        .await
        .unwrap();
    assert_eq!((report.removed_documents, report.removed_chunks), (2, 2));
    assert!(report.removed_queries > 0);
    let kept: Vec<Document> = docs
        .iter()
        .filter(|d| d.id != "nobel" && d.id != "everest")
        .cloned()
        .collect();
    // The removed documents were not the last ones: the kept chunks are renumbered and
    // keep their questions, so the lists are compared by content.
    let rebuilt = build_on(&kept).await;
    assert_eq!(rag.chunks().len(), 3);
    assert_eq!(rag.queries().len(), rag.neighbors().len());
    let texts = |r: &QcgRag| {
        let mut t: Vec<String> = r.queries().iter().map(|q| q.text.clone()).collect();
        t.sort();
        t
    };
    assert_eq!(rag.document_ids(), rebuilt.document_ids());
    assert!(rag
        .queries()
        .iter()
        .all(|q| q.chunk_ids.iter().all(|&c| c < 3)));
    assert!(rag
        .neighbors()
        .iter()
        .all(|l| l.iter().all(|&j| (j as usize) < rag.queries().len())));
    assert_eq!(texts(&rag).len(), texts(&rebuilt).len());

    // Appending the last document back after a removal at the end is exact again.
    let mut tail = build_on(&docs).await;
    tail.remove_documents(&["everest".to_string()])
        .await
        .unwrap();
    assert_eq!(snapshot(&tail), snapshot(&build_on(&docs[..4]).await));
    tail.add_documents(&docs[4..]).await.unwrap();
    assert_eq!(snapshot(&tail), snapshot(&build_on(&docs).await));

    // A replacement: new text under an old id.
    let mut changed = docs[1].clone();
    changed.text = "Warsaw is the capital of Poland. Its old town was rebuilt after 1945.".into();
    let report = rag.update_documents(&[changed]).await.unwrap();
    assert_eq!((report.removed_documents, report.added_documents), (1, 1));
    assert!(rag
        .chunks()
        .iter()
        .any(|c| c.text.contains("rebuilt after 1945")));

    // Typed errors, nothing changed.
    let before = snapshot(&rag);
    let e = rag.add_documents(&docs[..1]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    let e = rag.remove_documents(&["nope".into()]).await.unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    let all: Vec<String> = rag.document_ids().iter().map(|s| s.to_string()).collect();
    let e = rag.remove_documents(&all).await.unwrap_err();
    assert!(e.to_string().contains("cannot be empty"), "{e}");
    assert_eq!(snapshot(&rag), before);

    // The updated index saves and reopens as it is.
    let dir = std::env::temp_dir().join(format!("lprag-qcg-update-{}", std::process::id()));
    rag.save(&dir).unwrap();
    let back = QcgRag::load(&dir, Arc::new(HashingEncoder::default())).unwrap();
    assert_eq!(snapshot(&back), snapshot(&rag));
    std::fs::remove_dir_all(&dir).unwrap();
}
