//! `LpRag::open_to_answer`: a saved index opened without its synthetic questions, their
//! rows and the k-NN lists answers as the whole index does — in memory and with its
//! candidates from a store — and refuses updates, retraining and saving.

use std::sync::Arc;

use lprag::core::{ChunkStore, EdgeKind, Retriever};
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
    assert!(!light.graph().features.is_stored());

    // The chunk rows mapped from the graph file instead: the same rows, the same answers.
    let mapped = LpRag::open_to_answer(
        &path,
        AnswerOptions {
            map_rows: true,
            ..options.clone()
        },
    )
    .await
    .unwrap();
    assert!(mapped.graph().features.is_stored());
    assert_eq!(mapped.graph().features, light.graph().features);
    assert_eq!(mapped.graph().edges, light.graph().edges);
    assert_eq!(answers(&mapped, &filter).await, want);

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
    let err = refused_with(&path, &options, Some(empty)).await;
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

/// Options opening with `store`, the rows and the records read from it or not.
fn from_store(
    encoder: &Arc<dyn Encoder>,
    store: &Arc<MemoryStore>,
    rows_from_store: bool,
    records_from_store: bool,
) -> AnswerOptions {
    AnswerOptions {
        encoder: Some(encoder.clone()),
        store: Some(store.clone()),
        rows_from_store,
        records_from_store,
        ..AnswerOptions::default()
    }
}

/// The error of opening `path` with `options` but `store`.
async fn refused_with(
    path: &std::path::Path,
    options: &AnswerOptions,
    store: Option<Arc<MemoryStore>>,
) -> Error {
    let options = AnswerOptions {
        store: store.map(|s| s as Arc<dyn ChunkStore>),
        ..options.clone()
    };
    LpRag::open_to_answer(path, options).await.unwrap_err()
}

/// Two answer lists name the same chunks in the same order with scores within `tol`.
fn same_answers(a: &[Vec<(usize, f32)>], b: &[Vec<(usize, f32)>], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        let ids = |v: &[(usize, f32)]| v.iter().map(|h| h.0).collect::<Vec<_>>();
        assert_eq!(ids(x), ids(y), "{x:?} vs {y:?}");
        for (p, q) in x.iter().zip(y) {
            assert!((p.1 - q.1).abs() <= tol, "{x:?} vs {y:?}");
        }
    }
}

/// A saved index and a store that keeps the predictor's representations, written from it.
struct Saved {
    docs: Vec<Document>,
    built: LpRag,
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    filter: Filter,
    /// The built index's answers ([`answers`] under `filter`).
    want: Vec<Vec<(usize, f32)>>,
    encoder: Arc<dyn Encoder>,
    dim: usize,
    rd: usize,
    store: Arc<MemoryStore>,
}

async fn saved_with_store() -> Saved {
    let docs = labelled(mini_corpus::documents());
    let built = index(&docs).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    built.save(&path).unwrap();
    let filter = Filter::eq("half", "a");
    let want = answers(&built, &filter).await;
    let dim = built.graph().features.dim();
    let rd = built.predictor().stored_representation_dim().unwrap();
    let store = Arc::new(MemoryStore::new(dim, Some(rd)).unwrap());
    built.write_store(&*store, &NoProgress).await.unwrap();
    Saved {
        docs,
        built,
        _dir: dir,
        path,
        filter,
        want,
        encoder: Arc::new(HashingEncoder::default()),
        dim,
        rd,
        store,
    }
}

