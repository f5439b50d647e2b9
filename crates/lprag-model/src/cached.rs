//! Cached inference: the chunks' node representations are computed once (after training,
//! `attach` or `load`) or given back from a save (on the heap or mapped); a user query then
//! recomputes only the nodes it changes.
//!
//! Adding a query node `q` joined to chunks `S` changes, layer by layer:
//! - layer 1: `q`, the chunks of `S` (their neighbourhood gains `q`) and, for GCN, the
//!   neighbours of `S` too (GCN's coefficient `w/√((1+s_i)(1+s_j))` reads both degrees);
//! - layer `l + 1`: the nodes changed at layer `l` and their neighbours.
//!
//! Every other node keeps its cached row, so the scores equal a full-graph forward pass
//! (up to float summation order) at a cost proportional to the changed nodes. With
//! [`Join::All`] every chunk changes: a one-layer model takes an exact low-rank route
//! (each chunk's row is its cached row with no query plus a multiple of one query
//! message), deeper models recompute every chunk on the host.

use std::collections::HashMap;

use lprag_core::{Embeddings, Error, Result};
use rayon::prelude::*;

use crate::config::{Aggregation, InferenceMode};
use crate::context::ChunkContext;
use crate::dense::{mlp, relu_in_place};
use crate::host::HostGraph;
use crate::net::HostLinkNet;
use lprag_core::ChunkId;

/// Which chunks the query node is joined to (weight 1 each).
#[derive(Debug, Clone)]
pub(crate) enum Join {
    /// These chunks (sorted, distinct).
    List(Vec<u32>),
    /// Every chunk.
    All,
}

impl Join {
    /// A join to `chunks` (any order, duplicates allowed).
    pub(crate) fn list(mut chunks: Vec<u32>) -> Self {
        chunks.sort_unstable();
        chunks.dedup();
        Join::List(chunks)
    }

    /// The chunks query `q` (normalised) joins under `mode`; `nearest` (best first) saves
    /// the search for [`InferenceMode::JoinTopK`] when it is long enough.
    pub(crate) fn for_query(
        ctx: &ChunkContext,
        mode: InferenceMode,
        q: &[f32],
        nearest: &[ChunkId],
    ) -> Self {
        match mode {
            InferenceMode::JoinAll => Join::All,
            InferenceMode::Isolated => Join::List(Vec::new()),
            InferenceMode::JoinTopK(k) => {
                let k = k.min(ctx.num_chunks());
                if nearest.len() >= k {
                    Join::list(nearest[..k].iter().map(|&c| c as u32).collect())
                } else {
                    Join::list(ctx.join(q, mode))
                }
            }
        }
    }

    fn contains(&self, c: u32) -> bool {
        match self {
            Join::List(l) => l.binary_search(&c).is_ok(),
            Join::All => true,
        }
    }
}

/// Nodes encoded per block when every chunk is (their aggregated and own inputs, and
/// their output, are what a block holds).
const LAYER_BLOCK: usize = 8192;

/// The chunk graph, optionally with one query node `q = num_chunks` added.
struct View<'a> {
    host: &'a HostGraph,
    /// Sum of positive edge weights per chunk, without the query.
    wsum: &'a [f32],
    query: Option<&'a Join>,
}

impl View<'_> {
    fn q(&self) -> u32 {
        self.wsum.len() as u32
    }

    fn joined(&self, i: u32) -> bool {
        self.query.is_some_and(|j| j.contains(i))
    }

    fn wsum(&self, i: u32) -> f32 {
        if i == self.q() {
            return match self.query {
                Some(Join::List(l)) => l.len() as f32,
                Some(Join::All) => self.wsum.len() as f32,
                None => 0.0,
            };
        }
        self.wsum[i as usize] + if self.joined(i) { 1.0 } else { 0.0 }
    }

    fn for_each_neighbor(&self, i: u32, mut f: impl FnMut(u32, f32)) {
        if i == self.q() {
            match self.query {
                Some(Join::List(l)) => l.iter().for_each(|&j| f(j, 1.0)),
                Some(Join::All) => (0..self.q()).for_each(|j| f(j, 1.0)),
                None => {}
            }
            return;
        }
        for &(j, w) in self.host.neighbors(i) {
            f(j, w);
        }
        if self.joined(i) {
            f(self.q(), 1.0);
        }
    }
}

