//! End-to-end: the real `lprag` binary on a folder the test writes, and the real service
//! over loopback HTTP with 64 concurrent clients while documents are added and removed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lprag::{DenseRetriever, Document, HashingEncoder, HashingEncoderConfig, Retriever, Selection};
use serde_json::{json, Value};

fn lprag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lprag"))
        .args(args)
        .output()
        .expect("the lprag binary runs")
}

fn ok(args: &[&str]) -> String {
    let out = lprag(args);
    assert!(
        out.status.success(),
        "lprag {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap() + &String::from_utf8_lossy(&out.stderr)
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// A folder with every format, a file that fails to parse and an ignored file.
fn notes(root: &Path) {
    write(
        root,
        "guide.md",
        "# Guide\n\nIntro text about the project.\n\n## Install\n\nRun cargo install \
         lprag-cli to get the binary.\n\n## Deploy\n\nCopy the index directory to the \
         server and run lprag serve.\n",
    );
    write(
        root,
        "cities/warsaw.txt",
        "Warsaw is the capital of Poland. The Vistula flows through Warsaw.",
    );
    write(
        root,
        "people/curie.html",
        "<html><head><title>Marie Curie</title><style>p{}</style><script>alert(1)</script></head>\
         <body><h1>Marie Curie</h1><p>Marie Curie was born in Warsaw and won two Nobel Prizes.</p></body></html>",
    );
    write(
        root,
        "facts.json",
        r#"[{"id":"tokyo","title":"Tokyo","text":"Tokyo is the capital of Japan.","lang":"en"},
            {"id":"paris","title":"Paris","text":"Paris is the capital of France.","lang":"en"}]"#,
    );
    write(
        root,
        "more.jsonl",
        "{\"title\":\"Berlin\",\"text\":\"Berlin is the capital of Germany.\",\"lang\":\"de\"}\n\
         {\"title\":\"Rome\",\"text\":\"Rome is the capital of Italy.\",\"lang\":\"it\"}\n",
    );
    write(root, "broken.json", "{\"title\": \"never closed\"");
    write(root, ".gitignore", "secret.md\n");
    write(
        root,
        "secret.md",
        "# Secret\n\nThe password is swordfish.\n",
    );
}

/// An HTTP client (reqwest on rustls with the ring provider, as the workspace builds it).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn query(idx: &Path, q: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["query", idx.to_str().unwrap(), q, "--json", "-q"];
    args.extend_from_slice(extra);
    let out = lprag(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `lprag index SRC --index IDX --encoder hashing -q` and `extra` options.
fn index_hashing(src: &Path, idx: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "index",
        src.to_str().unwrap(),
        "--index",
        idx.to_str().unwrap(),
        "--encoder",
        "hashing",
        "-q",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

/// The notes of [`notes`] indexed with the hashing encoder and `extra` options: the
/// temporary directory (kept alive by the caller) and the index.
fn notes_index(extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("notes"), tmp.path().join("idx"));
    notes(&src);
    index_hashing(&src, &idx, extra);
    (tmp, idx)
}

fn docs_of(h: &[Value]) -> Vec<String> {
    h.iter()
        .map(|h| h["document"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn index_sync_query_on_a_folder_of_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("notes"), tmp.path().join("idx"));
    notes(&src);
    let (s, i) = (src.to_str().unwrap(), idx.to_str().unwrap());

    // Strict mode fails on the broken file, with a message, and writes no index.
    let out = lprag(&[
        "index",
        s,
        "--index",
        i,
        "--encoder",
        "hashing",
        "--retriever",
        "dense",
        "--strict",
        "-q",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error:") && err.contains("broken.json"),
        "{err}"
    );

    let log = ok(&[
        "index",
        s,
        "--index",
        i,
        "--encoder",
        "hashing",
        "--retriever",
        "dense",
    ]);
    assert!(log.contains("skipped broken.json"), "{log}");
    // 1 Markdown + 1 text + 1 HTML + 2 JSON records + 2 JSONL records.
    assert!(log.contains("loaded 7 documents"), "{log}");

    let h = query(&idx, "Where was Marie Curie born?", &["-k", "1"]);
    assert_eq!(docs_of(&h), ["people/curie.html"]);
    assert!(
        !h[0]["text"].as_str().unwrap().contains("alert"),
        "script text indexed"
    );
    assert_eq!(h[0]["metadata"]["title"], "Marie Curie");
    let h = query(&idx, "how to deploy on the server", &["-k", "1"]);
    assert_eq!(docs_of(&h), ["guide.md"]);
    let h = query(&idx, "capital", &["-k", "5", "--filter", "lang=de"]);
    assert_eq!(docs_of(&h), ["more.jsonl#0"]);
    let h = query(&idx, "password swordfish", &["-k", "10"]);
    assert!(
        !docs_of(&h).iter().any(|d| d.contains("secret")),
        ".gitignore not honoured"
    );

    // A change, a deletion, an addition; then sync, then nothing to do.
    write(
        &src,
        "cities/warsaw.txt",
        "Warsaw lies on the Vistula and has a famous old town.",
    );
    std::fs::remove_file(src.join("people/curie.html")).unwrap();
    write(
        &src,
        "cities/krakow.md",
        "# Kraków\n\nKraków was the royal capital of Poland.\n",
    );
    let log = ok(&["sync", s, "--index", i, "-q"]);
    assert!(
        log.contains("1 added, 1 changed, 1 removed, 5 unchanged"),
        "{log}"
    );
    let log = ok(&["sync", s, "--index", i, "-q"]);
    assert!(
        log.contains("0 added, 0 changed, 0 removed, 7 unchanged"),
        "{log}"
    );
    let h = query(&idx, "Marie Curie Nobel Prizes", &["-k", "7"]);
    assert!(!docs_of(&h).contains(&"people/curie.html".to_string()));
    let h = query(&idx, "royal capital", &["-k", "1"]);
    assert_eq!(docs_of(&h), ["cities/krakow.md"]);

    // The synced index answers exactly as a fresh build of the folder.
    let fresh = tmp.path().join("fresh");
    index_hashing(&src, &fresh, &["--retriever", "dense"]);
    for q in [
        "Warsaw old town",
        "capital of Japan",
        "install the binary",
        "royal capital",
    ] {
        let (a, b) = (query(&idx, q, &["-k", "6"]), query(&fresh, q, &["-k", "6"]));
        assert_eq!(docs_of(&a), docs_of(&b), "{q}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x["text"], y["text"]);
            let (sx, sy) = (x["score"].as_f64().unwrap(), y["score"].as_f64().unwrap());
            assert!((sx - sy).abs() < 1e-5, "{q}: {sx} vs {sy}");
        }
    }

    // Errors: Display, exit 1, nothing of the user's touched.
    let out = lprag(&["query", tmp.path().join("nope").to_str().unwrap(), "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    let out = lprag(&["index", s, "--index", s, "--encoder", "hashing", "-q"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "indexing into the source folder must be refused"
    );
    assert!(src.join("guide.md").exists());
}

#[test]
fn lp_rag_index_sync_and_query_through_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("notes"), tmp.path().join("idx"));
    notes(&src);
    let (s, i) = (src.to_str().unwrap(), idx.to_str().unwrap());
    index_hashing(&src, &idx, &["--epochs", "2"]);
    let h = query(&idx, "Where was Marie Curie born?", &["-k", "2"]);
    assert!(
        docs_of(&h).contains(&"people/curie.html".to_string()),
        "{h:?}"
    );
    // Resumable: indexing again reuses the work directory and gives the same answers,
    // with the build's matrices on disk too.
    index_hashing(&src, &idx, &["--epochs", "2", "--features-on-disk"]);
    assert!(idx.join("work").join("features.bin").is_file());
    assert_eq!(query(&idx, "Where was Marie Curie born?", &["-k", "2"]), h);
    // Only LP-RAG has matrices to keep there: refused before anything is written.
    let other = tmp.path().join("bm25");
    let out = lprag(&[
        "index",
        s,
        "--index",
        other.to_str().unwrap(),
        "--retriever",
        "bm25",
        "--features-on-disk",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features-on-disk"), "{err}");
    assert!(!other.exists());
    std::fs::remove_file(src.join("cities/warsaw.txt")).unwrap();
    let log = ok(&["sync", s, "--index", i, "-q"]);
    assert!(log.contains("0 added, 0 changed, 1 removed"), "{log}");
    let h = query(&idx, "Vistula", &["-k", "6"]);
    assert!(!docs_of(&h).contains(&"cities/warsaw.txt".to_string()));
}

/// A running `lprag serve`, killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(idx: &Path, extra: &[&str]) -> Server {
    let port_file = idx.with_extension("port");
    let _ = std::fs::remove_file(&port_file);
    let mut args = vec![
        "serve".to_string(),
        idx.to_str().unwrap().to_string(),
        "--addr".into(),
        "127.0.0.1:0".into(),
        "--port-file".into(),
        port_file.to_str().unwrap().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = Command::new(env!("CARGO_BIN_EXE_lprag"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !port_file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the service did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr = std::fs::read_to_string(&port_file).unwrap();
    Server {
        child,
        base: format!("http://{addr}"),
    }
}

fn batch_doc(i: usize, half: char) -> Value {
    json!({
        "id": format!("live/{i}-{half}"),
        "title": format!("Batch {i} {half}"),
        "text": format!("Report {i}{half}: the observatory number {i} measured comet {half}{i} tonight."),
        "metadata": {"batch": i.to_string()},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_service_answers_64_clients_while_documents_change() {
    service_under_load("dense").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lp_rag_service_answers_64_clients_while_documents_change() {
    service_under_load("lprag").await;
}

async fn service_under_load(retriever: &str) {
    let (tmp, idx) = notes_index(&["--retriever", retriever, "--epochs", "2"]);
    let src = tmp.path().join("notes");
    let server = serve(&idx, &[]);
    let client = http();
    let base = server.base.clone();
    let r: Value = client
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["status"], "ok");

    const BATCHES: usize = 12;
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut clients = Vec::new();
    for c in 0..64 {
        let (client, base, stop) = (client.clone(), base.clone(), stop.clone());
        let (answered, failures) = (answered.clone(), failures.clone());
        clients.push(tokio::spawn(async move {
            let mut n = c;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let batch = n % BATCHES;
                // Every batch is added in one request: an answer from a complete index
                // holds both of its documents or neither.
                let body = json!({"query": format!("observatory comet {batch}"), "k": 10, "filter": {"batch": batch.to_string()}});
                let resp = client.post(format!("{base}/search")).json(&body).send().await;
                match resp {
                    Ok(r) if r.status().is_success() => {
                        let v: Value = r.json().await.unwrap();
                        let found = v["hits"].as_array().unwrap().len();
                        assert!(found == 0 || found == 2, "half an update visible: {v}");
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        eprintln!("failed request: {other:?}");
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // Updates while the clients run: batches added, then the folder's files removed.
    for i in 0..BATCHES {
        let body = json!([batch_doc(i, 'a'), batch_doc(i, 'b')]);
        let r = client
            .put(format!("{base}/documents"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{:?}", r.text().await);
    }
    for gone in ["cities/warsaw.txt", "facts.json#tokyo", "guide.md"] {
        let r = client
            .delete(format!(
                "{base}/documents/{}",
                gone.replace('/', "%2F").replace('#', "%23")
            ))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{gone}: {:?}", r.text().await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(failures.load(Ordering::Relaxed), 0, "failed requests");
    assert!(
        answered.load(Ordering::Relaxed) >= 64,
        "clients did not run"
    );

    // Limits and errors.
    let r = client
        .post(format!("{base}/search"))
        .json(&json!({"query": "x", "k": 1000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = client
        .post(format!("{base}/search"))
        .json(&json!({"query": "x".repeat(5000)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = client
        .delete(format!("{base}/documents/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A body one byte over the limit (4 MiB by default): the service reads it to that byte,
    // answers 413 and closes the connection. Sent whole, so nothing is left unread when it
    // closes: a client still writing a larger body then would see a broken pipe, and at
    // times the reset would discard the answer, instead of reading it.
    let addr = base.trim_start_matches("http://").to_string();
    let head = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let body = vec![b' '; 4 * 1024 * 1024 + 1];
        write!(
            s,
            "PUT /documents HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(&body).unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .unwrap();
    let status = head.split_whitespace().nth(1);
    assert_eq!(status, Some("413"), "{head}");
    let batch: Value = client
        .post(format!("{base}/search/batch"))
        .json(&json!({"queries": ["comet 3", "capital of Japan"], "k": 2}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(batch["results"].as_array().unwrap().len(), 2);
    let stats: Value = client
        .get(format!("{base}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["updates"], BATCHES + 3);
    drop(server);

    // Every acknowledged update is on disk: the saved index equals a fresh build of the
    // documents the service ended with.
    let loaded = lprag_load::load_dir(
        &src,
        &lprag_load::LoadOptions::default(),
        &lprag::NoProgress,
    )
    .unwrap();
    let mut docs: Vec<Document> = loaded
        .documents
        .into_iter()
        .filter(|d| !["cities/warsaw.txt", "facts.json#tokyo", "guide.md"].contains(&d.id.as_str()))
        .collect();
    for i in 0..BATCHES {
        for half in ['a', 'b'] {
            let v = batch_doc(i, half);
            let mut d = Document::new(
                v["id"].as_str().unwrap(),
                v["title"].as_str().unwrap(),
                v["text"].as_str().unwrap(),
            );
            d.metadata = BTreeMap::from([("batch".to_string(), i.to_string())]);
            docs.push(d);
        }
    }
    if retriever != "dense" {
        // A fresh LP-RAG build trains a new model, so scores differ: the saved index must
        // find each document the service ended with by its own text, and none it removed.
        for d in &docs {
            let found = docs_of(&query(&idx, &d.text, &["-k", "5"]));
            assert!(
                found.contains(&d.id),
                "{} missing from the saved index: {found:?}",
                d.id
            );
            for gone in ["cities/warsaw.txt", "facts.json#tokyo", "guide.md"] {
                assert!(!found.iter().any(|f| f == gone), "{gone} still indexed");
            }
        }
        return;
    }
    let encoder = Arc::new(HashingEncoder::new(HashingEncoderConfig::default()).unwrap());
    let fresh = DenseRetriever::builder()
        .chunker(Arc::new(lprag::text::MarkdownChunker::for_encoder(
            encoder.clone(),
            256,
        )))
        .encoder(encoder)
        .build(&docs)
        .await
        .unwrap();
    for q in [
        "observatory comet 7",
        "capital of France",
        "Marie Curie",
        "Vistula",
    ] {
        let h = query(&idx, q, &["-k", "5"]);
        let want = fresh.retrieve(q, Selection::TopK(5)).await.unwrap();
        assert_eq!(
            docs_of(&h),
            want.iter()
                .map(|w| w.chunk.provenance.document_id.clone())
                .collect::<Vec<_>>(),
            "{q}"
        );
        for (x, y) in h.iter().zip(&want) {
            assert!(
                (x["score"].as_f64().unwrap() - y.score as f64).abs() < 1e-5,
                "{q}"
            );
        }
    }
}

#[tokio::test]
async fn off_loopback_needs_a_token_and_every_request_carries_it() {
    let (_tmp, idx) = notes_index(&["--retriever", "bm25"]);
    let out = lprag(&["serve", idx.to_str().unwrap(), "--addr", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));

    let server = serve(&idx, &["--token", "s3cret-token"]);
    let client = http();
    let r = client
        .get(format!("{}/health", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .post(format!("{}/search", server.base))
        .bearer_auth("s3cret-token")
        .json(&json!({"query": "capital of Italy", "k": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["hits"][0]["document"], "more.jsonl#1");
}

/// `lprag serve --answer-only` on an LP-RAG index: two services on one index (no lock)
/// answer as `lprag query` does, refuse every update with 409 and write nothing.
#[tokio::test]
async fn answer_only_services_share_an_index_and_refuse_updates() {
    let (_tmp, idx) = notes_index(&["--epochs", "2"]);
    let q = "Which river flows through the capital of Poland?";
    let want = docs_of(&query(&idx, q, &["-k", "5"]));
    assert!(!want.is_empty());
    let listing = |dir: &Path| {
        let mut files = walkdir(dir);
        files.sort();
        files
    };
    let before = listing(&idx);
    let (a, b) = (
        serve(&idx, &["--answer-only"]),
        serve(&idx, &["--answer-only"]),
    );
    let client = http();
    for server in [&a, &b] {
        let search = client
            .post(format!("{}/search", server.base))
            .json(&json!({"query": q, "k": 5}));
        let v = json_of(search).await;
        assert_eq!(docs_of(v["hits"].as_array().unwrap()), want);
    }
    let put = client
        .put(format!("{}/documents", a.base))
        .json(&json!([{"id": "new", "title": "New", "text": "Krakow lies on the Vistula."}]));
    let delete = client.delete(format!(
        "{}/documents/{}",
        b.base,
        want[0].replace('/', "%2F")
    ));
    for update in [put, delete] {
        let r = update.send().await.unwrap();
        assert_eq!(r.status(), 409);
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"].as_str().unwrap().contains("--answer-only"),
            "{v}"
        );
    }
    drop((a, b));
    assert_eq!(
        listing(&idx),
        before,
        "an answer-only service wrote to the index"
    );
}

/// The JSON body of the answer to `request`.
async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Every file under `dir`: relative path, length, modification time.
fn walkdir(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, meta.len(), meta.modified().unwrap()));
            }
        }
    }
    out
}

/// The README's main job: the bundled folder of notes, indexed with the defaults, answers
/// its question with the right file.
#[test]
fn the_readme_job_answers_from_the_bundled_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let notes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notes");
    let idx = tmp.path().join("notes.idx");
    let log = ok(&[
        "index",
        notes.to_str().unwrap(),
        "--index",
        idx.to_str().unwrap(),
    ]);
    assert!(log.contains("loaded 6 documents"), "{log}");
    let h = query(
        &idx,
        "Which elements did Marie Curie discover?",
        &["-k", "3"],
    );
    assert_eq!(docs_of(&h)[0], "science/curie.html", "{h:?}");
    let h = query(
        &idx,
        "How long is the train from Tokyo?",
        &["-k", "3", "--filter", "format=markdown"],
    );
    assert_eq!(docs_of(&h)[0], "travel/kyoto.md", "{h:?}");
    // Smaller chunks: one per section, each with its heading path.
    let small = tmp.path().join("small.idx");
    ok(&[
        "index",
        notes.to_str().unwrap(),
        "--index",
        small.to_str().unwrap(),
        "--retriever",
        "dense",
        "--max-tokens",
        "40",
        "-q",
    ]);
    let h = query(
        &small,
        "How long is the Shinkansen ride from Tokyo?",
        &["-k", "1"],
    );
    assert_eq!(docs_of(&h), ["travel/kyoto.md"]);
    assert_eq!(
        h[0]["metadata"]["heading"], "Kyoto > Getting there",
        "{h:?}"
    );
}

/// A rebuild that fails leaves the settings of the saved index, which still answers.
#[test]
fn a_failed_rebuild_keeps_the_index_and_its_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx, empty) = (
        tmp.path().join("notes"),
        tmp.path().join("idx"),
        tmp.path().join("empty"),
    );
    notes(&src);
    std::fs::create_dir_all(&empty).unwrap();
    index_hashing(&src, &idx, &["--retriever", "dense"]);
    let settings = std::fs::read_to_string(idx.join("lprag.json")).unwrap();
    let out = lprag(&[
        "index",
        empty.to_str().unwrap(),
        "--index",
        idx.to_str().unwrap(),
        "--retriever",
        "dense",
        "--max-tokens",
        "40",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(idx.join("lprag.json")).unwrap(),
        settings
    );
    let h = query(&idx, "Where was Marie Curie born?", &["-k", "1"]);
    assert_eq!(docs_of(&h), ["people/curie.html"]);
}

/// `--device`: `cpu` builds and answers as the default does; a device this build cannot
/// run on (or a misspelt one) is refused before the index directory is created.
#[test]
fn the_device_is_chosen_and_a_missing_feature_refused_before_any_write() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx, other) = (
        tmp.path().join("notes"),
        tmp.path().join("idx"),
        tmp.path().join("other"),
    );
    notes(&src);
    index_hashing(&src, &idx, &["--retriever", "lprag", "--device", "cpu"]);
    let h = query(
        &idx,
        "Where was Marie Curie born?",
        &["-k", "1", "--device", "cpu"],
    );
    assert_eq!(docs_of(&h), ["people/curie.html"]);

    let mut refused = vec![("gpu:0", "gpu")];
    if cfg!(not(feature = "wgpu")) {
        refused.push(("wgpu:0", "wgpu"));
    }
    for (device, named) in refused {
        let src = src.to_str().unwrap();
        let out = lprag(&[
            "index",
            src,
            "--index",
            other.to_str().unwrap(),
            "--device",
            device,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{device}: {stderr}");
        assert!(
            stderr.contains("--device") && stderr.contains(named),
            "{stderr}"
        );
        assert!(!other.exists(), "{device}: {other:?} was created");
        let out = lprag(&["query", idx.to_str().unwrap(), "q", "--device", device]);
        assert!(!out.status.success(), "{device}");
    }
}

/// `--fp16`: an index built with the encoder's dense layers in fp16 answers without the
/// flag and the other way round (the flag is not stored; where the CPU has no
/// AVX-512-FP16, or the encoder is the hashing one, it changes nothing).
#[test]
fn an_index_built_in_fp16_answers_in_f32_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let notes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notes");
    let idx = tmp.path().join("fp16.idx");
    ok(&[
        "index",
        notes.to_str().unwrap(),
        "--index",
        idx.to_str().unwrap(),
        "--retriever",
        "dense",
        "--fp16",
        "-q",
    ]);
    let settings = std::fs::read_to_string(idx.join("lprag.json")).unwrap();
    assert!(!settings.contains("fp16"), "{settings}");
    let q = "Which elements did Marie Curie discover?";
    for extra in [&["-k", "3"][..], &["-k", "3", "--fp16"]] {
        let h = query(&idx, q, extra);
        assert_eq!(docs_of(&h)[0], "science/curie.html", "{extra:?}: {h:?}");
    }
}
