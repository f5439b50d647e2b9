//! What the five retrievers share: the default encoder, the start of every build (chunk,
//! fit chunks to the encoder, choose the encoder), checked embedding in batches, labelled
//! questions, dense padding of short result lists, and atomic JSON persistence with
//! version, encoder and finiteness checks.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use lprag_core::{
    Chunk, ChunkId, Chunker, Document, Embeddings, Encoder, Error, NoProgress, Progress, Result,
    ScoredChunk, Selection, SyntheticQuery,
};
use lprag_model::bert::SentenceEncoder;
use lprag_text::{HashingEncoder, HashingEncoderConfig};
use serde::{Deserialize, Serialize};

pub(crate) use crate::cpu::blocking;

/// Texts embedded per encoder call while indexing (progress is reported per batch).
const EMBED_BATCH: usize = 256;

/// The encoder [`LpRag`] chose by itself when none was given, recorded in the index so
/// [`LpRag::open`] can rebuild it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefaultEncoder {
    /// A sentence-transformers model (all-MiniLM-L6-v2 unless `LPRAG_MODEL_DIR` points
    /// elsewhere), found by [`lprag_model::bert::resolve_model_dir`].
    SentenceTransformer {
        /// The Hugging Face model id (for example `sentence-transformers/all-MiniLM-L6-v2`),
        /// resolved again on the machine that opens the index (its Hugging Face cache, or
        /// `LPRAG_MODEL_DIR`). Indexes saved before this release hold the directory here;
        /// it is used when it exists, else the id and revision are read from its
        /// `models--org--name/snapshots/REV` path.
        model: String,
        /// The snapshot (commit) of the model in the Hugging Face cache that built the
        /// index, when it came from there; opening with another snapshot logs a warning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<String>,
    },
    /// The offline [`HashingEncoder`] with inverse document frequencies fitted on the
    /// chunks' embedding texts (refitted on load: fitting is deterministic).
    FittedHashing {
        /// Its feature configuration.
        config: HashingEncoderConfig,
    },
}

impl DefaultEncoder {
    /// Choose the default encoder for a corpus whose chunk embedding texts are
    /// `chunk_texts`: the sentence-transformers model when it can be found locally,
    /// otherwise the fitted [`HashingEncoder`]. The second value is the warning to show
    /// when the fallback was taken.
    pub fn choose(chunk_texts: &[String]) -> Result<(Self, Arc<dyn Encoder>, Option<String>)> {
        match SentenceEncoder::load(None) {
            Ok(enc) => {
                let spec = DefaultEncoder::SentenceTransformer {
                    model: enc.name().to_string(),
                    revision: hub_snapshot(enc.model_dir()).map(|(_, rev)| rev),
                };
                Ok((spec, Arc::new(enc), None))
            }
            Err(e) => {
                let config = HashingEncoderConfig::default();
                let enc = HashingEncoder::fitted(config.clone(), chunk_texts)?;
                let warning = format!(
                    "no sentence-transformers model found ({e}); using the offline \
                     HashingEncoder, which retrieves markedly worse. Run \
                     scripts/fetch-model.sh or set LPRAG_MODEL_DIR to use all-MiniLM-L6-v2."
                );
                Ok((
                    DefaultEncoder::FittedHashing { config },
                    Arc::new(enc),
                    Some(warning),
                ))
            }
        }
    }

    /// Rebuild this encoder for an index whose chunk embedding texts are `chunk_texts`.
    pub fn rebuild(&self, chunk_texts: &[String]) -> Result<Arc<dyn Encoder>> {
        Ok(match self {
            DefaultEncoder::SentenceTransformer { model, revision } => {
                let path = Path::new(model);
                if path.is_dir() {
                    return Ok(Arc::new(SentenceEncoder::load(Some(model))?));
                }
                // An id, or the cache path of an index saved on another machine.
                let (id, revision) = match hub_snapshot(path) {
                    Some((id, rev)) => (id, Some(rev)),
                    None => (model.clone(), revision.clone()),
                };
                let enc = SentenceEncoder::load(Some(&id))?;
                let found = hub_snapshot(enc.model_dir()).map(|(_, rev)| rev);
                if let (Some(want), Some(have)) = (&revision, &found) {
                    if want != have {
                        tracing::warn!(
                            target: "lprag",
                            model = %id,
                            built_with = %want,
                            found = %have,
                            "the index was built with another snapshot of its encoder"
                        );
                    }
                }
                Arc::new(enc)
            }
            DefaultEncoder::FittedHashing { config } => {
                Arc::new(HashingEncoder::fitted(config.clone(), chunk_texts)?)
            }
        })
    }
}

