//! The HTTP backends against a real HTTP server on loopback (wiremock).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lprag_core::{Chunker, Document, Encoder, QueryGenerator};
use lprag_llm::{
    ApiKey, CachedChat, ChatMessage, ChatModel, ChatRequest, HttpConfig, LlmChunker, LlmError,
    LlmQueryGenerator, OllamaChat, OllamaConfig, OnUnparseable, OpenAiChat, OpenAiConfig,
    OpenAiEmbeddings, OpenAiEmbeddingsConfig, ResponseCache, TokenMeter,
};
use serde_json::{json, Value};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "sk-test-0123456789";

/// Fast retries so tests do not sleep for real backoff.
fn fast() -> HttpConfig {
    HttpConfig {
        timeout: Duration::from_secs(5),
        max_retries: 3,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..HttpConfig::default()
    }
}

fn openai(server: &MockServer, http: HttpConfig) -> OpenAiChat {
    let mut config =
        OpenAiConfig::new(format!("{}/v1", server.uri()), "test-model").api_key(ApiKey::new(KEY));
    config.http = http;
    OpenAiChat::new(config).unwrap()
}

fn completion(content: &str) -> Value {
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    })
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(text)])
}

/// Answer the first `n` requests with `first`, every later one with `then`.
async fn first_then(server: &MockServer, n: u64, first: ResponseTemplate, then: ResponseTemplate) {
    Mock::given(method("POST"))
        .respond_with(first)
        .up_to_n_times(n)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .respond_with(then)
        .with_priority(2)
        .mount(server)
        .await;
}

