//! Saving and opening an index: the manifest, the files beside it, and the ranking model.

use super::{
    search_for, BuiltinPredictor, CandidateSearch, IndexStats, KnnLists, LpRag, LpRagConfig,
    PredictorSource, ScorerPredictor, CANDIDATE_GRAPH, CHUNKS, COLUMNS, GRAPH, INDEX_DIR,
    INDEX_FORMAT_VERSION, KNN, MANIFEST, PREDICTOR_DIR, QUERIES,
};

use std::path::Path;
use std::sync::Arc;

use lprag_core::{
    Chunk, ChunkId, ChunkStore, Embeddings, Encoder, Error, LinkGraph, LinkPredictor, LinkScorer,
    Result, SyntheticQuery,
};

use lprag_model::{ComputeDevice, GnnRowScorer};
use serde::{Deserialize, Serialize};

use super::representations;
use super::store::{spread_ids, RecordsInStore, RowsInStore, StoreRows, CHECKED_CHUNKS};

use crate::retrievers::common::{
    check_fingerprint, check_version, DefaultEncoder, Parents, ParentsBuilder,
};

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    pub(super) format_version: u32,
    pub(super) encoder: String,
    /// [`Encoder::fingerprint`] of the encoder the index was built with (absent in indexes
    /// saved before it existed, and for encoders without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) encoder_fingerprint: Option<String>,
    pub(super) dimension: usize,
    pub(super) predictor: String,
    #[serde(default)]
    pub(super) predictor_source: PredictorSource,
    #[serde(default)]
    pub(super) default_encoder: Option<DefaultEncoder>,
    pub(super) config: LpRagConfig,
    pub(super) stats: IndexStats,
}

