//! # LP-RAG inside a web service
//!
//! An axum service around one index: `GET /search?q=…&k=…` ranks chunks (optionally
//! `&lang=…` filters on metadata), `POST /documents` adds documents in the background
//! while queries keep being answered. The index lives in a `tokio::sync::RwLock`: queries
//! share the read lock (they run concurrently), an update takes the write lock only for
//! the update itself. No global state: everything is in the router's state.
//!
//! Run it: the example starts the service on a free loopback port, fires concurrent
//! queries at it, adds two documents while they run, waits until a query finds one of
//! them, and shuts the service down.
//!
//! ```text
//! cargo run --example service
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use lprag::{Document, Filter, HashingEncoder, LpRag, Retriever, Selection};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::RwLock;

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

/// The service's state: one index, shared.
#[derive(Clone)]
struct App {
    index: Arc<RwLock<LpRag>>,
}

#[derive(Deserialize)]
struct SearchParams {
    q: String,
    k: Option<usize>,
    lang: Option<String>,
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

/// `GET /search`: the top k chunks, as JSON; errors are a 400 with the message.
async fn search(
    State(app): State<App>,
    Query(p): Query<SearchParams>,
) -> Result<Json<Vec<Hit>>, (StatusCode, String)> {
    let selection = Selection::TopK(p.k.unwrap_or(3));
    let filter = p.lang.map_or(Filter::All, |l| Filter::eq("lang", l));
    let index = app.index.read().await;
    let hits = index
        .retrieve_filtered(&p.q, selection, &filter)
        .await
        .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
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

/// `POST /documents`: accepted at once, added in the background (202).
async fn add(State(app): State<App>, Json(docs): Json<Vec<NewDocument>>) -> StatusCode {
    let docs: Vec<Document> = docs
        .into_iter()
        .map(|d| Document::new(d.id, d.title, d.text).with_metadata("lang", d.lang))
        .collect();
    tokio::spawn(async move {
        let mut index = app.index.write().await;
        match index.add_documents(&docs).await {
            Ok(report) => eprintln!(
                "added {} documents ({} chunks) in {:.3} s",
                report.added_documents,
                report.added_chunks,
                report.seconds.iter().map(|s| s.1).sum::<f64>()
            ),
            Err(e) => eprintln!("adding documents failed: {e}"),
        }
    });
    StatusCode::ACCEPTED
}

/// A minimal HTTP/1.1 client for the demo (one request per connection).
async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
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
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&docs)
        .await?;
    let app = App {
        index: Arc::new(RwLock::new(rag)),
    };
    let router = Router::new()
        .route("/search", get(search))
        .route("/documents", post(add))
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
        app.index.read().await.chunks().len()
    );

    let _ = stop.send(());
    server.await.expect("server task")?;
    Ok(())
}
