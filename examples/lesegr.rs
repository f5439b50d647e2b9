//! # LeSeGR (CG-RAG): lexical and semantic signals inside message passing
//!
//! CG-RAG's LeSeGR scores a chunk by passing messages over a graph of
//! chunks: each message from a neighbour is gated by the neighbour's **lexical** relevance
//! to the question (δ, from BM25) and by how related the two chunks are (α), so a chunk
//! gains score when the chunks around it match the question's words. This example builds
//! both variants over the bundled corpus:
//!
//! ```text
//! cargo run --example lesegr
//! ```
//!
//! With citations between your documents, pass them with
//! `.document_links(vec![(citing_id, cited_id), …])`; without them (as here) each
//! document is linked to its 5 nearest documents.

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{LesegrConfig, LesegrRag, Retriever, Selection, SentenceChunker, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();
    let question = "Which river flows through the city where Marie Curie was born?";
    // One encoder for everything below (all-MiniLM-L6-v2 when it is installed, else the
    // offline hashing encoder fitted on these texts), so the saved index can be reopened.
    let texts: Vec<String> = docs
        .iter()
        .map(|d| format!("{}\n{}", d.title, d.text))
        .collect();
    let (_, encoder, warning) = lprag::DefaultEncoder::choose(&texts)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }

    // 1. LeSeGR-lite needs no training: α = max(0, cos) between linked chunks, one layer.
    //    Sentences as chunks give the paper's intra-document adjacency edges (each
    //    sentence receives a message from the one before it) beside the inter-document
    //    edges (each chunk receives from its 4 most related chunks in each linked
    //    document, by BM25 cosine + dense cosine).
    let lite = LesegrRag::builder()
        .encoder(encoder.clone())
        .chunker(Arc::new(SentenceChunker::default()))
        .config(LesegrConfig::lite())
        .build(&docs)
        .await?;
    let s = lite.stats();
    println!(
        "lite: {} chunks, {} adjacency + {} inter-document edges from {} document links ({:.2} s)",
        s.chunks, s.intra_edges, s.inter_edges, s.document_links, s.seconds
    );

    // 2. `explain` shows the per-query gates: δ = 1 + BM25 / max BM25 is above 1 exactly
    //    on chunks that share words with the question.
    let why = lite.explain(question).await?;
    let lexical = why.delta.iter().filter(|&&d| d > 1.0).count();
    println!(
        "  {} candidates ({} with lexical evidence), messages over {} chunks",
        why.chunks.len(),
        lexical,
        why.subgraph_size
    );
    for hit in lite.retrieve(question, Selection::TopK(3)).await? {
        println!(
            "  {:.3}  [{}] {}",
            hit.score, hit.chunk.provenance.title, hit.chunk.text
        );
    }

    // 3. The trained variant learns α = σ(MLP(c_i − c_j)) and two linear message layers
    //    with cross-entropy on gold chunks. Without labelled questions it trains on
    //    synthetic ones written from pairs of linked chunks; pass `.labelled(pairs)` when
    //    you have real (question, gold document) pairs.
    let trained = LesegrRag::builder()
        .encoder(encoder.clone())
        .progress(Arc::new(StderrProgress::new(25)))
        .build(&docs)
        .await?;
    let s = trained.stats();
    if let Some(r) = &s.train {
        println!(
            "\ntrained on {} synthetic questions: {} epochs (best {}), {:.2} s",
            s.training_queries, r.epochs_run, r.best_epoch, r.seconds
        );
    }
    for hit in trained.retrieve(question, Selection::TopK(3)).await? {
        println!(
            "  {:.3}  [{}] {}",
            hit.score, hit.chunk.provenance.title, hit.chunk.text
        );
    }

    // 4. Save and reopen (the BM25 index is refitted from the stored chunks).
    let dir = std::env::temp_dir().join("lprag-lesegr-example");
    trained.save(&dir)?;
    let mut reopened = LesegrRag::load(&dir, encoder)?;
    let again = reopened.retrieve(question, Selection::TopK(1)).await?;
    println!(
        "\nreopened from {}: top hit [{}]",
        dir.display(),
        again[0].chunk.provenance.title
    );

    // 5. Add a document without retraining: only its chunk is embedded; the graph is
    //    rebuilt and its new edges gated by the trained gate network.
    let report = reopened
        .add_documents(&[lprag::Document::new(
            "krakow",
            "Kraków",
            "Kraków lies on the Vistula River in southern Poland. It was the capital of Poland until 1596.",
        )])
        .await?;
    println!(
        "added {} chunk(s) in {:.3} s; {} chunks now",
        report.added_chunks,
        report.seconds.iter().map(|(_, s)| s).sum::<f64>(),
        report.chunks
    );
    let hit = reopened
        .retrieve(
            "Which city on the Vistula was Poland's capital before 1596?",
            Selection::TopK(1),
        )
        .await?;
    println!("  top hit [{}]", hit[0].chunk.provenance.title);
    Ok(())
}
