//! An on-disk embedding cache, so repeated benchmark runs (ablations over the same chunks
//! and synthetic queries) embed each text once.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lprag_core::{Embeddings, Encoder};

const MAGIC: &[u8; 8] = b"LPEMBC01";

/// The widest vectors [`CacheOnly::for_file`] accepts from a file's header (the encoder's
/// width comes from the file there, and every call allocates by it): far above any
/// embedding model's (MiniLM 384, the largest common ones 4096).
const MAX_CACHE_DIM: usize = 1 << 16;

/// An [`Encoder`] that remembers every vector its inner encoder produced, in memory and in
/// an append-only file, and answers repeated texts from there.
///
/// The file starts with a magic tag and the dimension, followed by records
/// `(u32 text length, text bytes, dimension × f32)`, little-endian. New vectors are
/// appended after every `embed` call, so an interrupted run keeps what it paid for. On
/// open, every length is checked against the bytes left in the file before anything is
/// allocated; the first record that cannot be read (a run killed mid-write, a corrupt
/// length, text that is not UTF-8) is logged as a warning with the file and its offset,
/// and the file is cut to the records before it, which are kept. One file holds one
/// encoder's vectors: give each encoder (and, for a corpus-fitted encoder, each corpus) its
/// own file.
pub struct CachedEncoder {
    inner: Arc<dyn Encoder>,
    path: PathBuf,
    map: Mutex<HashMap<String, Vec<f32>>>,
}

impl std::fmt::Debug for CachedEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEncoder")
            .field("inner", &self.inner.name())
            .field("path", &self.path)
            .field("cached", &self.len())
            .finish()
    }
}

impl CachedEncoder {
    /// Wrap `inner`, reading the vectors already stored in `path` (created when missing).
    ///
    /// # Errors
    /// [`lprag_core::Error::Io`] when the file cannot be read or created;
    /// [`lprag_core::Error::Format`] when it is not a cache file or was written for another
    /// dimension.
    pub fn open(inner: Arc<dyn Encoder>, path: impl AsRef<Path>) -> lprag_core::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let dim = inner.dimension();
        let mut map = HashMap::new();
        if path.exists() {
            let file = File::open(&path).map_err(|e| lprag_core::Error::io(&path, e))?;
            let mut r = BufReader::new(file);
            let mut head = [0u8; 12];
            r.read_exact(&mut head)
                .map_err(|e| lprag_core::Error::format(&path, format!("no header: {e}")))?;
            if &head[..8] != MAGIC {
                return Err(lprag_core::Error::format(&path, "not an embedding cache"));
            }
            let file_dim = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
            if file_dim != dim {
                return Err(lprag_core::Error::format(
                    &path,
                    format!("cache holds {file_dim}-dim vectors, encoder gives {dim}"),
                ));
            }
            let size = r
                .get_ref()
                .metadata()
                .map_err(|e| lprag_core::Error::io(&path, e))?
                .len();
            let mut good = 12u64;
            let bad = loop {
                match read_record(&mut r, dim, size.saturating_sub(good)) {
                    Ok(Some((text, v))) => {
                        good += 4 + text.len() as u64 + 4 * dim as u64;
                        map.insert(text, v);
                    }
                    Ok(None) => break None,
                    Err(why) => break Some(why),
                }
            };
            drop(r);
            if let Some(why) = bad {
                // Nothing after a bad record can be trusted (a record's place is known only
                // from the lengths before it): keep the good prefix and cut the file there,
                // so later appends stay aligned and the next open reads what this one did.
                tracing::warn!(
                    path = %path.display(),
                    offset = good,
                    kept = map.len(),
                    dropped_bytes = size.saturating_sub(good),
                    "embedding cache: bad record at byte {good} of {} ({why}); keeping the \
                     {} records before it and cutting the file to {good} bytes",
                    path.display(),
                    map.len(),
                );
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(good))
                    .map_err(|e| lprag_core::Error::io(&path, e))?;
            }
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| lprag_core::Error::io(parent, e))?;
            }
            let mut f = File::create(&path).map_err(|e| lprag_core::Error::io(&path, e))?;
            f.write_all(MAGIC)
                .and_then(|_| f.write_all(&(dim as u32).to_le_bytes()))
                .map_err(|e| lprag_core::Error::io(&path, e))?;
        }
        Ok(Self {
            inner,
            path,
            map: Mutex::new(map),
        })
    }

    /// Number of cached vectors.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// `true` when nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn append(&self, new: &[(String, Vec<f32>)]) -> lprag_core::Result<()> {
        let file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| lprag_core::Error::io(&self.path, e))?;
        let mut w = BufWriter::new(file);
        let mut write = || -> std::io::Result<()> {
            for (text, v) in new {
                w.write_all(&(text.len() as u32).to_le_bytes())?;
                w.write_all(text.as_bytes())?;
                for x in v {
                    w.write_all(&x.to_le_bytes())?;
                }
            }
            w.flush()
        };
        write().map_err(|e| lprag_core::Error::io(&self.path, e))
    }
}

