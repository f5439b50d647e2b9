//! LeSeGR (CG-RAG's Lexical-Semantic Graph Retrieval): the scoring rule on
//! the host and its training in burn.
//!
//! For a query `q` with dense vector `q` and sparse relevance `δ_qj` to every chunk, the
//! chunk representations are `h⁽⁰⁾_j = c_j` (the chunk embedding) and, for `k = 1 … K`,
//!
//! ```text
//! h⁽ᵏ⁾_i = 1/(1 + |N(i)|) · Σ_{j ∈ {i} ∪ N(i)} δ_qj · α_ij · MSG⁽ᵏ⁾(h⁽ᵏ⁻¹⁾_j),   α_ii = 1
//! s(q, c_i) = q · h⁽ᴷ⁾_i
//! ```
//!
//! where `N(i)` are the chunks with an edge into `c_i`. lprag's choices where the paper
//! leaves freedom (documented on [`LesegrTrainConfig`]):
//! - **MSG⁽ᵏ⁾ is linear**, `h ↦ h·(I + Δ_k)` with `Δ_k` initialised to zero, and AGG is
//!   the mean above. Both are linear in `h`, so the score factorises:
//!   `s(q, ·) = A_K ⋯ A_1 (X·M·q)` with `M = (I + Δ_1)⋯(I + Δ_K)` and `A_k` the
//!   δ·α-weighted mean operator. A query costs one `d × d` product (`q' = M q`), one dot
//!   product per chunk it touches, and scalar propagation over the edges —
//!   [`propagate`] — instead of `K` dense layers over the subgraph.
//! - **α_ij = σ(MLP(c_i − c_j))**, a sigmoid keeping the gate in (0, 1) (the paper's MLP
//!   output is unconstrained); the untrained "lite" variant uses `max(0, cos(c_i, c_j))`
//!   ([`lite_alpha`]).
//! - **δ_qj = 1 + w·bm25(q, c_j) / maxₖ bm25(q, c_k)** is built by the caller (the
//!   retriever); lexical evidence can at most multiply a message by `1 + w`, and chunks
//!   without it still pass their dense signal (the paper's δ = 0 would silence them).

use std::time::Instant;

use burn::module::{Module, Param};
use burn::optim::AdamWConfig;
use burn::tensor::activation::{log_softmax, sigmoid};
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};
use lprag_core::{Embeddings, Error, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

pub use lprag_graph::InEdges;

use crate::checkpoint::{Checkpoints, RunKey};
use crate::dense::{mlp, relu_in_place, Dense};
use crate::early_stop::{check_schedule, split_holdout};
use crate::net::Mlp;
use crate::seeding::seed_generator;
use crate::shared::scalar;
use crate::training::{run_epochs, EpochLoop};

/// Most held-out queries: every epoch scores each against every chunk, so a fraction of
/// a large corpus's questions would cost more than the epoch's training (20,000 at
/// 100,000 passages). MuSiQue-100 (378) and 10,000 passages (2,000) stay under it.
const MAX_VALIDATION: usize = 2048;

/// The untrained gate: `α_e = max(0, cos(c_dst, c_src))` per edge of `graph`.
pub fn lite_alpha(emb: &Embeddings, graph: &InEdges) -> Vec<f32> {
    let dst = graph.destinations();
    graph
        .sources()
        .iter()
        .zip(&dst)
        .map(|(&s, &d)| lprag_core::cosine(emb.row(d as usize), emb.row(s as usize)).max(0.0))
        .collect()
}

/// LeSeGR's layers on scalars: from `h0[j] = c_j · q'` for the nodes in `nodes`, `layers`
/// rounds of `h_i ← (δ_i h_i + Σ_{e: j→i} δ_j α_e h_j) / (1 + |N(i)|)` over the nodes in
/// `nodes` (sorted). Nodes outside `nodes` count as `h = 0`, so the result is exact for
/// every node whose `layers`-hop in-neighbourhood lies inside `nodes` (see
/// [`InEdges::in_ball`]). `h0`, `delta` and the result are indexed by node id (length
/// `graph.num_nodes()`); `alpha` by edge id.
pub fn propagate(
    h0: &[f32],
    delta: &[f32],
    graph: &InEdges,
    alpha: &[f32],
    layers: usize,
    nodes: &[u32],
) -> Vec<f32> {
    let mut h = h0.to_vec();
    let mut next = vec![0.0f32; h.len()];
    for _ in 0..layers {
        for &i in nodes {
            let i = i as usize;
            let r = graph.range(i);
            let mut acc = delta[i] * h[i];
            for e in r.clone() {
                let j = graph.sources()[e] as usize;
                acc += delta[j] * alpha[e] * h[j];
            }
            next[i] = acc / (1 + r.len()) as f32;
        }
        std::mem::swap(&mut h, &mut next);
    }
    h
}

/// The shape of each message transform `I + Δ_k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageTransform {
    /// A full `d × d` matrix `Δ_k` (d² parameters per layer).
    Full,
    /// A diagonal `Δ_k` (d parameters per layer): a learned per-dimension reweighting,
    /// much harder to overfit on synthetic queries.
    Diagonal,
}