/// `(model id, revision)` of a Hugging Face cache snapshot directory
/// (`…/models--org--name/snapshots/REV`), or `None` for any other path.
fn hub_snapshot(dir: &Path) -> Option<(String, String)> {
    let rev = dir.file_name()?.to_str()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    let repo = snapshots.parent()?.file_name()?.to_str()?;
    let id = repo.strip_prefix("models--")?.replacen("--", "/", 1);
    (!id.is_empty() && !rev.is_empty()).then(|| (id, rev.to_string()))
}

pub(crate) async fn embed_all(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
) -> Result<Embeddings> {
    embed_matrix(encoder, texts, stage, progress, false).await
}

/// [`embed_all`] for query texts ([`Encoder::embed_queries`]).
pub(crate) async fn embed_all_queries(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
) -> Result<Embeddings> {
    embed_matrix(encoder, texts, stage, progress, true).await
}

async fn embed_matrix(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    queries: bool,
) -> Result<Embeddings> {
    let mut out = Vec::with_capacity(texts.len() * encoder.dimension());
    embed_rows(encoder, texts, stage, progress, &mut out, queries).await?;
    Embeddings::new(encoder.dimension(), out)
}

/// The encoder's embedding of a user query ([`Encoder::embed_queries`]), checked: one
/// row, the encoder's width, finite values (a faulty custom encoder is a typed error, not
/// a garbage ranking).
pub(crate) async fn embed_query(encoder: &dyn Encoder, query: &str) -> Result<Vec<f32>> {
    let mut rows = embed_queries(encoder, &[query.to_string()]).await?;
    rows.pop().ok_or_else(|| Error::DimensionMismatch {
        location: format!("encoder '{}' query embedding", encoder.name()),
        expected: 1,
        actual: 0,
    })
}

/// Embed user queries in encoder batches, one checked vector each.
pub(crate) async fn embed_queries(
    encoder: &dyn Encoder,
    queries: &[String],
) -> Result<Vec<Vec<f32>>> {
    let d = encoder.dimension();
    let mut flat = Vec::with_capacity(queries.len() * d);
    embed_queries_into(encoder, queries, "query embedding", &NoProgress, &mut flat).await?;
    Ok(flat.chunks_exact(d.max(1)).map(<[f32]>::to_vec).collect())
}

/// Query texts ([`Encoder::embed_queries`]) embedded and appended to `out` (row-major, the
/// encoder's width).
pub(crate) async fn embed_queries_into(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    out: &mut Vec<f32>,
) -> Result<()> {
    embed_rows(encoder, texts, stage, progress, out, true).await
}

/// Embed in batches of [`EMBED_BATCH`], checking every batch's shape and values.
async fn embed_rows(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    out: &mut Vec<f32>,
    queries: bool,
) -> Result<()> {
    progress.start(stage, Some(texts.len() as u64));
    for (i, batch) in texts.chunks(EMBED_BATCH).enumerate() {
        let e = if queries {
            encoder.embed_queries(batch).await?
        } else {
            encoder.embed(batch).await?
        };
        if e.rows() != batch.len() {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' output rows", encoder.name()),
                expected: batch.len(),
                actual: e.rows(),
            });
        }
        if e.dim() != encoder.dimension() {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' output width", encoder.name()),
                expected: encoder.dimension(),
                actual: e.dim(),
            });
        }
        if let Some(bad) = e.as_slice().iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(
                format!("encoder '{}' output", encoder.name()),
                format!(
                    "a non-finite value in the embedding of text {} (stage {stage})",
                    i * EMBED_BATCH + bad / e.dim().max(1)
                ),
            ));
        }
        out.extend_from_slice(e.as_slice());
        progress.update(stage, (i * EMBED_BATCH + batch.len()) as u64, "");
    }
    progress.finish(stage);
    Ok(())
}

