//! # lprag-lance
//!
//! A [`ChunkStore`] in a LanceDB table: chunk records, their vectors and (optionally) the
//! trained model's cached representations as columns of one versioned Lance dataset in a
//! local directory, searched by LanceDB's vector search with
//! [`Filter`]s turned into SQL predicates ([`filter_sql`]) and pushed into the engine.
//!
//! ```no_run
//! # async fn demo(batch: lprag_core::ChunkBatch, query: Vec<f32>) -> lprag_core::Result<()> {
//! use lprag_core::{ChunkStore, Filter};
//! use lprag_lance::{LanceStore, StoreSpec, VectorIndex};
//!
//! let store = LanceStore::create("data/chunks", StoreSpec::new(1024)).await?;
//! store.append(batch).await?; // one new table version
//! store.build_index(VectorIndex::default()).await?;
//! let hits = store.nearest(&query, 10, &Filter::eq("lang", "en")).await?;
//! # Ok(()) }
//! ```
//!
//! Versions: every append is one Lance commit. A [`LanceStore`] reads the version it was
//! opened at (or last wrote, or last [`ChunkStore::refresh`]ed to), so a process that
//! answers queries while another adds documents never sees part of a batch. One process
//! writes at a time (ids are dense and given by the writer); a second writer's batch is
//! refused with an error when the two interleave.
#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, RwLock};

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray, UInt64Array};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use futures::TryStreamExt;
use lancedb::index::scalar::{BTreeIndexBuilder, LabelListIndexBuilder};
use lancedb::index::vector::{IvfHnswSqIndexBuilder, IvfPqIndexBuilder};
use lancedb::index::Index;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::{Connection, DistanceType, Table};
use lprag_core::{
    check_store_ids, check_store_query, Chunk, ChunkBatch, ChunkId, ChunkStore, Embeddings, Error,
    Filter, Provenance, Result, StoreVersion,
};

/// The table name a [`StoreSpec`] uses unless told otherwise.
pub const DEFAULT_TABLE: &str = "chunks";

/// The schema-metadata key that marks a table as an lprag chunk store, and its value.
const MARK_KEY: &str = "lprag.store";
const MARK_VALUE: &str = "chunks/1";

const COLUMNS: [&str; 7] = [
    "id",
    "text",
    "document_id",
    "title",
    "span_start",
    "span_end",
    "metadata",
];

/// What a new store looks like: its vector width, representation width and table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    /// Width of the chunk vectors.
    pub dim: usize,
    /// Width of the cached representations; `None` keeps none.
    pub representation_dim: Option<usize>,
    /// The Lance table's name inside the database directory.
    pub table: String,
}

impl StoreSpec {
    /// A store of `dim`-wide vectors without representations, in table [`DEFAULT_TABLE`].
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            representation_dim: None,
            table: DEFAULT_TABLE.to_string(),
        }
    }

    /// Keep `dim`-wide representations too.
    pub fn with_representations(mut self, dim: usize) -> Self {
        self.representation_dim = Some(dim);
        self
    }

    /// Use table `name`.
    pub fn with_table(mut self, name: impl Into<String>) -> Self {
        self.table = name.into();
        self
    }
}

/// The vector index [`LanceStore::build_index`] builds (cosine distance), as LanceDB
/// names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorIndex {
    /// IVF partitions, each an HNSW graph over 8-bit scalar-quantised vectors.
    IvfHnswSq {
        /// IVF partitions (`None`: LanceDB's choice from the row count).
        partitions: Option<u32>,
        /// HNSW edges per node.
        m: u32,
        /// HNSW beam while building.
        ef_construction: u32,
    },
    /// IVF partitions of product-quantised vectors.
    IvfPq {
        /// IVF partitions (`None`: LanceDB's choice from the row count).
        partitions: Option<u32>,
        /// PQ sub-vectors (`None`: LanceDB's choice from the width).
        sub_vectors: Option<u32>,
    },
}