/// A server answering every request with `template`.
async fn always(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

/// One chat request ("x") to `server` with the fast retry settings.
async fn ask_x(server: &MockServer) -> Result<lprag_llm::ChatResponse, LlmError> {
    openai(server, fast()).complete(&ask("x")).await
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

#[tokio::test]
async fn openai_happy_path_sends_model_messages_and_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .and(body_partial_json(json!({
            "model": "test-model",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.0,
            "max_tokens": 5
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("hello")))
        .expect(1)
        .mount(&server)
        .await;
    let chat = openai(&server, fast());
    let r = chat
        .complete(&ask("hi").temperature(0.0).max_tokens(5))
        .await
        .unwrap();
    assert_eq!(r.content, "hello");
    assert_eq!(r.usage.unwrap().prompt_tokens, 11);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(chat.backend(), "openai");
}

#[tokio::test]
async fn ollama_happy_path() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(body_partial_json(json!({
            "model": "llama3", "stream": false, "options": {"num_predict": 7, "num_ctx": 8192}
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "llama3", "message": {"role": "assistant", "content": "Warsaw."},
            "done": true, "done_reason": "stop", "prompt_eval_count": 20, "eval_count": 2
        })))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = OllamaConfig::new("llama3").base_url(server.uri());
    config.http = fast();
    let chat = OllamaChat::new(config).unwrap();
    let r = chat.complete(&ask("where?").max_tokens(7)).await.unwrap();
    assert_eq!(r.content, "Warsaw.");
    assert_eq!(r.usage.unwrap().completion_tokens, 2);
    assert_eq!(chat.context_tokens(), Some(8192));

    // Ollama reports errors as {"error": "..."}.
    let server = always(
        ResponseTemplate::new(404).set_body_json(json!({"error": "model 'llama3' not found"})),
    )
    .await;
    let mut config = OllamaConfig::new("llama3").base_url(server.uri());
    config.http = fast();
    let err = OllamaChat::new(config)
        .unwrap()
        .complete(&ask("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Permanent(_)), "{err}");
    assert!(err.to_string().contains("not found"), "{err}");
    assert_eq!(requests(&server).await, 1);
}

#[tokio::test]
async fn ollama_sends_the_configured_context_size_and_the_chunker_uses_it() {
    let server = always(ResponseTemplate::new(200).set_body_json(json!({
        "model": "llama3", "message": {"role": "assistant", "content": "ok"},
        "done": true, "done_reason": "stop"
    })))
    .await;
    let chat = |num_ctx: Option<u32>| {
        let mut config = OllamaConfig::new("llama3")
            .base_url(server.uri())
            .num_ctx(num_ctx);
        config.http = fast();
        OllamaChat::new(config).unwrap()
    };
    let big = chat(Some(16384));
    big.complete(&ask("x")).await.unwrap();
    // None leaves the server's default: no num_ctx is sent.
    chat(None).complete(&ask("x")).await.unwrap();
    let options: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["options"].clone())
        .collect();
    assert_eq!(options[0]["num_ctx"], 16384);
    assert!(options[1].get("num_ctx").is_none(), "{}", options[1]);
    // The chunker sizes its windows to it, also through a cache.
    assert_eq!(
        LlmChunker::new(Arc::new(big.clone())).context_budget(),
        16384
    );
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedChat::open(Arc::new(big), dir.path()).unwrap();
    assert_eq!(LlmChunker::new(Arc::new(cached)).context_budget(), 16384);
    assert!(OllamaChat::new(OllamaConfig::new("m").num_ctx(Some(0))).is_err());
}

/// Answers embedding requests after a delay, counting the requests in flight: a request
/// counts from its arrival until a little before its answer is sent (so a request that
/// arrives after an earlier one's answer never finds it still counted).
struct SlowEmbed {
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    delay: Duration,
    fail_on: Option<String>,
}

impl Respond for SlowEmbed {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let (in_flight, early) = (self.in_flight.clone(), self.delay * 3 / 4);
        std::thread::spawn(move || {
            std::thread::sleep(early);
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let inputs = body["input"].as_array().unwrap();
        if let Some(bad) = &self.fail_on {
            if inputs.iter().any(|t| t == bad.as_str()) {
                return ResponseTemplate::new(400)
                    .set_body_json(json!({"error": {"message": "bad input"}}))
                    .set_delay(self.delay);
            }
        }
        // Each text is "t<n>": its vector is [n, 1].
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n: f32 = t.as_str().unwrap()[1..].parse().unwrap();
                json!({"index": i, "embedding": [n, 1.0]})
            })
            .collect();
        ResponseTemplate::new(200)
            .set_body_json(json!({"data": data}))
            .set_delay(self.delay)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embeddings_send_batches_concurrently_up_to_the_limit_in_order() {
    async fn run(
        concurrency: usize,
        fail_on: Option<&str>,
    ) -> (lprag_core::Result<lprag_core::Embeddings>, usize, usize) {
        let server = MockServer::start().await;
        let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .respond_with(SlowEmbed {
                in_flight,
                peak: peak.clone(),
                delay: Duration::from_millis(200),
                fail_on: fail_on.map(str::to_string),
            })
            .mount(&server)
            .await;
        let mut config = OpenAiEmbeddingsConfig::new(format!("{}/v1", server.uri()), "emb")
            .dimension(2)
            .concurrency(concurrency);
        config.batch_size = 3;
        config.normalize = false;
        config.http = HttpConfig {
            max_retries: 0,
            ..fast()
        };
        let texts: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
        let e = OpenAiEmbeddings::new(config).unwrap().embed(&texts).await;
        let n = requests(&server).await;
        (e, peak.load(Ordering::SeqCst), n)
    }
    // Ten batches, at most four at once, rows in the order of the texts.
    let (e, peak, n) = run(4, None).await;
    let e = e.unwrap();
    assert_eq!(n, 10);
    assert!(peak <= 4 && peak > 1, "{peak} batches in flight at once");
    assert_eq!(e.rows(), 30);
    for i in 0..30 {
        assert_eq!(e.row(i)[0], i as f32, "row {i}");
    }
    // One at a time when asked.
    let (_, peak, _) = run(1, None).await;
    assert_eq!(peak, 1);
    // A failed batch fails the call: no partial result.
    let (e, _, _) = run(4, Some("t13")).await;
    let err = e.unwrap_err();
    assert!(err.to_string().contains("bad input"), "{err}");
}

#[tokio::test]
async fn embeddings_happy_path_batches_and_reorders() {
    let server = MockServer::start().await;
    struct Embed;
    impl Respond for Embed {
        fn respond(&self, req: &Request) -> ResponseTemplate {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let inputs = body["input"].as_array().unwrap();
            // Answer in reverse order: the client must sort by `index`.
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| {
                    let len = t.as_str().unwrap().len() as f32;
                    json!({"object": "embedding", "index": i, "embedding": [len, 1.0, 0.0]})
                })
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data}))
        }
    }
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(Embed)
        .mount(&server)
        .await;
    let mut config = OpenAiEmbeddingsConfig::new(format!("{}/v1", server.uri()), "emb")
        .api_key(ApiKey::new(KEY));
    config.batch_size = 2;
    config.normalize = false;
    config.http = fast();
    let enc = OpenAiEmbeddings::connect(config.clone()).await.unwrap();
    assert_eq!(enc.dimension(), 3);
    assert_eq!(requests(&server).await, 1, "one probe request");
    let texts: Vec<String> = ["a", "bbb", "cc"].iter().map(|s| s.to_string()).collect();
    let e = enc.embed(&texts).await.unwrap();
    assert_eq!(e.rows(), 3);
    assert_eq!(e.row(0)[0], 1.0);
    assert_eq!(e.row(1)[0], 3.0);
    assert_eq!(e.row(2)[0], 2.0);
    assert_eq!(
        requests(&server).await,
        3,
        "probe + two batches of at most 2"
    );

    // A declared dimension that the server does not honour is a typed error.
    let wrong = OpenAiEmbeddings::new(config.dimension(5)).unwrap();
    let err = wrong.embed(&texts).await.unwrap_err();
    assert!(
        matches!(err, lprag_core::Error::DimensionMismatch { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after() {
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "1")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
        ResponseTemplate::new(200).set_body_json(completion("ok")),
    )
    .await;
    let chat = openai(&server, fast());
    let t = Instant::now();
    let r = chat.complete(&ask("x")).await.unwrap();
    let waited = t.elapsed();
    assert_eq!(r.content, "ok");
    assert_eq!(requests(&server).await, 2);
    // The backoff is ≤ 5 ms here, so a ≥ 1 s wait can only come from Retry-After.
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
}

#[tokio::test]
async fn a_huge_retry_after_is_capped_not_a_panic() {
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "1e20")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
        ResponseTemplate::new(200).set_body_json(completion("ok")),
    )
    .await;
    let http = HttpConfig {
        max_retry_after: Duration::from_millis(20),
        ..fast()
    };
    let chat = openai(&server, http);
    let t = Instant::now();
    assert_eq!(chat.complete(&ask("x")).await.unwrap().content, "ok");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(requests(&server).await, 2);
}

