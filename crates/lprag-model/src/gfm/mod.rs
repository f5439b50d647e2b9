//! GFM-RAG's query-dependent GNN in burn.
//!
//! For a query with sentence embedding `q` and linked query entities `E_q`, over a
//! knowledge graph of entities and typed edges `(e, r, e')`:
//!
//! ```text
//! H⁰_e   = W_q q  if e ∈ E_q, else 0                     (boundary, [N, d])
//! R_l    = g_l(X_r)                                       (relation embeddings, 2-layer MLP)
//! A_e'   = H⁰_e' + Σ_{(e, r, e')} H^l_e ⊙ R_l[r]          (DistMult messages, sum + boundary)
//! H^{l+1} = ReLU(LayerNorm(W_l [H^l ‖ A])) + H^l          (update, residual)
//! P_e    = σ(MLP([H^L_e ‖ W_q q]))                        (entity relevance)
//! ```
//!
//! `X_r` are the relations' sentence embeddings (the same encoder as the query), `W_q`
//! projects the encoder's width to the hidden width `d`. Message passing is a gather
//! (`select` over edge sources) and a scatter-add (`select_assign` into edge
//! destinations): no dense `N × N` adjacency anywhere, and every index is checked on the
//! host ([`KgEdges::new`], [`GfmExample`] checks in [`GfmModel::train`]) before it reaches a
//! device. A batch of `B` queries runs as `[N, B, d]` states.
//!
//! Training minimises `α·BCE + (1 − α)·RANK` (the paper's eq. 13, α = 0.3) over each
//! query's target entities and `negatives` entities sampled uniformly from the rest. The
//! ranking loss as printed, `−P(e) / Σ_{E⁻} P(e')`, is unbounded below (pushing every
//! negative to 0 sends it to −∞); lprag bounds it by adding the positive to the
//! denominator, `−P(e) / (P(e) + Σ_{E⁻} P(e'))`. An example may hide edges from the graph
//! (`hidden_edges`): KG-completion pre-training hides the triple it asks about, so the
//! model must reach the answer another way.

use std::time::Instant;

use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::AdamWConfig;
use burn::tensor::activation::{log_sigmoid, relu, sigmoid};
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};
use lprag_core::{Embeddings, Error, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

pub use lprag_graph::KgEdges;

use crate::checkpoint::{Checkpoints, RunKey};
use crate::dense::{to_vec, Dense};
use crate::early_stop::{check_schedule, split_holdout};
use crate::net::Mlp;
use crate::seeding::seed_generator;
use crate::shared::scalar;
use crate::training::{run_epochs, EpochLoop};

/// The network's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GfmModelConfig {
    /// Hidden width `d`. Default 512 (the paper's).
    pub hidden: usize,
    /// Message-passing layers `L`. Default 6 (the paper's).
    pub layers: usize,
}

impl Default for GfmModelConfig {
    fn default() -> Self {
        Self {
            hidden: 512,
            layers: 6,
        }
    }
}

impl GfmModelConfig {
    /// A lower bound on the number of weights of the network for `d_in`-wide relation
    /// embeddings (weight matrices only), computed without building it: the query
    /// projection `d_in × d`; per layer a relation MLP `d_in × d + d × d` and the update
    /// `2d × d`; the scoring MLP `2d × d + d`.
    pub fn min_parameters(&self, d_in: usize) -> u128 {
        // Saturating: the numbers come from a file and may be anything.
        let (d, d_in, layers) = (self.hidden as u128, d_in as u128, self.layers as u128);
        let dd = d.saturating_mul(d);
        let per_layer = d_in.saturating_mul(d).saturating_add(dd.saturating_mul(3));
        d_in.saturating_mul(d)
            .saturating_add(layers.saturating_mul(per_layer))
            .saturating_add(dd.saturating_mul(2))
            .saturating_add(d)
    }

    /// Refuse, before anything is allocated, a configuration that asks for more weights
    /// than the weights file at `path` can hold (an edited `hidden` would otherwise
    /// allocate gigabytes first).
    ///
    /// # Errors
    /// [`Error::Format`] naming the file; [`Error::Io`] when it cannot be read.
    pub fn check_weights_file(&self, d_in: usize, path: &std::path::Path) -> Result<()> {
        crate::weights::check_capacity(path, self.min_parameters(d_in))
    }

    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        if self.hidden == 0 || self.layers == 0 {
            return Err(Error::invalid(
                "GfmModelConfig",
                "hidden and layers must be at least 1",
            ));
        }
        Ok(())
    }
}

