//! Plain data types that flow through the pipeline.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::{Embeddings, Error, Result};

/// A source document: the unit a user hands to lprag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// A caller-chosen identifier, unique within a corpus.
    pub id: String,
    /// The document's title (may be empty).
    pub title: String,
    /// The document's body text.
    pub text: String,
    /// Free-form metadata carried along unchanged.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl Document {
    /// A document with no metadata.
    pub fn new(id: impl Into<String>, title: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            text: text.into(),
            metadata: BTreeMap::new(),
        }
    }

    /// Add one metadata entry (builder style).
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// The document's content hash: SHA-256 (hex) of its title, text and metadata, the
    /// keys of [`VOLATILE_METADATA`] and [`DOCUMENT_HASH_KEY`] left out. Two versions of a
    /// document with the same hash index to the same chunks; `sync` uses it to skip
    /// unchanged documents. The id is not part of it.
    pub fn content_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        // Length-prefixed fields: no two different documents hash the same input.
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(self.title.as_bytes());
        field(self.text.as_bytes());
        for (k, v) in &self.metadata {
            if k == DOCUMENT_HASH_KEY || VOLATILE_METADATA.contains(&k.as_str()) {
                continue;
            }
            field(k.as_bytes());
            field(v.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The chunk metadata key under which every retriever records the
/// [`Document::content_hash`] of the chunk's document (see
/// [`Chunk::stamp_document_hashes`]).
pub const DOCUMENT_HASH_KEY: &str = "lprag.document_hash";

/// Metadata keys left out of [`Document::content_hash`]: they change when nothing in the
/// content does (a file's modification time).
pub const VOLATILE_METADATA: &[&str] = &["modified"];

/// Index of a chunk within one corpus (its position in the chunk list).
pub type ChunkId = usize;

/// Where a chunk came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The [`Document::id`] of the source document.
    pub document_id: String,
    /// The source document's title.
    pub title: String,
    /// Byte span of the chunk inside [`Document::text`]. For chunks an LLM rewrote, the
    /// span of the text they were derived from (possibly the whole document).
    pub span: Range<usize>,
}

/// An atomic piece of a document: the unit that is embedded, linked and retrieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Position of the chunk in the corpus' chunk list.
    pub id: ChunkId,
    /// The chunk's text.
    pub text: String,
    /// Where the chunk came from.
    pub provenance: Provenance,
    /// The source document's [`Document::metadata`]: the pipelines copy it onto every
    /// chunk a chunker returns without metadata of its own, so every hit carries it and
    /// [`crate::Filter`] can select on it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl Chunk {
    /// A chunk without metadata.
    pub fn new(id: ChunkId, text: impl Into<String>, provenance: Provenance) -> Self {
        Self {
            id,
            text: text.into(),
            provenance,
            metadata: BTreeMap::new(),
        }
    }

    /// Give every chunk without metadata its document's [`Document::metadata`] (matched
    /// by [`Provenance::document_id`]); chunks that carry metadata already keep theirs.
    pub fn inherit_metadata(chunks: &mut [Chunk], documents: &[Document]) {
        if documents.iter().all(|d| d.metadata.is_empty()) {
            return;
        }
        let by_id: std::collections::HashMap<&str, &BTreeMap<String, String>> = documents
            .iter()
            .map(|d| (d.id.as_str(), &d.metadata))
            .collect();
        for c in chunks.iter_mut().filter(|c| c.metadata.is_empty()) {
            if let Some(m) = by_id.get(c.provenance.document_id.as_str()) {
                c.metadata = (*m).clone();
            }
        }
    }

    /// Record on every chunk its document's [`Document::content_hash`] under
    /// [`DOCUMENT_HASH_KEY`] (matched by [`Provenance::document_id`]). The pipelines call
    /// it on every chunk they index, after [`Chunk::inherit_metadata`].
    pub fn stamp_document_hashes(chunks: &mut [Chunk], documents: &[Document]) {
        let by_id: std::collections::HashMap<&str, String> = documents
            .iter()
            .map(|d| (d.id.as_str(), d.content_hash()))
            .collect();
        for c in chunks.iter_mut() {
            if let Some(h) = by_id.get(c.provenance.document_id.as_str()) {
                c.metadata.insert(DOCUMENT_HASH_KEY.to_string(), h.clone());
            }
        }
    }

    /// The content hash of this chunk's document as recorded when it was indexed
    /// ([`Chunk::stamp_document_hashes`]); `None` for chunks indexed before hashes were
    /// recorded.
    pub fn document_hash(&self) -> Option<&str> {
        self.metadata.get(DOCUMENT_HASH_KEY).map(String::as_str)
    }

    /// The text that is embedded for this chunk: `title + "\n" + text` when the title is
    /// not empty, else the text alone (the HippoRAG passage convention).
    pub fn embedding_text(&self) -> String {
        if self.provenance.title.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.provenance.title, self.text)
        }
    }
}