/// `a += c·x`.
fn axpy(a: &mut [f32], c: f32, x: &[f32]) {
    a.iter_mut().zip(x).for_each(|(a, &x)| *a += c * x);
}

/// Rows of `nodes` gathered from `input`.
fn gather<'a>(nodes: &[u32], width: usize, input: &(dyn Fn(u32) -> &'a [f32] + Sync)) -> Vec<f32> {
    let mut out = vec![0.0f32; nodes.len() * width];
    out.par_chunks_mut(width.max(1))
        .zip(nodes.par_iter())
        .for_each(|(o, &i)| o.copy_from_slice(input(i)));
    out
}

/// Where a [`CachedScorer`] reads a chunk's rows: its normalised features (the first
/// layer's input and the residual's cosine) and its cached output of each layer.
pub(crate) trait Rows: Sync {
    /// Chunk `i`'s normalised features.
    fn feature(&self, i: u32) -> &[f32];
    /// Chunk `i`'s cached output of layer `l` (for the MLP encoder, `l = 0`: its output).
    fn rep(&self, l: usize, i: u32) -> &[f32];
}

/// The rows held in memory (or mapped): the features and the scorer's own cache.
struct Held<'a> {
    x: &'a Embeddings,
    reps: &'a Embeddings,
    /// Start and width of each layer's output in a row of `reps`.
    layers: &'a [(usize, usize)],
}

impl Rows for Held<'_> {
    fn feature(&self, i: u32) -> &[f32] {
        self.x.row(i as usize)
    }

    fn rep(&self, l: usize, i: u32) -> &[f32] {
        let (start, width) = self.layers[l];
        &self.reps.row(i as usize)[start..start + width]
    }
}

/// The chunk ids whose rows one query reads ([`CachedScorer::needed`]), sorted and
/// distinct.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Needed {
    /// Chunks whose features are read.
    pub(crate) features: Vec<u32>,
    /// Chunks whose cached representations (every layer's, side by side) are read.
    pub(crate) reps: Vec<u32>,
}

/// Trained weights plus the chunks' representations at every layer.
#[derive(Debug)]
pub(crate) struct CachedScorer {
    net: HostLinkNet,
    aggregation: Aggregation,
    /// Positive edge-weight sum per chunk.
    wsum: Vec<f32>,
    /// Per chunk, every layer's output side by side (after ReLU where the encoder applies
    /// one; for the MLP encoder its output): `[num_chunks, stored_width]`, on the heap or
    /// mapped from a saved file. `None` for a scorer that holds no rows.
    reps: Option<Embeddings>,
    /// Widths: `widths[0]` = feature width, then one per layer output.
    widths: Vec<usize>,
    /// Start and width of each layer's output in a row of `reps`.
    layers: Vec<(usize, usize)>,
    /// One-layer models only: the chunks' representations with a zero-feature query joined
    /// to every chunk, and the coefficient of the query's message to each chunk.
    join_all: Option<JoinAllCache>,
}

#[derive(Debug)]
struct JoinAllCache {
    base: Vec<f32>,
    coef: Vec<f32>,
    /// NCN: per chunk, the sum of `base` over its neighbours and of their `coef`.
    cn_base: Vec<f32>,
    cn_coef: Vec<f32>,
}