impl Default for VectorIndex {
    /// [`VectorIndex::IvfHnswSq`] with LanceDB's partitions, `m` 20 and
    /// `ef_construction` 300 (LanceDB's defaults).
    fn default() -> Self {
        VectorIndex::IvfHnswSq {
            partitions: None,
            m: 20,
            ef_construction: 300,
        }
    }
}

/// How [`ChunkStore::nearest`] searches once a vector index exists (ignored before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SearchParams {
    /// IVF partitions to probe (`None`: LanceDB's default).
    pub nprobes: Option<usize>,
    /// HNSW beam at query time (`None`: LanceDB's default, 1.5 × k).
    pub ef: Option<usize>,
    /// Re-rank `refine_factor × k` quantised hits on the full vectors (`None`: no re-rank).
    pub refine_factor: Option<u32>,
}

/// One version of the table, pinned (a checked-out handle never moves).
#[derive(Debug)]
struct Pinned {
    table: Table,
    version: StoreVersion,
    len: usize,
}

/// A [`ChunkStore`] in a LanceDB table (see the crate docs).
pub struct LanceStore {
    uri: String,
    name: String,
    conn: Connection,
    dim: usize,
    representation_dim: Option<usize>,
    schema: SchemaRef,
    pinned: RwLock<Arc<Pinned>>,
    writer: tokio::sync::Mutex<()>,
    search: RwLock<SearchParams>,
}

impl std::fmt::Debug for LanceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.pinned();
        f.debug_struct("LanceStore")
            .field("uri", &self.uri)
            .field("table", &self.name)
            .field("dim", &self.dim)
            .field("representation_dim", &self.representation_dim)
            .field("version", &p.version)
            .field("len", &p.len)
            .finish()
    }
}

fn lance_err(what: &str) -> impl FnOnce(lancedb::Error) -> Error + '_ {
    move |e| Error::Backend {
        component: format!("lance store ({what})"),
        source: Box::new(e),
    }
}

fn arrow_err(what: &str) -> impl FnOnce(arrow_schema::ArrowError) -> Error + '_ {
    move |e| Error::Backend {
        component: format!("lance store ({what})"),
        source: Box::new(e),
    }
}

fn format_err(uri: &str, message: impl Into<String>) -> Error {
    Error::Format {
        path: uri.into(),
        message: message.into(),
    }
}

