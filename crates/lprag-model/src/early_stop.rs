//! Early stopping on a validation loss, shared by the trainers of this crate.

use lprag_core::TrainReport;

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
    pub(crate) fn into_best(self) -> Option<M> {
        self.best.map(|(_, m)| m)
    }
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