impl CachedScorer {
    /// Compute every chunk's representation once. `x`: the normalised chunk features,
    /// `host`: the chunk graph; `join_all` also prepares the [`Join::All`] terms.
    pub(crate) fn new(
        net: HostLinkNet,
        aggregation: Aggregation,
        x: &Embeddings,
        host: &HostGraph,
        join_all: bool,
    ) -> Result<Self> {
        let nc = x.rows();
        let mut me = Self::unheld(net, aggregation, host, nc, x.dim());
        let all: Vec<u32> = (0..nc as u32).collect();
        let mut outputs: Vec<Vec<f32>> = Vec::new();
        if let Some(layers) = &me.net.node_mlp {
            outputs.push(mlp(layers, x.as_slice(), x.dim()));
        } else {
            let view = View {
                host,
                wsum: &me.wsum,
                query: None,
            };
            let depth = me.net.gnn.len();
            for l in 0..depth {
                let width = me.widths[l];
                let prev: &[f32] = if l == 0 {
                    x.as_slice()
                } else {
                    &outputs[l - 1]
                };
                let input = |j: u32| &prev[j as usize * width..(j as usize + 1) * width];
                let mut out = me.layer(l, &view, &all, &input, width);
                if l + 1 < depth {
                    relu_in_place(&mut out);
                }
                outputs.push(out);
            }
        }
        // One layer (the default): its output is the stored row as it is; deeper models'
        // outputs are laid side by side.
        let rows = if outputs.len() == 1 {
            outputs.pop().unwrap_or_default()
        } else {
            let mut rows = Vec::with_capacity(nc * me.stored_width());
            for c in 0..nc {
                for (l, out) in outputs.iter().enumerate() {
                    let w = me.widths[l + 1];
                    rows.extend_from_slice(&out[c * w..(c + 1) * w]);
                }
            }
            rows
        };
        me.reps = Some(Embeddings::new(me.stored_width(), rows)?);
        me.prepare_join_all(x, host, join_all);
        Ok(me)
    }

    /// [`CachedScorer::new`] with the representations written to the feature-rows file
    /// `path` (a temporary file renamed over it) and memory-mapped instead of held: a
    /// one-layer GNN or the MLP encoder streams them to the file a block of chunks at a
    /// time, so they are never on the heap whole; a deeper GNN, whose layers read the
    /// whole layer below, computes them on the heap first.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written or mapped.
    pub(crate) fn new_in_file(
        net: HostLinkNet,
        aggregation: Aggregation,
        x: &Embeddings,
        host: &HostGraph,
        join_all: bool,
        path: &std::path::Path,
    ) -> Result<Self> {
        let nc = x.rows();
        let mut me = Self::unheld(net, aggregation, host, nc, x.dim());
        let width = me.stored_width();
        let mut file = lprag_graph::FeatureRowsWriter::create(path, width)?;
        let mut sink = |rows: Vec<f32>| -> Result<()> { Ok(file.append(&rows)?) };
        if let Some(layers) = &me.net.node_mlp {
            let d = x.dim();
            for block in x.as_slice().chunks(LAYER_BLOCK * d.max(1)) {
                sink(mlp(layers, block, d))?;
            }
        } else if me.net.gnn.len() == 1 {
            let view = View {
                host,
                wsum: &me.wsum,
                query: None,
            };
            let all: Vec<u32> = (0..nc as u32).collect();
            let input = |j: u32| x.row(j as usize);
            me.layer_blocks(0, &view, &all, &input, x.dim(), &mut sink)?;
        } else {
            let held = Self::new(me.net.clone(), aggregation, x, host, false)?;
            let rows = held.reps.as_ref().map_or(&[][..], Embeddings::as_slice);
            for block in rows.chunks(LAYER_BLOCK * width) {
                sink(block.to_vec())?;
            }
        }
        me.reps = Some(file.finish_mapped()?);
        me.prepare_join_all(x, host, join_all);
        Ok(me)
    }

    /// A scorer on representations computed before ([`CachedScorer::stored_rows`] of the
    /// same weights on the same chunk graph, saved and read back, or mapped): nothing is
    /// recomputed but the [`Join::All`] terms when `join_all` asks for them.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when `stored` is not one row per chunk of
    /// [`CachedScorer::stored_width`].
    pub(crate) fn with_stored(
        net: HostLinkNet,
        aggregation: Aggregation,
        x: &Embeddings,
        host: &HostGraph,
        stored: Embeddings,
        join_all: bool,
    ) -> Result<Self> {
        let mut me = Self::unheld(net, aggregation, host, x.rows(), x.dim());
        if stored.dim() != me.stored_width() {
            return Err(Error::DimensionMismatch {
                location: "the predictor's stored representations (width)".into(),
                expected: me.stored_width(),
                actual: stored.dim(),
            });
        }
        if stored.rows() != x.rows() {
            return Err(Error::DimensionMismatch {
                location: "the predictor's stored representations (one row per chunk)".into(),
                expected: x.rows(),
                actual: stored.rows(),
            });
        }
        me.reps = Some(stored);
        me.prepare_join_all(x, host, join_all);
        Ok(me)
    }

