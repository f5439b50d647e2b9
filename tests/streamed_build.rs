//! `LpRagBuilder::build_from` (and every other builder's): documents read from a
//! `DocumentSource` a block at a time make the index a slice of the same documents makes,
//! share its work directory, and refuse what a slice build refuses.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::common::{limited, lprag_config, small_gfm_config, Blocks};
use lprag::core::read_all_documents;
use lprag::{
    Bm25Retriever, DenseRetriever, Document, Encoder, Error, G2Rag, GfmRag, HybridRetriever,
    JsonLinesSource, LesegrConfig, LesegrRag, LesegrVariant, LpRag, LpRagBuilder, QcgRag,
    Retriever, Selection,
};

/// The encoder: an input limit of 30 whitespace words (plus two), so the long document's
/// passage is split to fit and the build reads the source again for it.
fn encoder() -> Arc<dyn Encoder> {
    limited(30)
}

fn corpus() -> Vec<Document> {
    let long = (0..12)
        .map(|i| format!("Sentence number {i} talks about the river Vistula and Warsaw."))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867.",
        )
        .with_metadata("lang", "en"),
        Document::new("long", "Warsaw", long),
        Document::new("blank", "Nothing", "   "),
        Document::new("kyoto", "Kyoto", "Kyoto was the imperial capital of Japan."),
        Document::new("tokyo", "Tokyo", "Tokyo is the capital of Japan.")
            .with_metadata("lang", "ja"),
        Document::new(
            "nobel",
            "Alfred Nobel",
            "Alfred Nobel invented dynamite in 1867.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level.",
        ),
    ]
}

/// A builder with the test's encoder and one training epoch.
fn builder() -> LpRagBuilder {
    LpRag::builder().encoder(encoder()).config(lprag_config(1))
}

async fn ranked(rag: &dyn Retriever, query: &str) -> Vec<(usize, f32)> {
    rag.retrieve(query, Selection::TopK(5))
        .await
        .unwrap()
        .iter()
        .map(|s| (s.chunk.id, s.score))
        .collect()
}

#[tokio::test]
async fn a_source_read_in_blocks_builds_the_index_a_slice_builds() {
    let docs = corpus();
    let whole = builder().build(&docs).await.unwrap();
    // One and two documents a block: every block is chunked on its own (the blank
    // document's block yields no chunk), and the long passage is split after a re-read.
    for block in [1, 2] {
        let source = Blocks::new(docs.clone(), block);
        let streamed = builder().build_from(&source).await.unwrap();
        assert_eq!(streamed.chunks(), whole.chunks(), "block {block}");
        assert!(streamed.chunks().len() > docs.len() - 1);
        assert_eq!(streamed.synthetic_queries(), whole.synthetic_queries());
        assert_eq!(streamed.stats().documents, docs.len());
        assert_eq!(streamed.stats().chunks, whole.stats().chunks);
        assert!(streamed
            .stats()
            .warnings
            .iter()
            .any(|w| w.contains("were split")));
        for q in ["Where was Marie Curie born?", "capital of Japan"] {
            assert_eq!(ranked(&streamed, q).await, ranked(&whole, q).await, "{q}");
        }
        // Without a work directory: one pass to survey, one to chunk, one for the split
        // passage's document, each ending with an empty read.
        let blocks = docs.len().div_ceil(block) + 1;
        assert_eq!(source.reads.load(Ordering::SeqCst), 3 * blocks);
    }
    // The metadata and content hashes come from each chunk's own document.
    let tokyo = whole
        .chunks()
        .iter()
        .find(|c| c.provenance.document_id == "tokyo")
        .unwrap();
    assert_eq!(tokyo.metadata["lang"], "ja");
    assert!(tokyo.document_hash().is_some());
}

#[tokio::test]
async fn a_work_directory_resumes_a_slice_build_from_a_source_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let docs = corpus();
    let build = |source: Option<Blocks>| {
        let work = work.clone();
        let docs = docs.clone();
        async move {
            let b = builder().work_dir(&work);
            match source {
                Some(s) => b.build_from(&s).await.unwrap(),
                None => b.build(&docs).await.unwrap(),
            }
        }
    };
    let first = build(Some(Blocks::new(docs.clone(), 3))).await;
    assert!(first.stats().reused_stages.is_empty());
    let second = build(None).await;
    assert_eq!(
        second.stats().reused_stages,
        ["chunk", "embed", "graph", "queries", "query-embed"]
    );
    assert_eq!(second.chunks(), first.chunks());
    let third = build(Some(Blocks::new(docs.clone(), 2))).await;
    assert_eq!(third.stats().reused_stages.len(), 5);
    // Another corpus is keyed apart: one changed document rechunks.
    let mut changed = docs.clone();
    changed[3].text.push_str(" It has many temples.");
    let fourth = builder()
        .work_dir(&work)
        .build_from(&Blocks::new(changed, 2))
        .await
        .unwrap();
    assert!(fourth.stats().reused_stages.is_empty());
}

