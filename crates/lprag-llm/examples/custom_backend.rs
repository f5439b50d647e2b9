//! Plugging your own LLM backend into lprag: implement `ChatModel` (one async method).
//! This one answers from a fixed table so the example runs offline.
//!
//! Run: `cargo run -p lprag-llm --example custom_backend`

use std::sync::Arc;

use async_trait::async_trait;
use lprag_llm::{ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmError, Usage};

/// A "model" that knows one fact and refuses everything else with a permanent error.
struct TinyOracle;

#[async_trait]
impl ChatModel for TinyOracle {
    fn name(&self) -> &str {
        "tiny-oracle"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let question = request
            .messages
            .last()
            .map(|m| m.content.to_lowercase())
            .unwrap_or_default();
        if question.contains("warsaw") {
            Ok(ChatResponse {
                content: "The Vistula.".into(),
                usage: Some(Usage {
                    prompt_tokens: question.split_whitespace().count() as u64,
                    completion_tokens: 2,
                }),
                finish_reason: Some("stop".into()),
                cached: false,
            })
        } else {
            Err(LlmError::Permanent(format!("no answer for {question:?}")))
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Shared as a trait object, as lprag's LLM components hold it.
    let model: Arc<dyn ChatModel> = Arc::new(TinyOracle);
    for q in [
        "Which river flows through Warsaw?",
        "Who painted the Mona Lisa?",
    ] {
        let request = ChatRequest::new(vec![
            ChatMessage::system("Answer in one short sentence."),
            ChatMessage::user(q),
        ])
        .temperature(0.0)
        .max_tokens(32);
        match model.complete(&request).await {
            Ok(r) => println!("{q} -> {} (usage {:?})", r.content, r.usage),
            Err(e) => println!("{q} -> error: {e}"),
        }
    }
}
