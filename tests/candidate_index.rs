//! LP-RAG's candidate searches (the inverted file, the column scan, the proximity graph) and
//! profiled queries. The inverted file (`LpRagConfig::candidate_index`): exact when
//! every list is probed, kept through save/open and updates, refused when invalid.

use std::sync::Arc;

use lprag::graph::IvfParams;
use lprag::{
    AnswerOptions, Document, Encoder, Error, Filter, HashingEncoder, LpRag, LpRagConfig, Retriever,
    Selection, TrainConfig,
};

use crate::common;

const QUERIES: [&str; 4] = [
    "Which river flows through Warsaw?",
    "Who won the Nobel Prize in Physics?",
    "What is the tallest mountain?",
    "Where was the physicist born?",
];

fn hashing() -> Arc<dyn Encoder> {
    Arc::new(HashingEncoder::default())
}

fn config(index: Option<IvfParams>) -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs: 2,
            ..TrainConfig::default()
        },
        candidate_pool: Some(3),
        candidate_index: index,
        ..LpRagConfig::default()
    }
}

/// Every list probed: the same lists as few as 2 chunks each.
fn all_lists() -> IvfParams {
    IvfParams {
        lists: 4,
        probes: usize::MAX,
        ..IvfParams::default()
    }
}

async fn hits(rag: &LpRag, query: &str) -> Vec<(usize, f32)> {
    rag.retrieve(query, Selection::TopK(10))
        .await
        .unwrap()
        .iter()
        .map(|h| (h.chunk.id, h.score))
        .collect()
}

fn assert_same(a: &[(usize, f32)], b: &[(usize, f32)], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.0, y.0, "{what}: {a:?} vs {b:?}");
        assert!((x.1 - y.1).abs() <= 1e-5, "{what}: {a:?} vs {b:?}");
    }
}