    /// The [`Join::All`] terms, for a one-layer GNN when `join_all` asks for them.
    fn prepare_join_all(&mut self, x: &Embeddings, host: &HostGraph, join_all: bool) {
        if join_all && self.net.node_mlp.is_none() && self.net.gnn.len() == 1 && x.rows() > 0 {
            self.join_all = Some(self.join_all_cache(x, host));
        }
    }

    /// A scorer that holds no rows: the weights, the chunk graph's weight sums and the
    /// layers' widths for `d_in`-wide features; it scores only through
    /// [`CachedScorer::score_with`] with rows read elsewhere.
    pub(crate) fn unheld(
        net: HostLinkNet,
        aggregation: Aggregation,
        host: &HostGraph,
        num_chunks: usize,
        d_in: usize,
    ) -> Self {
        let wsum: Vec<f32> = (0..num_chunks as u32)
            .map(|i| host.neighbors(i).iter().map(|&(_, w)| w.max(0.0)).sum())
            .collect();
        let mut widths = vec![d_in];
        match &net.node_mlp {
            Some(layers) => widths.push(layers.last().map_or(d_in, |l| l.d_out)),
            None => widths.extend(net.gnn.iter().map(|l| l.nbr.d_out)),
        }
        let mut layers = Vec::with_capacity(widths.len() - 1);
        let mut start = 0;
        for &w in &widths[1..] {
            layers.push((start, w));
            start += w;
        }
        Self {
            net,
            aggregation,
            wsum,
            reps: None,
            widths,
            layers,
            join_all: None,
        }
    }

    /// Width of a chunk's cached row as a store keeps it: every layer's output side by
    /// side.
    pub(crate) fn stored_width(&self) -> usize {
        self.widths[1..].iter().sum()
    }

    /// Start and width of each layer's output in a stored row.
    pub(crate) fn layer_spans(&self) -> &[(usize, usize)] {
        &self.layers
    }

    /// The stored rows ([`CachedScorer::stored_width`] wide) of `chunks`, from this
    /// scorer's cache; `None` for a scorer that holds no rows.
    pub(crate) fn stored_rows(&self, chunks: std::ops::Range<usize>) -> Option<Vec<f32>> {
        let reps = self.reps.as_ref()?;
        let w = reps.dim();
        reps.as_slice()
            .get(chunks.start * w..chunks.end * w)
            .map(<[f32]>::to_vec)
    }

    /// Whether the cached rows are read from a mapped file rather than held on the heap.
    pub(crate) fn rows_mapped(&self) -> bool {
        self.reps.as_ref().is_some_and(Embeddings::is_stored)
    }

    /// Output width of the node encoder.
    fn hidden(&self) -> usize {
        *self.widths.last().expect("at least the feature width")
    }

    /// GNN layer `l` for `nodes`, reading layer inputs through `input`.
    fn layer<'a>(
        &self,
        l: usize,
        view: &View<'_>,
        nodes: &[u32],
        input: &(dyn Fn(u32) -> &'a [f32] + Sync),
        width: usize,
    ) -> Vec<f32> {
        let mut result = Vec::with_capacity(nodes.len() * self.net.gnn[l].nbr.d_out);
        let done: Result<()> = self.layer_blocks(l, view, nodes, input, width, &mut |out| {
            result.extend(out);
            Ok(())
        });
        debug_assert!(done.is_ok(), "collecting blocks cannot fail");
        result
    }

