//! Saving and loading graphs: a small versioned binary container.
//!
//! Layout of a file (all integers little-endian):
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `LPRAGGR\0` |
//! | 8 | `u64` length `H` of the header |
//! | `H` | JSON header: `format_version`, `kind`, `checksum` (FNV-1a 64 of the payload), `payload_bytes` and the sizes below; trailing spaces start the payload at a multiple of 4 bytes (files written before may not) |
//! | rest | payload |
//!
//! A [`LinkGraph`] payload is its features as `f32` (`num_nodes × dim`, row-major), then
//! `num_edges` records of `a: u32, b: u32, weight: f32, kind: u8` (0 = Similarity,
//! 1 = QueryChunk, 2 = Bridge). A [`ChunkGraph`] payload is its CSR: `offsets: u32 ×
//! (num_nodes + 1)`, `indices: u32 × num_edges`, `weights: f32 × num_edges`.
//!
//! Link graphs are hashed, written and read in 64 KiB blocks, so saving or loading one
//! holds no second copy of its features (at a million chunks they are gigabytes).
//! Files are written atomically: to a temporary file in the same directory, synced, then
//! renamed over the target, so a crash never leaves a half-written graph under the real
//! name. Another [`FORMAT_VERSION`] gives [`GraphError::VersionMismatch`]; a payload that
//! does not hash to the header's checksum gives [`GraphError::ChecksumMismatch`].

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph};
use serde::{Deserialize, Serialize};

use crate::{ChunkGraph, Csr, GraphError};

/// On-disk format version written by this build and the only one it reads.
pub const FORMAT_VERSION: u64 = 1;

pub(crate) const MAGIC: &[u8; 8] = b"LPRAGGR\0";
pub(crate) const KIND_LINK: &str = "link_graph";
const KIND_CHUNK: &str = "chunk_graph";
const KIND_KNN: &str = "knn_lists";
/// Headers are tiny; anything larger is corruption, not a header.
const MAX_HEADER: u64 = 1 << 20;
const EDGE_RECORD: usize = 13;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) format_version: u64,
    pub(crate) kind: String,
    /// FNV-1a 64 of the payload.
    pub(crate) checksum: u64,
    pub(crate) payload_bytes: u64,
    pub(crate) num_nodes: u64,
    #[serde(default)]
    pub(crate) num_chunks: u64,
    #[serde(default)]
    pub(crate) dim: u64,
    pub(crate) num_edges: u64,
}

/// FNV-1a, 64 bit: detects corruption (not tampering). Also used for the checksums of
/// other saved files (model weights).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::new();
    h.update(bytes);
    h.finish()
}

/// [`fnv1a64`] over data that arrives in pieces.
#[derive(Debug)]
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

/// Save `graph` to `path` (overwriting it atomically).
///
/// # Errors
/// [`GraphError::InvalidGraph`] when the graph fails [`LinkGraph::validate`];
/// [`GraphError::Io`] when the file cannot be written.
pub fn save_link_graph(graph: &LinkGraph, path: impl AsRef<Path>) -> Result<(), GraphError> {
    graph
        .validate()
        .map_err(|e| GraphError::graph("LinkGraph", e.to_string()))?;
    save_link_parts(
        path.as_ref(),
        graph.features.as_slice(),
        graph.features.dim(),
        graph.num_chunks,
        &graph.edges,
    )
}

/// Save embedding rows (`dim` wide, row-major) as a [`LinkGraph`] of chunks without edges,
/// readable by [`load_link_graph`] and [`append_feature_rows`]; for rows held inside a
/// larger buffer, which [`save_link_graph`] would need copied into a graph first.
///
/// # Errors
/// [`GraphError::InvalidArgument`] when `dim` is 0 or `rows` is not a whole number of
/// rows; [`GraphError::Io`] when the file cannot be written.
pub fn save_feature_rows(
    dim: usize,
    rows: &[f32],
    path: impl AsRef<Path>,
) -> Result<(), GraphError> {
    if dim == 0 || !rows.len().is_multiple_of(dim) {
        return Err(GraphError::arg(
            "save_feature_rows",
            format!(
                "{} floats are not a whole number of rows of width {dim}",
                rows.len()
            ),
        ));
    }
    save_link_parts(path.as_ref(), rows, dim, rows.len() / dim, &[])
}

/// Floats encoded per block when a payload is hashed or written (64 KiB).
pub(crate) const BLOCK_FLOATS: usize = 1 << 14;

