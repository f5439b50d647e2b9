//! LP-RAG beside a [`ChunkStore`]: [`LpRag::write_store`] writes an index's chunks and
//! vectors into a store (resuming a write that stopped), and [`LpRag::attach_store`] lets
//! the store's own search (its vector index, its filters) find each query's nearest
//! chunks. The chunk graph, the model and the ranking stay the index's.

use std::sync::Arc;
use std::time::Instant;

use lprag_core::{
    cosine, Chunk, ChunkBatch, ChunkId, ChunkStore, Error, Filter, LinkPredictor, Progress, Result,
    TrainReport,
};
use lprag_graph::CandidateSearch;
use lprag_model::{FetchedRows, GnnRowScorer};

use super::search::Found;
use super::{search_for, LpRag};

/// Chunks per append of [`LpRag::write_store`]: each append is one store version.
pub const STORE_WRITE_BATCH: usize = 8_192;

/// How many chunks [`LpRag::attach_store`] and a resumed [`LpRag::write_store`] compare
/// between the store and the index, spread evenly over the ids (first and last included).
pub(super) const CHECKED_CHUNKS: usize = 64;

/// `count` ids spread evenly over `0..n` (first and last included; all of them when
/// `n <= count`): the sample [`LpRag::attach_store`] compares.
pub(super) fn spread_ids(count: usize, n: usize) -> Vec<ChunkId> {
    let count = count.min(n);
    let mut ids: Vec<ChunkId> = (0..count)
        .map(|i| {
            if count == 1 {
                0
            } else {
                i * (n - 1) / (count - 1)
            }
        })
        .collect();
    ids.dedup();
    ids
}

/// What an index whose records are the store's ([`AnswerOptions::records_from_store`])
/// keeps of them: their count and the sample compared with the store's at attach.
///
/// [`AnswerOptions::records_from_store`]: crate::AnswerOptions::records_from_store
#[derive(Debug, Clone)]
pub(crate) struct RecordsInStore {
    pub(crate) len: usize,
    /// [`spread_ids`]`(CHECKED_CHUNKS, len)`, ascending.
    pub(crate) sample_ids: Vec<ChunkId>,
    /// The records of `sample_ids`, in that order.
    pub(crate) sample: Vec<Chunk>,
}

impl RecordsInStore {
    /// The record of chunk `id`, when it is one of the sample.
    fn held(&self, id: ChunkId) -> Option<&Chunk> {
        let k = self.sample_ids.binary_search(&id).ok()?;
        self.sample.get(k)
    }
}

/// The lowest cosine at which a stored vector counts as the index's own (a store written
/// from the same encoder on another device may differ in the last bits).
const SAME_VECTOR: f32 = 0.9999;

/// What [`LpRag::write_store`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreWrite {
    /// Chunks the store held already from an earlier write (checked, not written again).
    pub resumed_from: usize,
    /// Chunks written by this call.
    pub written: usize,
    /// Appends made, one store version each.
    pub appends: usize,
    /// Seconds the call took.
    pub seconds: f64,
}

