//! QCG-RAG: a training-free, query-centric graph.
//!
//! Indexing: every chunk gets synthetic (query, answer) pairs — Doc2Query, from an LLM
//! ([`lprag_llm::LlmQueryGenerator::doc2query`]) or, offline, from the
//! [`HeuristicQueryGenerator`] — and the Doc2Query-- filter keeps the best fraction α per
//! chunk by cos(embed(q ⊕ a), embed(chunk)). Kept queries are the graph's nodes (embedded
//! as `q ⊕ a`), joined to their k most similar other queries and to their source chunk.
//!
//! Retrieval: s(q_u, q) = cos + 1; the seeds are the queries with s ≥ γ, at most n of them
//! (best first); the seed set grows by h hops over query–query edges; a chunk's score is
//! the **mean** cos(q_u, q) over its linked queries in the expanded set. Two cases the paper
//! leaves open get lprag's documented choice: when no query passes γ, the n best queries
//! are the seeds; when fewer chunks than asked are reached, the rest are filled by direct
//! dense search over the chunks (their scores capped so the list stays sorted).
//!
//! Updates: [`QcgRag::add_documents`], [`QcgRag::update_documents`] and
//! [`QcgRag::remove_documents`] change an index in place, exactly (see the `update` module).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use lprag_core::{
    Chunk, ChunkId, Document, Embeddings, Encoder, Error, Progress, QueryGenerator, Result,
    ScoredChunk, Selection, SyntheticQuery,
};
use lprag_graph::KnnBackend;
use lprag_text::{HeuristicQueryGenerator, HeuristicQueryGeneratorConfig};
use serde::{Deserialize, Serialize};

mod state;
mod update;

pub use state::QCG_FORMAT_VERSION;
use state::{QcgState, QCG_DIR, QCG_FILE};

use crate::retrievers::common::{
    blocking, build_from, embed_all_queries, input_setters, pad_with_dense, select_hits,
    BuildInputs, Docs, ParentScoring, Parents, Peer, PeerState, Started,
};

/// QCG-RAG's hyperparameters; the defaults are the paper's MultiHop-RAG setting, but for
/// [`QcgConfig::parents`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QcgConfig {
    /// (query, answer) pairs asked for per chunk, M. Default 20. The offline heuristic
    /// generator writes as many distinct questions as it finds, often fewer.
    pub queries_per_chunk: usize,
    /// Fraction α of each chunk's queries kept by Doc2Query-- (at least one). Default 0.8.
    pub keep_fraction: f32,
    /// Query–query k-NN edges per query node, k. Default 3.
    pub knn_k: usize,
    /// Most seed queries, n. Default 15.
    pub max_seeds: usize,
    /// Seed threshold γ on cos + 1. Default 1.0 (cosine ≥ 0).
    pub gamma: f32,
    /// Expansion hops over query–query edges, h. Default 1.
    pub hops: usize,
    /// Fill a top-k list that the graph cannot fill with direct dense chunk search.
    /// Default true.
    pub pad_with_dense: bool,
    /// How the chunks of one document compete: default [`ParentScoring::Best`] (a
    /// document ranked by its best chunk, its other ranked chunks beside it,
    /// `Selection::TopK(k)` counting documents), a departure from the paper, which ranks
    /// chunks ([`ParentScoring::Chunks`]).
    pub parents: ParentScoring,
    /// The longest query, in bytes of UTF-8, that `retrieve` and `explain` embed; a longer
    /// one is [`lprag_core::Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an encoder's
    /// 512-token window).
    pub max_query_bytes: usize,
}