/// Feed a link graph's payload (features, then edge records) to `sink` in blocks, so
/// neither hashing nor writing it needs a copy of the whole payload.
fn link_payload(
    features: &[f32],
    edges: &[LinkEdge],
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(BLOCK_FLOATS * 4);
    for block in features.chunks(BLOCK_FLOATS) {
        buf.clear();
        for v in block {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        sink(&buf)?;
    }
    for block in edges.chunks(BLOCK_FLOATS / 4) {
        buf.clear();
        for e in block {
            buf.extend_from_slice(&e.a.to_le_bytes());
            buf.extend_from_slice(&e.b.to_le_bytes());
            buf.extend_from_slice(&e.weight.to_le_bytes());
            buf.push(match e.kind {
                EdgeKind::Similarity => 0,
                EdgeKind::QueryChunk => 1,
                EdgeKind::Bridge => 2,
            });
        }
        sink(&buf)?;
    }
    Ok(())
}

/// Write a link-graph file from its parts in two streaming passes: the checksum, then
/// the file.
fn save_link_parts(
    path: &Path,
    features: &[f32],
    dim: usize,
    num_chunks: usize,
    edges: &[LinkEdge],
) -> Result<(), GraphError> {
    let mut hash = Fnv1a::new();
    let mut bytes = 0u64;
    link_payload(features, edges, |b| {
        hash.update(b);
        bytes += b.len() as u64;
        Ok(())
    })
    .map_err(|e| GraphError::io(path, e))?;
    let header = header(
        KIND_LINK,
        (hash.finish(), bytes),
        features.len().checked_div(dim).unwrap_or(0),
        num_chunks,
        dim,
        edges.len(),
    );
    write_container_with(path, &header, |w| {
        link_payload(features, edges, |b| w.write_all(b))
    })
}

/// Load a graph written by [`save_link_graph`].
///
/// # Errors
/// [`GraphError::Io`] when the file cannot be read; [`GraphError::VersionMismatch`],
/// [`GraphError::ChecksumMismatch`] or [`GraphError::Format`] (bad magic, truncated,
/// another kind of graph, inconsistent sizes, invalid edges) when it is not a readable
/// link graph of this format version.
pub fn load_link_graph(path: impl AsRef<Path>) -> Result<LinkGraph, GraphError> {
    let path = path.as_ref();
    let (mut file, total) = open_sized(path)?;
    decode_link_graph(path, &mut file, total)
}

/// [`load_link_graph`] from the file's bytes (for example embedded in a binary); errors
/// name `<bytes>` as the file.
pub fn link_graph_from_bytes(bytes: &[u8]) -> Result<LinkGraph, GraphError> {
    let mut r = bytes;
    decode_link_graph(Path::new("<bytes>"), &mut r, bytes.len() as u64)
}

/// Append the feature rows of the link-graph file at `path` (written by
/// [`save_feature_rows`] or [`save_link_graph`]) to `out`, and return how many rows it
/// held. Read in blocks straight into `out`, so loading a large matrix into a buffer that
/// already holds other rows needs no second copy. The file's edges are checked (with the
/// checksum) but not returned.
///
/// # Errors
/// As [`load_link_graph`]; also [`GraphError::Format`] when its rows are not `dim` wide.
/// On an error `out` is left as it was.
pub fn append_feature_rows(
    path: impl AsRef<Path>,
    dim: usize,
    out: &mut Vec<f32>,
) -> Result<usize, GraphError> {
    let path = path.as_ref();
    let (mut file, total) = open_sized(path)?;
    let before = out.len();
    let read = read_link_payload(path, &mut file, total, out).and_then(|(h, _)| {
        if h.dim != dim as u64 {
            return Err(GraphError::format(
                path,
                format!("rows are {} wide, expected {dim}", h.dim),
            ));
        }
        usize::try_from(h.num_nodes).map_err(|_| GraphError::format(path, "rows overflow"))
    });
    if read.is_err() {
        out.truncate(before);
    }
    read
}

/// `path` opened for reading, with its length.
pub(crate) fn open_sized(path: &Path) -> Result<(std::io::BufReader<fs::File>, u64), GraphError> {
    let file = fs::File::open(path).map_err(|e| GraphError::io(path, e))?;
    let total = file.metadata().map_err(|e| GraphError::io(path, e))?.len();
    Ok((std::io::BufReader::with_capacity(1 << 16, file), total))
}

/// [`load_chunk_graph`] from the file's bytes; errors name `<bytes>` as the file.
pub fn chunk_graph_from_bytes(bytes: &[u8]) -> Result<ChunkGraph, GraphError> {
    decode_chunk_graph(Path::new("<bytes>"), bytes)
}

/// The chunk nodes of the link-graph file at `path`: its first `num_chunks` feature rows
/// and the edges between two chunks (similarity and bridge edges), without the synthetic
/// questions' rows and edges — what a link predictor scores against at inference (LP-RAG
/// §3.5). The question rows are read through the checksum but never held, so the memory
/// needed is the chunk rows'.
///
/// # Errors
/// As [`load_link_graph`] (a damaged byte anywhere in the file, question rows included,
/// is a [`GraphError::ChecksumMismatch`]).
pub fn load_link_graph_chunks(path: impl AsRef<Path>) -> Result<LinkGraph, GraphError> {
    let path = path.as_ref();
    let (mut file, total) = open_sized(path)?;
    decode_link_graph_rows(path, &mut file, total, true)
}

/// The chunk–chunk edges of a link-graph file, without any feature row
/// ([`load_link_graph_chunk_edges`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkEdges {
    /// Width of the file's feature rows.
    pub dim: usize,
    /// How many chunk nodes the graph has (nodes `0..num_chunks`).
    pub num_chunks: usize,
    /// The edges between two chunks.
    pub edges: Vec<LinkEdge>,
}