/// The network's weights on the host, with every layer's relation embeddings precomputed
/// (they do not depend on the query).
struct HostNet {
    query: Dense,
    relations: Vec<Vec<f32>>,
    update: Vec<Dense>,
    norm: Vec<(Vec<f32>, Vec<f32>)>,
    score: Vec<Dense>,
    d: usize,
    d_in: usize,
}

impl HostNet {
    fn export(net: &GfmNet, relations: &Embeddings) -> Result<Self> {
        let d_in = relations.dim();
        let d = net.query_proj.weight.dims()[1];
        let rel_layers = net
            .relation
            .iter()
            .map(|mlp| {
                let mut x = relations.as_slice().to_vec();
                let mut width = d_in;
                let n = mlp.layers().len();
                for (i, l) in mlp.layers().iter().enumerate() {
                    let dense = Dense::export(l)?;
                    x = dense.forward(&x, width);
                    width = dense.d_out;
                    if i + 1 < n {
                        x.iter_mut().for_each(|v| *v = v.max(0.0));
                    }
                }
                Ok(x)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            query: Dense::export(&net.query_proj)?,
            relations: rel_layers,
            update: net
                .update
                .iter()
                .map(Dense::export)
                .collect::<Result<_>>()?,
            norm: net
                .norm
                .iter()
                .map(|n| {
                    let g = to_vec(n.gamma.val())?;
                    let b = match &n.beta {
                        Some(b) => to_vec(b.val())?,
                        None => vec![0.0; g.len()],
                    };
                    Ok((g, b))
                })
                .collect::<Result<_>>()?,
            score: net
                .score
                .layers()
                .iter()
                .map(Dense::export)
                .collect::<Result<_>>()?,
            d,
            d_in,
        })
    }

    /// The forward pass of `GfmNet::forward` for one query, on the host.
    fn score(&self, edges: &KgEdges, query: &[f32], query_entities: &[u32]) -> Vec<f32> {
        use rayon::prelude::*;
        let (n, d) = (edges.num_entities(), self.d);
        let qh = self.query.forward(query, self.d_in);
        let mut boundary = vec![0.0f32; n * d];
        for &e in query_entities {
            boundary[e as usize * d..(e as usize + 1) * d].copy_from_slice(&qh);
        }
        let mut h = boundary.clone();
        for l in 0..self.update.len() {
            let mut agg = boundary.clone();
            let rel = &self.relations[l];
            for i in 0..edges.len() {
                let (s, r, t) = (
                    edges.sources()[i] as usize,
                    edges.relations()[i] as usize,
                    edges.destinations()[i] as usize,
                );
                let hs = &h[s * d..(s + 1) * d];
                let rr = &rel[r * d..(r + 1) * d];
                for ((a, &x), &y) in agg[t * d..(t + 1) * d].iter_mut().zip(hs).zip(rr) {
                    *a += x * y;
                }
            }
            let mut x = vec![0.0f32; n * 2 * d];
            x.par_chunks_mut(2 * d).enumerate().for_each(|(i, row)| {
                row[..d].copy_from_slice(&h[i * d..(i + 1) * d]);
                row[d..].copy_from_slice(&agg[i * d..(i + 1) * d]);
            });
            let mut u = self.update[l].forward(&x, 2 * d);
            let (gamma, beta) = &self.norm[l];
            u.par_chunks_mut(d)
                .zip(h.par_chunks(d))
                .for_each(|(row, hi)| {
                    let mean = row.iter().sum::<f32>() / d as f32;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
                    let inv = 1.0 / (var + LN_EPS as f32).sqrt();
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = ((*v - mean) * inv * gamma[j] + beta[j]).max(0.0) + hi[j];
                    }
                });
            h = u;
        }
        // Score MLP on [h ‖ qh]: the query half of the first layer is the same for every
        // entity, so it is folded into the bias once.
        let first = &self.score[0];
        let hidden = first.d_out;
        let mut bias = first.b.clone();
        for (k, &v) in qh.iter().enumerate() {
            let wk = &first.w[(d + k) * hidden..(d + k + 1) * hidden];
            for (a, &w) in bias.iter_mut().zip(wk) {
                *a += v * w;
            }
        }
        let top = Dense {
            w: first.w[..d * hidden].to_vec(),
            b: bias,
            d_out: hidden,
        };
        let mut z = top.forward(&h, d);
        for (i, layer) in self.score.iter().enumerate().skip(1) {
            z.iter_mut().for_each(|v| *v = v.max(0.0));
            z = layer.forward(&z, self.score[i - 1].d_out);
        }
        z.into_iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect()
    }
}