    /// [`CachedScorer::layer`] handing its output to `sink` a block of nodes at a time (in
    /// `nodes`' order); stops at `sink`'s first error.
    fn layer_blocks<'a>(
        &self,
        l: usize,
        view: &View<'_>,
        nodes: &[u32],
        input: &(dyn Fn(u32) -> &'a [f32] + Sync),
        width: usize,
        sink: &mut dyn FnMut(Vec<f32>) -> Result<()>,
    ) -> Result<()> {
        // Blocks of nodes, so the aggregated and own inputs (nodes × width each) stay small
        // when every chunk is encoded (1024-d inputs of 100,000 chunks took 0.8 GB).
        let layer = &self.net.gnn[l];
        for nodes in nodes.chunks(LAYER_BLOCK) {
            let mut agg = vec![0.0f32; nodes.len() * width];
            let gcn = self.aggregation == Aggregation::Gcn;
            agg.par_chunks_mut(width.max(1))
                .zip(nodes.par_iter())
                .for_each(|(a, &i)| {
                    let si = view.wsum(i);
                    view.for_each_neighbor(i, |j, w| {
                        let w = w.max(0.0);
                        let c = if gcn {
                            w / ((1.0 + si) * (1.0 + view.wsum(j))).sqrt()
                        } else if si > 0.0 {
                            w / si
                        } else {
                            0.0
                        };
                        if c > 0.0 {
                            axpy(a, c, input(j));
                        }
                    });
                    if gcn {
                        axpy(a, 1.0 / (1.0 + si), input(i));
                    }
                });
            let mut out = layer.nbr.forward(&agg, width);
            if let Some(this) = &layer.this {
                let own = gather(nodes, width, input);
                this.forward_into(&own, width, &mut out, true);
            }
            if let Some(b) = &layer.bias {
                out.par_chunks_mut(b.len().max(1))
                    .for_each(|o| o.iter_mut().zip(b).for_each(|(o, b)| *o += b));
            }
            sink(out)?;
        }
        Ok(())
    }

    /// The one-layer [`Join::All`] terms: with the query joined to every chunk, a layer is
    /// affine in the query's features, so each chunk's row is `base + coef · (W_nbr x_q)`.
    fn join_all_cache(&self, x: &Embeddings, host: &HostGraph) -> JoinAllCache {
        let (nc, d) = (x.rows(), x.dim());
        let join = Join::All;
        let view = View {
            host,
            wsum: &self.wsum,
            query: Some(&join),
        };
        let zero = vec![0.0f32; d];
        let q = nc as u32;
        let input = |j: u32| {
            if j == q {
                zero.as_slice()
            } else {
                x.row(j as usize)
            }
        };
        let all: Vec<u32> = (0..nc as u32).collect();
        let base = self.layer(0, &view, &all, &input, d);
        let gcn = self.aggregation == Aggregation::Gcn;
        let sq = view.wsum(q);
        let coef: Vec<f32> = (0..nc as u32)
            .map(|i| {
                let si = view.wsum(i);
                if gcn {
                    1.0 / ((1.0 + si) * (1.0 + sq)).sqrt()
                } else {
                    1.0 / si
                }
            })
            .collect();
        let h = self.hidden();
        let (mut cn_base, mut cn_coef) = (Vec::new(), Vec::new());
        if self.net.cn_mlp.is_some() {
            cn_base = vec![0.0f32; nc * h];
            cn_coef = vec![0.0f32; nc];
            cn_base
                .par_chunks_mut(h)
                .zip(cn_coef.par_iter_mut())
                .enumerate()
                .for_each(|(c, (z, k))| {
                    for &(u, _) in host.neighbors(c as u32) {
                        axpy(z, 1.0, &base[u as usize * h..(u as usize + 1) * h]);
                        *k += coef[u as usize];
                    }
                });
        }
        JoinAllCache {
            base,
            coef,
            cn_base,
            cn_coef,
        }
    }

    /// Link logits of the query `q` (normalised features) joined per `join` against
    /// `candidates`. `x`/`host`: the chunk features and graph the cache was built from.
    pub(crate) fn score(
        &self,
        x: &Embeddings,
        host: &HostGraph,
        q: &[f32],
        join: &Join,
        candidates: &[u32],
    ) -> Vec<f32> {
        if candidates.is_empty() {
            return Vec::new();
        }
        if let (Join::All, Some(ja)) = (join, &self.join_all) {
            return self.score_join_all(ja, x, host, q, candidates);
        }
        let Some(reps) = &self.reps else {
            debug_assert!(false, "a scorer without rows scores through score_with");
            return vec![0.0; candidates.len()];
        };
        let held = Held {
            x,
            reps,
            layers: &self.layers,
        };
        self.score_with(&held, host, q, join, candidates)
    }