#[tokio::test]
async fn an_index_reading_its_rows_from_the_store_answers_as_the_whole_index() {
    let Saved {
        docs,
        built,
        _dir,
        path,
        filter,
        want,
        encoder,
        dim,
        rd,
        store,
    } = saved_with_store().await;
    // A store that keeps the predictor's representations gets them from write_store.
    let n = built.chunks().len();
    let reps = store.representations(&[0, n - 1]).await.unwrap().unwrap();
    let own = built.predictor().stored_representations(0..n).unwrap();
    assert_eq!(reps.row(1), own.row(n - 1));
    let options = from_store(&encoder, &store, true, false);
    let mut rows = LpRag::open_to_answer(&path, options.clone()).await.unwrap();
    assert!(rows.answers_only());
    // No row is held: the graph is empty, the rows are the store's.
    assert_eq!(rows.graph().num_nodes(), 0);
    assert_eq!(rows.chunks(), built.chunks());
    same_answers(&answers(&rows, &filter).await, &want, 1e-5);
    // Its predictor scores only through the index's query path.
    let q = vec![0.1; dim];
    let err = rows.predictor().score(&q, &[0]).unwrap_err();
    assert!(err.to_string().contains("store"), "{err}");
    // What would need rows in memory is refused, naming the option.
    for err in [
        rows.detach_store().unwrap_err(),
        rows.set_column_scan_from(Some(1)).unwrap_err(),
        rows.write_store(&*store, &NoProgress).await.unwrap_err(),
    ] {
        assert!(err.to_string().contains("rows_from_store"), "{err}");
    }
    rows.set_candidates(None, true);
    let err = rows
        .retrieve("anything", lprag::Selection::TopK(2))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("candidate pool"), "{err}");

    // Without a store, with a store without representations, or with representations of
    // another training: refused, saying why.
    let err = refused_with(&path, &options, None).await;
    assert!(err.to_string().contains("give a store"), "{err}");
    let plain = Arc::new(MemoryStore::new(dim, None).unwrap());
    built.write_store(&*plain, &NoProgress).await.unwrap();
    let err = refused_with(&path, &options, Some(plain)).await;
    assert!(
        err.to_string().contains("keeps no representations"),
        "{err}"
    );
    let mut other_config = built.config().clone();
    other_config.train.seed += 1;
    let other = LpRag::builder()
        .encoder(encoder.clone())
        .config(other_config)
        .build(&docs)
        .await
        .unwrap();
    let foreign = Arc::new(MemoryStore::new(dim, Some(rd)).unwrap());
    other.write_store(&*foreign, &NoProgress).await.unwrap();
    let err = refused_with(&path, &options, Some(foreign)).await;
    assert!(err.to_string().contains("another training"), "{err}");
    // A store of another representation width is refused by write_store.
    let narrow = MemoryStore::new(dim, Some(rd + 1)).unwrap();
    let err = built.write_store(&narrow, &NoProgress).await.unwrap_err();
    assert!(matches!(err, Error::DimensionMismatch { .. }), "{err}");
}

#[tokio::test]
async fn an_index_reading_its_records_from_the_store_answers_as_the_whole_index() {
    use lprag::core::ChunkBatch;
    let Saved {
        built,
        _dir,
        path,
        filter,
        want,
        encoder,
        dim,
        store,
        ..
    } = saved_with_store().await;
    let n = built.chunks().len();
    let options = from_store(&encoder, &store, false, true);

    // Rows held, records read: the same answers, whole records as the index's.
    let mut records = LpRag::open_to_answer(&path, options.clone()).await.unwrap();
    assert!(records.chunks().is_empty());
    assert_eq!(records.num_chunks(), n);
    assert_eq!(Retriever::num_chunks(&records), n);
    assert_eq!(answers(&records, &filter).await, want);
    let hits = records
        .retrieve(
            "Which river flows through Krakow?",
            lprag::Selection::TopK(5),
        )
        .await
        .unwrap();
    assert!(!hits.is_empty());
    for h in &hits {
        assert_eq!(h.chunk, built.chunks()[h.chunk.id]);
    }
    // Neither rows nor records held: the same answers.
    let neither = LpRag::open_to_answer(
        &path,
        AnswerOptions {
            rows_from_store: true,
            ..options.clone()
        },
    )
    .await
    .unwrap();
    assert!(neither.chunks().is_empty() && neither.graph().num_nodes() == 0);
    same_answers(&answers(&neither, &filter).await, &want, 1e-5);

    // What needs the records here is refused, naming the option.
    for err in [
        records.write_store(&*store, &NoProgress).await.unwrap_err(),
        records.detach_store().unwrap_err(),
    ] {
        assert!(err.to_string().contains("records_from_store"), "{err}");
    }
    records.set_candidates(None, true);
    let err = records
        .retrieve_filtered("Krakow", lprag::Selection::TopK(2), &filter)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("candidate pool"), "{err}");
    // Unfiltered, every chunk is scored and only the returned records are read.
    let all = records
        .retrieve("Krakow", lprag::Selection::TopK(2))
        .await
        .unwrap();
    assert_eq!(all.len(), 2);

    // Without a store: refused.
    let err = refused_with(&path, &options, None).await;
    assert!(err.to_string().contains("give a store"), "{err}");
    // A store whose records are not this index's (one text changed): refused.
    let mut chunks = built.chunks().to_vec();
    chunks[n - 1].text.push_str(" (edited)");
    let other = Arc::new(MemoryStore::new(dim, None).unwrap());
    other
        .append(ChunkBatch::new(
            chunks,
            built.graph().features.leading_rows(n),
        ))
        .await
        .unwrap();
    let err = refused_with(&path, &options, Some(other)).await;
    assert!(err.to_string().contains("differs"), "{err}");
    // chunks.json with a record missing is refused as a format error naming the file.
    let file = path.join("chunks.json");
    let mut saved: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    saved.pop();
    std::fs::write(&file, serde_json::to_vec(&saved).unwrap()).unwrap();
    let err = LpRag::open_to_answer(&path, options).await.unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("chunks.json"), "{err}");
}

