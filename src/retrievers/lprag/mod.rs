//! The LP-RAG pipeline: documents → chunks → embeddings → chunk graph → synthetic queries →
//! trained link predictor → ranked chunks.

use std::sync::Arc;

use lprag_core::{
    Chunk, ChunkStore, Encoder, Error, LinkGraph, LinkPredictor, Result, SyntheticQuery,
};
use lprag_graph::{GraphParams, IvfParams};

use lprag_model::ComputeDevice;

use crate::retrievers::common::{DefaultEncoder, Parents};

mod anchor;
mod builder;
mod config;
mod persist;
mod predictor;
mod representations;
mod search;
mod stages;
mod stats;
mod store;
pub(crate) mod update;

pub use anchor::{
    choose as choose_anchor, Anchor, AnchorSelection, ANCHOR_SIGNIFICANCE, ANCHOR_WEIGHTS,
};
pub use builder::LpRagBuilder;
pub use config::{BuiltinPredictor, LpRagConfig, DEFAULT_CANDIDATE_POOL, DEFAULT_COLUMN_SCAN_FROM};
pub use persist::AnswerOptions;
use persist::{read_manifest, Manifest};
pub(crate) use predictor::PredictorSource;
use predictor::{ModelChoice, RankModel, ScorerPredictor};

use lprag_graph::CandidateSearch;
pub use search::QueryProfile;
pub(crate) use search::{search_for, search_for_at};
pub use stats::IndexStats;
use stats::RecordingProgress;
pub use store::{StoreWrite, STORE_WRITE_BATCH};

/// Version of the on-disk index layout written by [`LpRag::save`].
pub const INDEX_FORMAT_VERSION: u32 = 1;

const MANIFEST: &str = "manifest.json";
const CHUNKS: &str = "chunks.json";
const QUERIES: &str = "queries.json";
const GRAPH: &str = "graph.bin";
const PREDICTOR_DIR: &str = "predictor";
const KNN: &str = "knn.bin";
/// The proximity graph of [`LpRagConfig::candidate_graph`], as k-NN lists of links.
const CANDIDATE_GRAPH: &str = "candidate-graph.bin";
/// The column-wise copy of the chunk rows ([`LpRagConfig::column_scan_from`]), bound to
/// `graph.bin` by its checksum: read back (or mapped) instead of made again at opening.
const COLUMNS: &str = "columns.bin";
/// The built-in predictor's cached chunk representations, and what binds them to
/// `graph.bin` and the predictor's weights: read back (or mapped) instead of computed at
/// opening.
const REPRESENTATIONS: &str = "representations.bin";
const REPRESENTATIONS_META: &str = "representations.json";

/// Where [`LpRag::save`] may write: an `LpRag` index is replaced whole, so the directory
/// must hold nothing but an index's files.
pub(crate) const INDEX_DIR: lprag_core::dirs::DirSpec = lprag_core::dirs::DirSpec {
    kind: "an LpRag index",
    marker: MANIFEST,
    marker_key: Some("format_version"),
    owns: Some(|name| {
        [
            MANIFEST,
            CHUNKS,
            QUERIES,
            GRAPH,
            PREDICTOR_DIR,
            KNN,
            CANDIDATE_GRAPH,
            COLUMNS,
            REPRESENTATIONS,
            REPRESENTATIONS_META,
        ]
        .contains(&name)
    }),
};

/// The LP-RAG retriever: chunks ranked by a link predictor trained on a graph of chunks
/// and synthetic queries.
///
/// `LpRag` is `Send + Sync` and cheap to share behind an `Arc`; [`Retriever::retrieve`](crate::Retriever::retrieve)
/// runs the model on a blocking thread. A clone shares the graph, the embeddings and the
/// model with the original and copies the chunk and query lists; an update of the clone
/// leaves the original as it was ([`crate::Live`] serves one while updating the other).
#[derive(Clone)]
pub struct LpRag {
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) queries: Vec<SyntheticQuery>,
    pub(crate) graph: Arc<LinkGraph>,
    pub(crate) encoder: Arc<dyn Encoder>,
    pub(crate) default_encoder: Option<DefaultEncoder>,
    pub(crate) predictor: Arc<dyn LinkPredictor>,
    pub(crate) source: PredictorSource,
    pub(crate) search: Arc<CandidateSearch>,
    pub(crate) config: LpRagConfig,
    pub(crate) stats: IndexStats,
    /// The chunks' k-NN lists behind the mutual k-NN edges, kept for incremental updates
    /// (`None` when the graph stage was reused from a work directory or the index was
    /// saved without them; the first update computes them).
    pub(crate) knn: Option<Arc<KnnLists>>,
    /// Where the built-in predictor trains and scores (for [`LpRag::retrain`]).
    pub(crate) device: ComputeDevice,
    /// Each chunk's document (for [`LpRagConfig::parents`]), made wherever `chunks` is.
    pub(crate) parents: Arc<Parents>,
    /// The chunk store whose search finds a query's nearest chunks
    /// ([`LpRag::attach_store`]); `None` searches in memory.
    pub(crate) store: Option<Arc<dyn ChunkStore>>,
    /// Opened with [`LpRag::open_to_answer`]: no synthetic questions, no question rows, no
    /// k-NN lists, so updates, retraining and saving are refused.
    pub(crate) answer_only: bool,
    /// Opened with [`AnswerOptions::rows_from_store`]: the predictor reads each query's
    /// chunk rows from the store, and `graph` holds no row.
    pub(crate) rows: Option<Arc<store::StoreRows>>,
    /// Opened with [`AnswerOptions::records_from_store`]: `chunks` is empty and the
    /// records are read from the store.
    pub(crate) records: Option<store::RecordsInStore>,
}

