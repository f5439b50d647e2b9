//! LP-RAG over a real embedded Lance table (no mock): the index written with
//! `LpRag::write_store`, a query's nearest chunks found by LanceDB (its exact scan, then
//! its vector index), filters pushed into LanceDB as SQL, and a second handle — what a
//! process that only answers opens — ranking as the writer does.

use std::sync::Arc;

use lprag::{Filter, HashingEncoder, LpRag, NoProgress};
use lprag_core::{ChunkStore, Retriever};
use lprag_lance::{LanceStore, SearchParams, StoreSpec, VectorIndex, DEFAULT_TABLE};

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;
#[path = "../../../tests/common/store_cases.rs"]
mod store_cases;

use store_cases::{answers, labelled};

async fn index() -> LpRag {
    store_cases::index(&labelled(mini_corpus::documents())).await
}

fn assert_close(got: &[Vec<(usize, f32)>], want: &[Vec<(usize, f32)>], what: &str) {
    assert_within(got, want, what, 1e-6);
}

/// The same chunks in the same order, scores within `tol`.
fn assert_within(got: &[Vec<(usize, f32)>], want: &[Vec<(usize, f32)>], what: &str, tol: f32) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let ids = |v: &[(usize, f32)]| v.iter().map(|h| h.0).collect::<Vec<_>>();
        assert_eq!(ids(g), ids(w), "{what}: {g:?} vs {w:?}");
        for (a, b) in g.iter().zip(w) {
            assert!((a.1 - b.1).abs() <= tol, "{what}: {g:?} vs {w:?}");
        }
    }
}

#[tokio::test]
async fn lprag_over_a_lance_table_ranks_as_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("db").to_string_lossy().into_owned();
    let mut rag = index().await;
    let n = rag.chunks().len();
    let half = Filter::eq("half", "b");
    let in_memory = answers(&rag, &half).await;

    let store = Arc::new(
        LanceStore::create(&uri, StoreSpec::new(rag.graph().features.dim()))
            .await
            .unwrap(),
    );
    let wrote = rag.write_store(&*store, &NoProgress).await.unwrap();
    assert_eq!(wrote.written, n);
    // A second write finds every chunk there and appends nothing (no new version).
    let version = store.version();
    let again = rag.write_store(&*store, &NoProgress).await.unwrap();
    assert_eq!((again.resumed_from, again.written), (n, 0));
    assert_eq!(store.version(), version);

    // The writer's handle: LanceDB's exact scan finds what memory does.
    rag.attach_store(store.clone()).await.unwrap();
    assert_close(&answers(&rag, &half).await, &in_memory, "exact scan");

    // A reader's handle, as a process that only answers opens the table.
    let reader = Arc::new(LanceStore::open(&uri, DEFAULT_TABLE).await.unwrap());
    let mut served = rag.clone();
    served.attach_store(reader.clone()).await.unwrap();
    assert_close(&answers(&served, &half).await, &in_memory, "reader");

    // With a vector index probing every partition and re-ranking on the full vectors,
    // the answers stay the in-memory ones on this small table.
    store.build_index(VectorIndex::default()).await.unwrap();
    reader.refresh().await.unwrap();
    reader.set_search(SearchParams {
        nprobes: Some(64),
        ef: Some(64),
        refine_factor: Some(10),
    });
    assert_close(&answers(&served, &half).await, &in_memory, "vector index");

    // A table of another corpus is refused.
    let other_uri = dir.path().join("other").to_string_lossy().into_owned();
    let other = LanceStore::create(&other_uri, StoreSpec::new(rag.graph().features.dim()))
        .await
        .unwrap();
    let small = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&labelled(mini_corpus::documents())[5..])
        .await
        .unwrap();
    small.write_store(&other, &NoProgress).await.unwrap();
    let err = rag.write_store(&other, &NoProgress).await.unwrap_err();
    assert!(err.to_string().contains("differs"), "{err}");
}

/// A process that holds no chunk row (`AnswerOptions::rows_from_store`) reads each query's
/// rows from a real Lance table — vectors and the model's representations, written by
/// `write_store` — and ranks as the in-memory index does, filters included; holding no
/// record either (`AnswerOptions::records_from_store`), it returns the table's records.
#[tokio::test]
async fn an_index_reading_its_rows_from_a_lance_table_ranks_as_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("db").to_string_lossy().into_owned();
    let rag = index().await;
    let half = Filter::eq("half", "b");
    let in_memory = answers(&rag, &half).await;
    let saved = dir.path().join("index");
    rag.save(&saved).unwrap();

    let rd = rag.predictor().stored_representation_dim().unwrap();
    let spec = StoreSpec::new(rag.graph().features.dim()).with_representations(rd);
    let store = LanceStore::create(&uri, spec).await.unwrap();
    rag.write_store(&store, &NoProgress).await.unwrap();
    // Another process opens the table and the saved index, holding no row.
    let reader = Arc::new(LanceStore::open(&uri, DEFAULT_TABLE).await.unwrap());
    let options = lprag::AnswerOptions {
        encoder: Some(Arc::new(HashingEncoder::default())),
        store: Some(reader),
        rows_from_store: true,
        ..Default::default()
    };
    let served = LpRag::open_to_answer(&saved, options.clone())
        .await
        .unwrap();
    assert_eq!(served.graph().num_nodes(), 0);
    // The rows are normalised on reading: the last bits of a score may differ.
    assert_within(
        &answers(&served, &half).await,
        &in_memory,
        "rows from Lance",
        1e-5,
    );
    let bare = LpRag::open_to_answer(
        &saved,
        lprag::AnswerOptions {
            records_from_store: true,
            ..options
        },
    )
    .await
    .unwrap();
    assert!(bare.chunks().is_empty());
    assert_within(
        &answers(&bare, &half).await,
        &in_memory,
        "rows and records from Lance",
        1e-5,
    );
    let hits = bare
        .retrieve_filtered("Krakow", lprag::Selection::TopK(3), &half)
        .await
        .unwrap();
    assert!(!hits.is_empty());
    for h in &hits {
        assert_eq!(h.chunk, rag.chunks()[h.chunk.id]);
    }
}