/// Training settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GfmTrainConfig {
    /// Most epochs. Default 10.
    pub epochs: usize,
    /// AdamW learning rate. Default 5e-4 (the paper's).
    pub learning_rate: f64,
    /// AdamW weight decay. Default 0.
    pub weight_decay: f32,
    /// Queries per step. Default 4 (the paper's).
    pub batch_size: usize,
    /// Weight α of the BCE term; the ranking term gets 1 − α. Default 0.3 (the paper's).
    pub bce_weight: f32,
    /// Negative entities sampled per query. Default 256.
    pub negatives: usize,
    /// Fraction of the examples held out for early stopping. Default 0.1.
    pub validation_fraction: f32,
    /// Epochs without a better validation loss before stopping. Default 2.
    pub patience: usize,
    /// Seed of initialisation, split, shuffling and negative sampling. Default 0.
    pub seed: u64,
}

impl Default for GfmTrainConfig {
    fn default() -> Self {
        Self {
            epochs: 10,
            learning_rate: 5e-4,
            weight_decay: 0.0,
            batch_size: 4,
            bce_weight: 0.3,
            negatives: 256,
            validation_fraction: 0.1,
            patience: 2,
            seed: 0,
        }
    }
}

impl GfmTrainConfig {
    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        if self.batch_size == 0 || self.negatives == 0 {
            return Err(Error::invalid(
                "GfmTrainConfig",
                "batch_size and negatives must be at least 1",
            ));
        }
        if !(0.0..=1.0).contains(&self.bce_weight) {
            return Err(Error::invalid(
                "GfmTrainConfig.bce_weight",
                "must be in [0, 1]",
            ));
        }
        check_schedule(
            "GfmTrainConfig",
            self.learning_rate,
            self.validation_fraction,
        )
    }
}

/// One training query.
#[derive(Debug, Clone, PartialEq)]
pub struct GfmExample {
    /// The query's sentence embedding (encoder width).
    pub query: Vec<f32>,
    /// Entities the query mentions (they start with the query embedding).
    pub query_entities: Vec<u32>,
    /// Entities that should score high (at least one).
    pub targets: Vec<u32>,
    /// Edge ids ([`KgEdges::edge`]) removed from the graph for this query.
    pub hidden_edges: Vec<u32>,
}

/// LayerNorm's ε, shared by the burn module and the host forward pass.
const LN_EPS: f64 = 1e-5;

#[derive(Module, Debug)]
struct GfmNet {
    query_proj: Linear,
    relation: Vec<Mlp>,
    update: Vec<Linear>,
    norm: Vec<LayerNorm>,
    score: Mlp,
}

impl GfmNet {
    fn new(d_in: usize, cfg: &GfmModelConfig, device: &Device) -> Self {
        let d = cfg.hidden;
        Self {
            query_proj: LinearConfig::new(d_in, d).init(device),
            relation: (0..cfg.layers)
                .map(|_| Mlp::new(&[d_in, d, d], false, device))
                .collect(),
            update: (0..cfg.layers)
                .map(|_| LinearConfig::new(2 * d, d).init(device))
                .collect(),
            norm: (0..cfg.layers)
                .map(|_| LayerNormConfig::new(d).with_epsilon(LN_EPS).init(device))
                .collect(),
            score: Mlp::new(&[2 * d, d, 1], false, device),
        }
    }

