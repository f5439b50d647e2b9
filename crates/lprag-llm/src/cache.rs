//! A persistent response cache: LLM indexing that never pays twice.
//!
//! Every successful completion is written to its own file, named by a SHA-256 of the
//! backend kind, model name and the whole request (messages, temperature, max tokens), via
//! a temporary file and an atomic rename, before the caller sees it. A run that is
//! interrupted — crash, Ctrl-C, a permanent error on document 900 of 1,000 — resumes where
//! it stopped when run again: every answer already paid for comes from disk. A corrupt or
//! unreadable entry is reported (see [`CachedChat::warnings`] and the `Progress` sink),
//! deleted and fetched again; it is never fatal. A failure to *write* an entry is reported
//! the same way and the answer is still returned.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lprag_core::Progress;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, Usage};

const FORMAT_VERSION: u32 = 1;

/// Hits, misses and problems of a cache since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Answers served from disk.
    pub hits: u64,
    /// Answers fetched from the backend (and stored).
    pub misses: u64,
    /// Entries found corrupt, deleted and refetched.
    pub corrupt: u64,
    /// Entries that could not be written (the answer was still returned).
    pub write_errors: u64,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    version: u32,
    key: String,
    backend: String,
    model: String,
    content: String,
    usage: Option<Usage>,
    finish_reason: Option<String>,
}

/// A directory of cached completions. Cheap to share (`Arc`); safe to use from many tasks
/// and from several processes (writes are atomic renames, last writer wins with identical
/// content).
#[derive(Debug)]
pub struct ResponseCache {
    dir: PathBuf,
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    write_errors: AtomicU64,
}

