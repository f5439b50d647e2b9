//! [`DocumentSource`]: documents a build reads in blocks, so that it never holds the whole
//! corpus (a million passages are gigabytes of strings). A slice of documents is one; a
//! file read a block at a time (`lprag_load::JsonLinesSource`) is another.

use async_trait::async_trait;

use crate::{Document, Result};

/// Documents handed over a block at a time, by position.
///
/// A build reads the source from position 0, each call starting where the last block
/// ended, until a block comes back empty, and does so more than once (to key its work
/// directory, to chunk, and to fit the few chunks too long for the encoder). So the same
/// position must give the same document on every read; a source that changes between
/// reads makes a build whose chunks and key disagree.
#[async_trait]
pub trait DocumentSource: Send + Sync {
    /// The documents from position `start` on: as many as the source likes to hand over
    /// at once (at least one while any are left), or none once `start` is past the last.
    /// A document that cannot be read is an error naming where it is.
    async fn read_from(&self, start: usize) -> Result<Vec<Document>>;

    /// How many documents the source holds, when it knows without reading them (for
    /// progress reports). `None` by default.
    fn len_hint(&self) -> Option<usize> {
        None
    }
}

/// Documents in a slice are handed over in blocks of at most this many bytes of text
/// (and at least one document).
const SLICE_BLOCK_BYTES: usize = 16 << 20;

#[async_trait]
impl DocumentSource for [Document] {
    async fn read_from(&self, start: usize) -> Result<Vec<Document>> {
        let rest = self.get(start..).unwrap_or_default();
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|d| {
                let fits = bytes == 0 || bytes + d.text.len() <= SLICE_BLOCK_BYTES;
                bytes += d.text.len().max(1);
                fits
            })
            .count();
        Ok(rest[..n].to_vec())
    }

    fn len_hint(&self) -> Option<usize> {
        Some(self.len())
    }
}

#[async_trait]
impl DocumentSource for Vec<Document> {
    async fn read_from(&self, start: usize) -> Result<Vec<Document>> {
        self.as_slice().read_from(start).await
    }

    fn len_hint(&self) -> Option<usize> {
        Some(self.len())
    }
}

/// A source's blocks in order, each with the position of its first document: one pass
/// over the source.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use lprag_core::{Document, DocumentBlocks};
///
/// let docs = vec![Document::new("a", "", "One."), Document::new("b", "", "Two.")];
/// let mut blocks = DocumentBlocks::new(&docs);
/// while let Some((start, block)) = blocks.next().await? {
///     assert_eq!(block[0], docs[start]);
/// }
/// assert_eq!(blocks.position(), 2);
/// # Ok::<(), lprag_core::Error>(()) }).unwrap();
/// ```
pub struct DocumentBlocks<'a> {
    source: &'a dyn DocumentSource,
    next: usize,
    done: bool,
}

impl<'a> DocumentBlocks<'a> {
    /// A pass over `source` from its first document.
    pub fn new(source: &'a dyn DocumentSource) -> Self {
        Self {
            source,
            next: 0,
            done: false,
        }
    }

    /// The next block and the position of its first document; `None` after the last.
    pub async fn next(&mut self) -> Result<Option<(usize, Vec<Document>)>> {
        if self.done {
            return Ok(None);
        }
        let block = self.source.read_from(self.next).await?;
        if block.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let start = self.next;
        self.next += block.len();
        Ok(Some((start, block)))
    }

    /// How many documents the pass has handed over.
    pub fn position(&self) -> usize {
        self.next
    }
}

/// Every document of `source`, in order (for tests and small sources: this holds them all).
pub async fn read_all_documents(source: &dyn DocumentSource) -> Result<Vec<Document>> {
    let mut all = Vec::new();
    let mut blocks = DocumentBlocks::new(source);
    while let Some((_, block)) = blocks.next().await? {
        all.extend(block);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slice_is_read_back_whole_in_blocks_of_bounded_text() {
        let big = "x".repeat(SLICE_BLOCK_BYTES / 3 + 1);
        let docs: Vec<Document> = (0..7)
            .map(|i| Document::new(format!("d{i}"), "", big.clone()))
            .collect();
        let first = docs.read_from(0).await.unwrap();
        // Three of a third and a byte each would pass the bound: two per block.
        assert_eq!(first.len(), 2);
        assert_eq!(read_all_documents(&docs).await.unwrap(), docs);
        assert!(docs.read_from(7).await.unwrap().is_empty());
        assert!(docs.read_from(99).await.unwrap().is_empty());
        // A document larger than the bound still comes, alone.
        let huge = vec![Document::new("h", "", "y".repeat(SLICE_BLOCK_BYTES + 5)); 2];
        assert_eq!(huge.read_from(0).await.unwrap().len(), 1);
        assert_eq!(docs.len_hint(), Some(7));
    }
}