#[tokio::test]
async fn server_error_then_success_and_giving_up() {
    let server = MockServer::start().await;
    first_then(
        &server,
        2,
        ResponseTemplate::new(500).set_body_string("internal error"),
        ResponseTemplate::new(200).set_body_json(completion("ok")),
    )
    .await;
    let chat = openai(&server, fast());
    assert_eq!(chat.complete(&ask("x")).await.unwrap().content, "ok");
    assert_eq!(requests(&server).await, 3);

    // Always 503: gives up after 1 + max_retries attempts with a transient error.
    let server = always(ResponseTemplate::new(503).set_body_string("overloaded")).await;
    let err = ask_x(&server).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        err.to_string().contains("gave up after 4 attempts"),
        "{err}"
    );
    assert_eq!(requests(&server).await, 4);
}

#[tokio::test]
async fn timeouts_are_retried_then_reported() {
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        ResponseTemplate::new(200)
            .set_body_json(completion("late"))
            .set_delay(Duration::from_secs(3)),
        ResponseTemplate::new(200).set_body_json(completion("on time")),
    )
    .await;
    let http = HttpConfig {
        timeout: Duration::from_millis(300),
        ..fast()
    };
    let chat = openai(&server, http.clone());
    assert_eq!(chat.complete(&ask("x")).await.unwrap().content, "on time");

    let slow = always(
        ResponseTemplate::new(200)
            .set_body_json(completion("late"))
            .set_delay(Duration::from_secs(3)),
    )
    .await;
    let err = openai(
        &slow,
        HttpConfig {
            max_retries: 1,
            ..http
        },
    )
    .complete(&ask("x"))
    .await
    .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_eq!(requests(&slow).await, 2);
}

#[tokio::test]
async fn malformed_json_is_retried_and_reported_with_the_body() {
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        ResponseTemplate::new(200).set_body_string("{\"choices\": [{\"mess"),
        ResponseTemplate::new(200).set_body_json(completion("ok")),
    )
    .await;
    assert_eq!(ask_x(&server).await.unwrap().content, "ok");

    let broken = always(ResponseTemplate::new(200).set_body_string("<html>gateway</html>")).await;
    let err = ask_x(&broken).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("malformed JSON") && msg.contains("<html>gateway"),
        "{msg}"
    );
}