    /// Entity logits `[N, B]` for `B` queries. `q`: `[B, d_in]`; `start`: `[N, B, 1]`, 1
    /// where an entity is a query entity of that query; `keep`: `[E, B, 1]` edge mask.
    fn forward(
        &self,
        g: &DeviceKg,
        q: Tensor<2>,
        start: Tensor<3>,
        keep: Option<Tensor<3>>,
    ) -> Tensor<2> {
        let [n, b, _] = start.dims();
        let qh = self.query_proj.forward(q); // [B, d]
        let d = qh.dims()[1];
        let boundary = start * qh.clone().unsqueeze_dim::<3>(0); // [N, B, d]
        let mut h = boundary.clone();
        for l in 0..self.update.len() {
            if let (Some(src), Some(rel), Some(dst)) = (&g.src, &g.rel, &g.dst) {
                let r = self.relation[l].forward(g.relations.clone()); // [R, d]
                let re = r.select(0, rel.clone()).unsqueeze_dim::<3>(1); // [E, 1, d]
                let mut msg = h.clone().select(0, src.clone()) * re; // [E, B, d]
                if let Some(k) = &keep {
                    msg = msg * k.clone();
                }
                let agg =
                    boundary
                        .clone()
                        .select_assign(0, dst.clone(), msg, IndexingUpdateOp::Add);
                h = self.layer(l, h, agg, n, b, d);
            } else {
                h = self.layer(l, h, boundary.clone(), n, b, d);
            }
        }
        let qb = qh.unsqueeze_dim::<3>(0).expand([n, b, d]);
        let feat = Tensor::cat(vec![h, qb], 2).reshape([n * b, 2 * d]);
        self.score.forward(feat).reshape([n, b])
    }

    fn layer(
        &self,
        l: usize,
        h: Tensor<3>,
        agg: Tensor<3>,
        n: usize,
        b: usize,
        d: usize,
    ) -> Tensor<3> {
        let x = Tensor::cat(vec![h.clone(), agg], 2).reshape([n * b, 2 * d]);
        let u = relu(self.norm[l].forward(self.update[l].forward(x)));
        u.reshape([n, b, d]) + h
    }
}

/// The graph's index tensors and relation embeddings on a device.
struct DeviceKg {
    src: Option<Tensor<1, Int>>,
    rel: Option<Tensor<1, Int>>,
    dst: Option<Tensor<1, Int>>,
    relations: Tensor<2>,
    num_entities: usize,
    num_edges: usize,
}

impl DeviceKg {
    fn new(edges: &KgEdges, relations: &Embeddings, device: &Device) -> Self {
        let idx = |v: &[u32]| {
            (!v.is_empty()).then(|| {
                Tensor::<1, Int>::from_data(
                    TensorData::new(v.iter().map(|&x| x as i64).collect::<Vec<_>>(), [v.len()]),
                    device,
                )
            })
        };
        Self {
            src: idx(edges.sources()),
            rel: idx(edges.relations()),
            dst: idx(edges.destinations()),
            relations: Tensor::from_data(
                TensorData::new(
                    relations.as_slice().to_vec(),
                    [relations.rows().max(1), relations.dim()],
                ),
                device,
            ),
            num_entities: edges.num_entities(),
            num_edges: edges.len(),
        }
    }
}

/// A trained (or freshly initialised) GFM retriever network bound to one knowledge graph.
/// `Send + Sync`; scoring is read-only.
pub struct GfmModel {
    net: GfmNet,
    host: HostNet,
    graph: DeviceKg,
    edges: KgEdges,
    relations: Embeddings,
    config: GfmModelConfig,
    d_in: usize,
    device: Device,
}

impl std::fmt::Debug for GfmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GfmModel")
            .field("config", &self.config)
            .field("d_in", &self.d_in)
            .field("entities", &self.edges.num_entities())
            .field("edges", &self.edges.len())
            .finish()
    }
}

