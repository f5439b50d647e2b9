//! # LP-RAG inside a web service
//!
//! An axum service around one index: `GET /search?q=…&k=…` ranks chunks (optionally
//! `&lang=…` filters on metadata), `POST /documents` adds documents in the background
//! while queries keep being answered. The index lives in an [`lprag::Live`]: a query
//! answers from the current snapshot (an `Arc`), an update changes a copy aside, saves it
//! and swaps it in, so queries never wait for an update and always see a complete index.
//! No global state: everything is in the router's state. (`lprag serve` is this service,
//! complete, for any retriever.)
//!
//! Every request is bounded: a body of at most [`MAX_BODY_BYTES`] (axum's
//! `DefaultBodyLimit`, else 413), `k` of at most [`MAX_K`] and a query of at most
//! [`MAX_QUERY_BYTES`] (the index's own limit, `LpRag::set_max_query_bytes`; else 400),
//! and an answer within [`REQUEST_TIMEOUT`] (else 503). Every error is JSON:
//! `{"error": "…"}`. Every update is saved before it is served: into `LPRAG_SERVICE_DIR`
//! when set (the demo saves to a temporary directory).
//!
//! Run it: the example starts the service on a free loopback port, fires concurrent
//! queries at it, adds two documents while they run, waits until a query finds one of
//! them, checks that the save after the update happened, sends one request over each
//! limit, and shuts the service down.
//!
//! ```text
//! cargo run --example service
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use lprag::{Document, Filter, HashingEncoder, Live, LpRag, Retriever, Selection, UpdateInputs};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

/// The largest request body (`POST /documents`): 256 KiB, a few hundred documents.
const MAX_BODY_BYTES: usize = 256 * 1024;
/// The largest `k` a search may ask for.
const MAX_K: usize = 100;
/// The longest query, in bytes: a search box's worth (the library's default,
/// `lprag::DEFAULT_MAX_QUERY_BYTES`, is 32 KiB).
const MAX_QUERY_BYTES: usize = 2048;
/// The longest a search may take. A search may ask for less with `timeout_ms`, never for
/// more. A timed-out search stops waiting; ranking already under way on a blocking thread
/// finishes there and is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The service's state: one live index (saved after every update).
#[derive(Clone)]
struct App {
    index: Arc<Live<LpRag>>,
}

#[derive(Deserialize)]
struct SearchParams {
    q: String,
    k: Option<usize>,
    lang: Option<String>,
    /// A shorter time limit than [`REQUEST_TIMEOUT`], in milliseconds.
    timeout_ms: Option<u64>,
}

/// The body of every error response.
#[derive(Debug, Serialize, Deserialize)]
struct ApiError {
    error: String,
}

/// An error response: a status and a JSON body.
type Failure = (StatusCode, Json<ApiError>);

fn fail(status: StatusCode, error: impl Into<String>) -> Failure {
    (
        status,
        Json(ApiError {
            error: error.into(),
        }),
    )
}

