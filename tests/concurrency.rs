//! Concurrent use: 64 simultaneous `retrieve` calls on one `Arc` of each retriever return
//! exactly what the same queries return one at a time, and saving an index while it
//! answers queries corrupts neither.

use std::sync::Arc;

use lprag::{HashingEncoder, LpRag, Retriever, ScoredChunk, Selection};

use crate::common;

const QUERIES: [&str; 8] = [
    "Which river flows through Warsaw?",
    "Where was Marie Curie born?",
    "Who invented dynamite?",
    "capital of Japan",
    "imperial capital for a thousand years",
    "highest mountain above sea level",
    "Nobel Prize in Physics 1903",
    "Stockholm",
];

fn ids(hits: &[ScoredChunk]) -> Vec<(usize, u32)> {
    hits.iter()
        .map(|h| (h.chunk.id, h.score.to_bits()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_queries_match_the_sequential_answers() {
    let rs = common::retrievers_with(|| Arc::new(HashingEncoder::default()))
        .await
        .unwrap();
    for r in rs {
        let mut expected = Vec::new();
        for q in QUERIES {
            expected.push(ids(&r.retrieve(q, Selection::TopK(4)).await.unwrap()));
        }
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let r = r.clone();
                tokio::spawn(async move {
                    let q = QUERIES[i % QUERIES.len()];
                    (i, ids(&r.retrieve(q, Selection::TopK(4)).await.unwrap()))
                })
            })
            .collect();
        for t in tasks {
            let (i, got) = t.await.unwrap();
            assert_eq!(
                got,
                expected[i % QUERIES.len()],
                "{}: call {i} differs from the sequential answer",
                r.name()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn saving_while_answering_corrupts_nothing() {
    let rag = Arc::new(
        LpRag::builder()
            .encoder(Arc::new(HashingEncoder::default()))
            .build(&common::corpus())
            .await
            .unwrap(),
    );
    let expected = ids(&rag.retrieve(QUERIES[0], Selection::TopK(4)).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let queries: Vec<_> = (0..32)
        .map(|_| {
            let rag = rag.clone();
            tokio::spawn(async move {
                ids(&rag.retrieve(QUERIES[0], Selection::TopK(4)).await.unwrap())
            })
        })
        .collect();
    let saver = {
        let (rag, path) = (rag.clone(), path.clone());
        tokio::task::spawn_blocking(move || {
            for _ in 0..3 {
                rag.save(&path).unwrap();
            }
        })
    };
    for q in queries {
        assert_eq!(q.await.unwrap(), expected);
    }
    saver.await.unwrap();
    // The reopened index ranks the same (its cached chunk representations are recomputed
    // on load, so scores may differ in the last bits).
    let reopened = LpRag::load(&path, Arc::new(HashingEncoder::default())).unwrap();
    let again = reopened
        .retrieve(QUERIES[0], Selection::TopK(4))
        .await
        .unwrap();
    let before = rag.retrieve(QUERIES[0], Selection::TopK(4)).await.unwrap();
    assert_eq!(
        again.iter().map(|h| h.chunk.id).collect::<Vec<_>>(),
        before.iter().map(|h| h.chunk.id).collect::<Vec<_>>()
    );
    for (a, b) in again.iter().zip(&before) {
        assert!(
            (a.score - b.score).abs() < 1e-5,
            "{} vs {}",
            a.score,
            b.score
        );
    }
}