#[tokio::test]
async fn errors_sent_with_http_200_are_detected_and_classified() {
    // Permanent in-band error: no retry.
    let server = always(ResponseTemplate::new(200).set_body_json(json!({
        "error": {"message": "The model `x` does not exist", "code": "model_not_found"}
    })))
    .await;
    let err = ask_x(&server).await.unwrap_err();
    assert!(matches!(err, LlmError::Permanent(_)), "{err}");
    assert!(err.to_string().contains("HTTP 200"), "{err}");
    assert_eq!(requests(&server).await, 1);

    // Transient in-band error (a proxy's rate limit): retried.
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "error", "message": "Server overloaded, try again", "code": 503
        })),
        ResponseTemplate::new(200).set_body_json(completion("ok")),
    )
    .await;
    assert_eq!(ask_x(&server).await.unwrap().content, "ok");

    // Context length: its own class, not retried.
    let server = always(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}
        }))).await;
    let err = ask_x(&server).await.unwrap_err();
    assert!(matches!(err, LlmError::ContextLength(_)), "{err}");
    assert_eq!(requests(&server).await, 1);
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_debug_or_the_cache() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": "Incorrect API key provided"}})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    let chat = Arc::new(openai(&server, fast()));
    assert!(!format!("{chat:?}").contains(KEY));
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedChat::open(chat.clone(), dir.path()).unwrap();
    cached.complete(&ask("a")).await.unwrap();
    let err = cached.complete(&ask("b")).await.unwrap_err();
    assert!(matches!(err, LlmError::Permanent(_)), "{err}");
    assert!(!err.to_string().contains(KEY) && !format!("{err:?}").contains(KEY));
    for entry in walk(dir.path()) {
        let text = std::fs::read_to_string(&entry).unwrap();
        assert!(!text.contains(KEY), "{}", entry.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Records when each request arrived and answers after `delay`.
struct Recorder {
    arrivals: Arc<Mutex<Vec<Instant>>>,
    delay: Duration,
}

impl Respond for Recorder {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.arrivals.lock().unwrap().push(Instant::now());
        ResponseTemplate::new(200)
            .set_body_json(completion("ok"))
            .set_delay(self.delay)
    }
}

/// Largest number of requests that arrived within any window shorter than `delay`. Each
/// request holds its permit until its response (sent `delay` after arrival) is read, so
/// with a limit of L no more than L can arrive within such a window.
fn most_within(arrivals: &[Instant], delay: Duration) -> usize {
    let mut a = arrivals.to_vec();
    a.sort();
    (0..a.len())
        .map(|i| a[i..].iter().take_while(|t| **t - a[i] < delay).count())
        .max()
        .unwrap_or(0)
}

async fn fire(n: usize, limit: usize, delay: Duration) -> (Vec<Instant>, usize) {
    let server = MockServer::start().await;
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .respond_with(Recorder {
            arrivals: arrivals.clone(),
            delay,
        })
        .mount(&server)
        .await;
    let chat = Arc::new(openai(
        &server,
        HttpConfig {
            max_concurrency: limit,
            ..fast()
        },
    ));
    let calls = (0..n).map(|i| {
        let chat = chat.clone();
        async move { chat.complete(&ask(&format!("q{i}"))).await }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let a = arrivals.lock().unwrap().clone();
    (a, ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_requests_never_exceed_the_limit_of_four() {
    let delay = Duration::from_millis(150);
    let (arrivals, ok) = fire(50, 4, delay).await;
    assert_eq!(ok, 50);
    assert_eq!(arrivals.len(), 50);
    let peak = most_within(&arrivals, delay);
    assert!(peak <= 4, "{peak} requests in flight at once");
    // And the limit was actually used (the test is not passing by being serial).
    assert_eq!(peak, 4);

    // The same measurement does see a looser limit.
    let (arrivals, _) = fire(20, 16, delay).await;
    assert!(most_within(&arrivals, delay) > 4);
}

/// Answers a C-PROMPT with the paragraph's sentences as chunks; refuses paragraphs that
/// contain "FAIL" with a permanent error while `fail` is set.
struct ChunkServer {
    seen: Arc<AtomicUsize>,
    fail: bool,
    delay: Duration,
}

impl Respond for ChunkServer {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.seen.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let user = body["messages"][1]["content"].as_str().unwrap();
        let paragraph = user
            .lines()
            .filter(|l| !l.starts_with("[The "))
            .collect::<Vec<_>>()
            .join(" ");
        if self.fail && paragraph.contains("FAIL") {
            return ResponseTemplate::new(400)
                .set_body_json(json!({"error": {"message": "content policy"}}));
        }
        let chunks: String = paragraph
            .split_inclusive('.')
            .map(|s| format!("[{}]\n", s.trim()))
            .collect();
        ResponseTemplate::new(200)
            .set_body_json(completion(&format!(
                "[Sentence 1]\n{paragraph}\n[Extracted Chunks in Sentence 1]\n{chunks}"
            )))
            .set_delay(self.delay)
    }
}

fn docs(n: usize) -> Vec<Document> {
    (0..n)
        .map(|i| {
            let extra = if i % 4 == 3 { " FAIL marker." } else { "" };
            Document::new(
                format!("d{i}"),
                format!("Doc {i}"),
                format!("Fact number {i} is true. Another fact about item {i}.{extra}"),
            )
        })
        .collect()
}

async fn chunk_server(fail: bool, delay: Duration) -> (MockServer, Arc<AtomicUsize>) {
    let server = MockServer::start().await;
    let seen = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .respond_with(ChunkServer {
            seen: seen.clone(),
            fail,
            delay,
        })
        .mount(&server)
        .await;
    (server, seen)
}

#[tokio::test]
async fn a_killed_run_resumes_from_the_cache_without_repeating_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let documents = docs(12);

    // Run 1: one document at a time, killed once five answers are cached.
    let (server, seen1) = chunk_server(false, Duration::from_millis(30)).await;
    let cached = Arc::new(CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap());
    let cache: Arc<ResponseCache> = cached.cache().clone();
    let chunker = LlmChunker::new(cached.clone()).concurrency(1);
    let docs1 = documents.clone();
    let run = tokio::spawn(async move { chunker.chunk(&docs1).await });
    while cache.disk_usage().unwrap().0 < 5 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.abort();
    let _ = run.await;
    let (cached_after_kill, _) = cache.disk_usage().unwrap();
    assert!((5..12).contains(&(cached_after_kill as usize)));

    // Run 2, a fresh process in effect: a new server, a new cache handle on the same dir.
    let (server2, seen2) = chunk_server(false, Duration::ZERO).await;
    let meter = Arc::new(TokenMeter::new());
    let cached2 =
        Arc::new(CachedChat::open(Arc::new(openai(&server2, fast())), dir.path()).unwrap());
    let chunks = LlmChunker::new(cached2.clone())
        .with_meter(meter.clone())
        .chunk(&documents)
        .await
        .unwrap();
    // Only the documents without a cached answer were requested again.
    assert_eq!(
        seen2.load(Ordering::SeqCst),
        12 - cached_after_kill as usize
    );
    assert_eq!(cached2.cache().stats().hits, cached_after_kill);
    let usage = meter.snapshot()["chunking"];
    assert_eq!(usage.calls, 12);
    assert_eq!(usage.cached_calls, cached_after_kill);
    assert_eq!(usage.prompt_tokens, 11 * (12 - cached_after_kill));
    // Every document produced its chunks, in document order, with provenance.
    let ids: Vec<&str> = chunks
        .iter()
        .map(|c| c.provenance.document_id.as_str())
        .collect();
    assert_eq!(ids.iter().filter(|d| **d == "d0").count(), 2);
    assert!(chunks.iter().enumerate().all(|(i, c)| c.id == i));
    assert!(seen1.load(Ordering::SeqCst) >= 5);

    // Run 3: everything cached, nothing requested.
    let (server3, seen3) = chunk_server(false, Duration::ZERO).await;
    let cached3 =
        Arc::new(CachedChat::open(Arc::new(openai(&server3, fast())), dir.path()).unwrap());
    let again = LlmChunker::new(cached3).chunk(&documents).await.unwrap();
    assert_eq!(again, chunks);
    assert_eq!(seen3.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn failures_midway_keep_the_successes_and_a_rerun_pays_only_for_the_failures() {
    let dir = tempfile::tempdir().unwrap();
    let documents = docs(12); // d3, d7, d11 contain FAIL
    let (server, seen) = chunk_server(true, Duration::ZERO).await;
    let cached = Arc::new(CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap());
    let err = LlmChunker::new(cached)
        .chunk(&documents)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("3 of 12"), "{err}");
    assert!(err.contains("`d3`"), "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), 12);

    let (server2, seen2) = chunk_server(false, Duration::ZERO).await;
    let cached2 =
        Arc::new(CachedChat::open(Arc::new(openai(&server2, fast())), dir.path()).unwrap());
    let chunks = LlmChunker::new(cached2).chunk(&documents).await.unwrap();
    assert_eq!(seen2.load(Ordering::SeqCst), 3);
    assert!(chunks.iter().any(|c| c.text.contains("FAIL marker")));
}

#[tokio::test]
async fn unparseable_answers_fall_back_or_are_typed_errors_with_the_raw_text() {
    let server = always(
        ResponseTemplate::new(200).set_body_json(completion("I'm sorry, I can't help with that.")),
    )
    .await;
    let chat = Arc::new(openai(&server, fast()));
    let chunks = vec![lprag_core::Chunk {
        id: 0,
        text: "Warsaw is the capital of Poland.".into(),
        provenance: lprag_core::Provenance {
            document_id: "w".into(),
            title: String::new(),
            span: 0..10,
        },
        metadata: Default::default(),
    }];

    // Default: asked once more, then the offline component, counted and warned about.
    let meter = Arc::new(TokenMeter::new());
    let warnings = Arc::new(Warnings::default());
    let documents = docs(1);
    let got = LlmChunker::new(chat.clone())
        .with_meter(meter.clone())
        .with_progress(warnings.clone())
        .chunk(&documents)
        .await
        .unwrap();
    let offline = lprag_text::SentenceChunker::default()
        .chunk(&documents)
        .await
        .unwrap();
    assert_eq!(got, offline);
    assert_eq!(requests(&server).await, 2, "one retry");
    let usage = meter.snapshot()["chunking"];
    assert_eq!((usage.calls, usage.fallbacks), (2, 1));
    let w = warnings.0.lock().unwrap().clone();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("1 of 1 documents") && w[0].contains("I'm sorry"),
        "{w:?}"
    );

    let q = LlmQueryGenerator::doc2query(chat.clone())
        .parse_retries(0)
        .with_meter(meter.clone())
        .generate(&chunks, &[vec![0]])
        .await
        .unwrap();
    assert!(!q.is_empty() && q.iter().all(|q| q.chunk_ids == vec![0]));
    assert_eq!(requests(&server).await, 3, "no retry with parse_retries(0)");
    assert_eq!(meter.snapshot()["queries"].fallbacks, 1);

    // Strict: the stage fails, naming the item and carrying the raw answer.
    let err = LlmChunker::new(chat.clone())
        .on_unparseable(OnUnparseable::Fail)
        .chunk(&docs(1))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("chunk list for document `d0`"), "{msg}");
    assert!(msg.contains("I'm sorry"), "{msg}");
    let err = LlmQueryGenerator::doc2query(chat)
        .on_unparseable(OnUnparseable::Fail)
        .generate(&chunks, &[vec![0]])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("Doc2Query pairs for chunk 0"),
        "{err}"
    );
}

#[tokio::test]
async fn a_retry_shows_the_model_its_answer_and_the_reason() {
    // First answer unreadable, the retry (which carries the first answer) readable.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let messages = body["messages"].as_array().unwrap();
            let answer = if messages.len() == 2 {
                "I'm sorry, I can't.".to_string()
            } else {
                assert_eq!(messages.len(), 4);
                assert_eq!(messages[2]["role"], "assistant");
                assert_eq!(messages[2]["content"], "I'm sorry, I can't.");
                let again = messages[3]["content"].as_str().unwrap();
                assert!(again.contains("could not be read"), "{again}");
                "[Sentence 1]\nd0 text.\n[Extracted Chunks in Sentence 1]\n[Document d0 is about Warsaw.]".to_string()
            };
            ResponseTemplate::new(200).set_body_json(completion(&answer))
        })
        .mount(&server)
        .await;
    let meter = Arc::new(TokenMeter::new());
    let documents = vec![lprag_core::Document::new(
        "d0",
        "",
        "Document d0 is about Warsaw.",
    )];
    let chunks = LlmChunker::new(Arc::new(openai(&server, fast())))
        .with_meter(meter.clone())
        .chunk(&documents)
        .await
        .unwrap();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].text, "Document d0 is about Warsaw.");
    let usage = meter.snapshot()["chunking"];
    assert_eq!((usage.calls, usage.fallbacks), (2, 0));
}