/// An [`Encoder`] that embeds nothing: it has a cache file's dimension and an encoder's
/// name, and every call is an error. Wrapped in a [`CachedEncoder`] over that file
/// (`lprag-eval --embedding-cache-only`), every text comes from the cache and the first
/// text the cache lacks stops the run with an error that names it, so a machine without
/// the encoder's weights reruns a benchmark whose texts were embedded elsewhere. Without a
/// tokenizer ([`CacheOnly::with_tokens`]) [`Encoder::max_input_tokens`] is `None`, so
/// passages are not split to fit; with the encoder's own tokenizer they are split exactly
/// where the encoder would split them (`lprag-eval --embedding-cache-only --model-dir DIR`,
/// DIR holding `tokenizer.json` and `config.json`, not the weights).
#[derive(Debug, Clone)]
pub struct CacheOnly {
    name: String,
    dim: usize,
    path: PathBuf,
    tokens: Option<lprag::model::bert::TokenCounter>,
}

impl CacheOnly {
    /// The stand-in for the encoder called `name` whose vectors `path` holds.
    ///
    /// # Errors
    /// [`lprag_core::Error::Io`] when the file cannot be read;
    /// [`lprag_core::Error::Format`] when it is not a cache file or its dimension is 0 or
    /// over 65,536.
    pub fn for_file(name: &str, path: impl AsRef<Path>) -> lprag_core::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut head = [0u8; 12];
        File::open(&path)
            .and_then(|mut f| f.read_exact(&mut head))
            .map_err(|e| lprag_core::Error::io(&path, e))?;
        if &head[..8] != MAGIC {
            return Err(lprag_core::Error::format(&path, "not an embedding cache"));
        }
        let dim = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
        if dim == 0 {
            return Err(lprag_core::Error::format(&path, "dimension 0"));
        }
        if dim > MAX_CACHE_DIM {
            return Err(lprag_core::Error::format(
                &path,
                format!("dimension {dim}, over the limit of {MAX_CACHE_DIM}"),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            dim,
            path,
            tokens: None,
        })
    }

    /// Count tokens and bound inputs as the encoder whose tokenizer `tokens` reads
    /// ([`lprag::model::bert::TokenCounter::from_dir`]), so chunkers bounded by the
    /// encoder's input split passages as they would with the encoder itself.
    pub fn with_tokens(mut self, tokens: lprag::model::bert::TokenCounter) -> Self {
        self.tokens = Some(tokens);
        self
    }
}

#[async_trait]
impl Encoder for CacheOnly {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
        let first: String = texts
            .first()
            .map(|t| t.chars().take(80).collect())
            .unwrap_or_default();
        Err(lprag_core::Error::invalid(
            "--embedding-cache-only",
            format!(
                "{} text(s) are not in {}, the first: {first:?}",
                texts.len(),
                self.path.display()
            ),
        ))
    }

    fn max_input_tokens(&self) -> Option<usize> {
        self.tokens.as_ref().map(|t| t.max_seq_length())
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.tokens.as_ref().and_then(|t| t.count(text))
    }
}

