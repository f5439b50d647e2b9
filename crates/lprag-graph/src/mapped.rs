//! Feature rows on disk instead of on the heap: a link-graph file's rows memory-mapped in
//! place ([`map_link_graph`], [`map_feature_rows`]), and a writer that streams rows into
//! such a file block by block ([`FeatureRowsWriter`]), so a million-row matrix never has
//! to sit on the heap whole. The file format is [`save_link_graph`](crate::save_link_graph)'s.
//!
//! A mapped matrix reads the file through the page cache: the kernel keeps the rows
//! recently read and drops the rest under memory pressure. The file must not be changed
//! in place while it is mapped; lprag only ever replaces graph files by renaming a new
//! file over them, which leaves a mapping of the old one intact.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use lprag_core::{Embeddings, LinkGraph, RowStorage};

use crate::persist::{
    checked_link_graph, header, open_sized, read_link_payload_rows, temp_beside, Fnv1a, KeepRows,
    BLOCK_FLOATS, KIND_LINK,
};
use crate::GraphError;

/// Bytes reserved for the header of a [`FeatureRowsWriter`]'s file: the payload starts at
/// byte 512, so its floats are aligned.
const RESERVED_HEADER: usize = 512 - 16;

/// The feature rows of a mapped link-graph file.
#[derive(Debug)]
struct MappedRows {
    map: memmap2::Mmap,
    /// Byte offset of the first float (a multiple of 4).
    start: usize,
    /// Number of floats.
    floats: usize,
}

impl MappedRows {
    /// `map`'s floats from byte `start`, `None` when they are not aligned for `f32` or
    /// the map is too short.
    fn new(map: memmap2::Mmap, start: usize, floats: usize) -> Option<Self> {
        let end = floats.checked_mul(4)?.checked_add(start)?;
        let bytes = map.get(start..end)?;
        bytemuck::try_cast_slice::<u8, f32>(bytes).ok()?;
        Some(Self { map, start, floats })
    }
}

impl RowStorage for MappedRows {
    fn floats(&self) -> &[f32] {
        // Checked in `MappedRows::new`: in bounds and aligned.
        bytemuck::cast_slice(&self.map[self.start..self.start + self.floats * 4])
    }
}

/// Load the link graph at `path` (written by [`save_link_graph`](crate::save_link_graph)
/// or a [`FeatureRowsWriter`]) with its feature rows memory-mapped from the file instead
/// of read into the heap ([`Embeddings::is_stored`]); the edges are decoded as by
/// [`load_link_graph`](crate::load_link_graph). The whole file is read once through its
/// checksum (with `read`, so the rows do not count against this process's memory), then
/// mapped. A file written before its payload was aligned (lprag 0.x before this
/// function), or a big-endian machine, gets the rows on the heap instead.
///
/// The file must not be truncated or written in place while the graph lives (replacing it
/// by a rename is fine): a mapping cannot report that as an error.
///
/// # Errors
/// As [`load_link_graph`](crate::load_link_graph).
pub fn map_link_graph(path: impl AsRef<Path>) -> Result<LinkGraph, GraphError> {
    let path = path.as_ref();
    let bad = |m: String| GraphError::format(path, m);
    let (mut file, total) = open_sized(path)?;
    let mut none = Vec::new();
    let (h, edges) = read_link_payload_rows(path, &mut file, total, &mut none, KeepRows::None)?;
    let start = total - h.payload_bytes;
    if cfg!(target_endian = "big") || !start.is_multiple_of(4) {
        return crate::load_link_graph(path);
    }
    let dim = usize::try_from(h.dim).map_err(|_| bad("dim overflows".into()))?;
    let num_chunks =
        usize::try_from(h.num_chunks).map_err(|_| bad("num_chunks overflows".into()))?;
    let floats = h
        .num_nodes
        .checked_mul(h.dim)
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| bad("feature size overflows".into()))?;
    if h.num_chunks > h.num_nodes {
        return Err(bad(format!(
            "{} chunks but {} nodes",
            h.num_chunks, h.num_nodes
        )));
    }
    // SAFETY: the file is mapped read-only through the handle whose contents were just
    // checked against their checksum; lprag never writes a graph file in place (it
    // renames a new one over it), and this function's documentation tells callers not to
    // either. A mapping of a file changed by another process regardless reads the new
    // bytes (or faults, when truncated); nothing here relies on them beyond their type.
    let map = unsafe { memmap2::Mmap::map(file.get_ref()) }.map_err(|e| GraphError::io(path, e))?;
    if map.len() as u64 != total {
        return Err(bad("the file changed while it was read".into()));
    }
    let start = usize::try_from(start).map_err(|_| bad("header overflows".into()))?;
    let rows = MappedRows::new(map, start, floats)
        .ok_or_else(|| bad("feature rows out of the mapped file's bounds".into()))?;
    let features = Embeddings::from_storage(dim, Box::new(rows)).map_err(|e| bad(e.to_string()))?;
    checked_link_graph(path, features, num_chunks, edges)
}