/// Refuse to save `values` (the field `field` of `dir/file`) when one is NaN or infinite:
/// JSON would store it as `null` and the index could never be read again.
pub(crate) fn check_finite(dir: &Path, file: &str, field: &str, values: &[f32]) -> Result<()> {
    match values.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(
            format!("{} ({field})", dir.join(file).display()),
            format!(
                "value {i} is {}; JSON cannot store it, so the index would not load again \
                 (not saved)",
                values[i]
            ),
        )),
    }
}

/// The float arrays of a saved JSON index: checked finite before saving (JSON would
/// store NaN as `null`) and after loading (a number beyond `f32`'s range, such as `1e39`
/// in a hand-edited file, parses as infinity and would turn scores into NaN).
pub(crate) trait FloatFields {
    /// Each float array with its field name.
    fn float_fields(&self) -> Vec<(String, &[f32])>;
}

/// [`check_finite`] on every [`FloatFields`] array of `state` (before saving it).
pub(crate) fn check_all_finite(dir: &Path, file: &str, state: &impl FloatFields) -> Result<()> {
    for (field, values) in state.float_fields() {
        check_finite(dir, file, &field, values)?;
    }
    Ok(())
}

/// Write `value` as JSON to `dir/file` atomically and durably (a unique temporary file,
/// synced, then renamed; the directory synced).
pub(crate) fn save_json_atomic<T: serde::Serialize>(
    dir: &Path,
    file: &str,
    value: &T,
) -> Result<()> {
    let path = dir.join(file);
    let bytes = serde_json::to_vec(value).map_err(|e| Error::format(&path, e.to_string()))?;
    crate::durable::write_file(&path, &bytes)
}

/// The state a peer retriever saves as JSON: its format version, the encoder it was built
/// with, and the consistency checks a loaded file must pass.
pub(crate) trait SavedState: serde::de::DeserializeOwned + FloatFields {
    /// The format version this build writes and reads.
    const VERSION: u32;
    /// The version the file says it has.
    fn version(&self) -> u32;
    /// The encoder the index was built with: name, embedding width, fingerprint.
    fn encoder_record(&self) -> (&str, usize, Option<&str>);
    /// Sizes, ids and configuration consistent with each other; the message says what is
    /// not.
    fn check(&self) -> std::result::Result<(), String>;
}

/// The [`SavedState`] items every peer's state writes the same way: `VERSION` and the
/// `version`, `encoder`, `encoder_fingerprint` fields, with the embedding width read from
/// the matrix field `$emb`.
macro_rules! saved_state_header {
    ($version:expr, $emb:ident) => {
        const VERSION: u32 = $version;

        fn version(&self) -> u32 {
            self.version
        }

        fn encoder_record(&self) -> (&str, usize, Option<&str>) {
            (
                self.encoder.as_str(),
                self.$emb.dim(),
                self.encoder_fingerprint.as_deref(),
            )
        }
    };
}
pub(crate) use saved_state_header;

