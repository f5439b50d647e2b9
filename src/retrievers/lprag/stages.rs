//! The build's stages, each a function from a typed input to its output. The five stages a
//! work directory keeps ([`Stage`]) run through [`run_stage`], which derives their key
//! from the whole input; the encoder choice and the training are not cached.

use std::sync::Arc;

use lprag_core::{
    Chunk, Chunker, DocumentBlocks, DocumentSource, EdgeKind, Embeddings, Encoder, Error, LinkEdge,
    Progress, QueryGenerator, Result, SyntheticQuery,
};
use lprag_graph::{BridgeConfig, ChunkGraph, FeatureRowsWriter, KnnBackend};

use super::{KnnLists, LpRagConfig};
use crate::retrievers::common::{
    blocking, chunk_source, duplicate_id, embed_all_chunks, embed_batches, embed_chunk_batches,
    embed_queries_into, Docs,
};
use crate::workdir::{
    keep_embeddings, remove_if_there, run_stage, KeyHasher, Stage, StageInput, StageKey, WorkDir,
    FEATURES_FILE, KNN_FILE,
};

/// What the stages share: the work directory (if any), where warnings go, and the names
/// of the stages loaded rather than computed.
pub(super) struct StageCtx<'a> {
    pub(super) work: Option<&'a WorkDir>,
    pub(super) warn: &'a dyn Fn(String),
    pub(super) progress: &'a dyn Progress,
    pub(super) reused: Vec<String>,
    /// Write the link graph's feature rows to the work directory and map them
    /// (`LpRagBuilder::features_on_disk`).
    pub(super) features_on_disk: bool,
}

impl StageCtx<'_> {
    /// Run `input`'s stage (see [`run_stage`]) and note it when it was loaded.
    async fn run<I, S, F, Fut>(&mut self, input: &I, state: S, compute: F) -> Result<(Done<I>, S)>
    where
        I: StageInput,
        F: FnOnce(S) -> Fut,
        Fut: std::future::Future<Output = Result<(I::Output, S)>>,
    {
        let (done, state) = run_stage(self.work, input, self.warn, state, compute).await?;
        if done.reused {
            self.reused.push(I::STAGE.reused_as().into());
        }
        Ok(((done.output, done.key), state))
    }
}

/// A stage's output and its key.
type Done<I> = (<I as StageInput>::Output, StageKey);

/// The key of a list of chunks (their ids, texts and provenance): one part per chunk,
/// hashed as it is read (no copy of the texts).
fn chunks_key(chunks: &[Chunk]) -> StageKey {
    let mut h = KeyHasher::new();
    for c in chunks {
        let strings = [&c.text, &c.provenance.title, &c.provenance.document_id];
        h.part(8 + strings.iter().map(|s| 8 + s.len()).sum::<usize>() + 16);
        h.eat(&(c.id as u64).to_le_bytes());
        for s in strings {
            h.eat(&(s.len() as u64).to_le_bytes());
            h.eat(s.as_bytes());
        }
        h.eat(&(c.provenance.span.start as u64).to_le_bytes());
        h.eat(&(c.provenance.span.end as u64).to_le_bytes());
    }
    h.finish()
}

/// Stage 1: the documents and the chunker. A source's documents' key is computed ahead
/// ([`survey`], [`StageKey::of_source`]), and only with a work directory.
pub(super) struct ChunkInput<'a> {
    pub(super) documents: Docs<'a>,
    pub(super) chunker: &'a dyn Chunker,
    pub(super) documents_key: Option<StageKey>,
}

impl StageInput for ChunkInput<'_> {
    type Output = Vec<Chunk>;
    const STAGE: Stage = Stage::Chunks;

    fn key(&self) -> Result<StageKey> {
        let documents = match (self.documents_key, self.documents) {
            (Some(key), _) => key,
            (None, Docs::Slice(d)) => StageKey::of_json(d)?,
            (None, Docs::Source(_)) => {
                return Err(Error::invalid(
                    "work directory key",
                    "the documents' key was not computed before the chunk stage",
                ))
            }
        };
        Ok(documents.then(&[
            self.chunker.name().as_bytes(),
            self.chunker.fingerprint().unwrap_or_default().as_bytes(),
        ]))
    }

    fn load(&self, work: &WorkDir, key: StageKey, warn: &dyn Fn(String)) -> Option<Vec<Chunk>> {
        let chunks = work.load_json::<Vec<Chunk>>(Self::STAGE.file(), key, warn)?;
        // Chunk ids are positions: a duplicate or out-of-range id is damage.
        if chunks.iter().enumerate().all(|(i, c)| c.id == i) {
            return Some(chunks);
        }
        warn(
            "work directory: chunks.json has chunk ids that are not their positions; recomputing"
                .into(),
        );
        None
    }

    fn save(&self, work: &WorkDir, key: StageKey, chunks: Vec<Chunk>) -> Result<Vec<Chunk>> {
        work.save_json(Self::STAGE.file(), key, &chunks)?;
        Ok(chunks)
    }
}

