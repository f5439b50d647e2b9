//! Early stopping on a validation loss, shared by the trainers of this crate.

use burn::module::Module;
use lprag_core::{Error, Progress, Result, TrainReport};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// Keeps the model of the best validation loss and says when `patience` epochs in a row
/// brought no improvement.
pub(crate) struct EarlyStopping<M> {
    patience: usize,
    best: Option<(f32, M)>,
    since_best: usize,
}

impl<M> EarlyStopping<M> {
    /// Stop after `patience` (at least 1) epochs without a lower validation loss.
    pub(crate) fn new(patience: usize) -> Self {
        Self {
            patience: patience.max(1),
            best: None,
            since_best: 0,
        }
    }

    /// Record epoch `epoch`'s (0-based) validation loss and model in `report`; `true`
    /// means stop now (`report.stopped_early` is then set).
    pub(crate) fn observe(
        &mut self,
        epoch: usize,
        val_loss: f32,
        model: M,
        report: &mut TrainReport,
    ) -> bool {
        report.val_loss.push(val_loss);
        if self.best.as_ref().is_none_or(|(b, _)| val_loss < *b) {
            self.best = Some((val_loss, model));
            report.best_epoch = epoch + 1;
            self.since_best = 0;
            return false;
        }
        self.since_best += 1;
        report.stopped_early = self.since_best >= self.patience;
        report.stopped_early
    }

    /// The model of the best validation loss, if any epoch was observed.
    /// Continue from a checkpoint: the best (loss, model) so far and the epochs since.
    pub(crate) fn restore(&mut self, best: Option<(f32, M)>, since_best: usize) {
        self.best = best;
        self.since_best = since_best;
    }

    /// The best validation loss so far.
    pub(crate) fn best_loss(&self) -> Option<f32> {
        self.best.as_ref().map(|(l, _)| *l)
    }

    /// The model with the best validation loss so far.
    pub(crate) fn best(&self) -> Option<&M> {
        self.best.as_ref().map(|(_, m)| m)
    }

    /// Epochs observed since the best one.
    pub(crate) fn since_best(&self) -> usize {
        self.since_best
    }

    pub(crate) fn into_best(self) -> Option<M> {
        self.best.map(|(_, m)| m)
    }
}

/// The checks every trainer's configuration shares: a finite learning rate > 0 and a
/// held-out fraction in [0, 1); errors name `{config}.learning_rate` /
/// `{config}.validation_fraction`.
pub(crate) fn check_schedule(
    config: &str,
    learning_rate: f64,
    validation_fraction: f32,
) -> Result<()> {
    if !(learning_rate > 0.0 && learning_rate.is_finite()) {
        return Err(Error::invalid(
            format!("{config}.learning_rate"),
            "must be finite and > 0",
        ));
    }
    if !(0.0..1.0).contains(&validation_fraction) {
        return Err(Error::invalid(
            format!("{config}.validation_fraction"),
            "must be in [0, 1)",
        ));
    }
    Ok(())
}

/// Shuffle `0..n` with `rng` and hold out `fraction` of it (none when `n < 10`):
/// `(validation, training)` indices.
pub(crate) fn split_holdout(n: usize, fraction: f32, rng: &mut StdRng) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let n_val = if n >= 10 {
        (n as f32 * fraction) as usize
    } else {
        0
    };
    let train = order.split_off(n_val);
    (order, train)
}

/// The settings of [`train_epochs`].
pub(crate) struct EpochPlan<'a> {
    /// Progress stage and error location.
    pub stage: &'a str,
    pub epochs: usize,
    pub patience: usize,
    pub batch_size: usize,
    /// Most optimisation steps over the whole run; 0 means no limit. The epoch that
    /// reaches it is cut short, then validated as usual.
    pub max_steps: usize,
}

/// The epoch loop both trainers share: shuffle the training indices, run `step` on each
/// batch (it gets `rng` after the shuffle and returns the updated module and the batch
/// loss) until the epoch ends or `plan.max_steps` is reached, stop on a non-finite loss,
/// validate with `val_loss(valid module, batch, batch number)` (mean loss of the batch)
/// and keep the module of the best validation loss ([`EarlyStopping`]); without a
/// validation set the last module is kept. Returns the kept module (no autodiff) and the
/// report (without `seconds`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_epochs<M: Module>(
    plan: &EpochPlan<'_>,
    mut train_idx: Vec<usize>,
    val_idx: &[usize],
    rng: &mut StdRng,
    progress: &dyn Progress,
    mut net: M,
    mut step: impl FnMut(M, &[usize], &mut StdRng) -> (M, f32),
    mut val_loss: impl FnMut(&M, &[usize], usize) -> f32,
) -> Result<(M, TrainReport)> {
    let mut report = TrainReport::default();
    let mut stopping = EarlyStopping::new(plan.patience);
    let reached = |steps: usize| plan.max_steps > 0 && steps >= plan.max_steps;
    progress.start(plan.stage, Some(plan.epochs as u64));
    for epoch in 0..plan.epochs {
        if train_idx.is_empty() {
            break;
        }
        train_idx.shuffle(rng);
        let (mut sum, mut steps) = (0.0f32, 0usize);
        for batch in train_idx.chunks(plan.batch_size.max(1)) {
            if reached(report.steps) {
                break;
            }
            let (next, loss) = step(net, batch, rng);
            net = next;
            sum += loss;
            steps += 1;
            report.steps += 1;
        }
        let at_limit = reached(report.steps);
        let train_loss = sum / steps.max(1) as f32;
        if !train_loss.is_finite() {
            return Err(Error::backend(
                plan.stage,
                format!("loss became {train_loss} in epoch {}", epoch + 1),
            ));
        }
        report.train_loss.push(train_loss);
        report.epochs_run = epoch + 1;
        let mut message = format!("loss {train_loss:.4}");
        let mut stop = at_limit;
        if val_idx.is_empty() {
            report.best_epoch = epoch + 1;
        } else {
            let valid = net.valid();
            let (mut vs, mut vn) = (0.0f32, 0usize);
            for (k, batch) in val_idx.chunks(plan.batch_size.max(1)).enumerate() {
                vs += val_loss(&valid, batch, k) * batch.len() as f32;
                vn += batch.len();
            }
            let vloss = vs / vn as f32;
            message.push_str(&format!(", val {vloss:.4}"));
            stop |= stopping.observe(epoch, vloss, valid, &mut report);
        }
        if at_limit {
            report.stopped_at_max_steps = true;
            message.push_str(&format!(", step limit {} reached", plan.max_steps));
        }
        progress.update(plan.stage, (epoch + 1) as u64, &message);
        if stop {
            break;
        }
    }
    progress.finish(plan.stage);
    let best = stopping.into_best().unwrap_or_else(|| net.valid());
    Ok((best, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_and_stops_after_patience() {
        let mut r = TrainReport::default();
        let mut s = EarlyStopping::new(2);
        assert!(!s.observe(0, 1.0, "a", &mut r));
        assert!(!s.observe(1, 0.5, "b", &mut r));
        assert!(!s.observe(2, 0.7, "c", &mut r));
        assert!(s.observe(3, 0.6, "d", &mut r));
        assert!(r.stopped_early);
        assert_eq!(r.best_epoch, 2);
        assert_eq!(r.val_loss, vec![1.0, 0.5, 0.7, 0.6]);
        assert_eq!(s.into_best(), Some("b"));
    }
}
