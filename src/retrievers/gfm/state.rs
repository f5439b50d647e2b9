//! The saved state of a GFM-RAG index: `gfm.json` and the GNN weights file it names,
//! written as a pair (the weights first, under a fresh name; the JSON's atomic
//! replacement commits them), and read back onto a device.

use std::path::Path;
use std::sync::Arc;

use lprag_core::{Chunk, Embeddings, Error, Result};
use lprag_model::gfm::{GfmModel, KgEdges};
use lprag_model::ComputeDevice;
use serde::{Deserialize, Serialize};

use super::{EntityIndex, GfmConfig, GfmRag, GfmStats};
use crate::retrievers::common::save_json_atomic;

/// Version of the files written by [`GfmRag::save`](super::GfmRag::save).
pub const GFM_FORMAT_VERSION: u32 = 1;
pub(super) const GFM_FILE: &str = "gfm.json";
/// Where a save may write (its file and nothing else of the directory).
pub(super) const GFM_DIR: lprag_core::dirs::DirSpec =
    crate::durable::peer_index("a GFM-RAG index", GFM_FILE);
const GFM_WEIGHTS: &str = "gfm.bpk";

/// What a GFM-RAG index saves, and the state of a [`super::GfmRag`].
#[derive(Serialize, Deserialize)]
pub struct GfmState {
    /// The weights file of this index (written first under a fresh name, so replacing
    /// `gfm.json` commits the pair); indexes saved before name none and use `gfm.bpk`.
    #[serde(default, skip_serializing)]
    pub(crate) weights_file: Option<String>,
    pub(crate) version: u32,
    pub(crate) encoder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) encoder_fingerprint: Option<String>,
    pub(crate) config: GfmConfig,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) chunk_emb: Embeddings,
    pub(crate) entities: Vec<String>,
    pub(crate) entity_emb: Embeddings,
    pub(crate) mentions: Vec<Vec<u32>>,
    pub(crate) relations: Vec<String>,
    pub(crate) relation_emb: Embeddings,
    pub(crate) edges: KgEdges,
    /// What the extractor found in each chunk, by chunk id: an update rebuilds the
    /// knowledge graph from these and the new chunks' (indexes saved before they were
    /// kept have none and cannot be updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) extractions: Option<Vec<lprag_core::Extraction>>,
    pub(crate) stats: GfmStats,
}

impl crate::retrievers::common::FloatFields for GfmState {
    fn float_fields(&self) -> Vec<(String, &[f32])> {
        vec![
            ("chunk_emb".into(), self.chunk_emb.as_slice()),
            ("entity_emb".into(), self.entity_emb.as_slice()),
            ("relation_emb".into(), self.relation_emb.as_slice()),
        ]
    }
}

impl crate::retrievers::common::SavedState for GfmState {
    crate::retrievers::common::saved_state_header!(GFM_FORMAT_VERSION, chunk_emb);

    fn check(&self) -> std::result::Result<(), String> {
        if self
            .extractions
            .as_ref()
            .is_some_and(|x| x.len() != self.chunks.len())
        {
            return Err("extractions and chunks differ in number".into());
        }
        let n = self.entities.len();
        if self.chunk_emb.rows() != self.chunks.len()
            || self.entity_emb.rows() != n
            || self.mentions.len() != n
            || self.edges.num_entities() != n
            || self.relation_emb.rows() != self.relations.len()
            || self
                .mentions
                .iter()
                .flatten()
                .any(|&c| c as usize >= self.chunks.len())
        {
            return Err("inconsistent sizes".into());
        }
        Ok(())
    }
}

/// Write the GNN weights under a fresh name, then `gfm.json` naming them (the lock is
/// held and the floats checked); weights no index names any more are removed.
pub(super) fn save_files(peer: &GfmRag, dir: &Path) -> Result<()> {
    let st = &*peer.state;
    // The weights go first, under a name no other save uses; `gfm.json` names them
    // and its atomic replacement commits the pair: a crash leaves the old pair or the
    // new one, never new JSON with old weights.
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let nonce = lprag_graph::fnv1a64(
        format!(
            "{:?}{}{:p}",
            std::time::SystemTime::now(),
            std::process::id(),
            peer
        )
        .as_bytes(),
    );
    let weights = format!("gfm-{nonce:016x}.bpk");
    peer.runtime.model.save_weights(&dir.join(&weights))?;
    #[derive(Serialize)]
    struct Saved<'a> {
        weights_file: &'a str,
        #[serde(flatten)]
        state: &'a GfmState,
    }
    save_json_atomic(
        dir,
        GFM_FILE,
        &Saved {
            weights_file: &weights,
            state: st,
        },
    )?;
    // Weights no index names any more (best effort: a reader of the old pair may
    // still hold them open, which is fine on Unix).
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".fnv1a64").unwrap_or(&name);
            let generated = stem
                .strip_prefix("gfm-")
                .and_then(|r| r.strip_suffix(".bpk"))
                .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            if (generated || stem == GFM_WEIGHTS) && stem != weights {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// The entity index and the GNN of the loaded `state`, its weights read from `dir` onto
/// `device`.
pub(super) fn open(state: &GfmState, dir: &Path, device: ComputeDevice) -> Result<GfmRuntime> {
    let device = &device.to_burn()?;
    let path = dir.join(GFM_FILE);
    let weights = state.weights_file.as_deref().unwrap_or(GFM_WEIGHTS);
    let plain = !weights.is_empty()
        && weights.ends_with(".bpk")
        && !weights.contains(['/', '\\'])
        && !weights.starts_with('.');
    if !plain {
        return Err(Error::format(
            &path,
            format!("weights_file `{weights}` is not a weights file name in the index"),
        ));
    }
    state
        .config
        .model
        .check_weights_file(state.relation_emb.dim(), &dir.join(weights))?;
    let mut model = GfmModel::new(
        state.edges.clone(),
        state.relation_emb.clone(),
        state.config.model.clone(),
        state.config.seed,
        device,
    )?;
    model.load_weights(&dir.join(weights))?;
    let index = EntityIndex::from_names(state.entities.clone(), state.entity_emb.clone());
    Ok(GfmRuntime {
        index: Arc::new(index),
        model: Arc::new(model),
    })
}

/// What a [`super::GfmRag`] rebuilds at load: the entity index and the GNN with its weights.
#[derive(Clone)]
pub struct GfmRuntime {
    pub(crate) index: Arc<EntityIndex>,
    pub(crate) model: Arc<GfmModel>,
}
