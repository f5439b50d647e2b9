//! # A rig agent answering from an LP-RAG index
//!
//! Builds an `LpRag` index over the bundled ten-article corpus, serves it as a `Live`
//! index, and hands it to a rig agent (`rig-agent`) as dynamic context through
//! `lprag_adapters::rig::RigIndex`: for every prompt the agent retrieves the best chunks
//! from lprag and puts them before the question. rig's `InsertDocuments` adds an article
//! to the index while it serves, and the agent then answers from it.
//!
//! The agent's model is any rig provider; here an OpenAI-compatible server named by
//! `LPRAG_LLM_BASE_URL` and `LPRAG_LLM_MODEL` (`eval "$(scripts/llm-server.sh start)"`
//! starts SmolLM2-135M locally). Without one, the example says so and prints the context
//! the agent would have been given.
//!
//! ```text
//! cargo run --example rig_agent
//! ```

use std::sync::Arc;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::{Chunk, Live, LiveIndex, LpRag};
use lprag_adapters::rig::{RigIndex, RigJsonFilter};
use rig_agent::AgentBuilder;
use rig_core::embeddings::embed::{EmbedError, TextEmbedder};
use rig_core::providers::openai::wire::{BodyRewrite, LLAMACPP};
use rig_core::providers::openai::OpenAIConfig;
use rig_core::vector_store::request::VectorSearchRequest;
use rig_core::vector_store::{InsertDocuments, VectorStoreIndex};
use rig_core::Embed;

/// A document as a rig application has them: `Embed` says which text is indexed.
#[derive(serde::Serialize)]
struct Article {
    id: &'static str,
    title: &'static str,
    body: &'static str,
}

impl Embed for Article {
    fn embed(&self, embedder: &mut TextEmbedder) -> Result<(), EmbedError> {
        embedder.embed(self.body.to_string());
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    logging::init();
    let rag = LpRag::builder().build(&mini_corpus::documents()).await?;
    let live: Arc<dyn LiveIndex> = Arc::new(Live::new(rag));
    let index = RigIndex::live(live.clone());

    // rig writes into the index while it serves (one update; queries never wait).
    index
        .insert_documents(vec![(
            Article {
                id: "wieliczka",
                title: "Wieliczka Salt Mine",
                body: "The Wieliczka Salt Mine near Kraków was dug for salt from the 13th \
                       century until 1996; its chapels are carved out of rock salt.",
            },
            vec![],
        )])
        .await?;
    println!(
        "index: {} chunks after rig inserted one article",
        live.snapshot().chunks().len()
    );

    let questions = [
        "Who invented dynamite?",
        "What were the chapels of the Wieliczka mine carved from?",
    ];
    let server = std::env::var("LPRAG_LLM_BASE_URL").ok();
    let Some(base_url) = server else {
        println!(
            "no LLM server (set LPRAG_LLM_BASE_URL and LPRAG_LLM_MODEL, or run \
             `eval \"$(scripts/llm-server.sh start)\"`): showing the context a rig agent \
             would be given instead of its answer"
        );
        for q in questions {
            let request = VectorSearchRequest::<RigJsonFilter>::builder()
                .query(q)
                .samples(2)
                .build();
            println!("\n{q}");
            for hit in index.top_n::<Chunk>(request).await? {
                println!(
                    "  {:.3} [{}] {}",
                    hit.score, hit.document.provenance.document_id, hit.document.text
                );
            }
        }
        return Ok(());
    };
    let model_name = std::env::var("LPRAG_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
    // rig's HTTP client is reqwest, built in this workspace without a TLS provider of its
    // own (`rustls-no-provider`): the application names one before the first client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Any rig provider works here; a local OpenAI-compatible server needs no key. rig's
    // llama.cpp dialect sends message contents as lists of text parts, which
    // llama-cpp-python's server (scripts/llm-server.sh) refuses for system messages: the
    // parts go as one string instead (the rewrite rig uses for gateways that need it).
    let mut dialect = LLAMACPP;
    dialect.quirks.rewrite = BodyRewrite::Perplexity;
    let model = OpenAIConfig::with_key(&dialect, "")
        .with_base_url(base_url.as_str())
        .client()
        .chat(model_name.as_str());
    let agent = AgentBuilder::new(model)
        .preamble("Answer the question in one sentence, using only the documents given.")
        .temperature(0.0)
        .max_tokens(96)
        .dynamic_context(2, index.clone())
        .build();
    for q in questions {
        let response = agent.prompt(q).await?;
        println!(
            "\n{q}\n  agent ({model_name} at {base_url}): {}",
            response.output().trim()
        );
    }
    Ok(())
}
