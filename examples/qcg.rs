//! # QCG-RAG: retrieval through a graph of synthetic questions
//!
//! QCG-RAG needs no training. It writes (query, answer) pairs for every chunk,
//! keeps the ones closest to their chunk (Doc2Query--), links each query to its k most
//! similar queries, and answers a user question by walking that query graph:
//!
//! ```text
//! cargo run --example qcg
//! ```
//!
//! Offline, the questions come from the heuristic generator; with an LLM, pass
//! `.query_generator(Arc::new(LlmQueryGenerator::doc2query(model)))` for the paper's
//! Doc2Query prompt (20 pairs per chunk, with answers).

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{QcgConfig, QcgRag, Retriever, Selection, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();

    // 1. Index: chunks (whole passages) → synthetic questions per chunk → Doc2Query--
    //    keeps the best 80 % per chunk by cos(question ⊕ answer, chunk) → k-NN (k = 3)
    //    edges between questions. The paper's MultiHop-RAG settings are the defaults.
    let rag = QcgRag::builder()
        .config(QcgConfig::default())
        .progress(Arc::new(StderrProgress::new(25)))
        .build(&docs)
        .await?;
    let s = rag.stats();
    println!(
        "{} chunks, {} questions written, {} kept; built in {:.2} s",
        s.chunks, s.queries_generated, s.queries_kept, s.seconds
    );

    // 2. Retrieve. The user's question is compared with every stored question; those with
    //    cos + 1 ≥ γ (at most n = 15) are the seeds, one hop over question–question edges
    //    adds their neighbours, and each chunk scores the mean cosine of its questions in
    //    that set.
    for question in [
        "Which river flows through the city where Marie Curie was born?",
        "Who invented dynamite?",
    ] {
        let why = rag.explain(question).await?;
        println!(
            "\nQ: {question}\n   {} seed questions, {} after expansion; closest stored question: {:?}",
            why.seeds.len(),
            why.expanded.len(),
            rag.queries()[why.seeds[0]].text
        );
        for hit in rag.retrieve(question, Selection::TopK(3)).await? {
            println!(
                "  {:.3}  [{}] {}",
                hit.score, hit.chunk.provenance.title, hit.chunk.text
            );
        }
    }
    Ok(())
}