/// The built-in predictor's cached chunk representations are saved with the index and read
/// back instead of computed — on the heap by `load` and `open_to_answer`, mapped with
/// `map_rows` — giving the same answers; rows that are damaged or bound to another graph
/// or other weights are refused naming the file; an index without them computes them.
#[tokio::test]
async fn saved_representations_are_read_back_on_the_heap_or_mapped_and_checked() {
    let docs = labelled(mini_corpus::documents());
    let built = index(&docs).await;
    assert!(!built.representations_mapped());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    built.save(&path).unwrap();
    let (reps, binding) = (
        path.join("representations.bin"),
        path.join("representations.json"),
    );
    assert!(reps.is_file() && binding.is_file());
    // Saving over the index again is allowed (the index owns the files).
    built.save(&path).unwrap();
    let filter = Filter::eq("half", "a");
    let want = answers(&built, &filter).await;
    let n = built.chunks().len();
    let own = built.predictor().stored_representations(0..n).unwrap();
    let encoder: Arc<dyn Encoder> = Arc::new(HashingEncoder::default());
    let options = AnswerOptions {
        encoder: Some(encoder.clone()),
        ..AnswerOptions::default()
    };
    let map = AnswerOptions {
        map_rows: true,
        ..options.clone()
    };
    let whole = LpRag::load(&path, encoder.clone()).unwrap();
    let light = LpRag::open_to_answer(&path, options.clone()).await.unwrap();
    let mapped = LpRag::open_to_answer(&path, map.clone()).await.unwrap();
    for (rag, is_mapped) in [(&whole, false), (&light, false), (&mapped, true)] {
        assert_eq!(rag.representations_mapped(), is_mapped);
        assert_eq!(answers(rag, &filter).await, want);
        let rows = rag.predictor().stored_representations(0..n).unwrap();
        assert_eq!(rows.as_slice(), own.as_slice());
    }
    drop((whole, light, mapped));

    // The rows are read, not computed again: a changed value fails the file's checksum,
    // and a binding to another graph file or other weights is refused; each names the file.
    let refused = |err: Error, what: &str| {
        assert!(matches!(err, Error::Format { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("representations.") && text.contains(what),
            "{text}"
        );
    };
    let good = std::fs::read(&reps).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&reps, &bad).unwrap();
    refused(LpRag::load(&path, encoder.clone()).unwrap_err(), "checksum");
    refused(
        LpRag::open_to_answer(&path, map.clone()).await.unwrap_err(),
        "checksum",
    );
    std::fs::write(&reps, &good).unwrap();
    let good_binding = std::fs::read_to_string(&binding).unwrap();
    let value: serde_json::Value = serde_json::from_str(&good_binding).unwrap();
    for (field, what) in [
        ("graph", "another graph.bin"),
        ("weights", "other predictor weights"),
        ("file", "not the file"),
        ("rows", "rows recorded"),
    ] {
        let mut changed = value.clone();
        let old = changed[field].as_u64().unwrap();
        changed[field] = serde_json::json!(old ^ 1);
        std::fs::write(&binding, changed.to_string()).unwrap();
        refused(LpRag::load(&path, encoder.clone()).unwrap_err(), what);
        refused(
            LpRag::open_to_answer(&path, map.clone()).await.unwrap_err(),
            what,
        );
    }
    std::fs::remove_file(&binding).unwrap();
    refused(LpRag::load(&path, encoder.clone()).unwrap_err(), "binding");
    std::fs::write(&binding, &good_binding).unwrap();
    std::fs::remove_file(&reps).unwrap();
    refused(LpRag::load(&path, encoder.clone()).unwrap_err(), "missing");

    // An index saved without them (an earlier release) computes them at opening.
    std::fs::remove_file(&binding).unwrap();
    let computed = LpRag::open_to_answer(&path, map).await.unwrap();
    assert!(!computed.representations_mapped());
    assert_eq!(answers(&computed, &filter).await, want);
}
