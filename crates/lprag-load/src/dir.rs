//! [`DirSource`]: a folder as a [`DocumentSource`], its files read again a block at a time.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use async_trait::async_trait;
use lprag_core::{Document, DocumentSource, Error, Progress, Result};

use crate::{files_under, read_file, read_files, Format, LoadOptions, LoadReport};

/// A block holds the documents of whole files until the files pass this many bytes (and
/// at least one file).
const BLOCK_BYTES: u64 = 16 << 20;

/// A folder's files as a [`DocumentSource`]: the documents [`crate::load_dir`] returns
/// (same order, ids, metadata and [`LoadReport`]), without holding them, so that
/// `LpRagBuilder::build_from` indexes a folder larger than memory would allow.
///
/// [`DirSource::open`] walks the folder and reads every file once, as `load_dir` does,
/// keeping only what a later read needs: each file's size, modification time and count
/// of documents (and which ones a repeated id left out). A read then parses whole files
/// again, up to 16 MiB of them a block. A file that changed after the folder was opened
/// (another size or modification time, or another count of documents) makes that read an
/// [`Error::InvalidInput`] naming it, rather than a build over two versions of the
/// folder.
///
/// ```
/// use lprag_core::{read_all_documents, DocumentSource, NoProgress};
/// use lprag_load::{load_dir, DirSource, LoadOptions};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.md"), "# Curie\n\nMarie Curie discovered polonium.").unwrap();
/// std::fs::write(dir.path().join("b.jsonl"), "{\"text\": \"Radium glows.\"}\n").unwrap();
/// let options = LoadOptions::default();
/// let source = DirSource::open(dir.path(), &options, &NoProgress).unwrap();
/// assert_eq!(source.len_hint(), Some(2));
/// assert_eq!(source.report().files_loaded, 2);
/// let documents = read_all_documents(&source).await.unwrap();
/// assert_eq!(documents, load_dir(dir.path(), &options, &NoProgress).unwrap().documents);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct DirSource {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: LoadOptions,
    /// The files that gave documents, in the load's order.
    files: Vec<SourceFile>,
    /// `starts[i]`: the position of file `i`'s first document; one more entry, the count.
    starts: Vec<usize>,
    report: LoadReport,
}

/// What a read needs of one file, as it was when the folder was opened.
#[derive(Debug)]
struct SourceFile {
    abs: PathBuf,
    rel: String,
    format: Format,
    bytes: u64,
    modified: Option<SystemTime>,
    /// Its documents (after those left out).
    documents: usize,
    /// Positions, among the file's parsed documents, of those a repeated id left out.
    repeated: Vec<usize>,
}

impl DirSource {
    /// Walk `root` (a folder, or one file) and read each of its files once, as
    /// [`crate::load_dir`] does (files skipped, with [`Progress::warn`], or the first
    /// problem an error in strict mode); the documents are not kept.
    ///
    /// # Errors
    ///
    /// As [`crate::load_dir`].
    pub fn open(root: &Path, options: &LoadOptions, progress: &dyn Progress) -> Result<Self> {
        let started = Instant::now();
        let mut report = LoadReport::default();
        let found = files_under(root, options, progress, &mut report)?;
        // Each file's size and time as they were before it was read: a later read
        // compares them with the file's then.
        let stamps: Vec<(u64, Option<SystemTime>)> = found
            .iter()
            .map(|(abs, _, _)| stamp(abs).unwrap_or((u64::MAX, None)))
            .collect();
        let mut kept: Vec<(usize, usize, Vec<usize>)> = Vec::new();
        read_files(
            &found,
            options,
            progress,
            &mut report,
            &mut |i, new, repeated| {
                if !new.is_empty() {
                    kept.push((i, new.len(), repeated));
                }
            },
        )?;
        let mut starts = Vec::with_capacity(kept.len() + 1);
        let mut files = Vec::with_capacity(kept.len());
        let mut position = 0;
        for (i, documents, repeated) in kept {
            let (abs, rel, format) = found[i].clone();
            let (bytes, modified) = stamps[i];
            starts.push(position);
            position += documents;
            files.push(SourceFile {
                abs,
                rel,
                format,
                bytes,
                modified,
                documents,
                repeated,
            });
        }
        starts.push(position);
        report.seconds = started.elapsed().as_secs_f64();
        Ok(Self {
            inner: Arc::new(Inner {
                options: options.clone(),
                files,
                starts,
                report,
            }),
        })
    }

    /// What opening found: files seen, loaded and skipped (with why), documents by
    /// format; the same report [`crate::load_dir`] gives.
    pub fn report(&self) -> &LoadReport {
        &self.inner.report
    }

    /// How many documents the folder gave.
    pub fn len(&self) -> usize {
        self.inner.starts.last().copied().unwrap_or(0)
    }