impl Default for QcgConfig {
    fn default() -> Self {
        Self {
            queries_per_chunk: 20,
            keep_fraction: 0.8,
            knn_k: 3,
            max_seeds: 15,
            gamma: 1.0,
            hops: 1,
            pad_with_dense: true,
            parents: ParentScoring::default(),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl QcgConfig {
    fn validate(&self) -> Result<()> {
        if !(self.keep_fraction > 0.0 && self.keep_fraction <= 1.0) {
            return Err(Error::invalid(
                "QcgConfig.keep_fraction",
                format!("must be in (0, 1], got {}", self.keep_fraction),
            ));
        }
        if self.knn_k == 0 || self.max_seeds == 0 || self.queries_per_chunk == 0 {
            return Err(Error::invalid(
                "QcgConfig",
                "knn_k, max_seeds and queries_per_chunk must be at least 1",
            ));
        }
        if !self.gamma.is_finite() {
            return Err(Error::invalid("QcgConfig.gamma", "must be finite"));
        }
        Ok(())
    }
}

/// The text a query node is embedded from: `q ⊕ a` (the answer appended when there is one).
pub fn query_node_text(q: &SyntheticQuery) -> String {
    match q.answer.as_deref() {
        Some(a) if !a.trim().is_empty() => format!("{} {}", q.text, a.trim()),
        _ => q.text.clone(),
    }
}

/// Doc2Query--: for each chunk, the indices of its queries ranked by `relevance`
/// (cos(q ⊕ a, chunk)), keeping the best ⌈α·m⌉ (at least one). A query belongs to the
/// first chunk it links to. Returned indices are sorted.
pub fn doc2query_filter(
    queries: &[SyntheticQuery],
    relevance: &[f32],
    keep_fraction: f32,
) -> Vec<usize> {
    let mut by_chunk: BTreeMap<ChunkId, Vec<usize>> = BTreeMap::new();
    for (i, q) in queries.iter().enumerate() {
        if let Some(&c) = q.chunk_ids.first() {
            by_chunk.entry(c).or_default().push(i);
        }
    }
    let mut kept = Vec::new();
    for (_, mut idx) in by_chunk {
        idx.sort_by(|&a, &b| relevance[b].total_cmp(&relevance[a]).then(a.cmp(&b)));
        let keep = ((keep_fraction * idx.len() as f32).ceil() as usize).clamp(1, idx.len());
        kept.extend_from_slice(&idx[..keep]);
    }
    kept.sort_unstable();
    kept
}

/// The offline question writer QCG-RAG uses when none is given: the
/// [`HeuristicQueryGenerator`] with `queries_per_chunk` questions per chunk.
fn default_generator(config: &QcgConfig) -> Arc<dyn QueryGenerator> {
    Arc::new(HeuristicQueryGenerator::new(
        HeuristicQueryGeneratorConfig {
            queries_per_batch: config.queries_per_chunk,
            ..HeuristicQueryGeneratorConfig::default()
        },
    ))
}

/// Doc2Query for the chunks `targets` (one-chunk batches) of `chunks` (embedded as
/// `chunk_emb`): the generated queries, checked, embedded as `q ⊕ a` and filtered by
/// Doc2Query-- ([`doc2query_filter`]). Returns how many were generated, the kept ones and
/// their embeddings. Each chunk's queries depend on that chunk alone, so an index update
/// writes exactly the queries a rebuild would.
async fn doc2query(
    generator: &dyn QueryGenerator,
    encoder: &dyn Encoder,
    (chunks, chunk_emb): (&[Chunk], &Embeddings),
    targets: &[ChunkId],
    keep_fraction: f32,
    progress: &dyn Progress,
) -> Result<(usize, Vec<SyntheticQuery>, Embeddings)> {
    let batches: Vec<Vec<ChunkId>> = targets.iter().map(|&c| vec![c]).collect();
    let generated = if batches.is_empty() {
        Vec::new()
    } else {
        generator.generate(chunks, &batches).await?
    };
    let generated: Vec<SyntheticQuery> = generated
        .into_iter()
        .filter(|q| !q.text.trim().is_empty() && !q.chunk_ids.is_empty())
        .collect();
    if let Some(q) = generated
        .iter()
        .find(|q| q.chunk_ids.iter().any(|&c| c >= chunks.len()))
    {
        return Err(Error::invalid(
            "QCG query generator output",
            format!("query {:?} links to a chunk out of range", q.text),
        ));
    }
    let node_texts: Vec<String> = generated.iter().map(query_node_text).collect();
    let all_emb = if node_texts.is_empty() {
        Embeddings::empty(chunk_emb.dim())
    } else {
        embed_all_queries(encoder, &node_texts, "embed queries", progress).await?
    };
    let relevance: Vec<f32> = generated
        .iter()
        .enumerate()
        .map(|(i, q)| lprag_core::cosine(all_emb.row(i), chunk_emb.row(q.chunk_ids[0])))
        .collect();
    let kept = doc2query_filter(&generated, &relevance, keep_fraction);
    let query_emb = all_emb.select(&kept);
    let queries = kept.iter().map(|&i| generated[i].clone()).collect();
    Ok((generated.len(), queries, query_emb))
}

/// The seeds, the expanded query set and the chunk scores for one user query.
#[derive(Debug, Clone, PartialEq)]
pub struct QcgScores {
    /// Seed query nodes, best first.
    pub seeds: Vec<usize>,
    /// Every query node reached (seeds and h-hop neighbours), sorted.
    pub expanded: Vec<usize>,
    /// `(chunk, mean cosine)` for every chunk linked to an expanded query, best first
    /// (ties by lower chunk id).
    pub chunks: Vec<(ChunkId, f32)>,
}

/// QCG-RAG's retrieval rule on a built graph. `cos[i]` is the cosine between the user
/// query and query node `i`; `neighbors[i]` its query–query edges (used as undirected);
/// `links(i)` its chunks.
pub fn qcg_scores<'a>(
    cos: &[f32],
    neighbors: &[Vec<u32>],
    links: impl Fn(usize) -> &'a [ChunkId],
    config: &QcgConfig,
) -> QcgScores {
    let mut order: Vec<usize> = (0..cos.len()).collect();
    order.sort_by(|&a, &b| cos[b].total_cmp(&cos[a]).then(a.cmp(&b)));
    let passing: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| cos[i] + 1.0 >= config.gamma)
        .take(config.max_seeds)
        .collect();
    // lprag's choice where the paper is silent: no query passes γ → the n best.
    let seeds = if passing.is_empty() {
        order.iter().copied().take(config.max_seeds).collect()
    } else {
        passing
    };

    // Undirected adjacency from the k-NN lists.
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); cos.len()];
    for (i, ns) in neighbors.iter().enumerate() {
        for &j in ns {
            let j = j as usize;
            if j < cos.len() && j != i {
                adj[i].push(j);
                adj[j].push(i);
            }
        }
    }
    let mut seen: HashSet<usize> = seeds.iter().copied().collect();
    let mut frontier = seeds.clone();
    for _ in 0..config.hops {
        // Nothing new was reached: further hops add nothing (and a huge `hops` from a
        // hand-edited index must not spin).
        if frontier.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for &i in &frontier {
            for &j in &adj[i] {
                if seen.insert(j) {
                    next.push(j);
                }
            }
        }
        frontier = next;
    }
    let mut expanded: Vec<usize> = seen.into_iter().collect();
    expanded.sort_unstable();

    let mut sums: BTreeMap<ChunkId, (f32, usize)> = BTreeMap::new();
    for &i in &expanded {
        for &c in links(i) {
            let e = sums.entry(c).or_insert((0.0, 0));
            e.0 += cos[i];
            e.1 += 1;
        }
    }
    let mut chunks: Vec<(ChunkId, f32)> = sums
        .into_iter()
        .map(|(c, (s, n))| (c, s / n as f32))
        .collect();
    chunks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    QcgScores {
        seeds,
        expanded,
        chunks,
    }
}

