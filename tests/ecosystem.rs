//! lprag inside rig and swiftide, both ways, on real indexes: rig's `InsertDocuments` and
//! swiftide's indexing pipeline write into a `Live` LP-RAG index that keeps answering, and
//! rig's models serve lprag (a rig completion model writes lprag's cited answers).

use std::sync::Arc;

use lprag::llm::{AnswerGenerator, ChatModel};
use lprag::{Chunk, Live, LiveIndex, LpRag, Retriever, Selection};
use lprag_adapters::rig::{RigChat, RigIndex, RigJsonFilter};
use lprag_adapters::swiftide::{LpragPersist, SwiftideRetriever};
use rig_core::embeddings::embed::{EmbedError, TextEmbedder};
use rig_core::test_utils::MockCompletionModel;
use rig_core::vector_store::request::{SearchFilter, VectorSearchRequest};
use rig_core::vector_store::{InsertDocuments, VectorStoreIndex};
use rig_core::Embed;
use serde::Serialize;

use crate::common::{corpus, lprag_config};

async fn live_index() -> Arc<Live<LpRag>> {
    let rag = LpRag::builder()
        .config(lprag_config(2))
        .build(&corpus())
        .await
        .unwrap();
    Arc::new(Live::new(rag))
}

/// A document as a rig user writes one: `Embed` yields the text to embed.
#[derive(Serialize)]
struct Article {
    id: String,
    title: String,
    body: String,
    lang: &'static str,
    year: u32,
}

impl Embed for Article {
    fn embed(&self, embedder: &mut TextEmbedder) -> Result<(), EmbedError> {
        embedder.embed(self.body.clone());
        Ok(())
    }
}

fn article(id: &str, body: &str, lang: &'static str) -> Article {
    Article {
        id: id.into(),
        title: format!("Article {id}"),
        body: body.into(),
        lang,
        year: 2024,
    }
}

/// rig's `InsertDocuments` upserts into the live index: new documents are found with
/// their metadata (filterable through rig's filter), an id inserted again replaces its
/// document, and ids repeated within one call are refused without writing anything.
#[tokio::test]
async fn rig_inserts_documents_into_a_live_index_that_keeps_serving() {
    let live = live_index().await;
    let before = live.snapshot().chunks().len();
    let index = RigIndex::live(live.clone() as Arc<dyn LiveIndex>);

    let body = "The Kraków observatory catalogued comets for two centuries.";
    index
        .insert_documents(vec![
            (article("krakow-obs", body, "en"), vec![]),
            (
                article(
                    "gdansk",
                    "Gdańsk shipyards built ocean liners and strike history.",
                    "pl",
                ),
                vec![],
            ),
        ])
        .await
        .unwrap();
    let after = live.snapshot();
    assert!(
        after.chunks().len() >= before + 2,
        "{}",
        after.chunks().len()
    );
    let inserted = after
        .chunks()
        .iter()
        .find(|c| c.provenance.document_id == "krakow-obs")
        .expect("the inserted document is indexed");
    assert_eq!(inserted.text, body);
    assert_eq!(
        inserted.metadata.get("lang").map(String::as_str),
        Some("en")
    );
    assert_eq!(
        inserted.metadata.get("year").map(String::as_str),
        Some("2024")
    );
    // The body is the text, not a metadata field as well.
    assert!(!inserted.metadata.contains_key("body"));

    // Found through rig, and rig's filter applies before ranking.
    let filtered = VectorSearchRequest::builder()
        .query("comets observatory")
        .samples(3)
        .filter(RigJsonFilter::eq("lang", serde_json::json!("pl")))
        .build();
    let hits = index.top_n::<Chunk>(filtered).await.unwrap();
    assert!(!hits.is_empty());
    assert!(hits
        .iter()
        .all(|h| h.document.provenance.document_id == "gdansk"));

    // The same id again replaces the document.
    let n = live.snapshot().chunks().len();
    let replaced = "The Kraków observatory now studies variable stars.";
    index
        .insert_documents(vec![(article("krakow-obs", replaced, "en"), vec![])])
        .await
        .unwrap();
    let now = live.snapshot();
    assert_eq!(now.chunks().len(), n);
    let texts: Vec<&str> = now
        .chunks()
        .iter()
        .filter(|c| c.provenance.document_id == "krakow-obs")
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(texts, vec![replaced]);

    // One call with an id twice: an error, and nothing written.
    let err = index
        .insert_documents(vec![
            (article("twice", "First text.", "en"), vec![]),
            (article("twice", "Second text.", "en"), vec![]),
        ])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    assert_eq!(live.snapshot().chunks().len(), n);
}

