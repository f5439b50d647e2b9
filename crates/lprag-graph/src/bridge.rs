//! Bridge edges: the chunk–chunk links that embedding k-NN misses.
//!
//! A multi-hop question needs the passage *about* an entity that another passage only
//! mentions ("… directed by Jane Roe" → the passage titled "Jane Roe"). The two rarely
//! sit close in embedding space, so mutual k-NN does not join them. Bridge edges do:
//!
//! - **title mentions**: a chunk whose text names another document's title is linked to
//!   that document's first chunks;
//! - **same document**: consecutive chunks of one document are linked, so an atomic
//!   sentence keeps its context.
//!
//! Both are [`EdgeKind::Bridge`] edges; pairs already joined by a given edge are skipped.

use std::collections::{HashMap, HashSet};

use aho_corasick::{AhoCorasick, MatchKind};
use lprag_core::{Chunk, EdgeKind, LinkEdge};
use serde::{Deserialize, Serialize};

use crate::GraphError;

/// Which bridge edges to add, and their limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BridgeConfig {
    /// Link a chunk that mentions another document's title to that document's first
    /// chunks. Default `true`.
    pub title_mentions: bool,
    /// Link consecutive chunks of the same document. Default `true`.
    pub same_document: bool,
    /// Titles shorter than this many characters (after dropping a trailing
    /// parenthesised qualifier such as "(band)") are not matched. Default 4.
    pub min_title_chars: usize,
    /// Titles mentioned by more chunks than this are hubs ("United States") and are not
    /// linked. Default 30.
    pub max_mentions: usize,
    /// A mention is linked to at most this many chunks of the mentioned document, its
    /// first ones. Default 2.
    pub max_targets: usize,
    /// Weight of every bridge edge. Default 1.0.
    pub weight: f32,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            title_mentions: true,
            same_document: true,
            min_title_chars: 4,
            max_mentions: 30,
            max_targets: 2,
            weight: 1.0,
        }
    }
}

impl BridgeConfig {
    /// No bridge edges at all.
    pub fn none() -> Self {
        Self {
            title_mentions: false,
            same_document: false,
            ..Self::default()
        }
    }

    /// Check the limits.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] for a non-finite or non-positive weight or a zero
    /// `max_targets` while title mentions are on.
    pub fn validate(&self) -> Result<(), GraphError> {
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(GraphError::arg(
                "BridgeConfig.weight",
                format!("must be finite and > 0, got {}", self.weight),
            ));
        }
        if self.title_mentions && self.max_targets == 0 {
            return Err(GraphError::arg(
                "BridgeConfig.max_targets",
                "must be at least 1 when title_mentions is on",
            ));
        }
        Ok(())
    }
}

/// The title as it appears in running text: a trailing "(qualifier)" dropped, trimmed.
fn surface(title: &str) -> &str {
    let t = title.trim();
    match t.rfind(" (") {
        Some(i) if t.ends_with(')') => t[..i].trim(),
        _ => t,
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// Bridge edges over `chunks` (node `i` = `chunks[i]`), per `config`, skipping pairs
/// already joined by an edge of `existing`. Deterministic: edges come out sorted.
///
/// Documents are identified by [`lprag_core::Provenance::document_id`], their titles by
/// [`lprag_core::Provenance::title`]; a document's chunks are taken in the order of
/// `chunks`. A title is matched case-sensitively at word boundaries.
///
/// # Errors
/// Those of [`BridgeConfig::validate`].
pub fn bridge_edges(
    chunks: &[Chunk],
    existing: &[LinkEdge],
    config: &BridgeConfig,
) -> Result<Vec<LinkEdge>, GraphError> {
    config.validate()?;
    let docs = Documents::of(chunks);
    let mut sink = Bridges::new(existing, config.weight);
    if config.same_document {
        for ids in &docs.chunks {
            for w in ids.windows(2) {
                sink.push(w[0], w[1]);
            }
        }
    }
    if config.title_mentions {
        title_mention_edges(chunks, &docs, config, &mut sink)?;
    }
    let mut out = sink.out;
    out.sort_by_key(|e| (e.a, e.b));
    Ok(out)
}

/// The documents of a chunk list, numbered in order of first appearance.
struct Documents<'a> {
    /// Each document's chunks, in the order of the chunk list.
    chunks: Vec<Vec<u32>>,
    /// Each chunk's document.
    of_chunk: Vec<usize>,
    /// Each document's title, as matched ([`surface`]).
    titles: Vec<&'a str>,
}

impl<'a> Documents<'a> {
    fn of(chunks: &'a [Chunk]) -> Self {
        let mut doc_chunks: Vec<Vec<u32>> = Vec::new();
        let mut doc_index: HashMap<&str, usize> = HashMap::new();
        let mut chunk_doc: Vec<usize> = Vec::with_capacity(chunks.len());
        let mut doc_title: Vec<&str> = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let d = *doc_index
                .entry(c.provenance.document_id.as_str())
                .or_insert_with(|| {
                    doc_chunks.push(Vec::new());
                    doc_title.push(surface(&c.provenance.title));
                    doc_chunks.len() - 1
                });
            doc_chunks[d].push(i as u32);
            chunk_doc.push(d);
        }
        Self {
            chunks: doc_chunks,
            of_chunk: chunk_doc,
            titles: doc_title,
        }
    }
}