/// What indexing produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QcgStats {
    /// Chunks made.
    pub chunks: usize,
    /// Queries generated.
    pub queries_generated: usize,
    /// Queries kept by Doc2Query--.
    pub queries_kept: usize,
    /// Seconds to build.
    pub seconds: f64,
}

/// Assembles a [`QcgRag`].
pub struct QcgRagBuilder {
    inputs: BuildInputs,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    config: QcgConfig,
}

impl QcgRagBuilder {
    input_setters!(QcgConfig);

    /// Use this (query, answer) generator. Default: the offline
    /// [`HeuristicQueryGenerator`] with `queries_per_batch = queries_per_chunk` (questions
    /// without answers). The paper's is `LlmQueryGenerator::doc2query(model)`.
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Chunk, generate and filter queries, embed, and link the query graph.
    pub async fn build(self, documents: &[Document]) -> Result<QcgRag> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(QcgRag);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<QcgRag> {
        let config = self.config;
        config.validate()?;
        let Started {
            progress,
            at: t,
            chunks,
            encoder,
            chunk_emb,
            ..
        } = self.inputs.start(documents).await?;
        let generator = self
            .query_generator
            .unwrap_or_else(|| default_generator(&config));
        let targets: Vec<ChunkId> = (0..chunks.len()).collect();
        let (generated, queries, query_emb) = doc2query(
            &*generator,
            &*encoder,
            (&chunks, &chunk_emb),
            &targets,
            config.keep_fraction,
            &*progress,
        )
        .await?;
        let k = config.knn_k;
        let emb = query_emb.clone();
        let neighbors: Vec<Vec<u32>> = if queries.len() > 1 {
            blocking(move || {
                Ok(lprag_graph::knn(&emb, k, &KnnBackend::default())?
                    .into_iter()
                    .map(|l| l.into_iter().map(|(j, _)| j).collect())
                    .collect())
            })
            .await?
        } else {
            vec![Vec::new(); queries.len()]
        };
        let stats = QcgStats {
            chunks: chunks.len(),
            queries_generated: generated,
            queries_kept: queries.len(),
            seconds: t.elapsed().as_secs_f64(),
        };
        Ok(QcgRag {
            runtime: (),
            state: Arc::new(QcgState {
                version: QCG_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                config,
                chunks,
                queries,
                query_emb,
                chunk_emb,
                neighbors,
                stats,
                parents: Default::default(),
            }),
            encoder,
        })
    }
}