impl GfmModel {
    /// A model with fresh weights (seeded) over `edges`, whose relation `r` has the
    /// sentence embedding `relations.row(r)`; queries must have the same width.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when `relations` has fewer rows than the graph has
    /// relation types; [`Error::InvalidInput`] for a bad configuration.
    pub fn new(
        edges: KgEdges,
        relations: Embeddings,
        config: GfmModelConfig,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        config.validate()?;
        if relations.rows() < edges.num_relations() || relations.dim() == 0 {
            return Err(Error::DimensionMismatch {
                location: "GfmModel::new (relation embeddings)".into(),
                expected: edges.num_relations(),
                actual: relations.rows(),
            });
        }
        let d_in = relations.dim();
        // Held until the export has drawn the parameters (in its order, as before the
        // lock existed).
        let draws = seed_generator(device, seed);
        let net = GfmNet::new(d_in, &config, device);
        let host = HostNet::export(&net, &relations)?;
        draws.finish(&net);
        Ok(Self {
            net,
            host,
            graph: DeviceKg::new(&edges, &relations, device),
            edges,
            relations,
            config,
            d_in,
            device: device.clone(),
        })
    }

    /// This model's weights bound to another knowledge graph — an updated index's. The
    /// network is inductive: it reads entities only through the graph's structure and
    /// relations through their sentence embeddings, so the same weights score a grown or
    /// shrunk graph without retraining.
    ///
    /// # Errors
    /// As [`GfmModel::new`], and [`Error::DimensionMismatch`] when `relations` is not as
    /// wide as the model's input.
    pub fn rebind(&self, edges: KgEdges, relations: Embeddings) -> Result<Self> {
        if relations.rows() < edges.num_relations() || relations.dim() != self.d_in {
            return Err(Error::DimensionMismatch {
                location: "GfmModel::rebind (relation embeddings, rows × width)".into(),
                expected: edges.num_relations() * self.d_in,
                actual: relations.rows() * relations.dim(),
            });
        }
        let host = HostNet::export(&self.net, &relations)?;
        Ok(Self {
            net: self.net.clone(),
            host,
            graph: DeviceKg::new(&edges, &relations, &self.device),
            edges,
            relations,
            config: self.config.clone(),
            d_in: self.d_in,
            device: self.device.clone(),
        })
    }

    /// The network's shape.
    pub fn config(&self) -> &GfmModelConfig {
        &self.config
    }

    /// The graph the model runs on.
    pub fn edges(&self) -> &KgEdges {
        &self.edges
    }

    /// The relations' sentence embeddings, by relation id.
    pub fn relations(&self) -> &Embeddings {
        &self.relations
    }

    /// Width of query and relation embeddings.
    pub fn input_dim(&self) -> usize {
        self.d_in
    }