/// Training settings of the LeSeGR scorer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LesegrTrainConfig {
    /// Message-passing layers K. Default 2 (the paper's).
    pub layers: usize,
    /// Hidden width of the α MLP. Default 64.
    pub alpha_hidden: usize,
    /// Shape of the message transforms. Default [`MessageTransform::Diagonal`].
    pub messages: MessageTransform,
    /// Most epochs. Default 30.
    pub epochs: usize,
    /// Most optimisation steps over the whole run; 0 means no limit. Training ends at
    /// whichever comes first: `epochs`, this many steps (the last epoch is then cut short
    /// and validated) or early stopping. Default 0 (no limit).
    pub max_steps: usize,
    /// AdamW learning rate. Default 1e-3.
    pub learning_rate: f64,
    /// AdamW weight decay (pulls each `Δ_k` towards 0, i.e. MSG towards the identity).
    /// Default 1e-2.
    pub weight_decay: f32,
    /// Queries per step. Default 64.
    pub batch_size: usize,
    /// Initial softmax temperature of the cross-entropy (learned afterwards). Default 0.05.
    pub temperature: f32,
    /// Fraction of the training queries held out for early stopping, at most
    /// 2,048 queries (the rest of the fraction trains). Default 0.1.
    pub validation_fraction: f32,
    /// Epochs without a better validation loss before stopping. Default 3.
    pub patience: usize,
    /// Seed of initialisation, split and shuffling. Default 0.
    pub seed: u64,
}

impl Default for LesegrTrainConfig {
    fn default() -> Self {
        Self {
            layers: 2,
            alpha_hidden: 64,
            messages: MessageTransform::Diagonal,
            epochs: 30,
            max_steps: 0,
            learning_rate: 1e-3,
            weight_decay: 1e-2,
            batch_size: 64,
            temperature: 0.05,
            validation_fraction: 0.1,
            patience: 3,
            seed: 0,
        }
    }
}

impl LesegrTrainConfig {
    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        if self.layers == 0 || self.alpha_hidden == 0 || self.batch_size == 0 {
            return Err(Error::invalid(
                "LesegrTrainConfig",
                "layers, alpha_hidden and batch_size must be at least 1",
            ));
        }
        if self.layers > crate::config::MAX_LAYERS || self.alpha_hidden > crate::config::MAX_HIDDEN
        {
            return Err(Error::invalid(
                "LesegrTrainConfig",
                format!(
                    "layers must be at most {} and alpha_hidden at most {}, got {} and {}",
                    crate::config::MAX_LAYERS,
                    crate::config::MAX_HIDDEN,
                    self.layers,
                    self.alpha_hidden
                ),
            ));
        }
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(Error::invalid(
                "LesegrTrainConfig.temperature",
                "must be finite and > 0",
            ));
        }
        check_schedule(
            "LesegrTrainConfig",
            self.learning_rate,
            self.validation_fraction,
        )
    }
}