/// The edges between chunks of the link-graph file at `path` and its sizes, holding no
/// feature row at all: for a process that reads the chunk rows elsewhere (a chunk store).
/// Every row is read through the checksum and dropped.
///
/// # Errors
/// As [`load_link_graph`].
pub fn load_link_graph_chunk_edges(path: impl AsRef<Path>) -> Result<ChunkEdges, GraphError> {
    let path = path.as_ref();
    let (mut file, total) = open_sized(path)?;
    let bad = |m: String| GraphError::format(path, m);
    let mut none = Vec::new();
    let (h, mut edges) = read_link_payload_rows(path, &mut file, total, &mut none, KeepRows::None)?;
    if h.num_chunks > h.num_nodes {
        return Err(bad(format!(
            "{} chunks but {} nodes",
            h.num_chunks, h.num_nodes
        )));
    }
    let dim = usize::try_from(h.dim).map_err(|_| bad("dim overflows".into()))?;
    let num_chunks =
        usize::try_from(h.num_chunks).map_err(|_| bad("num_chunks overflows".into()))?;
    if let Some(e) = edges.iter().find(|e| !e.weight.is_finite()) {
        return Err(bad(format!("edge {}–{} has weight {}", e.a, e.b, e.weight)));
    }
    edges.retain(|e| (e.a as usize) < num_chunks && (e.b as usize) < num_chunks);
    Ok(ChunkEdges {
        dim,
        num_chunks,
        edges,
    })
}

/// Which feature rows [`read_link_payload_rows`] keeps.
#[derive(Clone, Copy)]
pub(crate) enum KeepRows {
    All,
    Chunks,
    None,
}

fn decode_link_graph(path: &Path, r: &mut impl Read, total: u64) -> Result<LinkGraph, GraphError> {
    decode_link_graph_rows(path, r, total, false)
}

/// [`decode_link_graph`], keeping only the chunk nodes when `chunks_only`.
fn decode_link_graph_rows(
    path: &Path,
    r: &mut impl Read,
    total: u64,
    chunks_only: bool,
) -> Result<LinkGraph, GraphError> {
    let bad = |m: String| GraphError::format(path, m);
    let mut data = Vec::new();
    let keep = if chunks_only {
        KeepRows::Chunks
    } else {
        KeepRows::All
    };
    let (h, mut edges) = read_link_payload_rows(path, r, total, &mut data, keep)?;
    let dim = usize::try_from(h.dim).map_err(|_| bad("dim overflows".into()))?;
    let num_chunks =
        usize::try_from(h.num_chunks).map_err(|_| bad("num_chunks overflows".into()))?;
    let features = Embeddings::new(dim, data).map_err(|e| bad(e.to_string()))?;
    let rows = if chunks_only {
        h.num_chunks.min(h.num_nodes)
    } else {
        h.num_nodes
    };
    if features.rows() as u64 != rows {
        return Err(bad(format!(
            "{} feature rows, header says {rows}",
            features.rows()
        )));
    }
    if h.num_chunks > h.num_nodes {
        return Err(bad(format!(
            "{} chunks but {} nodes",
            h.num_chunks, h.num_nodes
        )));
    }
    if chunks_only {
        edges.retain(|e| (e.a as usize) < num_chunks && (e.b as usize) < num_chunks);
    }
    checked_link_graph(path, features, num_chunks, edges)
}

/// The link graph of these parts, read from `path`, when it passes
/// [`LinkGraph::validate`] (else [`GraphError::Format`] naming `path`).
pub(crate) fn checked_link_graph(
    path: &Path,
    features: Embeddings,
    num_chunks: usize,
    edges: Vec<LinkEdge>,
) -> Result<LinkGraph, GraphError> {
    let graph = LinkGraph {
        features,
        num_chunks,
        edges,
    };
    graph
        .validate()
        .map_err(|e| GraphError::format(path, e.to_string()))?;
    Ok(graph)
}

/// Read a link-graph file's header and payload from `r` (`total` bytes long), appending
/// its features to `out` block by block; the checksum covers everything read. Returns
/// the header and the decoded edges.
fn read_link_payload(
    path: &Path,
    r: &mut impl Read,
    total: u64,
    out: &mut Vec<f32>,
) -> Result<(Header, Vec<LinkEdge>), GraphError> {
    read_link_payload_rows(path, r, total, out, KeepRows::All)
}