impl LpRag {
    /// Save the whole index (chunks, queries, graph with embeddings, trained model, and the
    /// column-wise copy of the chunk rows when the candidate scan reads one and the
    /// built-in GNN's cached chunk representations, bound by checksum to the graph and
    /// weights saved with them, so that opening reads them instead of making them) under
    /// `dir`, atomically and durably:
    /// everything is written to a uniquely named sibling
    /// directory, synced to disk, and swapped in for `dir` in one step (an atomic exchange
    /// on Linux; elsewhere two renames with a brief window), so a crash leaves the old
    /// index or the new one, concurrent saves do not collide, and a reader always finds
    /// one.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] when `dir` exists and is neither empty nor an `LpRag`
    /// index (a manifest and only an index's files): nothing is written then.
    /// [`Error::InvalidInput`] for an index opened to answer only ([`LpRag::open_to_answer`]).
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.refuse_answer_only("LpRag::save")?;
        let dir = dir.as_ref();
        INDEX_DIR.check(dir)?;
        let staged = crate::durable::staging_dir(dir)?;
        let tmp = staged.path().to_path_buf();
        // Streamed through a buffer: `chunks.json` is 0.6 GB at a million chunks, and made
        // whole in memory it was the save's peak.
        let write_json = |name: &str, value: &dyn erased::Json| -> Result<()> {
            use std::io::Write;
            let path = tmp.join(name);
            let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            value.write_json(&mut out).map_err(|e| {
                if e.is_io() {
                    Error::io(&path, std::io::Error::from(e))
                } else {
                    Error::format(&path, e.to_string())
                }
            })?;
            out.flush().map_err(|e| Error::io(&path, e))
        };
        write_json(
            MANIFEST,
            &Manifest {
                format_version: INDEX_FORMAT_VERSION,
                encoder: self.encoder.name().to_string(),
                encoder_fingerprint: self.encoder.fingerprint(),
                dimension: self.encoder.dimension(),
                predictor: self.predictor.name().to_string(),
                predictor_source: self.source,
                default_encoder: self.default_encoder.clone(),
                config: self.config.clone(),
                stats: self.stats.clone(),
            },
        )?;
        write_json(CHUNKS, &self.chunks)?;
        write_json(QUERIES, &self.queries)?;
        lprag_graph::save_link_graph(&self.graph, tmp.join(GRAPH))?;
        if let Some(lists) = &self.knn {
            lprag_graph::save_knn_lists(lists, tmp.join(KNN))?;
        }
        if let Some(index) = self.search.graph_index() {
            lprag_graph::save_knn_lists(&index.link_lists(), tmp.join(CANDIDATE_GRAPH))?;
        }
        if let Some(columns) = self.search.column_index() {
            // Bound to the graph file just written; not written on a big-endian machine
            // (opening makes the copy again there).
            if cfg!(target_endian = "little") {
                let source = lprag_graph::link_graph_checksum(tmp.join(GRAPH))?;
                columns.save_file(tmp.join(COLUMNS), source)?;
            }
        }
        self.predictor.save(&tmp.join(PREDICTOR_DIR))?;
        // The built-in GNN's cached representations, bound to the graph file and weights
        // just written (not on a big-endian machine: opening computes them there).
        let gnn = matches!(self.config.predictor, BuiltinPredictor::Gnn);
        if self.source == PredictorSource::Builtin && gnn && cfg!(target_endian = "little") {
            representations::save(&*self.predictor, self.graph.num_chunks, &tmp)?;
        }
        crate::durable::replace_dir(staged, dir, &INDEX_DIR)
    }

    /// Whether [`LpRag::save`] may write into `dir` now: it does not exist, is empty, or is
    /// an `LpRag` index holding nothing else. Call it before a long build whose result
    /// goes there, so that a refused directory costs nothing (`save` checks again).
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] naming `dir` and what was found in it.
    pub fn check_save_dir(dir: impl AsRef<Path>) -> Result<()> {
        INDEX_DIR.check(dir.as_ref())
    }

    /// Load an index saved by [`LpRag::save`] that was built with the default encoder and
    /// the built-in [`GnnLinkPredictor`](crate::extend::GnnLinkPredictor), rebuilding the encoder from the index.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom encoder (use
    /// [`LpRag::load`] and pass it); the errors of [`LpRag::load`] otherwise.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_on(dir, ComputeDevice::Cpu)
    }

    /// [`LpRag::open`] with the built-in predictor scoring on `device`.
    pub fn open_on(dir: impl AsRef<Path>, device: ComputeDevice) -> Result<Self> {
        let dir = dir.as_ref();
        device.to_burn()?;
        let manifest = read_manifest(dir)?;
        if manifest.predictor_source != PredictorSource::Builtin {
            return Err(Error::invalid(
                "LpRag::open",
                format!(
                    "the index in {} was built with the custom predictor or scorer '{}'; \
                     load it with {}",
                    dir.display(),
                    manifest.predictor,
                    manifest.predictor_source.how_to_load()
                ),
            ));
        }
        let chunks: Vec<Chunk> = read_json(&dir.join(CHUNKS))?;
        let encoder = rebuilt_encoder(
            dir,
            &manifest,
            || chunks.iter().map(Chunk::embedding_text).collect(),
            "LpRag::open",
            "load it with LpRag::load(dir, encoder)",
        )?;
        // The chunks read once: handed to the loader instead of read again.
        let opened = Opened {
            chunks: Some(chunks),
            ..Opened::default()
        };
        let parts = Parts::read_as(
            dir,
            encoder,
            "LpRag::open",
            &[PredictorSource::Builtin],
            opened,
        )?;
        parts.finish_builtin(dir, device)
    }

    /// Load an index saved by [`LpRag::save`] whose predictor is the built-in
    /// [`GnnLinkPredictor`](crate::extend::GnnLinkPredictor). `encoder` must be the encoder the index was built with (its name
    /// and dimension are checked).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the index was built with a custom predictor or scorer
    /// (the message names the loader to use); I/O and format errors of the index files.
    pub fn load(dir: impl AsRef<Path>, encoder: Arc<dyn Encoder>) -> Result<Self> {
        Self::load_on(dir, encoder, ComputeDevice::Cpu)
    }

    /// [`LpRag::load`] with the built-in predictor scoring on `device`.
    pub fn load_on(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        device: ComputeDevice,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(dir, encoder, "LpRag::load", &[PredictorSource::Builtin])?;
        parts.finish_builtin(dir, device)
    }

    /// Load an index saved by [`LpRag::save`] that was built with a custom
    /// [`LinkPredictor`] ([`LpRagBuilder::predictor`](crate::LpRagBuilder::predictor)) or the built-in one. `restore`
    /// rebuilds the predictor from the directory its [`LinkPredictor::save`] wrote and the
    /// index's graph; its name must be the one recorded in the index. For example, the
    /// built-in predictor on a device of your choice:
    ///
    /// ```no_run
    /// # fn run(encoder: std::sync::Arc<dyn lprag::Encoder>) -> lprag::Result<()> {
    /// use lprag::extend::GnnLinkPredictor;
    /// use lprag::{LinkPredictor, LpRag};
    /// let rag = LpRag::load_with("index", encoder, |dir, _graph| {
    ///     // ComputeDevice::Cuda(0) or Wgpu(0) with the `cuda` / `wgpu` feature
    ///     let device = lprag::ComputeDevice::Cpu.to_burn()?;
    ///     Ok(Box::new(GnnLinkPredictor::from_dir_on(dir, device)?) as Box<dyn LinkPredictor>)
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Those of [`LpRag::load`], and whatever `restore` returns.
    pub fn load_with(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        restore: impl FnOnce(&Path, &LinkGraph) -> Result<Box<dyn LinkPredictor>>,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(
            dir,
            encoder,
            "LpRag::load_with",
            &[PredictorSource::Custom, PredictorSource::Builtin],
        )?;
        let predictor = restore(&dir.join(PREDICTOR_DIR), &parts.graph)?;
        if predictor.name() != parts.manifest.predictor {
            return Err(Error::invalid(
                "LpRag::load_with (predictor)",
                format!(
                    "the index was built with the predictor '{}', the restored one is '{}'",
                    parts.manifest.predictor,
                    predictor.name()
                ),
            ));
        }
        Ok(parts.finish(Arc::from(predictor), ComputeDevice::Cpu))
    }

    /// Load an index saved by [`LpRag::save`] that was built with the training-free
    /// [`LinkScorer`] `scorer` ([`LpRagBuilder::scorer`](crate::LpRagBuilder::scorer)); its name must match the one
    /// recorded in the index.
    ///
    /// # Errors
    /// Those of [`LpRag::load`], and [`Error::InvalidInput`] for another scorer's name.
    pub fn load_with_scorer(
        dir: impl AsRef<Path>,
        encoder: Arc<dyn Encoder>,
        scorer: impl LinkScorer + 'static,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let parts = Parts::read(
            dir,
            encoder,
            "LpRag::load_with_scorer",
            &[PredictorSource::Scorer],
        )?;
        if scorer.name() != parts.manifest.predictor {
            return Err(Error::invalid(
                "LpRag::load_with_scorer",
                format!(
                    "the index was built with the scorer '{}', not '{}'",
                    parts.manifest.predictor,
                    scorer.name()
                ),
            ));
        }
        let predictor = Arc::new(ScorerPredictor {
            scorer: Arc::new(scorer),
            graph: parts.graph.clone(),
            search: parts.search.clone(),
        });
        Ok(parts.finish(predictor, ComputeDevice::Cpu))
    }
}