/// One training query.
#[derive(Debug, Clone, PartialEq)]
pub struct LesegrExample {
    /// The query's dense vector (any norm).
    pub query: Vec<f32>,
    /// `δ_qj − 1` for the chunks with lexical evidence, `(chunk, excess)`; every other
    /// chunk has `δ = 1`.
    pub delta_excess: Vec<(u32, f32)>,
    /// The gold chunks (at least one).
    pub positives: Vec<u32>,
}

/// What training produced, ready for [`propagate`]: the gate of every edge and the query
/// transform `M = (I + Δ_1)⋯(I + Δ_K)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LesegrWeights {
    /// α per edge of the graph it was trained on, by edge id.
    pub alpha: Vec<f32>,
    /// `M`, row-major `d × d`: the query is scored as `q' = M q`.
    pub transform: Vec<f32>,
    /// Width `d`.
    pub dim: usize,
    /// The gate network that produced `alpha`, for edges added after training.
    pub gate: LesegrGate,
}

/// One layer of a [`LesegrGate`]: `y = x·W + b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateLayer {
    /// `W`, row-major `[d_in, d_out]`.
    pub weight: Vec<f32>,
    /// `b`, `[d_out]`.
    pub bias: Vec<f32>,
    /// Output width.
    pub d_out: usize,
}

impl GateLayer {
    fn dense(&self) -> Dense {
        Dense {
            w: self.weight.clone(),
            b: self.bias.clone(),
            d_out: self.d_out,
        }
    }
}

/// LeSeGR's trained edge gate on the host, `α(c_src → c_dst) = σ(MLP(c_dst − c_src))`
/// (ReLU between the layers): the network itself rather than its outputs, so that edges
/// made after training — an index update — are gated as training gated its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LesegrGate {
    /// Input width `d` (the chunk embeddings').
    pub dim: usize,
    /// The layers, first to last; the last has one output.
    pub layers: Vec<GateLayer>,
}