/// [`read_link_payload`]; with `chunks_only`, only the chunks' rows are appended (the
/// rest still pass through the checksum).
pub(crate) fn read_link_payload_rows(
    path: &Path,
    r: &mut impl Read,
    total: u64,
    out: &mut Vec<f32>,
    keep_rows: KeepRows,
) -> Result<(Header, Vec<LinkEdge>), GraphError> {
    let bad = |m: String| GraphError::format(path, m);
    let h = read_header(path, r, total, KIND_LINK)?;
    let n_feat = h
        .num_nodes
        .checked_mul(h.dim)
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| bad("feature size overflows".into()))?;
    let n_edges = usize::try_from(h.num_edges).map_err(|_| bad("edge count overflows".into()))?;
    let want = n_feat
        .checked_mul(4)
        .zip(n_edges.checked_mul(EDGE_RECORD))
        .and_then(|(a, b)| a.checked_add(b))
        .ok_or_else(|| bad("payload size overflows".into()))?;
    if want as u64 != h.payload_bytes {
        return Err(bad(format!(
            "payload is {} bytes, header sizes imply {want}",
            h.payload_bytes
        )));
    }
    let eof = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            bad("file ends inside its payload (truncated?)".into())
        }
        _ => GraphError::io(path, e),
    };
    let mut hash = Fnv1a::new();
    let mut buf = vec![0u8; BLOCK_FLOATS * 4];
    // How many of the floats to keep: all, or the chunks' rows.
    let mut keep = match keep_rows {
        KeepRows::Chunks => h
            .num_chunks
            .min(h.num_nodes)
            .checked_mul(h.dim)
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| bad("feature size overflows".into()))?,
        KeepRows::All => n_feat,
        KeepRows::None => 0,
    };
    out.reserve_exact(keep);
    let mut left = n_feat;
    while left > 0 {
        let take = left.min(BLOCK_FLOATS);
        let bytes = &mut buf[..take * 4];
        r.read_exact(bytes).map_err(eof)?;
        hash.update(bytes);
        let kept = take.min(keep);
        out.extend(
            bytes[..kept * 4]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        keep -= kept;
        left -= take;
    }
    let mut ebytes = vec![0u8; n_edges * EDGE_RECORD];
    r.read_exact(&mut ebytes).map_err(eof)?;
    hash.update(&ebytes);
    let actual = hash.finish();
    if actual != h.checksum {
        return Err(GraphError::ChecksumMismatch {
            path: path.to_path_buf(),
            expected: h.checksum,
            actual,
        });
    }
    let mut edges = Vec::with_capacity(n_edges);
    for (i, r) in ebytes.chunks_exact(EDGE_RECORD).enumerate() {
        let u = |o: usize| [r[o], r[o + 1], r[o + 2], r[o + 3]];
        let kind = match r[12] {
            0 => EdgeKind::Similarity,
            1 => EdgeKind::QueryChunk,
            2 => EdgeKind::Bridge,
            k => return Err(bad(format!("edge {i} has unknown kind code {k}"))),
        };
        edges.push(LinkEdge {
            a: u32::from_le_bytes(u(0)),
            b: u32::from_le_bytes(u(4)),
            weight: f32::from_le_bytes(u(8)),
            kind,
        });
    }
    Ok((h, edges))
}

/// Save a [`ChunkGraph`] (its symmetric CSR) to `path`, atomically.
///
/// # Errors
/// [`GraphError::Io`] when the file cannot be written.
pub fn save_chunk_graph(graph: &ChunkGraph, path: impl AsRef<Path>) -> Result<(), GraphError> {
    let csr = graph.csr();
    let mut payload =
        Vec::with_capacity(4 * (csr.offsets.len() + csr.indices.len() + csr.weights.len()));
    for v in &csr.offsets {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    for v in &csr.indices {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    for v in &csr.weights {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    let header = header(
        KIND_CHUNK,
        summary(&payload),
        csr.num_nodes(),
        csr.num_nodes(),
        0,
        csr.num_entries(),
    );
    write_container(path.as_ref(), &header, &payload)
}

/// Load a graph written by [`save_chunk_graph`]; errors as [`load_link_graph`].
pub fn load_chunk_graph(path: impl AsRef<Path>) -> Result<ChunkGraph, GraphError> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|e| GraphError::io(path, e))?;
    decode_chunk_graph(path, &bytes)
}

fn decode_chunk_graph(path: &Path, bytes: &[u8]) -> Result<ChunkGraph, GraphError> {
    let (h, payload) = read_container(path, bytes, KIND_CHUNK)?;
    let bad = |m: String| GraphError::format(path, m);
    let n = usize::try_from(h.num_nodes).map_err(|_| bad("node count overflows".into()))?;
    let m = usize::try_from(h.num_edges).map_err(|_| bad("entry count overflows".into()))?;
    let want = n
        .checked_add(1)
        .and_then(|x| x.checked_add(m))
        .and_then(|x| x.checked_add(m))
        .and_then(|x| x.checked_mul(4))
        .ok_or_else(|| bad("payload size overflows".into()))?;
    if want != payload.len() {
        return Err(bad(format!(
            "payload is {} bytes, header sizes imply {want}",
            payload.len()
        )));
    }
    let words: Vec<[u8; 4]> = payload
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let csr = Csr {
        offsets: words[..=n].iter().map(|&w| u32::from_le_bytes(w)).collect(),
        indices: words[n + 1..n + 1 + m]
            .iter()
            .map(|&w| u32::from_le_bytes(w))
            .collect(),
        weights: words[n + 1 + m..]
            .iter()
            .map(|&w| f32::from_le_bytes(w))
            .collect(),
    };
    ChunkGraph::from_csr(csr).map_err(|e| bad(e.to_string()))
}

/// Save k-NN lists (as [`crate::knn`] returns them) to `path`, atomically, in the graph
/// container (magic, version, checksum).
///
/// # Errors
/// [`GraphError::Io`] when the file cannot be written.
pub fn save_knn_lists(lists: &[Vec<(u32, f32)>], path: impl AsRef<Path>) -> Result<(), GraphError> {
    let m: usize = lists.iter().map(Vec::len).sum();
    let mut payload = Vec::with_capacity(4 * (lists.len() + 1 + 2 * m));
    let mut offset = 0u64;
    payload.extend_from_slice(&0u64.to_le_bytes());
    for l in lists {
        offset += l.len() as u64;
        payload.extend_from_slice(&offset.to_le_bytes());
    }
    for &(j, s) in lists.iter().flatten() {
        payload.extend_from_slice(&j.to_le_bytes());
        payload.extend_from_slice(&s.to_le_bytes());
    }
    let header = header(KIND_KNN, summary(&payload), lists.len(), lists.len(), 0, m);
    write_container(path.as_ref(), &header, &payload)
}

/// Load k-NN lists written by [`save_knn_lists`]; errors as [`load_link_graph`] (a list
/// naming a row out of range, itself, or a non-finite similarity is a format error).
pub fn load_knn_lists(path: impl AsRef<Path>) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|e| GraphError::io(path, e))?;
    decode_knn_lists(path, &bytes)
}