/// Chunk the documents (each chunk inherits its document's metadata and content hash).
pub(super) async fn chunk(ctx: &mut StageCtx<'_>, input: &ChunkInput<'_>) -> Result<Vec<Chunk>> {
    let progress = ctx.progress;
    let ((mut chunks, _), ()) = ctx
        .run(input, (), |()| async {
            let c = match input.documents {
                Docs::Slice(documents) => {
                    let mut c = input.chunker.chunk(documents).await?;
                    Chunk::inherit_metadata(&mut c, documents);
                    c
                }
                // The survey has checked the ids.
                Docs::Source(source) => {
                    chunk_source(input.chunker, source, progress, false).await?
                }
            };
            Ok((c, ()))
        })
        .await?;
    // Also on chunks reused from a work directory written before hashes were kept.
    match input.documents {
        Docs::Slice(documents) => Chunk::stamp_document_hashes(&mut chunks, documents),
        Docs::Source(source) if chunks.iter().any(|c| c.document_hash().is_none()) => {
            stamp_from_source(&mut chunks, source).await?
        }
        Docs::Source(_) => {}
    }
    Ok(chunks)
}

/// What a first pass over a source finds: how many documents, and the JSON length of
/// their list (for [`StageKey::of_source`]).
pub(super) struct Survey {
    pub(super) documents: usize,
    pub(super) json_len: usize,
}

/// Read `source` through once: its documents counted, their ids checked (no corpus, or
/// two documents with one id, are the errors every chunker gives a slice), and the JSON
/// length of their list measured.
pub(super) async fn survey(source: &dyn DocumentSource) -> Result<Survey> {
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut json_len = 1;
    let mut blocks = DocumentBlocks::new(source);
    while let Some((start, block)) = blocks.next().await? {
        for (i, d) in block.iter().enumerate().map(|(i, d)| (start + i, d)) {
            if let Some(first) = seen.insert(d.id.clone(), i) {
                return Err(duplicate_id(&d.id, first, i));
            }
            json_len += StageKey::json_len(d)? + usize::from(i > 0);
        }
    }
    let documents = blocks.position();
    if documents == 0 {
        return Err(Error::EmptyCorpus("no documents were given".into()));
    }
    Ok(Survey {
        documents,
        json_len: json_len + 1,
    })
}

/// Stamp chunks reused without their documents' content hashes (a work directory of an
/// earlier release) from `source`, read through once: chunks come in document order, so
/// each block's documents stamp the run of chunks that follows.
async fn stamp_from_source(chunks: &mut [Chunk], source: &dyn DocumentSource) -> Result<()> {
    let mut next = 0;
    let mut blocks = DocumentBlocks::new(source);
    while next < chunks.len() {
        let Some((_, block)) = blocks.next().await? else {
            break;
        };
        let ids: std::collections::HashSet<&str> = block.iter().map(|d| d.id.as_str()).collect();
        let end = next
            + chunks[next..]
                .iter()
                .take_while(|c| ids.contains(c.provenance.document_id.as_str()))
                .count();
        Chunk::stamp_document_hashes(&mut chunks[next..end], &block);
        next = end;
    }
    Ok(())
}

/// Stage 2: the chunks (fitted to the encoder) and the encoder.
pub(super) struct EmbedInput<'a> {
    pub(super) chunks: &'a [Chunk],
    pub(super) encoder: &'a dyn Encoder,
}