    /// [`CachedScorer::score`] reading the chunks' rows from `rows`, which must hold at
    /// least those [`CachedScorer::needed`] names (a join to a list of chunks).
    pub(crate) fn score_with(
        &self,
        rows: &dyn Rows,
        host: &HostGraph,
        q: &[f32],
        join: &Join,
        candidates: &[u32],
    ) -> Vec<f32> {
        if candidates.is_empty() {
            return Vec::new();
        }
        let h = self.hidden();
        let last = self.widths.len() - 2;
        // Node representations: the query's and the changed chunks' rows, recomputed.
        let (changed, changed_rows, hq) = match &self.net.node_mlp {
            Some(layers) => (HashMap::new(), Vec::new(), mlp(layers, q, q.len())),
            None => self.changed_rows(rows, host, q, join),
        };
        let rep = |i: u32| match changed.get(&i) {
            Some(&r) => &changed_rows[r * h..(r + 1) * h],
            None => rows.rep(last, i),
        };
        let cn = |c: u32, z: &mut [f32]| {
            for &(u, _) in host.neighbors(c) {
                if join.contains(u) {
                    axpy(z, 1.0, rep(u));
                }
            }
        };
        let feature = |c: u32| rows.feature(c);
        self.head(&feature, q, &hq, candidates, &rep, &cn)
    }

    /// The nodes whose layer-`l` output computing `nodes`' representations (no query)
    /// reads, for each layer: the last layer's are `nodes`, each layer below adds the
    /// neighbours of the one above.
    fn closure_sets(&self, host: &HostGraph, nodes: &[u32]) -> Vec<Vec<u32>> {
        let depth = self.net.gnn.len();
        let mut sets = vec![Vec::new(); depth];
        let mut cur: Vec<u32> = nodes.to_vec();
        cur.sort_unstable();
        cur.dedup();
        for l in (0..depth).rev() {
            sets[l] = cur.clone();
            let mut seen: std::collections::HashSet<u32> = cur.iter().copied().collect();
            let mut next = cur.clone();
            for &i in &cur {
                for &(j, _) in host.neighbors(i) {
                    if seen.insert(j) {
                        next.push(j);
                    }
                }
            }
            next.sort_unstable();
            cur = next;
        }
        sets
    }

    /// The chunks whose features [`CachedScorer::recompute`] reads for `nodes`.
    pub(crate) fn recompute_needs(&self, host: &HostGraph, nodes: &[u32]) -> Vec<u32> {
        let mut need: Vec<u32> = match self.net.node_mlp {
            Some(_) => nodes.to_vec(),
            None => {
                let sets = self.closure_sets(host, nodes);
                let mut v = sets.first().cloned().unwrap_or_default();
                for &i in sets.first().map_or(&[][..], |s| s.as_slice()) {
                    v.extend(host.neighbors(i).iter().map(|&(j, _)| j));
                }
                v
            }
        };
        need.sort_unstable();
        need.dedup();
        need
    }

    /// The stored rows ([`CachedScorer::stored_width`] wide) of `nodes`, computed from the
    /// features in `rows` (which must hold [`CachedScorer::recompute_needs`]'s), no query
    /// joined: what [`CachedScorer::stored_rows`] gives for them.
    pub(crate) fn recompute(&self, rows: &dyn Rows, host: &HostGraph, nodes: &[u32]) -> Vec<f32> {
        if let Some(layers) = &self.net.node_mlp {
            let x = gather(nodes, self.widths[0], &|i| rows.feature(i));
            return mlp(layers, &x, self.widths[0]);
        }
        let view = View {
            host,
            wsum: &self.wsum,
            query: None,
        };
        let depth = self.net.gnn.len();
        let mut outs: Vec<HashMap<u32, Vec<f32>>> = Vec::new();
        for (l, set) in self.closure_sets(host, nodes).into_iter().enumerate() {
            let width = self.widths[l];
            let prev = outs.last();
            let input = |j: u32| match prev {
                None => rows.feature(j),
                Some(p) => p.get(&j).map_or(&[][..], |r| r.as_slice()),
            };
            let mut out = self.layer(l, &view, &set, &input, width);
            if l + 1 < depth {
                relu_in_place(&mut out);
            }
            let w = self.widths[l + 1];
            outs.push(
                set.iter()
                    .enumerate()
                    .map(|(r, &i)| (i, out[r * w..(r + 1) * w].to_vec()))
                    .collect(),
            );
        }
        let mut result = Vec::with_capacity(nodes.len() * self.stored_width());
        for &i in nodes {
            for layer in &outs {
                result.extend_from_slice(&layer[&i]);
            }
        }
        result
    }

