//! Training a [`GnnLinkPredictor`](super::GnnLinkPredictor)'s network: the inductive split,
//! validation queries scored as at inference (through a [`CachedScorer`]), and each step's
//! loss on the full message graph or on the step's neighbourhood (a single GNN layer
//! aggregates the constant features on the host), run by [`run_link_epochs`].

use std::path::Path;

use burn::tensor::{Device, Tensor};
use lprag_core::{Embeddings, Error, LinkGraph, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::cached::{CachedScorer, Join, Rows};
use crate::checkpoint::Checkpoints;
use crate::config::{
    Aggregation, InferenceMode, ModelConfig, PredictorKind, StepGraph, TrainConfig,
};
use crate::context::ChunkContext;
use crate::host::{pair_key, HostGraph, MessagePassing, PairBatch};
use crate::net::LinkNet;
use crate::seeding::{seed_generator, seeded};
use crate::shared::{bce, normalize_vec, rows_tensor, to_tensor, unit_rows, NegativeDraw};
use crate::training::{run_link_epochs, LinkLoop, Split, Step};

/// Most validation queries scored per evaluation in [`InferenceMode::JoinAll`], where each
/// needs its own forward pass.
const MAX_JOIN_ALL_VALIDATION: usize = 32;

/// Most validation queries scored per evaluation otherwise (their joins are found once,
/// each by a scan over every chunk).
const MAX_VALIDATION: usize = 1024;

/// A trained network with its inference graph; `report.seconds` is left to the caller.
pub(super) struct Fitted {
    pub(super) net: LinkNet,
    pub(super) ctx: ChunkContext,
    pub(super) report: TrainReport,
}

/// Train `mc` on `graph` with `tc` on `device` (its autodiff twin), checkpointing in
/// `checkpoints` when given.
pub(super) fn fit_net(
    mc: &ModelConfig,
    tc: &TrainConfig,
    device: &Device,
    checkpoints: Option<&Path>,
    graph: &LinkGraph,
    progress: &dyn Progress,
) -> Result<Fitted> {
    check_train_config(tc)?;
    mc.validate()?;
    let ctx = ChunkContext::new(graph)?;
    let nc = graph.num_chunks;
    let n = graph.num_nodes();
    let d_in = graph.features.dim();
    let mut rng = StdRng::seed_from_u64(tc.seed);

    // Inductive split: hold out whole synthetic queries for early stopping.
    let split = Split::new(graph, tc, &mut rng);
    if nc < 2 || split.targets.is_empty() {
        // Nothing to learn from: keep the graph, initialise the weights, report no epochs.
        let net = seeded(device, tc.seed, || LinkNet::new(mc, d_in, device));
        return Ok(Fitted {
            net,
            ctx,
            report: TrainReport::default(),
        });
    }

    let ad = device.clone().autodiff();
    // Held through the first step: parameters are drawn at their first use.
    let draws = seed_generator(&ad, tc.seed);
    let net = LinkNet::new(mc, d_in, &ad);
    // Normalised features stay on the host; full-graph steps upload them once,
    // neighbourhood steps only the rows a step needs.
    let xh = unit_rows(&graph.features);
    let x_full = (tc.step_graph == StepGraph::Full).then(|| to_tensor(&xh, &ad));
    let full_host = HostGraph::from_edges(n, split.msg_edges.iter().copied())?;
    let wsum_full = full_host.weight_sums();
    let hops = message_hops(mc);
    let sampler = NegativeDraw::new(tc.negatives, nc, &full_host)?;

    let (val_set, val_joins) = validation_set(tc, &ctx, graph, &split, &sampler, &mut rng);
    let checkpoints = checkpoints
        .map(|dir| Checkpoints::open(dir, graph, &(mc, tc)))
        .transpose()?;
    let run = LinkLoop {
        location: "GnnLinkPredictor::fit",
        train: tc,
        targets: &split.targets,
        sampler: &sampler,
        checkpoints: checkpoints.as_ref(),
        validates: !val_set.is_empty(),
        progress,
    };
    let inputs = StepInputs {
        tc,
        mc,
        n,
        d_in,
        hops,
        msg_edges: &split.msg_edges,
        full_host: &full_host,
        wsum_full: &wsum_full,
        xh: &xh,
        x_full,
        ad: &ad,
    };
    let (net, report) = run_link_epochs(
        &run,
        net,
        || LinkNet::new(mc, d_in, device),
        draws,
        |net, step| inputs.loss(net, step),
        |valid| validation_loss(valid, mc, tc, &ctx, &val_set, &val_joins),
    )?;
    Ok(Fitted { net, ctx, report })
}

/// Hops of message passing the model's representations depend on (0 for the MLP).
fn message_hops(mc: &ModelConfig) -> usize {
    match mc.kind {
        PredictorKind::Mlp => 0,
        _ => mc.layers.max(1),
    }
}

/// The training settings this predictor cannot use, as errors.
fn check_train_config(tc: &TrainConfig) -> Result<()> {
    if tc.epochs == 0 {
        return Err(Error::invalid("TrainConfig.epochs", "must be at least 1"));
    }
    if !(tc.correction_penalty.is_finite() && tc.correction_penalty >= 0.0) {
        return Err(Error::invalid(
            "TrainConfig.correction_penalty",
            format!("must be finite and >= 0, got {}", tc.correction_penalty),
        ));
    }
    Ok(())
}

/// A held-out validation query: embedding, candidate chunk ids, number of positives.
type ValQuery = (Vec<f32>, Vec<u32>, usize);

/// Validation: the split's held-out queries (in id order; the first few kept) scored
/// exactly as at inference, against negatives drawn once from `rng`; with each query's
/// join.
fn validation_set(
    tc: &TrainConfig,
    ctx: &ChunkContext,
    graph: &LinkGraph,
    split: &Split,
    sampler: &NegativeDraw,
    rng: &mut StdRng,
) -> (Vec<ValQuery>, Vec<Join>) {
    let max = if tc.inference == InferenceMode::JoinAll {
        MAX_JOIN_ALL_VALIDATION
    } else {
        MAX_VALIDATION
    };
    let val_set: Vec<ValQuery> = split
        .validation_ids(max)
        .into_iter()
        .map(|q| {
            let (cands, positives) =
                split.validation_candidates(q, tc.negatives_per_positive, sampler, rng);
            (
                normalize_vec(graph.features.row(q as usize)),
                cands,
                positives,
            )
        })
        .collect();
    let val_joins: Vec<Join> = match tc.inference {
        InferenceMode::JoinAll => val_set.iter().map(|_| Join::All).collect(),
        mode => {
            let queries: Vec<&[f32]> = val_set.iter().map(|v| v.0.as_slice()).collect();
            ctx.join_many(&queries, mode)
                .into_iter()
                .map(Join::list)
                .collect()
        }
    };
    (val_set, val_joins)
}

/// What every training step reads: the configurations, the message graph with its
/// weight sums, and the normalised features (on the host, and on the device for
/// full-graph steps).
struct StepInputs<'a> {
    tc: &'a TrainConfig,
    mc: &'a ModelConfig,
    n: usize,
    d_in: usize,
    hops: usize,
    msg_edges: &'a [(u32, u32, f32)],
    full_host: &'a HostGraph,
    wsum_full: &'a [f32],
    xh: &'a Embeddings,
    x_full: Option<Tensor<2>>,
    ad: &'a Device,
}