/// [`load_knn_lists`] from the file's bytes; errors name `<bytes>` as the file.
pub fn knn_lists_from_bytes(bytes: &[u8]) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    decode_knn_lists(Path::new("<bytes>"), bytes)
}

fn decode_knn_lists(path: &Path, bytes: &[u8]) -> Result<Vec<Vec<(u32, f32)>>, GraphError> {
    let (h, payload) = read_container(path, bytes, KIND_KNN)?;
    let bad = |m: String| GraphError::format(path, m);
    let n = usize::try_from(h.num_nodes).map_err(|_| bad("row count overflows".into()))?;
    let m = usize::try_from(h.num_edges).map_err(|_| bad("entry count overflows".into()))?;
    let want = n
        .checked_add(1)
        .and_then(|x| x.checked_mul(8))
        .zip(m.checked_mul(8))
        .and_then(|(a, b)| a.checked_add(b))
        .ok_or_else(|| bad("payload size overflows".into()))?;
    if want != payload.len() {
        return Err(bad(format!(
            "payload is {} bytes, header sizes imply {want}",
            payload.len()
        )));
    }
    let (obytes, ebytes) = payload.split_at((n + 1) * 8);
    let offsets: Vec<u64> = obytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let entries: Vec<(u32, f32)> = ebytes
        .chunks_exact(8)
        .map(|c| {
            (
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    if offsets[0] != 0 || offsets[n] != m as u64 || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad(
            "row offsets are not a non-decreasing run from 0 to the entry count".into(),
        ));
    }
    let mut lists = Vec::with_capacity(n);
    for i in 0..n {
        let l = entries[offsets[i] as usize..offsets[i + 1] as usize].to_vec();
        if let Some(&(j, s)) = l
            .iter()
            .find(|&&(j, s)| j as usize >= n || j as usize == i || !s.is_finite())
        {
            return Err(bad(format!(
                "row {i} lists row {j} with similarity {s} ({n} rows)"
            )));
        }
        lists.push(l);
    }
    Ok(lists)
}

/// The header of a container of `kind` around `payload`.
/// The header of a payload with `(checksum, length)` `summary`.
pub(crate) fn header(
    kind: &str,
    summary: (u64, u64),
    nodes: usize,
    chunks: usize,
    dim: usize,
    entries: usize,
) -> Header {
    Header {
        format_version: FORMAT_VERSION,
        kind: kind.into(),
        checksum: summary.0,
        payload_bytes: summary.1,
        num_nodes: nodes as u64,
        num_chunks: chunks as u64,
        dim: dim as u64,
        num_edges: entries as u64,
    }
}

/// `(checksum, length)` of a payload held in memory.
fn summary(payload: &[u8]) -> (u64, u64) {
    (fnv1a64(payload), payload.len() as u64)
}

fn write_container(path: &Path, header: &Header, payload: &[u8]) -> Result<(), GraphError> {
    write_container_with(path, header, |w| w.write_all(payload))
}

/// Magic, header, then the payload `fill` writes, atomically.
fn write_container_with(
    path: &Path,
    header: &Header,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), GraphError> {
    let mut json = serde_json::to_vec(header)
        .map_err(|e| GraphError::format(path, format!("cannot encode header: {e}")))?;
    // Spaces after the JSON (still JSON) start the payload at a multiple of 4 bytes, so
    // the rows of a link graph can be mapped as floats in place (`map_link_graph`).
    json.resize(json.len().next_multiple_of(4), b' ');
    write_atomic_with(path, |w| {
        w.write_all(MAGIC)?;
        w.write_all(&(json.len() as u64).to_le_bytes())?;
        w.write_all(&json)?;
        fill(w)
    })
}

/// Parse magic, header and payload, checking version, kind and checksum.
fn read_container<'a>(
    path: &Path,
    bytes: &'a [u8],
    kind: &str,
) -> Result<(Header, &'a [u8]), GraphError> {
    let mut r = bytes;
    let header = read_header(path, &mut r, bytes.len() as u64, kind)?;
    let payload = r;
    let actual = fnv1a64(payload);
    if actual != header.checksum {
        return Err(GraphError::ChecksumMismatch {
            path: path.to_path_buf(),
            expected: header.checksum,
            actual,
        });
    }
    Ok((header, payload))
}