/// A query written for a batch of chunks at index time (LP-RAG §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticQuery {
    /// The query text.
    pub text: String,
    /// The chunks the query is linked to (its batch).
    pub chunk_ids: Vec<ChunkId>,
    /// An answer, when the generator produced one (QCG-RAG's Doc2Query pairs).
    #[serde(default)]
    pub answer: Option<String>,
}

/// A chunk with the score a retriever gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredChunk {
    /// The chunk.
    pub chunk: Chunk,
    /// The score; higher is better. For LP-RAG this is σ(φ(q, c)) in `[0, 1]`.
    pub score: f32,
}

/// How many chunks a retriever returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Selection {
    /// The `k` best chunks. A retriever that ranks a document's chunks as one (LP-RAG's
    /// and QCG-RAG's `parents`) counts documents instead and returns each one's chunks
    /// together.
    TopK(usize),
    /// Every chunk whose score is at least the threshold (LP-RAG: τ = 0.5), best first.
    Threshold(f32),
    /// Chunks above the threshold, at most `k` of them.
    ThresholdTopK {
        /// Minimum score.
        threshold: f32,
        /// Maximum number of chunks.
        k: usize,
    },
}

impl Selection {
    /// Apply the selection to scores sorted best first.
    pub fn apply<T>(&self, sorted: Vec<T>, score: impl Fn(&T) -> f32) -> Vec<T> {
        match *self {
            Selection::TopK(k) => sorted.into_iter().take(k).collect(),
            Selection::Threshold(t) => sorted.into_iter().take_while(|s| score(s) >= t).collect(),
            Selection::ThresholdTopK { threshold, k } => sorted
                .into_iter()
                .take_while(|s| score(s) >= threshold)
                .take(k)
                .collect(),
        }
    }

    /// Check the selection's numbers.
    pub fn validate(&self) -> Result<()> {
        let bad_t = |t: f32| !t.is_finite();
        match *self {
            Selection::TopK(0) | Selection::ThresholdTopK { k: 0, .. } => {
                Err(Error::invalid("selection", "k must be at least 1"))
            }
            Selection::Threshold(t) | Selection::ThresholdTopK { threshold: t, .. } if bad_t(t) => {
                Err(Error::invalid("selection", "threshold must be finite"))
            }
            _ => Ok(()),
        }
    }
}

/// The kind of an edge in a [`LinkGraph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeKind {
    /// Chunk–chunk similarity edge (mutual k-NN, weight = cosine).
    Similarity,
    /// Query–chunk edge linking a synthetic query to a chunk of its batch (weight 1).
    QueryChunk,
    /// Chunk–chunk edge of another origin (shared entity, same document, ...).
    Bridge,
}

/// One undirected edge of a [`LinkGraph`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkEdge {
    /// One end (node index).
    pub a: u32,
    /// The other end (node index).
    pub b: u32,
    /// Edge weight.
    pub weight: f32,
    /// What the edge means.
    pub kind: EdgeKind,
}

/// The graph a [`crate::LinkPredictor`] trains on: chunk nodes `0..num_chunks`, then query
/// nodes, with node features and undirected weighted edges.
///
/// This is a plain data carrier so `lprag-core` stays free of graph libraries; `lprag-graph`
/// builds it and exports compact CSR views.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkGraph {
    /// One feature row per node (chunks first, then queries).
    pub features: Embeddings,
    /// Number of chunk nodes; nodes `num_chunks..` are synthetic queries.
    pub num_chunks: usize,
    /// Undirected edges (each stored once).
    pub edges: Vec<LinkEdge>,
}

impl LinkGraph {
    /// Total number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.features.rows()
    }

    /// Number of query nodes.
    pub fn num_queries(&self) -> usize {
        self.num_nodes() - self.num_chunks
    }

    /// Check that every edge names existing nodes and has a finite weight.
    pub fn validate(&self) -> Result<()> {
        if self.num_chunks > self.num_nodes() {
            return Err(Error::DimensionMismatch {
                location: "LinkGraph.num_chunks".into(),
                expected: self.num_nodes(),
                actual: self.num_chunks,
            });
        }
        let n = self.num_nodes() as u32;
        for (i, e) in self.edges.iter().enumerate() {
            if e.a >= n || e.b >= n {
                return Err(Error::invalid(
                    format!("LinkGraph.edges[{i}]"),
                    format!("node {} or {} out of range (graph has {n} nodes)", e.a, e.b),
                ));
            }
            if !e.weight.is_finite() {
                return Err(Error::invalid(
                    format!("LinkGraph.edges[{i}]"),
                    "weight is not finite",
                ));
            }
        }
        Ok(())
    }
}