/// The QCG-RAG retriever: a [`Peer`] over its state (retrieval, `save`, `load` and the
/// updates of the `update` module are the peers' shared ones). `Send + Sync`; retrieval is
/// read-only.
pub type QcgRag = Peer<QcgState>;

impl QcgRag {
    /// A builder with the offline defaults.
    pub fn builder() -> QcgRagBuilder {
        QcgRagBuilder {
            inputs: BuildInputs::default(),
            query_generator: None,
            config: QcgConfig::default(),
        }
    }

    /// The kept (query, answer) nodes of the graph.
    pub fn queries(&self) -> &[SyntheticQuery] {
        &self.state.queries
    }

    /// Query–query k-NN lists, one per query node.
    pub fn neighbors(&self) -> &[Vec<u32>] {
        &self.state.neighbors
    }

    /// The configuration.
    pub fn config(&self) -> &QcgConfig {
        &self.state.config
    }

    /// What indexing produced.
    pub fn stats(&self) -> &QcgStats {
        &self.state.stats
    }

    /// Seeds, expansion and chunk scores for `query` (for inspection and tests).
    pub async fn explain(&self, query: &str) -> Result<QcgScores> {
        let e = self.embed_query(query).await?;
        Ok(self.scores_for(&e))
    }

    fn scores_for(&self, e: &[f32]) -> QcgScores {
        let cos: Vec<f32> = self
            .state
            .query_emb
            .iter()
            .map(|row| lprag_core::cosine(e, row))
            .collect();
        let queries = &self.state.queries;
        qcg_scores(
            &cos,
            &self.state.neighbors,
            |i| queries[i].chunk_ids.as_slice(),
            &self.state.config,
        )
    }
}

#[async_trait]
impl PeerState for QcgState {
    type Runtime = ();
    type Open = ();
    const TYPE_NAME: &'static str = "QcgRag";
    const FILE: &'static str = QCG_FILE;
    const DIR: lprag_core::dirs::DirSpec = QCG_DIR;