impl LesegrGate {
    fn from_mlp(net: &Mlp, dim: usize) -> Result<Self> {
        let layers = net
            .layers()
            .iter()
            .map(|l| {
                let Dense { w, b, d_out } = Dense::export(l)?;
                Ok(GateLayer {
                    weight: w,
                    bias: b,
                    d_out,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self { dim, layers })
    }

    /// Shapes that chain from `dim` to one output.
    pub fn validate(&self) -> Result<()> {
        let mut width = self.dim;
        for (i, l) in self.layers.iter().enumerate() {
            if l.weight.len() != width * l.d_out || l.bias.len() != l.d_out {
                return Err(Error::invalid(
                    format!("LesegrGate layer {i}"),
                    format!(
                        "expected a {width}×{} weight and {} biases, got {} and {}",
                        l.d_out,
                        l.d_out,
                        l.weight.len(),
                        l.bias.len()
                    ),
                ));
            }
            width = l.d_out;
        }
        if self.layers.is_empty() || width != 1 {
            return Err(Error::invalid(
                "LesegrGate",
                format!(
                    "needs at least one layer ending in one output, ends in {width} ({} layers)",
                    self.layers.len()
                ),
            ));
        }
        Ok(())
    }

    /// α of each `(source, destination)` edge over the chunk embeddings `x` (the
    /// normalised rows the gate was trained on).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when `x` is not `dim` wide, [`Error::InvalidInput`] for
    /// an endpoint out of range or a malformed gate.
    pub fn alpha(&self, x: &Embeddings, edges: &[(u32, u32)]) -> Result<Vec<f32>> {
        self.validate()?;
        let d = self.dim;
        if x.dim() != d {
            return Err(Error::DimensionMismatch {
                location: "LesegrGate::alpha (chunk embeddings)".into(),
                expected: d,
                actual: x.dim(),
            });
        }
        if let Some(&(s, t)) = edges
            .iter()
            .find(|&&(s, t)| s as usize >= x.rows() || t as usize >= x.rows())
        {
            return Err(Error::invalid(
                "LesegrGate::alpha",
                format!("edge {s} -> {t} out of range for {} chunks", x.rows()),
            ));
        }
        // The first layer is linear: (c_t − c_s)·W + b = (c_t·W) − (c_s·W) + b, so W is
        // applied once per endpoint row rather than once per edge (as in training).
        let first = &self.layers[0];
        let no_bias = Dense {
            w: first.weight.clone(),
            b: vec![0.0; first.d_out],
            d_out: first.d_out,
        };
        let rest: Vec<Dense> = self.layers[1..].iter().map(GateLayer::dense).collect();
        let mut rows: Vec<u32> = edges.iter().flat_map(|&(s, t)| [s, t]).collect();
        rows.sort_unstable();
        rows.dedup();
        // Blocks bound the memory of the copies: the endpoint rows (d wide) and the
        // edges' hidden layer (h1 wide) are never all held at once, only `rows × h1`.
        const BLOCK: usize = 4096;
        let h1 = first.d_out;
        let mut projected = Vec::with_capacity(rows.len() * h1);
        let mut gathered = Vec::with_capacity(BLOCK.min(rows.len()) * d);
        for block in rows.chunks(BLOCK) {
            gathered.clear();
            for &r in block {
                gathered.extend_from_slice(x.row(r as usize));
            }
            projected.extend(no_bias.forward(&gathered, d));
        }
        drop(gathered);
        let at = |r: u32| {
            let i = rows.binary_search(&r).unwrap_or_default();
            &projected[i * h1..(i + 1) * h1]
        };
        let mut out = Vec::with_capacity(edges.len());
        let mut hidden = Vec::with_capacity(BLOCK.min(edges.len()) * h1);
        for block in edges.chunks(BLOCK) {
            hidden.clear();
            for &(s, t) in block {
                hidden.extend(
                    at(t)
                        .iter()
                        .zip(at(s))
                        .zip(&first.bias)
                        .map(|((a, b), c)| a - b + c),
                );
            }
            let logits = if rest.is_empty() {
                hidden.clone()
            } else {
                relu_in_place(&mut hidden);
                mlp(&rest, &hidden, h1)
            };
            out.extend(logits.into_iter().map(|z| 1.0 / (1.0 + (-z).exp())));
        }
        Ok(out)
    }
}

impl LesegrWeights {
    /// `q' = M q`.
    pub fn transform_query(&self, q: &[f32]) -> Vec<f32> {
        transform_query(&self.transform, q)
    }
}

/// `q' = M q` for a row-major square `M` of width `q.len()` (see
/// [`LesegrWeights::transform`]).
pub fn transform_query(m: &[f32], q: &[f32]) -> Vec<f32> {
    m.chunks_exact(q.len().max(1))
        .map(|row| lprag_core::dot(row, q))
        .collect()
}

#[derive(Module, Debug)]
struct LesegrNet {
    alpha: Mlp,
    deltas: Vec<Param<Tensor<2>>>,
    log_scale: Param<Tensor<1>>,
}

impl LesegrNet {
    fn new(d: usize, cfg: &LesegrTrainConfig, device: &Device) -> Self {
        Self {
            alpha: Mlp::new(&[d, cfg.alpha_hidden, 1], false, device),
            deltas: (0..cfg.layers)
                .map(|_| {
                    let shape = match cfg.messages {
                        MessageTransform::Full => [d, d],
                        MessageTransform::Diagonal => [1, d],
                    };
                    Param::from_tensor(Tensor::zeros(shape, device))
                })
                .collect(),
            log_scale: Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![(1.0 / cfg.temperature).ln()], [1]),
                device,
            )),
        }
    }

