//! [`JsonLinesSource`]: a JSON Lines file as a [`DocumentSource`], read a block at a time.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{Document, DocumentSource, Error, Result};

use crate::json;

/// A block holds documents until their lines pass this many bytes (and at least one).
const BLOCK_BYTES: u64 = 16 << 20;

/// A JSON Lines file of records as documents, read a block of lines at a time, so that
/// `LpRagBuilder::build_from` indexes a corpus larger than it could hold: opening it
/// reads the file once to note where each record's line starts (16 bytes a record); the
/// documents are parsed when a block is asked for.
///
/// Each non-blank line is one record, with the conventions of [`crate::load_dir`]'s JSON
/// Lines files: the text is the first of the fields `text`, `content`, `body` that holds
/// a string; `title` is the title (empty without one); `id` (a string or a number) is the
/// document's id, else its position in the file (0-based, blank lines not counted); the
/// record's other scalar fields are its metadata. A record whose text is empty is a
/// document that yields no chunk. A line that is not such a record is [`Error::Format`]
/// naming the file and the line, when its block is read.
///
/// ```
/// use lprag_core::{read_all_documents, DocumentSource};
/// use lprag_load::JsonLinesSource;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("corpus.jsonl");
/// std::fs::write(
///     &path,
///     "{\"id\": \"a\", \"title\": \"Curie\", \"text\": \"Marie Curie discovered polonium.\"}\n\
///      {\"id\": \"b\", \"text\": \"Radium glows.\", \"year\": 1898}\n",
/// )
/// .unwrap();
/// let source = JsonLinesSource::open(&path).unwrap();
/// assert_eq!(source.len_hint(), Some(2));
/// let documents = read_all_documents(&source).await.unwrap();
/// assert_eq!(documents[0].title, "Curie");
/// assert_eq!(documents[1].metadata["year"], "1898");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct JsonLinesSource {
    path: PathBuf,
    /// Each record's line: its byte offset and 1-based line number.
    lines: Arc<Vec<(u64, u64)>>,
}

impl JsonLinesSource {
    /// Open `path` and note where each of its records starts (blank lines skipped). An
    /// unreadable file is [`Error::Io`] naming it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io = |e| Error::io(&path, e);
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path).map_err(io)?);
        let mut lines = Vec::new();
        let (mut offset, mut number) = (0u64, 0u64);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).map_err(io)?;
            if n == 0 {
                break;
            }
            number += 1;
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push((offset, number));
            }
            offset += n as u64;
        }
        Ok(Self {
            path,
            lines: Arc::new(lines),
        })
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many records the file holds.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The documents of the records from position `start` on, up to [`BLOCK_BYTES`] of
    /// lines (at least one record while any are left).
    fn read_block(&self, start: usize) -> Result<Vec<Document>> {
        let Some(&(offset, _)) = self.lines.get(start) else {
            return Ok(Vec::new());
        };
        let path = &self.path;
        let io = |e| Error::io(path, e);
        let mut file = File::open(path).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut documents = Vec::new();
        let mut bytes = 0u64;
        let mut line = Vec::new();
        for (position, &(_, number)) in self.lines.iter().enumerate().skip(start) {
            if bytes >= BLOCK_BYTES {
                break;
            }
            // Skip the blank lines before this record's.
            loop {
                line.clear();
                let n = reader.read_until(b'\n', &mut line).map_err(io)?;
                if n == 0 {
                    return Err(Error::format(
                        path,
                        format!("line {number}: the file ended early (was it changed while read?)"),
                    ));
                }
                bytes += n as u64;
                if !line.iter().all(u8::is_ascii_whitespace) {
                    break;
                }
            }
            documents.push(self.document(position, number, &line)?);
        }
        Ok(documents)
    }

    /// The document of the record at `position`, on line `number`.
    fn document(&self, position: usize, number: u64, line: &[u8]) -> Result<Document> {
        let bad = |m: String| Error::format(&self.path, format!("line {number}: {m}"));
        let value: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        let record = json::record(position, value, Some(number as usize), true)
            .map_err(|b| bad(b.reason))?;
        Ok(Document {
            id: record.key,
            title: record.title.unwrap_or_default(),
            text: record.text,
            metadata: record.metadata,
        })
    }
}

#[async_trait]
impl DocumentSource for JsonLinesSource {
    async fn read_from(&self, start: usize) -> Result<Vec<Document>> {
        let this = self.clone();
        lprag_core::blocking(move || this.read_block(start)).await
    }

    fn len_hint(&self) -> Option<usize> {
        Some(self.lines.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::read_all_documents;

    #[tokio::test]
    async fn records_become_documents_in_blocks_with_blank_lines_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let long = "w".repeat((BLOCK_BYTES / 2) as usize);
        let text = format!(
            "\n{{\"id\": 7, \"text\": \"seven\"}}\n  \n{{\"content\": \"{long}\", \"title\": \"T\"}}\n\
             {{\"body\": \"{long}\", \"lang\": \"en\"}}\n{{\"id\": \"e\", \"text\": \"\"}}"
        );
        std::fs::write(&path, text).unwrap();
        let source = JsonLinesSource::open(&path).unwrap();
        assert_eq!(source.len(), 4);
        let first = source.read_from(0).await.unwrap();
        // The second record's line passes half the bound, the third's the rest: a block
        // stops after the line that reaches it.
        assert_eq!(first.len(), 3);
        let all = read_all_documents(&source).await.unwrap();
        let ids: Vec<&str> = all.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["7", "1", "2", "e"]);
        assert_eq!(all[1].title, "T");
        assert_eq!(all[2].metadata["lang"], "en");
        assert_eq!(all[3].text, "");
        assert!(source.read_from(4).await.unwrap().is_empty());
        assert_eq!(source.read_from(3).await.unwrap()[0].id, "e");
    }

    #[tokio::test]
    async fn a_bad_line_is_a_format_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "{\"text\": \"ok\"}\n\n{\"text\": 3}\n").unwrap();
        let source = JsonLinesSource::open(&path).unwrap();
        let e = read_all_documents(&source).await.unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("line 3") && shown.contains("c.jsonl"),
            "{shown}"
        );
        std::fs::write(&path, "{\"text\": \"ok\"}\nnot json\n").unwrap();
        let source = JsonLinesSource::open(&path).unwrap();
        let shown = source.read_from(0).await.unwrap_err().to_string();
        assert!(
            shown.contains("line 2") && shown.contains("invalid JSON"),
            "{shown}"
        );
        let missing = JsonLinesSource::open(dir.path().join("none.jsonl")).unwrap_err();
        assert!(matches!(missing, Error::Io { .. }), "{missing:?}");
    }
}
