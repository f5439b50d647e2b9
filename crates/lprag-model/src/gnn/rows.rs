//! [`GnnRowScorer`]: the built-in GNN predictor scoring with the chunk rows it needs read
//! per query from a [`ChunkStore`] — the process holds the weights and the chunk graph's
//! edges, not a row per chunk.
//!
//! A query changes only the nodes near the chunks it joins (see the cached scorer), so one
//! query reads the features of those nodes' neighbours and the cached representations
//! (every layer's output, side by side: [`LinkPredictor::stored_representations`](lprag_core::LinkPredictor::stored_representations)) of the
//! candidates and of the chunks around them: a few hundred rows, fetched in two store
//! reads. The scores equal [`LinkPredictor::score_near`]'s on the same rows.

use std::collections::HashMap;
use std::path::Path;

use lprag_core::{ChunkId, ChunkStore, Embeddings, Error, LinkEdge, Result};

use super::read_meta;
use crate::cached::{CachedScorer, Join, Needed, Rows};
use crate::config::InferenceMode;
use crate::host::HostGraph;
use crate::net::LinkNet;
use crate::shared::normalize_vec;

const HERE: &str = "GnnRowScorer";

/// The built-in GNN predictor served from rows read per query (see the module docs).
///
/// Made from a predictor directory ([`GnnRowScorer::from_dir`]) and the chunk graph's
/// edges; [`GnnRowScorer::fetch`] reads one query's rows from a store written with
/// [`LinkPredictor::stored_representations`](lprag_core::LinkPredictor::stored_representations), [`GnnRowScorer::score`] ranks with them.
pub struct GnnRowScorer {
    scorer: CachedScorer,
    host: HostGraph,
    mode: InferenceMode,
    d_in: usize,
    num_chunks: usize,
}

impl std::fmt::Debug for GnnRowScorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GnnRowScorer")
            .field("chunks", &self.num_chunks)
            .field("d_in", &self.d_in)
            .field("representation_dim", &self.representation_dim())
            .field("mode", &self.mode)
            .finish()
    }
}

/// One query's rows, read from a store by [`GnnRowScorer::fetch`].
#[derive(Debug, Clone)]
pub struct FetchedRows {
    feature_at: HashMap<u32, usize>,
    features: Embeddings,
    rep_at: HashMap<u32, usize>,
    reps: Embeddings,
    /// Start and width of each layer's output in a representation row.
    layers: Vec<(usize, usize)>,
    zeros: Vec<f32>,
}

impl FetchedRows {
    /// Chunk `id`'s normalised features, when they were fetched.
    pub fn feature(&self, id: ChunkId) -> Option<&[f32]> {
        let at = *self.feature_at.get(&u32::try_from(id).ok()?)?;
        Some(self.features.row(at))
    }

    /// How many feature rows and representation rows were read.
    pub fn counts(&self) -> (usize, usize) {
        (self.features.rows(), self.reps.rows())
    }
}

impl Rows for FetchedRows {
    fn feature(&self, i: u32) -> &[f32] {
        match self.feature_at.get(&i) {
            Some(&at) => self.features.row(at),
            None => {
                debug_assert!(false, "chunk {i}'s features were not fetched");
                &self.zeros[..self.features.dim()]
            }
        }
    }

    fn rep(&self, l: usize, i: u32) -> &[f32] {
        let (start, width) = self.layers[l];
        match self.rep_at.get(&i) {
            Some(&at) => &self.reps.row(at)[start..start + width],
            None => {
                debug_assert!(false, "chunk {i}'s representation was not fetched");
                &self.zeros[..width]
            }
        }
    }
}

impl GnnRowScorer {
    /// The built-in predictor saved in `dir` ([`LinkPredictor::save`] of a
    /// [`GnnLinkPredictor`](crate::GnnLinkPredictor): its manifest and weights are read, not its chunk graph) over
    /// `num_chunks` chunks joined by `edges` (the chunk–chunk edges it was trained on;
    /// edges touching other nodes are skipped).
    ///
    /// # Errors
    /// [`GnnLinkPredictor::from_dir`](crate::GnnLinkPredictor::from_dir)'s manifest and weight errors; [`Error::InvalidInput`]
    /// for a predictor that joins each query to every chunk
    /// ([`InferenceMode::JoinAll`]: every chunk's row would be read per query).
    ///
    /// [`LinkPredictor::save`]: lprag_core::LinkPredictor::save
    pub fn from_dir(dir: &Path, num_chunks: usize, edges: &[LinkEdge]) -> Result<Self> {
        let meta = read_meta(dir)?;
        if meta.train.inference == InferenceMode::JoinAll {
            return Err(Error::invalid(
                HERE,
                "the predictor joins each query to every chunk (InferenceMode::JoinAll): it \
                 reads every chunk's row per query; serve it with its rows in memory",
            ));
        }
        let weights = dir.join(crate::link_model::WEIGHTS_FILE);
        crate::weights::check_capacity(&weights, meta.model.min_parameters(meta.d_in))?;
        let device = burn::tensor::Device::flex();
        let mut net = LinkNet::new(&meta.model, meta.d_in, &device);
        crate::weights::load_weights(&mut net, &weights)?;
        let nc = u32::try_from(num_chunks)
            .map_err(|_| Error::invalid(HERE, format!("{num_chunks} chunks overflow u32")))?;
        let host = HostGraph::from_edges(
            num_chunks,
            edges
                .iter()
                .filter(|e| e.a < nc && e.b < nc)
                .map(|e| (e.a, e.b, e.weight)),
        )?;
        let scorer = CachedScorer::unheld(
            net.to_host()?,
            meta.model.aggregation,
            &host,
            num_chunks,
            meta.d_in,
        );
        Ok(Self {
            scorer,
            host,
            mode: meta.train.inference,
            d_in: meta.d_in,
            num_chunks,
        })
    }

