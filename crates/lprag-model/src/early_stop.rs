//! Early stopping on a validation loss, the schedule checks and the hold-out split, shared
//! by the trainers of this crate (whose epoch loop is [`crate::training::run_epochs`]).

use lprag_core::{Error, Result, TrainReport};
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