/// The Arrow schema of a store of `dim`-wide vectors (and representations).
fn schema_for(dim: usize, representation_dim: Option<usize>) -> Result<SchemaRef> {
    let width = |d: usize, at: &str| {
        i32::try_from(d).map_err(|_| Error::InvalidInput {
            location: at.into(),
            message: format!("width {d} does not fit a Lance vector column"),
        })
    };
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let list = Arc::new(Field::new("item", DataType::Utf8, true));
    let mut fields = vec![
        Field::new("id", DataType::UInt64, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("document_id", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("span_start", DataType::UInt64, false),
        Field::new("span_end", DataType::UInt64, false),
        Field::new("metadata", DataType::Utf8, false),
        Field::new("meta_pairs", DataType::List(list.clone()), false),
        Field::new("meta_keys", DataType::List(list), false),
        Field::new(
            "vector",
            DataType::FixedSizeList(item.clone(), width(dim, "StoreSpec::dim")?),
            false,
        ),
    ];
    if let Some(rd) = representation_dim {
        fields.push(Field::new(
            "representation",
            DataType::FixedSizeList(item, width(rd, "StoreSpec::representation_dim")?),
            true,
        ));
    }
    let meta = HashMap::from([(MARK_KEY.to_string(), MARK_VALUE.to_string())]);
    Ok(Arc::new(Schema::new_with_metadata(fields, meta)))
}

/// A metadata pair as the `meta_pairs` column holds it: the JSON array `[key, value]`
/// (no separator a key or value could contain).
fn pair_token(key: &str, value: &str) -> String {
    serde_json::to_string(&(key, value)).unwrap_or_default()
}

/// A string as a SQL literal: single quotes, inner quotes doubled.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn sql_list<'a>(
    items: impl IntoIterator<Item = &'a String>,
    token: impl Fn(&str) -> String,
) -> String {
    let parts: Vec<String> = items.into_iter().map(|s| sql_string(&token(s))).collect();
    format!("[{}]", parts.join(", "))
}

/// `filter` as the SQL predicate the store's table answers: metadata pairs and keys are
/// label-list columns (`array_has_any`), documents the `document_id` column. `None` for a
/// filter that admits everything (no predicate to push).
pub fn filter_sql(filter: &Filter) -> Option<String> {
    if filter.is_all() {
        return None;
    }
    Some(predicate(filter))
}

fn predicate(filter: &Filter) -> String {
    match filter {
        Filter::All => "TRUE".into(),
        Filter::Eq { key, value } => format!(
            "array_has_any(meta_pairs, [{}])",
            sql_string(&pair_token(key, value))
        ),
        Filter::In { values, .. } if values.is_empty() => "FALSE".into(),
        Filter::In { key, values } => format!(
            "array_has_any(meta_pairs, {})",
            sql_list(values, |v| pair_token(key, v))
        ),
        Filter::Exists { key } => {
            format!("array_has_any(meta_keys, [{}])", sql_string(key))
        }
        Filter::Documents(ids) if ids.is_empty() => "FALSE".into(),
        Filter::Documents(ids) => {
            let parts: Vec<String> = ids.iter().map(|s| sql_string(s)).collect();
            format!("document_id IN ({})", parts.join(", "))
        }
        Filter::Not(inner) => format!("NOT ({})", predicate(inner)),
        Filter::And(all) if all.is_empty() => "TRUE".into(),
        Filter::And(all) => join(all, "AND"),
        Filter::Or(any) if any.is_empty() => "FALSE".into(),
        Filter::Or(any) => join(any, "OR"),
    }
}

fn join(parts: &[Filter], op: &str) -> String {
    let parts: Vec<String> = parts
        .iter()
        .map(|f| format!("({})", predicate(f)))
        .collect();
    parts.join(&format!(" {op} "))
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| Error::Format {
            path: name.into(),
            message: format!("the store's result has no column {name} of the expected type"),
        })
}

fn floats(list: &FixedSizeListArray, row: usize) -> Result<Vec<f32>> {
    let v = list.value(row);
    let f = v
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| Error::Format {
            path: "vector".into(),
            message: "a vector column that is not float32".into(),
        })?;
    Ok(f.values().to_vec())
}

impl LanceStore {
    /// Create a new store: a Lance table `spec.table` in the database at `uri` (a local
    /// directory, created if missing; this crate enables none of LanceDB's object-store
    /// backends yet). The store reads its first (empty) version.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the table exists already (nothing is touched: open it
    /// with [`LanceStore::open`]) or for a width of 0; LanceDB's own failures as
    /// [`Error::Backend`].
    pub async fn create(uri: &str, spec: StoreSpec) -> Result<Self> {
        if spec.dim == 0 || spec.representation_dim == Some(0) {
            return Err(Error::InvalidInput {
                location: "StoreSpec".into(),
                message: "vector and representation widths must be at least 1".into(),
            });
        }
        let schema = schema_for(spec.dim, spec.representation_dim)?;
        let conn = lancedb::connect(uri)
            .execute()
            .await
            .map_err(lance_err("connect"))?;
        let names = conn
            .table_names()
            .execute()
            .await
            .map_err(lance_err("list tables"))?;
        if names.iter().any(|n| n == &spec.table) {
            return Err(Error::InvalidInput {
                location: format!("{uri} table {}", spec.table),
                message: "the table exists already; nothing was changed (open it instead)".into(),
            });
        }
        conn.create_empty_table(&spec.table, schema.clone())
            .execute()
            .await
            .map_err(lance_err("create table"))?;
        Self::connect(uri, conn, spec.table).await
    }