    /// `M = Π (I + Δ_k)`, `[d, d]`.
    fn transform(&self, d: usize, device: &Device) -> Tensor<2> {
        let eye = eye(d, device);
        let mut m = eye.clone();
        for delta in &self.deltas {
            let delta = delta.val();
            let w = if delta.dims()[0] == 1 {
                // Diagonal: I + diag(Δ) (the row broadcast scales column j by 1 + Δ_j).
                eye.clone() * (delta + 1.0)
            } else {
                eye.clone() + delta
            };
            m = m.matmul(w);
        }
        m
    }
}

fn eye(d: usize, device: &Device) -> Tensor<2> {
    let mut v = vec![0.0f32; d * d];
    for i in 0..d {
        v[i * d + i] = 1.0;
    }
    Tensor::from_data(TensorData::new(v, [d, d]), device)
}

/// The graph and features on a device.
struct DeviceGraph {
    x: Tensor<2>,
    src: Tensor<1, Int>,
    dst: Tensor<1, Int>,
    /// `[N, 1]`: `1 / (1 + |N(i)|)`.
    deg_inv: Tensor<2>,
    num_edges: usize,
}

impl DeviceGraph {
    fn new(x: &Embeddings, graph: &InEdges, device: &Device) -> Self {
        let (n, d, e) = (x.rows(), x.dim(), graph.num_edges());
        let src: Vec<i64> = graph.sources().iter().map(|&s| s as i64).collect();
        let dst_u = graph.destinations();
        let dst: Vec<i64> = dst_u.iter().map(|&s| s as i64).collect();
        let deg_inv: Vec<f32> = (0..n)
            .map(|i| 1.0 / (1 + graph.range(i).len()) as f32)
            .collect();
        Self {
            x: Tensor::from_data(TensorData::new(x.as_slice().to_vec(), [n, d]), device),
            src: Tensor::from_data(TensorData::new(src, [e]), device),
            dst: Tensor::from_data(TensorData::new(dst, [e]), device),
            deg_inv: Tensor::from_data(TensorData::new(deg_inv, [n, 1]), device),
            num_edges: e,
        }
    }

    /// `α_e = σ(MLP(c_dst − c_src))` for every edge, `[E, 1]`, with the first layer applied
    /// to the `N` chunk rows rather than the `E` differences
    /// ([`Mlp::forward_differences`]).
    fn alpha(&self, net: &LesegrNet) -> Tensor<2> {
        sigmoid(
            net.alpha
                .forward_differences(self.x.clone(), self.src.clone(), self.dst.clone()),
        )
    }
}

/// Loss of one batch: scores of every chunk for every query, cross-entropy against the
/// gold chunks (multi-positive: −log Σ_gold softmax).
fn batch_loss(
    net: &LesegrNet,
    g: &DeviceGraph,
    batch: &[&LesegrExample],
    layers: usize,
    device: &Device,
) -> Tensor<1> {
    let (n, d) = (g.x.dims()[0], g.x.dims()[1]);
    let b = batch.len();
    let mut q = Vec::with_capacity(b * d);
    let mut delta = vec![1.0f32; n * b];
    let mut mask = vec![0.0f32; b * n];
    for (k, ex) in batch.iter().enumerate() {
        q.extend_from_slice(&ex.query);
        for &(j, v) in &ex.delta_excess {
            delta[j as usize * b + k] += v;
        }
        for &p in &ex.positives {
            mask[k * n + p as usize] = 1.0;
        }
    }
    let q = Tensor::<2>::from_data(TensorData::new(q, [b, d]), device);
    let delta = Tensor::<2>::from_data(TensorData::new(delta, [n, b]), device);
    let mask = Tensor::<2>::from_data(TensorData::new(mask, [b, n]), device);
    // q'ᵀ rows: Q·Mᵀ, then h⁽⁰⁾ = X·Q'ᵀ, [N, B].
    let qp = q.matmul(net.transform(d, device).transpose());
    let mut h = g.x.clone().matmul(qp.transpose());
    let alpha = (g.num_edges > 0).then(|| g.alpha(net));
    for _ in 0..layers {
        let m = delta.clone() * h;
        let mut agg = m.clone();
        if let Some(a) = &alpha {
            let msgs = m.select(0, g.src.clone()) * a.clone();
            agg = agg.select_assign(0, g.dst.clone(), msgs, IndexingUpdateOp::Add);
        }
        h = agg * g.deg_inv.clone();
    }
    let logits = h.transpose() * net.log_scale.val().exp().unsqueeze::<2>();
    let lsm = log_softmax(logits, 1);
    // log Σ_gold softmax, stably: a log-sum-exp over the gold entries only.
    let masked = lsm + (mask - 1.0).mul_scalar(1e4);
    let m = masked.clone().max_dim(1).detach();
    let pos = (masked - m.clone()).exp().sum_dim(1).log() + m;
    pos.mean().neg()
}

