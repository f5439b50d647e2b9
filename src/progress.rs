//! A [`Progress`] that prints to standard error.

use std::sync::Mutex;
use std::time::Instant;

use lprag_core::Progress;

/// Prints each stage's start, periodic updates and end to standard error.
#[derive(Debug)]
pub struct StderrProgress {
    started: Mutex<Option<Instant>>,
    every: u64,
}

impl StderrProgress {
    /// Print every `every`-th update of a stage (and always its last one).
    pub fn new(every: u64) -> Self {
        Self {
            started: Mutex::new(None),
            every: every.max(1),
        }
    }
}

impl Default for StderrProgress {
    fn default() -> Self {
        Self::new(10)
    }
}

impl Progress for StderrProgress {
    fn start(&self, stage: &str, total: Option<u64>) {
        if let Ok(mut s) = self.started.lock() {
            *s = Some(Instant::now());
        }
        match total {
            Some(t) => eprintln!("[lprag] {stage}: starting ({t} steps)"),
            None => eprintln!("[lprag] {stage}: starting"),
        }
    }

    fn update(&self, stage: &str, done: u64, message: &str) {
        if done.is_multiple_of(self.every) || done == 1 {
            eprintln!("[lprag] {stage}: {done} {message}");
        }
    }

    fn finish(&self, stage: &str) {
        let secs = self
            .started
            .lock()
            .ok()
            .and_then(|s| s.map(|t| t.elapsed().as_secs_f64()))
            .unwrap_or(0.0);
        eprintln!("[lprag] {stage}: done in {secs:.2} s");
    }

    fn warn(&self, message: &str) {
        eprintln!("[lprag] warning: {message}");
    }
}