/// Each chunk's k nearest chunks, `(chunk, cosine)` best first.
pub(crate) type KnnLists = Vec<Vec<(u32, f32)>>;

impl std::fmt::Debug for LpRag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LpRag")
            .field("chunks", &self.chunks.len())
            .field("queries", &self.queries.len())
            .field("encoder", &self.encoder.name())
            .field("predictor", &self.predictor.name())
            .field("store", &self.store.is_some())
            .field("answer_only", &self.answer_only)
            .field("rows_from_store", &self.rows.is_some())
            .field("records_from_store", &self.records.is_some())
            .finish()
    }
}

impl LpRag {
    /// A builder with the offline defaults.
    pub fn builder() -> LpRagBuilder {
        LpRagBuilder::default()
    }

    /// The indexed chunks; empty when they are read from the store
    /// ([`AnswerOptions::records_from_store`]).
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// How many chunks the index ranks (also when their records are the store's).
    pub fn num_chunks(&self) -> usize {
        self.records.as_ref().map_or(self.chunks.len(), |r| r.len)
    }

    /// The synthetic queries written at index time (none in an index opened with
    /// [`LpRag::open_to_answer`]).
    pub fn synthetic_queries(&self) -> &[SyntheticQuery] {
        &self.queries
    }

    /// The training graph (chunks, synthetic queries and their edges); in an index opened
    /// with [`LpRag::open_to_answer`], the chunk nodes and the edges between them only, and
    /// with [`AnswerOptions::rows_from_store`] an empty graph (the rows and edges are the
    /// store's and the predictor's).
    pub fn graph(&self) -> &LinkGraph {
        &self.graph
    }

    /// Whether the index was opened to answer only ([`LpRag::open_to_answer`]): it
    /// answers as the whole index does, and refuses updates, retraining and saving.
    pub fn answers_only(&self) -> bool {
        self.answer_only
    }