/// How [`LpRag::open_to_answer`] opens an index: the encoder (the index's built-in one
/// when `None`), the device the predictor scores on, and a chunk store to find the
/// queries' nearest chunks in.
#[derive(Clone, Default)]
pub struct AnswerOptions {
    /// The encoder the index was built with; `None` rebuilds the index's built-in one.
    pub encoder: Option<Arc<dyn Encoder>>,
    /// Where the built-in predictor scores.
    pub device: ComputeDevice,
    /// A store holding the index's chunks ([`LpRag::write_store`]), attached as
    /// [`LpRag::attach_store`] does; the in-memory candidate search is then never built.
    pub store: Option<Arc<dyn ChunkStore>>,
    /// Hold no chunk row at all: each query reads the rows its scores need (a few hundred:
    /// the candidates' and those around the chunks it joins) from
    /// [`AnswerOptions::store`], which must keep the predictor's representations
    /// ([`LpRag::write_store`] into a store made with them). The process then holds the
    /// records (unless [`AnswerOptions::records_from_store`]), the chunk graph's edges and
    /// the weights. Needs a predictor that joins
    /// each query to its nearest chunks (the default), and a candidate pool smaller than
    /// the corpus ([`LpRag::set_candidates`]; a query scoring every chunk is refused). At
    /// open, a sample of the store's representations is recomputed from its vectors, so
    /// a store written from another training is refused.
    pub rows_from_store: bool,
    /// Hold no chunk record (text, provenance, metadata): each query reads the records of
    /// the chunks it returns from [`AnswerOptions::store`], and of the chunks its filter
    /// must check beyond the store's filtered search (the pool's graph neighbours). At
    /// open, `chunks.json` is read one record at a time for each chunk's document and the
    /// sample compared with the store; [`LpRag::chunks`] is then empty
    /// ([`LpRag::num_chunks`] counts them). A filtered query that scores every chunk (no
    /// candidate pool) is refused.
    pub records_from_store: bool,
    /// Read the chunk rows through a memory map of the index's `graph.bin` instead of
    /// copying them to the heap (with [`AnswerOptions::rows_from_store`], which reads no
    /// row, there is nothing to map), and the column-wise copy for the candidate scan
    /// through a map of `columns.bin` when the index saved one
    /// ([`LpRag::columns_mapped`]), and the predictor's cached chunk representations
    /// through a map of `representations.bin` ([`LpRag::representations_mapped`]). The
    /// kernel's page cache then holds the rows in use,
    /// shared by every process answering from the same index, and can drop the rest when
    /// memory runs short. The index directory must not be changed in place while the
    /// index lives ([`LpRag::save`] replaces files by renaming, which is fine); an index
    /// saved before graph files were aligned for mapping has its rows read to the heap.
    pub map_rows: bool,
}

