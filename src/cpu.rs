//! Where an update's CPU work runs. [`crate::Live`] gives its updates a rayon pool of their
//! own (a task-local for the update's future): the CPU stages of an update run there, and
//! the queries it serves meanwhile keep rayon's global pool to themselves instead of
//! queueing behind the update's parallel loops.

use std::future::Future;
use std::sync::Arc;

use lprag_core::Result;
use rayon::ThreadPool;

tokio::task_local! {
    static UPDATE_POOL: Arc<ThreadPool>;
}

/// Run `fut` with `pool` (when given) as the pool of its CPU stages.
pub(crate) async fn with_pool<F: Future>(pool: Option<Arc<ThreadPool>>, fut: F) -> F::Output {
    match pool {
        Some(p) => UPDATE_POOL.scope(p, fut).await,
        None => fut.await,
    }
}

/// The pool of the running update, if any.
fn current_pool() -> Option<Arc<ThreadPool>> {
    UPDATE_POOL.try_with(Arc::clone).ok()
}

/// [`lprag_core::blocking`], inside the running update's pool when there is one.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match current_pool() {
        Some(pool) => lprag_core::blocking(move || pool.install(f)).await,
        None => lprag_core::blocking(f).await,
    }
}

/// Run CPU-bound work from async code, inside the running update's pool when there is
/// one: on a multi-threaded tokio runtime the worker hands its other tasks to the pool
/// first (`block_in_place`); elsewhere it runs inline.
pub(crate) fn run_cpu<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let pool = current_pool();
    let f = move || match pool {
        Some(pool) => pool.install(f),
        None => f(),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// The default pool of a [`crate::Live`]'s updates: half the cores (at least one), so
/// that queries keep the other half.
pub(crate) fn default_update_pool() -> Option<Arc<ThreadPool>> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    update_pool((cores / 2).max(1))
}

/// A pool of `threads` threads for updates (`None` when it cannot be made).
pub(crate) fn update_pool(threads: usize) -> Option<Arc<ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("lprag-update-{i}"))
        .build()
        .ok()
        .map(Arc::new)
}