/// Read a JSON index file written by [`save_json_atomic`] and check its format version,
/// its floats, the encoder it was built with (name, dimension, fingerprint) against
/// `encoder`, and [`SavedState::check`]. Every failure names `path`.
pub(crate) fn load_json_index<T: SavedState>(path: &Path, encoder: &dyn Encoder) -> Result<T> {
    let expected = T::VERSION;
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    // The version first, so that a file of another version says so instead of failing on
    // a field this build does not know.
    check_version(path, &bytes, "version", expected)?;
    let state: T =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))?;
    for (field, values) in state.float_fields() {
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            return Err(Error::format(
                path,
                format!(
                    "field `{field}`: value {i} is {} (a number outside f32's range?)",
                    values[i]
                ),
            ));
        }
    }
    let version = state.version();
    if version != expected {
        return Err(Error::format(
            path,
            format!("format version {version} (this build reads {expected})"),
        ));
    }
    let (name, dim, fingerprint) = state.encoder_record();
    if name != encoder.name() || dim != encoder.dimension() {
        return Err(Error::invalid(
            path.display().to_string(),
            format!(
                "index built with encoder `{name}` ({dim}-d), given `{}` ({}-d)",
                encoder.name(),
                encoder.dimension()
            ),
        ));
    }
    check_fingerprint(&path.display().to_string(), fingerprint, encoder)?;
    state.check().map_err(|m| Error::format(path, m))?;
    Ok(state)
}

/// The embedding of a user query for an index of `dim`-wide embeddings: a query longer
/// than `max_bytes` ([`lprag_core::check_query_len`]) or empty or blank is refused, the
/// rest is trimmed, embedded and checked ([`embed_query`]).
pub(crate) async fn embed_user_query(
    encoder: &dyn Encoder,
    query: &str,
    dim: usize,
    max_bytes: usize,
) -> Result<Vec<f32>> {
    lprag_core::check_query_len(query, max_bytes)?;
    if query.trim().is_empty() {
        return Err(Error::invalid("query", "empty or whitespace"));
    }
    let q = embed_query(encoder, query.trim()).await?;
    if q.len() != dim {
        return Err(Error::DimensionMismatch {
            location: format!("encoder '{}' query vector", encoder.name()),
            expected: dim,
            actual: q.len(),
        });
    }
    Ok(q)
}