impl std::fmt::Debug for AnswerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerOptions")
            .field("encoder", &self.encoder.as_ref().map(|e| e.name()))
            .field("device", &self.device)
            .field("store", &self.store.is_some())
            .field("rows_from_store", &self.rows_from_store)
            .field("records_from_store", &self.records_from_store)
            .field("map_rows", &self.map_rows)
            .finish()
    }
}

impl LpRag {
    /// Open the index saved in `dir` (built-in predictor) to answer queries only: the
    /// answers are the whole index's, but what only building, training and updating read
    /// stays on disk — the synthetic questions, their embedding rows (two thirds of the
    /// graph's features with the default two questions per chunk) and the k-NN lists —
    /// and the predictor serves on the index's chunk rows instead of a second copy.
    /// With [`AnswerOptions::store`], the candidates come from the store and the in-memory
    /// search structure (by default a column-wise copy of the chunk rows from 10,000
    /// chunks on) is never built. Updates, [`LpRag::retrain`] and [`LpRag::save`] are refused
    /// ([`LpRag::answers_only`]).
    ///
    /// The files are read on the calling task (as [`LpRag::open`] reads them); only the
    /// store's checks are awaited.
    ///
    /// # Errors
    /// Those of [`LpRag::open`] and [`LpRag::load`]; [`Error::InvalidInput`] for an index
    /// whose predictor is not the built-in GNN (VGAE, PEG, SEAL, custom predictors and
    /// scorers: open those with [`LpRag::open`] or the loader their message names), and
    /// those of [`LpRag::attach_store`]; with [`AnswerOptions::rows_from_store`],
    /// [`Error::InvalidInput`] without a store, for a store without this model's
    /// representations (missing, of another width, or from another training: a sample is
    /// recomputed), or for a predictor that joins every chunk; with
    /// [`AnswerOptions::records_from_store`], [`Error::InvalidInput`] without a store and
    /// [`Error::Format`] when `chunks.json` holds another count of records than the
    /// manifest says.
    pub async fn open_to_answer(dir: impl AsRef<Path>, options: AnswerOptions) -> Result<Self> {
        const HERE: &str = "LpRag::open_to_answer";
        let dir = dir.as_ref();
        options.device.to_burn()?;
        let manifest = read_manifest(dir)?;
        let builtin_gnn = manifest.predictor_source == PredictorSource::Builtin
            && matches!(manifest.config.predictor, BuiltinPredictor::Gnn);
        if !builtin_gnn {
            return Err(Error::invalid(
                HERE,
                format!(
                    "the index in {} ranks with '{}'; opening to answer only serves the \
                     built-in GNN predictor: open it with {}",
                    dir.display(),
                    manifest.predictor,
                    manifest.predictor_source.how_to_load()
                ),
            ));
        }
        if options.records_from_store && options.store.is_none() {
            return Err(Error::invalid(
                HERE,
                "AnswerOptions::records_from_store reads the records from \
                 AnswerOptions::store: give a store",
            ));
        }
        let (chunks, mut streamed) = if options.records_from_store {
            // Only a fitted encoder reads the texts (once, here).
            let texts = options.encoder.is_none()
                && matches!(
                    manifest.default_encoder,
                    Some(DefaultEncoder::FittedHashing { .. })
                );
            let streamed = stream_records(&dir.join(CHUNKS), manifest.stats.chunks, texts)?;
            (Vec::new(), Some(streamed))
        } else {
            (read_json::<Vec<Chunk>>(&dir.join(CHUNKS))?, None)
        };
        let encoder = match options.encoder {
            Some(encoder) => encoder,
            None => rebuilt_encoder(
                dir,
                &manifest,
                || match &mut streamed {
                    Some(s) => std::mem::take(&mut s.texts),
                    None => chunks.iter().map(Chunk::embedding_text).collect(),
                },
                HERE,
                "pass it in AnswerOptions::encoder",
            )?,
        };
        let opened = Opened {
            chunks: Some(chunks),
            records: streamed.map(|s| (s.records, s.parents)),
            answer_only: true,
            in_memory_search: options.store.is_none(),
            no_rows: options.rows_from_store,
            map_rows: options.map_rows,
        };
        if options.rows_from_store {
            let Some(store) = options.store else {
                return Err(Error::invalid(
                    HERE,
                    "AnswerOptions::rows_from_store reads the rows from AnswerOptions::store: \
                     give a store",
                ));
            };
            let parts = Parts::read_as(dir, encoder, HERE, &[PredictorSource::Builtin], opened)?;
            let mut rag = parts.finish_rows_in_store(dir, options.device)?;
            rag.attach_rows_store(store, HERE).await?;
            return Ok(rag);
        }
        let parts = Parts::read_as(dir, encoder, HERE, &[PredictorSource::Builtin], opened)?;
        let mut rag = parts.finish_builtin(dir, options.device)?;
        if let Some(store) = options.store {
            rag.attach_store(store).await?;
        }
        Ok(rag)
    }
}

