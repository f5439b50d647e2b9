//! `lprag-eval` with Lance stores: the benchmark command line of `lprag-eval`, whose
//! `scale --store` also takes `lance:DIR` — LP-RAG's candidate stage searching a Lance
//! table, on the same index and questions as the in-memory rows.
//!
//! ```text
//! cargo run --manifest-path crates/lprag-lance/Cargo.toml --example lprag-eval -- \
//!     scale --sizes 100000 --retriever lprag --lprag-work-dir target/work-100k \
//!     --store 'lance:target/lance?nprobes=40&ef=400&refine=10'
//! ```
//!
//! `lance:DIR` writes the index's chunks into a Lance database per corpus size
//! (`DIR/musique-N`, table `chunks`) with `LpRag::write_store`, builds a vector index
//! there and searches it. A database written before is reused: `write_store` resumes
//! (appends nothing when every chunk is there, after checking a sample of them) and an
//! existing vector index is kept. With `--lprag-answer-from` (LP-RAG opened to answer
//! only, from an index saved by `--lprag-save`), the database made before is opened as it
//! is and nothing is written; one not made yet is made from the saved index first. Options
//! after `?`, joined by `&`:
//! - `index=hnsw-sq` (IVF-HNSW-SQ, LanceDB's defaults; the default), `ivf-pq`, or `none`
//!   (LanceDB's exact scan);
//! - `partitions=N` (either index), `sub_vectors=N` (IVF-PQ): the index's shape (default:
//!   LanceDB's choice);
//! - `nprobes=N`, `ef=N`, `refine=N`: the search ([`SearchParams`]; default: LanceDB's).
//!
//! A new table keeps the model's representations beside the vectors, so
//! `--lprag-answer-from DIR --lprag-rows-from-store` answers holding no chunk row.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use lprag::{ChunkStore, LpRag, Progress};
use lprag_eval::scale::{memory_store, StoreSetup};
use lprag_eval::{Error, Result};
use lprag_lance::{LanceStore, SearchParams, StoreSpec, VectorIndex, DEFAULT_TABLE};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `lance:DIR[?OPTIONS]`.
#[derive(Debug, Clone)]
struct LanceSetup {
    dir: String,
    index: Option<VectorIndex>,
    search: SearchParams,
    spec: String,
}

fn lance_store(spec: &str) -> Option<Result<Box<dyn StoreSetup>>> {
    let rest = spec.trim().strip_prefix("lance:")?;
    Some(parse(spec, rest).map(|s| Box::new(s) as Box<dyn StoreSetup>))
}

fn parse(spec: &str, rest: &str) -> Result<LanceSetup> {
    let bad = |why: String| Error::invalid("--store", format!("`{spec}`: {why}"));
    let (dir, options) = rest.split_once('?').unwrap_or((rest, ""));
    if dir.is_empty() {
        return Err(bad("no directory after lance:".into()));
    }
    let mut setup = LanceSetup {
        dir: dir.to_string(),
        index: Some(VectorIndex::default()),
        search: SearchParams::default(),
        spec: spec.to_string(),
    };
    let (mut partitions, mut sub_vectors) = (None, None);
    for option in options.split('&').filter(|o| !o.is_empty()) {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| bad(format!("`{option}` is not KEY=VALUE")))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|e| bad(format!("{key}={value}: {e}")))
        };
        match key {
            "index" => {
                setup.index = match value {
                    "hnsw-sq" => Some(VectorIndex::default()),
                    "ivf-pq" => Some(VectorIndex::IvfPq {
                        partitions: None,
                        sub_vectors: None,
                    }),
                    "none" => None,
                    _ => return Err(bad(format!("index={value}: hnsw-sq, ivf-pq or none"))),
                }
            }
            "nprobes" => setup.search.nprobes = Some(number()?),
            "ef" => setup.search.ef = Some(number()?),
            "refine" => setup.search.refine_factor = Some(number()? as u32),
            "partitions" => partitions = Some(number()? as u32),
            "sub_vectors" => sub_vectors = Some(number()? as u32),
            _ => {
                return Err(bad(format!(
                    "unknown option {key} (index, partitions, sub_vectors, nprobes, ef, refine)"
                )))
            }
        }
    }
    match &mut setup.index {
        Some(VectorIndex::IvfHnswSq { partitions: p, .. }) if sub_vectors.is_none() => {
            *p = partitions.or(*p);
        }
        Some(VectorIndex::IvfPq {
            partitions: p,
            sub_vectors: s,
        }) => {
            *p = partitions.or(*p);
            *s = sub_vectors.or(*s);
        }
        None if partitions.is_none() && sub_vectors.is_none() => {}
        _ => {
            return Err(bad(
                "partitions needs an IVF index, sub_vectors index=ivf-pq".to_string(),
            ))
        }
    }
    Ok(setup)
}

#[async_trait::async_trait]
impl StoreSetup for LanceSetup {
    fn label(&self) -> String {
        self.spec.clone()
    }

    async fn make(
        &self,
        rag: &LpRag,
        passages: usize,
        progress: &dyn Progress,
    ) -> Result<(Arc<dyn ChunkStore>, Vec<(String, f64)>)> {
        let (uri, exists) = self.table(passages);
        let dim = rag.graph().features.dim();
        let store = if exists {
            LanceStore::open(&uri, DEFAULT_TABLE).await?
        } else {
            // The model's representations too, so that an answering process can read every
            // row from the table (`--lprag-rows-from-store`).
            let spec = StoreSpec::new(dim);
            let spec = match rag.predictor().stored_representation_dim() {
                Some(rd) => spec.with_representations(rd),
                None => spec,
            };
            LanceStore::create(&uri, spec).await?
        };
        let mut stages = Vec::new();
        let wrote = rag.write_store(&store, progress).await?;
        eprintln!(
            "lance store {uri}: {} chunks there, {} written in {} appends",
            wrote.resumed_from, wrote.written, wrote.appends
        );
        stages.push(("store write".to_string(), wrote.seconds));
        if let Some(index) = self.index {
            if !store.has_vector_index().await? {
                let t = Instant::now();
                store.build_index(index).await?;
                stages.push(("store index".to_string(), t.elapsed().as_secs_f64()));
            }
        }
        store.set_search(self.search);
        Ok((Arc::new(store), stages))
    }

    async fn open(&self, passages: usize) -> Result<Option<Arc<dyn ChunkStore>>> {
        let (uri, exists) = self.table(passages);
        if !exists {
            return Ok(None);
        }
        let store = LanceStore::open(&uri, DEFAULT_TABLE).await?;
        store.set_search(self.search);
        Ok(Some(Arc::new(store)))
    }
}

impl LanceSetup {
    /// The table's URI for `passages` passages, and whether it was made.
    fn table(&self, passages: usize) -> (String, bool) {
        let uri = format!("{}/musique-{passages}", self.dir.trim_end_matches('/'));
        let exists = std::path::Path::new(&uri)
            .join(format!("{DEFAULT_TABLE}.lance"))
            .exists();
        (uri, exists)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    lprag_eval::cli::main(&[memory_store, lance_store]).await
}
