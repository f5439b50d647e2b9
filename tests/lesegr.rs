//! LeSeGR (CG-RAG) end to end with the offline components.

use std::sync::Arc;

use lprag::lesegr::LesegrStats;
use lprag::{
    Document, Error, HashingEncoder, LesegrConfig, LesegrRag, LesegrRagBuilder, Retriever,
    Selection, SentenceChunker,
};

#[path = "../examples/data/mini_corpus.rs"]
mod mini_corpus;

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