impl StageInput for EmbedInput<'_> {
    type Output = Embeddings;
    const STAGE: Stage = Stage::ChunkEmbeddings;

    /// The chunks, and the encoder's name, width, fingerprint and query mode: another
    /// encoder (or the same one with other weights or fitted tables) recomputes from here.
    fn key(&self) -> Result<StageKey> {
        Ok(chunks_key(self.chunks).then(&[
            self.encoder.name().as_bytes(),
            &(self.encoder.dimension() as u64).to_le_bytes(),
            self.encoder.fingerprint().unwrap_or_default().as_bytes(),
            &[u8::from(self.encoder.embeds_queries_apart())],
        ]))
    }

    fn load(&self, work: &WorkDir, key: StageKey, warn: &dyn Fn(String)) -> Option<Embeddings> {
        work.load_embeddings(Self::STAGE.file(), key, self.chunks.len(), warn)
    }

    fn save(&self, work: &WorkDir, key: StageKey, emb: Embeddings) -> Result<Embeddings> {
        keep_embeddings(Some(work), Self::STAGE.file(), key, emb)
    }
}

/// Embed the chunks; the result and the key the later stages chain from. With the
/// features on disk (and a work directory), the rows are streamed to the stage's file and
/// memory-mapped from it.
pub(super) async fn embed_chunks(
    ctx: &mut StageCtx<'_>,
    input: &EmbedInput<'_>,
) -> Result<(Embeddings, StageKey)> {
    if let Some(w) = ctx.work.filter(|_| ctx.features_on_disk) {
        return embed_chunks_on_disk(ctx, w, input).await;
    }
    let progress = ctx.progress;
    let (done, ()) = ctx
        .run(input, (), |()| async {
            let rows = embed_all_chunks(input.encoder, input.chunks, "embed chunks", progress);
            Ok((rows.await?, ()))
        })
        .await?;
    Ok(done)
}

/// [`embed_chunks`] with the rows on disk: a saved stage is mapped; fresh rows go to the
/// stage's file batch by batch as they are embedded (never whole on the heap), then the
/// file is mapped.
async fn embed_chunks_on_disk(
    ctx: &mut StageCtx<'_>,
    w: &WorkDir,
    input: &EmbedInput<'_>,
) -> Result<(Embeddings, StageKey)> {
    let (stage, key) = (Stage::ChunkEmbeddings, input.key()?);
    let (n, dim) = (input.chunks.len(), input.encoder.dimension());
    if let Some(rows) = w.map_rows(stage.file(), key, n, dim, ctx.warn) {
        ctx.reused.push(stage.reused_as().into());
        return Ok((rows, key));
    }
    let mut rows = w.rows_writer(stage.file(), dim)?;
    let mut sink = |batch: &[f32]| -> Result<()> { Ok(rows.append(batch)?) };
    let (enc, progress) = (input.encoder, ctx.progress);
    embed_chunk_batches(enc, input.chunks, "embed chunks", progress, &mut sink).await?;
    w.finish_rows(stage.file(), key, rows)?;
    let path = w.file(&format!("{}.bin", stage.file()));
    Ok((lprag_graph::map_feature_rows(&path, dim)?, key))
}

/// Stage 3: the embeddings' key and the graph settings.
pub(super) struct GraphInput {
    pub(super) embeddings: StageKey,
    pub(super) chunks: usize,
    pub(super) k: usize,
    pub(super) backend: KnnBackend,
    pub(super) bridges: BridgeConfig,
}

impl StageInput for GraphInput {
    type Output = Vec<LinkEdge>;
    const STAGE: Stage = Stage::ChunkGraph;

    fn key(&self) -> Result<StageKey> {
        Ok(self.embeddings.then(&[
            &(self.k as u64).to_le_bytes(),
            &StageKey::of_json(&self.backend)?.0.to_le_bytes(),
            &StageKey::of_json(&self.bridges)?.0.to_le_bytes(),
        ]))
    }

    fn load(&self, work: &WorkDir, key: StageKey, warn: &dyn Fn(String)) -> Option<Vec<LinkEdge>> {
        work.load_json::<Vec<LinkEdge>>(Self::STAGE.file(), key, warn)
            .filter(|edges| {
                edges
                    .iter()
                    .all(|e| (e.a as usize) < self.chunks && (e.b as usize) < self.chunks)
            })
    }

    fn save(&self, work: &WorkDir, key: StageKey, edges: Vec<LinkEdge>) -> Result<Vec<LinkEdge>> {
        work.save_json(Self::STAGE.file(), key, &edges)?;
        Ok(edges)
    }
}

/// The chunk graph and what was learnt building it.
pub(super) struct Graph {
    pub(super) edges: Vec<LinkEdge>,
    pub(super) key: StageKey,
    /// The k-NN lists behind the mutual edges (when the edges were loaded, those the work
    /// directory kept beside them; `None` when it kept none, or they were unreadable).
    pub(super) knn: Option<Arc<KnnLists>>,
    pub(super) batches: Vec<Vec<lprag_core::ChunkId>>,
    pub(super) bridges: usize,
    pub(super) isolated: usize,
}