impl StepInputs<'_> {
    /// The step's loss: BCE of its pairs, plus the correction penalty of a residual model.
    fn loss(&self, net: &LinkNet, step: &Step<'_>) -> Result<Tensor<1>> {
        let (h, x, pb) = match self.tc.step_graph {
            StepGraph::Full => self.full_graph(net, step)?,
            StepGraph::Neighbourhood => self.neighbourhood(net, step),
        };
        let (logits, correction) = net.score_pairs_parts(h, &x, &pb);
        let mut loss = bce(logits, step.targets.len());
        if self.tc.correction_penalty > 0.0 && self.mc.residual {
            loss = loss
                + (correction.clone() * correction)
                    .mean()
                    .mul_scalar(self.tc.correction_penalty);
        }
        Ok(loss)
    }

    /// Node representations, inputs and pairs of a step over the whole message graph
    /// (the step's targets masked).
    fn full_graph(
        &self,
        net: &LinkNet,
        step: &Step<'_>,
    ) -> Result<(Tensor<2>, Tensor<2>, PairBatch)> {
        let host = if step.masked.is_empty() {
            self.full_host.clone()
        } else {
            HostGraph::from_edges(
                self.n,
                self.msg_edges
                    .iter()
                    .copied()
                    .filter(|&(a, b, _)| !step.masked.contains(&pair_key(a, b))),
            )?
        };
        let g = host.to_device(self.mc.aggregation, self.ad);
        let pb = PairBatch::new(step.pairs, &host, net.uses_common_neighbors(), self.ad);
        let x = self.x_full.clone().expect("uploaded for full-graph steps");
        Ok((net.encode(x.clone(), &g), x, pb))
    }

    /// Node representations, inputs and pairs of a step over the neighbourhood of its
    /// pairs (and their common neighbours) in the masked message graph.
    fn neighbourhood(&self, net: &LinkNet, step: &Step<'_>) -> (Tensor<2>, Tensor<2>, PairBatch) {
        let with_cn = net.uses_common_neighbors();
        let (full_host, d_in, ad) = (self.full_host, self.d_in, self.ad);
        let mut seeds: Vec<u32> = step.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        let (mut cn_pair, mut cn_node) = (Vec::new(), Vec::new());
        if with_cn {
            let mut buf = Vec::new();
            for (k, &(a, b)) in step.pairs.iter().enumerate() {
                buf.clear();
                full_host.common_neighbors_masked(a, b, step.masked, &mut buf);
                for &u in &buf {
                    cn_pair.push(k as i64);
                    cn_node.push(u);
                    seeds.push(u);
                }
            }
        }
        let sub = full_host.subgraph(
            self.wsum_full,
            step.masked,
            &seeds,
            self.hops,
            self.mc.aggregation,
        );
        let local: Vec<(u32, u32)> = step
            .pairs
            .iter()
            .map(|&(a, b)| (sub.local(a), sub.local(b)))
            .collect();
        let cn = with_cn.then(|| {
            let nodes = cn_node.iter().map(|&u| sub.local(u) as i64).collect();
            (cn_pair, nodes)
        });
        let pb = PairBatch::from_parts(&local, cn, ad);
        if net.single_gnn_layer() {
            // Aggregate the constant features on the host, then apply the layer to the
            // seeds only (not to their whole neighbourhood).
            let (own, agg) = sub.aggregate_inputs(
                self.xh.as_slice(),
                d_in,
                self.mc.aggregation == Aggregation::Gcn,
            );
            let r = sub.receivers();
            let xs = rows_tensor(own, r, d_in, ad);
            let ax = rows_tensor(agg, r, d_in, ad);
            (net.encode_aggregated(xs.clone(), ax), xs, pb)
        } else {
            let rows: Vec<f32> = sub
                .nodes
                .iter()
                .flat_map(|&v| self.xh.row(v as usize).iter().copied())
                .collect();
            let xs = rows_tensor(rows, sub.nodes.len(), d_in, ad);
            let g = sub.to_device(ad);
            (net.encode(xs.clone(), &g), xs, pb)
        }
    }
}