#[tokio::test]
async fn a_source_is_refused_as_a_slice_is_and_its_errors_pass_through() {
    let build = |source: Blocks| async move { builder().build_from(&source).await };
    // Two documents with one id, in different blocks.
    let mut docs = corpus();
    docs[5].id = "curie".into();
    let e = build(Blocks::new(docs, 2)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("duplicate document id (documents 0 and 5)"),
        "{e}"
    );
    // Nothing at all, or nothing that chunks.
    let e = build(Blocks::new(Vec::new(), 2)).await.unwrap_err();
    assert!(matches!(e, Error::EmptyCorpus(_)), "{e:?}");
    let blank = vec![Document::new("a", "", " "), Document::new("b", "", "\n")];
    let e = build(Blocks::new(blank, 1)).await.unwrap_err();
    assert!(matches!(e, Error::EmptyCorpus(_)), "{e:?}");
    // A source that fails part way: its error, whole.
    let mut failing = Blocks::new(corpus(), 2);
    failing.fail_at = Some(4);
    let e = build(failing).await.unwrap_err();
    assert!(e.to_string().contains("the disk went away"), "{e}");
}

#[tokio::test]
async fn a_json_lines_file_is_indexed_without_being_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corpus.jsonl");
    let mut lines = String::new();
    for d in corpus() {
        let mut record = serde_json::json!({"id": d.id, "title": d.title, "text": d.text});
        for (k, v) in &d.metadata {
            record[k] = serde_json::Value::String(v.clone());
        }
        lines.push_str(&format!("{record}\n"));
    }
    std::fs::write(&path, lines).unwrap();
    let source = JsonLinesSource::open(&path).unwrap();
    let read = read_all_documents(&source).await.unwrap();
    assert_eq!(read, corpus());
    let streamed = builder().build_from(&source).await.unwrap();
    let whole = builder().build(&corpus()).await.unwrap();
    assert_eq!(streamed.chunks(), whole.chunks());
    let q = "Which river flows through Warsaw?";
    assert_eq!(ranked(&streamed, q).await, ranked(&whole, q).await);
}

/// Every other builder's `build_from` makes the index its `build` makes: the same chunks
/// (the long passage split after a re-read) and the same answers.
#[tokio::test]
async fn every_builder_builds_from_a_source_what_it_builds_from_a_slice() {
    let docs = corpus();
    // `$builder` made twice: built on the slice, then from a source of two documents a
    // block; both as trait objects, with the name.
    macro_rules! both {
        ($name:literal, $builder:expr) => {{
            let whole = $builder.build(&docs).await.unwrap();
            let source = Blocks::new(docs.clone(), 2);
            let streamed = $builder.build_from(&source).await.unwrap();
            let pair: (Box<dyn Retriever>, Box<dyn Retriever>) =
                (Box::new(whole), Box::new(streamed));
            ($name, pair)
        }};
    }
    let lite = LesegrConfig {
        variant: LesegrVariant::Lite,
        ..LesegrConfig::default()
    };
    let built = [
        both!("dense", DenseRetriever::builder().encoder(encoder())),
        both!("bm25", Bm25Retriever::builder()),
        both!("hybrid", HybridRetriever::builder().encoder(encoder())),
        both!("qcg", QcgRag::builder().encoder(encoder())),
        both!("g2", G2Rag::builder().encoder(encoder())),
        both!(
            "lesegr",
            LesegrRag::builder().encoder(encoder()).config(lite.clone())
        ),
        both!(
            "gfm",
            GfmRag::builder()
                .encoder(encoder())
                .config(small_gfm_config())
        ),
    ];
    for (name, (whole, streamed)) in &built {
        assert_eq!(streamed.chunks(), whole.chunks(), "{name}");
        if *name != "bm25" {
            // Split to fit the encoder (BM25 has none).
            assert!(whole.chunks().len() > docs.len() - 1, "{name}");
        }
        for q in ["Where was Marie Curie born?", "capital of Japan"] {
            assert_eq!(
                ranked(&**streamed, q).await,
                ranked(&**whole, q).await,
                "{name}: {q}"
            );
        }
    }
    // Two documents with one id in different blocks: the slice build's error.
    let mut twice = corpus();
    twice[5].id = "curie".into();
    let e = DenseRetriever::builder()
        .encoder(encoder())
        .build_from(&Blocks::new(twice, 2))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("duplicate document id (documents 0 and 5)"),
        "{e}"
    );
}