    /// Open the store in table `table` of the database at `uri`, reading its newest
    /// version.
    ///
    /// # Errors
    /// [`Error::Format`] when the table is not an lprag chunk store (it lacks the schema
    /// mark [`LanceStore::create`] writes, or a column), LanceDB's own failures (a missing
    /// table among them) as [`Error::Backend`].
    pub async fn open(uri: &str, table: &str) -> Result<Self> {
        let conn = lancedb::connect(uri)
            .execute()
            .await
            .map_err(lance_err("connect"))?;
        Self::connect(uri, conn, table.to_string()).await
    }

    async fn connect(uri: &str, conn: Connection, name: String) -> Result<Self> {
        let table = open_latest(&conn, &name).await?;
        let schema = table.schema().await.map_err(lance_err("read schema"))?;
        if schema.metadata().get(MARK_KEY).map(String::as_str) != Some(MARK_VALUE) {
            return Err(format_err(
                uri,
                format!(
                    "table {name} is not an lprag chunk store ({MARK_KEY} is not {MARK_VALUE})"
                ),
            ));
        }
        let width = |col: &str| -> Result<Option<usize>> {
            match schema.field_with_name(col) {
                Ok(f) => match f.data_type() {
                    DataType::FixedSizeList(_, n) => Ok(Some(*n as usize)),
                    other => Err(format_err(
                        uri,
                        format!("column {col} is {other}, not a vector"),
                    )),
                },
                Err(_) => Ok(None),
            }
        };
        let dim = width("vector")?.ok_or_else(|| format_err(uri, "no vector column"))?;
        let representation_dim = width("representation")?;
        let expected = schema_for(dim, representation_dim)?;
        for f in expected.fields() {
            if schema.field_with_name(f.name()).ok().map(|g| g.data_type()) != Some(f.data_type()) {
                return Err(format_err(
                    uri,
                    format!("column {} is missing or of another type", f.name()),
                ));
            }
        }
        let pinned = pin(&conn, &name, None).await?;
        Ok(Self {
            uri: uri.to_string(),
            name,
            conn,
            dim,
            representation_dim,
            schema: expected,
            pinned: RwLock::new(Arc::new(pinned)),
            writer: tokio::sync::Mutex::new(()),
            search: RwLock::new(SearchParams::default()),
        })
    }