/// The index's built-in encoder rebuilt from its manifest and its `chunks`;
/// [`Error::InvalidInput`] for `loader`, ending with `how` to load it, when the index was
/// built with a custom encoder.
fn rebuilt_encoder(
    dir: &Path,
    manifest: &Manifest,
    texts: impl FnOnce() -> Vec<String>,
    loader: &str,
    how: &str,
) -> Result<Arc<dyn Encoder>> {
    let Some(spec) = &manifest.default_encoder else {
        return Err(Error::invalid(
            loader,
            format!(
                "the index in {} was built with the custom encoder '{}'; {how}",
                dir.display(),
                manifest.encoder
            ),
        ));
    };
    spec.rebuild(&texts())
}

/// What [`stream_records`] keeps of `chunks.json`.
struct StreamedRecords {
    records: RecordsInStore,
    parents: Parents,
    /// The chunks' embedding texts, when asked for (a fitted encoder's corpus).
    texts: Vec<String>,
}

/// `chunks.json` read one record at a time ([`AnswerOptions::records_from_store`]): each
/// chunk's document, the records of the sample checked against the store, and, with
/// `texts`, the embedding texts; no other record is held. `expected` is the manifest's
/// count, which picks the sample.
fn stream_records(path: &Path, expected: usize, texts: bool) -> Result<StreamedRecords> {
    use serde::de::{Deserializer as _, SeqAccess, Visitor};

    struct Each<'a> {
        sample_ids: &'a [ChunkId],
        texts: bool,
        out: &'a mut StreamedRecords,
        parents: &'a mut ParentsBuilder,
    }
    impl<'de> Visitor<'de> for Each<'_> {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of chunk records")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<usize, A::Error> {
            let mut n = 0;
            let mut next_sample = 0;
            while let Some(chunk) = seq.next_element::<Chunk>()? {
                self.parents.push(&chunk.provenance.document_id);
                if self.texts {
                    self.out.texts.push(chunk.embedding_text());
                }
                if self.sample_ids.get(next_sample) == Some(&n) {
                    next_sample += 1;
                    self.out.records.sample.push(chunk);
                }
                n += 1;
            }
            Ok(n)
        }
    }

    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let sample_ids = spread_ids(CHECKED_CHUNKS, expected);
    let mut out = StreamedRecords {
        records: RecordsInStore {
            len: 0,
            sample_ids: sample_ids.clone(),
            sample: Vec::with_capacity(sample_ids.len()),
        },
        parents: Parents::default(),
        texts: Vec::new(),
    };
    let mut parents = ParentsBuilder::default();
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, file));
    let n = de
        .deserialize_seq(Each {
            sample_ids: &sample_ids,
            texts,
            out: &mut out,
            parents: &mut parents,
        })
        .and_then(|n| de.end().map(|()| n))
        .map_err(|e| Error::format(path, e.to_string()))?;
    if n != expected {
        return Err(Error::format(
            path,
            format!("{n} chunk records, the manifest says {expected}"),
        ));
    }
    out.records.len = n;
    out.parents = parents.finish();
    Ok(out)
}

