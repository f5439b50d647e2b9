//! # LP-RAG with an LLM: chunking, synthetic queries and answers
//!
//! Runs the paper's full pipeline against any OpenAI-compatible chat endpoint (OpenAI,
//! Groq, vLLM, llama.cpp server, LM Studio, Ollama's `/v1`…):
//!
//! ```text
//! LPRAG_LLM_BASE_URL=http://localhost:11434/v1 LPRAG_LLM_MODEL=llama3.1:8b \
//!     cargo run --example with_llm
//! LPRAG_LLM_MODEL=gpt-4o-mini LPRAG_LLM_API_KEY=sk-... cargo run --example with_llm
//! ```
//!
//! 1. the LLM splits each document into atomic statements (C-PROMPT, Box D.1);
//! 2. it writes questions for each A.2 batch of neighbouring chunks (S-PROMPT, Box D.3);
//! 3. LP-RAG trains its link predictor on that graph;
//! 4. for each question, the retrieved chunks, best first, go back to the LLM with the
//!    D.2 prompt for an answer that cites the chunks it uses (`answer_with_citations`).
//!
//! Every LLM answer is cached under `LPRAG_LLM_CACHE` (default `target/lprag-llm-cache`):
//! stop the example at any point and run it again — it resumes, and a complete rerun makes
//! no LLM call at all. Token counts per stage are printed at the end.
//!
//! Without `LPRAG_LLM_MODEL` set, it explains what to set and exits.

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::llm::{AnswerGenerator, CachedChat, OpenAiChat, OpenAiConfig, TokenMeter};
use lprag::{Document, LpRag, Retriever, Selection, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let Some(config) = OpenAiConfig::from_env() else {
        println!(
            "No LLM configured, so there is nothing to run.\n\n\
             This example needs an OpenAI-compatible chat endpoint:\n  \
             LPRAG_LLM_MODEL     the model name (required), e.g. gpt-4o-mini or llama3.1:8b\n  \
             LPRAG_LLM_BASE_URL  the API base including /v1 (Ollama: http://localhost:11434/v1,\n                      \
             vLLM: http://localhost:8000/v1); OpenAI's https://api.openai.com/v1 only when\n                      \
             no base URL is set anywhere and a key is\n  \
             LPRAG_LLM_API_KEY   the key, if the server needs one (OPENAI_API_KEY is used only\n                      \
             for OpenAI's endpoint or OPENAI_BASE_URL's)\n  \
             LPRAG_LLM_CACHE     where answers are cached (default target/lprag-llm-cache)\n\n\
             The offline pipeline needs none of this: cargo run --example quickstart"
        );
        return Ok(());
    };
    println!(
        "LLM: {} at {}",
        config.model,
        lprag::llm::redact_url(&config.base_url)
    );
    let cache_dir =
        std::env::var("LPRAG_LLM_CACHE").unwrap_or_else(|_| "target/lprag-llm-cache".into());
    let progress = Arc::new(StderrProgress::new(25));
    let chat = CachedChat::open(Arc::new(OpenAiChat::new(config)?), &cache_dir)?
        .with_progress(progress.clone());
    let chat = Arc::new(chat);

    let docs: Vec<Document> = mini_corpus::documents();

    let rag = LpRag::builder()
        .llm(chat.clone())
        .progress(progress)
        .build(&docs)
        .await?;
    let stats = rag.stats();
    println!(
        "{} documents -> {} LLM chunks, {} LLM queries; encoder {}",
        stats.documents,
        stats.chunks,
        stats.queries,
        rag.encoder().name()
    );
    for c in rag.chunks().iter().take(5) {
        println!("  chunk {}: {}", c.id, c.text);
    }

    let meter = Arc::new(TokenMeter::new());
    let reader = AnswerGenerator::new(chat.clone()).with_meter(meter.clone());
    for question in [
        "Which river flows through the city where Marie Curie was born?",
        "Where did the inventor of dynamite die?",
    ] {
        let hits = rag.retrieve(question, Selection::TopK(5)).await?;
        // The answer cites the chunks it uses as [n]; each marker is checked against
        // the chunks shown and resolved to its document and span.
        let cited = reader.answer_with_citations(question, &hits).await?;
        println!("\nQ: {question}");
        for h in &hits {
            println!("  {:.3}  {}", h.score, h.chunk.text);
        }
        println!("A: {}", cited.answer.text);
        for c in &cited.citations {
            println!(
                "  [{}] → chunk {} of document {:?}, bytes {:?}",
                c.marker, c.chunk_id, c.document_id, c.span
            );
        }
        if !cited.unverified.is_empty() {
            println!("  markers naming no chunk shown: {:?}", cited.unverified);
        }
    }

    println!();
    let mut usage = stats.llm_usage.clone();
    usage.extend(meter.snapshot());
    for (stage, u) in &usage {
        println!(
            "LLM {stage}: {} calls ({} cached), {} prompt + {} completion tokens",
            u.calls, u.cached_calls, u.prompt_tokens, u.completion_tokens
        );
    }
    let s = chat.cache().stats();
    let (entries, bytes) = chat.cache().disk_usage()?;
    println!(
        "cache {cache_dir}: {entries} entries, {bytes} bytes; this run {} hits, {} misses",
        s.hits, s.misses
    );
    Ok(())
}
