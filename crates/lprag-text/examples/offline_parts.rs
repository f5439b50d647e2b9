//! The offline building blocks of lprag-text, one after the other: split documents into
//! atomic chunks, embed them with the feature-hashing encoder, and write synthetic queries.
//!
//! Run: `cargo run -p lprag-text --example offline_parts`

use lprag_core::{cosine, Chunk, Chunker, Document, Encoder, QueryGenerator};
use lprag_text::{HashingEncoder, HashingEncoderConfig, HeuristicQueryGenerator, SentenceChunker};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    // Errors are shown with `Display` (what failed and where), not `Debug`.
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> lprag_core::Result<()> {
    let docs = vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
        ),
        Document::new(
            "warsaw",
            "Warsaw",
            "Warsaw is the capital of Poland. The city lies on the Vistula River.",
        ),
    ];

    // 1. Atomic chunks, each with its document id, title and byte span.
    let chunks = SentenceChunker::default().chunk(&docs).await?;
    for c in &chunks {
        println!(
            "chunk {} [{} {:?}]: {}",
            c.id, c.provenance.document_id, c.provenance.span, c.text
        );
    }

    // 2. Embeddings: hashed word and character n-grams, IDF fitted on the chunks.
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let encoder = HashingEncoder::fitted(HashingEncoderConfig::default(), &texts)?;
    let emb = encoder.embed(&texts).await?;
    let q = encoder
        .embed_one("Which river flows through Warsaw?")
        .await?;
    let best = (0..emb.rows())
        .max_by(|&a, &b| cosine(emb.row(a), &q).total_cmp(&cosine(emb.row(b), &q)))
        .expect("chunks");
    println!("\nclosest chunk to the question: {}", chunks[best].text);

    // 3. Synthetic queries for A.2 batches (here: each chunk with its successor).
    let batches: Vec<Vec<usize>> = (0..chunks.len())
        .map(|i| vec![i, (i + 1) % chunks.len()])
        .collect();
    let queries = HeuristicQueryGenerator::default()
        .generate(&chunks, &batches)
        .await?;
    println!("\n{} synthetic queries, for example:", queries.len());
    for q in queries.iter().take(4) {
        println!("  {:?} -> chunks {:?}", q.text, q.chunk_ids);
    }
    Ok(())
}
