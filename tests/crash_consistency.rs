//! Crash consistency: a build (with a work directory), a training (with checkpoints), a
//! save and an update-then-save run in a child process (this test binary, re-entered
//! through the ignored test `crash_consistency::child`) that is killed with SIGKILL at a
//! random moment. After every kill the saved index opens to the old or the new state —
//! never an error, never a mix — and a build resumed from the work directory ranks exactly
//! as the uninterrupted build.
//!
//! `LPRAG_CRASH_KILLS` kills per operation (default 6, so the normal test run stays
//! short; docs/reliability.md reports a run with 60) and `LPRAG_CRASH_SEED` the seed of
//! the kill times.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lprag::{Document, LpRag};

use crate::common::{corpus, hashing, lprag_config, ranked};

const QUERIES: [&str; 3] = [
    "Where was Marie Curie born?",
    "Which river flows through Warsaw?",
    "imperial capital of Japan",
];

/// The documents the update step adds, one per round.
fn extra(i: usize) -> Document {
    Document::new(
        format!("extra-{i}"),
        format!("Extra {i}"),
        format!("Extra article {i} is about the river number {i} and its {i} bridges."),
    )
}

/// A second corpus, so that the two states a save alternates between differ everywhere.
fn other_corpus() -> Vec<Document> {
    let mut docs = corpus();
    docs.truncate(4);
    docs.push(extra(100));
    docs
}

async fn build(docs: &[Document], epochs: usize, work: Option<&Path>) -> LpRag {
    let mut b = LpRag::builder()
        .encoder(hashing())
        .config(lprag_config(epochs));
    if let Some(w) = work {
        b = b.work_dir(w);
    }
    b.build(docs).await.expect("build")
}

/// The operation a child runs, named by `LPRAG_CRASH_OP`, in `LPRAG_CRASH_DIR`.
async fn run_child(op: &str, dir: &Path) {
    match op {
        // A build of `epochs` epochs with a work directory (its training checkpointed
        // under it), then a save.
        "build" | "train" => {
            let epochs = if op == "build" { 2 } else { 12 };
            let rag = build(&corpus(), epochs, Some(&dir.join("work"))).await;
            rag.save(dir.join("built")).unwrap();
        }
        // Saves of two indexes, alternating, over one target.
        "save" => {
            let a = LpRag::load(dir.join("a"), hashing()).unwrap();
            let b = LpRag::load(dir.join("b"), hashing()).unwrap();
            loop {
                a.save(dir.join("target")).unwrap();
                b.save(dir.join("target")).unwrap();
            }
        }
        // Add a document, save, again.
        "update" => {
            let mut rag = LpRag::load(dir.join("target"), hashing()).unwrap();
            for i in rag.document_ids().len() - corpus().len().. {
                rag.add_documents(&[extra(i)]).await.unwrap();
                rag.save(dir.join("target")).unwrap();
            }
        }
        other => panic!("unknown crash operation {other}"),
    }
}

/// The child's entry point (ignored in a normal run; the parent runs it).
#[tokio::test]
#[ignore = "run by crash_consistency::killed_* in a child process"]
async fn child() {
    let (Ok(op), Ok(dir)) = (
        std::env::var("LPRAG_CRASH_OP"),
        std::env::var("LPRAG_CRASH_DIR"),
    ) else {
        return;
    };
    run_child(&op, Path::new(&dir)).await;
}

/// Start the child for `op` in `dir`.
fn spawn(op: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_consistency::child",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("LPRAG_CRASH_OP", op)
        .env("LPRAG_CRASH_DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child")
}

/// How long the child takes for `op` uninterrupted (or, for the endless ones, a few
/// rounds), to spread the kills over.
fn duration_of(op: &str, dir: &Path) -> Duration {
    let start = Instant::now();
    let status = spawn(op, dir).wait().unwrap();
    assert!(status.success(), "{op}: the uninterrupted child failed");
    start.elapsed()
}