/// Read magic and header from `r`, the start of a file of `total` bytes, checking the
/// version, the kind and that the payload's size is what is left of the file. `r` is
/// left at the payload.
fn read_header(
    path: &Path,
    r: &mut impl Read,
    total: u64,
    kind: &str,
) -> Result<Header, GraphError> {
    let bad = |m: String| GraphError::format(path, m);
    let read = |r: &mut dyn Read, buf: &mut [u8]| {
        r.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => bad("file ends inside its header".into()),
            _ => GraphError::io(path, e),
        })
    };
    let mut start = [0u8; 16];
    if total < 16 {
        return Err(bad("not an lprag graph file (bad magic)".into()));
    }
    read(r, &mut start)?;
    if &start[..8] != MAGIC {
        return Err(bad("not an lprag graph file (bad magic)".into()));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&start[8..16]);
    let hlen = u64::from_le_bytes(len);
    if hlen > MAX_HEADER || hlen > total - 16 {
        return Err(bad(format!("header length {hlen} exceeds the file")));
    }
    let mut hbytes = vec![0u8; hlen as usize];
    read(r, &mut hbytes)?;
    let value: serde_json::Value =
        serde_json::from_slice(&hbytes).map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let found = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| bad("header has no format_version".into()))?;
    if found != FORMAT_VERSION {
        return Err(GraphError::VersionMismatch {
            path: path.to_path_buf(),
            found,
            expected: FORMAT_VERSION,
        });
    }
    let header: Header =
        serde_json::from_value(value).map_err(|e| bad(format!("bad header: {e}")))?;
    if header.kind != kind {
        return Err(bad(format!(
            "file holds a {}, expected a {kind}",
            header.kind
        )));
    }
    let left = total - 16 - hlen;
    if header.payload_bytes != left {
        return Err(bad(format!(
            "payload is {left} bytes, header says {} (truncated?)",
            header.payload_bytes
        )));
    }
    Ok(header)
}

/// The checksum a link-graph file's header records for its payload (the file is not read
/// past its header, so the payload is not verified here): a cheap identity of the graph a
/// derived file, such as a saved index's column-wise copy, was made from.
///
/// # Errors
/// [`GraphError::Io`] when the file cannot be read; [`GraphError::Format`] or
/// [`GraphError::VersionMismatch`] for a header that is not a link graph's.
pub fn link_graph_checksum(path: impl AsRef<Path>) -> Result<u64, GraphError> {
    let path = path.as_ref();
    let file = fs::File::open(path).map_err(|e| GraphError::io(path, e))?;
    let total = file.metadata().map_err(|e| GraphError::io(path, e))?.len();
    let mut r = std::io::BufReader::new(file);
    Ok(read_header(path, &mut r, total, KIND_LINK)?.checksum)
}

