//! rig's models as lprag's parts, on rig's own local-runtime wire (`driver::Local`) with
//! transports written here, and rig's scripted completion model.

use std::sync::{Arc, Mutex};

use lprag_core::{Encoder, Reranker};
use lprag_llm::{ChatMessage, ChatModel, ChatRequest};
use rig_core::completion::Message;
use rig_core::driver::{Exchange, Local, Model, Opened, Opening, Step, Transport};
use rig_core::embeddings::{Embedding as Vector, EmbeddingResponse};
use rig_core::error::ProviderError;
use rig_core::operation::{Embedding, Rerank, RerankRequest};
use rig_core::rerank::{RerankResponse, RerankResult};
use rig_core::test_utils::MockCompletionModel;
use rig_core::wire::Capabilities;
use serde::Serialize;

use super::*;

/// Embeds each text as `[len, 1, 0]` (or a wrong width when asked to), recording batch
/// sizes.
#[derive(Clone, Default)]
struct Lengths {
    batches: Arc<Mutex<Vec<usize>>>,
    width: Option<usize>,
}

impl Transport<Local<Embedding>> for Lengths {
    fn send(&self, texts: Vec<String>, _exchange: Exchange) -> Opening<Step<Embedding>> {
        self.batches.lock().unwrap().push(texts.len());
        let width = self.width.unwrap_or(3);
        let vectors = texts
            .into_iter()
            .map(|t| {
                let mut vec = vec![t.len() as f64, 1.0, 0.0];
                vec.resize(width, 0.0);
                Vector { document: t, vec }
            })
            .collect();
        Opening::ready(Opened::new(futures::stream::iter([
            Ok::<_, ProviderError>(Step::End(EmbeddingResponse::new(vectors))),
        ])))
    }
}

fn embedding_model(max_documents: usize, ndims: usize, transport: Lengths) -> RigEncoder {
    let wire = Local::<Embedding>::new("local")
        .with_capabilities(Capabilities::embedding(max_documents, ndims));
    RigEncoder::new(Model::new(wire, transport)).unwrap()
}

#[tokio::test]
async fn a_rig_embedding_model_encodes_in_its_batches_and_normalises() {
    let transport = Lengths::default();
    let encoder = embedding_model(2, 3, transport.clone());
    assert_eq!(encoder.dimension(), 3);
    let texts: Vec<String> = ["a", "bbb", "cc", "dddd", "e"].map(String::from).to_vec();
    let e = encoder.embed(&texts).await.unwrap();
    assert_eq!(*transport.batches.lock().unwrap(), vec![2, 2, 1]);
    assert_eq!(e.rows(), 5);
    for (i, t) in texts.iter().enumerate() {
        let n = ((t.len() * t.len() + 1) as f32).sqrt();
        let row = e.row(i);
        assert!((row[0] - t.len() as f32 / n).abs() < 1e-6, "{row:?}");
        assert!((row[1] - 1.0 / n).abs() < 1e-6, "{row:?}");
    }
    assert!(encoder.fingerprint().unwrap().contains("local"));
}

#[tokio::test]
async fn widths_come_from_the_model_or_a_probe_and_are_checked() {
    let wire = || Local::<Embedding>::new("local");
    // No declared width: refused by `new`, learned by `probe`.
    let err = RigEncoder::new(Model::new(wire(), Lengths::default())).unwrap_err();
    assert!(err.to_string().contains("probe"), "{err}");
    let probed = RigEncoder::probe(Model::new(wire(), Lengths::default()))
        .await
        .unwrap();
    assert_eq!(probed.dimension(), 3);
    // A model that answers with another width than it was wrapped with.
    let wrong = Lengths {
        width: Some(4),
        ..Lengths::default()
    };
    let encoder = RigEncoder::with_dimension(Model::new(wire(), wrong), 3);
    let err = encoder.embed(&["x".to_string()]).await.unwrap_err();
    assert!(
        matches!(
            err,
            lprag_core::Error::DimensionMismatch {
                expected: 3,
                actual: 4,
                ..
            }
        ),
        "{err}"
    );
}

/// Scores each document by how many query words it holds, and returns them sorted (as
/// providers do), optionally leaving the last one out.
#[derive(Clone, Default)]
struct Overlap {
    drop_last: bool,
}

impl Transport<Local<Rerank>> for Overlap {
    fn send(&self, request: RerankRequest, _exchange: Exchange) -> Opening<Step<Rerank>> {
        let words: Vec<&str> = request.query.split_whitespace().collect();
        let mut results: Vec<RerankResult> = request
            .documents
            .iter()
            .enumerate()
            .map(|(index, d)| RerankResult {
                index,
                document: None,
                relevance_score: words.iter().filter(|w| d.contains(*w)).count() as f64,
            })
            .collect();
        if self.drop_last {
            results.pop();
        }
        results.sort_by(|a, b| b.relevance_score.total_cmp(&a.relevance_score));
        Opening::ready(Opened::new(futures::stream::iter([
            Ok::<_, ProviderError>(Step::End(RerankResponse::new(results))),
        ])))
    }
}

