//! `LpRag::open_to_answer`: a saved index opened without its synthetic questions, their
//! rows and the k-NN lists answers as the whole index does — in memory and with its
//! candidates from a store — and refuses updates, retraining and saving.

use std::sync::Arc;

use lprag::core::EdgeKind;
use lprag::{
    AnswerOptions, Document, Encoder, Error, Filter, HashingEncoder, LpRag, MemoryStore, NoProgress,
};

use crate::common::store_cases::{answers, index, labelled};
use crate::mini_corpus;

fn refused(err: Error) {
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert!(err.to_string().contains("answer only"), "{err}");
}

#[tokio::test]
async fn an_index_opened_to_answer_answers_as_the_whole_index_and_refuses_changes() {
    let docs = labelled(mini_corpus::documents());
    let built = index(&docs).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    built.save(&path).unwrap();
    let filter = Filter::eq("half", "a");
    let want = answers(&built, &filter).await;
    let encoder: Arc<dyn Encoder> = Arc::new(HashingEncoder::default());

    // The whole index reopened (its predictor now serves on the index's own chunk rows).
    let whole = LpRag::load(&path, encoder.clone()).unwrap();
    assert!(!whole.answers_only());
    assert_eq!(answers(&whole, &filter).await, want);

    let options = AnswerOptions {
        encoder: Some(encoder.clone()),
        ..AnswerOptions::default()
    };
    let mut light = LpRag::open_to_answer(&path, options.clone()).await.unwrap();
    assert!(light.answers_only());
    assert_eq!(answers(&light, &filter).await, want);
    // Only the chunk nodes were read.
    let n = built.chunks().len();
    assert!(built.graph().num_nodes() > n && !built.synthetic_queries().is_empty());
    assert_eq!(light.graph().num_nodes(), n);
    assert_eq!(
        light.graph().features,
        built.graph().features.leading_rows(n)
    );
    assert!(light
        .graph()
        .edges
        .iter()
        .all(|e| e.kind != EdgeKind::QueryChunk && (e.a as usize) < n && (e.b as usize) < n));
    assert!(light.synthetic_queries().is_empty());
    assert!(light.chunks_without_queries().is_empty());
    assert_eq!(light.chunks(), built.chunks());

    // With a store: the candidates come from it, the answers stay.
    let store = Arc::new(MemoryStore::new(built.graph().features.dim(), None).unwrap());
    built.write_store(&*store, &NoProgress).await.unwrap();
    let stored = LpRag::open_to_answer(
        &path,
        AnswerOptions {
            store: Some(store.clone()),
            ..options.clone()
        },
    )
    .await
    .unwrap();
    assert!(stored.store().is_some());
    assert_eq!(answers(&stored, &filter).await, want);
    // An empty store is refused as attach_store refuses it.
    let empty = Arc::new(MemoryStore::new(built.graph().features.dim(), None).unwrap());
    let err = LpRag::open_to_answer(
        &path,
        AnswerOptions {
            store: Some(empty),
            ..options.clone()
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("write_store"), "{err}");

    // What needs the questions is refused, and nothing is written or changed.
    let new_doc = Document::new(
        "new",
        "Krakow",
        "Krakow lies on the Vistula river in Poland.",
    );
    refused(
        light
            .add_documents(std::slice::from_ref(&new_doc))
            .await
            .unwrap_err(),
    );
    refused(light.update_documents(&[new_doc]).await.unwrap_err());
    let first = built.chunks()[0].provenance.document_id.clone();
    refused(light.remove_documents(&[first]).await.unwrap_err());
    refused(light.retrain().await.unwrap_err());
    let copy = dir.path().join("copy");
    refused(light.save(&copy).unwrap_err());
    assert!(!copy.exists());
    assert_eq!(answers(&light, &filter).await, want);

    // An index with a custom encoder needs it given.
    let err = LpRag::open_to_answer(&path, AnswerOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert!(err.to_string().contains("custom encoder"), "{err}");
}