    /// The database URI this store was opened at.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.name
    }

    /// Set how [`ChunkStore::nearest`] searches once a vector index exists.
    pub fn set_search(&self, params: SearchParams) {
        *self.search.write().unwrap_or_else(|e| e.into_inner()) = params;
    }

    /// Move this handle to `version` (an older one, for a reproducible read).
    ///
    /// # Errors
    /// LanceDB's, for a version that does not exist.
    pub async fn checkout(&self, version: StoreVersion) -> Result<()> {
        let p = pin(&self.conn, &self.name, Some(version)).await?;
        self.set_pinned(p);
        Ok(())
    }

    /// Build `index` on the vectors (cosine), and label-list and B-tree indexes for the
    /// filter columns; a new version, which this handle then reads. Rows appended later
    /// are searched exactly beside the index until it is built again.
    ///
    /// # Errors
    /// LanceDB's (too few rows to train the index's partitions, say).
    pub async fn build_index(&self, index: VectorIndex) -> Result<StoreVersion> {
        let _w = self.writer.lock().await;
        let table = open_latest(&self.conn, &self.name).await?;
        let vector = match index {
            VectorIndex::IvfHnswSq {
                partitions,
                m,
                ef_construction,
            } => {
                let mut b = IvfHnswSqIndexBuilder::default()
                    .distance_type(DistanceType::Cosine)
                    .num_edges(m)
                    .ef_construction(ef_construction);
                if let Some(p) = partitions {
                    b = b.num_partitions(p);
                }
                Index::IvfHnswSq(b)
            }
            VectorIndex::IvfPq {
                partitions,
                sub_vectors,
            } => {
                let mut b = IvfPqIndexBuilder::default().distance_type(DistanceType::Cosine);
                if let Some(p) = partitions {
                    b = b.num_partitions(p);
                }
                if let Some(s) = sub_vectors {
                    b = b.num_sub_vectors(s);
                }
                Index::IvfPq(b)
            }
        };
        table
            .create_index(&["vector"], vector)
            .replace(true)
            .execute()
            .await
            .map_err(lance_err("build the vector index"))?;
        for col in ["meta_pairs", "meta_keys"] {
            table
                .create_index(&[col], Index::LabelList(LabelListIndexBuilder::default()))
                .replace(true)
                .execute()
                .await
                .map_err(lance_err("build a label-list index"))?;
        }
        table
            .create_index(&["document_id"], Index::BTree(BTreeIndexBuilder::default()))
            .replace(true)
            .execute()
            .await
            .map_err(lance_err("build the document index"))?;
        let p = pin(&self.conn, &self.name, None).await?;
        let version = p.version;
        self.set_pinned(p);
        Ok(version)
    }

    /// Whether the version this handle reads has a vector index on the chunk vectors
    /// ([`LanceStore::build_index`]; a resumed job skips building it again).
    ///
    /// # Errors
    /// LanceDB's own failures.
    pub async fn has_vector_index(&self) -> Result<bool> {
        let indices = self
            .pinned()
            .table
            .list_indices()
            .await
            .map_err(lance_err("list the indexes"))?;
        Ok(indices.iter().any(|i| i.columns == ["vector"]))
    }

    fn pinned(&self) -> Arc<Pinned> {
        self.pinned
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_pinned(&self, p: Pinned) {
        *self.pinned.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(p);
    }

    /// The rows of `ids` (deduplicated) with `columns`, as `id → (batch, row)`.
    async fn take(
        &self,
        p: &Pinned,
        ids: &[ChunkId],
        columns: &[&str],
    ) -> Result<(Vec<RecordBatch>, HashMap<usize, (usize, usize)>)> {
        check_store_ids(ids, p.len)?;
        let mut offsets: Vec<u64> = ids.iter().map(|&i| i as u64).collect();
        offsets.sort_unstable();
        offsets.dedup();
        let mut cols = vec!["id"];
        cols.extend_from_slice(columns);
        let mut at = HashMap::with_capacity(offsets.len());
        let take = p.table.take_offsets(offsets).select(Select::columns(&cols));
        let batches = collect(&take, "read rows").await?;
        for (b, batch) in batches.iter().enumerate() {
            let idc: &UInt64Array = column(batch, "id")?;
            for r in 0..batch.num_rows() {
                at.insert(idc.value(r) as usize, (b, r));
            }
        }
        if let Some(missing) = ids.iter().find(|i| !at.contains_key(i)) {
            return Err(format_err(
                &self.uri,
                format!("row {missing} of table {} does not hold chunk {missing} (was the table changed by another program?)", self.name),
            ));
        }
        Ok((batches, at))
    }

    fn record_batch(&self, batch: &ChunkBatch, start: usize) -> Result<RecordBatch> {
        let n = batch.chunks.len();
        let ids = UInt64Array::from_iter_values((start..start + n).map(|i| i as u64));
        let text = StringArray::from_iter_values(batch.chunks.iter().map(|c| c.text.as_str()));
        let docs = StringArray::from_iter_values(
            batch
                .chunks
                .iter()
                .map(|c| c.provenance.document_id.as_str()),
        );
        let titles =
            StringArray::from_iter_values(batch.chunks.iter().map(|c| c.provenance.title.as_str()));
        let starts = UInt64Array::from_iter_values(
            batch.chunks.iter().map(|c| c.provenance.span.start as u64),
        );
        let ends = UInt64Array::from_iter_values(
            batch.chunks.iter().map(|c| c.provenance.span.end as u64),
        );
        let mut metadata = Vec::with_capacity(n);
        let mut pairs = ListBuilder::new(StringBuilder::new());
        let mut keys = ListBuilder::new(StringBuilder::new());
        for c in &batch.chunks {
            metadata.push(
                serde_json::to_string(&c.metadata).map_err(|e| Error::InvalidInput {
                    location: format!("chunk metadata of {}", c.provenance.document_id),
                    message: e.to_string(),
                })?,
            );
            for (k, v) in &c.metadata {
                pairs.values().append_value(pair_token(k, v));
                keys.values().append_value(k);
            }
            pairs.append(true);
            keys.append(true);
        }
        let vectors = fixed_list(&batch.vectors, None)?;
        let mut columns: Vec<Arc<dyn Array>> = vec![
            Arc::new(ids),
            Arc::new(text),
            Arc::new(docs),
            Arc::new(titles),
            Arc::new(starts),
            Arc::new(ends),
            Arc::new(StringArray::from(metadata)),
            Arc::new(pairs.finish()),
            Arc::new(keys.finish()),
            Arc::new(vectors),
        ];
        if let Some(rd) = self.representation_dim {
            let reps = match &batch.representations {
                Some(r) => fixed_list(r, None)?,
                None => fixed_list(&Embeddings::new(rd, vec![0.0; n * rd])?, Some(n))?,
            };
            columns.push(Arc::new(reps));
        }
        RecordBatch::try_new(self.schema.clone(), columns).map_err(arrow_err("build a batch"))
    }
}