impl ResponseCache {
    /// Open (creating if needed) a cache in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, LlmError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| LlmError::Cache {
            path: dir.clone(),
            message: format!("cannot create the cache directory: {e}"),
        })?;
        Ok(Self {
            dir,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Counters since the cache was opened.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
        }
    }

    /// The key of a request to `model` of `backend`: hex SHA-256 of a canonical JSON
    /// rendering of all three (object keys sorted at every level, compact), so that the
    /// key is the same whether or not serde_json's `preserve_order` feature is on in the
    /// build (rig turns it on).
    pub fn key(backend: &str, model: &str, request: &ChatRequest) -> String {
        let material = serde_json::json!({
            "v": FORMAT_VERSION,
            "backend": backend,
            "model": model,
            "request": request,
        });
        let mut canonical = String::new();
        write_canonical(&material, &mut canonical);
        let digest = Sha256::digest(canonical.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Where the entry for `key` lives (two-level fan-out keeps directories small). A key
    /// made by [`ResponseCache::key`] (lowercase hex) names its file directly; any other
    /// key (empty, non-ASCII, `../x`, …) is hashed first, so every entry stays inside the
    /// cache directory.
    pub fn path_of(&self, key: &str) -> PathBuf {
        let safe = key.len() >= 2 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let name = if safe {
            key.to_string()
        } else {
            Sha256::digest(key.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        self.dir.join(&name[..2]).join(format!("{name}.json"))
    }

    /// The cached answer for `key`. `Ok(None)` when absent; `Err(reason)` when present but
    /// unreadable or corrupt — the entry has then been deleted.
    pub fn get(&self, key: &str) -> Result<Option<ChatResponse>, String> {
        let path = self.path_of(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let entry: Result<Entry, String> =
            serde_json::from_slice(&bytes).map_err(|e| e.to_string());
        match entry {
            Ok(e) if e.version == FORMAT_VERSION && e.key == key => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Ok(Some(ChatResponse {
                    content: e.content,
                    usage: e.usage,
                    finish_reason: e.finish_reason,
                    cached: true,
                }))
            }
            other => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                let why = match other {
                    Err(e) => e,
                    Ok(_) => "version or key mismatch".into(),
                };
                let _ = fs::remove_file(&path);
                Err(format!(
                    "corrupt cache entry {} ({why}); deleted, fetching again",
                    path.display()
                ))
            }
        }
    }

    /// Store `response` under `key` atomically.
    pub fn put(
        &self,
        key: &str,
        backend: &str,
        model: &str,
        response: &ChatResponse,
    ) -> Result<(), String> {
        let path = self.path_of(key);
        let result = (|| -> std::io::Result<()> {
            let parent = path.parent().unwrap_or(&self.dir);
            fs::create_dir_all(parent)?;
            let entry = Entry {
                version: FORMAT_VERSION,
                key: key.to_string(),
                backend: backend.to_string(),
                model: model.to_string(),
                content: response.content.clone(),
                usage: response.usage,
                finish_reason: response.finish_reason.clone(),
            };
            let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
            serde_json::to_writer(&mut tmp, &entry)?;
            tmp.as_file().sync_all()?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok(())
        })();
        result.map_err(|e| {
            self.write_errors.fetch_add(1, Ordering::Relaxed);
            format!("cannot write cache entry {}: {e}", path.display())
        })
    }

    /// Delete the entry for `key`, if any (an answer that turned out unusable).
    pub fn remove(&self, key: &str) {
        let _ = fs::remove_file(self.path_of(key));
    }

    /// Number of entries and their total size in bytes (file lengths).
    pub fn disk_usage(&self) -> std::io::Result<(u64, u64)> {
        let (mut n, mut bytes) = (0, 0);
        for sub in fs::read_dir(&self.dir)? {
            let sub = sub?;
            if !sub.file_type()?.is_dir() {
                continue;
            }
            for f in fs::read_dir(sub.path())? {
                let f = f?;
                if f.path().extension().is_some_and(|e| e == "json") {
                    n += 1;
                    bytes += f.metadata()?.len();
                }
            }
        }
        Ok((n, bytes))
    }
}

/// A [`ChatModel`] that answers from a [`ResponseCache`] when it can and stores every new
/// answer before returning it. Failed calls are not cached, and an answer the jobs could
/// not parse even after their retries is deleted again ([`ChatModel::forget`]), so a rerun
/// asks anew; with a deterministic model (temperature 0, the library's default) that only
/// pays again for the same answer, so [`CachedChat::keep_unreadable`] keeps them and a
/// rerun replays the same fallbacks without a call. Keys are the backend kind, the model
/// name and the request, not the server's address: a local server restarted on another
/// port keeps its cache (serve two different models under one name from two cache
/// directories).
pub struct CachedChat {
    inner: Arc<dyn ChatModel>,
    cache: Arc<ResponseCache>,
    progress: Option<Arc<dyn Progress>>,
    warnings: Mutex<Vec<String>>,
    keep_unreadable: bool,
}

impl std::fmt::Debug for CachedChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedChat")
            .field("backend", &self.inner.backend())
            .field("model", &self.inner.name())
            .field("cache", &self.cache.dir)
            .finish()
    }
}

impl CachedChat {
    /// Cache `inner`'s answers in `cache`.
    pub fn new(inner: Arc<dyn ChatModel>, cache: Arc<ResponseCache>) -> Self {
        Self {
            inner,
            cache,
            progress: None,
            warnings: Mutex::new(Vec::new()),
            keep_unreadable: false,
        }
    }

    /// Keep answers that stayed unreadable after their retries instead of deleting them
    /// (default: `false`, delete). With temperature 0 a model writes the same answer again,
    /// so asking anew only repeats the cost; keeping them makes a rerun free, fallbacks
    /// included. Calls to [`ChatModel::forget`] still reach the wrapped model.
    pub fn keep_unreadable(mut self, keep: bool) -> Self {
        self.keep_unreadable = keep;
        self
    }

    /// Cache `inner`'s answers in a cache opened at `dir`.
    pub fn open(inner: Arc<dyn ChatModel>, dir: impl AsRef<Path>) -> Result<Self, LlmError> {
        Ok(Self::new(inner, Arc::new(ResponseCache::open(dir)?)))
    }

    /// Also send warnings (corrupt or unwritable entries) to `progress`.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<ResponseCache> {
        &self.cache
    }

    /// Warnings so far (the first 1,000).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn warn(&self, message: String) {
        if let Some(p) = &self.progress {
            p.warn(&message);
        }
        let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() < 1000 {
            w.push(message);
        }
    }
}

#[async_trait]
impl ChatModel for CachedChat {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn backend(&self) -> &str {
        self.inner.backend()
    }

    fn context_tokens(&self) -> Option<u32> {
        self.inner.context_tokens()
    }