/// [`map_link_graph`] keeping only the chunk nodes, as
/// [`load_link_graph_chunks`](crate::load_link_graph_chunks) does: the chunks' rows
/// (mapped) and the edges between two chunks.
///
/// # Errors
/// As [`map_link_graph`].
pub fn map_link_graph_chunks(path: impl AsRef<Path>) -> Result<LinkGraph, GraphError> {
    let mut graph = map_link_graph(path)?;
    let nc = graph.num_chunks;
    graph.features = graph.features.leading_rows(nc);
    graph
        .edges
        .retain(|e| (e.a as usize) < nc && (e.b as usize) < nc);
    Ok(graph)
}

/// The rows of a feature-rows file (written by a [`FeatureRowsWriter`] or
/// [`save_feature_rows`](crate::save_feature_rows)), `dim` wide, memory-mapped as by
/// [`map_link_graph`].
///
/// # Errors
/// As [`map_link_graph`]; [`GraphError::Format`] when the rows are not `dim` wide or the
/// file has edges (it is a link graph, not rows).
pub fn map_feature_rows(path: impl AsRef<Path>, dim: usize) -> Result<Embeddings, GraphError> {
    let path = path.as_ref();
    let graph = map_link_graph(path)?;
    if graph.features.dim() != dim {
        return Err(GraphError::format(
            path,
            format!("rows are {} wide, expected {dim}", graph.features.dim()),
        ));
    }
    if !graph.edges.is_empty() {
        return Err(GraphError::format(
            path,
            format!("holds {} edges: a link graph, not rows", graph.edges.len()),
        ));
    }
    Ok(graph.features)
}

/// Writes feature rows to a file block by block, for [`map_feature_rows`] (or
/// [`append_feature_rows`](crate::append_feature_rows)) to read: the rows are hashed as
/// they pass and the header is written last, so the caller never holds them all. The file
/// appears under its name only when [`FeatureRowsWriter::finish`] succeeds (written to a
/// temporary file beside it, synced, renamed); dropped unfinished, the temporary file is
/// removed.
#[derive(Debug)]
pub struct FeatureRowsWriter {
    path: PathBuf,
    dir: PathBuf,
    tmp: PathBuf,
    out: Option<std::io::BufWriter<fs::File>>,
    dim: usize,
    floats: u64,
    hash: Fnv1a,
    buf: Vec<u8>,
}

