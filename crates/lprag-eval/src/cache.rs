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

/// An [`Encoder`] that remembers every vector its inner encoder produced, in memory and in
/// an append-only file, and answers repeated texts from there.
///
/// The file starts with a magic tag and the dimension, followed by records
/// `(u32 text length, text bytes, dimension × f32)`, little-endian. New vectors are
/// appended after every `embed` call, so an interrupted run keeps what it paid for; a
/// truncated last record (a run killed mid-write) is dropped on open. One file holds one
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
            let mut good = 12u64;
            while let Some((text, v)) = read_record(&mut r, dim) {
                good += 4 + text.len() as u64 + 4 * dim as u64;
                map.insert(text, v);
            }
            drop(r);
            // Cut a torn last record so later appends stay aligned.
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| lprag_core::Error::io(&path, e))?;
            if f.metadata().map(|m| m.len()).unwrap_or(good) > good {
                f.set_len(good)
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

fn read_record(r: &mut impl Read, dim: usize) -> Option<(String, Vec<f32>)> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let mut text = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut text).ok()?;
    let mut raw = vec![0u8; dim * 4];
    r.read_exact(&mut raw).ok()?;
    let v = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    Some((String::from_utf8(text).ok()?, v))
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
        let missing: Vec<String> = {
            let map = self.map.lock().expect("cache lock");
            let mut seen = std::collections::HashSet::new();
            texts
                .iter()
                .filter(|t| !map.contains_key(*t) && seen.insert(t.as_str()))
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            let fresh = self.inner.embed(&missing).await?;
            let new: Vec<(String, Vec<f32>)> = missing
                .into_iter()
                .enumerate()
                .map(|(i, t)| (t, fresh.row(i).to_vec()))
                .collect();
            self.append(&new)?;
            let mut map = self.map.lock().expect("cache lock");
            map.extend(new);
        }
        let map = self.map.lock().expect("cache lock");
        let dim = self.dimension();
        let mut data = Vec::with_capacity(texts.len() * dim);
        for t in texts {
            data.extend_from_slice(&map[t]);
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
}