/// The chunk–chunk edges of the index: the mutual pairs of the k-NN `lists`, then the
/// bridge edges `bridges` adds among `chunks`; `lap` is called after each of the two
/// (`knn`, `bridges`). A build and an update make them the same way.
pub(super) fn chunk_edges(
    lists: &KnnLists,
    chunks: &[Chunk],
    bridges: &BridgeConfig,
    lap: &mut dyn FnMut(&str),
) -> Result<Vec<LinkEdge>> {
    let mut edges = lprag_graph::mutual_edges_of(lists)?;
    lap("knn");
    edges.extend(lprag_graph::bridge_edges(chunks, &edges, bridges)?);
    lap("bridges");
    Ok(edges)
}

/// Build the mutual k-NN chunk graph with its bridge edges, then the A.2 batches. The
/// chunks and embeddings move to a blocking thread and back (no copy).
pub(super) async fn chunk_graph(
    ctx: &mut StageCtx<'_>,
    input: &GraphInput,
    seed: u64,
    chunks: Vec<Chunk>,
    chunk_emb: Embeddings,
) -> Result<(Graph, Vec<Chunk>, Embeddings)> {
    let (k, backend, bridges) = (input.k, input.backend, input.bridges);
    let knn_file = ctx.work.map(|w| w.file(KNN_FILE));
    let keep = knn_file.clone();
    let state = (chunks, chunk_emb, None);
    let ((edges, key), (chunks, chunk_emb, knn)) = ctx
        .run(input, state, |(chunks, chunk_emb, _)| async move {
            let (edges, emb, back, lists) = blocking(move || {
                // The lists of an earlier computation never outlive it (written before
                // this stage's key, so a kept key always has its own lists or none).
                if let Some(path) = &keep {
                    remove_if_there(path)?;
                }
                let lists = lprag_graph::knn(&chunk_emb, k, &backend)?;
                let edges = chunk_edges(&lists, &chunks, &bridges, &mut |_| {})?;
                if let Some(path) = &keep {
                    lprag_graph::save_knn_lists(&lists, path)?;
                }
                Ok((edges, chunk_emb, chunks, lists))
            })
            .await?;
            Ok((edges, (back, emb, Some(Arc::new(lists)))))
        })
        .await?;
    let rows = chunk_emb.rows();
    let knn = match (knn, knn_file) {
        (None, Some(path)) if path.exists() => kept_knn(&path, rows, ctx.warn).await,
        (knn, _) => knn,
    };
    let n_bridges = edges.iter().filter(|e| e.kind == EdgeKind::Bridge).count();
    let (edges, batches, isolated) = blocking(move || {
        let graph = ChunkGraph::from_edges(rows, &edges)?;
        let batches = lprag_graph::sample_batches(&graph, seed);
        let isolated = graph.isolated_count();
        Ok((edges, batches, isolated))
    })
    .await?;
    let graph = Graph {
        edges,
        key,
        knn,
        batches,
        bridges: n_bridges,
        isolated,
    };
    Ok((graph, chunks, chunk_emb))
}

/// The k-NN lists a loaded chunk graph stage kept in `path`, when they are sound and one
/// per chunk of `rows`; otherwise `None` (`warn` hears why): the first update computes
/// them then, as for an index saved without them.
async fn kept_knn(
    path: &std::path::Path,
    rows: usize,
    warn: &dyn Fn(String),
) -> Option<Arc<KnnLists>> {
    let p = path.to_path_buf();
    let read = blocking(move || Ok(lprag_graph::load_knn_lists(&p)?)).await;
    let why = match read {
        Ok(lists) if lists.len() == rows => return Some(Arc::new(lists)),
        Ok(lists) => format!("{} lists for {rows} chunks", lists.len()),
        Err(e) => e.to_string(),
    };
    warn(format!(
        "work directory: {} unreadable ({why}); the first update computes the k-NN lists",
        path.display()
    ));
    None
}

/// Stage 4: the graph's key, the chunks, their batches, the seed and the question writer.
pub(super) struct QueryInput<'a> {
    pub(super) graph: StageKey,
    pub(super) chunks: &'a [Chunk],
    pub(super) batches: &'a [Vec<lprag_core::ChunkId>],
    pub(super) seed: u64,
    pub(super) generator: &'a dyn QueryGenerator,
}

