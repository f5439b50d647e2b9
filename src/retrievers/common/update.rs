//! The start of an index update, shared by the retrievers that update: the documents
//! present, added and removed checked; the new documents chunked; the kept chunks
//! renumbered and their embeddings kept bit for bit; the stages timed into the report.

use std::collections::HashSet;
use std::sync::Arc;

use lprag_core::{
    Chunk, ChunkId, Chunker, Document, Embeddings, Encoder, Error, NoProgress, Result,
};

use super::{embed_all, fit_to_encoder, Docs};

/// The ids of the documents that produced one of `chunks`.
pub(crate) fn document_ids(chunks: &[Chunk]) -> HashSet<&str> {
    chunks
        .iter()
        .map(|c| c.provenance.document_id.as_str())
        .collect()
}

/// Refuse to add a document whose id is among `present` (an update replaces it).
pub(crate) fn refuse_present(
    present: &HashSet<&str>,
    add: &[Document],
    location: &str,
) -> Result<()> {
    match add.iter().find(|d| present.contains(d.id.as_str())) {
        Some(d) => Err(Error::invalid(
            location,
            format!(
                "document '{}' is already in the index; use update_documents to replace it",
                d.id
            ),
        )),
        None => Ok(()),
    }
}

/// Refuse to remove ids that are not among `present`, naming them all.
pub(crate) fn refuse_unknown(
    present: &HashSet<&str>,
    ids: &[String],
    location: &str,
) -> Result<()> {
    let unknown: Vec<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| !present.contains(id))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(
            location,
            format!("not in the index: {}", unknown.join(", ")),
        ))
    }
}

/// The ids of `add` already among `present`: the documents an update replaces.
pub(crate) fn replaced_ids(present: &HashSet<&str>, add: &[Document]) -> Vec<String> {
    add.iter()
        .filter(|d| present.contains(d.id.as_str()))
        .map(|d| d.id.clone())
        .collect()
}

/// The start of an index update: `add`'s ids checked (none twice), its chunks (metadata
/// inherited, fitted to `encoder`, a note in `warnings` when some were split or will be
/// cut), and which of the `old` chunks stay once the documents `remove` go. An update
/// that would leave no chunk is refused, naming `location`.
pub(crate) async fn update_chunks(
    old: &[Chunk],
    (remove, add): (&[String], &[Document]),
    chunker: &dyn Chunker,
    encoder: &Arc<dyn Encoder>,
    warnings: &mut Vec<String>,
    location: &str,
) -> Result<(Vec<Chunk>, Vec<bool>)> {
    let mut seen = HashSet::new();
    if let Some(d) = add.iter().find(|d| !seen.insert(d.id.as_str())) {
        return Err(Error::invalid(
            format!("{location} (documents)"),
            format!("document id '{}' appears twice", d.id),
        ));
    }
    let new_chunks = if add.is_empty() {
        Vec::new()
    } else {
        let mut c = chunker.chunk(add).await?;
        Chunk::inherit_metadata(&mut c, add);
        Chunk::stamp_document_hashes(&mut c, add);
        let (c, note) = fit_to_encoder(c, Docs::Slice(add), encoder, chunker.name()).await?;
        warnings.extend(note);
        c
    };
    let gone: HashSet<&str> = remove.iter().map(String::as_str).collect();
    let keep: Vec<bool> = old
        .iter()
        .map(|c| !gone.contains(c.provenance.document_id.as_str()))
        .collect();
    if keep.iter().all(|&k| !k) && new_chunks.is_empty() {
        return Err(Error::invalid(
            location,
            "every chunk would be removed; an index cannot be empty",
        ));
    }
    Ok((new_chunks, keep))
}

/// The chunks after an update: the kept `old` ones renumbered from 0, then the new ones.
pub(crate) struct Renumbered {
    pub(crate) chunks: Vec<Chunk>,
    /// Old ids of the kept chunks, in their new order.
    pub(crate) kept: Vec<ChunkId>,
    /// New id of each old chunk (`usize::MAX` when it was removed).
    pub(crate) new_id: Vec<usize>,
    /// Id of the first new chunk.
    pub(crate) first_new: usize,
}

/// Renumber an update's chunks: `old` filtered by `keep` (from [`update_chunks`]), then
/// `new`, ids in order.
pub(crate) fn renumber(old: &[Chunk], keep: &[bool], new: Vec<Chunk>) -> Renumbered {
    let kept: Vec<ChunkId> = (0..keep.len()).filter(|&i| keep[i]).collect();
    let mut new_id = vec![usize::MAX; old.len()];
    let mut chunks: Vec<Chunk> = Vec::with_capacity(kept.len() + new.len());
    for &i in &kept {
        new_id[i] = chunks.len();
        chunks.push(Chunk {
            id: chunks.len(),
            ..old[i].clone()
        });
    }
    let first_new = chunks.len();
    for c in new {
        chunks.push(Chunk {
            id: chunks.len(),
            ..c
        });
    }
    Renumbered {
        chunks,
        kept,
        new_id,
        first_new,
    }
}

/// The rows `kept` of `old`, then `encoder`'s embeddings of the `new` chunks (their width
/// checked against `old`'s; L2-normalised when `normalize`, for an index that normalised
/// its rows at build — the kept rows are left as they are, bit for bit).
pub(crate) async fn extend_embeddings(
    old: &Embeddings,
    kept: &[usize],
    encoder: &dyn Encoder,
    new: &[Chunk],
    normalize: bool,
) -> Result<Embeddings> {
    let dim = old.dim();
    let mut rows = old.select(kept).into_vec();
    if !new.is_empty() {
        let texts: Vec<String> = new.iter().map(Chunk::embedding_text).collect();
        let mut e = embed_all(encoder, &texts, "embed chunks", &NoProgress).await?;
        if normalize {
            e.normalize();
        }
        if e.dim() != dim {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' chunk embeddings", encoder.name()),
                expected: dim,
                actual: e.dim(),
            });
        }
        rows.extend_from_slice(e.as_slice());
    }
    Embeddings::new(dim, rows)
}

/// Times an update's stages into its report.
pub(crate) struct Laps(std::time::Instant);

impl Laps {
    /// Record the time since the last lap as `stage`.
    pub(crate) fn lap(&mut self, report: &mut crate::UpdateReport, stage: &str) {
        report
            .seconds
            .push((stage.to_string(), self.0.elapsed().as_secs_f64()));
        self.0 = std::time::Instant::now();
    }
}

/// The first stage (`chunk`) of a peer's update: [`update_chunks`], then [`renumber`],
/// with the report's counts filled in and the stage timed.
pub(crate) async fn begin_update(
    old: &[Chunk],
    (remove, add): (&[String], &[Document]),
    chunker: &dyn Chunker,
    encoder: &Arc<dyn Encoder>,
    location: &str,
) -> Result<(Renumbered, crate::UpdateReport, Laps)> {
    let mut laps = Laps(std::time::Instant::now());
    let mut report = crate::UpdateReport::default();
    let (new_chunks, keep) = update_chunks(
        old,
        (remove, add),
        chunker,
        encoder,
        &mut report.warnings,
        location,
    )
    .await?;
    let r = renumber(old, &keep, new_chunks);
    report.added_documents = add.len();
    report.added_chunks = r.chunks.len() - r.first_new;
    report.removed_documents = remove.len();
    report.removed_chunks = old.len() - r.kept.len();
    laps.lap(&mut report, "chunk");
    Ok((r, report, laps))
}
