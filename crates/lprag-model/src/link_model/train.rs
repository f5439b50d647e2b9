//! Training a [`BurnLinkPredictor`]'s model: the inductive split, per-step
//! neighbourhoods with the step's targets masked, the epoch loop and validation on
//! held-out synthetic queries.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use burn::tensor::Device;
use lprag_core::{Embeddings, Error, LinkGraph, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::local::{LocalGraph, QueryView};
use super::predictor::ChunkPositions;
use super::*;
use crate::checkpoint::Checkpoints;
use crate::config::{InferenceMode, TrainConfig};
use crate::context::ChunkContext;
use crate::host::{pair_key, HostGraph};
use crate::seeding::{seed_generator, seeded};
use crate::shared::{bce, normalize_vec, scalar, unit_rows, NegativeDraw};
use crate::training::{run_link_epochs, LinkLoop, Split, Step};

/// What one training run needs from its predictor.
pub(super) struct Run<'a, M> {
    pub(super) name: &'a str,
    pub(super) init: &'a ModelInit<M>,
    pub(super) train: &'a TrainConfig,
    pub(super) device: &'a Device,
    pub(super) checkpoints: Option<&'a Path>,
}

/// A held-out query: its node, normalised features, candidate chunks, positives first.
pub(super) struct Held {
    pub(super) features: Vec<f32>,
    pub(super) join: Option<Vec<u32>>,
    pub(super) cands: Vec<u32>,
    pub(super) positives: usize,
}

/// The library's trainer for any [`LinkModel`]; returns the best model (validation mode)
/// on `device`.
pub(super) fn train<M: PairModel>(
    run: &Run<'_, M>,
    graph: &LinkGraph,
    progress: &dyn Progress,
) -> Result<(M, TrainReport, Option<ChunkPositions>)> {
    let (init, tc, device) = (run.init, run.train, run.device);
    let started = Instant::now();
    check_train_config(tc)?;
    graph.validate()?;
    let (nc, n, d_in) = (graph.num_chunks, graph.num_nodes(), graph.features.dim());
    let mut rng = StdRng::seed_from_u64(tc.seed);

    // Inductive split: whole synthetic queries held out for validation.
    let split = Split::new(graph, tc, &mut rng);

    if nc < 2 || split.targets.is_empty() {
        // Nothing to learn from: the initial weights, no epochs.
        let model = seeded(device, tc.seed, || init(d_in, device));
        let seconds = started.elapsed().as_secs_f64();
        return Ok((
            model,
            TrainReport {
                seconds,
                ..TrainReport::default()
            },
            None,
        ));
    }
    let ad = device.clone().autodiff();
    // Held through the first step: parameters are drawn at their first use.
    let draws = seed_generator(&ad, tc.seed);
    let model = init(d_in, &ad);
    let hops = model.pair_hops();
    let xh = unit_rows(&graph.features);
    let host = HostGraph::from_edges(n, split.msg_edges.iter().copied())?;
    let wsum = host.weight_sums();
    let sampler = NegativeDraw::new(tc.negatives, nc, &host)?;

    // Validation queries, scored as at inference against fixed negatives.
    let ctx = ChunkContext::new(graph)?;
    let ctx_wsum = ctx.host.weight_sums();
    // Positional encodings (for a model that asks): chunks' eigenmap rows, and for every
    // synthetic query the mean of the chunks it would join at inference.
    let positions = ChunkPositions::new(graph, model.pair_positional_dim(), tc.seed)?;
    let train_pos = training_positions(&positions, graph, &ctx, tc.inference);
    let pdim = positions.dim;
    let held = held_out(tc, &ctx, graph, &split, &sampler, &mut rng);

    let checkpoints = run
        .checkpoints
        .map(|dir| Checkpoints::open(dir, graph, &(run.name, tc)))
        .transpose()?;
    let lp = LinkLoop {
        location: "BurnLinkPredictor::fit",
        train: tc,
        targets: &split.targets,
        sampler: &sampler,
        checkpoints: checkpoints.as_ref(),
        validates: !held.is_empty(),
        progress,
    };
    let chunks = ChunkSide {
        ctx: &ctx,
        wsum: &ctx_wsum,
        positions: &positions,
    };
    let steps = StepInputs {
        tc,
        n,
        d_in,
        hops,
        host: &host,
        wsum: &wsum,
        xh: &xh,
        pdim,
        train_pos: &train_pos,
        ad: &ad,
    };
    let (model, mut report) = run_link_epochs(
        &lp,
        model,
        || init(d_in, device),
        draws,
        |model, step| steps.loss(model, step),
        |valid| Ok(validation_loss(valid, &held, &chunks, hops, d_in, device)),
    )?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok((model, report, Some(positions)))
}