impl StageInput for QueryInput<'_> {
    type Output = Vec<SyntheticQuery>;
    const STAGE: Stage = Stage::Queries;

    fn key(&self) -> Result<StageKey> {
        Ok(self.graph.then(&[
            &self.seed.to_le_bytes(),
            self.generator.name().as_bytes(),
            self.generator.fingerprint().unwrap_or_default().as_bytes(),
        ]))
    }

    fn load(
        &self,
        work: &WorkDir,
        key: StageKey,
        warn: &dyn Fn(String),
    ) -> Option<Vec<SyntheticQuery>> {
        let queries = work.load_json::<Vec<SyntheticQuery>>(Self::STAGE.file(), key, warn)?;
        let n = self.chunks.len();
        if queries.iter().all(|q| q.chunk_ids.iter().all(|&c| c < n)) {
            return Some(queries);
        }
        warn("work directory: queries.json links a chunk that does not exist; recomputing".into());
        None
    }

    fn save(
        &self,
        work: &WorkDir,
        key: StageKey,
        queries: Vec<SyntheticQuery>,
    ) -> Result<Vec<SyntheticQuery>> {
        work.save_json(Self::STAGE.file(), key, &queries)?;
        Ok(queries)
    }
}

/// Write synthetic queries for the chunk batches.
pub(super) async fn write_queries(
    ctx: &mut StageCtx<'_>,
    input: &QueryInput<'_>,
) -> Result<Vec<SyntheticQuery>> {
    let ((queries, _), ()) = ctx
        .run(input, (), |()| async {
            let q = input
                .generator
                .generate(input.chunks, input.batches)
                .await?;
            Ok((q, ()))
        })
        .await?;
    Ok(queries)
}

/// Stage 5 (stored apart: its rows go straight into the graph's feature buffer): the chunk
/// embeddings' key, the query texts, and the encoder behind that key.
pub(super) struct QueryEmbedInput<'a> {
    pub(super) embeddings: StageKey,
    pub(super) texts: &'a [String],
    pub(super) encoder: &'a dyn Encoder,
    pub(super) dim: usize,
}

impl QueryEmbedInput<'_> {
    /// The chunk embeddings' key and the query texts (the encoder is in the former).
    fn key(&self) -> Result<StageKey> {
        Ok(self
            .embeddings
            .then(&[&StageKey::of_json(self.texts)?.0.to_le_bytes()]))
    }
}

/// Embed the queries into `features` after the chunk rows: a saved copy is read straight
/// into it and a fresh one saved from it (no second copy of the query rows).
pub(super) async fn embed_queries(
    ctx: &mut StageCtx<'_>,
    input: &QueryEmbedInput<'_>,
    features: &mut Vec<f32>,
) -> Result<()> {
    let (texts, dim) = (input.texts, input.dim);
    let nc = features.len() / dim.max(1);
    let Some(w) = ctx.work else {
        return embed_into(input, features, ctx.progress).await;
    };
    let (stage, key) = (Stage::QueryEmbeddings, input.key()?);
    if w.append_embeddings(stage.file(), key, texts.len(), dim, features, ctx.warn) {
        ctx.reused.push(stage.reused_as().into());
    } else if !texts.is_empty() {
        embed_into(input, features, ctx.progress).await?;
        w.save_rows(stage.file(), key, dim, &features[nc * dim..])?;
    }
    Ok(())
}

/// The link graph's feature rows on disk: the chunk rows, then the queries' rows, written
/// block by block to the work directory's [`FEATURES_FILE`] and memory-mapped back. The
/// query rows never sit on the heap whole (saved ones are mapped and copied, fresh ones
/// streamed to their stage file and the features file batch by batch), and the chunk
/// rows leave it.
async fn features_on_disk(
    ctx: &mut StageCtx<'_>,
    input: &QueryEmbedInput<'_>,
    chunk_emb: Embeddings,
) -> Result<Embeddings> {
    let w = ctx.work.ok_or_else(|| {
        Error::invalid(
            "LpRagBuilder::features_on_disk",
            "needs a work directory (LpRagBuilder::work_dir) to hold the features file",
        )
    })?;
    let (texts, dim) = (input.texts, input.dim);
    let path = w.file(FEATURES_FILE);
    let mut all = FeatureRowsWriter::create(&path, dim)?;
    all.append(chunk_emb.as_slice())?;
    drop(chunk_emb);
    let (stage, key) = (Stage::QueryEmbeddings, input.key()?);
    if let Some(saved) = w.map_rows(stage.file(), key, texts.len(), dim, ctx.warn) {
        all.append(saved.as_slice())?;
        ctx.reused.push(stage.reused_as().into());
    } else if !texts.is_empty() {
        let mut rows = w.rows_writer(stage.file(), dim)?;
        let mut sink = |batch: &[f32]| -> Result<()> {
            rows.append(batch)?;
            all.append(batch)?;
            Ok(())
        };
        let query_texts = true;
        embed_batches(
            input.encoder,
            texts,
            "embed queries",
            ctx.progress,
            &mut sink,
            query_texts,
        )
        .await?;
        w.finish_rows(stage.file(), key, rows)?;
    }
    all.finish()?;
    Ok(lprag_graph::map_feature_rows(&path, dim)?)
}