/// A swiftide indexing pipeline (its file loader and Markdown chunker) stores into the
/// live index through `LpragPersist`; swiftide's retrieval step then finds the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swiftide_pipeline_feeds_a_live_index() {
    let live = live_index().await;
    let before = live.snapshot().chunks().len();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tatra.md"),
        "# Tatra\n\nThe Tatra mountains hold Poland's highest peak, Rysy.\n\n\
         ## Lakes\n\nMorskie Oko is the largest lake of the Tatra mountains.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("skipped.txt"), "Not Markdown: not loaded.").unwrap();

    swiftide_indexing::Pipeline::from_loader(
        swiftide_indexing::loaders::FileLoader::new(dir.path()).with_extensions(&["md"]),
    )
    .then_chunk(swiftide_indexing::transformers::ChunkMarkdown::from_chunk_range(10..80))
    .then_store_with(LpragPersist::new(live.clone() as Arc<dyn LiveIndex>).batch_size(8))
    .run()
    .await
    .unwrap();

    let snapshot = live.snapshot();
    let new: Vec<&Chunk> = snapshot.chunks().iter().skip(before).collect();
    assert!(new.len() >= 2, "{new:?}");
    for c in &new {
        assert_eq!(
            c.metadata.get("path").map(|p| p.ends_with("tatra.md")),
            Some(true)
        );
        assert!(c.metadata.contains_key("offset"));
    }
    assert!(snapshot
        .chunks()
        .iter()
        .all(|c| !c.text.contains("Not Markdown")));

    let retriever = SwiftideRetriever::live(live.clone() as Arc<dyn LiveIndex>);
    let query = swiftide_core_query("Which lake is the largest in the Tatra mountains?");
    let answered = swiftide_core::Retrieve::retrieve(
        &retriever,
        &lprag_adapters::swiftide::LpragSearch::top_k(2),
        query,
    )
    .await
    .unwrap();
    assert!(
        answered
            .documents()
            .iter()
            .any(|d| d.content().contains("Morskie Oko")),
        "{:?}",
        answered.documents()
    );
}

fn swiftide_core_query(
    text: &str,
) -> swiftide_core::querying::Query<swiftide_core::querying::states::Pending> {
    swiftide_core::querying::Query::from(text)
}

/// A rig completion model writes lprag's answer with citations: the request lprag sends
/// reaches rig role for role, and the answer's markers come back as verified citations.
#[tokio::test]
async fn a_rig_completion_model_writes_cited_answers() {
    let rag = LpRag::builder()
        .config(lprag_config(2))
        .build(&corpus())
        .await
        .unwrap();
    let hits = rag
        .retrieve("Where was Marie Curie born?", Selection::TopK(3))
        .await
        .unwrap();
    let model = MockCompletionModel::text("She was born in Warsaw [1].");
    let chat: Arc<dyn ChatModel> = Arc::new(RigChat::new(model.clone()));
    let answer = AnswerGenerator::new(chat)
        .answer_with_citations("Where was Marie Curie born?", &hits)
        .await
        .unwrap();
    assert_eq!(answer.answer.text, "She was born in Warsaw [1].");
    assert_eq!(answer.citations.len(), 1);
    assert_eq!(answer.citations[0].chunk_id, hits[0].chunk.id);
    let sent = model.requests();
    assert_eq!(sent.len(), 1);
    assert!(sent[0]
        .system_instructions()
        .is_some_and(|s| s.contains("[n]") || s.contains("cite")));
}

/// `LiveIndex::upsert` on `Live` reports what it did: new documents are added, known ids
/// replaced, and the chunk count is the index's after the update.
#[tokio::test]
async fn live_index_upserts_report_added_and_replaced_documents() {
    let live = live_index().await;
    let index: Arc<dyn LiveIndex> = live.clone();
    let before = index.snapshot().chunks().len();
    let new = vec![
        lprag::Document::new("a", "A", "Amber is fossilised tree resin."),
        lprag::Document::new("b", "B", "Basalt forms from cooling lava."),
    ];
    let report = index.upsert(&new).await.unwrap();
    assert_eq!((report.added, report.replaced), (2, 0));
    assert_eq!(report.chunks, index.snapshot().chunks().len());
    assert!(report.chunks >= before + 2);

    let changed = vec![
        lprag::Document::new("a", "A", "Amber can hold insects from the Eocene."),
        lprag::Document::new("c", "C", "Chalk is made of coccolith plates."),
    ];
    let report = index.upsert(&changed).await.unwrap();
    assert_eq!((report.added, report.replaced), (1, 1));
    assert_eq!(index.name(), live.snapshot().name());
}