/// A progress sink that keeps warnings.
#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

impl lprag_core::Progress for Warnings {
    fn warn(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_string());
    }
}

#[tokio::test]
async fn query_generators_link_queries_to_their_batch_or_chunk() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"messages": [{"role": "system"}]})))
        .respond_with(|req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let system = body["messages"][0]["content"].as_str().unwrap();
            let user = body["messages"][1]["content"].as_str().unwrap();
            let answer = if system.contains("Doc2Query") && user.contains("Vistula") {
                r#"[{"index": 0, "query": "Which river flows through Warsaw?", "answer": "The Vistula"},
 {"index": 1, "query": "What flows through Warsaw?", "answer": "The Vistula"}]"#
            } else if system.contains("Doc2Query") {
                r#"```json
[{"index": 0, "query": "What is the capital of Poland?", "answer": "Warsaw"},
 {"index": 1, "query": "Which country has Warsaw as capital?", "answer": "Poland"}]
```"#
            } else {
                "[Questions Chunk 1]\n[What is the capital of Poland?]\n[Which city is Poland's capital?]\n[Questions Chunk 2]\n[Which river flows through Warsaw?]\n[What river runs through the Polish capital?]"
            };
            ResponseTemplate::new(200).set_body_json(completion(answer))
        })
        .mount(&server)
        .await;
    let chat: Arc<dyn ChatModel> = Arc::new(openai(&server, fast()));
    let chunk = |id: usize, text: &str| lprag_core::Chunk {
        id,
        text: text.into(),
        provenance: lprag_core::Provenance {
            document_id: "w".into(),
            title: "Warsaw".into(),
            span: 0..1,
        },
        metadata: Default::default(),
    };
    let chunks = vec![
        chunk(0, "Warsaw is the capital of Poland."),
        chunk(1, "The Vistula flows through Warsaw."),
    ];
    let meter = Arc::new(TokenMeter::new());
    let q = LlmQueryGenerator::new(chat.clone())
        .with_meter(meter.clone())
        .generate(&chunks, &[vec![0, 1]])
        .await
        .unwrap();
    assert_eq!(q.len(), 4);
    assert!(q
        .iter()
        .all(|s| s.chunk_ids == vec![0, 1] && s.answer.is_none()));
    assert_eq!(meter.snapshot()["queries"].calls, 1);

    let q = LlmQueryGenerator::doc2query(chat.clone())
        .generate(&chunks, &[vec![0, 1], vec![1]])
        .await
        .unwrap();
    // One call per distinct chunk, pairs linked to that chunk only.
    assert_eq!(q.len(), 4);
    assert_eq!(q[0].chunk_ids, vec![0]);
    assert_eq!(q[2].chunk_ids, vec![1]);
    assert_eq!(q[0].answer.as_deref(), Some("Warsaw"));
    assert_eq!(requests(&server).await, 3);

    // Out-of-range batch ids are refused before any call.
    let err = LlmQueryGenerator::new(chat)
        .generate(&chunks, &[vec![0, 5]])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("batches[0]"), "{err}");
    assert_eq!(requests(&server).await, 3);
}

#[tokio::test]
async fn a_response_body_over_the_limit_is_refused_not_buffered() {
    let big = "x".repeat(64 * 1024);
    let server = always(ResponseTemplate::new(200).set_body_json(completion(&big))).await;
    let small = HttpConfig {
        max_body_bytes: 16 * 1024,
        ..fast()
    };
    let err = openai(&server, small)
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Permanent(_)), "{err:?}");
    assert!(err.to_string().contains("max_body_bytes"), "{err}");
    // The default limit reads it.
    let ok = openai(&server, fast()).complete(&ask("hi")).await.unwrap();
    assert_eq!(ok.content.len(), big.len());
}

#[tokio::test]
async fn an_unreadable_answer_is_not_replayed_from_the_cache_on_a_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let documents = docs(1);
    // Two unreadable answers (the first and its reformat retry), then the real thing.
    let server = MockServer::start().await;
    first_then(
        &server,
        2,
        ResponseTemplate::new(200).set_body_json(completion("I'm sorry, I can't help with that.")),
        ResponseTemplate::new(200).set_body_json(completion(
            "[Sentence 1]\nFact number 0 is true.\n[Extracted Chunks in Sentence 1]\n[Another fact about item 0 is true.]\n",
        )),
    )
    .await;
    let cached = Arc::new(CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap());
    let first = LlmChunker::new(cached.clone())
        .chunk(&documents)
        .await
        .unwrap();
    assert!(
        !first
            .iter()
            .any(|c| c.text == "Another fact about item 0 is true."),
        "run 1 falls back to the offline chunker: {first:?}"
    );
    assert_eq!(
        cached.cache().disk_usage().unwrap().0,
        0,
        "nothing unreadable is kept"
    );
    let second = LlmChunker::new(cached.clone())
        .chunk(&documents)
        .await
        .unwrap();
    assert_eq!(
        second.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        vec!["Another fact about item 0 is true."],
        "run 2 asks again and reads the answer"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    // The readable answer is cached: run 3 asks nothing.
    let third = LlmChunker::new(cached).chunk(&documents).await.unwrap();
    assert_eq!(third, second);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn kept_unreadable_answers_make_a_rerun_free_and_fall_back_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let documents = docs(1);
    // Every answer unreadable: the first and its reformat retry.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("I'm sorry, I can't help with that.")),
        )
        .mount(&server)
        .await;
    let cached = Arc::new(
        CachedChat::open(Arc::new(openai(&server, fast())), dir.path())
            .unwrap()
            .keep_unreadable(true),
    );
    let first = LlmChunker::new(cached.clone())
        .chunk(&documents)
        .await
        .unwrap();
    assert_eq!(
        cached.cache().disk_usage().unwrap().0,
        2,
        "both unreadable answers are kept"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    let second = LlmChunker::new(cached).chunk(&documents).await.unwrap();
    assert_eq!(second, first, "the rerun falls back exactly as run 1 did");
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2,
        "the rerun asks nothing"
    );
}

#[tokio::test]
async fn an_answer_cut_at_the_token_limit_is_split_and_asked_again_over_http() {
    // The server cuts answers to paragraphs over 300 bytes (finish_reason "length").
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let user = body["messages"][1]["content"].as_str().unwrap();
            let paragraph = user
                .lines()
                .filter(|l| !l.starts_with("[The "))
                .collect::<Vec<_>>()
                .join(" ");
            let chunks: String = paragraph
                .split_inclusive('.')
                .map(|s| format!("[{}]\n", s.trim()))
                .collect();
            let answer =
                format!("[Sentence 1]\n{paragraph}\n[Extracted Chunks in Sentence 1]\n{chunks}");
            let mut reply = completion(&answer);
            if paragraph.len() > 300 {
                reply["choices"][0]["message"]["content"] = json!(answer[..answer.len() / 2]);
                reply["choices"][0]["finish_reason"] = json!("length");
            }
            ResponseTemplate::new(200).set_body_json(reply)
        })
        .mount(&server)
        .await;
    let text: String = (0..12)
        .map(|i| format!("Sentence number {i} names the city of Town{i}."))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(text.len() > 300);
    let meter = Arc::new(TokenMeter::new());
    let chunker = LlmChunker::new(Arc::new(openai(&server, fast()))).with_meter(meter.clone());
    let chunks = chunker
        .chunk(&[Document::new("d", "", text.clone())])
        .await
        .unwrap();
    let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let want: Vec<&str> = text.split_inclusive('.').map(str::trim).collect();
    assert_eq!(
        got, want,
        "every sentence, in order, none read from a cut answer"
    );
    let usage = meter.snapshot()["chunking"];
    assert!(usage.truncated_retries >= 1, "{usage:?}");
    assert_eq!(usage.windows, usage.calls);
    assert_eq!(chunker.stats().truncated_retries, usage.truncated_retries);
}

#[tokio::test]
async fn a_retry_longer_than_the_context_falls_back_for_that_item_only() {
    // llama.cpp's server refuses the retry, which carries the first unreadable answer, with
    // its own wording; the other document is read.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let messages = body["messages"].as_array().unwrap();
            let user = messages[1]["content"].as_str().unwrap();
            if messages.len() > 2 {
                return ResponseTemplate::new(400).set_body_json(json!({"error": {
                    "code": 400,
                    "message": "request (4155 tokens) exceeds the available context size (4096 tokens), try increasing it",
                    "type": "exceed_context_size_error"}}));
            }
            let answer = if user.contains("Warsaw") {
                "[Sentence 1]\nd0 text.\n[Extracted Chunks in Sentence 1]\n[Document d0 is about Warsaw.]"
            } else {
                "I'm sorry, I can't."
            };
            ResponseTemplate::new(200).set_body_json(completion(answer))
        })
        .mount(&server)
        .await;
    let documents = vec![
        lprag_core::Document::new("d0", "", "Document d0 is about Warsaw."),
        lprag_core::Document::new("d1", "", "Document d1 is about Krakow."),
    ];
    let meter = Arc::new(TokenMeter::new());
    let warnings = Arc::new(Warnings::default());
    let chunks = LlmChunker::new(Arc::new(openai(&server, fast())))
        .with_meter(meter.clone())
        .with_progress(warnings.clone())
        .chunk(&documents)
        .await
        .expect("the build survives a retry the server refuses as too long");
    assert_eq!(chunks[0].text, "Document d0 is about Warsaw.");
    assert!(
        chunks.iter().any(|c| c.text.contains("Krakow")),
        "d1 comes from the offline chunker: {chunks:?}"
    );
    assert_eq!(meter.snapshot()["chunking"].fallbacks, 1);
    let said = warnings.0.lock().unwrap().join("\n");
    assert!(said.contains("longer than the model's context"), "{said}");

    let err = LlmChunker::new(Arc::new(openai(&server, fast())))
        .on_unparseable(OnUnparseable::Fail)
        .chunk(&documents)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
}

/// A server-sent-events body of these pieces (a role-only first event, as OpenAI sends),
/// then the event with the `finish_reason` and `[DONE]`; when `cut`, `[DONE]` alone, as
/// llama-cpp-python's server ends a stream it interrupts.
fn sse(pieces: &[&str], cut: bool) -> ResponseTemplate {
    let mut body = String::from(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n: keep-alive\n\n",
    );
    for p in pieces {
        let event = json!({"choices": [{"index": 0, "delta": {"content": p}}]});
        body.push_str(&format!("data: {event}\r\n\r\n"));
    }
    if !cut {
        let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        body.push_str(&format!("data: {last}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

async fn collect(stream: lprag_llm::TextStream) -> Vec<Result<String, LlmError>> {
    use futures::StreamExt;
    stream.collect().await
}

#[tokio::test]
async fn openai_streams_an_answer_piece_by_piece() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(
            json!({"stream": true, "model": "test-model"}),
        ))
        .respond_with(sse(&["Marie ", "Curie was born ", "in Warsaw."], false))
        .expect(1)
        .mount(&server)
        .await;
    let chat = openai(&server, fast());
    let pieces = collect(chat.complete_stream(&ask("Where?")).await.unwrap()).await;
    let pieces: Vec<String> = pieces.into_iter().map(Result::unwrap).collect();
    assert_eq!(pieces, ["Marie ", "Curie was born ", "in Warsaw."]);
}

#[tokio::test]
async fn a_stream_error_event_ends_the_answer_with_a_redacted_error() {
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\n",
        json!({"choices": [{"delta": {"content": "Half"}}]}),
        json!({"error": {"message": format!("overloaded, key {KEY}"), "type": "server_error"}}),
        json!({"choices": [{"delta": {"content": "never read"}}]}),
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(body))
        .mount(&server)
        .await;
    let chat = openai(&server, fast());
    let items = collect(chat.complete_stream(&ask("q")).await.unwrap()).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].as_ref().unwrap(), "Half");
    let err = items[1].as_ref().unwrap_err().to_string();
    assert!(err.contains("overloaded") && !err.contains(KEY), "{err}");
}

#[tokio::test]
async fn opening_a_stream_retries_transient_statuses_and_refuses_permanent_ones() {
    let server = MockServer::start().await;
    first_then(&server, 2, ResponseTemplate::new(503), sse(&["ok"], false)).await;
    let chat = openai(&server, fast());
    let items = collect(chat.complete_stream(&ask("q")).await.unwrap()).await;
    assert_eq!(
        items.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        ["ok"]
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "bad key"}})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let chat = openai(&server, fast());
    let err = match chat.complete_stream(&ask("q")).await {
        Err(e) => e,
        Ok(_) => panic!("a 401 opened a stream"),
    };
    assert!(matches!(err, LlmError::Permanent(_)), "{err}");
}

/// A streamed answer is cached once it has ended, and then replayed (by a stream or a
/// plain completion) without a request.
#[tokio::test]
async fn a_cached_chat_caches_a_finished_stream_and_replays_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&["Warsaw", "."], false))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap();
    let first: Vec<String> = collect(cached.complete_stream(&ask("q")).await.unwrap())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(first, ["Warsaw", "."]);
    let again: Vec<String> = collect(cached.complete_stream(&ask("q")).await.unwrap())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(again, ["Warsaw."]);
    let plain = cached.complete(&ask("q")).await.unwrap();
    assert_eq!(plain.content, "Warsaw.");
    assert!(plain.cached);
}

/// A stream that fails midway caches nothing: the next call asks the model again.
#[tokio::test]
async fn a_failed_stream_is_not_cached() {
    let server = MockServer::start().await;
    let broken = format!(
        "data: {}\n\ndata: {{not json\n\n",
        json!({"choices": [{"delta": {"content": "Half"}}]})
    );
    first_then(
        &server,
        1,
        ResponseTemplate::new(200).set_body_string(broken),
        sse(&["Whole."], false),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap();
    let items = collect(cached.complete_stream(&ask("q")).await.unwrap()).await;
    assert!(items.last().unwrap().is_err(), "{items:?}");
    // Asked again: the model answers afresh (nothing of the cut answer was replayed).
    let again: Vec<String> = collect(cached.complete_stream(&ask("q")).await.unwrap())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(again, ["Whole."]);
}

/// A stream that a server ends early with `[DONE]` but without the model's
/// `finish_reason` (llama-cpp-python interrupts a stream when another request arrives)
/// ends with a transient error after the pieces it had, and is not cached.
#[tokio::test]
async fn a_stream_ended_without_a_finish_reason_is_an_error_and_not_cached() {
    let server = MockServer::start().await;
    first_then(
        &server,
        1,
        sse(&["Mar", "ie"], true),
        sse(&["Marie Curie."], false),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedChat::open(Arc::new(openai(&server, fast())), dir.path()).unwrap();
    let items = collect(cached.complete_stream(&ask("q")).await.unwrap()).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(items[0].as_ref().unwrap(), "Mar");
    let err = items[2].as_ref().unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("finish_reason"),
        "{err}"
    );
    let again: Vec<String> = collect(cached.complete_stream(&ask("q")).await.unwrap())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(again, ["Marie Curie."]);
}