impl FeatureRowsWriter {
    /// Start writing `dim`-wide rows for `path`.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `dim` is 0 or `path` has no file name;
    /// [`GraphError::Io`] when the temporary file cannot be created.
    pub fn create(path: impl AsRef<Path>, dim: usize) -> Result<Self, GraphError> {
        let path = path.as_ref();
        if dim == 0 {
            return Err(GraphError::arg(
                "FeatureRowsWriter::create",
                "dim must be at least 1",
            ));
        }
        let (dir, tmp) = temp_beside(path)?;
        // Readable too: `finish_mapped` maps it.
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| GraphError::io(&tmp, e))?;
        let mut w = Self {
            path: path.to_path_buf(),
            dir,
            tmp,
            out: Some(std::io::BufWriter::with_capacity(1 << 16, file)),
            dim,
            floats: 0,
            hash: Fnv1a::new(),
            buf: Vec::with_capacity(BLOCK_FLOATS * 4),
        };
        let mut head = Vec::with_capacity(16 + RESERVED_HEADER);
        head.extend_from_slice(crate::persist::MAGIC);
        head.extend_from_slice(&(RESERVED_HEADER as u64).to_le_bytes());
        head.resize(16 + RESERVED_HEADER, b' ');
        w.write(&head)?;
        Ok(w)
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        (self.floats / self.dim as u64) as usize
    }

    /// Append whole rows (`rows.len()` a multiple of the width).
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] for a partial row; [`GraphError::Io`] when the
    /// write fails.
    pub fn append(&mut self, rows: &[f32]) -> Result<(), GraphError> {
        if !rows.len().is_multiple_of(self.dim) {
            return Err(GraphError::arg(
                "FeatureRowsWriter::append",
                format!(
                    "{} floats are not a whole number of rows of width {}",
                    rows.len(),
                    self.dim
                ),
            ));
        }
        for block in rows.chunks(BLOCK_FLOATS) {
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            for v in block {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            self.hash.update(&buf);
            let written = self.write(&buf);
            self.buf = buf;
            written?;
            self.floats += block.len() as u64;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), GraphError> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| GraphError::arg("FeatureRowsWriter", "already finished"))?;
        out.write_all(bytes)
            .map_err(|e| GraphError::io(&self.tmp, e))
    }

    /// Write the header, sync, and rename the file to its name. Returns the rows written.
    ///
    /// # Errors
    /// [`GraphError::Io`] when a write, the sync or the rename fails (the temporary file
    /// is removed).
    pub fn finish(self) -> Result<usize, GraphError> {
        self.finish_inner(false).map(|(rows, _)| rows)
    }

    /// [`FeatureRowsWriter::finish`], returning the rows memory-mapped from the file just
    /// written (as [`map_feature_rows`] would, without reading them again through the
    /// checksum). The map is taken before the rename, so it holds these rows even when
    /// another writer renames its own file over the same name at once. On a big-endian
    /// machine the rows are read back to the heap instead.
    ///
    /// # Errors
    /// As [`FeatureRowsWriter::finish`]; [`GraphError::Io`] when the file cannot be mapped.
    pub fn finish_mapped(self) -> Result<Embeddings, GraphError> {
        let path = self.path.clone();
        let dim = self.dim;
        if cfg!(target_endian = "big") {
            self.finish()?;
            return Ok(crate::load_link_graph(&path)?.features);
        }
        let (_, rows) = self.finish_inner(true)?;
        let rows =
            rows.ok_or_else(|| GraphError::format(&path, "the written rows were not mapped"))?;
        Embeddings::from_storage(dim, Box::new(rows))
            .map_err(|e| GraphError::format(&path, e.to_string()))
    }

    fn finish_inner(mut self, map: bool) -> Result<(usize, Option<MappedRows>), GraphError> {
        let rows = self.rows();
        let header = header(
            KIND_LINK,
            (self.hash.finish(), self.floats * 4),
            rows,
            rows,
            self.dim,
            0,
        );
        let mut json = serde_json::to_vec(&header)
            .map_err(|e| GraphError::format(&self.path, format!("cannot encode header: {e}")))?;
        if json.len() > RESERVED_HEADER {
            return Err(GraphError::format(
                &self.path,
                format!(
                    "header of {} bytes exceeds its {RESERVED_HEADER}",
                    json.len()
                ),
            ));
        }
        json.resize(RESERVED_HEADER, b' ');
        let Some(out) = self.out.take() else {
            return Err(GraphError::arg("FeatureRowsWriter", "already finished"));
        };
        let floats = usize::try_from(self.floats)
            .map_err(|_| GraphError::format(&self.path, "the rows overflow memory"))?;
        let done = (|| -> std::io::Result<Option<MappedRows>> {
            let mut f = out
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?;
            f.seek(SeekFrom::Start(16))?;
            f.write_all(&json)?;
            f.sync_all()?;
            let mapped = if map {
                // SAFETY: the file was written by this writer and is renamed, never
                // written in place, from here on; the map reads only its own bytes.
                let m = unsafe { memmap2::Mmap::map(&f) }?;
                Some(
                    MappedRows::new(m, 16 + RESERVED_HEADER, floats).ok_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "the rows are out of the mapped file's bounds",
                        )
                    })?,
                )
            } else {
                None
            };
            drop(f);
            fs::rename(&self.tmp, &self.path)?;
            Ok(mapped)
        })();
        let mapped = match done {
            Ok(m) => m,
            Err(e) => {
                let _ = fs::remove_file(&self.tmp);
                return Err(GraphError::io(&self.path, e));
            }
        };
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok((rows, mapped))
    }
}