    fn forget(&self, request: &ChatRequest) {
        if !self.keep_unreadable {
            let key = ResponseCache::key(self.inner.backend(), self.inner.name(), request);
            self.cache.remove(&key);
        }
        self.inner.forget(request);
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let (backend, model) = (self.inner.backend(), self.inner.name());
        let key = ResponseCache::key(backend, model, request);
        // File reads and writes run on tokio's blocking pool, not on the caller's worker.
        if let Some(hit) = self.lookup(&key).await {
            return Ok(hit);
        }
        let response = self.inner.complete(request).await?;
        self.cache.misses.fetch_add(1, Ordering::Relaxed);
        let (cache, stored) = (self.cache.clone(), response.clone());
        let (backend, model) = (backend.to_string(), model.to_string());
        let written =
            tokio::task::spawn_blocking(move || cache.put(&key, &backend, &model, &stored))
                .await
                .unwrap_or_else(|e| Err(format!("LLM cache write task failed: {e}")));
        if let Err(why) = written {
            self.warn(why);
        }
        Ok(response)
    }

    /// A cached answer is replayed as one piece; otherwise the inner model's stream
    /// passes through and, once it has ended without an error, its text is cached under
    /// the same key as [`ChatModel::complete`]'s (a cut stream caches nothing).
    async fn complete_stream(&self, request: &ChatRequest) -> Result<crate::TextStream, LlmError> {
        use futures::StreamExt;
        let (backend, model) = (self.inner.backend(), self.inner.name());
        let key = ResponseCache::key(backend, model, request);
        if let Some(hit) = self.lookup(&key).await {
            return Ok(Box::pin(futures::stream::once(
                async move { Ok(hit.content) },
            )));
        }
        let inner = self.inner.complete_stream(request).await?;
        self.cache.misses.fetch_add(1, Ordering::Relaxed);
        let cache = self.cache.clone();
        let (backend, model) = (backend.to_string(), model.to_string());
        let progress = self.progress.clone();
        // (the inner stream, its text so far, whether it failed, where to store the text
        // once it has ended): each piece passes through.
        let state = (
            inner,
            String::new(),
            false,
            Some((cache, key, backend, model)),
        );
        Ok(Box::pin(futures::stream::unfold(
            state,
            move |(mut inner, mut text, mut failed, mut store)| {
                let progress = progress.clone();
                async move {
                    match inner.next().await {
                        Some(Ok(piece)) => {
                            text.push_str(&piece);
                            Some((Ok(piece), (inner, text, failed, store)))
                        }
                        Some(Err(e)) => {
                            failed = true;
                            Some((Err(e), (inner, text, failed, store)))
                        }
                        None => {
                            if let (false, Some((cache, key, backend, model))) =
                                (failed, store.take())
                            {
                                let stored = ChatResponse::text(text);
                                let written = tokio::task::spawn_blocking(move || {
                                    cache.put(&key, &backend, &model, &stored)
                                })
                                .await
                                .unwrap_or_else(|e| {
                                    Err(format!("LLM cache write task failed: {e}"))
                                });
                                if let Err(why) = written {
                                    tracing::warn!(target: "lprag::llm", error = %why, "LLM cache write failed");
                                    if let Some(p) = &progress {
                                        p.warn(&why);
                                    }
                                }
                            }
                            None
                        }
                    }
                }
            },
        )))
    }
}

impl CachedChat {
    /// The cached answer to `key`, if any (read on tokio's blocking pool).
    async fn lookup(&self, key: &str) -> Option<ChatResponse> {
        let (cache, k) = (self.cache.clone(), key.to_string());
        let looked_up = tokio::task::spawn_blocking(move || cache.get(&k))
            .await
            .unwrap_or_else(|e| Err(format!("LLM cache lookup task failed: {e}")));
        match looked_up {
            Ok(hit) => hit,
            Err(why) => {
                self.warn(why);
                None
            }
        }
    }
}