    fn check_query(&self, location: &str, query: &[f32], entities: &[u32]) -> Result<()> {
        if query.len() != self.d_in {
            return Err(Error::DimensionMismatch {
                location: location.into(),
                expected: self.d_in,
                actual: query.len(),
            });
        }
        if query.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(location, "query embedding is not finite"));
        }
        if let Some(e) = entities
            .iter()
            .find(|&&e| e as usize >= self.edges.num_entities())
        {
            return Err(Error::invalid(
                location,
                format!(
                    "entity {e} out of range for {} entities",
                    self.edges.num_entities()
                ),
            ));
        }
        Ok(())
    }

    /// Relevance `P_e ∈ (0, 1)` of every entity to the query, computed on the host (the
    /// same arithmetic as the burn module, without a tensor runtime per query; see
    /// [`GfmModel::score_on_device`]).
    ///
    /// # Errors
    /// A query of the wrong width or with non-finite values, or an entity id out of range.
    pub fn score(&self, query: &[f32], query_entities: &[u32]) -> Result<Vec<f32>> {
        self.check_query("GfmModel::score", query, query_entities)?;
        Ok(self.host.score(&self.edges, query, query_entities))
    }

    /// [`GfmModel::score`] through the burn module on the model's device (a GPU when the
    /// model was built on one).
    ///
    /// # Errors
    /// As [`GfmModel::score`], plus backend failures.
    pub fn score_on_device(&self, query: &[f32], query_entities: &[u32]) -> Result<Vec<f32>> {
        self.check_query("GfmModel::score_on_device", query, query_entities)?;
        let n = self.edges.num_entities();
        if n == 0 {
            return Ok(Vec::new());
        }
        let q = Tensor::<2>::from_data(
            TensorData::new(query.to_vec(), [1, self.d_in]),
            &self.device,
        );
        let mut start = vec![0.0f32; n];
        for &e in query_entities {
            start[e as usize] = 1.0;
        }
        let start = Tensor::<3>::from_data(TensorData::new(start, [n, 1, 1]), &self.device);
        let logits = self.net.forward(&self.graph, q, start, None);
        sigmoid(logits)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| Error::backend("GfmModel::score_on_device", format!("{e:?}")))
    }

    /// Train on `examples` (KG-completion queries, labelled questions, or both), keeping
    /// the epoch of the best held-out loss. Continues from the current weights, so
    /// pre-training then fine-tuning is two calls. Without checkpoints; see
    /// [`GfmModel::train_resumable`].
    ///
    /// # Errors
    /// An example with a wrong width, no target, or an id out of range (checked before any
    /// tensor is built); a loss that stops being finite.
    pub fn train(
        &mut self,
        examples: &[GfmExample],
        cfg: &GfmTrainConfig,
        stage: &str,
        progress: &dyn Progress,
    ) -> Result<TrainReport> {
        self.train_resumable(examples, cfg, stage, progress, None)
    }

    /// [`GfmModel::train`], checkpointed after every epoch in `checkpoints` when given: a
    /// later call on the same graph, with the same examples, configuration, stage name and
    /// starting weights, starts after the last finished epoch (or takes the finished
    /// result at once), so an interrupted run loses at most one epoch; anything else
    /// starts afresh and overwrites the checkpoint. Use one directory per call (for
    /// example `pretrain/` and `finetune/`). Each epoch shuffles and draws negatives from
    /// its own generator (seed and epoch number), so a resumed run sees the same batches,
    /// and AdamW's moment estimates are saved with the weights, so it continues as the
    /// uninterrupted run would.
    ///
    /// # Errors
    /// As [`GfmModel::train`], plus checkpoint files that cannot be written or read.
    pub fn train_resumable(
        &mut self,
        examples: &[GfmExample],
        cfg: &GfmTrainConfig,
        stage: &str,
        progress: &dyn Progress,
        checkpoints: Option<&std::path::Path>,
    ) -> Result<TrainReport> {
        cfg.validate()?;
        let started = Instant::now();
        self.check_examples(examples)?;
        if examples.is_empty() {
            return Ok(TrainReport::default());
        }
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let (val_idx, train_idx) = split_holdout(examples.len(), cfg.validation_fraction, &mut rng);
        // Fixed negatives for validation, so its loss is comparable across epochs.
        let val_neg: Vec<Vec<u32>> = val_idx
            .iter()
            .map(|&i| self.sample_negatives(&examples[i], cfg.negatives, &mut rng))
            .collect();
        let val_neg: Vec<&[Vec<u32>]> = val_neg.chunks(cfg.batch_size).collect();

        let ad = self.device.clone().autodiff();
        let g_ad = DeviceKg::new(&self.edges, &self.relations, &ad);
        let optimizer = AdamWConfig::new()
            .with_weight_decay(cfg.weight_decay)
            .init();
        let pick =
            |idx: &[usize]| -> Vec<&GfmExample> { idx.iter().map(|&i| &examples[i]).collect() };
        let checkpoints = Checkpoints::open_if(checkpoints, || self.run_key(examples, cfg, stage))?;
        let plan = EpochLoop {
            stage,
            location: "GfmModel::train",
            epochs: cfg.epochs,
            patience: cfg.patience,
            batch_size: cfg.batch_size.max(1),
            // Steps per epoch are set by the example count, not the corpus.
            max_steps: 0,
            seed: cfg.seed,
            learning_rate: cfg.learning_rate,
            validates: !val_idx.is_empty(),
            checkpoints: checkpoints.as_ref(),
            progress,
        };
        let this = &*self;
        let (net, mut report) = run_epochs(
            &plan,
            &train_idx,
            this.net.clone().fork(&ad).train(),
            || this.net.clone().fork(&ad).train(),
            optimizer,
            None,
            |net, batch, rng| {
                let batch = pick(batch.items);
                let negs: Vec<Vec<u32>> = batch
                    .iter()
                    .map(|ex| this.sample_negatives(ex, cfg.negatives, rng))
                    .collect();
                Ok(this.batch_loss(net, &g_ad, &batch, &negs, cfg.bce_weight, &ad))
            },
            |valid| Ok(this.validation_loss(valid, examples, &val_idx, &val_neg, cfg)),
        )?;
        self.net = net;
        self.host = HostNet::export(&self.net, &self.relations)?;
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Mean loss of `valid` on the validation examples `val_idx`, in batches, each with its
    /// fixed negatives.
    fn validation_loss(
        &self,
        valid: &GfmNet,
        examples: &[GfmExample],
        val_idx: &[usize],
        val_neg: &[&[Vec<u32>]],
        cfg: &GfmTrainConfig,
    ) -> f32 {
        let pick =
            |idx: &[usize]| -> Vec<&GfmExample> { idx.iter().map(|&i| &examples[i]).collect() };
        let (mut sum, mut count) = (0.0f32, 0usize);
        for (k, idx) in val_idx.chunks(cfg.batch_size.max(1)).enumerate() {
            let loss = self.batch_loss(
                valid,
                &self.graph,
                &pick(idx),
                val_neg[k],
                cfg.bce_weight,
                &self.device,
            );
            sum += scalar(loss) * idx.len() as f32;
            count += idx.len();
        }
        sum / count.max(1) as f32
    }

    /// Each training example checked against the graph.
    fn check_examples(&self, examples: &[GfmExample]) -> Result<()> {
        for (k, ex) in examples.iter().enumerate() {
            let loc = format!("GfmModel::train example {k}");
            self.check_query(&loc, &ex.query, &ex.query_entities)?;
            self.check_query(&loc, &ex.query, &ex.targets)?;
            if ex.targets.is_empty() {
                return Err(Error::invalid(loc, "no target entity"));
            }
            if let Some(e) = ex
                .hidden_edges
                .iter()
                .find(|&&e| e as usize >= self.edges.len())
            {
                return Err(Error::invalid(
                    loc,
                    format!(
                        "hidden edge {e} out of range for {} edges",
                        self.edges.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checkpoint key of a training call: the graph, relation embeddings, the current
    /// (starting) weights, the examples, the configuration and the stage name.
    fn run_key(
        &self,
        examples: &[GfmExample],
        cfg: &GfmTrainConfig,
        stage: &str,
    ) -> Result<String> {
        let mut h = RunKey::new();
        h.bytes(b"gfm")
            .bytes(stage.as_bytes())
            .usize(self.edges.num_entities())
            .u32s(self.edges.sources())
            .u32s(self.edges.relations())
            .u32s(self.edges.destinations())
            .f32s(self.relations.as_slice());
        let host = &self.host;
        for dense in std::iter::once(&host.query)
            .chain(&host.update)
            .chain(&host.score)
        {
            h.f32s(&dense.w).f32s(&dense.b);
        }
        for r in &host.relations {
            h.f32s(r);
        }
        for (g, b) in &host.norm {
            h.f32s(g).f32s(b);
        }
        h.usize(examples.len());
        for ex in examples {
            h.f32s(&ex.query)
                .u32s(&ex.query_entities)
                .u32s(&ex.targets)
                .u32s(&ex.hidden_edges);
        }
        Ok(h.json(&(&self.config, cfg))?.finish())
    }

    fn sample_negatives(&self, ex: &GfmExample, count: usize, rng: &mut StdRng) -> Vec<u32> {
        let n = self.edges.num_entities();
        let free = n.saturating_sub(ex.targets.len());
        let want = count.min(free);
        let mut out = Vec::with_capacity(want);
        let mut tries = 0;
        while out.len() < want && tries < want * 20 {
            tries += 1;
            let e = rng.random_range(0..n) as u32;
            if !ex.targets.contains(&e) && !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }

    /// `α·BCE + (1 − α)·RANK`, averaged over the batch.
    fn batch_loss(
        &self,
        net: &GfmNet,
        g: &DeviceKg,
        batch: &[&GfmExample],
        negatives: &[Vec<u32>],
        alpha: f32,
        device: &Device,
    ) -> Tensor<1> {
        let (n, b, e) = (g.num_entities, batch.len(), g.num_edges);
        let mut q = Vec::with_capacity(b * self.d_in);
        let mut start = vec![0.0f32; n * b];
        let mut pos = vec![0.0f32; n * b];
        let mut neg = vec![0.0f32; n * b];
        let mut keep = vec![1.0f32; e * b];
        let mut any_hidden = false;
        for (k, ex) in batch.iter().enumerate() {
            q.extend_from_slice(&ex.query);
            for &i in &ex.query_entities {
                start[i as usize * b + k] = 1.0;
            }
            let w = 1.0 / ex.targets.len() as f32;
            for &i in &ex.targets {
                pos[i as usize * b + k] = w;
            }
            let w = 1.0 / negatives[k].len().max(1) as f32;
            for &i in &negatives[k] {
                neg[i as usize * b + k] = w;
            }
            for &h in &ex.hidden_edges {
                keep[h as usize * b + k] = 0.0;
                any_hidden = true;
            }
        }
        let q = Tensor::<2>::from_data(TensorData::new(q, [b, self.d_in]), device);
        let start = Tensor::<3>::from_data(TensorData::new(start, [n, b, 1]), device);
        let keep =
            any_hidden.then(|| Tensor::<3>::from_data(TensorData::new(keep, [e, b, 1]), device));
        let pos = Tensor::<2>::from_data(TensorData::new(pos, [n, b]), device);
        let neg = Tensor::<2>::from_data(TensorData::new(neg, [n, b]), device);
        let z = net.forward(g, q, start, keep); // [N, B]
                                                // BCE: −mean_pos log σ(z) − mean_neg log(1 − σ(z)), per query (weights are 1/|set|).
        let bce = (pos.clone() * log_sigmoid(z.clone())
            + neg.clone() * log_sigmoid(z.clone().neg()))
        .sum_dim(0)
        .neg(); // [1, B]
                // Bounded ranking loss: −mean_pos P(e) / (P(e) + Σ_neg P).
        let p = sigmoid(z);
        let neg_count = neg.clone().greater_elem(0.0).float();
        let neg_sum = (p.clone() * neg_count).sum_dim(0); // [1, B]
        let rank = (pos * (p.clone() / (p + neg_sum))).sum_dim(0).neg(); // [1, B]
        (bce * alpha + rank * (1.0 - alpha)).mean()
    }

    /// Write the weights to `path` (burnpack), atomically.
    pub fn save_weights(&self, path: &std::path::Path) -> Result<()> {
        crate::weights::save_weights(&self.net, path)
    }

    /// Read weights written by [`GfmModel::save_weights`] into this model (same shape).
    pub fn load_weights(&mut self, path: &std::path::Path) -> Result<()> {
        crate::weights::load_weights(&mut self.net, path)?;
        self.host = HostNet::export(&self.net, &self.relations)?;
        Ok(())
    }
}

/// GFM-RAG's document ranking (eq. 14–16): take the `top_t` entities by relevance, weight
/// each by `1 / df(e)` (the number of documents that mention it), and score a document
/// by the sum of the weights of its top entities. `mentions[e]` lists the documents of
/// entity `e`. Returns `(document, score)` for documents with a positive score, best
/// first; ties go to the larger sum of entity relevance, then the lower id.
pub fn rank_documents(relevance: &[f32], mentions: &[Vec<u32>], top_t: usize) -> Vec<(u32, f32)> {
    let mut order: Vec<usize> = (0..relevance.len().min(mentions.len())).collect();
    order.sort_by(|&a, &b| relevance[b].total_cmp(&relevance[a]).then(a.cmp(&b)));
    let mut score: std::collections::HashMap<u32, (f32, f32)> = Default::default();
    for &e in order.iter().take(top_t) {
        let docs = &mentions[e];
        if docs.is_empty() {
            continue;
        }
        let w = 1.0 / docs.len() as f32;
        for &d in docs {
            let s = score.entry(d).or_default();
            s.0 += w;
            s.1 += relevance[e];
        }
    }
    let mut out: Vec<(u32, f32, f32)> = score.into_iter().map(|(d, (s, r))| (d, s, r)).collect();
    out.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.2.total_cmp(&a.2))
            .then(a.0.cmp(&b.0))
    });
    out.into_iter().map(|(d, s, _)| (d, s)).collect()
}

#[cfg(test)]
mod tests;