/// What [`Parts::read_as`] reads besides the manifest and the graph's chunk rows.
struct Opened {
    /// The chunk records, when the caller read them already.
    chunks: Option<Vec<Chunk>>,
    /// The records are the store's: what was kept of them (`chunks` is then empty).
    records: Option<(RecordsInStore, Parents)>,
    /// Only what answering needs: the graph's chunk nodes, no questions, no k-NN lists.
    answer_only: bool,
    /// Build the in-memory candidate search the configuration asks for (else exact scans
    /// over the chunk rows, for a store to replace).
    in_memory_search: bool,
    /// Read no feature row: only the edges between chunks (the rows are a store's).
    no_rows: bool,
    /// Map the chunk rows from the graph file instead of reading them to the heap
    /// ([`AnswerOptions::map_rows`]; with `answer_only`).
    map_rows: bool,
}

impl Default for Opened {
    fn default() -> Self {
        Self {
            chunks: None,
            records: None,
            answer_only: false,
            in_memory_search: true,
            no_rows: false,
            map_rows: false,
        }
    }
}

/// An index read from disk, before its ranking model is restored.
pub(super) struct Parts {
    manifest: Manifest,
    chunks: Vec<Chunk>,
    queries: Vec<SyntheticQuery>,
    graph: Arc<LinkGraph>,
    search: Arc<CandidateSearch>,
    encoder: Arc<dyn Encoder>,
    knn: Option<Arc<KnnLists>>,
    answer_only: bool,
    /// The edges between chunks, when no row was read ([`Opened::no_rows`]).
    chunk_edges: Option<lprag_graph::ChunkEdges>,
    /// What was kept of the records when they are the store's ([`Opened::records`]).
    records: Option<RecordsInStore>,
    /// The chunks' documents, made while the records were streamed.
    parents: Option<Parents>,
    /// Map saved rows instead of reading them ([`AnswerOptions::map_rows`]).
    map_rows: bool,
}

impl Parts {
    /// Read and check everything but the predictor for `loader`; the index must have been
    /// built with a model of an `accepted` kind.
    fn read(
        dir: &Path,
        encoder: Arc<dyn Encoder>,
        loader: &str,
        accepted: &[PredictorSource],
    ) -> Result<Self> {
        Self::read_as(dir, encoder, loader, accepted, Opened::default())
    }