/// Train LeSeGR's α MLP and message transforms on `examples` over the chunk graph
/// (`x`: chunk embeddings, L2-normalised by the caller; `graph`: its in-edges), with
/// cross-entropy over all chunks and AdamW, on `device` (its autodiff twin). A held-out
/// fraction of the examples picks the epoch kept (early stopping). Every example must
/// have a positive and indices in range. Without checkpoints; see
/// [`train_lesegr_resumable`].
pub fn train_lesegr(
    x: &Embeddings,
    graph: &InEdges,
    examples: &[LesegrExample],
    cfg: &LesegrTrainConfig,
    device: &Device,
    progress: &dyn Progress,
) -> Result<(LesegrWeights, TrainReport)> {
    train_lesegr_resumable(x, graph, examples, cfg, device, progress, None)
}

/// [`train_lesegr`], checkpointed after every epoch in `checkpoints` when given: a later
/// call with the same embeddings, graph, examples and configuration starts after the last
/// finished epoch (or returns the finished result at once), so an interrupted run loses at
/// most one epoch; other inputs start afresh and overwrite the checkpoint. Each epoch
/// shuffles with its own generator (seed and epoch number), so a resumed run sees the same
/// batches, and AdamW's moment estimates are saved with the weights, so a resumed run
/// continues as the uninterrupted one would.
///
/// # Errors
/// As [`train_lesegr`], plus checkpoint files that cannot be written or read.
pub fn train_lesegr_resumable(
    x: &Embeddings,
    graph: &InEdges,
    examples: &[LesegrExample],
    cfg: &LesegrTrainConfig,
    device: &Device,
    progress: &dyn Progress,
    checkpoints: Option<&std::path::Path>,
) -> Result<(LesegrWeights, TrainReport)> {
    cfg.validate()?;
    let started = Instant::now();
    check_inputs(x, graph, examples)?;
    let d = x.dim();
    // The split's own generator; each epoch's shuffle has its own (`run_epochs`).
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let (mut val_idx, mut train_idx) =
        split_holdout(examples.len(), cfg.validation_fraction, &mut rng);
    if val_idx.len() > MAX_VALIDATION {
        train_idx.extend(val_idx.drain(MAX_VALIDATION..));
    }

    let ad = device.clone().autodiff();
    // Held through the first step: parameters are drawn at their first use.
    let draws = seed_generator(&ad, cfg.seed);
    let g_ad = DeviceGraph::new(x, graph, &ad);
    let g_val = DeviceGraph::new(x, graph, device);
    let optimizer = AdamWConfig::new()
        .with_weight_decay(cfg.weight_decay)
        .init();
    let pick =
        |idx: &[usize]| -> Vec<&LesegrExample> { idx.iter().map(|&i| &examples[i]).collect() };
    let checkpoints =
        Checkpoints::open_if(checkpoints, || lesegr_run_key(x, graph, examples, cfg))?;
    let plan = EpochLoop {
        stage: "train lesegr",
        location: "train_lesegr",
        epochs: cfg.epochs,
        patience: cfg.patience,
        batch_size: cfg.batch_size.max(1),
        max_steps: cfg.max_steps,
        seed: cfg.seed,
        learning_rate: cfg.learning_rate,
        validates: !val_idx.is_empty(),
        checkpoints: checkpoints.as_ref(),
        progress,
    };
    let (net, mut report) = run_epochs(
        &plan,
        &train_idx,
        LesegrNet::new(d, cfg, &ad),
        || LesegrNet::new(d, cfg, &ad),
        optimizer,
        Some(draws),
        |net, batch, _| Ok(batch_loss(net, &g_ad, &pick(batch.items), cfg.layers, &ad)),
        |valid| {
            let (mut sum, mut count) = (0.0f32, 0usize);
            for idx in val_idx.chunks(cfg.batch_size.max(1)) {
                sum += scalar(batch_loss(valid, &g_val, &pick(idx), cfg.layers, device))
                    * idx.len() as f32;
                count += idx.len();
            }
            Ok(sum / count.max(1) as f32)
        },
    )?;
    let weights = export(&net, &g_val, d, device)?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok((weights, report))
}