/// The training settings the trainer cannot use, as errors.
fn check_train_config(tc: &TrainConfig) -> Result<()> {
    if tc.epochs == 0 {
        return Err(Error::invalid("TrainConfig.epochs", "must be at least 1"));
    }
    if !(tc.learning_rate.is_finite() && tc.learning_rate > 0.0) {
        return Err(Error::invalid(
            "TrainConfig.learning_rate",
            format!("must be finite and > 0, got {}", tc.learning_rate),
        ));
    }
    Ok(())
}

/// Positional rows of every node for training (a model that asks for them): the chunks'
/// eigenmap rows, and for every synthetic query the mean of the chunks it would join at
/// inference.
fn training_positions(
    positions: &ChunkPositions,
    graph: &LinkGraph,
    ctx: &ChunkContext,
    inference: InferenceMode,
) -> Vec<f32> {
    let (nc, n) = (graph.num_chunks, graph.num_nodes());
    if positions.dim == 0 {
        Vec::new()
    } else {
        let mut rows = positions.rows.clone();
        let all = positions.query(None);
        for q in nc..n {
            match inference {
                InferenceMode::JoinAll => rows.extend_from_slice(&all),
                mode => {
                    let f = normalize_vec(graph.features.row(q));
                    rows.extend(positions.query(Some(&ctx.join(&f, mode))));
                }
            }
        }
        rows
    }
}

/// The split's held-out queries (in id order; the first few kept) as validation scores
/// them: normalised features, joins, and candidates (positives, then negatives drawn from
/// `rng`).
fn held_out(
    tc: &TrainConfig,
    ctx: &ChunkContext,
    graph: &LinkGraph,
    split: &Split,
    sampler: &NegativeDraw,
    rng: &mut StdRng,
) -> Vec<Held> {
    // With the query joined to every chunk each held-out query is a pass over the whole
    // graph: fewer of them.
    let held_ids = split.validation_ids(if tc.inference == InferenceMode::JoinAll {
        MAX_JOIN_ALL_VALIDATION
    } else {
        MAX_VALIDATION
    });
    let held_features: Vec<Vec<f32>> = held_ids
        .iter()
        .map(|&q| normalize_vec(graph.features.row(q as usize)))
        .collect();
    let mut held_joins = match tc.inference {
        InferenceMode::JoinAll => Vec::new(),
        mode => {
            let queries: Vec<&[f32]> = held_features.iter().map(Vec::as_slice).collect();
            ctx.join_many(&queries, mode)
        }
    }
    .into_iter();
    held_ids
        .iter()
        .zip(held_features)
        .map(|(&q, features)| {
            let (cands, positives) =
                split.validation_candidates(q, tc.negatives_per_positive, sampler, rng);
            // In id order, one per held-out query (none with the query joined to all).
            let join = held_joins.next();
            Held {
                features,
                join,
                cands,
                positives,
            }
        })
        .filter(|h| h.positives > 0)
        .collect()
}

/// What every training step reads: the message graph (each step masks its targets), its
/// weight sums, the normalised features and the positional rows.
struct StepInputs<'a> {
    tc: &'a TrainConfig,
    n: usize,
    d_in: usize,
    hops: usize,
    host: &'a HostGraph,
    wsum: &'a [f32],
    xh: &'a Embeddings,
    pdim: usize,
    train_pos: &'a [f32],
    ad: &'a Device,
}