    /// [`Parts::read`], reading what `opened` says.
    fn read_as(
        dir: &Path,
        encoder: Arc<dyn Encoder>,
        loader: &str,
        accepted: &[PredictorSource],
        opened: Opened,
    ) -> Result<Self> {
        let manifest = read_manifest(dir)?;
        if !accepted.contains(&manifest.predictor_source) {
            return Err(Error::invalid(
                format!("{loader} (predictor)"),
                format!(
                    "the index in {} was built with the {} '{}'; load it with {}",
                    dir.display(),
                    match manifest.predictor_source {
                        PredictorSource::Builtin => "built-in predictor",
                        PredictorSource::Custom => "custom predictor",
                        PredictorSource::Scorer => "training-free scorer",
                    },
                    manifest.predictor,
                    manifest.predictor_source.how_to_load()
                ),
            ));
        }
        if manifest.encoder != encoder.name() || manifest.dimension != encoder.dimension() {
            return Err(Error::invalid(
                "LpRag::load (encoder)",
                format!(
                    "index was built with encoder '{}' ({} dims) but '{}' ({} dims) was given",
                    manifest.encoder,
                    manifest.dimension,
                    encoder.name(),
                    encoder.dimension()
                ),
            ));
        }
        check_fingerprint(
            "LpRag::load (encoder)",
            manifest.encoder_fingerprint.as_deref(),
            &*encoder,
        )?;
        let chunks: Vec<Chunk> = match opened.chunks {
            Some(chunks) => chunks,
            None => read_json(&dir.join(CHUNKS))?,
        };
        let (queries, graph, chunk_edges) = if opened.no_rows {
            let edges = lprag_graph::load_link_graph_chunk_edges(dir.join(GRAPH))?;
            let empty = LinkGraph {
                features: Embeddings::empty(edges.dim),
                num_chunks: 0,
                edges: Vec::new(),
            };
            (Vec::new(), empty, Some(edges))
        } else if opened.answer_only {
            let graph = if opened.map_rows {
                lprag_graph::map_link_graph_chunks(dir.join(GRAPH))?
            } else {
                lprag_graph::load_link_graph_chunks(dir.join(GRAPH))?
            };
            (Vec::new(), graph, None)
        } else {
            let queries: Vec<SyntheticQuery> = read_json(&dir.join(QUERIES))?;
            (
                queries,
                lprag_graph::load_link_graph(dir.join(GRAPH))?,
                None,
            )
        };
        let graph_chunks = chunk_edges
            .as_ref()
            .map_or(graph.num_chunks, |e| e.num_chunks);
        let (records, parents) = opened.records.unzip();
        let num_records = records.as_ref().map_or(chunks.len(), |r| r.len);
        if graph_chunks != num_records {
            return Err(Error::format(
                dir.join(GRAPH),
                format!("graph has {graph_chunks} chunks, chunks.json has {num_records}"),
            ));
        }
        // The k-NN lists are optional (indexes saved before incremental updates have
        // none; the first update computes them), but a file that is there must be sound.
        let knn_path = dir.join(KNN);
        let knn = if knn_path.exists() && !opened.answer_only {
            let lists = lprag_graph::load_knn_lists(&knn_path)?;
            if lists.len() != chunks.len() {
                return Err(Error::format(
                    knn_path,
                    format!("{} k-NN lists for {} chunks", lists.len(), chunks.len()),
                ));
            }
            Some(Arc::new(lists))
        } else {
            None
        };
        let search = Arc::new(if opened.in_memory_search && !opened.no_rows {
            open_search(dir, &graph, &manifest.config, opened.map_rows)?
        } else {
            CandidateSearch::exact(&graph)
        });
        Ok(Self {
            manifest,
            chunks,
            queries,
            search,
            graph: Arc::new(graph),
            encoder,
            knn,
            answer_only: opened.answer_only,
            chunk_edges,
            records,
            parents,
            map_rows: opened.map_rows,
        })
    }

    /// [`Parts::finish`] for an index reading its rows from a store: the built-in
    /// predictor's weights over the chunk graph's edges ([`GnnRowScorer`]), no row held.
    fn finish_rows_in_store(mut self, dir: &Path, device: ComputeDevice) -> Result<LpRag> {
        let Some(edges) = self.chunk_edges.take() else {
            return Err(Error::invalid(
                "LpRag::open_to_answer",
                "the chunk graph's edges were not read",
            ));
        };
        let scorer =
            GnnRowScorer::from_dir(&dir.join(PREDICTOR_DIR), edges.num_chunks, &edges.edges)?;
        let rows = StoreRows {
            neighbours: lprag_graph::neighbour_lists(edges.num_chunks, &edges.edges),
            scorer,
        };
        let predictor = Arc::new(RowsInStore {
            name: self.manifest.predictor.clone(),
        });
        let mut rag = self.finish(predictor, device);
        rag.rows = Some(Arc::new(rows));
        Ok(rag)
    }

    /// [`Parts::finish`] with the built-in predictor restored from the index in `dir`,
    /// scoring on `device`. The built-in GNN's cached representations are read back from
    /// the index when it saved them (mapped with [`AnswerOptions::map_rows`]), else
    /// computed.
    fn finish_builtin(self, dir: &Path, device: ComputeDevice) -> Result<LpRag> {
        let stored = match self.manifest.config.predictor {
            BuiltinPredictor::Gnn => representations::read(dir, &self.graph, self.map_rows)?,
            _ => None,
        };
        let predictor = BuiltinPredictor::restore(
            &self.manifest.config,
            &dir.join(PREDICTOR_DIR),
            &self.graph,
            device,
            stored,
        )?;
        Ok(self.finish(predictor, device))
    }