/// The embeddings, graph and examples of a training call, checked against each other.
fn check_inputs(x: &Embeddings, graph: &InEdges, examples: &[LesegrExample]) -> Result<()> {
    let (n, d) = (x.rows(), x.dim());
    if graph.num_nodes() != n {
        return Err(Error::DimensionMismatch {
            location: "train_lesegr (graph nodes vs embeddings)".into(),
            expected: n,
            actual: graph.num_nodes(),
        });
    }
    for (k, ex) in examples.iter().enumerate() {
        if ex.query.len() != d {
            return Err(Error::DimensionMismatch {
                location: format!("train_lesegr example {k} query"),
                expected: d,
                actual: ex.query.len(),
            });
        }
        if ex.positives.is_empty() {
            return Err(Error::invalid(
                format!("train_lesegr example {k}"),
                "no gold chunk",
            ));
        }
        if let Some(bad) = ex
            .positives
            .iter()
            .chain(ex.delta_excess.iter().map(|(j, _)| j))
            .find(|&&j| j as usize >= n)
        {
            return Err(Error::invalid(
                format!("train_lesegr example {k}"),
                format!("chunk {bad} out of range for {n} chunks"),
            ));
        }
    }
    Ok(())
}

/// The checkpoint key of a LeSeGR training run: every input that shapes it.
fn lesegr_run_key(
    x: &Embeddings,
    graph: &InEdges,
    examples: &[LesegrExample],
    cfg: &LesegrTrainConfig,
) -> Result<String> {
    let mut h = RunKey::new();
    h.bytes(b"lesegr")
        .usize(x.dim())
        .f32s(x.as_slice())
        .u32s(graph.sources())
        .u32s(&graph.destinations())
        .usize(examples.len());
    for ex in examples {
        h.f32s(&ex.query).u32s(&ex.positives);
        for &(j, v) in &ex.delta_excess {
            h.bytes(&j.to_le_bytes()).bytes(&v.to_le_bytes());
        }
        h.usize(ex.delta_excess.len());
    }
    Ok(h.json(cfg)?.finish())
}

fn export(net: &LesegrNet, g: &DeviceGraph, d: usize, device: &Device) -> Result<LesegrWeights> {
    let alpha = if g.num_edges > 0 {
        g.alpha(net)
            .into_data()
            .try_into_vec::<f32>()
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let transform = net
        .transform(d, device)
        .into_data()
        .try_into_vec::<f32>()
        .unwrap_or_default();
    // M acts on row vectors as h·M in training (q' = Q·Mᵀ as rows), i.e. q' = M q as a
    // column: exactly `transform_query`'s row-major product.
    Ok(LesegrWeights {
        alpha,
        transform,
        dim: d,
        gate: LesegrGate::from_mlp(&net.alpha, d)?,
    })
}

#[cfg(test)]
mod tests;
