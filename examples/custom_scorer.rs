//! # A training-free custom scorer
//!
//! The smallest way to put your own ranking model into LP-RAG: implement [`LinkScorer`]
//! (a name and a `score` function) and hand it to the builder. The index is built as usual
//! (chunks, embeddings, mutual k-NN chunk graph) but nothing is trained; every query is
//! scored by your function, which reads the index's graph from its [`ScoreContext`].
//!
//! The scorer here smooths cosine similarity over the chunk graph: a chunk scores its own
//! similarity to the query plus a share of its graph neighbours' best similarity, so a
//! chunk next to a strong match moves up (multi-hop evidence often sits one edge away).
//!
//! ```text
//! cargo run --example custom_scorer
//! ```

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::extend::ScoreContext;
use lprag::{ChunkId, LinkScorer, LpRag, Retriever, Selection};

/// `logit = scale · ((1 − λ)·cos(q, c) + λ·max over neighbours n of cos(q, n)) + bias`.
struct NeighbourSmoothed {
    lambda: f32,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let n = norm(a) * norm(b);
    if n > 0.0 {
        dot / n
    } else {
        0.0
    }
}

impl LinkScorer for NeighbourSmoothed {
    fn name(&self) -> &str {
        "neighbour-smoothed-cosine"
    }

    fn score(
        &self,
        ctx: &ScoreContext<'_>,
        query: &[f32],
        candidates: &[ChunkId],
    ) -> lprag::Result<Vec<f32>> {
        let sim = |c: usize| ctx.chunk_features(c).map_or(0.0, |x| cosine(query, x));
        Ok(candidates
            .iter()
            .map(|&c| {
                let best_neighbour = ctx.neighbours[c]
                    .iter()
                    .map(|&n| sim(n as usize))
                    .fold(0.0f32, f32::max);
                let s = (1.0 - self.lambda) * sim(c) + self.lambda * best_neighbour;
                // σ(logit) ≥ 0.5 exactly when the smoothed similarity is ≥ 0.3.
                10.0 * (s - 0.3)
            })
            .collect())
    }
}

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();
    // `labelled_only(Vec::new())` skips writing synthetic queries: this scorer never reads
    // them (with an LLM configured, that saves its calls).
    let rag = LpRag::builder()
        .scorer(NeighbourSmoothed { lambda: 0.3 })
        .labelled_only(Vec::new())
        .build(&docs)
        .await?;
    println!(
        "scorer '{}' over {} chunks and {} chunk edges (trained epochs: {})",
        rag.predictor().name(),
        rag.stats().chunks,
        rag.stats().chunk_edges,
        rag.stats().train.epochs_run
    );

    let question = "Which river flows through the city where Marie Curie was born?";
    println!("Q: {question}");
    let hits = rag.retrieve(question, Selection::TopK(3)).await?;
    for hit in &hits {
        println!("  {:.3}  [{}]", hit.score, hit.chunk.provenance.title);
    }

    // Save and reopen: the index records the scorer's name, and `load_with_scorer` checks it.
    let dir = std::env::temp_dir().join(format!("lprag-custom-scorer-{}", std::process::id()));
    rag.save(&dir)?;
    let reopened = LpRag::load_with_scorer(
        &dir,
        rag.encoder().clone(),
        NeighbourSmoothed { lambda: 0.3 },
    )?;
    let again = reopened.retrieve(question, Selection::TopK(3)).await?;
    let same = hits
        .iter()
        .zip(&again)
        .all(|(a, b)| a.chunk.id == b.chunk.id);
    println!("reopened index ranks the same: {same}");
    std::fs::remove_dir_all(&dir).ok();
    assert!(same, "the reopened index ranked differently");
    Ok(())
}
