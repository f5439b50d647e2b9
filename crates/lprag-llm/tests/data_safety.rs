//! Data safety of the HTTP backends against a real HTTP server on loopback (wiremock):
//! requests go to the URL the user gave, with its query string where it belongs, and the
//! API key never comes back out in an error, even when the server quotes it.

use std::time::Duration;

use lprag_core::Encoder;
use lprag_llm::{
    ApiKey, ChatMessage, ChatModel, ChatRequest, HttpConfig, LlmError, OllamaChat, OllamaConfig,
    OpenAiChat, OpenAiConfig, OpenAiEmbeddings, OpenAiEmbeddingsConfig,
};
use serde_json::json;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "sk-proj-echoed0123456789abcdef";

/// Fast retries so tests do not sleep for real backoff.
fn fast() -> HttpConfig {
    HttpConfig {
        timeout: Duration::from_secs(5),
        max_retries: 1,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(2),
        ..HttpConfig::default()
    }
}

fn ask() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("x")])
}

fn completion(content: &str) -> serde_json::Value {
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}]
    })
}

#[tokio::test]
async fn a_query_string_in_the_base_url_stays_after_the_path() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(query_param("key", "abc"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("hi")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(query_param("key", "abc"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "message": {"role": "assistant", "content": "hi"}, "done": true
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(query_param("key", "abc"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [{"index": 0, "embedding": [1.0, 0.0]}]
        })))
        .expect(1)
        .mount(&server)
        .await;

    let mut config = OpenAiConfig::new(format!("{}/v1/?key=abc", server.uri()), "m");
    config.http = fast();
    let chat = OpenAiChat::new(config).unwrap();
    assert_eq!(
        chat.url(),
        format!("{}/v1/chat/completions?key=abc", server.uri())
    );
    assert_eq!(chat.complete(&ask()).await.unwrap().content, "hi");

    let mut config = OllamaConfig::new("llama3").base_url(format!("{}?key=abc", server.uri()));
    config.http = fast();
    let ollama = OllamaChat::new(config).unwrap();
    assert_eq!(ollama.complete(&ask()).await.unwrap().content, "hi");

    let mut config =
        OpenAiEmbeddingsConfig::new(format!("{}/v1?key=abc", server.uri()), "e").dimension(2);
    config.http = fast();
    let emb = OpenAiEmbeddings::new(config).unwrap();
    assert_eq!(emb.embed(&["t".to_string()]).await.unwrap().rows(), 1);
}

/// A response body built from the request's `Authorization` header.
type BodyOf = fn(&str) -> String;

/// Answers every request with `status` and a body built from the request's
/// `Authorization` header, as a careless proxy or server might.
struct EchoAuth {
    status: u16,
    body: BodyOf,
}

impl Respond for EchoAuth {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        ResponseTemplate::new(self.status)
            .insert_header("content-type", "application/json")
            .set_body_string((self.body)(&auth))
    }
}

async fn echo_server(status: u16, body: BodyOf) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(EchoAuth { status, body })
        .mount(&server)
        .await;
    server
}

fn assert_hidden(err: &impl std::fmt::Debug, shown: &str) {
    let debug = format!("{err:?}");
    for text in [shown, debug.as_str()] {
        assert!(!text.contains(KEY), "the key leaked: {text}");
        assert!(
            !text.contains("echoed0123"),
            "part of the key leaked: {text}"
        );
    }
}

#[tokio::test]
async fn an_error_body_echoing_the_authorization_header_does_not_leak_the_key() {
    let bodies: [(u16, BodyOf); 6] = [
        // OpenAI's shape, the header quoted in the message.
        (401, |auth| {
            json!({"error": {"message": format!("invalid header {auth}"), "code": "bad_auth"}})
                .to_string()
        }),
        // An error object without a message: the whole object is quoted.
        (400, |auth| {
            json!({"error": {"type": "bad", "api_key": auth.trim_start_matches("Bearer ")}})
                .to_string()
        }),
        // Plain text (a proxy's error page).
        (502, |auth| {
            format!("<html>upstream said no to {auth}</html>")
        }),
        // An error reported with HTTP 200.
        (200, |auth| {
            json!({"object": "error", "message": format!("key {auth} rejected")}).to_string()
        }),
        // A malformed 200 body, quoted as "body starts …".
        (200, |auth| format!("{{\"choices\": [ {auth}")),
        // A 200 body without choices, quoted by the parser.
        (200, |auth| json!({"echo": auth}).to_string()),
    ];
    for (status, body) in bodies {
        let server = echo_server(status, body).await;
        let mut config =
            OpenAiConfig::new(format!("{}/v1", server.uri()), "m").api_key(ApiKey::new(KEY));
        config.http = fast();
        let err = OpenAiChat::new(config)
            .unwrap()
            .complete(&ask())
            .await
            .unwrap_err();
        assert!(
            server.received_requests().await.unwrap().iter().all(|r| r
                .headers
                .get("authorization")
                .is_some_and(|v| v.to_str().unwrap() == format!("Bearer {KEY}"))),
            "the key must still be sent"
        );
        assert_hidden(&err, &err.to_string());
        let core: lprag_core::Error = err.into();
        assert_hidden(&core, &core.to_string());
    }
}

#[tokio::test]
async fn an_embeddings_error_echoing_the_key_does_not_leak_it() {
    let server = echo_server(403, |auth| {
        json!({"error": format!("forbidden: {auth}")}).to_string()
    })
    .await;
    let mut config = OpenAiEmbeddingsConfig::new(format!("{}/v1", server.uri()), "e")
        .api_key(ApiKey::new(KEY))
        .dimension(2);
    config.http = fast();
    let err = OpenAiEmbeddings::new(config)
        .unwrap()
        .embed(&["t".to_string()])
        .await
        .unwrap_err();
    assert_hidden(&err, &err.to_string());
}

#[test]
fn a_base_url_with_credentials_is_hidden_in_errors_about_it() {
    let err = OpenAiChat::new(OpenAiConfig::new("ftp://me:hunter2@h/v1?key=abc", "m")).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        !shown.contains("hunter2") && !shown.contains("abc"),
        "{shown}"
    );
    assert!(matches!(err, LlmError::Permanent(_)), "{shown}");
}