/// `value` as compact JSON with every object's keys in sorted order: what
/// `Value::to_string` writes when serde_json's `preserve_order` feature is off.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatMessage;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn keys_are_written_with_sorted_object_keys_whatever_serde_json_preserves() {
        // Inserted out of order: with `preserve_order` (rig's build) `to_string` keeps this
        // order; the key material must not.
        let v = serde_json::json!({"b": "s\"q", "a": [{"y": 2, "x": 1.5}, null, true]});
        let mut out = String::new();
        write_canonical(&v, &mut out);
        assert_eq!(out, r#"{"a":[{"x":1.5,"y":2},null,true],"b":"s\"q"}"#);
    }

    struct Counting(AtomicUsize);

    #[async_trait]
    impl ChatModel for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            if request.messages[0].content == "fail" {
                return Err(LlmError::Permanent("no".into()));
            }
            Ok(ChatResponse {
                content: format!("answer {n} to {}", request.messages[0].content),
                usage: Some(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 4,
                }),
                finish_reason: Some("stop".into()),
                cached: false,
            })
        }
    }

    #[test]
    fn odd_keys_stay_inside_the_cache_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::open(dir.path().join("c")).unwrap();
        let response = ChatResponse {
            content: "hi".into(),
            usage: None,
            finish_reason: None,
            cached: false,
        };
        for key in [
            "",
            "a",
            "é",
            "../../x",
            "/etc/passwd",
            "AB",
            "0123456789abcdef",
        ] {
            let path = cache.path_of(key);
            assert!(path.starts_with(dir.path().join("c")), "{key:?}: {path:?}");
            assert!(
                path.components()
                    .all(|c| c != std::path::Component::ParentDir),
                "{key:?}: {path:?}"
            );
            cache.put(key, "b", "m", &response).unwrap();
            assert_eq!(cache.get(key).unwrap().unwrap().content, "hi", "{key:?}");
        }
        assert!(!dir.path().join("x").exists());
    }

    fn req(text: &str) -> ChatRequest {
        ChatRequest::new(vec![ChatMessage::user(text)])
    }

    #[tokio::test]
    async fn hits_misses_corruption_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let chat = CachedChat::open(inner.clone(), dir.path()).unwrap();
        let a = chat.complete(&req("a")).await.unwrap();
        assert!(!a.cached);
        let a2 = chat.complete(&req("a")).await.unwrap();
        assert!(a2.cached);
        assert_eq!(a.content, a2.content);
        assert_eq!(a.usage, a2.usage);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        // Different parameters are a different key.
        chat.complete(&req("a").temperature(0.5)).await.unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);

        // A failed call is not cached: it is attempted again next time.
        assert!(chat.complete(&req("fail")).await.is_err());
        assert!(chat.complete(&req("fail")).await.is_err());
        assert_eq!(inner.0.load(Ordering::SeqCst), 4);

        // Corrupt the entry: reported, refetched, repaired.
        let key = ResponseCache::key("custom", "counting", &req("a"));
        fs::write(chat.cache().path_of(&key), b"{\"version\":1,\"ke").unwrap();
        let a3 = chat.complete(&req("a")).await.unwrap();
        assert!(!a3.cached);
        assert_eq!(inner.0.load(Ordering::SeqCst), 5);
        assert_eq!(chat.warnings().len(), 1);
        assert!(
            chat.warnings()[0].contains("corrupt"),
            "{:?}",
            chat.warnings()
        );
        assert!(chat.complete(&req("a")).await.unwrap().cached);
        let s = chat.cache().stats();
        assert_eq!((s.hits, s.misses, s.corrupt), (2, 3, 1));
        assert_eq!(chat.cache().disk_usage().unwrap().0, 2);

        // A new cache over the same directory (a new process) sees the same entries.
        let again = CachedChat::open(inner.clone(), dir.path()).unwrap();
        assert!(again.complete(&req("a")).await.unwrap().cached);
        assert_eq!(inner.0.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn unwritable_cache_still_returns_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let chat = CachedChat::open(inner, dir.path()).unwrap();
        // Block the fan-out directory with a file.
        let key = ResponseCache::key("custom", "counting", &req("b"));
        fs::write(dir.path().join(&key[..2]), b"not a dir").unwrap();
        let r = chat.complete(&req("b")).await.unwrap();
        assert!(r.content.contains("to b"));
        assert_eq!(chat.cache().stats().write_errors, 1);
        let w = chat.warnings();
        assert!(w.iter().any(|w| w.contains("cannot write")), "{w:?}");
    }
}