/// `m` as a fixed-size list column; `null_rows: Some(n)` makes its `n` rows null.
fn fixed_list(m: &Embeddings, null_rows: Option<usize>) -> Result<FixedSizeListArray> {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let values = Arc::new(Float32Array::from(m.as_slice().to_vec()));
    let nulls = null_rows.map(NullBuffer::new_null);
    FixedSizeListArray::try_new(item, m.dim() as i32, values, nulls)
        .map_err(arrow_err("build a vector column"))
}

/// Every batch `query` returns.
async fn collect(query: &impl ExecutableQuery, what: &str) -> Result<Vec<RecordBatch>> {
    query
        .execute()
        .await
        .map_err(lance_err(what))?
        .try_collect()
        .await
        .map_err(lance_err(what))
}

/// Table `name` at its newest version (a handle that writes, or that [`pin`] checks out).
async fn open_latest(conn: &Connection, name: &str) -> Result<Table> {
    conn.open_table(name)
        .execute()
        .await
        .map_err(lance_err("open table"))
}

/// Open table `name` at `version` (the newest when `None`) and pin it there.
async fn pin(conn: &Connection, name: &str, version: Option<StoreVersion>) -> Result<Pinned> {
    let table = open_latest(conn, name).await?;
    let version = match version {
        Some(v) => v,
        None => table
            .version()
            .await
            .map_err(lance_err("read the version"))?,
    };
    table
        .checkout(version)
        .await
        .map_err(lance_err("check out a version"))?;
    let len = table
        .count_rows(None)
        .await
        .map_err(lance_err("count rows"))?;
    Ok(Pinned {
        table,
        version,
        len,
    })
}

#[async_trait]
impl ChunkStore for LanceStore {
    fn dim(&self) -> usize {
        self.dim
    }

    fn representation_dim(&self) -> Option<usize> {
        self.representation_dim
    }

    fn version(&self) -> StoreVersion {
        self.pinned().version
    }

    fn len(&self) -> usize {
        self.pinned().len
    }