impl StepInputs<'_> {
    /// The step's loss: BCE of its pairs on their neighbourhood in the graph without the
    /// step's targets, plus the model's own term.
    fn loss<M: PairModel>(&self, model: &M, step: &Step<'_>) -> Result<Tensor<1>> {
        // Masked targets no longer count towards degrees (summed in sorted order, so
        // that runs are reproducible: hash-set order differs between processes).
        let mut less: HashMap<u32, f32> = HashMap::new();
        let mut sorted: Vec<(u32, u32)> = step.masked.iter().copied().collect();
        sorted.sort_unstable();
        for &(a, b) in &sorted {
            if let Some(&(_, w)) = self.host.neighbors(a).iter().find(|&&(j, _)| j == b) {
                *less.entry(a).or_default() += w.max(0.0);
                *less.entry(b).or_default() += w.max(0.0);
            }
        }
        let seeds: Vec<u32> = step.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        let g = LocalGraph::build(
            &seeds,
            self.hops,
            &|i, out| {
                out.extend(self.host.neighbors(i).iter().filter(|&&(j, _)| {
                    step.masked.is_empty() || !step.masked.contains(&pair_key(i, j))
                }))
            },
            &|i| self.wsum[i as usize] - less.get(&i).copied().unwrap_or(0.0),
        );
        let x = g.features(self.d_in, |i| self.xh.row(i as usize), self.ad);
        let local: Vec<(u32, u32)> = step
            .pairs
            .iter()
            .map(|&(a, b)| (g.local[&a], g.local[&b]))
            .collect();
        let mut gb = g.to_device_with(
            self.n,
            self.pdim,
            |i| &self.train_pos[i as usize * self.pdim..(i as usize + 1) * self.pdim],
            self.ad,
        );
        // The step's own noise seed (the epoch's generator is left as it was).
        gb.noise_seed = self.tc.seed
            ^ (step.epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (step.index as u64 + 1).wrapping_mul(0xd6e8_feb8_6659_fd93);
        let (logits, extra) = model.score_pairs_train(x, &gb, &Pairs::new(&local, self.ad));
        let mut loss = bce(logits, step.targets.len());
        if let Some(extra) = extra {
            loss = loss + extra;
        }
        Ok(loss)
    }
}

/// What validation reads of the chunk graph.
#[derive(Clone, Copy)]
pub(super) struct ChunkSide<'a> {
    pub(super) ctx: &'a ChunkContext,
    pub(super) wsum: &'a [f32],
    pub(super) positions: &'a ChunkPositions,
}

/// Mean BCE of the held-out queries, each scored on its own neighbourhood.
pub(super) fn validation_loss<M: PairModel>(
    model: &M,
    held: &[Held],
    chunks: &ChunkSide<'_>,
    hops: usize,
    d_in: usize,
    device: &Device,
) -> f32 {
    let ChunkSide {
        ctx,
        wsum,
        positions,
    } = *chunks;
    let mut total = 0.0f32;
    for v in held {
        let view = QueryView {
            ctx,
            wsum,
            join: v.join.clone(),
        };
        let qid = view.qid();
        let mut seeds = vec![qid];
        seeds.extend_from_slice(&v.cands);
        let g = LocalGraph::build(&seeds, hops, &|i, out| view.neighbours(i, out), &|i| {
            view.degree(i)
        });
        let x = g.features(
            d_in,
            |i| {
                if i == qid {
                    &v.features
                } else {
                    ctx.features.row(i as usize)
                }
            },
            device,
        );
        let pairs: Vec<(u32, u32)> = v.cands.iter().map(|&c| (0, g.local[&c])).collect();
        let q_pos = positions.query(v.join.as_deref());
        let batch = g.to_device_with(
            qid as usize + 1,
            positions.dim,
            |i| if i == qid { &q_pos } else { positions.chunk(i) },
            device,
        );
        let logits = model.score_pairs(x, &batch, &Pairs::new(&pairs, device));
        total += scalar(bce(logits, v.positives));
    }
    total / held.len().max(1) as f32
}
