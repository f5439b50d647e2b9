//! Snapshot tests of every prompt as sent: a change to a paper prompt or to how chunks
//! are laid out shows up as a reviewed snapshot diff.

use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Chunk, Provenance, ScoredChunk};
use lprag_llm::{
    AnswerGenerator, ChatModel, ChatRequest, ChatResponse, LlmChunker, LlmError, LlmQueryGenerator,
    Prompts, Template,
};

struct Never;

#[async_trait]
impl ChatModel for Never {
    fn name(&self) -> &str {
        "never"
    }
    async fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Err(LlmError::Permanent("not called in snapshot tests".into()))
    }
}

fn render(r: &ChatRequest) -> String {
    r.messages
        .iter()
        .map(|m| format!("--- {:?} ---\n{}", m.role, m.content))
        .collect::<Vec<_>>()
        .join("\n")
}

fn scored(id: usize, text: &str, score: f32) -> ScoredChunk {
    ScoredChunk {
        chunk: Chunk {
            id,
            text: text.into(),
            provenance: Provenance {
                document_id: "d".into(),
                title: String::new(),
                span: 0..1,
            },
            metadata: Default::default(),
        },
        score,
    }
}

#[test]
fn chunk_prompt() {
    let r = LlmChunker::new(Arc::new(Never))
        .request("Marie Curie was born in Warsaw. She won two Nobel Prizes.")
        .unwrap();
    assert_eq!(r.temperature, Some(0.0));
    insta::assert_snapshot!(render(&r));
}

#[test]
fn query_prompt() {
    let r = LlmQueryGenerator::new(Arc::new(Never))
        .batch_request(&[
            "Marie Curie was born in Warsaw.",
            "Warsaw lies on the Vistula.",
        ])
        .unwrap();
    insta::assert_snapshot!(render(&r));
}

#[test]
fn doc2query_prompt() {
    let r = LlmQueryGenerator::doc2query(Arc::new(Never))
        .doc2query_request("Warsaw is the capital of Poland.", 20)
        .unwrap();
    insta::assert_snapshot!(render(&r));
}

#[test]
fn answer_prompt_sorts_chunks_by_score() {
    let g = AnswerGenerator::new(Arc::new(Never));
    let (r, order) = g
        .request(
            "Which river flows through the city where Marie Curie was born?",
            &[
                scored(4, "Warsaw lies on the Vistula.", 0.71),
                scored(9, "Marie Curie was born in Warsaw.", 0.93),
                scored(2, "Paris lies on the Seine.", 0.12),
            ],
        )
        .unwrap();
    assert_eq!(order, vec![9, 4, 2]);
    insta::assert_snapshot!(render(&r));
}

#[test]
fn custom_prompts_are_used_and_checked() {
    let prompts = Prompts {
        answer_chunk: Template::new("({{score}}) {{text}}"),
        ..Prompts::default()
    };
    let g = AnswerGenerator::new(Arc::new(Never))
        .with_prompts(Arc::new(prompts))
        .unwrap();
    let (r, _) = g.request("q?", &[scored(0, "A fact.", 0.5)]).unwrap();
    assert!(r.messages[1].content.contains("(0.50) A fact."));

    let broken = Prompts {
        chunk_user: Template::new("Split this."),
        ..Prompts::default()
    };
    let err = LlmChunker::new(Arc::new(Never))
        .with_prompts(Arc::new(broken))
        .err()
        .unwrap();
    assert!(err.to_string().contains("{{paragraph}}"), "{err}");
}
