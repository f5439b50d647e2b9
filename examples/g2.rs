//! # G²RAG: communities of chunks, retrieved at two levels
//!
//! G²RAG groups chunks into *communities* — HDBSCAN clusters, cut into
//! subgroups along weak k-NN edges, merged back where two subgroups belong together —
//! and answers a question with both the closest chunks and the closest communities:
//!
//! ```text
//! cargo run --example g2
//! ```
//!
//! Offline, two subgroups merge when their centroids' cosine reaches θ; with an LLM, pass
//! `.llm(Arc::new(CachedChat::open(model, "llm-cache")?))` to the builder and the model
//! answers yes/no for every pair (the paper's M_LLM), each answer cached.

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{G2Config, G2Rag, G2Source, Retriever, Selection, SentenceChunker, StderrProgress};

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();

    // 1. Index. Ten short articles make few chunks, so this example splits them into
    //    sentences and lets three sentences form a cluster (the defaults, minPts = 5 on
    //    whole passages, suit corpora of hundreds of passages). Every other setting is the
    //    default: k = 3 neighbours per chunk inside a cluster, δ = 0.5 (k-NN edges with
    //    cosine < 0.5 are cut), θ = 0.5 (subgroups whose centres have cosine ≥ 0.5 merge
    //    back), HDBSCAN's noise points left out of every community.
    let rag = G2Rag::builder()
        .chunker(Arc::new(SentenceChunker::default()))
        .config(G2Config {
            min_cluster_size: 3,
            ..G2Config::default()
        })
        .progress(Arc::new(StderrProgress::new(25)))
        .build(&docs)
        .await?;
    let s = rag.stats();
    println!(
        "{} chunks → {} clusters ({} outliers) → {} components → {} subgroups → {} communities \
         ({} of {} pairs merged); built in {:.2} s",
        s.chunks,
        s.clusters,
        s.outliers,
        s.components,
        s.subgroups,
        s.communities,
        s.merges_accepted,
        s.merge_pairs,
        s.seconds
    );
    for (i, c) in rag.communities().iter().enumerate() {
        let first = &rag.chunks()[c.members[0]].text;
        println!(
            "  community {i}: {} chunks, e.g. {first:?}",
            c.members.len()
        );
    }

    // 2. Retrieve. The chunk level is plain dense search (top 5); the community level
    //    ranks communities by cos(query, centroid) (top 5) and takes each one's best
    //    chunks (at most 5). The two lists are interleaved, repeats dropped, and a
    //    `TopK` list the two cannot fill is padded with dense search order.
    for question in [
        "Which river flows through the city where Marie Curie was born?",
        "Who invented dynamite?",
    ] {
        let why = rag.explain(question).await?;
        println!(
            "\nQ: {question}\n   best communities: {:?}",
            why.communities
                .iter()
                .map(|&(c, s)| format!("{c} ({s:.2})"))
                .collect::<Vec<_>>()
        );
        for (hit, h) in rag
            .retrieve(question, Selection::TopK(4))
            .await?
            .iter()
            .zip(&why.merged)
        {
            let from = match h.source {
                G2Source::Chunk => "chunk level".to_string(),
                G2Source::Community(c) => format!("community {c}"),
                G2Source::Dense => "dense padding".to_string(),
            };
            println!("  {:.3}  [{from}] {}", hit.score, hit.chunk.text);
        }
    }
    Ok(())
}
