//! A [`Progress`] that prints to standard error.
//!
//! Each stage keeps its own start time and step count, so stages that run inside one
//! another (training inside an index build) report their own durations. An update is
//! printed when it is the first, every `every`-th, the stage's last (when the total is
//! known) or the first after `interval` without a printed line; a [`Progress::tick`]
//! (work inside a step, such as a training step inside an epoch) only after `interval`
//! without a line. So slow stages (a training epoch that takes minutes) are never silent
//! for long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lprag_core::Progress;

/// What a stage has shown so far.
#[derive(Debug)]
struct Stage {
    started: Instant,
    total: Option<u64>,
    last_print: Instant,
}

/// Prints each stage's start, periodic updates and end to standard error.
#[derive(Debug)]
pub struct StderrProgress {
    stages: Mutex<HashMap<String, Stage>>,
    every: u64,
    interval: Duration,
}

impl StderrProgress {
    /// Print the first, every `every`-th and the last update of a stage, and any update
    /// that comes 10 s or more after the stage's previous printed line.
    pub fn new(every: u64) -> Self {
        Self {
            stages: Mutex::new(HashMap::new()),
            every: every.max(1),
            interval: Duration::from_secs(10),
        }
    }

    /// Also print an update whenever `interval` has passed since the stage's previous
    /// printed line (default 10 s; `Duration::MAX` turns this off).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Whether update `done` of `stage` is printed now (records the print).
    fn should_print(&self, stage: &str, done: u64) -> bool {
        let Ok(mut stages) = self.stages.lock() else {
            return done == 1 || done.is_multiple_of(self.every);
        };
        let now = Instant::now();
        let s = stages.entry(stage.to_string()).or_insert(Stage {
            started: now,
            total: None,
            last_print: now,
        });
        let due = done == 1
            || done.is_multiple_of(self.every)
            || s.total == Some(done)
            || now.duration_since(s.last_print) >= self.interval;
        if due {
            s.last_print = now;
        }
        due
    }
}

impl StderrProgress {
    /// Whether a [`Progress::tick`] of `stage` is printed now: only after `interval`
    /// without a printed line of the stage (records the print).
    fn tick_due(&self, stage: &str) -> bool {
        let Ok(mut stages) = self.stages.lock() else {
            return false;
        };
        let now = Instant::now();
        let s = stages.entry(stage.to_string()).or_insert(Stage {
            started: now,
            total: None,
            last_print: now,
        });
        let due = now.duration_since(s.last_print) >= self.interval;
        if due {
            s.last_print = now;
        }
        due
    }
}

impl Default for StderrProgress {
    fn default() -> Self {
        Self::new(10)
    }
}

impl Progress for StderrProgress {
    fn start(&self, stage: &str, total: Option<u64>) {
        if let Ok(mut s) = self.stages.lock() {
            let now = Instant::now();
            s.insert(
                stage.to_string(),
                Stage {
                    started: now,
                    total,
                    last_print: now,
                },
            );
        }
        match total {
            Some(t) => eprintln!("[lprag] {stage}: starting ({t} steps)"),
            None => eprintln!("[lprag] {stage}: starting"),
        }
    }

    fn update(&self, stage: &str, done: u64, message: &str) {
        if self.should_print(stage, done) {
            eprintln!("[lprag] {stage}: {done} {message}");
        }
    }

    /// Printed only when the stage has shown nothing for the quiet interval (10 s by
    /// default), so a long epoch shows where it is without a line per step.
    fn tick(&self, stage: &str, message: &str) {
        if self.tick_due(stage) {
            eprintln!("[lprag] {stage}: {message}");
        }
    }

    fn finish(&self, stage: &str) {
        let secs = self
            .stages
            .lock()
            .ok()
            .and_then(|mut s| s.remove(stage))
            .map_or(0.0, |s| s.started.elapsed().as_secs_f64());
        eprintln!("[lprag] {stage}: done in {secs:.2} s");
    }

    fn warn(&self, message: &str) {
        eprintln!("[lprag] warning: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_first_every_nth_last_and_after_a_quiet_interval() {
        let p = StderrProgress::new(10).with_interval(Duration::MAX);
        p.start("train", Some(25));
        let printed: Vec<u64> = (1..=25).filter(|&d| p.should_print("train", d)).collect();
        assert_eq!(printed, vec![1, 10, 20, 25]);

        // A stage started without a total: no "last" to know.
        let printed: Vec<u64> = (1..=12).filter(|&d| p.should_print("other", d)).collect();
        assert_eq!(printed, vec![1, 10]);

        // With a zero interval every update is due.
        let p = StderrProgress::new(10).with_interval(Duration::ZERO);
        p.start("epochs", Some(30));
        assert!((1..=5).all(|d| p.should_print("epochs", d)));
    }

    #[test]
    fn nested_stages_keep_their_own_clocks() {
        let p = StderrProgress::default();
        p.start("index", None);
        p.start("train", Some(3));
        p.finish("train");
        let stages = p.stages.lock().unwrap();
        assert!(stages.contains_key("index") && !stages.contains_key("train"));
    }

    #[test]
    fn ticks_print_only_after_a_quiet_interval() {
        // Never within the interval, however many: a step per tick would flood the log.
        let p = StderrProgress::new(10).with_interval(Duration::MAX);
        p.start("train", Some(5));
        assert!((0..100).all(|_| !p.tick_due("train")));
        // After the interval the next tick is due, and it restarts the interval.
        let p = StderrProgress::new(10).with_interval(Duration::from_millis(300));
        p.start("train", Some(5));
        assert!(!p.tick_due("train"));
        std::thread::sleep(Duration::from_millis(350));
        assert!(p.tick_due("train"));
        assert!(!p.tick_due("train"));
        // A printed update restarts it too.
        std::thread::sleep(Duration::from_millis(350));
        assert!(p.should_print("train", 1));
        assert!(!p.tick_due("train"));
    }
}