/// Validation loss of `valid` (the network in validation mode): [`held_out_loss`] as at
/// inference. A query joined to a list of chunks changes only the nodes near them, so only
/// the representations the held-out queries read ([`CachedScorer::needed`]: their
/// candidates' and those around the chunks they join) are computed, not every chunk's —
/// at a million chunks a whole cache is a GB and a pass of the network over every chunk,
/// at each validation. [`InferenceMode::JoinAll`] joins every chunk: the whole cache.
fn validation_loss(
    valid: &LinkNet,
    mc: &ModelConfig,
    tc: &TrainConfig,
    ctx: &ChunkContext,
    val: &[ValQuery],
    joins: &[Join],
) -> Result<f32> {
    let net = valid.to_host()?;
    let (x, host) = (&ctx.features, &ctx.host);
    if tc.inference == InferenceMode::JoinAll {
        let cache = CachedScorer::new(net, mc.aggregation, x, host, true)?;
        return Ok(held_out_loss(val, joins, |q, join, cands| {
            cache.score(x, host, q, join, cands)
        }));
    }
    let scorer = CachedScorer::unheld(net, mc.aggregation, host, ctx.num_chunks(), x.dim());
    let mut nodes: Vec<u32> = val
        .iter()
        .zip(joins)
        .flat_map(|((_, cands, _), join)| scorer.needed(host, join, cands).reps)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let rows = SomeRows::new(&scorer, x, host, nodes);
    Ok(held_out_loss(val, joins, |q, join, cands| {
        scorer.score_with(&rows, host, q, join, cands)
    }))
}