/// Refuse `encoder` when the index recorded a fingerprint (see [`Encoder::fingerprint`])
/// and the encoder reports another: same name and width, other weights or tables.
pub(crate) fn check_fingerprint(
    location: &str,
    saved: Option<&str>,
    encoder: &dyn Encoder,
) -> Result<()> {
    match (saved, encoder.fingerprint()) {
        (Some(saved), Some(now)) if saved != now => Err(Error::invalid(
            location,
            format!(
                "the index was built with another `{}` encoder (fingerprint {saved}, given {now}): same name and width, different weights or fitted tables; pass the encoder it was built with (an index built with the default encoder reopens with LpRag::open, which rebuilds it)",
                encoder.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// Labelled `(question, gold document ids)` pairs as query nodes linked to every chunk of
/// their gold documents; an unknown id is [`Error::InvalidInput`] naming `labelled[k]`.
pub(crate) fn labelled_queries(
    chunks: &[Chunk],
    pairs: &[(String, Vec<String>)],
) -> Result<Vec<SyntheticQuery>> {
    let mut doc_chunks: std::collections::HashMap<&str, Vec<ChunkId>> = Default::default();
    for (c, ch) in chunks.iter().enumerate() {
        doc_chunks
            .entry(ch.provenance.document_id.as_str())
            .or_default()
            .push(c);
    }
    pairs
        .iter()
        .enumerate()
        .map(|(k, (question, docs))| {
            if question.trim().is_empty() {
                return Err(Error::invalid(format!("labelled[{k}]"), "empty question"));
            }
            let mut chunk_ids = Vec::new();
            for id in docs {
                let cs = doc_chunks.get(id.as_str()).ok_or_else(|| {
                    Error::invalid(
                        format!("labelled[{k}]"),
                        format!("unknown document id {id:?}"),
                    )
                })?;
                chunk_ids.extend_from_slice(cs);
            }
            if chunk_ids.is_empty() {
                return Err(Error::invalid(format!("labelled[{k}]"), "no gold document"));
            }
            Ok(SyntheticQuery {
                text: question.trim().to_string(),
                chunk_ids,
                answer: None,
            })
        })
        .collect()
}

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
        let (c, note) = fit_to_encoder(c, add, encoder, chunker.name()).await?;
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

/// The start every peer retriever's build shares: chunk `documents` (an empty result is
/// [`Error::EmptyCorpus`]), take their embedding texts, and use `encoder` or, without one,
/// [`DefaultEncoder::choose`] (its fallback warning goes to `progress`).
pub(crate) async fn chunk_and_encoder(
    chunker: &dyn Chunker,
    documents: &[Document],
    encoder: Option<Arc<dyn Encoder>>,
    progress: &dyn Progress,
) -> Result<(Vec<Chunk>, Vec<String>, Arc<dyn Encoder>)> {
    let mut chunks = chunker.chunk(documents).await?;
    Chunk::inherit_metadata(&mut chunks, documents);
    Chunk::stamp_document_hashes(&mut chunks, documents);
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus("no document produced a chunk".into()));
    }
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let encoder = match encoder {
        Some(e) => e,
        None => {
            let t = texts.clone();
            let (_, enc, warning) = blocking(move || DefaultEncoder::choose(&t)).await?;
            if let Some(w) = warning {
                progress.warn(&w);
            }
            enc
        }
    };
    let n = chunks.len();
    let (chunks, warning) = fit_to_encoder(chunks, documents, &encoder, chunker.name()).await?;
    if let Some(w) = warning {
        progress.warn(&w);
    }
    let texts = if chunks.len() == n {
        texts
    } else {
        chunks.iter().map(Chunk::embedding_text).collect()
    };
    Ok((chunks, texts, encoder))
}

/// Make `chunks` fit the encoder's input: the default [`BoundedPassageChunker`]'s (by
/// name) are split where too long, any other chunker's are only counted, with a warning.
///
/// [`BoundedPassageChunker`]: crate::BoundedPassageChunker
pub(crate) async fn fit_to_encoder(
    chunks: Vec<Chunk>,
    documents: &[Document],
    encoder: &Arc<dyn Encoder>,
    chunker: &str,
) -> Result<(Vec<Chunk>, Option<String>)> {
    if encoder.max_input_tokens().is_none() {
        return Ok((chunks, None));
    }
    let encoder = encoder.clone();
    if chunker == lprag_text::BOUNDED_PASSAGES {
        let docs = documents.to_vec();
        blocking(move || {
            let n = chunks.len();
            let (chunks, split) = lprag_text::split_to_fit(chunks, &docs, &*encoder);
            let note = (split > 0).then(|| {
                format!(
                    "{split} of {n} passages were longer than the encoder '{}' takes ({} \
                     tokens) and were split into {} chunks that fit",
                    encoder.name(),
                    encoder.max_input_tokens().unwrap_or(0),
                    chunks.len() - (n - split)
                )
            });
            Ok((chunks, note))
        })
        .await
    } else {
        blocking(move || {
            let warning = lprag_text::truncation_warning(&chunks, &*encoder);
            Ok((chunks, warning))
        })
        .await
    }
}

/// Check the `field` (a format version) of the JSON object in `bytes` against `expected`
/// without parsing the rest into its types. A missing field passes (the full parse
/// reports it).
pub(crate) fn check_version(path: &Path, bytes: &[u8], field: &str, expected: u32) -> Result<()> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Head<'a>(&'a str);
    impl<'de> Visitor<'de> for Head<'_> {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == self.0 {
                    found = Some(map.next_value::<u64>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = de
        .deserialize_map(Head(field))
        .map_err(|e| Error::format(path, e.to_string()))?;
    match found {
        Some(v) if v != expected as u64 => Err(Error::format(
            path,
            format!("format version {v} (this build reads {expected})"),
        )),
        _ => Ok(()),
    }
}

/// Labelled training questions: `(question, gold document ids)` pairs, as the builders of
/// [`crate::LpRag`], [`crate::LesegrRag`] and [`crate::GfmRag`] take them.
pub type Labelled = Vec<(String, Vec<String>)>;

/// The chunks to append to a result list of `have` chunks (whose last score is `last`) to
/// reach `k`: the others by descending `score` (ties to the lower id), each as `(chunk,
/// score, capped score)` with the capped score never above the one before it, so the list
/// stays sorted.
pub(crate) fn dense_padding(
    have: &HashSet<ChunkId>,
    last: Option<f32>,
    scores: impl Iterator<Item = (ChunkId, f32)>,
    k: usize,
) -> Vec<(ChunkId, f32, f32)> {
    let mut dense: Vec<(ChunkId, f32)> = scores.filter(|(c, _)| !have.contains(c)).collect();
    dense.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut cap = last.unwrap_or(f32::INFINITY);
    dense
        .into_iter()
        .take(k.saturating_sub(have.len()))
        .map(|(c, s)| {
            cap = cap.min(s);
            (c, s, cap)
        })
        .collect()
}

/// Fill `out` up to `k` chunks with the chunks not in it, by cosine to `query`; the added
/// scores are capped by the last score already in `out`, so the list stays sorted.
pub(crate) fn pad_with_dense(
    out: &mut Vec<(ChunkId, f32)>,
    chunk_emb: &Embeddings,
    query: &[f32],
    k: usize,
) {
    let have: HashSet<ChunkId> = out.iter().map(|&(c, _)| c).collect();
    let cosines = chunk_emb
        .iter()
        .enumerate()
        .map(|(c, row)| (c, lprag_core::cosine(query, row)));
    let last = out.last().map(|&(_, s)| s);
    out.extend(
        dense_padding(&have, last, cosines, k)
            .into_iter()
            .map(|(c, _, capped)| (c, capped)),
    );
}

/// The inputs every builder takes the same way: chunker, encoder and progress, each
/// `None` until set (then the defaults of [`BuildInputs::chunker`] and
/// [`chunk_and_encoder`] apply).
#[derive(Clone, Default)]
pub(crate) struct BuildInputs {
    pub(crate) chunker: Option<Arc<dyn Chunker>>,
    pub(crate) encoder: Option<Arc<dyn Encoder>>,
    pub(crate) progress: Option<Arc<dyn Progress>>,
}

impl BuildInputs {
    /// The chunker set, or the default [`lprag_text::BoundedPassageChunker`].
    pub(crate) fn chunker(&self) -> Arc<dyn Chunker> {
        self.chunker
            .clone()
            .unwrap_or_else(|| Arc::new(lprag_text::BoundedPassageChunker))
    }

    /// The progress receiver set, or none.
    pub(crate) fn progress(&self) -> Arc<dyn Progress> {
        self.progress
            .clone()
            .unwrap_or_else(|| Arc::new(NoProgress))
    }

    /// The start of every peer's build: [`chunk_and_encoder`] with these inputs, then the
    /// chunks embedded (checked per batch, see [`embed_all`]) under the stage "embed
    /// chunks". Validate the configuration before calling it: nothing is paid for yet.
    pub(crate) async fn start(&self, documents: &[Document]) -> Result<Started> {
        let progress = self.progress();
        let at = std::time::Instant::now();
        let (chunks, texts, encoder) = chunk_and_encoder(
            &*self.chunker(),
            documents,
            self.encoder.clone(),
            &*progress,
        )
        .await?;
        let t = std::time::Instant::now();
        let chunk_emb = embed_all(&*encoder, &texts, "embed chunks", &*progress).await?;
        Ok(Started {
            embed_seconds: t.elapsed().as_secs_f64(),
            progress,
            at,
            chunks,
            texts,
            encoder,
            chunk_emb,
        })
    }
}

/// What [`BuildInputs::start`] hands a build: the chunks, their texts and embeddings, the
/// encoder chosen, the progress receiver and when the build started.
pub(crate) struct Started {
    pub(crate) progress: Arc<dyn Progress>,
    pub(crate) at: std::time::Instant,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) texts: Vec<String>,
    pub(crate) encoder: Arc<dyn Encoder>,
    /// One row per chunk, not normalised.
    pub(crate) chunk_emb: Embeddings,
    /// Seconds spent embedding the chunks.
    pub(crate) embed_seconds: f64,
}

/// The hits of a peer's ranked `(chunk, score)` list under `selection`. A `TopK` list
/// shorter than `k` is filled by dense search when `pad` holds the chunk embeddings and the
/// query's ([`pad_with_dense`]); thresholds apply to the retriever's own scores, unpadded.
pub(crate) fn select_hits(
    chunks: &[Chunk],
    ranked: Vec<(ChunkId, f32)>,
    selection: Selection,
    pad: Option<(&Embeddings, &[f32])>,
) -> Vec<ScoredChunk> {
    let picked = match (selection, pad) {
        (Selection::TopK(k), Some((chunk_emb, query))) => {
            let mut out: Vec<(ChunkId, f32)> = ranked.into_iter().take(k).collect();
            if out.len() < k {
                pad_with_dense(&mut out, chunk_emb, query, k);
            }
            out
        }
        (other, _) => other.apply(ranked, |&(_, s)| s),
    };
    picked
        .into_iter()
        .map(|(c, score)| ScoredChunk {
            chunk: chunks[c].clone(),
            score,
        })
        .collect()
}

/// The `chunker`, `encoder` and `progress` setters of a builder with a `inputs:
/// BuildInputs` field (the same three on all five builders).
macro_rules! input_setters {
    () => {
        /// Split documents with this chunker (default
        /// [`BoundedPassageChunker`](crate::BoundedPassageChunker): one chunk per document,
        /// split where it exceeds the encoder's input).
        pub fn chunker(mut self, chunker: std::sync::Arc<dyn lprag_core::Chunker>) -> Self {
            self.inputs.chunker = Some(chunker);
            self
        }

        /// Embed chunks and queries with this encoder (default:
        /// [`DefaultEncoder::choose`](crate::DefaultEncoder::choose): the sentence encoder
        /// when its weights are found, else a hashing encoder fitted on the chunks, with a
        /// warning).
        pub fn encoder(mut self, encoder: std::sync::Arc<dyn lprag_core::Encoder>) -> Self {
            self.inputs.encoder = Some(encoder);
            self
        }

        /// Receive progress reports (default: none).
        pub fn progress(mut self, progress: std::sync::Arc<dyn lprag_core::Progress>) -> Self {
            self.inputs.progress = Some(progress);
            self
        }
    };
    ($config:ty) => {
        input_setters!();

        /// Replace the configuration.
        pub fn config(mut self, config: $config) -> Self {
            self.config = config;
            self
        }
    };
}
pub(crate) use input_setters;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_snapshot_paths_give_id_and_revision() {
        let p = Path::new(
            "/root/.cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/c9745ed1",
        );
        assert_eq!(
            hub_snapshot(p),
            Some((
                "sentence-transformers/all-MiniLM-L6-v2".to_string(),
                "c9745ed1".to_string()
            ))
        );
        assert_eq!(hub_snapshot(Path::new("/models/minilm")), None);
        assert_eq!(
            hub_snapshot(Path::new("sentence-transformers/all-MiniLM-L6-v2")),
            None
        );
        // An index saved elsewhere names a path that does not exist here: the id is used.
        let spec = DefaultEncoder::SentenceTransformer {
            model: "/nowhere/models--org--name/snapshots/abc".into(),
            revision: None,
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert!(!json.contains("revision"), "{json}");
    }

    #[test]
    fn non_finite_values_are_refused_before_they_become_json_null() {
        let dir = Path::new("/idx");
        assert!(check_finite(dir, "qcg.json", "chunk_emb", &[0.5, -1.0]).is_ok());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let err = check_finite(dir, "qcg.json", "chunk_emb", &[0.5, bad])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("chunk_emb") && err.contains("value 1"),
                "{err}"
            );
        }
        // What the check prevents: serde_json writes NaN as null, which no loader reads.
        let v = serde_json::to_string(&vec![f32::NAN]).unwrap();
        assert!(serde_json::from_str::<Vec<f32>>(&v).is_err());
    }
}
