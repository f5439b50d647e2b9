//! LeSeGR (CG-RAG) end to end with the offline components.

use std::sync::Arc;

use lprag::lesegr::LesegrStats;
use lprag::{
    Document, Error, HashingEncoder, LesegrConfig, LesegrRag, LesegrRagBuilder, Retriever,
    Selection, SentenceChunker,
};

use crate::mini_corpus;

fn encoder() -> Arc<HashingEncoder> {
    Arc::new(HashingEncoder::default())
}

/// A builder with the hashing encoder and `config`.
fn builder(config: LesegrConfig) -> LesegrRagBuilder {
    LesegrRag::builder().encoder(encoder()).config(config)
}

fn quick_train() -> LesegrConfig {
    let mut c = LesegrConfig::default();
    c.train.epochs = 5;
    c
}

#[tokio::test]
async fn lite_builds_the_contextual_graph_and_retrieves() {
    let docs = mini_corpus::documents();
    let rag = builder(LesegrConfig::lite())
        .chunker(Arc::new(SentenceChunker::default()))
        .build(&docs)
        .await
        .unwrap();
    let s: LesegrStats = rag.stats().clone();
    assert!(
        s.chunks > docs.len(),
        "sentences: more chunks than documents"
    );
    // Adjacency: one edge per consecutive pair within a document.
    assert_eq!(s.intra_edges, s.chunks - docs.len());
    assert_eq!(s.document_links, docs.len() * 5);
    assert!(s.inter_edges > 0);
    assert_eq!(s.training_queries, 0);
    assert_eq!(rag.alpha().len(), rag.graph().num_edges());
    assert!(rag.alpha().iter().all(|a| (0.0..=1.0).contains(a)));
    assert_eq!(rag.name(), "lesegr-lite");

    let hits = rag
        .retrieve("Which river flows through Warsaw?", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(
        hits.iter()
            .any(|h| h.chunk.provenance.document_id == "warsaw"),
        "{hits:?}"
    );

    // δ > 1 exactly where BM25 finds the query's terms.
    let ex = rag.explain("Vistula").await.unwrap();
    assert!(ex
        .chunks
        .iter()
        .zip(&ex.delta)
        .all(|(&(c, _), &d)| (d > 1.0) == rag.chunks()[c].embedding_text().contains("Vistula")));
    assert!(ex.delta.iter().all(|&d| (1.0..=2.0).contains(&d)));
}

#[tokio::test]
async fn candidate_subgraph_scores_equal_whole_graph_scores() {
    let docs = mini_corpus::documents();
    let build = |candidates| {
        let docs = docs.clone();
        async move {
            builder(LesegrConfig {
                candidates,
                ..LesegrConfig::lite()
            })
            .chunker(Arc::new(SentenceChunker::default()))
            .build(&docs)
            .await
            .unwrap()
        }
    };
    let (small, whole) = (build(3).await, build(0).await);
    let q = "Where was the Nobel Prize award ceremony held?";
    let part = small.explain(q).await.unwrap();
    let all = whole.explain(q).await.unwrap();
    assert!(part.chunks.len() < all.chunks.len());
    assert_eq!(all.chunks.len(), whole.chunks().len());
    assert!(part.subgraph_size >= part.chunks.len());
    for (c, s) in &part.chunks {
        let full = all.chunks.iter().find(|(d, _)| d == c).unwrap().1;
        assert!((s - full).abs() < 1e-6, "chunk {c}: {s} vs {full}");
    }
}

#[tokio::test]
async fn trained_variant_trains_saves_and_loads() {
    let docs = mini_corpus::documents();
    let rag = builder(quick_train()).build(&docs).await.unwrap();
    let stats = rag.stats();
    assert!(stats.training_queries >= docs.len());
    let report = stats.train.as_ref().unwrap();
    assert!(report.epochs_run >= 1 && report.train_loss.iter().all(|l| l.is_finite()));
    assert_eq!(rag.name(), "lesegr");

    let q = "Who shared the 1903 Nobel Prize in Physics?";
    let before = rag.retrieve(q, Selection::TopK(4)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let loaded = LesegrRag::load(dir.path(), encoder()).unwrap();
    let after = loaded.retrieve(q, Selection::TopK(4)).await.unwrap();
    let ids = |h: &[lprag::ScoredChunk]| h.iter().map(|h| h.chunk.id).collect::<Vec<_>>();
    assert_eq!(ids(&before), ids(&after));
    assert_eq!(before[0].score, after[0].score);

    // Wrong encoder, corrupt file.
    let other = HashingEncoder::new(lprag::HashingEncoderConfig {
        dim: 64,
        ..Default::default()
    })
    .unwrap();
    assert!(LesegrRag::load(dir.path(), Arc::new(other)).is_err());
    std::fs::write(dir.path().join("lesegr.json"), b"{oops").unwrap();
    assert!(matches!(
        LesegrRag::load(dir.path(), encoder()),
        Err(Error::Format { .. })
    ));
}

#[tokio::test]
async fn training_is_checkpointed_and_a_finished_training_is_not_repeated() {
    let docs = mini_corpus::documents();
    let dir = tempfile::tempdir().unwrap();
    let checkpointed = |counts: Arc<crate::common::StepCounts>| {
        builder(quick_train())
            .checkpoints(dir.path())
            .progress(counts)
    };
    let first = Arc::new(crate::common::StepCounts::default());
    let rag = checkpointed(first.clone()).build(&docs).await.unwrap();
    let report = rag.stats().train.clone().unwrap();
    assert_eq!(first.get("train lesegr"), report.steps);
    assert!(report.steps > 0);
    assert!(dir.path().join("train-state.json").is_file());

    // The same build again: the training is found finished in its checkpoint and no step
    // runs; the index is the same.
    let second = Arc::new(crate::common::StepCounts::default());
    let again = checkpointed(second.clone()).build(&docs).await.unwrap();
    assert_eq!(second.get("train lesegr"), 0);
    let mut replayed = again.stats().train.clone().unwrap();
    replayed.seconds = report.seconds;
    assert_eq!(replayed, report);
    assert_eq!(again.alpha(), rag.alpha());
    let q = "Who shared the 1903 Nobel Prize in Physics?";
    let (a, b) = (
        rag.retrieve(q, Selection::TopK(4)).await.unwrap(),
        again.retrieve(q, Selection::TopK(4)).await.unwrap(),
    );
    assert_eq!(a, b);
}

#[tokio::test]
async fn labels_and_citations_are_checked_and_used() {
    let docs = mini_corpus::documents();
    // Citations replace the k-NN links.
    let rag = builder(LesegrConfig::lite())
        .document_links(vec![("curie".into(), "warsaw".into())])
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.stats().document_links, 1);
    // Passages: one chunk per document, so the curie chunk gets exactly the warsaw chunk.
    let curie = rag
        .chunks()
        .iter()
        .position(|c| c.provenance.document_id == "curie")
        .unwrap();
    let warsaw = rag
        .chunks()
        .iter()
        .position(|c| c.provenance.document_id == "warsaw")
        .unwrap();
    assert_eq!(rag.graph().in_neighbors(curie), &[warsaw as u32]);
    assert_eq!(rag.graph().num_edges(), 1);

    let err = builder(LesegrConfig::lite())
        .document_links(vec![("curie".into(), "atlantis".into())])
        .build(&docs)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("document_links[0]") && err.contains("atlantis"),
        "{err}"
    );

    // Labelled training pairs: gold by document id.
    let rag = builder(quick_train())
        .labelled(vec![
            ("Where was Marie Curie born?".into(), vec!["curie".into()]),
            ("What river is in Warsaw?".into(), vec!["vistula".into()]),
        ])
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.stats().training_queries, 2);
    let err = builder(quick_train())
        .labelled(vec![("?".into(), vec!["nowhere".into()])])
        .build(&docs)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("labelled[0]") && err.contains("nowhere"),
        "{err}"
    );

    // Bad queries and selections.
    assert!(rag.retrieve("  ", Selection::TopK(3)).await.is_err());
    assert!(rag.retrieve("Warsaw", Selection::TopK(0)).await.is_err());
    let one = vec![Document::new("x", "", "A single lonely passage.")];
    let solo = builder(quick_train()).build(&one).await.unwrap();
    assert_eq!(
        solo.retrieve("lonely", Selection::TopK(5))
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Everything of an index that retrieval reads besides the embeddings: chunks (id,
/// document, text), in-neighbours of every chunk and the gates.
type Snapshot = (Vec<(usize, String, String)>, Vec<Vec<u32>>, Vec<f32>);

fn snapshot(rag: &LesegrRag) -> Snapshot {
    (
        rag.chunks()
            .iter()
            .map(|c| (c.id, c.provenance.document_id.clone(), c.text.clone()))
            .collect(),
        (0..rag.chunks().len())
            .map(|i| rag.graph().in_neighbors(i).to_vec())
            .collect(),
        rag.alpha().to_vec(),
    )
}

const UPDATE_QUESTIONS: [&str; 3] = [
    "Which river flows through Warsaw?",
    "Who founded the Nobel Prize?",
    "Where is Sanremo?",
];

async fn hits(rag: &LesegrRag, q: &str) -> Vec<(usize, f32)> {
    crate::common::ranked(rag, q, 4).await
}

#[tokio::test]
async fn lite_documents_added_later_give_the_index_a_full_build_gives() {
    let docs = mini_corpus::documents();
    let full = builder(LesegrConfig::lite()).build(&docs).await.unwrap();
    let mut rag = builder(LesegrConfig::lite())
        .build(&docs[..5])
        .await
        .unwrap();
    let report = rag.add_documents(&docs[5..]).await.unwrap();
    assert_eq!((report.added_documents, report.added_chunks), (5, 5));
    assert_eq!(report.chunks, 10);
    let stages: Vec<&str> = report.seconds.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(stages, ["chunk", "embed", "graph", "gates"]);
    // BM25 refitted, links recomputed, the build's graph and gates: the same index.
    let (a, b) = (snapshot(&rag), snapshot(&full));
    assert_eq!(a.0, b.0, "chunks");
    assert_eq!(a.1, b.1, "graph");
    assert_eq!(a.2, b.2, "gates");
    let (a, b) = (rag.stats(), full.stats());
    assert_eq!(
        (a.chunks, a.intra_edges, a.inter_edges, a.document_links),
        (b.chunks, b.intra_edges, b.inter_edges, b.document_links)
    );
    for q in UPDATE_QUESTIONS {
        assert_eq!(hits(&rag, q).await, hits(&full, q).await, "{q}");
    }

    // Removing the added half gives the small build back; re-adding, the full one.
    let added: Vec<String> = docs[5..].iter().map(|d| d.id.clone()).collect();
    let report = rag.remove_documents(&added).await.unwrap();
    assert_eq!((report.removed_documents, report.removed_chunks), (5, 5));
    let small = builder(LesegrConfig::lite())
        .build(&docs[..5])
        .await
        .unwrap();
    assert_eq!(snapshot(&rag), snapshot(&small));
    rag.update_documents(&docs[5..]).await.unwrap();
    assert_eq!(snapshot(&rag), snapshot(&full));

    // Typed errors, nothing changed.
    let before = snapshot(&rag);
    let e = rag.add_documents(&docs[..1]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    let e = rag.remove_documents(&["nope".into()]).await.unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    let cite = [("sanremo".to_string(), "warsaw".to_string())];
    let extra = Document::new("extra", "Extra", "An extra passage about Warsaw.");
    let e = rag
        .add_documents_with(
            std::slice::from_ref(&extra),
            &lprag::BoundedPassageChunker,
            &cite,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("k-NN"), "{e}");
    assert_eq!(snapshot(&rag), before);
    assert!(rag.citations().is_none());

    // The updated index saves and reopens as it is.
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let back = LesegrRag::load(dir.path(), encoder()).unwrap();
    assert_eq!(snapshot(&back), snapshot(&rag));
    for q in UPDATE_QUESTIONS {
        assert_eq!(hits(&back, q).await, hits(&full, q).await, "{q}");
    }
}

#[tokio::test]
async fn citations_follow_their_documents_through_updates() {
    let docs = mini_corpus::documents();
    let cites = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let mut rag = builder(LesegrConfig::lite())
        .document_links(cites(&[("curie", "warsaw"), ("pierre", "curie")]))
        .build(&docs[..8])
        .await
        .unwrap();
    // Warsaw goes: its citation with it; a replaced Pierre Curie keeps his.
    rag.remove_documents(&["warsaw".into()]).await.unwrap();
    assert_eq!(rag.citations().unwrap(), cites(&[("pierre", "curie")]));
    let mut pierre = docs[7].clone();
    pierre.text.push_str(" He died in Paris in 1906.");
    rag.update_documents(&[pierre]).await.unwrap();
    assert_eq!(rag.citations().unwrap(), cites(&[("pierre", "curie")]));
    // New documents with citations to old and new ones.
    let new = cites(&[("gdansk", "vistula"), ("sanremo", "gdansk")]);
    rag.add_documents_with(&docs[8..], &lprag::BoundedPassageChunker, &new)
        .await
        .unwrap();
    assert_eq!(rag.stats().document_links, 3);
    let pos = |id: &str| {
        rag.chunks()
            .iter()
            .position(|c| c.provenance.document_id == id)
            .unwrap() as u32
    };
    // One chunk per document: each citing chunk's in-neighbour is its cited chunk.
    assert_eq!(
        rag.graph().in_neighbors(pos("sanremo") as usize),
        &[pos("gdansk")]
    );
    assert_eq!(
        rag.graph().in_neighbors(pos("gdansk") as usize),
        &[pos("vistula")]
    );
    let e = rag
        .add_documents_with(
            &[Document::new("x", "X", "Text.")],
            &lprag::BoundedPassageChunker,
            &cites(&[("x", "atlantis")]),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("atlantis"), "{e}");
    assert_eq!(rag.stats().document_links, 3);
}

#[tokio::test]
async fn trained_index_gates_new_edges_with_its_gate_network() {
    let docs = mini_corpus::documents();
    let old = builder(quick_train()).build(&docs[..6]).await.unwrap();
    let mut rag = old.clone();
    rag.add_documents(&docs[6..]).await.unwrap();
    // The graph a build on all documents makes (it does not depend on the variant).
    let lite = builder(LesegrConfig::lite()).build(&docs).await.unwrap();
    assert_eq!(snapshot(&rag).1, snapshot(&lite).1);
    // Edges between old chunks keep their learned gate; every gate is a sigmoid's.
    let old_gate: std::collections::HashMap<(u32, u32), f32> = (0..old.chunks().len())
        .flat_map(|i| {
            let r = old.graph().range(i);
            old.graph()
                .in_neighbors(i)
                .iter()
                .zip(r)
                .map(move |(&s, e)| ((s, i as u32), e))
        })
        .map(|(k, e)| (k, old.alpha()[e]))
        .collect();
    let mut reused = 0;
    for i in 0..rag.chunks().len() {
        for (&s, e) in rag.graph().in_neighbors(i).iter().zip(rag.graph().range(i)) {
            let a = rag.alpha()[e];
            assert!(a > 0.0 && a < 1.0, "gate {a}");
            if let Some(&g) = old_gate.get(&(s, i as u32)) {
                assert_eq!(a, g);
                reused += 1;
            }
        }
    }
    assert!(reused > 0 && reused < rag.alpha().len());
    assert_eq!(rag.stats().train, old.stats().train, "no retraining");
    let hit = rag.retrieve("Sanremo", Selection::TopK(3)).await.unwrap();
    assert!(hit
        .iter()
        .any(|h| h.chunk.provenance.document_id == "sanremo"));

    // The gate network is saved: a reopened index takes updates too.
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let mut back = LesegrRag::load(dir.path(), encoder()).unwrap();
    back.remove_documents(&["sanremo".into()]).await.unwrap();
    assert_eq!(back.chunks().len(), 9);
    // An index saved without it (an older lprag) refuses, and says why.
    let path = dir.path().join("lesegr.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("gate");
    std::fs::write(&path, json.to_string()).unwrap();
    let mut legacy = LesegrRag::load(dir.path(), encoder()).unwrap();
    let e = legacy
        .remove_documents(&["sanremo".into()])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("gate network"), "{e}");
    assert_eq!(legacy.chunks().len(), 10);
}
