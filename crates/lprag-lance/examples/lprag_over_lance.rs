//! LP-RAG beside a Lance table: build an index, write its chunks and vectors into a Lance
//! table, and answer with LanceDB finding each query's nearest chunks (a filter pushed into
//! LanceDB as SQL); then open the table again, as a process that only answers would.
//!
//! `cargo run --manifest-path crates/lprag-lance/Cargo.toml --example lprag_over_lance [DIR]`
//!
//! DIR (a database directory that does not hold a `chunks` table yet) defaults to a
//! temporary directory, removed at the end.

use std::sync::Arc;

use lprag::{Filter, HashingEncoder, LpRag, NoProgress, Retriever, Selection};
use lprag_lance::{LanceStore, StoreSpec, DEFAULT_TABLE};

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let temp = tempfile::tempdir()?;
    let uri = match std::env::args().nth(1) {
        Some(dir) => dir,
        None => temp.path().join("db").to_string_lossy().into_owned(),
    };
    // Ten articles, labelled by half so that a filter has something to choose.
    let docs: Vec<_> = mini_corpus::documents()
        .into_iter()
        .enumerate()
        .map(|(i, d)| d.with_metadata("half", if i < 5 { "first" } else { "second" }))
        .collect();
    let mut rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&docs)
        .await?;
    // Fewer candidates than chunks, so that the pool comes from a search.
    rag.set_candidates(Some(3), true);

    let store = LanceStore::create(&uri, StoreSpec::new(rag.graph().features.dim())).await?;
    let wrote = rag.write_store(&store, &NoProgress).await?;
    println!(
        "wrote {} chunks into {uri} (table {DEFAULT_TABLE}) in {} append(s)",
        wrote.written, wrote.appends
    );
    rag.attach_store(Arc::new(store)).await?;

    let question = "Which river flows through the city where Marie Curie was born?";
    let second = Filter::eq("half", "second");
    for (what, filter) in [("all", &Filter::All), ("half = second", &second)] {
        let hits = rag
            .retrieve_filtered(question, Selection::TopK(3), filter)
            .await?;
        println!("{what}:");
        for h in hits {
            println!("  {:.3}  {}", h.score, h.chunk.provenance.title);
        }
    }

    // A second handle, as another process opens the table: the same answers.
    let mut reader = rag.clone();
    reader.detach_store()?;
    reader
        .attach_store(Arc::new(LanceStore::open(&uri, DEFAULT_TABLE).await?))
        .await?;
    let a = rag.retrieve(question, Selection::TopK(3)).await?;
    let b = reader.retrieve(question, Selection::TopK(3)).await?;
    let ids = |h: &[lprag::ScoredChunk]| h.iter().map(|h| h.chunk.id).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    println!(
        "a second handle on the table answers the same: {:?}",
        ids(&b)
    );
    Ok(())
}