impl LpRag {
    /// Write this index's chunks and their vectors into `store`, [`STORE_WRITE_BATCH`]
    /// chunks per append, so that chunk `i` of the index is chunk `i` of the store; then
    /// [`LpRag::attach_store`] can search there. A store that keeps representations gets
    /// the predictor's per-chunk rows too ([`LinkPredictor::stored_representations`]: the
    /// built-in GNN's cached layer outputs), so that an answering process can read every
    /// row from the store ([`AnswerOptions::rows_from_store`]).
    ///
    /// [`AnswerOptions::rows_from_store`]: crate::AnswerOptions::rows_from_store
    ///
    /// A write that stopped (a crash, a failed append) resumes: a store that already holds
    /// the first `m` chunks of this index is checked (a sample of its records and vectors
    /// against the index's) and only the rest is appended. Progress is reported as stage
    /// `store`, in chunks.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when the store's vectors are not the encoder's width, or
    /// its representations not the predictor's;
    /// [`Error::InvalidInput`] when the store keeps representations and the predictor has
    /// none to give, when the store holds more chunks than the index, or chunks
    /// that are not this index's (another corpus, another encoder), or when another writer
    /// appended meanwhile; the store's own failures (what was appended before stays, and
    /// the next call resumes after it).
    pub async fn write_store(
        &self,
        store: &dyn ChunkStore,
        progress: &dyn Progress,
    ) -> Result<StoreWrite> {
        const HERE: &str = "LpRag::write_store";
        let started = Instant::now();
        let n = self.chunks.len();
        self.check_store_width(store, HERE)?;
        self.refuse_rows_in_store(HERE)?;
        self.refuse_records_in_store(HERE)?;
        let with_reps = match store.representation_dim() {
            None => false,
            Some(rd) => match self.predictor.stored_representation_dim() {
                Some(own) if own == rd => true,
                Some(own) => {
                    return Err(Error::DimensionMismatch {
                        location: format!("{HERE} (the store's representation width)"),
                        expected: own,
                        actual: rd,
                    })
                }
                None => {
                    return Err(Error::invalid(
                        HERE,
                        format!(
                            "the store keeps {rd}-wide representations and the predictor \
                             '{}' has none to give: write into a store without them",
                            self.predictor.name()
                        ),
                    ))
                }
            },
        };
        let held = store.len();
        if held > n {
            return Err(Error::invalid(
                HERE,
                format!(
                    "the store holds {held} chunks and this index {n}: it holds another \
                     corpus; write into an empty store"
                ),
            ));
        }
        self.check_store_chunks(store, held, HERE).await?;
        progress.start("store", Some(n as u64));
        progress.update(
            "store",
            held as u64,
            &format!("{held} chunks there already"),
        );
        let mut appends = 0;
        let mut at = held;
        while at < n {
            let end = (at + STORE_WRITE_BATCH).min(n);
            let rows: Vec<usize> = (at..end).collect();
            let mut batch = ChunkBatch::new(
                self.chunks[at..end].to_vec(),
                self.graph.features.select(&rows),
            );
            if with_reps {
                batch.representations = Some(self.predictor.stored_representations(at..end)?);
            }
            let got = store.append(batch).await?;
            appends += 1;
            if got != (at..end) {
                return Err(Error::invalid(
                    HERE,
                    format!(
                        "the store numbered chunks {at}..{end} as {}..{}: another writer \
                         appended meanwhile",
                        got.start, got.end
                    ),
                ));
            }
            at = end;
            progress.update("store", at as u64, "");
        }
        progress.finish("store");
        Ok(StoreWrite {
            resumed_from: held,
            written: n - held,
            appends,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Find each query's nearest chunks with `store`'s search, filters included (a
    /// [`Filter`] goes to the store, which may evaluate it in its engine), instead of the
    /// in-memory search: the store must hold this index's chunks under the same ids
    /// ([`LpRag::write_store`]). The candidates' graph neighbours, the model's scores and
    /// the ranking are computed here as before, so a store with an exact search ranks as
    /// the in-memory index does; an approximate one (an ANN index) may miss some of the
    /// nearest chunks.
    ///
    /// The in-memory search structure ([`LpRagConfig::column_scan_from`]'s column-wise
    /// copy, [`LpRagConfig::candidate_index`] or [`LpRagConfig::candidate_graph`]) is
    /// dropped; [`LpRag::detach_store`] rebuilds it. With
    /// [`LpRagConfig::candidate_pool`] `None` (every chunk scored) queries still search in
    /// memory. An update ([`LpRag::add_documents`] and its siblings) detaches the store
    /// (its ids no longer match) and says so in its report's warnings. The store is not
    /// saved with the index: attach it again after [`LpRag::load`].
    ///
    /// [`LpRagConfig::column_scan_from`]: crate::LpRagConfig::column_scan_from
    /// [`LpRagConfig::candidate_index`]: crate::LpRagConfig::candidate_index
    /// [`LpRagConfig::candidate_graph`]: crate::LpRagConfig::candidate_graph
    /// [`LpRagConfig::candidate_pool`]: crate::LpRagConfig::candidate_pool
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for a store of another vector width;
    /// [`Error::InvalidInput`] when it holds another number of chunks than the index, or a
    /// sample of its chunks differs from the index's; the store's own failures.
    pub async fn attach_store(&mut self, store: Arc<dyn ChunkStore>) -> Result<()> {
        const HERE: &str = "LpRag::attach_store";
        self.refuse_rows_in_store(HERE)?;
        self.check_store_width(&*store, HERE)?;
        let n = self.num_chunks();
        if store.len() != n {
            return Err(Error::invalid(
                HERE,
                format!(
                    "the store holds {} chunks and this index {n}; LpRag::write_store \
                     writes them (and resumes a write that stopped)",
                    store.len()
                ),
            ));
        }
        self.check_store_chunks(&*store, n, HERE).await?;
        self.search = Arc::new(CandidateSearch::exact(&self.graph));
        self.store = Some(store);
        Ok(())
    }

    /// Stop searching in the attached store: the in-memory search structure the
    /// configuration asks for is rebuilt. Returns the store, `None` when none was
    /// attached.
    ///
    /// # Errors
    /// As building the in-memory search (invalid candidate-search settings).
    pub fn detach_store(&mut self) -> Result<Option<Arc<dyn ChunkStore>>> {
        self.refuse_rows_in_store("LpRag::detach_store")?;
        self.refuse_records_in_store("LpRag::detach_store")?;
        let store = self.store.take();
        if store.is_some() {
            self.search = Arc::new(search_for(&self.graph, &self.config)?);
        }
        Ok(store)
    }

    /// The store whose search finds the queries' nearest chunks ([`LpRag::attach_store`]).
    pub fn store(&self) -> Option<&Arc<dyn ChunkStore>> {
        self.store.as_ref()
    }

    /// Detach the store after an update changed the chunks: a warning for the report.
    pub(crate) fn detach_store_after_update(&mut self) -> Option<String> {
        self.store.take().map(|_| {
            "the chunk store was detached: the update changed the chunks' ids; write the \
             index into a new store (LpRag::write_store) and attach it again"
                .to_string()
        })
    }

    /// The store's vectors are the encoder's width.
    fn check_store_width(&self, store: &dyn ChunkStore, location: &str) -> Result<()> {
        let dim = self.graph.features.dim();
        if store.dim() != dim {
            return Err(Error::DimensionMismatch {
                location: format!("{location} (the store's vector width)"),
                expected: dim,
                actual: store.dim(),
            });
        }
        Ok(())
    }

    /// The store's first `held` chunks are this index's: a sample of their texts,
    /// documents and vectors compared.
    async fn check_store_chunks(
        &self,
        store: &dyn ChunkStore,
        held: usize,
        location: &str,
    ) -> Result<()> {
        if held == 0 {
            return Ok(());
        }
        let ids = spread_ids(CHECKED_CHUNKS, held);
        let records = store.chunks(&ids).await?;
        let vectors = store.vectors(&ids).await?;
        for (k, &id) in ids.iter().enumerate() {
            let mine = match &self.records {
                None => &self.chunks[id],
                // The sample kept is this one (`held` is the index's length here).
                Some(r) => match r.held(id) {
                    Some(mine) => mine,
                    None => continue,
                },
            };
            let theirs = &records[k];
            let what = if theirs.text != mine.text {
                Some("text")
            } else if theirs.provenance.document_id != mine.provenance.document_id {
                Some("document")
            } else if self.rows.is_some() {
                // No row held here to compare: the representations are checked instead.
                None
            } else {
                let (a, b) = (vectors.row(k), self.graph.features.row(id));
                (a != b && cosine(a, b) < SAME_VECTOR).then_some("vector")
            };
            if let Some(what) = what {
                return Err(Error::invalid(
                    location,
                    format!(
                        "chunk {id} in the store differs from this index's ({what}): the \
                         store holds another corpus or another encoder's vectors"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The query's nearest chunks (the model's join) and the candidates, found by the
    /// attached store's search; `None` when no store is attached or every chunk is
    /// scored (the in-memory path then).
    pub(super) async fn store_candidates(
        &self,
        query: &[f32],
        filter: Option<&Filter>,
    ) -> Result<Option<Found>> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let n = self.num_chunks();
        let Some(pool) = self.config.candidate_pool.filter(|&p| p < n) else {
            return Ok(None);
        };
        let pool = pool.max(1);
        let join = self.config.join_size();
        let ids = |hits: Vec<(usize, f32)>| -> Result<Vec<usize>> {
            hits.into_iter()
                .map(|(id, _)| {
                    if id < n {
                        Ok(id)
                    } else {
                        Err(Error::invalid(
                            "LpRag (attached store)",
                            format!(
                                "the store's search found chunk {id}, this index has {n}: \
                                 the store was appended to or refreshed after attach_store"
                            ),
                        ))
                    }
                })
                .collect()
        };
        let (nearest, pooled) = match filter {
            None => {
                let nearest = ids(store.nearest(query, pool.max(join), &Filter::All).await?)?;
                let pooled = nearest[..pool.min(nearest.len())].to_vec();
                (nearest, pooled)
            }
            Some(f) => {
                let nearest = if join > 0 {
                    ids(store.nearest(query, join, &Filter::All).await?)?
                } else {
                    Vec::new()
                };
                (nearest, ids(store.nearest(query, pool, f).await?)?)
            }
        };
        // Without the records here, the filter is checked afterwards on the records of the
        // chunks the store's filtered search did not return.
        let held = self.records.is_none();
        let keep = |c: usize| !held || filter.is_none_or(|f| f.matches(&self.chunks[c]));
        let pooled_ids = (!held && filter.is_some()).then(|| pooled.clone());
        let wide = self.config.candidate_neighbours;
        let mut candidates = match &self.rows {
            Some(rows) => lprag_graph::expand_pool(&rows.neighbours, pooled, wide, &keep),
            None => self.search.expand_pool(pooled, wide, &keep),
        };
        if self.config.parents.scores_siblings() {
            candidates = self.parents.with_siblings(&candidates, &keep);
        }
        if let (Some(f), Some(mut admitted)) = (filter, pooled_ids) {
            admitted.sort_unstable();
            let unchecked: Vec<ChunkId> = candidates
                .iter()
                .copied()
                .filter(|c| admitted.binary_search(c).is_err())
                .collect();
            if !unchecked.is_empty() {
                let records = store.chunks(&unchecked).await?;
                let refused: std::collections::HashSet<ChunkId> = unchecked
                    .iter()
                    .zip(&records)
                    .filter(|(_, r)| !f.matches(r))
                    .map(|(&c, _)| c)
                    .collect();
                candidates.retain(|c| !refused.contains(c));
            }
        }
        Ok(Some(Found {
            nearest,
            candidates,
        }))
    }
}

/// An index answering with its chunk rows in the store ([`AnswerOptions::rows_from_store`]):
/// the predictor reads each query's rows there; the chunk graph's neighbour lists expand
/// the candidate pool.
///
/// [`AnswerOptions::rows_from_store`]: crate::AnswerOptions::rows_from_store
pub(crate) struct StoreRows {
    pub(crate) scorer: GnnRowScorer,
    pub(crate) neighbours: Vec<Vec<u32>>,
}

/// How many chunks [`LpRag::attach_rows_store`] recomputes from the store's vectors to
/// check its representations.
const CHECKED_REPRESENTATIONS: usize = 8;

impl LpRag {
    /// [`Error::InvalidInput`] for `location` when the chunk rows are the store's
    /// ([`AnswerOptions::rows_from_store`]: no row is held to rebuild a search from).
    ///
    /// [`AnswerOptions::rows_from_store`]: crate::AnswerOptions::rows_from_store
    pub(crate) fn refuse_rows_in_store(&self, location: &str) -> Result<()> {
        if self.rows.is_some() {
            return Err(Error::invalid(
                location,
                "this index reads its chunk rows from its store (AnswerOptions::rows_from_store): \
                 it holds none to search or write; open it with its rows in memory for that",
            ));
        }
        Ok(())
    }

    /// [`Error::InvalidInput`] for `location` when the chunk records are the store's
    /// ([`AnswerOptions::records_from_store`]: none is held to write or rank without it).
    ///
    /// [`AnswerOptions::records_from_store`]: crate::AnswerOptions::records_from_store
    pub(crate) fn refuse_records_in_store(&self, location: &str) -> Result<()> {
        if self.records.is_some() {
            return Err(Error::invalid(
                location,
                "this index reads its chunk records from its store \
                 (AnswerOptions::records_from_store): it holds none to write or to rank \
                 without the store; open it with its records in memory for that",
            ));
        }
        Ok(())
    }

    /// Attach `store` to an index opened with its rows in the store: the widths, the
    /// chunk count and a sample of the records are checked as [`LpRag::attach_store`]
    /// checks them, and a sample of the stored representations is recomputed from the
    /// store's vectors and the chunk graph.
    pub(super) async fn attach_rows_store(
        &mut self,
        store: Arc<dyn ChunkStore>,
        location: &str,
    ) -> Result<()> {
        let Some(rows) = self.rows.clone() else {
            return Err(Error::invalid(location, "the index holds its rows"));
        };
        let scorer = &rows.scorer;
        let n = self.num_chunks();
        if store.dim() != scorer.dim() {
            return Err(Error::DimensionMismatch {
                location: format!("{location} (the store's vector width)"),
                expected: scorer.dim(),
                actual: store.dim(),
            });
        }
        match store.representation_dim() {
            Some(rd) if rd == scorer.representation_dim() => {}
            Some(rd) => {
                return Err(Error::DimensionMismatch {
                    location: format!("{location} (the store's representation width)"),
                    expected: scorer.representation_dim(),
                    actual: rd,
                })
            }
            None => {
                return Err(Error::invalid(
                    location,
                    "the store keeps no representations: write the index into a store that \
                     keeps them (LpRag::write_store) to read every row from it",
                ))
            }
        }
        if store.len() != n {
            return Err(Error::invalid(
                location,
                format!(
                    "the store holds {} chunks and this index {n}; LpRag::write_store writes \
                     them (and resumes a write that stopped)",
                    store.len()
                ),
            ));
        }
        self.check_store_chunks(&*store, n, location).await?;
        let ids = spread_ids(CHECKED_REPRESENTATIONS, n);
        let feature_ids = scorer.representation_rows_needed(&ids)?;
        let features = store.vectors(&feature_ids).await?;
        let stored = store.representations(&ids).await?;
        let Some(stored) = stored else {
            return Err(Error::invalid(
                location,
                "the store keeps no representations for some chunks: write the index into a \
                 store that keeps them (LpRag::write_store)",
            ));
        };
        let recomputed = scorer.recompute_representations(&ids, feature_ids, features)?;
        for (k, &id) in ids.iter().enumerate() {
            let (a, b) = (stored.row(k), recomputed.row(k));
            let worst = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
                .fold(0.0f32, f32::max);
            if worst > 1e-3 {
                return Err(Error::invalid(
                    location,
                    format!(
                        "chunk {id}'s representation in the store is not this index's model's \
                         (recomputed from the store's vectors it differs by {worst:.2e}): the \
                         store was written from another training; write this index into a new \
                         store"
                    ),
                ));
            }
        }
        self.store = Some(store);
        Ok(())
    }

    /// One query's rows read from the store, when the index reads its rows there.
    pub(super) async fn fetch_rows(
        &self,
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Option<(Arc<StoreRows>, FetchedRows)>> {
        let (Some(rows), Some(store)) = (&self.rows, &self.store) else {
            return Ok(None);
        };
        let fetched = rows.scorer.fetch(&**store, nearest, candidates).await?;
        Ok(Some((rows.clone(), fetched)))
    }
}

/// The ranking model of an index reading its rows from the store: it scores only through
/// the store (`LpRag`'s query path); called directly it says so.
pub(super) struct RowsInStore {
    pub(super) name: String,
}

impl RowsInStore {
    fn refuse<T>(&self, what: &str) -> Result<T> {
        Err(Error::invalid(
            format!("LinkPredictor '{}' ({what})", self.name),
            "this predictor reads its chunk rows from the index's store: rank through \
             LpRag::retrieve; open the index with LpRag::open to score or train directly",
        ))
    }
}

impl LinkPredictor for RowsInStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn fit(&mut self, _graph: &lprag_core::LinkGraph, _: &dyn Progress) -> Result<TrainReport> {
        self.refuse("fit")
    }

    fn attach(&mut self, _graph: &lprag_core::LinkGraph) -> Result<()> {
        self.refuse("attach")
    }

    fn score(&self, _query: &[f32], _candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.refuse("score")
    }

    fn save(&self, _dir: &std::path::Path) -> Result<()> {
        self.refuse("save")
    }
}