impl Drop for FeatureRowsWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{EdgeKind, LinkEdge};

    fn rows(n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim).map(|i| i as f32 * 0.5 - 3.0).collect()
    }

    #[test]
    fn streamed_rows_map_back_bit_for_bit_and_read_on_the_heap_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("features.bin");
        let (dim, data) = (3, rows(5_000, 3));
        let mut w = FeatureRowsWriter::create(&path, dim).unwrap();
        assert!(
            !path.exists(),
            "only the temporary file exists before finish"
        );
        for block in data.chunks(3 * 777) {
            w.append(block).unwrap();
        }
        assert!(w.append(&[1.0]).is_err(), "a partial row");
        assert_eq!(w.finish().unwrap(), 5_000);
        let mapped = map_feature_rows(&path, dim).unwrap();
        assert!(mapped.is_stored());
        assert_eq!(mapped.as_slice(), &data[..]);
        let mut heap = Vec::new();
        assert_eq!(
            crate::append_feature_rows(&path, dim, &mut heap).unwrap(),
            5_000
        );
        assert_eq!(heap, data);
        let e = map_feature_rows(&path, 4).unwrap_err();
        assert!(e.to_string().contains("rows are 3 wide"), "{e}");
        // Nothing but the file itself is left in the directory.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn finished_mapped_rows_are_the_written_ones_whatever_is_renamed_over_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reps.bin");
        let (dim, data) = (4, rows(3_000, 4));
        let mut w = FeatureRowsWriter::create(&path, dim).unwrap();
        for block in data.chunks(4 * 1_000) {
            w.append(block).unwrap();
        }
        let mapped = w.finish_mapped().unwrap();
        assert!(mapped.is_stored());
        assert_eq!((mapped.rows(), mapped.dim()), (3_000, dim));
        assert_eq!(mapped.as_slice(), data.as_slice());
        // The file under the name is the same rows, checksummed as any other.
        assert_eq!(
            map_feature_rows(&path, dim).unwrap().as_slice(),
            data.as_slice()
        );
        // Another writer's file renamed over the name leaves these rows as they were.
        let other: Vec<f32> = data.iter().map(|x| x + 1.0).collect();
        let mut w = FeatureRowsWriter::create(&path, dim).unwrap();
        w.append(&other).unwrap();
        let second = w.finish_mapped().unwrap();
        assert_eq!(mapped.as_slice(), data.as_slice());
        assert_eq!(second.as_slice(), other.as_slice());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_dropped_writer_leaves_nothing_and_a_corrupt_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.bin");
        let mut w = FeatureRowsWriter::create(&path, 2).unwrap();
        w.append(&[1.0, 2.0]).unwrap();
        drop(w);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(FeatureRowsWriter::create(&path, 0).is_err());

        let mut w = FeatureRowsWriter::create(&path, 2).unwrap();
        w.append(&rows(100, 2)).unwrap();
        w.finish().unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let e = map_feature_rows(&path, 2).unwrap_err();
        assert!(matches!(e, GraphError::ChecksumMismatch { .. }), "{e}");
        fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        assert!(map_feature_rows(&path, 2).is_err());
    }

    #[test]
    fn a_saved_link_graph_maps_its_rows_and_keeps_its_edges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.bin");
        let g = LinkGraph {
            features: Embeddings::new(4, rows(7, 4)).unwrap(),
            num_chunks: 5,
            edges: vec![
                LinkEdge {
                    a: 0,
                    b: 1,
                    weight: 0.5,
                    kind: EdgeKind::Similarity,
                },
                LinkEdge {
                    a: 6,
                    b: 2,
                    weight: 1.0,
                    kind: EdgeKind::QueryChunk,
                },
            ],
        };
        crate::save_link_graph(&g, &path).unwrap();
        let m = map_link_graph(&path).unwrap();
        assert!(m.features.is_stored());
        assert_eq!((m.num_chunks, &m.edges), (5, &g.edges));
        assert_eq!(m.features, g.features);
        let chunks = map_link_graph_chunks(&path).unwrap();
        let heap = crate::load_link_graph_chunks(&path).unwrap();
        assert_eq!(chunks.features, heap.features);
        assert_eq!((chunks.num_chunks, &chunks.edges), (5, &heap.edges));
        assert_eq!(chunks.edges.len(), 1);
        assert!(chunks.features.is_stored());
        // A link graph is not a file of rows.
        let e = map_feature_rows(&path, 4).unwrap_err();
        assert!(e.to_string().contains("2 edges"), "{e}");
        // Replacing the file by a rename leaves the mapped rows as they were.
        crate::save_feature_rows(4, &rows(2, 4), &path).unwrap();
        assert_eq!(m.features, g.features);
    }

    #[test]
    fn a_file_with_an_unaligned_payload_is_read_to_the_heap() {
        // Written as before payloads were aligned: a header whose length is not a
        // multiple of 4 (the JSON padded with one space).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.bin");
        crate::save_feature_rows(2, &rows(3, 2), &path).unwrap();
        let bytes = fs::read(&path).unwrap();
        let hlen = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let json = String::from_utf8(bytes[16..16 + hlen].to_vec()).unwrap();
        let mut json = json.trim_end().to_string();
        while (16 + json.len()).is_multiple_of(4) {
            json.push(' ');
        }
        let mut old = Vec::new();
        old.extend_from_slice(&bytes[..8]);
        old.extend_from_slice(&(json.len() as u64).to_le_bytes());
        old.extend_from_slice(json.as_bytes());
        old.extend_from_slice(&bytes[16 + hlen..]);
        fs::write(&path, &old).unwrap();
        let back = map_feature_rows(&path, 2).unwrap();
        assert!(!back.is_stored());
        assert_eq!(back.as_slice(), &rows(3, 2)[..]);
    }
}