/// The next record of a cache of `dim`-wide vectors, `remaining` bytes before the end of
/// the file: `Ok(None)` at the end, `Err(why)` for a record that cannot be read (a torn
/// write, a corrupt length, text that is not UTF-8). Lengths are checked against
/// `remaining` before anything is allocated, so a corrupt length costs no memory.
fn read_record(
    r: &mut impl Read,
    dim: usize,
    remaining: u64,
) -> Result<Option<(String, Vec<f32>)>, String> {
    if remaining == 0 {
        return Ok(None);
    }
    let width = 4 * dim as u64;
    if remaining < 4 + width {
        return Err(format!(
            "{remaining} bytes left, a record takes at least {}",
            4 + width
        ));
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = u32::from_le_bytes(len) as u64;
    if 4 + len + width > remaining {
        return Err(format!(
            "a text length of {len} bytes, but only {} bytes are left for text and a \
             {dim}-wide vector",
            remaining - 4
        ));
    }
    let mut text = vec![0u8; len as usize];
    r.read_exact(&mut text).map_err(|e| e.to_string())?;
    let mut raw = vec![0u8; dim * 4];
    r.read_exact(&mut raw).map_err(|e| e.to_string())?;
    let v = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let text = String::from_utf8(text).map_err(|_| "its text is not UTF-8".to_string())?;
    Ok(Some((text, v)))
}

#[async_trait]
impl Encoder for CachedEncoder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
        self.embed_keyed(texts, false).await
    }

    async fn embed_queries(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
        // A symmetric encoder's query vectors are its document vectors: one entry each.
        let apart = self.inner.embeds_queries_apart();
        self.embed_keyed(texts, apart).await
    }

    fn embeds_queries_apart(&self) -> bool {
        self.inner.embeds_queries_apart()
    }

    fn fingerprint(&self) -> Option<String> {
        self.inner.fingerprint()
    }

    fn max_input_tokens(&self) -> Option<usize> {
        self.inner.max_input_tokens()
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.inner.count_tokens(text)
    }
}

/// Cache keys of query texts: the text behind a marker no document text starts with, so
/// an encoder that embeds queries differently (`Encoder::embed_queries`) keeps both.
const QUERY_KEY: &str = "\u{0}query\u{0}";

impl CachedEncoder {
    async fn embed_keyed(&self, texts: &[String], queries: bool) -> lprag_core::Result<Embeddings> {
        let key = |t: &str| -> String {
            if queries {
                format!("{QUERY_KEY}{t}")
            } else {
                t.to_string()
            }
        };
        let missing: Vec<&String> = {
            let map = self.map.lock().expect("cache lock");
            let mut seen = std::collections::HashSet::new();
            texts
                .iter()
                .filter(|t| !map.contains_key(&key(t)) && seen.insert(t.as_str()))
                .collect()
        };
        if !missing.is_empty() {
            let owned: Vec<String> = missing.iter().map(|t| t.to_string()).collect();
            let fresh = if queries {
                self.inner.embed_queries(&owned).await?
            } else {
                self.inner.embed(&owned).await?
            };
            if fresh.rows() != owned.len() {
                return Err(lprag_core::Error::DimensionMismatch {
                    location: format!("encoder '{}' output rows", self.inner.name()),
                    expected: owned.len(),
                    actual: fresh.rows(),
                });
            }
            let new: Vec<(String, Vec<f32>)> = owned
                .iter()
                .enumerate()
                .map(|(i, t)| (key(t), fresh.row(i).to_vec()))
                .collect();
            self.append(&new)?;
            let mut map = self.map.lock().expect("cache lock");
            map.extend(new);
        }
        let map = self.map.lock().expect("cache lock");
        let dim = self.dimension();
        let mut data = Vec::with_capacity(texts.len() * dim);
        for t in texts {
            data.extend_from_slice(&map[&key(t)]);
        }
        Embeddings::new(dim, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    #[async_trait]
    impl Encoder for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn dimension(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            let rows: Vec<Vec<f32>> = texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect();
            Embeddings::from_rows(2, &rows)
        }
    }

    #[tokio::test]
    async fn repeats_are_served_from_memory_and_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let texts: Vec<String> = ["a", "bb", "a", "ccc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let enc = CachedEncoder::open(inner.clone(), &path).unwrap();
        let e = enc.embed(&texts).await.unwrap();
        assert_eq!(e.row(1), &[2.0, 1.0]);
        assert_eq!(e.row(2), &[1.0, 1.0]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 3); // "a" once
        enc.embed(&texts).await.unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);

        // A new process: everything comes from the file; a torn record is dropped.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[9, 0, 0, 0, b'x']).unwrap();
        drop(f);
        let enc = CachedEncoder::open(inner.clone(), &path).unwrap();
        assert_eq!(enc.len(), 3);
        let e2 = enc.embed(&texts).await.unwrap();
        assert_eq!(e2.row(3), &[3.0, 1.0]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);
        // The torn bytes were cut, so a new vector appended now reads back.
        enc.embed(&["dddd".to_string()]).await.unwrap();
        let enc = CachedEncoder::open(inner.clone(), &path).unwrap();
        assert_eq!(enc.len(), 4);
    }