    fn name(&self) -> &str {
        "qcg"
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn query_shape(&self) -> (usize, usize) {
        (self.chunk_emb.dim(), self.config.max_query_bytes)
    }

    fn span() -> tracing::Span {
        tracing::info_span!("qcg.retrieve")
    }

    fn open(&self, _dir: &Path, _open: ()) -> Result<()> {
        Ok(())
    }

    async fn rank(
        peer: &QcgRag,
        _query: &str,
        e: Vec<f32>,
        selection: Selection,
    ) -> Result<Vec<ScoredChunk>> {
        let me = peer.clone();
        let (e, scores) = blocking(move || {
            let scores = me.scores_for(&e);
            Ok((e, scores))
        })
        .await?;
        let state = &peer.state;
        let pad = state.config.pad_with_dense;
        let pad = pad.then_some((&state.chunk_emb, e.as_slice()));
        let mode = state.config.parents;
        if mode == ParentScoring::Chunks {
            return Ok(select_hits(&state.chunks, scores.chunks, selection, pad));
        }
        let parents = state
            .parents
            .get_or_init(|| Arc::new(Parents::of(&state.chunks)));
        let mut ranked = scores.chunks;
        if let (Selection::TopK(k), Some((chunk_emb, query))) = (selection, pad) {
            let docs: std::collections::HashSet<u32> =
                ranked.iter().map(|&(c, _)| parents.parent(c)).collect();
            if docs.len() < k {
                let want = ranked.len() + k;
                pad_with_dense(&mut ranked, chunk_emb, query, want);
            }
        }
        Ok(parents
            .rank(ranked, mode, Some(selection), |x| x)
            .into_iter()
            .map(|(c, score)| ScoredChunk {
                chunk: state.chunks[c].clone(),
                score,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str, chunk: ChunkId) -> SyntheticQuery {
        SyntheticQuery {
            text: text.into(),
            chunk_ids: vec![chunk],
            answer: None,
        }
    }

    #[test]
    fn doc2query_minus_keeps_the_best_fraction_per_chunk() {
        // Chunk 0 has 5 queries, chunk 1 has 2: α = 0.8 keeps ⌈4⌉ = 4 and ⌈1.6⌉ = 2.
        let qs: Vec<_> = (0..5)
            .map(|i| q(&format!("a{i}"), 0))
            .chain((0..2).map(|i| q(&format!("b{i}"), 1)))
            .collect();
        let rel = [0.9, 0.1, 0.5, 0.7, 0.3, 0.2, 0.4];
        assert_eq!(doc2query_filter(&qs, &rel, 0.8), vec![0, 2, 3, 4, 5, 6]);
        // α small keeps at least one per chunk: the most relevant.
        assert_eq!(doc2query_filter(&qs, &rel, 0.01), vec![0, 6]);
    }

    #[test]
    fn seeds_expansion_and_mean_scores_by_hand() {
        // Five query nodes. cos to the user query:
        let cos = [0.9, 0.2, -0.5, 0.6, -0.1];
        // k-NN lists: 0→1, 1→2, 3→4 (undirected in use).
        let neighbors = vec![vec![1], vec![2], vec![], vec![4], vec![]];
        // Links: q0→c0, q1→c0, q2→c1, q3→c1, q4→c2.
        let links = [vec![0], vec![0], vec![1], vec![1], vec![2]];
        let config = QcgConfig {
            max_seeds: 2,
            gamma: 1.5, // cos ≥ 0.5: q0 (0.9) and q3 (0.6)
            hops: 1,
            ..QcgConfig::default()
        };
        let s = qcg_scores(&cos, &neighbors, |i| links[i].as_slice(), &config);
        assert_eq!(s.seeds, vec![0, 3]);
        // One hop: q0 brings q1, q3 brings q4 (q2 is two hops from q0).
        assert_eq!(s.expanded, vec![0, 1, 3, 4]);
        // c0 = mean(0.9, 0.2) = 0.55; c1 = mean(0.6) = 0.6 (q2 not expanded); c2 = -0.1.
        assert_eq!(s.chunks.len(), 3);
        assert_eq!(s.chunks[0].0, 1);
        assert!((s.chunks[0].1 - 0.6).abs() < 1e-6);
        assert_eq!(s.chunks[1].0, 0);
        assert!((s.chunks[1].1 - 0.55).abs() < 1e-6);
        assert_eq!(s.chunks[2], (2, -0.1));

        // Two hops reach q2 and pull c1's mean down to (0.6 - 0.5) / 2 = 0.05.
        let s2 = qcg_scores(
            &cos,
            &neighbors,
            |i| links[i].as_slice(),
            &QcgConfig {
                hops: 2,
                ..config.clone()
            },
        );
        assert_eq!(s2.expanded, vec![0, 1, 2, 3, 4]);
        let c1 = s2.chunks.iter().find(|(c, _)| *c == 1).unwrap().1;
        assert!((c1 - 0.05).abs() < 1e-6);

        // Hops beyond the graph's reach change nothing and cost nothing: `usize::MAX`
        // (a hand-edited index; found by the index_files fuzz harness) returns at once.
        let huge = qcg_scores(
            &cos,
            &neighbors,
            |i| links[i].as_slice(),
            &QcgConfig {
                hops: usize::MAX,
                ..config.clone()
            },
        );
        assert_eq!(huge, s2);

        // No hops: only the seeds' chunks.
        let s0 = qcg_scores(
            &cos,
            &neighbors,
            |i| links[i].as_slice(),
            &QcgConfig {
                hops: 0,
                ..config.clone()
            },
        );
        assert_eq!(s0.expanded, vec![0, 3]);
        assert_eq!(s0.chunks.len(), 2);

        // γ that nothing passes: the n best become the seeds (lprag's choice).
        let none = QcgConfig {
            gamma: 2.5,
            ..config.clone()
        };
        assert_eq!(
            qcg_scores(&cos, &neighbors, |i| links[i].as_slice(), &none).seeds,
            vec![0, 3]
        );

        // γ = 1.0 (cos ≥ 0) with n = 15: every non-negative query seeds, best first.
        let loose = QcgConfig {
            max_seeds: 15,
            gamma: 1.0,
            hops: 0,
            ..config
        };
        assert_eq!(
            qcg_scores(&cos, &neighbors, |i| links[i].as_slice(), &loose).seeds,
            vec![0, 3, 1]
        );
    }

    #[test]
    fn node_text_appends_the_answer() {
        let mut x = q("Who founded it?", 0);
        assert_eq!(query_node_text(&x), "Who founded it?");
        x.answer = Some("Nobel".into());
        assert_eq!(query_node_text(&x), "Who founded it? Nobel");
    }
}