    /// Width of the representation rows the store must keep
    /// ([`LinkPredictor::stored_representation_dim`](lprag_core::LinkPredictor::stored_representation_dim)).
    pub fn representation_dim(&self) -> usize {
        self.scorer.stored_width()
    }

    /// Width of the features (the encoder's).
    pub fn dim(&self) -> usize {
        self.d_in
    }

    /// How many chunks the predictor was trained over.
    pub fn num_chunks(&self) -> usize {
        self.num_chunks
    }

    /// How many of the nearest chunks a query joins (0 for an isolated query node).
    pub fn join_size(&self) -> usize {
        match self.mode {
            InferenceMode::JoinTopK(k) => k.min(self.num_chunks),
            _ => 0,
        }
    }

    fn join(&self, nearest: &[ChunkId]) -> Result<Join> {
        let k = self.join_size();
        if nearest.len() < k {
            return Err(Error::invalid(
                format!("{HERE} (nearest)"),
                format!(
                    "{} nearest chunks given, the predictor joins each query to {k}",
                    nearest.len()
                ),
            ));
        }
        Ok(Join::list(nearest[..k].iter().map(|&c| c as u32).collect()))
    }

    fn check_ids(&self, what: &str, ids: &[ChunkId]) -> Result<Vec<u32>> {
        ids.iter()
            .map(|&c| {
                if c < self.num_chunks {
                    Ok(c as u32)
                } else {
                    Err(Error::invalid(
                        format!("{HERE} ({what})"),
                        format!("chunk id {c} out of range ({} chunks)", self.num_chunks),
                    ))
                }
            })
            .collect()
    }

