//! # GFM-RAG: a query-dependent GNN over a knowledge-graph index
//!
//! GFM-RAG reads entities and triples out of every chunk, joins them into a
//! knowledge graph (with `equivalent` edges between near-identical names and an inverse for
//! every edge), and answers a question by running a query-dependent GNN from the entities
//! the question mentions. The best-scoring entities, weighted by 1/(number of chunks that
//! mention them), rank the chunks.
//!
//! ```text
//! cargo run --release --example gfm
//! ```
//!
//! Offline, triples come from the co-occurrence extractor (capitalised spans that share a
//! sentence, and the title that mentions them). With an LLM, pass
//! `.extractor(Arc::new(lprag::llm::LlmTripleExtractor::new(model)))` for the paper's OpenIE.

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{GfmConfig, GfmRag, Retriever, Selection, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();

    // 1. Index. The paper's network is d = 512, L = 6; `GfmConfig::cpu()` (d = 32, L = 3)
    //    trains in seconds on this corpus. Training: KG-completion pre-training (mask the head or
    //    tail of sampled triples), then fine-tuning — on labelled questions when
    //    `.labelled(...)` gives some, else on synthetic questions, one per sampled chunk.
    let mut config = GfmConfig::cpu();
    config.pretrain_queries = 200;
    // Eq. 16 scores a chunk by which of the top T entities it mentions (weighted 1/df),
    // not by how high they score: with ~50 entities here, the paper's T = 20 would be
    // almost the same set for every question. Scale T with the KG.
    config.top_entities = 5;
    let rag = GfmRag::builder()
        .config(config)
        .progress(Arc::new(StderrProgress::new(25)))
        .build(&docs)
        .await?;
    let s = rag.stats();
    println!(
        "{} chunks → {} entities, {} triples, {} equivalences, {} edges; built in {:.1} s",
        s.chunks, s.entities, s.triples, s.equivalent_pairs, s.edges, s.seconds
    );

    // 2. Retrieve. On ten articles the GNN learns from ten synthetic questions only, so
    //    expect rough rankings here; `docs/benchmarks.md` has MuSiQue-100 (1,890 passages).
    //    `explain` shows the linked query entities and the top entities the GNN
    //    found; `retrieve` ranks chunks by the top entities (padding with dense search
    //    when too few chunks mention them).
    for question in [
        "Which river flows through the city where Marie Curie was born?",
        "Who invented dynamite?",
    ] {
        let why = rag.explain(question).await?;
        let top: Vec<&str> = why
            .top_entities
            .iter()
            .take(5)
            .map(|(e, _)| e.as_str())
            .collect();
        println!(
            "\nQ: {question}\n   query entities {:?}{}; top entities {top:?}",
            why.query_entities,
            if why.fallback { " (nearest names)" } else { "" },
        );
        for hit in rag.retrieve(question, Selection::TopK(3)).await? {
            println!(
                "  {:.3}  [{}] {}",
                hit.score, hit.chunk.provenance.title, hit.chunk.text
            );
        }
    }

    // 3. Save and reopen: the KG as JSON, the GNN weights as burnpack.
    let dir = std::env::temp_dir().join("lprag-gfm-example");
    rag.save(&dir)?;
    let mut back = GfmRag::load(&dir, rag.encoder().clone())?;
    let again = back
        .retrieve("Who invented dynamite?", Selection::TopK(1))
        .await?;
    println!(
        "\nreopened from {}: {} entities; top hit again [{}]",
        dir.display(),
        back.entities().len(),
        again[0].chunk.provenance.title
    );

    // 4. Add a document: only its chunk goes to the extractor; the knowledge graph is
    //    rebuilt and the trained GNN scores it as it is (no retraining).
    let report = back
        .add_documents(&[lprag::Document::new(
            "krakow",
            "Kraków",
            "Kraków lies on the Vistula River in southern Poland. Kraków was the capital of Poland until 1596.",
        )])
        .await?;
    println!(
        "added {} chunk(s); {} entities now",
        report.added_chunks,
        back.entities().len()
    );
    Ok(())
}
