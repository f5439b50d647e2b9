//! # Quickstart: LP-RAG on a small corpus, offline
//!
//! This example walks through the whole LP-RAG pipeline with the offline defaults — no LLM
//! — and prints the ranked chunks for a few questions. It uses all-MiniLM-L6-v2 when the
//! model is installed (`bash scripts/fetch-model.sh`, or `LPRAG_MODEL_DIR`); otherwise it
//! warns once and falls back to the weight-free `HashingEncoder`.
//!
//! With an OpenAI-compatible LLM configured (`LPRAG_LLM_MODEL`, optionally
//! `LPRAG_LLM_BASE_URL` and `LPRAG_LLM_API_KEY`; see `examples/with_llm.rs`) it chunks and
//! writes synthetic queries with the LLM instead, as the paper does, caching every answer
//! under `target/lprag-llm-cache` so a rerun costs nothing.
//!
//! ```text
//! cargo run --example quickstart
//! ```

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{Document, LpRag, Retriever, Selection, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    // 1. Documents. Any `Vec<Document>` works; here a small bundled corpus of ten articles.
    let docs: Vec<Document> = mini_corpus::documents();

    // 2. Index. The builder runs every LP-RAG stage in order:
    //    documents → chunks (PassageChunker: one per document; SentenceChunker for atomic ones)
    //              → embeddings (all-MiniLM-L6-v2 if installed, else HashingEncoder)
    //              → mutual k-NN chunk graph (k = 5) plus bridge edges (title mentions)
    //              → synthetic queries per A.2 batch (HeuristicQueryGenerator, n_B = 2)
    //              → a trained NCN link predictor anchored on cosine similarity (burn, CPU).
    //    Each component can be swapped for your own (`.encoder(..)`, `.chunker(..)`, ...).
    let mut builder = LpRag::builder().progress(Arc::new(StderrProgress::new(25)));
    if let Some(config) = lprag::llm::OpenAiConfig::from_env() {
        println!(
            "using the LLM {} at {}",
            config.model,
            lprag::llm::redact_url(&config.base_url)
        );
        let chat = lprag::llm::OpenAiChat::new(config)?;
        let cached = lprag::llm::CachedChat::open(Arc::new(chat), "target/lprag-llm-cache")?;
        builder = builder.llm(Arc::new(cached));
    }
    let rag = builder.build(&docs).await?;
    let stats = rag.stats();
    println!("encoder: {}", rag.encoder().name());
    println!(
        "indexed {} documents into {} chunks, {} synthetic queries, {} chunk edges; trained {} epochs",
        stats.documents, stats.chunks, stats.queries, stats.chunk_edges, stats.train.epochs_run
    );
    println!(
        "example synthetic query: {:?}",
        rag.synthetic_queries().first().map(|q| &q.text)
    );
    for (stage, usage) in &stats.llm_usage {
        println!(
            "LLM {stage}: {} calls ({} from cache), {} prompt + {} completion tokens",
            usage.calls, usage.cached_calls, usage.prompt_tokens, usage.completion_tokens
        );
    }
    println!();

    // 3. Retrieve. Each question becomes a new node of the graph; the trained model scores
    //    its link to every chunk, and the chunks come back best first with σ(φ(q, c)).
    for question in [
        "Where was Marie Curie born?",
        "Which river flows through the city where Marie Curie was born?",
        "Who invented dynamite?",
        "Where is the Nobel Prize ceremony held?",
    ] {
        println!("Q: {question}");
        for hit in rag.retrieve(question, Selection::TopK(3)).await? {
            println!(
                "  {:.3}  [{}] {}",
                hit.score, hit.chunk.provenance.title, hit.chunk.text
            );
        }
        println!();
    }

    // 4. Persist and reload: the whole index (chunks, graph, embeddings, model) round-trips.
    let dir = std::env::temp_dir().join(format!("lprag-quickstart-{}", std::process::id()));
    rag.save(&dir)?;
    // `open` rebuilds the default encoder recorded in the index; an index built with your
    // own encoder is reloaded with `LpRag::load(dir, encoder)`.
    let reloaded = LpRag::open(&dir)?;
    let again = reloaded
        .retrieve("Who invented dynamite?", Selection::TopK(1))
        .await?;
    println!(
        "after reload, top hit for 'Who invented dynamite?': {}",
        again[0].chunk.text
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