    /// The nodes whose layer-`l` output a query joined per `join` changes, for each layer
    /// (the query's id, `num_chunks`, first).
    fn changed_sets(&self, host: &HostGraph, join: &Join) -> Vec<Vec<u32>> {
        let qid = self.wsum.len() as u32;
        let view = View {
            host,
            wsum: &self.wsum,
            query: Some(join),
        };
        let mut order = vec![qid];
        let mut sets = Vec::new();
        for l in 0..self.net.gnn.len() {
            let mut next = order.clone();
            let mut seen: std::collections::HashSet<u32> = order.iter().copied().collect();
            for &i in &order {
                view.for_each_neighbor(i, |j, _| {
                    if seen.insert(j) {
                        next.push(j);
                    }
                });
            }
            if l == 0 && self.aggregation == Aggregation::Gcn {
                let joined: Vec<u32> = next[1..].to_vec();
                for s in joined {
                    for &(j, _) in host.neighbors(s) {
                        if seen.insert(j) {
                            next.push(j);
                        }
                    }
                }
            }
            sets.push(next.clone());
            order = next;
        }
        sets
    }

    /// The chunks whose rows scoring `candidates` for a query joined per `join` (a list)
    /// reads: what [`CachedScorer::score_with`] asks of its [`Rows`].
    pub(crate) fn needed(&self, host: &HostGraph, join: &Join, candidates: &[u32]) -> Needed {
        let qid = self.wsum.len() as u32;
        let view = View {
            host,
            wsum: &self.wsum,
            query: Some(join),
        };
        let mut features = Vec::new();
        let mut reps = Vec::new();
        let sets = match &self.net.node_mlp {
            Some(_) => Vec::new(),
            None => self.changed_sets(host, join),
        };
        // Layer l reads, for each node it computes, its own and its neighbours' inputs:
        // the previous layer's changed rows, else the features (l = 0) or cached rows.
        let mut before: std::collections::HashSet<u32> = [qid].into_iter().collect();
        for (l, set) in sets.iter().enumerate() {
            let mut read = |j: u32| {
                if !before.contains(&j) {
                    if l == 0 {
                        features.push(j);
                    } else {
                        reps.push(j);
                    }
                }
            };
            for &i in set {
                read(i);
                view.for_each_neighbor(i, |j, _| read(j));
            }
            before = set.iter().copied().collect();
        }
        for &c in candidates {
            if !before.contains(&c) {
                reps.push(c);
            }
            if self.net.residual.is_some() {
                features.push(c);
            }
            if self.net.cn_mlp.is_some() {
                for &(u, _) in host.neighbors(c) {
                    if join.contains(u) && !before.contains(&u) {
                        reps.push(u);
                    }
                }
            }
        }
        for v in [&mut features, &mut reps] {
            v.sort_unstable();
            v.dedup();
        }
        Needed { features, reps }
    }

    /// With a GNN: the rows of every node whose representation the query changes (the
    /// query's first), layer by layer; their row index, the rows and the query's own row.
    fn changed_rows(
        &self,
        source: &dyn Rows,
        host: &HostGraph,
        q: &[f32],
        join: &Join,
    ) -> (HashMap<u32, usize>, Vec<f32>, Vec<f32>) {
        let qid = self.wsum.len() as u32;
        let mut changed: HashMap<u32, usize> = HashMap::new();
        let view = View {
            host,
            wsum: &self.wsum,
            query: Some(join),
        };
        changed.insert(qid, 0);
        let mut rows = q.to_vec();
        let depth = self.net.gnn.len();
        for (l, next) in self.changed_sets(host, join).into_iter().enumerate() {
            let width = self.widths[l];
            let (cur, cur_rows) = (&changed, &rows);
            let input = |j: u32| match cur.get(&j) {
                Some(&r) => &cur_rows[r * width..(r + 1) * width],
                None if l == 0 => source.feature(j),
                None => source.rep(l - 1, j),
            };
            let mut out = self.layer(l, &view, &next, &input, width);
            if l + 1 < depth {
                relu_in_place(&mut out);
            }
            changed = next.iter().enumerate().map(|(r, &i)| (i, r)).collect();
            rows = out;
        }
        let hq = rows[..self.hidden()].to_vec();
        (changed, rows, hq)
    }