    /// [`Error::InvalidInput`] for `location` when the index was opened to answer only.
    pub(crate) fn refuse_answer_only(&self, location: &str) -> Result<()> {
        if self.answer_only {
            return Err(Error::invalid(
                location,
                "this index was opened to answer only (LpRag::open_to_answer: its synthetic \
                 questions and their rows were not read); open it with LpRag::open or \
                 LpRag::load to update, retrain or save it",
            ));
        }
        Ok(())
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &LpRagConfig {
        &self.config
    }

    /// What indexing produced and how long each stage took.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The link predictor.
    pub fn predictor(&self) -> &Arc<dyn LinkPredictor> {
        &self.predictor
    }

    /// The encoder that embeds chunks and queries.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// The built-in encoder choice, when no encoder was given to the builder.
    pub fn default_encoder(&self) -> Option<&DefaultEncoder> {
        self.default_encoder.as_ref()
    }

    /// Change the candidate stage without rebuilding (see
    /// [`LpRagConfig::candidate_pool`]): `None` scores every chunk.
    pub fn set_candidates(&mut self, pool: Option<usize>, neighbours: bool) {
        self.config.candidate_pool = pool;
        self.config.candidate_neighbours = neighbours;
    }

    /// Change where the candidate stage finds the nearest chunks (see
    /// [`LpRagConfig::candidate_index`]) without rebuilding: `Some` makes the
    /// inverted-file index now, `None` goes back to exact scans. Saved with the index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for invalid [`IvfParams`] (the index is left as it was).
    pub fn set_candidate_index(&mut self, index: Option<IvfParams>) -> Result<()> {
        let graph = if index.is_some() {
            None
        } else {
            self.config.candidate_graph
        };
        self.set_search(LpRagConfig {
            candidate_index: index,
            candidate_graph: graph,
            ..self.config.clone()
        })
    }

    /// Change where the candidate stage finds the nearest chunks to a walk on a proximity
    /// graph ([`LpRagConfig::candidate_graph`]) without rebuilding: `Some` links the chunks
    /// now (and drops [`LpRagConfig::candidate_index`]), `None` goes back to the other
    /// searches. Saved with the index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for invalid [`GraphParams`] (the index is left as it was).
    pub fn set_candidate_graph(&mut self, graph: Option<GraphParams>) -> Result<()> {
        let index = if graph.is_some() {
            None
        } else {
            self.config.candidate_index
        };
        self.set_search(LpRagConfig {
            candidate_graph: graph,
            candidate_index: index,
            ..self.config.clone()
        })
    }

    /// Change the beam of the proximity-graph walk ([`GraphParams::beam`] of
    /// [`LpRagConfig::candidate_graph`]) without linking the chunks again. Saved with the
    /// index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) when the index has no candidate graph or `beam` is 0.
    pub fn set_candidate_graph_beam(&mut self, beam: usize) -> Result<()> {
        let location = "LpRag::set_candidate_graph_beam";
        self.refuse_rows_in_store(location)?;
        if beam == 0 {
            return Err(lprag_core::Error::invalid(
                location,
                "the beam must be at least 1",
            ));
        }
        let (Some(params), Some(index)) = (self.config.candidate_graph, self.search.graph_index())
        else {
            return Err(lprag_core::Error::invalid(
                location,
                "the index has no candidate graph (set LpRagConfig::candidate_graph first)",
            ));
        };
        let mut index = index.clone();
        index.set_beam(beam);
        self.search = Arc::new(CandidateSearch::with_graph_index(&self.graph, index)?);
        self.config.candidate_graph = Some(GraphParams { beam, ..params });
        Ok(())
    }

    /// Change [`LpRagConfig::column_scan_from`] without rebuilding (the column-wise copy is
    /// made now when the index is that large, or dropped). Saved with the index; the
    /// nearest chunks do not change, only how fast they are found.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for chunk embeddings with a non-finite value (the index is
    /// left as it was).
    pub fn set_column_scan_from(&mut self, from: Option<usize>) -> Result<()> {
        self.set_search(LpRagConfig {
            column_scan_from: from,
            ..self.config.clone()
        })
    }

    /// Set [`LpRagConfig::parents`], how the chunks of one document compete (saved with
    /// the index; no retraining: the same scores, grouped another way).
    pub fn set_parents(&mut self, parents: crate::ParentScoring) {
        self.config.parents = parents;
    }

    /// Set [`LpRagConfig::max_query_bytes`], the longest query (UTF-8 bytes) this index
    /// embeds.
    pub fn set_max_query_bytes(&mut self, max_bytes: usize) {
        self.config.max_query_bytes = max_bytes;
    }

    /// Make the candidate search `config` asks for, then keep `config` (unchanged on error).
    fn set_search(&mut self, config: LpRagConfig) -> Result<()> {
        self.refuse_rows_in_store("LpRag (candidate search)")?;
        self.search = Arc::new(search_for(&self.graph, &config)?);
        self.config = config;
        Ok(())
    }

    /// Whether the exact candidate scan reads the column-wise copy of the chunk embeddings
    /// (see [`LpRagConfig::column_scan_from`]).
    pub fn scans_columns(&self) -> bool {
        self.search.scans_columns()
    }

    /// Whether that column-wise copy is read from a memory-mapped file (a build with
    /// [`LpRagBuilder::features_on_disk`] keeps it in its work directory; a saved index
    /// opened with [`AnswerOptions::map_rows`](crate::AnswerOptions::map_rows) maps the
    /// saved copy) rather than held on the heap.
    pub fn columns_mapped(&self) -> bool {
        self.search.columns_mapped()
    }

    /// Whether the predictor's cached chunk representations are read through a memory
    /// map ([`LinkPredictor::representations_mapped`]: the saved index's
    /// `representations.bin` for an index opened with
    /// [`AnswerOptions::map_rows`](crate::AnswerOptions::map_rows), the work directory's
    /// for one built with [`LpRagBuilder::features_on_disk`]) rather than held on the
    /// heap.
    pub fn representations_mapped(&self) -> bool {
        self.predictor.representations_mapped()
    }
}
