//! Chunks in a Lance table: create a store, add notes as one version, search with a
//! metadata filter pushed into LanceDB, and watch a second handle (another process, in a
//! real deployment) see the next version only when it refreshes.
//!
//! `cargo run --manifest-path crates/lprag-lance/Cargo.toml --example chunk_store`

use lprag_core::{Chunk, ChunkBatch, ChunkStore, Embeddings, Filter, Provenance};
use lprag_lance::{LanceStore, StoreSpec, DEFAULT_TABLE};

const DIM: usize = 64;

/// A toy embedding for the example (hashed lower-case words); use an `lprag` encoder for
/// real text.
fn embed(texts: &[String]) -> Embeddings {
    let mut data = vec![0.0; texts.len() * DIM];
    for (row, text) in texts.iter().enumerate() {
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let h = word
                .to_lowercase()
                .bytes()
                .fold(1469598103934665603u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(1099511628211)
                });
            data[row * DIM + (h % DIM as u64) as usize] += 1.0;
        }
    }
    Embeddings::new(DIM, data).expect("a whole number of rows")
}

fn note(doc: &str, text: &str, lang: &str) -> Chunk {
    let mut c = Chunk::new(
        0,
        text,
        Provenance {
            document_id: doc.into(),
            title: doc.into(),
            span: 0..text.len(),
        },
    );
    c.metadata.insert("lang".into(), lang.into());
    c
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let uri = dir.path().join("notes.lance");
    let uri = uri.to_string_lossy();

    let store = LanceStore::create(&uri, StoreSpec::new(DIM)).await?;
    let chunks = vec![
        note("curie", "Marie Curie discovered polonium and radium.", "en"),
        note(
            "curie-de",
            "Marie Curie entdeckte Polonium und Radium.",
            "de",
        ),
        note("meitner", "Lise Meitner explained nuclear fission.", "en"),
    ];
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let ids = store.append(ChunkBatch::new(chunks, embed(&texts))).await?;
    println!("added chunks {ids:?} as version {}", store.version());

    let reader = LanceStore::open(&uri, DEFAULT_TABLE).await?;
    let query = embed(&["Who discovered radium?".to_string()])
        .row(0)
        .to_vec();
    let hits = reader.nearest(&query, 2, &Filter::eq("lang", "en")).await?;
    let ids: Vec<usize> = hits.iter().map(|h| h.0).collect();
    for (chunk, (_, score)) in reader.chunks(&ids).await?.iter().zip(&hits) {
        println!(
            "{score:.3}  [{}] {}",
            chunk.provenance.document_id, chunk.text
        );
    }
    assert_eq!(hits.len(), 2, "two English notes");

    let more = vec![note(
        "hahn",
        "Otto Hahn discovered nuclear fission with Meitner.",
        "en",
    )];
    let texts: Vec<String> = more.iter().map(Chunk::embedding_text).collect();
    store.append(ChunkBatch::new(more, embed(&texts))).await?;
    println!(
        "writer at version {} ({} chunks); reader still at {} ({} chunks)",
        store.version(),
        store.len(),
        reader.version(),
        reader.len()
    );
    reader.refresh().await?;
    println!(
        "after refresh: reader at {} ({} chunks)",
        reader.version(),
        reader.len()
    );
    assert_eq!(reader.len(), 4);
    Ok(())
}