/// SplitMix64: the kill times, reproducible from the seed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A moment in `0..span`.
    fn within(&mut self, span: Duration) -> Duration {
        span.mul_f64((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn kills() -> usize {
    std::env::var("LPRAG_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

fn seed() -> u64 {
    std::env::var("LPRAG_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Kill `op`'s child at a random moment in `0..span`; `true` when it was still running.
fn kill_at(op: &str, dir: &Path, at: Duration) -> bool {
    let mut child = spawn(op, dir);
    std::thread::sleep(at);
    let running = child.try_wait().unwrap().is_none();
    child.kill().ok();
    child.wait().unwrap();
    running
}

async fn rankings(rag: &LpRag) -> Vec<Vec<(usize, f32)>> {
    let mut out = Vec::new();
    for q in QUERIES {
        out.push(ranked(rag, q, 6).await);
    }
    out
}

fn same(a: &[Vec<(usize, f32)>], b: &[Vec<(usize, f32)>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() < 1e-5)
        })
}

/// What one operation's kills came to.
#[derive(Debug, Default)]
struct Outcome {
    kills: usize,
    /// Kills that landed while the child was still working.
    mid_run: usize,
    /// Opened to the state before the operation.
    old: usize,
    /// Opened to the state after it.
    new: usize,
    /// The most staging directories of killed saves found beside the target after a kill
    /// (each save removes those of earlier killed ones).
    leftovers: usize,
    /// Where the resumed builds started: the last stage they found finished (`none`
    /// before the first), counted.
    resumed_after: std::collections::BTreeMap<String, usize>,
}

/// Staging directories of saves beside `target`.
fn staging_left(target: &Path) -> usize {
    let name = target.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(target.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&format!(".{name}.tmp-")) || n.starts_with(&format!(".{name}.new-"))
        })
        .count()
}

/// Kill a build (2 or 12 epochs, work directory, checkpoints) at random moments; after
/// each kill, the build resumed from its work directory ranks exactly as an
/// uninterrupted build, and the index it saves opens.
async fn kill_builds(op: &str) -> Outcome {
    let epochs = if op == "build" { 2 } else { 12 };
    let reference = rankings(&build(&corpus(), epochs, None).await).await;
    let probe = tempfile::tempdir().unwrap();
    let span = duration_of(op, probe.path());
    let mut draws = Draws(seed() ^ op.len() as u64);
    let mut outcome = Outcome::default();
    for _ in 0..kills() {
        let dir = tempfile::tempdir().unwrap();
        let at = draws.within(span);
        outcome.kills += 1;
        outcome.mid_run += usize::from(kill_at(op, dir.path(), at));
        let checkpoint = std::fs::read(dir.path().join("work/train/train-state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["epochs_done"].as_u64());
        let resumed = build(&corpus(), epochs, Some(&dir.path().join("work"))).await;
        let from = match checkpoint {
            Some(e) => format!("epoch {e}"),
            None => resumed
                .stats()
                .reused_stages
                .last()
                .cloned()
                .unwrap_or_else(|| "none".into()),
        };
        *outcome.resumed_after.entry(from).or_default() += 1;
        assert!(
            same(&rankings(&resumed).await, &reference),
            "{op}: killed after {at:?}, the resumed build ranks differently"
        );
        // The save the child may have finished opens and ranks as the reference.
        let built = dir.path().join("built");
        if built.exists() {
            let opened = LpRag::load(&built, hashing()).expect("a finished save opens");
            assert!(
                same(&rankings(&opened).await, &reference),
                "{op}: saved index"
            );
            outcome.new += 1;
        } else {
            outcome.old += 1;
        }
    }
    outcome
}

/// Kill saves alternating between two indexes over one target: the target opens after
/// every kill, and is one of the two whole.
async fn kill_saves() -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let a = build(&corpus(), 2, None).await;
    let b = build(&other_corpus(), 2, None).await;
    a.save(dir.path().join("a")).unwrap();
    b.save(dir.path().join("b")).unwrap();
    a.save(dir.path().join("target")).unwrap();
    let (ra, rb) = (rankings(&a).await, rankings(&b).await);
    let mut draws = Draws(seed() ^ 0x5a5e);
    let mut outcome = Outcome::default();
    // A round of both saves takes about as long as loading the two and one save; spread
    // the kills over a few rounds.
    let span = Duration::from_millis(1500);
    for _ in 0..kills() {
        let at = draws.within(span);
        outcome.kills += 1;
        outcome.mid_run += usize::from(kill_at("save", dir.path(), at));
        let opened = LpRag::load(dir.path().join("target"), hashing())
            .unwrap_or_else(|e| panic!("killed after {at:?}: the target does not open: {e}"));
        outcome.leftovers = outcome
            .leftovers
            .max(staging_left(&dir.path().join("target")));
        let r = rankings(&opened).await;
        if same(&r, &ra) {
            outcome.old += 1;
        } else if same(&r, &rb) {
            outcome.new += 1;
        } else {
            panic!("killed after {at:?}: the target is neither index");
        }
    }
    outcome
}

/// Kill a loop of "add a document, save": after every kill the target opens, and holds
/// the starting corpus plus the first `n` added documents for some `n` — a state a save
/// committed, never a mix.
async fn kill_updates() -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let start = build(&corpus(), 2, None).await;
    start.save(dir.path().join("target")).unwrap();
    let mut draws = Draws(seed() ^ 0xadd);
    let mut outcome = Outcome::default();
    let span = Duration::from_millis(1500);
    let mut last = corpus().len();
    for _ in 0..kills() {
        let at = draws.within(span);
        outcome.kills += 1;
        outcome.mid_run += usize::from(kill_at("update", dir.path(), at));
        let opened = LpRag::load(dir.path().join("target"), hashing())
            .unwrap_or_else(|e| panic!("killed after {at:?}: the target does not open: {e}"));
        // The documents in chunk order, each once: the corpus, then extra 0, 1, ….
        let mut docs: Vec<String> = opened
            .chunks()
            .iter()
            .map(|c| c.provenance.document_id.clone())
            .collect();
        docs.dedup();
        let added = docs.len().saturating_sub(corpus().len());
        let expected: Vec<String> = corpus()
            .into_iter()
            .map(|d| d.id)
            .chain((0..added).map(|i| extra(i).id))
            .collect();
        assert_eq!(docs, expected, "killed after {at:?}: not a committed state");
        outcome.leftovers = outcome
            .leftovers
            .max(staging_left(&dir.path().join("target")));
        if docs.len() > last {
            outcome.new += 1;
        } else {
            outcome.old += 1;
        }
        last = docs.len();
        for q in QUERIES {
            ranked(&opened, q, 3).await;
        }
    }
    outcome
}

fn report(op: &str, o: &Outcome) {
    eprintln!(
        "crash consistency, {op}: {} kills ({} while running): {} old state, {} new state, \
         0 errors, 0 mixes; resumed after {:?}; at most {} staging directories left",
        o.kills, o.mid_run, o.old, o.new, o.resumed_after, o.leftovers
    );
    assert!(o.leftovers <= 2, "{op}: staging directories pile up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_builds_and_trainings_resume_to_the_uninterrupted_result() {
    for op in ["build", "train"] {
        let o = kill_builds(op).await;
        report(op, &o);
        assert!(o.mid_run > 0, "{op}: no kill landed while the child ran");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_saves_and_updates_leave_the_old_or_the_new_index() {
    let o = kill_saves().await;
    report("save", &o);
    assert!(o.mid_run > 0);
    let o = kill_updates().await;
    report("update", &o);
    assert!(o.mid_run > 0);
}
