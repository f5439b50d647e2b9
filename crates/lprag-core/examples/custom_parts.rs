//! A custom `Chunker` and `Encoder` written against lprag-core alone: one chunk per line,
//! and a toy bag-of-letters encoder. Any lprag retriever accepts them
//! (`LpRag::builder().chunker(..).encoder(..)`).
//!
//! Run: `cargo run -p lprag-core --example custom_parts`

use async_trait::async_trait;
use lprag_core::{
    cosine, Chunk, Chunker, Document, Embeddings, Encoder, Error, Provenance, Result,
};

/// One chunk per non-empty line, with its byte span in the document.
struct Lines;

#[async_trait]
impl Chunker for Lines {
    fn name(&self) -> &str {
        "lines"
    }

    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        let mut out = Vec::new();
        for d in documents {
            let mut start = 0;
            for line in d.text.split_inclusive('\n') {
                let text = line.trim_end();
                let span = start..start + text.len();
                start += line.len();
                if text.trim().is_empty() {
                    continue;
                }
                let provenance = Provenance {
                    document_id: d.id.clone(),
                    title: d.title.clone(),
                    span,
                };
                out.push(Chunk::new(out.len(), text, provenance));
            }
        }
        Ok(out)
    }
}

/// Letter frequencies a–z, L2-normalised: a stand-in for a real sentence encoder.
struct Letters;

#[async_trait]
impl Encoder for Letters {
    fn name(&self) -> &str {
        "letters"
    }

    fn dimension(&self) -> usize {
        26
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        let mut rows = Vec::with_capacity(texts.len() * 26);
        for t in texts {
            let mut v = [0f32; 26];
            for b in t.bytes().filter(u8::is_ascii_alphabetic) {
                v[(b.to_ascii_lowercase() - b'a') as usize] += 1.0;
            }
            let n = lprag_core::dot(&v, &v).sqrt().max(f32::MIN_POSITIVE);
            rows.extend(v.iter().map(|x| x / n));
        }
        Embeddings::new(26, rows)
    }
}

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

async fn run() -> Result<()> {
    let docs = vec![Document::new(
        "curie",
        "Marie Curie",
        "Marie Curie was born in Warsaw.\nShe won the Nobel Prize in Physics in 1903.\n",
    )];
    let chunks = Lines.chunk(&docs).await?;
    let texts: Vec<String> = chunks.iter().map(|c| c.text.clone()).collect();
    let emb = Letters.embed(&texts).await?;
    let query = Letters
        .embed(&["Where was Curie born?".to_string()])
        .await?;
    for (c, row) in chunks.iter().zip(emb.iter()) {
        let span = &c.provenance.span;
        if docs[0].text.get(span.clone()) != Some(c.text.as_str()) {
            return Err(Error::invalid(
                format!("chunk {}", c.id),
                "span does not match",
            ));
        }
        println!("{:.3}  {}", cosine(query.row(0), row), c.text);
    }
    Ok(())
}