    fn finish(self, predictor: Arc<dyn LinkPredictor>, device: ComputeDevice) -> LpRag {
        LpRag {
            parents: Arc::new(self.parents.unwrap_or_else(|| Parents::of(&self.chunks))),
            chunks: self.chunks,
            queries: self.queries,
            search: self.search,
            graph: self.graph,
            encoder: self.encoder,
            default_encoder: self.manifest.default_encoder,
            predictor,
            source: self.manifest.predictor_source,
            config: self.manifest.config,
            stats: self.manifest.stats,
            knn: self.knn,
            device,
            store: None,
            answer_only: self.answer_only,
            rows: None,
            records: self.records,
        }
    }
}

/// The manifest of the index in `dir`, its format version checked.
pub(super) fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    check_version(&path, &bytes, "format_version", INDEX_FORMAT_VERSION)?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(&path, e.to_string()))?;
    if manifest.format_version != INDEX_FORMAT_VERSION {
        return Err(Error::format(
            dir.join(MANIFEST),
            format!(
                "index format version {}, this build reads version {INDEX_FORMAT_VERSION}",
                manifest.format_version
            ),
        ));
    }
    Ok(manifest)
}

mod erased {
    /// Object-safe JSON serialisation for the save helper.
    pub trait Json {
        fn write_json(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()>;
    }
    impl<T: serde::Serialize> Json for T {
        fn write_json(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

/// The JSON file at `path`, parsed from a read-only memory map of it rather than a copy on
/// the heap (`chunks.json` is 0.6 GB at a million chunks: the map's pages are the kernel's
/// to drop, and the parse is as fast as from a buffer). lprag replaces its files by
/// renaming, never in place; a file truncated by another process while it is parsed would
/// fault, as any mapped file.
pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return serde_json::from_slice(&[]).map_err(|e| Error::format(path, e.to_string()));
    }
    // SAFETY: a read-only map of a file lprag never writes in place (see above), parsed
    // once and dropped; the parser only reads bytes.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&map).map_err(|e| Error::format(path, e.to_string()))
}

/// The candidate search of an index saved in `dir`: its proximity graph read back when
/// the configuration asks for one and the file is there (a saved index made before the
/// graph, or by an older version, links its chunks now); its column-wise copy read back
/// (memory-mapped with `map`) when that is the search and `columns.bin` is there (its
/// checksum verified, and bound to `graph.bin`'s); else made as at build time.
fn open_search(
    dir: &Path,
    graph: &LinkGraph,
    config: &LpRagConfig,
    map: bool,
) -> Result<CandidateSearch> {
    let columns = dir.join(COLUMNS);
    let scans_columns = config.candidate_graph.is_none()
        && CandidateSearch::scans_columns_for(
            config.candidate_index.as_ref(),
            config.column_scan_from,
            graph.num_chunks,
        );
    if scans_columns && columns.exists() {
        let source = lprag_graph::link_graph_checksum(dir.join(GRAPH))?;
        let (rows, dim) = (graph.num_chunks, graph.features.dim());
        let index = lprag_graph::ColumnIndex::open_file(&columns, rows, dim, source, map)?;
        return Ok(CandidateSearch::with_column_index(graph, index)?);
    }
    let path = dir.join(CANDIDATE_GRAPH);
    match &config.candidate_graph {
        Some(params) if path.exists() => {
            params.validate()?;
            let lists = lprag_graph::load_knn_lists(&path)?;
            let index =
                lprag_graph::GraphIndex::from_link_lists(&lists, graph.features.dim(), params)
                    .map_err(|e| Error::format(&path, e.to_string()))?;
            CandidateSearch::with_graph_index(graph, index)
                .map_err(|e| Error::format(&path, e.to_string()))
        }
        _ => search_for(graph, config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_version_reads_the_version_before_the_body() {
        let p = Path::new("/x.json");
        assert!(check_version(p, br#"{"a":[1,2],"version":1,"b":{}}"#, "version", 1).is_ok());
        let err = check_version(p, br#"{"a":[1,2],"version":3}"#, "version", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("format version 3"), "{err}");
        assert!(check_version(p, br#"{"a":1}"#, "version", 1).is_ok());
        assert!(check_version(p, b"[1,2]", "version", 1).is_err());
    }
}
