//! The trainers' shared epoch loop and its pieces: [`run_epochs`] (resume, per-epoch
//! generators, the step limit, validation and early stopping, checkpoints with the
//! optimizer's state, progress), used by LeSeGR and GFM-RAG directly and by the link
//! predictors ([`crate::GnnLinkPredictor`], [`crate::BurnLinkPredictor`]) through
//! [`run_link_epochs`]; the link predictors' inductive validation split and step pairs.

use std::collections::{HashMap, HashSet};

use burn::module::Module;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::store::ModuleSnapshot;
use burn::tensor::Tensor;
use lprag_core::{EdgeKind, Error, LinkGraph, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::checkpoint::Checkpoints;
use crate::config::{Targets, TrainConfig};
use crate::early_stop::EarlyStopping;
use crate::host::{pair_key, EdgeSet};
use crate::seeding::Draws;
use crate::shared::{scalar, NegativeDraw};

/// A training graph split for link prediction.
pub(crate) struct Split {
    /// Synthetic queries held out for validation (whole nodes: the split is inductive).
    pub val: HashSet<u32>,
    /// Message-passing edges `(a, b, weight)`: every edge but the held-out queries' (and
    /// without [`TrainConfig::query_messages`], every chunk–chunk edge only).
    pub msg_edges: Vec<(u32, u32, f32)>,
    /// Target pairs, query first for query–chunk edges.
    pub targets: Vec<(u32, u32)>,
    /// Each held-out query's chunks, in edge order.
    pub val_pos: HashMap<u32, Vec<u32>>,
}

impl Split {
    /// The held-out queries validation scores: the first `max` in id order.
    pub(crate) fn validation_ids(&self, max: usize) -> Vec<u32> {
        let mut ids: Vec<u32> = self.val.iter().copied().collect();
        ids.sort_unstable();
        ids.truncate(max);
        ids
    }

    /// Held-out query `q`'s candidates: its chunks, then `per_positive` negatives drawn
    /// from `rng` for each chunk in turn; and how many chunks it has.
    pub(crate) fn validation_candidates(
        &self,
        q: u32,
        per_positive: usize,
        sampler: &NegativeDraw,
        rng: &mut StdRng,
    ) -> (Vec<u32>, usize) {
        let pos: Vec<u32> = self.val_pos.get(&q).cloned().unwrap_or_default();
        let mut cands = pos.clone();
        for &p in &pos {
            for _ in 0..per_positive {
                cands.push(sampler.draw(rng, p));
            }
        }
        (cands, pos.len())
    }

    /// Hold out `validation_fraction` of the synthetic queries (none below 10 queries; the
    /// first use of `rng`), and sort the rest of the edges into messages and targets.
    pub(crate) fn new(graph: &LinkGraph, tc: &TrainConfig, rng: &mut StdRng) -> Self {
        let (nc, n) = (graph.num_chunks, graph.num_nodes());
        let mut qids: Vec<u32> = (nc as u32..n as u32).collect();
        qids.shuffle(rng);
        let n_val = if qids.len() >= 10 {
            ((qids.len() as f32 * tc.validation_fraction) as usize).min(qids.len() - 1)
        } else {
            0
        };
        let val: HashSet<u32> = qids[..n_val].iter().copied().collect();
        let (mut msg_edges, mut targets) = (Vec::new(), Vec::new());
        let mut val_pos: HashMap<u32, Vec<u32>> = HashMap::new();
        for e in &graph.edges {
            let (a, b) = if (e.a as usize) < nc {
                (e.b, e.a)
            } else {
                (e.a, e.b)
            };
            if e.kind == EdgeKind::QueryChunk || (a as usize) >= nc {
                if val.contains(&a) {
                    val_pos.entry(a).or_default().push(b);
                    continue;
                }
                targets.push((a, b));
                if !tc.query_messages {
                    continue;
                }
            } else if tc.targets == Targets::All {
                targets.push((e.a, e.b));
            }
            msg_edges.push((e.a, e.b, e.weight));
        }
        Self {
            val,
            msg_edges,
            targets,
            val_pos,
        }
    }
}

/// Steps per epoch and the epochs the step limit allows. Batches per epoch are fixed, so
/// the steps before any epoch are known (also after a resume).
pub(crate) struct Schedule {
    pub steps_per_epoch: usize,
    pub planned_epochs: usize,
    max_steps: usize,
}

impl Schedule {
    /// The schedule of `items` training items in batches of `batch` (at least 1) over at
    /// most `epochs` epochs and `max_steps` steps (0: no limit).
    pub(crate) fn new(items: usize, batch: usize, epochs: usize, max_steps: usize) -> Self {
        let steps_per_epoch = items.div_ceil(batch.max(1));
        let planned_epochs = if max_steps == 0 {
            epochs
        } else {
            epochs.min(max_steps.div_ceil(steps_per_epoch.max(1)))
        };
        Self {
            steps_per_epoch,
            planned_epochs,
            max_steps,
        }
    }

    /// Steps run before epoch `epoch` (0-based).
    pub(crate) fn done_before(&self, epoch: usize) -> usize {
        epoch * self.steps_per_epoch
    }

    /// Steps epoch `epoch` may run (fewer than a whole epoch at the step limit).
    pub(crate) fn budget(&self, epoch: usize) -> usize {
        if self.max_steps == 0 {
            self.steps_per_epoch
        } else {
            self.steps_per_epoch
                .min(self.max_steps.saturating_sub(self.done_before(epoch)))
        }
    }

    /// `true` once `steps` reach the step limit.
    pub(crate) fn at_limit(&self, steps: usize) -> bool {
        self.max_steps > 0 && steps >= self.max_steps
    }
}

/// Epoch `epoch`'s own generator (shuffle and negatives), so a resumed run draws what an
/// uninterrupted one would.
pub(crate) fn epoch_rng(seed: u64, epoch: usize) -> StdRng {
    StdRng::seed_from_u64(seed ^ (epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Node pairs `(a, b)`.
pub(crate) type PairList = Vec<(u32, u32)>;

/// A step's pairs (its targets, then `negatives_per_positive` negatives for each, drawn
/// from `rng`) and the targets to remove from the message graph (none without
/// `mask_targets`).
pub(crate) fn step_pairs(
    batch: &[(u32, u32)],
    tc: &TrainConfig,
    sampler: &NegativeDraw,
    rng: &mut StdRng,
) -> (PairList, EdgeSet) {
    let masked: EdgeSet = if tc.mask_targets {
        batch.iter().map(|&(a, b)| pair_key(a, b)).collect()
    } else {
        EdgeSet::default()
    };
    let mut pairs: Vec<(u32, u32)> = batch.to_vec();
    for &(a, b) in batch {
        for _ in 0..tc.negatives_per_positive {
            pairs.push((a, sampler.draw(rng, b)));
        }
    }
    (pairs, masked)
}

/// One training step's place in the run and its items, as [`run_epochs`] hands it over.
pub(crate) struct Batch<'a, T> {
    /// Epoch, 0-based.
    pub epoch: usize,
    /// Steps run before this one in the epoch.
    pub index: usize,
    /// The step's training items (a slice of the epoch's shuffled order).
    pub items: &'a [T],
}

/// The settings of [`run_epochs`].
pub(crate) struct EpochLoop<'a> {
    /// Progress stage, e.g. `train`.
    pub stage: &'a str,
    /// Error location, e.g. `GnnLinkPredictor::fit`.
    pub location: &'a str,
    pub epochs: usize,
    /// Early-stopping patience in epochs.
    pub patience: usize,
    /// Items per step; 0 means all of them in one step.
    pub batch_size: usize,
    /// Most steps over the whole run; 0 means no limit. The epoch that reaches it is cut
    /// short, then validated as usual.
    pub max_steps: usize,
    /// Seed of the per-epoch generators ([`epoch_rng`]).
    pub seed: u64,
    pub learning_rate: f64,
    /// Whether to validate after each epoch (else the last model is kept).
    pub validates: bool,
    pub checkpoints: Option<&'a Checkpoints>,
    pub progress: &'a dyn Progress,
}

/// The epoch loop of every trainer in this crate: resume from a checkpoint (weights and
/// the optimizer's state), then per epoch shuffle `items` with the epoch's own generator
/// ([`epoch_rng`], so a resumed run sees the batches an uninterrupted one would), take
/// `loss(model, batch, rng)`'s gradient step with `optimizer` on each batch within the
/// step limit (`rng` is the epoch's generator after the shuffle), refuse a non-finite
/// epoch loss, validate with `validate(valid model)` (early stopping keeps the best),
/// checkpoint and report progress: an update per epoch and a [`Progress::tick`] per step.
/// `draws` (burn's generator, held since seeding) is released after the first step, once
/// the model has drawn its parameters. `fresh()` makes an untrained module for a resumed
/// run's best weights. Returns the best model (validation mode) and the report (without
/// `seconds`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_epochs<M: Module + ModuleSnapshot, T: Clone>(
    plan: &EpochLoop<'_>,
    items: &[T],
    mut model: M,
    fresh: impl FnOnce() -> M,
    mut optimizer: ModuleOptimizer,
    mut draws: Option<Draws>,
    mut loss: impl FnMut(&M, &Batch<'_, T>, &mut StdRng) -> Result<Tensor<1>>,
    mut validate: impl FnMut(&M) -> Result<f32>,
) -> Result<(M, TrainReport)> {
    let bs = if plan.batch_size == 0 {
        items.len().max(1)
    } else {
        plan.batch_size
    };
    let schedule = Schedule::new(items.len(), bs, plan.epochs, plan.max_steps);
    let mut report = TrainReport::default();
    let mut stopping = EarlyStopping::new(plan.patience);
    let (start, mut finished) = resume(
        plan,
        &schedule,
        &mut model,
        fresh,
        &mut stopping,
        &mut report,
        &mut optimizer,
    )?;
    let progress = plan.progress;
    for epoch in start..plan.epochs {
        if finished || items.is_empty() {
            break;
        }
        let mut rng = epoch_rng(plan.seed, epoch);
        let mut order = items.to_vec();
        order.shuffle(&mut rng);
        let done_before = schedule.done_before(epoch);
        let budget = schedule.budget(epoch);
        let (after, epoch_loss, steps) = epoch_steps(
            plan,
            epoch,
            order.chunks(bs).take(budget),
            budget,
            model,
            &mut optimizer,
            &mut draws,
            &mut loss,
            &mut rng,
        )?;
        model = after;
        let train_loss = record_epoch(plan, epoch, epoch_loss, steps, &mut report)?;
        report.steps = done_before + steps;
        let at_limit = schedule.at_limit(report.steps);
        let mut message = format!("loss {train_loss:.4}");
        if plan.validates {
            let valid = model.valid();
            let vloss = validate(&valid)?;
            message.push_str(&format!(", val {vloss:.4}"));
            finished = stopping.observe(epoch, vloss, valid, &mut report);
        } else {
            report.best_epoch = epoch + 1;
        }
        if at_limit && !finished {
            report.stopped_at_max_steps = true;
            message.push_str(&format!(", step limit {} reached", plan.max_steps));
        }
        finished |= at_limit || epoch + 1 == plan.epochs;
        if let Some(c) = plan.checkpoints {
            c.record(epoch + 1, finished, &report, &stopping, &model, &optimizer)?;
        }
        progress.update(plan.stage, (epoch + 1) as u64, &message);
    }
    progress.finish(plan.stage);
    if let Some(d) = draws.take() {
        d.finish(&model);
    }
    let model = stopping.into_best().unwrap_or_else(|| model.valid());
    Ok((model, report))
}

/// The epoch's mean training loss, recorded in `report` (an error when it is not finite).
fn record_epoch(
    plan: &EpochLoop<'_>,
    epoch: usize,
    epoch_loss: f32,
    steps: usize,
    report: &mut TrainReport,
) -> Result<f32> {
    let train_loss = epoch_loss / steps.max(1) as f32;
    if !train_loss.is_finite() {
        return Err(Error::invalid(
            plan.location,
            format!("training loss became {train_loss} in epoch {}", epoch + 1),
        ));
    }
    report.train_loss.push(train_loss);
    report.epochs_run = epoch + 1;
    Ok(train_loss)
}

/// Resume from `plan`'s checkpoint when it has one (`fresh` makes the model the saved
/// weights load into) and report the start; the first epoch to run and whether the run
/// had finished.
#[allow(clippy::too_many_arguments)]
fn resume<M: Module + ModuleSnapshot>(
    plan: &EpochLoop<'_>,
    schedule: &Schedule,
    model: &mut M,
    fresh: impl FnOnce() -> M,
    stopping: &mut EarlyStopping<M>,
    report: &mut TrainReport,
    optimizer: &mut ModuleOptimizer,
) -> Result<(usize, bool)> {
    let (mut start, mut finished) = (0, false);
    if let Some(c) = plan.checkpoints {
        (start, finished) = c.resume(model, fresh(), stopping, report, optimizer, plan.progress)?;
    }
    let progress = plan.progress;
    progress.start(plan.stage, Some(schedule.planned_epochs as u64));
    if start > 0 {
        progress.update(
            plan.stage,
            start as u64,
            &format!("resumed from the checkpoint after epoch {start}"),
        );
    }
    Ok((start, finished))
}

/// One epoch's optimizer steps over `batches` (at most `budget`): the model after them,
/// the sum of their losses and how many ran.
#[allow(clippy::too_many_arguments)]
fn epoch_steps<'a, M: Module + ModuleSnapshot, T: 'a>(
    plan: &EpochLoop<'_>,
    epoch: usize,
    batches: impl Iterator<Item = &'a [T]>,
    budget: usize,
    mut model: M,
    optimizer: &mut ModuleOptimizer,
    draws: &mut Option<Draws>,
    loss: &mut impl FnMut(&M, &Batch<'_, T>, &mut StdRng) -> Result<Tensor<1>>,
    rng: &mut StdRng,
) -> Result<(M, f32, usize)> {
    let (mut epoch_loss, mut steps) = (0.0f32, 0usize);
    for batch in batches {
        let b = Batch {
            epoch,
            index: steps,
            items: batch,
        };
        let l = loss(&model, &b, rng)?;
        let grads = GradientsParams::from_grads(l.backward(), &model);
        epoch_loss += scalar(l.detach());
        model = optimizer.step(plan.learning_rate, model, grads);
        if let Some(d) = draws.take() {
            d.finish(&model);
        }
        steps += 1;
        plan.progress.tick(
            plan.stage,
            &format!("epoch {}: step {steps} of {budget}", epoch + 1),
        );
    }
    Ok((model, epoch_loss, steps))
}

/// One training step's batch, as [`run_link_epochs`] hands it to the model's loss.
pub(crate) struct Step<'a> {
    /// Epoch, 0-based.
    pub epoch: usize,
    /// Steps run before this one in the epoch.
    pub index: usize,
    /// The batch's target edges.
    pub targets: &'a [(u32, u32)],
    /// The pairs to score: the targets, then their negatives ([`step_pairs`]).
    pub pairs: &'a [(u32, u32)],
    /// Targets removed from the message graph for this step (empty without
    /// `mask_targets`).
    pub masked: &'a EdgeSet,
}

/// What [`run_link_epochs`] runs on.
pub(crate) struct LinkLoop<'a> {
    /// Error location, e.g. `GnnLinkPredictor::fit`.
    pub location: &'static str,
    pub train: &'a TrainConfig,
    /// Target edges of the split ([`Split::targets`]).
    pub targets: &'a [(u32, u32)],
    pub sampler: &'a NegativeDraw,
    pub checkpoints: Option<&'a Checkpoints>,
    /// Whether there are held-out queries to validate on (else the last model is kept).
    pub validates: bool,
    pub progress: &'a dyn Progress,
}

/// The link-predictor trainers' loop ([`crate::GnnLinkPredictor`] and
/// [`crate::BurnLinkPredictor`]): [`run_epochs`] over the target edges (stage `train`)
/// with Adam (weight decay from the configuration), whose loss draws the batch's negatives
/// and masked targets ([`step_pairs`]) and hands them to `loss(model, step)`.
pub(crate) fn run_link_epochs<M: Module + ModuleSnapshot>(
    run: &LinkLoop<'_>,
    model: M,
    fresh: impl FnOnce() -> M,
    draws: Draws,
    mut loss: impl FnMut(&M, &Step<'_>) -> Result<Tensor<1>>,
    validate: impl FnMut(&M) -> Result<f32>,
) -> Result<(M, TrainReport)> {
    let tc = run.train;
    let optimizer = AdamConfig::new()
        .with_weight_decay(Some(WeightDecayConfig::new(tc.weight_decay)))
        .init();
    let plan = EpochLoop {
        stage: "train",
        location: run.location,
        epochs: tc.epochs,
        patience: tc.patience,
        batch_size: tc.batch_size,
        max_steps: tc.max_steps,
        seed: tc.seed,
        learning_rate: tc.learning_rate,
        validates: run.validates,
        checkpoints: run.checkpoints,
        progress: run.progress,
    };
    run_epochs(
        &plan,
        run.targets,
        model,
        fresh,
        optimizer,
        Some(draws),
        |model, batch, rng| {
            let (pairs, masked) = step_pairs(batch.items, tc, run.sampler, rng);
            let step = Step {
                epoch: batch.epoch,
                index: batch.index,
                targets: batch.items,
                pairs: &pairs,
                masked: &masked,
            };
            loss(model, &step)
        },
        validate,
    )
}

/// Progress reporters for the trainers' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::atomic::{AtomicU64, Ordering};

    use lprag_core::Progress;

    /// Dies (panics) when `stage` reports epoch `epoch`: a crash right after that epoch's
    /// checkpoint was written.
    pub(crate) struct DieAfter(pub &'static str, pub u64);

    impl Progress for DieAfter {
        fn update(&self, stage: &str, done: u64, _message: &str) {
            if stage == self.0 && done == self.1 {
                panic!("killed after epoch {done}");
            }
        }
    }

    /// Counts epoch updates and step ticks.
    #[derive(Default)]
    pub(crate) struct Counts {
        pub updates: AtomicU64,
        pub ticks: AtomicU64,
    }

    impl Counts {
        pub(crate) fn get(&self) -> (u64, u64) {
            (
                self.updates.load(Ordering::Relaxed),
                self.ticks.load(Ordering::Relaxed),
            )
        }
    }

    impl Progress for Counts {
        fn update(&self, _stage: &str, _done: u64, _message: &str) {
            self.updates.fetch_add(1, Ordering::Relaxed);
        }
        fn tick(&self, _stage: &str, _message: &str) {
            self.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{Embeddings, LinkEdge};

    /// Without query messages, query–chunk edges are targets only.
    #[test]
    fn query_messages_off_keeps_only_chunk_edges_as_messages() {
        let edge = |a: u32, b: u32, kind| LinkEdge {
            a,
            b,
            weight: 1.0,
            kind,
        };
        let graph = LinkGraph {
            features: Embeddings::new(2, vec![0.5; 6 * 2]).unwrap(),
            num_chunks: 3,
            edges: vec![
                edge(0, 1, EdgeKind::Similarity),
                edge(3, 0, EdgeKind::QueryChunk),
                edge(4, 1, EdgeKind::QueryChunk),
                edge(5, 2, EdgeKind::QueryChunk),
            ],
        };
        let on = TrainConfig {
            validation_fraction: 0.0,
            ..TrainConfig::default()
        };
        let off = TrainConfig {
            query_messages: false,
            ..on.clone()
        };
        let mut rng = StdRng::seed_from_u64(1);
        let with = Split::new(&graph, &on, &mut rng);
        let without = Split::new(&graph, &off, &mut rng);
        assert_eq!(with.msg_edges.len(), 4);
        assert_eq!(without.msg_edges, vec![(0, 1, 1.0)]);
        assert_eq!(with.targets, without.targets);
        assert_eq!(without.targets.len(), 3);
    }
}