/// Every chunk's features and the representations of some chunks, computed for them.
struct SomeRows<'a> {
    x: &'a Embeddings,
    /// Row of each computed chunk in `reps`.
    at: std::collections::HashMap<u32, usize>,
    reps: Vec<f32>,
    /// Start and width of each layer's output in a row of `reps`.
    layers: Vec<(usize, usize)>,
}

impl<'a> SomeRows<'a> {
    /// The representations of `nodes` (sorted, distinct) by `scorer`.
    fn new(scorer: &CachedScorer, x: &'a Embeddings, host: &HostGraph, nodes: Vec<u32>) -> Self {
        let mut me = Self {
            x,
            at: std::collections::HashMap::new(),
            reps: Vec::new(),
            layers: scorer.layer_spans().to_vec(),
        };
        me.reps = scorer.recompute(&me, host, &nodes);
        me.at = nodes.iter().enumerate().map(|(r, &i)| (i, r)).collect();
        me
    }
}

impl Rows for SomeRows<'_> {
    fn feature(&self, i: u32) -> &[f32] {
        self.x.row(i as usize)
    }

    fn rep(&self, l: usize, i: u32) -> &[f32] {
        let (start, width) = self.layers[l];
        let stride = self.layers.last().map_or(0, |&(s, w)| s + w);
        match self.at.get(&i) {
            Some(&r) => &self.reps[r * stride + start..r * stride + start + width],
            None => {
                debug_assert!(false, "chunk {i}'s representation was not computed");
                &[]
            }
        }
    }
}