#[tokio::test]
async fn every_list_probed_ranks_as_the_exact_scan_does_and_survives_save_and_open() {
    let docs = common::corpus();
    let mut rag = LpRag::builder()
        .encoder(hashing())
        .config(config(None))
        .build(&docs)
        .await
        .unwrap();
    let mut exact = Vec::new();
    for q in QUERIES {
        exact.push(hits(&rag, q).await);
    }
    rag.set_candidate_index(Some(all_lists())).unwrap();
    assert_eq!(rag.config().candidate_index, Some(all_lists()));
    for (q, want) in QUERIES.iter().zip(&exact) {
        assert_same(&hits(&rag, q).await, want, q);
    }
    // One probe of four lists: fewer chunks are looked at, the answers stay well-formed.
    rag.set_candidate_index(Some(IvfParams {
        probes: 1,
        ..all_lists()
    }))
    .unwrap();
    for q in QUERIES {
        let h = hits(&rag, q).await;
        assert!(!h.is_empty() && h.len() <= 10, "{q}: {h:?}");
        assert!(h.windows(2).all(|w| w[0].1 >= w[1].1), "{q}: {h:?}");
    }
    rag.set_candidate_index(Some(all_lists())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let reopened = LpRag::load(dir.path(), hashing()).unwrap();
    assert_eq!(reopened.config().candidate_index, Some(all_lists()));
    for (q, want) in QUERIES.iter().zip(&exact) {
        assert_same(&hits(&reopened, q).await, want, q);
    }
}

#[tokio::test]
async fn a_selective_filter_falls_back_to_the_exact_scan() {
    let docs: Vec<Document> = common::corpus()
        .into_iter()
        .map(|d| {
            let tag = if d.id == "everest" { "yes" } else { "no" };
            d.with_metadata("pick", tag)
        })
        .collect();
    let rag = LpRag::builder()
        .encoder(hashing())
        .config(config(Some(IvfParams {
            lists: 4,
            probes: 1,
            ..IvfParams::default()
        })))
        .build(&docs)
        .await
        .unwrap();
    let only = Filter::eq("pick", "yes");
    let wanted = docs.iter().find(|d| d.id == "everest").unwrap();
    let got = rag
        .retrieve_filtered(
            "Which river flows through Warsaw?",
            Selection::TopK(3),
            &only,
        )
        .await
        .unwrap();
    assert!(!got.is_empty(), "the admitted chunks were not found");
    for h in &got {
        assert_eq!(h.chunk.provenance.document_id, wanted.id);
    }
}

#[tokio::test]
async fn updates_rebuild_the_index_and_invalid_parameters_are_refused() {
    let docs = common::corpus();
    let mut rag = LpRag::builder()
        .encoder(hashing())
        .config(config(Some(all_lists())))
        .build(&docs[..docs.len() - 1])
        .await
        .unwrap();
    let last = docs.last().unwrap().clone();
    rag.add_documents(std::slice::from_ref(&last))
        .await
        .unwrap();
    // The added document's own text finds it: its chunks are in the rebuilt index.
    let top = rag.retrieve(&last.text, Selection::TopK(1)).await.unwrap();
    assert_eq!(top[0].chunk.provenance.document_id, last.id);

    let before = rag.config().candidate_index;
    for bad in [
        IvfParams {
            probes: 0,
            ..IvfParams::default()
        },
        IvfParams {
            iterations: 0,
            ..IvfParams::default()
        },
    ] {
        let e = rag.set_candidate_index(Some(bad)).unwrap_err().to_string();
        assert!(e.contains("IvfParams"), "{e}");
        assert_eq!(rag.config().candidate_index, before);
    }
    rag.set_candidate_index(None).unwrap();
    assert!(!rag
        .retrieve(&last.text, Selection::TopK(1))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn the_column_scan_finds_the_row_scans_chunks_through_save_open_and_updates() {
    let (docs, mut rag) = row_scan_index().await;
    assert!(!rag.scans_columns());
    let mut rows = Vec::new();
    for q in QUERIES {
        rows.push((hits(&rag, q).await, filtered(&rag, q).await));
    }
    // From 0 chunks on: every index reads columns; the answers are the row scan's, to the bit.
    rag.set_column_scan_from(Some(0)).unwrap();
    assert!(rag.scans_columns());
    for (q, want) in QUERIES.iter().zip(&rows) {
        assert_eq!(&(hits(&rag, q).await, filtered(&rag, q).await), want, "{q}");
    }
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let mut reopened = LpRag::load(dir.path(), hashing()).unwrap();
    assert_eq!(reopened.config().column_scan_from, Some(0));
    assert!(reopened.scans_columns());
    // (A reopened predictor's scores may differ in the last bits; the ranking may not.)
    for (q, want) in QUERIES.iter().zip(&rows) {
        assert_same(&hits(&reopened, q).await, &want.0, q);
    }
    // An update rebuilds the copy: the added document's own text finds it.
    let last = docs.last().unwrap().clone();
    reopened
        .add_documents(std::slice::from_ref(&last))
        .await
        .unwrap();
    assert!(reopened.scans_columns());
    let top = reopened
        .retrieve(&last.text, Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(top[0].chunk.provenance.document_id, last.id);
    // A threshold above the index's size: back to rows.
    reopened.set_column_scan_from(Some(1_000_000)).unwrap();
    assert!(!reopened.scans_columns());
}

#[tokio::test]
async fn a_saved_column_copy_is_read_back_on_the_heap_or_mapped_and_checked() {
    let (_, mut rag) = row_scan_index().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let columns = path.join("columns.bin");
    // No column scan, no copy saved.
    rag.save(&path).unwrap();
    assert!(!columns.exists());
    rag.set_column_scan_from(Some(0)).unwrap();
    let mut want = Vec::new();
    for q in QUERIES {
        want.push(hits(&rag, q).await);
    }
    // Saved beside the graph, into the directory of the earlier save.
    rag.save(&path).unwrap();
    assert!(columns.is_file());
    let check = |r: &LpRag, mapped: bool| {
        assert!(r.scans_columns());
        assert_eq!(r.columns_mapped(), mapped);
    };
    let whole = LpRag::load(&path, hashing()).unwrap();
    check(&whole, false);
    let options = AnswerOptions {
        encoder: Some(hashing()),
        ..AnswerOptions::default()
    };
    let light = LpRag::open_to_answer(&path, options.clone()).await.unwrap();
    check(&light, false);
    let map = AnswerOptions {
        map_rows: true,
        ..options.clone()
    };
    let mapped = LpRag::open_to_answer(&path, map.clone()).await.unwrap();
    check(&mapped, true);
    for (q, want) in QUERIES.iter().zip(&want) {
        for r in [&whole, &light, &mapped] {
            assert_same(&hits(r, q).await, want, q);
        }
    }

    // The file is read, not made again: a changed value fails its checksum, and a copy
    // bound to another graph file is refused; both name the file.
    let good = std::fs::read(&columns).unwrap();
    let refused = |err: Error, what: &str| {
        assert!(matches!(err, Error::Format { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("columns.bin") && text.contains(what),
            "{text}"
        );
    };
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&columns, &bad).unwrap();
    refused(LpRag::load(&path, hashing()).unwrap_err(), "checksum");
    refused(
        LpRag::open_to_answer(&path, map.clone()).await.unwrap_err(),
        "checksum",
    );
    let mut other = good.clone();
    other[40] ^= 1; // the binding to graph.bin's checksum
    std::fs::write(&columns, &other).unwrap();
    refused(LpRag::load(&path, hashing()).unwrap_err(), "other rows");
    let mut short = good.clone();
    short.truncate(good.len() - 2);
    std::fs::write(&columns, &short).unwrap();
    refused(LpRag::load(&path, hashing()).unwrap_err(), "truncated");

    // An index saved without the copy (or by an earlier release) makes it at opening.
    std::fs::remove_file(&columns).unwrap();
    let remade = LpRag::open_to_answer(&path, map).await.unwrap();
    check(&remade, false);
    for (q, want) in QUERIES.iter().zip(&want) {
        assert_same(&hits(&remade, q).await, want, q);
    }
}

/// The corpus with a `half` tag (even / odd), and a row-scan index of all but its last
/// document.
async fn row_scan_index() -> (Vec<Document>, LpRag) {
    let docs: Vec<Document> = common::corpus()
        .into_iter()
        .enumerate()
        .map(|(i, d)| d.with_metadata("half", if i % 2 == 0 { "even" } else { "odd" }))
        .collect();
    let rag = LpRag::builder()
        .encoder(hashing())
        .config(LpRagConfig {
            column_scan_from: None,
            ..config(None)
        })
        .build(&docs[..docs.len() - 1])
        .await
        .unwrap();
    (docs, rag)
}

async fn filtered(rag: &LpRag, query: &str) -> Vec<(usize, f32)> {
    rag.retrieve_filtered(query, Selection::TopK(10), &Filter::eq("half", "even"))
        .await
        .unwrap()
        .iter()
        .map(|h| (h.chunk.id, h.score))
        .collect()
}

/// A proximity graph over a small corpus (exact lists, a beam over every chunk) finds the
/// row scan's chunks; kept through save/open (read back, not linked again) and updates;
/// its beam changes in place; it and the inverted file exclude each other.
#[tokio::test]
async fn the_candidate_graph_finds_the_row_scans_chunks_through_save_open_and_updates() {
    use lprag::graph::GraphParams;
    let (docs, mut rag) = row_scan_index().await;
    let mut rows = Vec::new();
    for q in QUERIES {
        rows.push((hits(&rag, q).await, filtered(&rag, q).await));
    }
    let params = GraphParams {
        beam: 64,
        ..GraphParams::default()
    };
    rag.set_candidate_graph(Some(params)).unwrap();
    assert_eq!(rag.config().candidate_graph, Some(params));
    for (q, want) in QUERIES.iter().zip(&rows) {
        assert_eq!(&(hits(&rag, q).await, filtered(&rag, q).await), want, "{q}");
    }
    rag.set_candidate_graph_beam(100).unwrap();
    assert_eq!(rag.config().candidate_graph.unwrap().beam, 100);
    assert!(rag.set_candidate_graph_beam(0).is_err());
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    assert!(dir.path().join("candidate-graph.bin").is_file());
    let mut reopened = LpRag::load(dir.path(), hashing()).unwrap();
    assert_eq!(reopened.config().candidate_graph.unwrap().beam, 100);
    for (q, want) in QUERIES.iter().zip(&rows) {
        assert_same(&hits(&reopened, q).await, &want.0, q);
    }
    // A damaged links file is a typed error naming it, not a panic.
    let other = tempfile::tempdir().unwrap();
    rag.save(other.path()).unwrap();
    std::fs::write(other.path().join("candidate-graph.bin"), b"not a graph").unwrap();
    let err = LpRag::load(other.path(), hashing())
        .unwrap_err()
        .to_string();
    assert!(err.contains("candidate-graph.bin"), "{err}");
    // An update links the chunks again: the added document's own text finds it.
    let last = docs.last().unwrap().clone();
    reopened
        .add_documents(std::slice::from_ref(&last))
        .await
        .unwrap();
    let top = reopened
        .retrieve(&last.text, Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(top[0].chunk.provenance.document_id, last.id);
    // The inverted file replaces the graph, and both at once are refused.
    reopened.set_candidate_index(Some(all_lists())).unwrap();
    assert_eq!(reopened.config().candidate_graph, None);
    let both = LpRagConfig {
        candidate_graph: Some(GraphParams::default()),
        ..config(Some(all_lists()))
    };
    let err = LpRag::builder()
        .encoder(hashing())
        .config(both)
        .build(&docs)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("candidate_graph"), "{err}");
}

/// `retrieve_profiled` answers as `retrieve` does and says where the time went.
#[tokio::test]
async fn a_profiled_query_answers_as_retrieve_and_times_its_stages() {
    let docs = common::corpus();
    let rag = LpRag::builder()
        .encoder(hashing())
        .config(config(None))
        .build(&docs)
        .await
        .unwrap();
    for q in QUERIES {
        let (got, profile) = rag.retrieve_profiled(q, Selection::TopK(10)).await.unwrap();
        let got: Vec<(usize, f32)> = got.iter().map(|h| (h.chunk.id, h.score)).collect();
        assert_eq!(got, hits(&rag, q).await, "{q}");
        assert!(profile.candidates_scored >= 3, "{profile:?}");
        let parts = profile.embed + profile.candidates + profile.predictor + profile.rank;
        assert!(parts <= profile.total, "{profile:?}");
        assert!(!profile.predictor.is_zero(), "{profile:?}");
        assert!(profile.to_string().contains("predictor"), "{profile}");
    }
    assert!(rag
        .retrieve_profiled("  ", Selection::TopK(1))
        .await
        .is_err());
}
