//! `lprag serve`: one index over HTTP (JSON), answering while it is updated.
//!
//! Routes: `GET /health`, `GET /stats`, `POST /search` (`{"query", "k", "filter"}`),
//! `POST /search/batch` (`{"queries", "k", "filter"}`), `PUT /documents` (a list of
//! documents, added or replaced), `DELETE /documents/{id}`. Queries answer from the current
//! snapshot of a [`Live`] index; updates run one at a time, are saved into the index
//! directory before they are acknowledged, and are swapped in when complete. Every error
//! is `{"error": "…"}` with a 4xx/5xx status.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use lprag::core::dirs::DirLock;
use lprag::{Document, Error, Filter, Live, Retriever, Selection, UpdateInputs};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::settings::index_path;
use crate::store::{open, open_to_answer, AnyIndex, Hit, Opened};
use crate::ServeArgs;

/// The service's state.
#[derive(Clone)]
struct App {
    live: Arc<Live<AnyIndex>>,
    inputs: UpdateInputs,
    limits: Arc<Limits>,
    updates: Arc<Semaphore>,
    counters: Arc<Counters>,
    token: Option<Arc<str>>,
    /// `--answer-only`: updates are refused.
    answer_only: bool,
}

struct Limits {
    max_query_bytes: usize,
    max_k: usize,
    max_batch: usize,
    timeout: Duration,
}

#[derive(Default)]
struct Counters {
    searches: AtomicU64,
    updates: AtomicU64,
}

/// The body of every error.
#[derive(Debug, Serialize, Deserialize)]
struct ApiError {
    error: String,
}

type Failure = (StatusCode, Json<ApiError>);

fn fail(status: StatusCode, error: impl Into<String>) -> Failure {
    (
        status,
        Json(ApiError {
            error: error.into(),
        }),
    )
}

/// An index error as a response: bad input is the client's (400), the rest the server's.
fn from_error(e: Error) -> Failure {
    let status = match e {
        Error::InvalidInput { .. } => StatusCode::BAD_REQUEST,
        Error::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    fail(status, e.to_string())
}

fn json_rejection(r: JsonRejection) -> Failure {
    fail(r.status(), r.body_text())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    query: String,
    #[serde(default)]
    k: Option<usize>,
    /// Metadata key → value, all of which must hold.
    #[serde(default)]
    filter: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRequest {
    queries: Vec<String>,
    #[serde(default)]
    k: Option<usize>,
    #[serde(default)]
    filter: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct SearchResponse {
    hits: Vec<Hit>,
}

#[derive(Serialize, Deserialize)]
struct BatchResponse {
    results: Vec<Vec<Hit>>,
}

fn filter_of(map: &BTreeMap<String, String>) -> Filter {
    map.iter().fold(Filter::All, |f, (k, v)| {
        let eq = Filter::eq(k.clone(), v.clone());
        if f.is_all() {
            eq
        } else {
            f.and(eq)
        }
    })
}

impl App {
    fn k(&self, k: Option<usize>) -> Result<usize, Failure> {
        let k = k.unwrap_or(5);
        if !(1..=self.limits.max_k).contains(&k) {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                format!("k must be between 1 and {}, got {k}", self.limits.max_k),
            ));
        }
        Ok(k)
    }

    fn check_query(&self, q: &str) -> Result<(), Failure> {
        lprag::core::check_query_len(q, self.limits.max_query_bytes).map_err(from_error)
    }

    async fn timed<T>(
        &self,
        work: impl std::future::Future<Output = lprag::Result<T>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.limits.timeout, work).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_error(e)),
            Err(_) => Err(fail(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no answer within {} ms", self.limits.timeout.as_millis()),
            )),
        }
    }
}

async fn search(
    State(app): State<App>,
    body: Result<Json<SearchRequest>, JsonRejection>,
) -> Result<Json<SearchResponse>, Failure> {
    let Json(req) = body.map_err(json_rejection)?;
    let k = app.k(req.k)?;
    app.check_query(&req.query)?;
    let filter = filter_of(&req.filter);
    let index = app.live.snapshot();
    let hits = app
        .timed(index.retrieve_filtered(&req.query, Selection::TopK(k), &filter))
        .await?;
    app.counters.searches.fetch_add(1, Ordering::Relaxed);
    Ok(Json(SearchResponse {
        hits: hits.into_iter().map(Hit::from).collect(),
    }))
}

async fn search_batch(
    State(app): State<App>,
    body: Result<Json<BatchRequest>, JsonRejection>,
) -> Result<Json<BatchResponse>, Failure> {
    let Json(req) = body.map_err(json_rejection)?;
    let k = app.k(req.k)?;
    if req.queries.is_empty() || req.queries.len() > app.limits.max_batch {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            format!(
                "a batch holds 1 to {} queries, got {}",
                app.limits.max_batch,
                req.queries.len()
            ),
        ));
    }
    for q in &req.queries {
        app.check_query(q)?;
    }
    let filter = filter_of(&req.filter);
    // One snapshot for the whole batch: every answer from the same index.
    let index = app.live.snapshot();
    let results = app
        .timed(async {
            let mut out = Vec::with_capacity(req.queries.len());
            for q in &req.queries {
                let hits = index
                    .retrieve_filtered(q, Selection::TopK(k), &filter)
                    .await?;
                out.push(hits.into_iter().map(Hit::from).collect());
            }
            Ok(out)
        })
        .await?;
    app.counters
        .searches
        .fetch_add(req.queries.len() as u64, Ordering::Relaxed);
    Ok(Json(BatchResponse { results }))
}