    #[tokio::test]
    async fn cache_only_answers_from_the_file_and_names_the_first_miss() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let known: Vec<String> = vec!["a".into(), "bb".into()];
        let want = CachedEncoder::open(inner, &path)
            .unwrap()
            .embed(&known)
            .await
            .unwrap();

        let only = CacheOnly::for_file("counting", &path).unwrap();
        assert_eq!((only.name(), only.dimension()), ("counting", 2));
        assert_eq!(only.max_input_tokens(), None);
        let enc = CachedEncoder::open(Arc::new(only), &path).unwrap();
        assert_eq!(enc.embed(&known).await.unwrap(), want);
        let err = enc
            .embed(&["a".into(), "never embedded".into()])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("\"never embedded\""), "{err}");
        assert!(err.to_string().contains("c.bin"), "{err}");

        let missing = CacheOnly::for_file("x", dir.path().join("none.bin")).unwrap_err();
        assert!(missing.to_string().contains("none.bin"), "{missing}");
        std::fs::write(dir.path().join("bad.bin"), b"LPEMBC01\0\0\0\0").unwrap();
        let zero = CacheOnly::for_file("x", dir.path().join("bad.bin")).unwrap_err();
        assert!(zero.to_string().contains("dimension 0"), "{zero}");
    }

    /// A weightless model directory: a word-level tokenizer with `[CLS]`/`[SEP]` and a
    /// 6-token input.
    fn tokenizer_only_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let words = [
            "[UNK]", "[CLS]", "[SEP]", "one", "two", "three", "four", "five",
        ];
        let vocab: serde_json::Map<String, serde_json::Value> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
            .collect();
        let tokenizer = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
            "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
        });
        let config = serde_json::json!({
            "hidden_size": 4, "intermediate_size": 8, "max_position_embeddings": 64,
            "num_attention_heads": 1, "num_hidden_layers": 1, "vocab_size": words.len(),
            "type_vocab_size": 2
        });
        let sbert = serde_json::json!({"max_seq_length": 6, "do_lower_case": false});
        for (name, v) in [
            ("tokenizer.json", tokenizer),
            ("config.json", config),
            ("sentence_bert_config.json", sbert),
        ] {
            std::fs::write(dir.path().join(name), v.to_string()).unwrap();
        }
        dir
    }

    #[tokio::test]
    async fn cache_only_with_a_tokenizer_splits_passages_as_the_encoder_would() {
        use lprag_core::Chunker;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        CachedEncoder::open(Arc::new(Counting(AtomicUsize::new(0))), &path)
            .unwrap()
            .embed(&["one".into()])
            .await
            .unwrap();
        let model = tokenizer_only_dir();
        let tokens = lprag::model::bert::TokenCounter::from_dir(model.path()).unwrap();
        let only = CacheOnly::for_file("counting", &path)
            .unwrap()
            .with_tokens(tokens);
        assert_eq!(only.max_input_tokens(), Some(6));
        assert_eq!(only.count_tokens("one two three"), Some(5));
        assert_eq!(only.count_tokens("one two three four five"), Some(7));

        // A passage of 7 tokens does not fit 6: the bounded chunker splits it.
        let doc = lprag_core::Document::new("d", "", "one two. three four five.");
        let encoder: Arc<dyn Encoder> = Arc::new(only);
        let chunks = lprag_text::TokenChunker::new(encoder.clone())
            .chunk(std::slice::from_ref(&doc))
            .await
            .unwrap();
        assert!(chunks.len() >= 2, "{chunks:?}");
        for c in &chunks {
            let n = encoder.count_tokens(&c.embedding_text()).unwrap();
            assert!(n <= 6, "{n} tokens in {:?}", c.embedding_text());
        }
        let bare = CacheOnly::for_file("counting", &path).unwrap();
        assert_eq!(bare.count_tokens("one"), None);
    }

    /// What `tracing` writes, kept for a test to read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// `open` under a subscriber that keeps the log: the encoder and what was logged.
    fn open_logged(
        inner: Arc<dyn Encoder>,
        path: &Path,
    ) -> (lprag_core::Result<CachedEncoder>, String) {
        let logs = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .finish();
        let enc =
            tracing::subscriber::with_default(subscriber, || CachedEncoder::open(inner, path));
        let log = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        (enc, log)
    }

    #[tokio::test]
    async fn a_corrupt_record_length_is_bounded_by_the_file_warned_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        for (text, v) in [("a", [1.0f32, 1.0]), ("bb", [2.0, 1.0])] {
            bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
            bytes.extend_from_slice(text.as_bytes());
            v.iter()
                .for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
        }
        let good = bytes.len() as u64;
        // A length of 4 GiB − 1 (once a 4 GiB allocation), then bytes that cannot be read.
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(b"0123456789abcdef");
        std::fs::write(&path, &bytes).unwrap();

        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let (enc, log) = open_logged(inner.clone(), &path);
        let enc = enc.unwrap();
        assert_eq!(enc.len(), 2, "the good prefix is kept");
        assert!(log.contains(&format!("bad record at byte {good}")), "{log}");
        assert!(log.contains(&path.display().to_string()), "{log}");
        assert!(log.contains("text length of 4294967295"), "{log}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good, "cut there");
        // Appends after the cut read back, and the next open has nothing to warn about.
        enc.embed(&["a".into(), "ccc".into()]).await.unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        let (enc, log) = open_logged(inner.clone(), &path);
        assert_eq!(enc.unwrap().len(), 3);
        assert!(!log.contains("bad record"), "{log}");

        // The bound holds before any allocation, for text and vector lengths alike.
        let huge = u32::MAX.to_le_bytes();
        let err = read_record(&mut &huge[..], 2, 20).unwrap_err();
        assert!(err.contains("4294967295"), "{err}");
        let err = read_record(&mut &huge[..], 1 << 30, 20).unwrap_err();
        assert!(err.contains("at least"), "{err}");
        // A header that claims absurdly wide vectors is refused.
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(dir.path().join("wide.bin"), head).unwrap();
        let wide = CacheOnly::for_file("x", dir.path().join("wide.bin")).unwrap_err();
        assert!(wide.to_string().contains("over the limit"), "{wide}");
    }

    #[test]
    fn wrong_dimension_or_garbage_is_a_format_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.bin");
        std::fs::write(&path, b"hello world!").unwrap();
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let e = CachedEncoder::open(inner.clone(), &path).unwrap_err();
        assert!(e.to_string().contains("not an embedding cache"), "{e}");
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&7u32.to_le_bytes());
        std::fs::write(&path, head).unwrap();
        let e = CachedEncoder::open(inner, &path).unwrap_err();
        assert!(e.to_string().contains("7-dim"), "{e}");
    }

    /// Documents embed as `[1, n]`, queries as `[0, n]` (`n` counts inner calls).
    struct Asymmetric(AtomicUsize);

    #[async_trait]
    impl Encoder for Asymmetric {
        fn name(&self) -> &str {
            "asymmetric"
        }
        fn dimension(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) as f32;
            Embeddings::new(2, texts.iter().flat_map(|_| [1.0, n]).collect())
        }
        async fn embed_queries(&self, texts: &[String]) -> lprag_core::Result<Embeddings> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) as f32;
            Embeddings::new(2, texts.iter().flat_map(|_| [0.0, n]).collect())
        }
        fn embeds_queries_apart(&self) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn queries_and_documents_are_cached_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let inner = Arc::new(Asymmetric(AtomicUsize::new(0)));
        let cache = CachedEncoder::open(inner.clone(), &path).unwrap();
        let t = vec!["same text".to_string()];
        let d = cache.embed(&t).await.unwrap();
        let q = cache.embed_queries(&t).await.unwrap();
        assert_eq!(d.row(0)[0], 1.0);
        assert_eq!(q.row(0)[0], 0.0);
        let reopened = CachedEncoder::open(inner.clone(), &path).unwrap();
        assert_eq!(reopened.embed(&t).await.unwrap().row(0), d.row(0));
        assert_eq!(reopened.embed_queries(&t).await.unwrap().row(0), q.row(0));
        assert_eq!(
            inner.0.load(Ordering::SeqCst),
            2,
            "both served from the file"
        );
    }
}