    /// The chunks whose features and representations scoring `candidates` reads for a
    /// query whose nearest chunks (best first) are `nearest`; each candidate's features are
    /// among them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an id out of range or fewer nearest chunks than the
    /// predictor joins.
    pub fn rows_needed(
        &self,
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<(Vec<ChunkId>, Vec<ChunkId>)> {
        self.check_ids("nearest", nearest)?;
        let cands = self.check_ids("candidates", candidates)?;
        let join = self.join(nearest)?;
        let Needed { mut features, reps } = self.scorer.needed(&self.host, &join, &cands);
        features.extend(&cands);
        features.sort_unstable();
        features.dedup();
        let ids = |v: Vec<u32>| v.into_iter().map(|c| c as ChunkId).collect();
        Ok((ids(features), ids(reps)))
    }

    /// The chunks whose features [`GnnRowScorer::recompute_representations`] reads to
    /// compute `ids`' representations (their neighbourhoods, as deep as the model).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an id out of range.
    pub fn representation_rows_needed(&self, ids: &[ChunkId]) -> Result<Vec<ChunkId>> {
        let ids = self.check_ids("representations", ids)?;
        Ok(self
            .scorer
            .recompute_needs(&self.host, &ids)
            .into_iter()
            .map(|c| c as ChunkId)
            .collect())
    }

    /// The representations of `ids` (as a store keeps them) computed from `features`, the
    /// store's vectors of `feature_ids` ([`GnnRowScorer::representation_rows_needed`]): a
    /// check that a store's representations are this model's.
    ///
    /// # Errors
    /// As [`GnnRowScorer::rows_from`]; [`Error::InvalidInput`] when `feature_ids` lacks a
    /// chunk the computation reads.
    pub fn recompute_representations(
        &self,
        ids: &[ChunkId],
        feature_ids: Vec<ChunkId>,
        features: Embeddings,
    ) -> Result<Embeddings> {
        let need = self.representation_rows_needed(ids)?;
        let empty = Embeddings::new(self.representation_dim(), Vec::new())?;
        let rows = self.rows_from(feature_ids, features, Vec::new(), empty)?;
        if let Some(c) = need
            .iter()
            .find(|&&c| !rows.feature_at.contains_key(&(c as u32)))
        {
            return Err(Error::invalid(
                format!("{HERE} (recompute)"),
                format!("chunk {c}'s features were not given"),
            ));
        }
        let ids: Vec<u32> = ids.iter().map(|&c| c as u32).collect();
        let out = self.scorer.recompute(&rows, &self.host, &ids);
        Embeddings::new(self.representation_dim(), out)
    }

    /// Read from `store` the rows scoring `candidates` needs ([`GnnRowScorer::rows_needed`]):
    /// one read of features, one of representations.
    ///
    /// # Errors
    /// Those of [`GnnRowScorer::rows_needed`]; [`Error::InvalidInput`] for a store without
    /// representations (or a chunk without one), [`Error::DimensionMismatch`] for rows of
    /// other widths; the store's own failures.
    pub async fn fetch(
        &self,
        store: &dyn ChunkStore,
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<FetchedRows> {
        let (feature_ids, rep_ids) = self.rows_needed(nearest, candidates)?;
        let (features, reps) =
            tokio::join!(store.vectors(&feature_ids), store.representations(&rep_ids));
        let features = features?;
        let reps = reps?.ok_or_else(|| {
            Error::invalid(
                format!("{HERE} (store)"),
                "the store keeps no representations for these chunks: write the index into \
                 a store that keeps them (LpRag::write_store)",
            )
        })?;
        self.rows_from(feature_ids, features, rep_ids, reps)
    }

    /// [`FetchedRows`] from rows read elsewhere: `features` (one row per id of
    /// `feature_ids`, normalised here) and `reps` (one per id of `rep_ids`).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a matrix of another shape.
    pub fn rows_from(
        &self,
        feature_ids: Vec<ChunkId>,
        features: Embeddings,
        rep_ids: Vec<ChunkId>,
        reps: Embeddings,
    ) -> Result<FetchedRows> {
        let check = |what: &str, m: &Embeddings, rows: usize, dim: usize| {
            if m.rows() != rows || (rows > 0 && m.dim() != dim) {
                return Err(Error::DimensionMismatch {
                    location: format!("{HERE} ({what}: rows × width)"),
                    expected: rows * dim,
                    actual: m.rows() * m.dim(),
                });
            }
            Ok(())
        };
        let rd = self.representation_dim();
        check("features", &features, feature_ids.len(), self.d_in)?;
        check("representations", &reps, rep_ids.len(), rd)?;
        let normalised: Vec<f32> = features
            .iter()
            .flat_map(|r| normalize_vec(r).into_iter())
            .collect();
        let features = Embeddings::new(self.d_in, normalised)?;
        let at = |ids: Vec<ChunkId>| {
            ids.into_iter()
                .enumerate()
                .map(|(r, c)| (c as u32, r))
                .collect::<HashMap<u32, usize>>()
        };
        let layers = self.scorer.layer_spans().to_vec();
        Ok(FetchedRows {
            feature_at: at(feature_ids),
            features,
            rep_at: at(rep_ids),
            reps,
            layers,
            zeros: vec![0.0; self.d_in.max(rd)],
        })
    }

    /// Link logits of `query` (the encoder's vector) against `candidates`, the query
    /// joined to the first of `nearest` as the predictor was trained, reading `rows`.
    ///
    /// # Errors
    /// Those of [`GnnRowScorer::rows_needed`], [`Error::DimensionMismatch`] for a query of
    /// another width, and [`Error::InvalidInput`] when `rows` lacks a row this query reads
    /// (rows fetched for another query).
    pub fn score(
        &self,
        rows: &FetchedRows,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        lprag_core::check_score_args(HERE, self.d_in, self.num_chunks, query, candidates)?;
        let (feature_ids, rep_ids) = self.rows_needed(nearest, candidates)?;
        let missing = feature_ids
            .iter()
            .find(|&&c| !rows.feature_at.contains_key(&(c as u32)))
            .map(|c| ("features", c))
            .or_else(|| {
                rep_ids
                    .iter()
                    .find(|&&c| !rows.rep_at.contains_key(&(c as u32)))
                    .map(|c| ("representation", c))
            });
        if let Some((what, c)) = missing {
            return Err(Error::invalid(
                format!("{HERE} (rows)"),
                format!("chunk {c}'s {what} were not fetched for this query"),
            ));
        }
        let join = self.join(nearest)?;
        let cands: Vec<u32> = candidates.iter().map(|&c| c as u32).collect();
        let q = normalize_vec(query);
        Ok(self.scorer.score_with(rows, &self.host, &q, &join, &cands))
    }
}
