//! The built-in predictor's cached chunk representations saved with an index
//! (`representations.bin`, rows as a feature-rows file) and read back — to the heap, or
//! memory-mapped for a process that only answers — instead of a pass over the chunk graph
//! at opening. `representations.json` binds the rows to the `graph.bin` and the predictor
//! weights they were computed from, by checksum; rows that do not match are refused.

use std::path::Path;

use lprag_core::{Embeddings, Error, LinkGraph, LinkPredictor, Result};
use lprag_model::GnnLinkPredictor;
use serde::{Deserialize, Serialize};

use super::{GRAPH, PREDICTOR_DIR, REPRESENTATIONS, REPRESENTATIONS_META};
use crate::retrievers::common::check_version;

/// Version of `representations.json`.
const FORMAT_VERSION: u32 = 1;

/// Rows copied per block while saving (16,384 rows of the default 256-wide layer: 16 MB).
const SAVE_BLOCK: usize = 1 << 14;

/// What `representations.json` records.
#[derive(Debug, Serialize, Deserialize)]
struct Binding {
    format_version: u32,
    /// Chunks (rows) and the width of a row (every layer's output side by side).
    rows: usize,
    width: usize,
    /// `graph.bin`'s header checksum ([`lprag_graph::link_graph_checksum`]).
    graph: u64,
    /// [`GnnLinkPredictor::weights_checksum`] of the saved predictor.
    weights: u64,
    /// `representations.bin`'s own header checksum.
    file: u64,
}

/// Write `predictor`'s cached representations into the index being saved in `dir`
/// (after its `graph.bin` and predictor directory), a block of rows at a time. Nothing is
/// written for a predictor without them.
pub(super) fn save(predictor: &dyn LinkPredictor, chunks: usize, dir: &Path) -> Result<()> {
    let Some(width) = predictor.stored_representation_dim() else {
        return Ok(());
    };
    let path = dir.join(REPRESENTATIONS);
    let mut writer = lprag_graph::FeatureRowsWriter::create(&path, width)?;
    let mut start = 0;
    while start < chunks {
        let end = (start + SAVE_BLOCK).min(chunks);
        let rows = predictor.stored_representations(start..end)?;
        writer.append(rows.as_slice())?;
        start = end;
    }
    writer.finish()?;
    let binding = Binding {
        format_version: FORMAT_VERSION,
        rows: chunks,
        width,
        graph: lprag_graph::link_graph_checksum(dir.join(GRAPH))?,
        weights: GnnLinkPredictor::weights_checksum(&dir.join(PREDICTOR_DIR))?,
        file: lprag_graph::link_graph_checksum(&path)?,
    };
    let meta = dir.join(REPRESENTATIONS_META);
    let bytes = serde_json::to_vec(&binding).map_err(|e| Error::format(&meta, e.to_string()))?;
    std::fs::write(&meta, bytes).map_err(|e| Error::io(&meta, e))
}

/// The representations saved in the index in `dir` for `graph` (the index's graph, read
/// from its `graph.bin`), memory-mapped with `map`; `None` when the index has none (saved
/// by an earlier release: they are computed at opening).
///
/// # Errors
/// [`Error::Format`] naming the file when one of the two files is missing, the binding
/// is unreadable or of another version, or the rows are not those of this graph and
/// these weights (checksums), not one per chunk, or damaged; [`Error::Io`] when a file
/// cannot be read.
pub(super) fn read(dir: &Path, graph: &LinkGraph, map: bool) -> Result<Option<Embeddings>> {
    let path = dir.join(REPRESENTATIONS);
    let meta = dir.join(REPRESENTATIONS_META);
    match (path.exists(), meta.exists()) {
        (false, false) => return Ok(None),
        (true, false) => {
            return Err(Error::format(
                &path,
                format!("saved without its binding {REPRESENTATIONS_META}"),
            ))
        }
        (false, true) => {
            return Err(Error::format(
                &meta,
                format!("binds {REPRESENTATIONS}, which is missing"),
            ))
        }
        (true, true) => {}
    }
    let bytes = std::fs::read(&meta).map_err(|e| Error::io(&meta, e))?;
    check_version(&meta, &bytes, "format_version", FORMAT_VERSION)?;
    let binding: Binding =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(&meta, e.to_string()))?;
    let refuse = |why: String| Err(Error::format(&path, why));
    if binding.rows != graph.num_chunks {
        return refuse(format!(
            "{} rows recorded for {} chunks",
            binding.rows, graph.num_chunks
        ));
    }
    if binding.graph != lprag_graph::link_graph_checksum(dir.join(GRAPH))? {
        return refuse(format!("computed on another {GRAPH} than this index's"));
    }
    if binding.weights != GnnLinkPredictor::weights_checksum(&dir.join(PREDICTOR_DIR))? {
        return refuse("computed with other predictor weights than this index's".into());
    }
    if binding.file != lprag_graph::link_graph_checksum(&path)? {
        return refuse(format!("not the file {REPRESENTATIONS_META} records"));
    }
    let rows = if map {
        lprag_graph::map_feature_rows(&path, binding.width)?
    } else {
        let rows = lprag_graph::load_link_graph(&path)?.features;
        if rows.dim() != binding.width {
            return refuse(format!(
                "rows are {} wide, {} recorded",
                rows.dim(),
                binding.width
            ));
        }
        rows
    };
    if rows.rows() != binding.rows {
        return refuse(format!("{} rows, {} recorded", rows.rows(), binding.rows));
    }
    Ok(Some(rows))
}
