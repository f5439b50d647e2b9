//! The `hf-hub` download against a local server standing in for the Hugging Face Hub
//! (the hub's file protocol: `GET /{repo}/resolve/{rev}/{file}` with a `Range` header,
//! answered with `etag`, `x-repo-commit` and `content-range`). Nothing leaves loopback.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use lprag_core::{Encoder, Error};

use super::resolve::resolve_with;
use super::tests::{cpu, tiny_model_dir};
use super::SentenceEncoder;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A hub stand-in serving the files of `dir` as repository `repo`; counts requests.
struct HubStandIn {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl HubStandIn {
    fn serve(repo: &str, dir: &Path) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut files = HashMap::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    pending.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                    files.insert(
                        format!("/{repo}/resolve/main/{rel}"),
                        std::fs::read(&p).unwrap(),
                    );
                }
            }
        }
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut start = 0usize;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    let lower = h.to_ascii_lowercase();
                    if let Some(r) = lower.strip_prefix("range: bytes=") {
                        start = r.split('-').next().unwrap().trim().parse().unwrap_or(0);
                    }
                }
                let Some(body) = files.get(&path) else {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    continue;
                };
                let etag = format!("{:016x}-{}", fnv(body), body.len());
                let part = &body[start.min(body.len())..];
                let end = (start + part.len()).saturating_sub(1);
                let head = format!(
                    "HTTP/1.1 206 Partial Content\r\netag: \"{etag}\"\r\nx-repo-commit: {COMMIT}\r\n\
                     content-range: bytes {start}-{end}/{}\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n",
                    body.len(),
                    part.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(part);
            }
        });
        HubStandIn { url, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn env_with(vars: Vec<(&'static str, OsString)>) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<&str, OsString> = vars.into_iter().collect();
    move |k| map.get(k).cloned()
}

/// The tiny model served as `acme/tiny-bert`, and an empty cache.
fn stand_in() -> (tempfile::TempDir, HubStandIn, tempfile::TempDir) {
    let model = tiny_model_dir();
    let hub = HubStandIn::serve("acme/tiny-bert", model.path());
    (model, hub, tempfile::tempdir().unwrap())
}

#[test]
fn a_missing_model_downloads_into_the_cache_once_then_reads_it_offline() {
    let (model, hub, cache) = stand_in();
    let env = env_with(vec![
        ("HF_HUB_CACHE", cache.path().into()),
        ("HF_ENDPOINT", hub.url.clone().into()),
    ]);

    let dir: PathBuf = resolve_with(None, "acme/tiny-bert", &env).unwrap();
    assert_eq!(
        dir,
        cache
            .path()
            .join("models--acme--tiny-bert/snapshots")
            .join(COMMIT)
    );
    for f in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "modules.json",
        "1_Pooling/config.json",
    ] {
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(model.path().join(f)).unwrap(),
            "{f} arrives byte for byte"
        );
    }
    assert!(hub.requests() >= 6, "metadata and body for each of 3 files");
    // The downloaded snapshot is a working encoder, named from the cache layout.
    let enc = SentenceEncoder::from_dir(&dir, &cpu()).unwrap();
    assert_eq!(enc.name(), "acme/tiny-bert");
    let local = SentenceEncoder::from_dir(model.path(), &cpu()).unwrap();
    assert_eq!(
        enc.encode(&["a downloaded model"]).unwrap().as_slice(),
        local.encode(&["a downloaded model"]).unwrap().as_slice()
    );

    // Second use: found in the cache, the hub is not asked again.
    let before = hub.requests();
    assert_eq!(resolve_with(None, "acme/tiny-bert", &env).unwrap(), dir);
    assert_eq!(hub.requests(), before);
}

#[test]
fn a_model_the_hub_does_not_have_is_a_backend_error_naming_it() {
    let (_model, hub, cache) = stand_in();
    let env = env_with(vec![
        ("HF_HUB_CACHE", cache.path().into()),
        ("HF_ENDPOINT", hub.url.clone().into()),
    ]);
    let e = resolve_with(None, "acme/no-such-model", &env).unwrap_err();
    assert!(matches!(e, Error::Backend { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(shown.contains("acme/no-such-model"), "{shown}");
    assert!(shown.contains("config.json"), "{shown}");
    // Nothing half-written is left to be mistaken for a model.
    assert!(super::resolve::find_in_cache(cache.path(), "acme/no-such-model").is_none());
}