    async fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let p = self.pinned();
        let (batches, at) = self.take(&p, ids, &COLUMNS[1..]).await?;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let (b, r) = at[&id];
            let batch = &batches[b];
            let text: &StringArray = column(batch, "text")?;
            let doc: &StringArray = column(batch, "document_id")?;
            let title: &StringArray = column(batch, "title")?;
            let s: &UInt64Array = column(batch, "span_start")?;
            let e: &UInt64Array = column(batch, "span_end")?;
            let meta: &StringArray = column(batch, "metadata")?;
            let metadata: BTreeMap<String, String> = serde_json::from_str(meta.value(r))
                .map_err(|err| format_err(&self.uri, format!("metadata of chunk {id}: {err}")))?;
            let mut c = Chunk::new(
                id,
                text.value(r),
                Provenance {
                    document_id: doc.value(r).to_string(),
                    title: title.value(r).to_string(),
                    span: s.value(r) as usize..e.value(r) as usize,
                },
            );
            c.metadata = metadata;
            out.push(c);
        }
        Ok(out)
    }

    async fn vectors(&self, ids: &[ChunkId]) -> Result<Embeddings> {
        let p = self.pinned();
        let (batches, at) = self.take(&p, ids, &["vector"]).await?;
        let mut data = Vec::with_capacity(ids.len() * self.dim);
        for &id in ids {
            let (b, r) = at[&id];
            data.extend(floats(column(&batches[b], "vector")?, r)?);
        }
        Embeddings::new(self.dim, data)
    }

    async fn representations(&self, ids: &[ChunkId]) -> Result<Option<Embeddings>> {
        let Some(rd) = self.representation_dim else {
            check_store_ids(ids, self.len())?;
            return Ok(None);
        };
        let p = self.pinned();
        let (batches, at) = self.take(&p, ids, &["representation"]).await?;
        let mut data = Vec::with_capacity(ids.len() * rd);
        for &id in ids {
            let (b, r) = at[&id];
            let col: &FixedSizeListArray = column(&batches[b], "representation")?;
            if col.is_null(r) {
                return Ok(None);
            }
            data.extend(floats(col, r)?);
        }
        Ok(Some(Embeddings::new(rd, data)?))
    }

    async fn nearest(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
    ) -> Result<Vec<(ChunkId, f32)>> {
        check_store_query(query, self.dim)?;
        filter.validate()?;
        let p = self.pinned();
        if k == 0 || p.len == 0 {
            return Ok(Vec::new());
        }
        let params = *self.search.read().unwrap_or_else(|e| e.into_inner());
        let mut q = p
            .table
            .query()
            .nearest_to(query)
            .map_err(lance_err("vector query"))?
            .column("vector")
            .distance_type(DistanceType::Cosine)
            .limit(k)
            .select(Select::columns(&["id"]));
        if let Some(n) = params.nprobes {
            q = q.nprobes(n).map_err(lance_err("vector query"))?;
        }
        if let Some(ef) = params.ef {
            q = q.ef(ef);
        }
        if let Some(r) = params.refine_factor {
            q = q.refine_factor(r);
        }
        if let Some(sql) = filter_sql(filter) {
            q = q.only_if(sql);
        }
        let batches = collect(&q, "vector query").await?;
        let mut hits = Vec::with_capacity(k);
        for batch in &batches {
            let ids: &UInt64Array = column(batch, "id")?;
            let dist: &Float32Array = column(batch, "_distance")?;
            for r in 0..batch.num_rows() {
                hits.push((ids.value(r) as ChunkId, 1.0 - dist.value(r)));
            }
        }
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        Ok(hits)
    }

    async fn append(&self, batch: ChunkBatch) -> Result<Range<ChunkId>> {
        batch.check(self.dim, self.representation_dim)?;
        let n = batch.chunks.len();
        let _w = self.writer.lock().await;
        let latest = pin(&self.conn, &self.name, None).await?;
        let start = latest.len;
        if n == 0 {
            self.set_pinned(latest);
            return Ok(start..start);
        }
        let rb = self.record_batch(&batch, start)?;
        let table = open_latest(&self.conn, &self.name).await?;
        let added = table.add(rb).execute().await.map_err(lance_err("append"))?;
        let version = if added.version > 0 {
            Some(added.version)
        } else {
            None
        };
        let p = pin(&self.conn, &self.name, version).await?;
        if p.len != start + n {
            return Err(Error::InvalidInput {
                location: format!("{} table {}", self.uri, self.name),
                message: format!(
                    "another writer changed the table during this append (expected {} rows at version {}, found {}); one process may write at a time",
                    start + n,
                    p.version,
                    p.len
                ),
            });
        }
        tracing::debug!(target: "lprag::store", version = p.version, rows = n, "lance append");
        self.set_pinned(p);
        Ok(start..start + n)
    }

    async fn refresh(&self) -> Result<StoreVersion> {
        let p = pin(&self.conn, &self.name, None).await?;
        let v = p.version;
        self.set_pinned(p);
        Ok(v)
    }
}

#[cfg(test)]
mod tests;