    /// [`Join::All`] through the one-layer cache.
    fn score_join_all(
        &self,
        ja: &JoinAllCache,
        x: &Embeddings,
        host: &HostGraph,
        q: &[f32],
        candidates: &[u32],
    ) -> Vec<f32> {
        let h = self.hidden();
        let nc = x.rows();
        let join = Join::All;
        let view = View {
            host,
            wsum: &self.wsum,
            query: Some(&join),
        };
        let qid = nc as u32;
        let input = |j: u32| if j == qid { q } else { x.row(j as usize) };
        let hq = self.layer(0, &view, &[qid], &input, x.dim());
        // The query's message before aggregation: W_nbr x_q.
        let msg = self.net.gnn[0].nbr.forward(q, q.len());
        let reps: HashMap<u32, Vec<f32>> = candidates
            .iter()
            .map(|&c| {
                let mut r = ja.base[c as usize * h..(c as usize + 1) * h].to_vec();
                axpy(&mut r, ja.coef[c as usize], &msg);
                (c, r)
            })
            .collect();
        let rep = |i: u32| reps[&i].as_slice();
        let cn = |c: u32, z: &mut [f32]| {
            let c = c as usize;
            z.copy_from_slice(&ja.cn_base[c * h..(c + 1) * h]);
            axpy(z, ja.cn_coef[c], &msg);
        };
        let feature = |c: u32| x.row(c as usize);
        self.head(&feature, q, &hq, candidates, &rep, &cn)
    }

    /// The pair decoder (and dense residual) for `hq` against each candidate.
    #[allow(clippy::too_many_arguments)]
    fn head<'a, 'b>(
        &self,
        feature: &(dyn Fn(u32) -> &'b [f32] + Sync),
        q: &[f32],
        hq: &[f32],
        candidates: &[u32],
        rep: &(dyn Fn(u32) -> &'a [f32] + Sync),
        cn: &(dyn Fn(u32, &mut [f32]) + Sync),
    ) -> Vec<f32> {
        let h = hq.len();
        let p = candidates.len();
        let mut had = vec![0.0f32; p * h];
        had.par_chunks_mut(h.max(1))
            .zip(candidates.par_iter())
            .for_each(|(o, &c)| {
                o.iter_mut()
                    .zip(hq.iter().zip(rep(c)))
                    .for_each(|(o, (a, b))| *o = a * b)
            });
        let mut logits: Vec<f32> = if self.net.dot {
            had.chunks(h.max(1)).map(|r| r.iter().sum()).collect()
        } else if let (Some(cn_mlp), Some(out)) = (&self.net.cn_mlp, &self.net.out_mlp) {
            let mut z = vec![0.0f32; p * h];
            z.par_chunks_mut(h.max(1))
                .zip(candidates.par_iter())
                .for_each(|(z, &c)| cn(c, z));
            let beta = self.net.beta.unwrap_or(1.0);
            let mut a = mlp(cn_mlp, &z, h);
            a.iter_mut().for_each(|v| *v *= beta);
            let b = mlp(self.net.pair_mlp.as_deref().unwrap_or(&[]), &had, h);
            a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
            mlp(out, &a, h)
        } else {
            mlp(self.net.pair_mlp.as_deref().unwrap_or(&[]), &had, h)
        };
        if let Some((a, b)) = self.net.residual {
            logits
                .par_iter_mut()
                .zip(candidates.par_iter())
                .for_each(|(l, &c)| {
                    let cos: f32 = feature(c).iter().zip(q).map(|(u, v)| u * v).sum();
                    *l += cos * a + b;
                });
        }
        logits
    }
}