#[tokio::test]
async fn a_rig_rerank_model_scores_in_input_order_and_missing_scores_are_errors() {
    let wire = Local::<Rerank>::new("local").with_capabilities(Capabilities::embedding(2, 0));
    let reranker = RigReranker::new(Model::new(wire.clone(), Overlap::default()));
    let texts = ["nothing here", "salt mine", "salt", "mine salt Kraków"];
    let scores = reranker.score("salt mine Kraków", &texts).await.unwrap();
    assert_eq!(scores, vec![0.0, 2.0, 1.0, 3.0]);

    let partial = RigReranker::new(Model::new(wire, Overlap { drop_last: true }));
    let err = partial.score("salt", &texts).await.unwrap_err();
    assert!(err.to_string().contains("no score"), "{err}");
}

#[tokio::test]
async fn a_rig_completion_model_answers_lprag_chat_requests_role_for_role() {
    let model = MockCompletionModel::text("Warsaw.");
    let chat = RigChat::new(model.clone());
    let request = ChatRequest::new(vec![
        ChatMessage::system("Answer briefly."),
        ChatMessage::user("Where was Curie born?"),
        ChatMessage::assistant("Which Curie?"),
        ChatMessage::user("Marie."),
    ])
    .temperature(0.0)
    .max_tokens(16);
    let answer = chat.complete(&request).await.unwrap();
    assert_eq!(answer.content, "Warsaw.");
    assert!(chat.backend().starts_with("rig:"), "{}", chat.backend());

    let sent = model.requests();
    assert_eq!(sent.len(), 1);
    let sent = &sent[0];
    assert_eq!(sent.temperature, Some(0.0));
    assert_eq!(sent.max_tokens, Some(16));
    assert_eq!(sent.system_instructions(), Some("Answer briefly."));
    let expected = vec![
        Message::system("Answer briefly."),
        Message::user("Where was Curie born?"),
        Message::assistant("Which Curie?"),
        Message::user("Marie."),
    ];
    assert_eq!(
        serde_json::to_value(&sent.chat_history).unwrap(),
        serde_json::to_value(&expected).unwrap()
    );

    let empty = chat.complete(&ChatRequest::new(vec![])).await.unwrap_err();
    assert!(empty.to_string().contains("no messages"), "{empty}");
}

#[tokio::test]
async fn a_rig_completion_model_streams_its_text_fragments() {
    use futures::StreamExt;
    use rig_core::completion::Usage as RigUsage;
    use rig_core::test_utils::{mock_final, MockStreamEvent};
    let model = MockCompletionModel::from_stream_turns([vec![
        MockStreamEvent::text("War"),
        MockStreamEvent::text("saw"),
        MockStreamEvent::text("."),
        MockStreamEvent::FinalResponse(mock_final(RigUsage::new())),
    ]]);
    let chat = RigChat::new(model);
    let pieces: Vec<String> = chat
        .complete_stream(&ChatRequest::new(vec![ChatMessage::user("Where?")]))
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(pieces.concat(), "Warsaw.");
    assert!(pieces.len() >= 2, "{pieces:?}");
}

#[derive(Serialize)]
struct Note {
    id: Option<u64>,
    title: &'static str,
    body: &'static str,
    lang: &'static str,
    tags: Vec<&'static str>,
}

impl rig_core::Embed for Note {
    fn embed(
        &self,
        embedder: &mut rig_core::embeddings::embed::TextEmbedder,
    ) -> Result<(), rig_core::embeddings::embed::EmbedError> {
        embedder.embed(self.body.to_string());
        Ok(())
    }
}

#[test]
fn rig_documents_become_lprag_documents() {
    let note = |id| Note {
        id,
        title: "Salt",
        body: "Rock salt chapels.",
        lang: "en",
        tags: vec!["mine"],
    };
    let d = document_from_rig(note(Some(7)), &[]).unwrap();
    assert_eq!(d.id, "7");
    assert_eq!(d.title, "Salt");
    assert_eq!(d.text, "Rock salt chapels.");
    // Scalars kept as written; the body (already the text) and arrays left out.
    assert_eq!(d.metadata.len(), 1, "{:?}", d.metadata);
    assert_eq!(d.metadata["lang"], "en");

    // No id: a hash of the text, the same for the same text.
    let a = document_from_rig(note(None), &[]).unwrap();
    let b = document_from_rig(note(None), &[]).unwrap();
    assert!(a.id.starts_with("rig-") && a.id == b.id, "{}", a.id);

    // A document whose `Embed` yields nothing falls back to the embedded texts, and
    // with none of those either it is an error.
    let blank = Note {
        body: "",
        ..note(None)
    };
    let embedded = [Vector {
        document: "From the embedding.".into(),
        vec: vec![0.0],
    }];
    let d = document_from_rig(blank, &embedded).unwrap();
    assert_eq!(d.text, "From the embedding.");
    let blank = Note {
        body: "  ",
        ..note(None)
    };
    assert!(document_from_rig(blank, &[]).is_err());
}