/// A document as `PUT /documents` takes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewDocument {
    id: String,
    #[serde(default)]
    title: String,
    text: String,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct UpdateResponse {
    /// Documents added or replaced, or removed.
    documents: usize,
    /// Chunks in the index afterwards.
    chunks: usize,
    /// Seconds the update took (saved included).
    seconds: f64,
}

impl App {
    /// Run one update (at most `max_pending_updates` waiting, else 429), saved before the
    /// answer.
    async fn update(
        &self,
        upsert: Vec<Document>,
        remove: Vec<String>,
    ) -> Result<Json<UpdateResponse>, Failure> {
        if self.answer_only {
            return Err(fail(
                StatusCode::CONFLICT,
                "this service answers only (--answer-only); update the index with `lprag \
                 sync` and restart the service",
            ));
        }
        if !self.live.snapshot().updates() {
            return Err(fail(
                StatusCode::CONFLICT,
                "this retriever (G²RAG) does not update in place; use `lprag sync`",
            ));
        }
        let _permit = self.updates.clone().try_acquire_owned().map_err(|_| {
            fail(
                StatusCode::TOO_MANY_REQUESTS,
                "too many updates waiting; retry later",
            )
        })?;
        let started = std::time::Instant::now();
        let n = upsert.len() + remove.len();
        let report = self
            .live
            .apply(&upsert, &remove, &self.inputs)
            .await
            .map_err(from_error)?;
        self.counters.updates.fetch_add(1, Ordering::Relaxed);
        Ok(Json(UpdateResponse {
            documents: n,
            chunks: report.chunks,
            seconds: started.elapsed().as_secs_f64(),
        }))
    }
}

async fn put_documents(
    State(app): State<App>,
    body: Result<Json<Vec<NewDocument>>, JsonRejection>,
) -> Result<Json<UpdateResponse>, Failure> {
    let Json(docs) = body.map_err(json_rejection)?;
    if docs.is_empty() {
        return Err(fail(StatusCode::BAD_REQUEST, "no document given"));
    }
    let docs = docs
        .into_iter()
        .map(|d| Document {
            id: d.id,
            title: d.title,
            text: d.text,
            metadata: d.metadata,
        })
        .collect();
    app.update(docs, Vec::new()).await
}

async fn delete_document(
    State(app): State<App>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<UpdateResponse>, Failure> {
    if !app.live.snapshot().document_ids_contain(&id) {
        return Err(fail(StatusCode::NOT_FOUND, format!("no document '{id}'")));
    }
    app.update(Vec::new(), vec![id]).await
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn stats(State(app): State<App>) -> Json<serde_json::Value> {
    let index = app.live.snapshot();
    let documents = lprag::Updatable::document_hashes(&*index).len();
    Json(serde_json::json!({
        "retriever": index.name(),
        "documents": documents,
        "chunks": index.num_chunks(),
        "searches": app.counters.searches.load(Ordering::Relaxed),
        "updates": app.counters.updates.load(Ordering::Relaxed),
    }))
}

/// Every request carries the token, when there is one (compared in constant time).
async fn authorize(State(app): State<App>, request: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let same = given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            return fail(StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
        }
    }
    next.run(request).await
}

impl AnyIndex {
    fn document_ids_contain(&self, id: &str) -> bool {
        self.chunks().iter().any(|c| c.provenance.document_id == id)
    }
}

/// The router of an opened index (for tests too).
fn router(app: App, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/search", post(search))
        .route("/search/batch", post(search_batch))
        .route("/documents", put(put_documents))
        .route("/documents/{id}", delete(delete_document))
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(app)
}

/// `lprag serve`.
pub async fn serve(args: ServeArgs) -> lprag::Result<()> {
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("LPRAG_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if !args.addr.ip().is_loopback() && token.is_none() {
        return Err(Error::invalid(
            "--addr",
            format!(
                "{} is not a loopback address: set --token (or LPRAG_TOKEN) so that every \
                 request must carry it",
                args.addr
            ),
        ));
    }
    let (_lock, live, inputs) = if args.answer_only {
        // Nothing is written: no lock, no saving; updates are refused by the index.
        let Opened { index, inputs, .. } = open_to_answer(&args.index, args.on).await?;
        (None, Live::new(index), inputs)
    } else {
        // One writer of the index directory at a time: `lprag sync` waits for the service.
        let lock = DirLock::acquire(&args.index, "lprag serve")?;
        let Opened { index, inputs, .. } = open(&args.index, args.on)?;
        let live = Live::new(index).saving_to(index_path(&args.index));
        (Some(lock), live, inputs)
    };
    let app = App {
        live: Arc::new(live),
        inputs,
        limits: Arc::new(Limits {
            max_query_bytes: args.max_query_bytes,
            max_k: args.max_k,
            max_batch: args.max_batch,
            timeout: Duration::from_millis(args.timeout_ms),
        }),
        updates: Arc::new(Semaphore::new(args.max_pending_updates.max(1))),
        counters: Arc::new(Counters::default()),
        token: token.map(Arc::from),
        answer_only: args.answer_only,
    };
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| Error::invalid("--addr", format!("cannot listen on {}: {e}", args.addr)))?;
    let addr: SocketAddr = listener
        .local_addr()
        .map_err(|e| Error::invalid("--addr", e.to_string()))?;
    if let Some(path) = &args.port_file {
        write_port_file(path, addr)?;
    }
    eprintln!("serving {} on http://{addr}", args.index.display());
    axum::serve(listener, router(app, args.max_body_bytes))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Error::invalid("serve", e.to_string()))?;
    Ok(())
}

/// Written atomically through a uniquely named temporary file (never a fixed name beside
/// it that could be the user's).
fn write_port_file(path: &Path, addr: SocketAddr) -> lprag::Result<()> {
    lprag::core::dirs::write_atomic(path, addr.to_string().as_bytes())
}