/// Mean BCE of held-out queries, each scored alone as at inference by `score` (query,
/// join, candidates → logits).
fn held_out_loss(
    val: &[ValQuery],
    joins: &[Join],
    score: impl Fn(&[f32], &Join, &[u32]) -> Vec<f32>,
) -> f32 {
    let (mut pos_loss, mut neg_loss, mut np, mut nn) = (0.0f64, 0.0f64, 0usize, 0usize);
    for ((q, cands, positives), join) in val.iter().zip(joins) {
        let logits = score(q, join, cands);
        for (i, &l) in logits.iter().enumerate() {
            // −log σ(l) = softplus(−l); −log(1 − σ(l)) = softplus(l)
            let sp = |z: f32| (z.max(0.0) + (-z.abs()).exp().ln_1p()) as f64;
            if i < *positives {
                pos_loss += sp(-l);
                np += 1;
            } else {
                neg_loss += sp(l);
                nn += 1;
            }
        }
    }
    (pos_loss / np.max(1) as f64 + neg_loss / nn.max(1) as f64) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Decoder;
    use lprag_core::{EdgeKind, LinkEdge};
    use rand::Rng;

    /// 60 chunks in a weighted chain with shortcuts (a few isolated), 8-wide features.
    fn graph() -> LinkGraph {
        let (nc, d) = (60usize, 8usize);
        let mut rng = StdRng::seed_from_u64(3);
        let rows: Vec<f32> = (0..nc * d).map(|_| rng.random::<f32>() - 0.4).collect();
        let mut edges = Vec::new();
        for a in 0..nc as u32 - 5 {
            for b in [a + 1, a + 4] {
                edges.push(LinkEdge {
                    a,
                    b,
                    weight: 0.5 + rng.random::<f32>() / 2.0,
                    kind: EdgeKind::Similarity,
                });
            }
        }
        LinkGraph {
            features: Embeddings::new(d, rows).unwrap(),
            num_chunks: nc,
            edges,
        }
    }

    /// The validation loss read from the representations its queries need equals the
    /// loss through the whole cache, for every kind, aggregation, depth and join.
    #[test]
    fn validation_from_the_rows_it_needs_equals_the_whole_cache() {
        let g = graph();
        let ctx = ChunkContext::new(&g).unwrap();
        let mut rng = StdRng::seed_from_u64(4);
        let val: Vec<ValQuery> = (0..12)
            .map(|_| {
                let q: Vec<f32> = (0..8).map(|_| rng.random::<f32>() - 0.4).collect();
                let cands: Vec<u32> = (0..9).map(|_| rng.random_range(0..60)).collect();
                (normalize_vec(&q), cands, 2)
            })
            .collect();
        let m = |kind, aggregation, layers, residual| ModelConfig {
            kind,
            aggregation,
            hidden: 16,
            layers,
            residual,
        };
        use Aggregation::{Gcn, Sage};
        use PredictorKind::{Gae, Mlp, Ncn};
        let mut checked = 0;
        for mc in [
            m(Ncn, Sage, 1, true),
            m(Ncn, Gcn, 2, false),
            m(Ncn, Sage, 3, true),
            m(Gae(Decoder::Hadamard), Gcn, 1, false),
            m(Gae(Decoder::Dot), Sage, 2, true),
            m(Mlp, Sage, 2, true),
        ] {
            // Drawn under the process-wide seeding lock, as a trainer does (burn's
            // generator is shared with the tests training beside this one).
            let device = Device::flex();
            let net = seeded(&device, 7, || LinkNet::new(&mc, 8, &device));
            for mode in [
                InferenceMode::JoinTopK(3),
                InferenceMode::JoinTopK(70),
                InferenceMode::Isolated,
            ] {
                let tc = TrainConfig {
                    inference: mode,
                    ..TrainConfig::default()
                };
                let queries: Vec<&[f32]> = val.iter().map(|v| v.0.as_slice()).collect();
                let joins: Vec<Join> = ctx
                    .join_many(&queries, mode)
                    .into_iter()
                    .map(Join::list)
                    .collect();
                let lean = validation_loss(&net, &mc, &tc, &ctx, &val, &joins).unwrap();
                let cache = CachedScorer::new(
                    net.to_host().unwrap(),
                    mc.aggregation,
                    &ctx.features,
                    &ctx.host,
                    false,
                )
                .unwrap();
                let whole = held_out_loss(&val, &joins, |q, join, cands| {
                    cache.score(&ctx.features, &ctx.host, q, join, cands)
                });
                assert!(lean.is_finite() && whole > 0.0, "{mc:?} {mode:?}");
                assert!(
                    (lean - whole).abs() <= 1e-5 * whole.abs().max(1.0),
                    "{mc:?} {mode:?}: {lean} vs {whole}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 18);
    }
}