/// The bridge edges found so far, each pair once and none already joined.
struct Bridges {
    seen: HashSet<(u32, u32)>,
    out: Vec<LinkEdge>,
    weight: f32,
}

impl Bridges {
    fn new(existing: &[LinkEdge], weight: f32) -> Self {
        Self {
            seen: existing.iter().map(|e| pair(e.a, e.b)).collect(),
            out: Vec::new(),
            weight,
        }
    }

    /// Add the edge `a`–`b` unless it is a self-loop or the pair is joined already.
    fn push(&mut self, a: u32, b: u32) {
        if a != b && self.seen.insert(pair(a, b)) {
            let (a, b) = pair(a, b);
            self.out.push(LinkEdge {
                a,
                b,
                weight: self.weight,
                kind: EdgeKind::Bridge,
            });
        }
    }
}

/// `(min, max)` of a pair of nodes.
fn pair(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

/// Title-mention edges: every chunk naming a title (outside the title's own documents) to
/// the first `max_targets` chunks of each document carrying it, unless more than
/// `max_mentions` chunks name it.
fn title_mention_edges(
    chunks: &[Chunk],
    docs: &Documents<'_>,
    config: &BridgeConfig,
    sink: &mut Bridges,
) -> Result<(), GraphError> {
    // Distinct titles → the documents that carry them.
    let mut title_docs: HashMap<&str, Vec<usize>> = HashMap::new();
    for (d, t) in docs.titles.iter().enumerate() {
        if t.chars().count() >= config.min_title_chars {
            title_docs.entry(t).or_default().push(d);
        }
    }
    let mut titles: Vec<&str> = title_docs.keys().copied().collect();
    titles.sort_unstable();
    if titles.is_empty() {
        return Ok(());
    }
    let mentions = mentions(chunks, docs, &titles, &title_docs)?;
    for (t, ms) in mentions.iter().enumerate() {
        if ms.is_empty() || ms.len() > config.max_mentions {
            continue;
        }
        for &d in &title_docs[titles[t]] {
            for &target in docs.chunks[d].iter().take(config.max_targets) {
                for &m in ms {
                    sink.push(m, target);
                }
            }
        }
    }
    Ok(())
}

/// `mentions[t]` = the chunks naming `titles[t]` at word boundaries, outside the title's
/// own documents (`title_docs`).
fn mentions(
    chunks: &[Chunk],
    docs: &Documents<'_>,
    titles: &[&str],
    title_docs: &HashMap<&str, Vec<usize>>,
) -> Result<Vec<Vec<u32>>, GraphError> {
    let ac = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .build(titles)
        .map_err(|e| GraphError::arg("titles", e.to_string()))?;
    let mut mentions: Vec<Vec<u32>> = vec![Vec::new(); titles.len()];
    for (i, c) in chunks.iter().enumerate() {
        let text = c.text.as_bytes();
        let mut found: Vec<usize> = Vec::new();
        for m in ac.find_overlapping_iter(&c.text) {
            let (s, e) = (m.start(), m.end());
            let left_ok = s == 0 || !is_word_byte(text[s - 1]);
            let right_ok = e == text.len() || !is_word_byte(text[e]);
            if left_ok && right_ok {
                found.push(m.pattern().as_usize());
            }
        }
        found.sort_unstable();
        found.dedup();
        for t in found {
            if !title_docs[titles[t]].contains(&docs.of_chunk[i]) {
                mentions[t].push(i as u32);
            }
        }
    }
    Ok(mentions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::Provenance;

    fn chunk(id: usize, doc: &str, title: &str, text: &str) -> Chunk {
        Chunk {
            id,
            text: text.into(),
            provenance: Provenance {
                document_id: doc.into(),
                title: title.into(),
                span: 0..text.len(),
            },
            metadata: Default::default(),
        }
    }

    fn pairs(edges: &[LinkEdge]) -> Vec<(u32, u32)> {
        edges.iter().map(|e| (e.a, e.b)).collect()
    }

    fn corpus() -> Vec<Chunk> {
        vec![
            chunk(0, "film", "Blue Sky (film)", "Blue Sky is a 1994 film."),
            chunk(1, "film", "Blue Sky (film)", "It was directed by Jane Roe."),
            chunk(2, "roe", "Jane Roe", "Jane Roe was born in Leeds."),
            chunk(3, "roe", "Jane Roe", "She studied in York."),
            chunk(4, "roe", "Jane Roe", "Her third film won a prize."),
            chunk(
                5,
                "leeds",
                "Leeds",
                "Leeds is a city. Jane Roesch lived there.",
            ),
        ]
    }

    #[test]
    fn title_mentions_link_to_the_first_chunks_of_the_named_document() {
        let cfg = BridgeConfig {
            same_document: false,
            ..BridgeConfig::default()
        };
        let e = bridge_edges(&corpus(), &[], &cfg).unwrap();
        // chunk 1 names "Jane Roe" → chunks 2, 3 (max_targets 2); chunk 2 names "Leeds" → 5;
        // chunk 5 says "Jane Roesch" (no word boundary) → nothing; "Blue Sky" is named
        // only inside its own document.
        assert_eq!(pairs(&e), vec![(1, 2), (1, 3), (2, 5)]);
        assert!(e
            .iter()
            .all(|e| e.kind == EdgeKind::Bridge && e.weight == 1.0));
    }

    #[test]
    fn same_document_links_consecutive_chunks_and_existing_pairs_are_skipped() {
        let cfg = BridgeConfig {
            title_mentions: false,
            ..BridgeConfig::default()
        };
        let existing = [LinkEdge {
            a: 3,
            b: 2,
            weight: 0.9,
            kind: EdgeKind::Similarity,
        }];
        let e = bridge_edges(&corpus(), &existing, &cfg).unwrap();
        assert_eq!(pairs(&e), vec![(0, 1), (3, 4)]);
    }

    #[test]
    fn hubs_and_short_titles_are_not_linked() {
        let mut c = corpus();
        c.push(chunk(6, "x", "X", "X marks it. Leeds again."));
        let cfg = BridgeConfig {
            same_document: false,
            max_mentions: 1,
            ..BridgeConfig::default()
        };
        let e = bridge_edges(&c, &[], &cfg).unwrap();
        // "Leeds" is now named by chunks 2 and 6 (> 1): dropped; "X" is too short.
        assert_eq!(pairs(&e), vec![(1, 2), (1, 3)]);
        assert!(bridge_edges(&c, &[], &BridgeConfig::none())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_config_is_a_typed_error() {
        let cfg = BridgeConfig {
            weight: f32::NAN,
            ..BridgeConfig::default()
        };
        let e = bridge_edges(&corpus(), &[], &cfg).unwrap_err();
        assert!(e.to_string().contains("BridgeConfig.weight"), "{e}");
    }
}