#[derive(Serialize, Deserialize)]
struct Hit {
    document: String,
    text: String,
    score: f32,
    metadata: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct NewDocument {
    id: String,
    title: String,
    text: String,
    lang: String,
}

/// `GET /search`: the top k chunks, as JSON. Bad parameters (`k` over [`MAX_K`], a query
/// over [`MAX_QUERY_BYTES`]) are a 400, no answer within the time limit a 503, a failure
/// of the index a 500; each with a JSON error.
async fn search(
    State(app): State<App>,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Json<Vec<Hit>>, Failure> {
    let Query(p) = params.map_err(|r| fail(r.status(), r.body_text()))?;
    let k = p.k.unwrap_or(3);
    if !(1..=MAX_K).contains(&k) {
        let msg = format!("k must be between 1 and {MAX_K}, got {k}");
        return Err(fail(StatusCode::BAD_REQUEST, msg));
    }
    let selection = Selection::TopK(k);
    let filter = p.lang.map_or(Filter::All, |l| Filter::eq("lang", l));
    let limit = p.timeout_ms.map_or(REQUEST_TIMEOUT, |ms| {
        Duration::from_millis(ms).min(REQUEST_TIMEOUT)
    });
    let work = async {
        let index = app.index.snapshot();
        // The index refuses a query over its max_query_bytes before embedding it.
        index.retrieve_filtered(&p.q, selection, &filter).await
    };
    let hits = match tokio::time::timeout(limit, work).await {
        Ok(Ok(hits)) => hits,
        Ok(Err(e @ lprag::Error::InvalidInput { .. })) => {
            return Err(fail(StatusCode::BAD_REQUEST, e.to_string()))
        }
        Ok(Err(e)) => return Err(fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        Err(_) => {
            let msg = format!("no answer within {} ms", limit.as_millis());
            return Err(fail(StatusCode::SERVICE_UNAVAILABLE, msg));
        }
    };
    Ok(Json(
        hits.into_iter()
            .map(|h| Hit {
                document: h.chunk.provenance.document_id,
                text: h.chunk.text,
                score: h.score,
                metadata: h.chunk.metadata,
            })
            .collect(),
    ))
}

/// `POST /documents`: accepted at once, added in the background (202): saved, then
/// served. A body over [`MAX_BODY_BYTES`] is a 413, a body that
/// is not a JSON list of documents a 400 or 415; each with a JSON error.
async fn add(
    State(app): State<App>,
    body: Result<Json<Vec<NewDocument>>, JsonRejection>,
) -> Result<StatusCode, Failure> {
    let Json(docs) = body.map_err(|r| fail(r.status(), r.body_text()))?;
    let docs: Vec<Document> = docs
        .into_iter()
        .map(|d| Document::new(d.id, d.title, d.text).with_metadata("lang", d.lang))
        .collect();
    tokio::spawn(async move {
        // Updates run one at a time; searches go on throughout.
        match app.index.apply(&docs, &[], &UpdateInputs::default()).await {
            Ok(report) => eprintln!(
                "added and saved {} documents ({} chunks) in {:.3} s",
                report.added_documents,
                report.added_chunks,
                report.seconds.iter().map(|s| s.1).sum::<f64>()
            ),
            Err(e) => eprintln!("adding documents failed (nothing changed): {e}"),
        }
    });
    Ok(StatusCode::ACCEPTED)
}

/// A minimal HTTP/1.1 client for the demo (one request per connection).
async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A server that refuses a request (a body over its limit) may answer and close before
    // reading all of it: a failed send is not the end, the answer may be there to read.
    let _ = stream.write_all(req.as_bytes()).await;
    let mut response = Vec::new();
    let read = stream.read_to_end(&mut response).await;
    if response.is_empty() {
        read.expect("read");
    }
    String::from_utf8_lossy(&response).into_owned()
}

/// The JSON body of a response.
fn body(response: &str) -> &str {
    response.split("\r\n\r\n").nth(1).unwrap_or("")
}

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs: Vec<Document> = mini_corpus::documents()
        .into_iter()
        .map(|d| d.with_metadata("lang", "en"))
        .collect();
    // The offline encoder keeps the example self-contained; use the default (MiniLM) or
    // your own in a real service.
    let mut rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&docs)
        .await?;
    rag.set_max_query_bytes(MAX_QUERY_BYTES);
    // Save after every update where LPRAG_SERVICE_DIR says, else (for the demo) in a
    // temporary directory.
    let scratch = tempfile::tempdir()?;
    let save_to = std::env::var_os("LPRAG_SERVICE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().join("index"));
    let app = App {
        index: Arc::new(Live::new(rag).saving_to(&save_to)),
    };
    let router = Router::new()
        .route("/search", get(search))
        .route("/documents", post(add))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    println!("serving on http://{addr}");

    // 16 concurrent queries.
    let questions = [
        "Where was Marie Curie born?",
        "capital of Japan",
        "Nobel Prize",
    ];
    let queries: Vec<_> = (0..16)
        .map(|i| {
            let q = questions[i % questions.len()].replace(' ', "+");
            tokio::spawn(
                async move { request(addr, "GET", &format!("/search?q={q}&k=2"), "").await },
            )
        })
        .collect();
    // Meanwhile, two new documents (in German, to filter on later).
    let new = vec![
        NewDocument {
            id: "zugspitze".into(),
            title: "Zugspitze".into(),
            text: "Die Zugspitze ist mit 2962 Metern der höchste Berg Deutschlands.".into(),
            lang: "de".into(),
        },
        NewDocument {
            id: "rhein".into(),
            title: "Rhein".into(),
            text: "Der Rhein fließt von den Alpen bis zur Nordsee.".into(),
            lang: "de".into(),
        },
    ];
    let posted = request(addr, "POST", "/documents", &serde_json::to_string(&new)?).await;
    assert!(posted.starts_with("HTTP/1.1 202"), "{posted}");
    for q in queries {
        let response = q.await.expect("query task");
        let hits: Vec<Hit> = serde_json::from_str(body(&response))?;
        assert!(!hits.is_empty(), "{response}");
    }
    println!("16 concurrent queries answered while documents were being added");

    // Wait for the background update, then find the new document, filtered by language.
    let mut found = None;
    for _ in 0..100 {
        let response = request(addr, "GET", "/search?q=Zugspitze+Berg&k=1&lang=de", "").await;
        let hits: Vec<Hit> = serde_json::from_str(body(&response))?;
        if let Some(h) = hits.into_iter().next() {
            found = Some(h);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let hit = found.expect("the added document is searchable");
    println!(
        "after the update: {} ({:.3}, lang={}) {}",
        hit.document, hit.score, hit.metadata["lang"], hit.text
    );
    assert_eq!(hit.document, "zugspitze");
    println!(
        "index now holds {} chunks",
        app.index.snapshot().chunks().len()
    );
    // An update is saved before it is served.
    assert!(
        save_to.join("manifest.json").exists(),
        "saved after the update"
    );
    println!("the update was saved to {}", save_to.display());

    // One request over each limit: a 4xx or 503 with a JSON error, the service unharmed.
    let refused = |response: &str, status: &str, says: &str| {
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}")),
            "{response}"
        );
        let e: ApiError = serde_json::from_str(body(response)).expect("a JSON error");
        assert!(e.error.contains(says), "{status}: {}", e.error);
        println!("refused with {status}: {}", e.error);
    };
    let big_k = request(
        addr,
        "GET",
        &format!("/search?q=capital&k={}", MAX_K + 1),
        "",
    )
    .await;
    refused(&big_k, "400", "k must be between 1 and 100");
    let long = "a+".repeat(MAX_QUERY_BYTES / 2 + 1);
    let long_q = request(addr, "GET", &format!("/search?q={long}"), "").await;
    refused(&long_q, "400", "over the limit of 2048 bytes");
    let huge = serde_json::to_string(&vec![NewDocument {
        id: "huge".into(),
        title: "Huge".into(),
        text: "x".repeat(MAX_BODY_BYTES),
        lang: "en".into(),
    }])?;
    let too_big = request(addr, "POST", "/documents", &huge).await;
    refused(&too_big, "413", "length limit");
    let fine = request(addr, "GET", "/search?q=capital+of+Japan&k=1", "").await;
    assert!(fine.starts_with("HTTP/1.1 200"), "{fine}");

    let _ = stop.send(());
    server.await.expect("server task")?;
    Ok(())
}