/// Write what `fill` writes (through a buffered writer) to a fresh temporary file next to
/// `path`, sync it, rename it over `path`; the temporary file is removed on failure.
/// The directory of `path` and a temporary file name in it, unique in this process, for
/// writing `path` atomically.
pub(crate) fn temp_beside(path: &Path) -> Result<(PathBuf, PathBuf), GraphError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| GraphError::arg("path", format!("{} has no file name", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    Ok((dir.to_path_buf(), tmp))
}

fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), GraphError> {
    let (dir, tmp) = temp_beside(path)?;
    let dir = dir.as_path();
    let write = || -> std::io::Result<()> {
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        fill(&mut w)?;
        let f = w
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(GraphError::io(path, e));
    }
    // Make the rename durable where the platform allows syncing a directory.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::SyntheticQuery;

    fn sample_link_graph() -> LinkGraph {
        let ce = Embeddings::from_rows(
            3,
            &[
                vec![1.0, 0.0, 0.5],
                vec![0.9, 0.1, 0.4],
                vec![0.0, 1.0, -2.5],
                vec![0.1, 0.9, f32::MIN_POSITIVE],
            ],
        )
        .unwrap();
        let edges = crate::mutual_knn_edges(&ce, 1, &crate::KnnBackend::Exact).unwrap();
        let mut edges = edges;
        edges.push(LinkEdge {
            a: 0,
            b: 3,
            weight: -0.25,
            kind: EdgeKind::Bridge,
        });
        let qs = vec![SyntheticQuery {
            text: "q".into(),
            chunk_ids: vec![0, 2],
            answer: None,
        }];
        let qe = Embeddings::from_rows(3, &[vec![0.3, 0.3, 0.3]]).unwrap();
        crate::build_link_graph(&ce, &edges, &qs, &qe).unwrap()
    }

    fn rewrite_header(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
        let bytes = fs::read(path).unwrap();
        let hlen = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let mut v: serde_json::Value = serde_json::from_slice(&bytes[16..16 + hlen]).unwrap();
        f(&mut v);
        let json = serde_json::to_vec(&v).unwrap();
        let mut out = bytes[..8].to_vec();
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        out.extend_from_slice(&bytes[16 + hlen..]);
        fs::write(path, out).unwrap();
    }

    #[test]
    fn link_graph_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.lpg");
        let g = sample_link_graph();
        save_link_graph(&g, &path).unwrap();
        let back = load_link_graph(&path).unwrap();
        assert_eq!(back.features, g.features);
        assert_eq!(back.num_chunks, g.num_chunks);
        assert_eq!(back.edges, g.edges);
        // Overwrite in place; no temporary files are left behind.
        save_link_graph(&back, &path).unwrap();
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("graph.lpg")]);
    }

    #[test]
    fn the_chunk_nodes_load_alone_and_the_whole_file_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.lpg");
        let g = sample_link_graph();
        assert!(g.num_nodes() > g.num_chunks);
        assert!(g.edges.iter().any(|e| e.kind == EdgeKind::QueryChunk));
        save_link_graph(&g, &path).unwrap();
        let chunks = load_link_graph_chunks(&path).unwrap();
        assert_eq!(chunks.num_chunks, g.num_chunks);
        assert_eq!(chunks.features, g.features.leading_rows(g.num_chunks));
        let among: Vec<LinkEdge> = g
            .edges
            .iter()
            .filter(|e| (e.a as usize) < g.num_chunks && (e.b as usize) < g.num_chunks)
            .copied()
            .collect();
        assert!(!among.is_empty() && among.len() < g.edges.len());
        assert_eq!(chunks.edges, among);
        let edges = load_link_graph_chunk_edges(&path).unwrap();
        assert_eq!(
            (edges.dim, edges.num_chunks, &edges.edges),
            (g.features.dim(), g.num_chunks, &among)
        );
        // A flipped bit in the question's row, which is never kept, is still found.
        let mut bytes = fs::read(&path).unwrap();
        let hlen = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let question_row = 16 + hlen + g.num_chunks * g.features.dim() * 4;
        bytes[question_row + 1] ^= 0x10;
        fs::write(&path, bytes).unwrap();
        let err = load_link_graph_chunks(&path).unwrap_err();
        assert!(matches!(err, GraphError::ChecksumMismatch { .. }), "{err}");
        let err = load_link_graph_chunk_edges(&path).unwrap_err();
        assert!(matches!(err, GraphError::ChecksumMismatch { .. }), "{err}");
    }

    #[test]
    fn chunk_graph_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunks.lpg");
        let g = ChunkGraph::from_link_graph(&sample_link_graph()).unwrap();
        assert!(g.num_edges() > 0);
        save_chunk_graph(&g, &path).unwrap();
        assert_eq!(load_chunk_graph(&path).unwrap(), g);
        let empty = ChunkGraph::from_edges(0, &[]).unwrap();
        save_chunk_graph(&empty, &path).unwrap();
        assert_eq!(load_chunk_graph(&path).unwrap().num_chunks(), 0);
    }

    #[test]
    fn version_mismatch_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.lpg");
        save_link_graph(&sample_link_graph(), &path).unwrap();
        rewrite_header(&path, |v| v["format_version"] = 99.into());
        let err = load_link_graph(&path).unwrap_err();
        assert!(
            matches!(
                err,
                GraphError::VersionMismatch {
                    found: 99,
                    expected: FORMAT_VERSION,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn checksum_mismatch_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.lpg");
        save_link_graph(&sample_link_graph(), &path).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 20;
        bytes[last] ^= 0x40;
        fs::write(&path, bytes).unwrap();
        let err = load_link_graph(&path).unwrap_err();
        assert!(matches!(err, GraphError::ChecksumMismatch { .. }), "{err}");
        let core: lprag_core::Error = err.into();
        assert!(matches!(core, lprag_core::Error::Format { .. }));
    }

    #[test]
    fn corrupt_files_are_format_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.lpg");
        save_link_graph(&sample_link_graph(), &path).unwrap();
        let bytes = fs::read(&path).unwrap();

        // Truncated payload.
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(matches!(
            load_link_graph(&path),
            Err(GraphError::Format { .. })
        ));
        // Truncated inside the header.
        fs::write(&path, &bytes[..20]).unwrap();
        assert!(matches!(
            load_link_graph(&path),
            Err(GraphError::Format { .. })
        ));
        // Not our file at all.
        fs::write(&path, b"hello world, this is not a graph").unwrap();
        let err = load_link_graph(&path).unwrap_err();
        assert!(err.to_string().contains("magic"), "{err}");
        // Wrong kind.
        fs::write(&path, &bytes).unwrap();
        let err = load_chunk_graph(&path).unwrap_err();
        assert!(err.to_string().contains("expected a chunk_graph"), "{err}");
        // Header sizes that disagree with the payload.
        rewrite_header(&path, |v| v["dim"] = 4.into());
        assert!(matches!(
            load_link_graph(&path),
            Err(GraphError::Format { .. })
        ));
        // Missing file.
        let err = load_link_graph(dir.path().join("missing")).unwrap_err();
        assert!(matches!(err, GraphError::Io { .. }));
    }

    #[test]
    fn invalid_graph_is_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let mut g = sample_link_graph();
        g.edges.push(LinkEdge {
            a: 0,
            b: 99,
            weight: 1.0,
            kind: EdgeKind::Bridge,
        });
        let path = dir.path().join("g.lpg");
        assert!(matches!(
            save_link_graph(&g, &path),
            Err(GraphError::InvalidGraph { .. })
        ));
        assert!(!path.exists());
        assert!(save_link_graph(&sample_link_graph(), dir.path().join("no/such/dir/g")).is_err());
    }

    #[test]
    fn feature_rows_round_trip_into_a_larger_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.bin");
        // More floats than one block, so the reads cross block boundaries.
        let dim = 3;
        let rows: Vec<f32> = (0..(BLOCK_FLOATS * 2 + 13))
            .map(|i| i as f32 * 0.5)
            .collect();
        save_feature_rows(dim, &rows, &path).unwrap();
        let mut out = vec![7.0f32; 6];
        assert_eq!(
            append_feature_rows(&path, dim, &mut out).unwrap(),
            rows.len() / dim
        );
        assert_eq!(&out[..6], &[7.0; 6]);
        assert_eq!(&out[6..], &rows[..]);
        // The file is a link graph of chunks without edges.
        let g = load_link_graph(&path).unwrap();
        assert_eq!(g.features.as_slice(), &rows[..]);
        assert_eq!(g.num_chunks, rows.len() / dim);
        assert!(g.edges.is_empty());
        // Another width, a flipped byte or a truncated file leaves `out` as it was.
        let mut out = vec![1.0f32; 3];
        let err = append_feature_rows(&path, 4, &mut out).unwrap_err();
        assert!(err.to_string().contains("wide"), "{err}");
        assert_eq!(out, vec![1.0; 3]);
        let mut bytes = fs::read(&path).unwrap();
        let mid = bytes.len() - 100;
        bytes[mid] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        let err = append_feature_rows(&path, dim, &mut out).unwrap_err();
        assert!(matches!(err, GraphError::ChecksumMismatch { .. }), "{err}");
        assert_eq!(out, vec![1.0; 3]);
        fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        assert!(matches!(
            append_feature_rows(&path, dim, &mut out),
            Err(GraphError::Format { .. })
        ));
        assert_eq!(out, vec![1.0; 3]);
        // Ragged rows are refused before anything is written.
        assert!(save_feature_rows(dim, &rows[..4], dir.path().join("r2")).is_err());
        assert!(save_feature_rows(0, &[], dir.path().join("r3")).is_err());
    }

    #[test]
    fn streamed_files_equal_the_one_piece_encoding() {
        // The streaming writer must produce exactly the bytes of the documented layout:
        // magic, header length, header, features, edges, with the payload's FNV-1a.
        let g = sample_link_graph();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.bin");
        save_link_graph(&g, &path).unwrap();
        let bytes = fs::read(&path).unwrap();
        let mut payload = Vec::new();
        for v in g.features.as_slice() {
            payload.extend_from_slice(&v.to_le_bytes());
        }
        for e in &g.edges {
            payload.extend_from_slice(&e.a.to_le_bytes());
            payload.extend_from_slice(&e.b.to_le_bytes());
            payload.extend_from_slice(&e.weight.to_le_bytes());
            payload.push(e.kind as u8);
        }
        assert!(bytes.ends_with(&payload));
        let hlen = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[16..16 + hlen]).unwrap();
        assert_eq!(header["checksum"], fnv1a64(&payload));
        assert_eq!(header["payload_bytes"], payload.len() as u64);
        assert_eq!(16 + hlen + payload.len(), bytes.len());
        let back = link_graph_from_bytes(&bytes).unwrap();
        assert_eq!(back.features, g.features);
        assert_eq!(back.edges, g.edges);
        assert_eq!(back.num_chunks, g.num_chunks);
    }

    #[test]
    fn fnv_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn knn_lists_round_trip_and_corruption_is_an_error() {
        let lists = vec![vec![(1, 0.9), (2, 0.5)], vec![(0, 0.9)], vec![]];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("knn.bin");
        save_knn_lists(&lists, &path).unwrap();
        assert_eq!(load_knn_lists(&path).unwrap(), lists);
        let bytes = std::fs::read(&path).unwrap();
        for i in [0, 20, bytes.len() - 3] {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(knn_lists_from_bytes(&b).is_err(), "flipped byte {i}");
        }
        assert!(knn_lists_from_bytes(&bytes[..bytes.len() - 1]).is_err());
        // A graph file is not a k-NN file.
        let g = dir.path().join("g.bin");
        save_chunk_graph(&crate::ChunkGraph::from_edges(2, &[]).unwrap(), &g).unwrap();
        let err = load_knn_lists(&g).unwrap_err().to_string();
        assert!(err.contains("chunk_graph") || err.contains("kind"), "{err}");
        // Self-loops and out-of-range rows are refused even with a valid checksum.
        for bad in [
            vec![vec![(0, 0.5)]],
            vec![vec![(3, 0.5)]],
            vec![vec![(1, f32::NAN)], vec![]],
        ] {
            save_knn_lists(&bad, &path).unwrap();
            assert!(load_knn_lists(&path).is_err(), "{bad:?}");
        }
    }
}