/// Append the query rows of `input` to `features` (nothing for no queries).
async fn embed_into(
    input: &QueryEmbedInput<'_>,
    features: &mut Vec<f32>,
    progress: &dyn Progress,
) -> Result<()> {
    if input.texts.is_empty() {
        return Ok(());
    }
    features.reserve_exact(input.texts.len() * input.dim);
    embed_queries_into(
        input.encoder,
        input.texts,
        "embed queries",
        progress,
        features,
    )
    .await
}

/// The graph settings of `config` as the graph stage's input after `embeddings`.
pub(super) fn graph_input(config: &LpRagConfig, embeddings: StageKey, chunks: usize) -> GraphInput {
    GraphInput {
        embeddings,
        chunks,
        k: config.knn_k,
        backend: config.knn_backend,
        bridges: config.bridges,
    }
}

/// Stages 4 and 5 and the link graph: the synthetic queries (`input`; none when it is
/// `None`) followed by `labelled`, embedded after the chunk rows into one feature buffer
/// (`chunk_emb`'s, no copy), linked to their chunks beside the chunk graph's `edges`.
pub(super) async fn queries_and_graph(
    ctx: &mut StageCtx<'_>,
    input: Option<QueryInput<'_>>,
    labelled: Vec<SyntheticQuery>,
    (embeddings, encoder): (StageKey, &dyn Encoder),
    chunk_emb: Embeddings,
    edges: &[LinkEdge],
) -> Result<(Vec<SyntheticQuery>, lprag_core::LinkGraph)> {
    let mut queries = match &input {
        Some(input) => write_queries(ctx, input).await?,
        None => Vec::new(),
    };
    queries.extend(labelled);
    let texts: Vec<String> = queries.iter().map(|q| q.text.clone()).collect();
    let (nc, dim) = (chunk_emb.rows(), chunk_emb.dim());
    let input = QueryEmbedInput {
        embeddings,
        texts: &texts,
        encoder,
        dim,
    };
    let features = if ctx.features_on_disk {
        features_on_disk(ctx, &input, chunk_emb).await?
    } else {
        let mut features = chunk_emb.into_vec();
        embed_queries(ctx, &input, &mut features).await?;
        Embeddings::new(dim, features)?
    };
    drop(texts);
    let graph = lprag_graph::link_graph_from_features(features, nc, edges, &queries)?;
    Ok((queries, graph))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunks_key_is_the_key_of_each_chunks_bytes() {
        // The key work directories were written under: one materialised part per chunk.
        let chunks: Vec<Chunk> = ["first text", "", "ünïcode"]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let provenance = lprag_core::Provenance {
                    document_id: format!("doc-{}", i / 2),
                    title: format!("title {i}"),
                    span: i * 3..i * 3 + t.len(),
                };
                Chunk::new(i, *t, provenance)
            })
            .collect();
        let parts: Vec<Vec<u8>> = chunks
            .iter()
            .map(|c| {
                let mut p = (c.id as u64).to_le_bytes().to_vec();
                for s in [&c.text, &c.provenance.title, &c.provenance.document_id] {
                    p.extend_from_slice(&(s.len() as u64).to_le_bytes());
                    p.extend_from_slice(s.as_bytes());
                }
                p.extend_from_slice(&(c.provenance.span.start as u64).to_le_bytes());
                p.extend_from_slice(&(c.provenance.span.end as u64).to_le_bytes());
                p
            })
            .collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        assert_eq!(chunks_key(&chunks), StageKey::of(&refs));
        assert_ne!(chunks_key(&chunks[..2]), chunks_key(&chunks));
    }
}