    /// Whether the folder gave no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// The documents from position `start` on: the rest of its file and whole files
    /// after it, up to [`BLOCK_BYTES`] of files.
    fn read_block(&self, start: usize) -> Result<Vec<Document>> {
        if start >= self.len() {
            return Ok(Vec::new());
        }
        // The last file whose first document is at or before `start`.
        let first = self.starts.partition_point(|&s| s <= start) - 1;
        let mut documents = Vec::new();
        let mut bytes = 0u64;
        for (i, file) in self.files.iter().enumerate().skip(first) {
            if bytes >= BLOCK_BYTES {
                break;
            }
            let mut docs = self.read(file)?;
            if i == first {
                docs.drain(..start - self.starts[i]);
            }
            documents.extend(docs);
            bytes = bytes.saturating_add(file.bytes);
        }
        Ok(documents)
    }

    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// `file`'s documents, as when the folder was opened.
    fn read(&self, file: &SourceFile) -> Result<Vec<Document>> {
        let changed = || {
            Error::invalid(
                format!("file {}", file.rel),
                "changed since its folder was opened for indexing; run the command again",
            )
        };
        if stamp(&file.abs).map_err(|e| Error::io(&file.abs, e))? != (file.bytes, file.modified) {
            return Err(changed());
        }
        let outcome =
            read_file(&file.abs, &file.rel, file.format, &self.options).map_err(|p| p.error)?;
        let mut repeated = file.repeated.iter().peekable();
        let documents: Vec<Document> = outcome
            .documents
            .into_iter()
            .enumerate()
            .filter(|(position, _)| repeated.next_if_eq(&position).is_none())
            .map(|(_, d)| d)
            .collect();
        if documents.len() != file.documents {
            return Err(changed());
        }
        Ok(documents)
    }
}

/// A file's size and modification time.
fn stamp(path: &Path) -> std::io::Result<(u64, Option<SystemTime>)> {
    let meta = fs::metadata(path)?;
    Ok((meta.len(), meta.modified().ok()))
}

#[async_trait]
impl DocumentSource for DirSource {
    async fn read_from(&self, start: usize) -> Result<Vec<Document>> {
        let inner = self.inner.clone();
        lprag_core::blocking(move || inner.read_block(start)).await
    }

    fn len_hint(&self) -> Option<usize> {
        Some(self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_dir;
    use lprag_core::{read_all_documents, NoProgress};

    fn write(root: &Path, rel: &str, body: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, body).unwrap();
    }

    /// A folder with every text format, a skipped file, a repeated id and a file big
    /// enough to end a block.
    fn folder(root: &Path) {
        write(root, "a/guide.md", "# Install\n\nRun the installer.");
        write(root, "a/empty.txt", "   ");
        write(
            root,
            "b/page.html",
            "<title>Page</title><p>Visible text.</p>",
        );
        let big = "w".repeat((BLOCK_BYTES / 2 + 1) as usize);
        write(root, "c/big.txt", &big);
        write(root, "c/big2.txt", &big);
        write(
            root,
            "d/records.jsonl",
            "{\"id\": 1, \"text\": \"one\"}\n{\"id\": 1, \"text\": \"again\"}\n{\"text\": \"three\"}\n",
        );
        write(
            root,
            "e/list.json",
            "[{\"text\": \"first\"}, {\"text\": \"\"}]",
        );
        write(root, "notes.txt", "Plain notes.");
    }

    #[tokio::test]
    async fn a_folder_reads_as_load_dir_loads_it_in_any_block() {
        let dir = tempfile::tempdir().unwrap();
        folder(dir.path());
        let options = LoadOptions::default();
        let loaded = load_dir(dir.path(), &options, &NoProgress).unwrap();
        let source = DirSource::open(dir.path(), &options, &NoProgress).unwrap();
        let mut report = source.report().clone();
        report.seconds = loaded.report.seconds;
        assert_eq!(report, loaded.report);
        assert_eq!(source.len(), loaded.documents.len());
        assert!(
            report
                .skipped
                .iter()
                .any(|s| s.reason.contains("duplicate")),
            "{report:?}"
        );
        let all = read_all_documents(&source).await.unwrap();
        assert_eq!(all, loaded.documents);
        // The two big files pass the block bound: a read stops after the file that does.
        let first = source.read_from(0).await.unwrap();
        assert!(first.len() < all.len(), "{}", first.len());
        // A read from any position is the rest of the folder's documents from there.
        for start in 0..=all.len() {
            let block = source.read_from(start).await.unwrap();
            assert!(!block.is_empty() || start == all.len(), "start {start}");
            assert_eq!(block[..], all[start..start + block.len()], "start {start}");
        }
        // One file is a folder of itself.
        let one = dir.path().join("d/records.jsonl");
        let single = DirSource::open(&one, &options, &NoProgress).unwrap();
        let read = read_all_documents(&single).await.unwrap();
        assert_eq!(
            read,
            load_dir(&one, &options, &NoProgress).unwrap().documents
        );
    }

    #[tokio::test]
    async fn a_file_changed_after_opening_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        folder(dir.path());
        let options = LoadOptions::default();
        let source = DirSource::open(dir.path(), &options, &NoProgress).unwrap();
        write(
            dir.path(),
            "d/records.jsonl",
            "{\"text\": \"only one now\"}\n",
        );
        let e = read_all_documents(&source).await.unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("d/records.jsonl") && shown.contains("changed"),
            "{shown}"
        );
        fs::remove_file(dir.path().join("notes.txt")).unwrap();
        let last = source.len() - 1;
        let e = source.read_from(last).await.unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e:?}");
        // Strict mode fails at opening, as load_dir does.
        let strict = LoadOptions {
            strict: true,
            ..LoadOptions::default()
        };
        write(
            dir.path(),
            "d/records.jsonl",
            "{\"id\": 1, \"text\": \"a\"}\n{\"id\": 1, \"text\": \"b\"}\n",
        );
        let e = DirSource::open(dir.path(), &strict, &NoProgress).unwrap_err();
        assert!(e.to_string().contains("duplicate"), "{e}");
    }
}
