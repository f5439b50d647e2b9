//! Running CPU-bound work from async code: [`blocking`] moves it to tokio's blocking pool
//! (inline when no runtime is running) and turns a panic into an [`Error`].

use crate::{Error, Result};

/// Run CPU-bound work off the async runtime when there is one (tokio's blocking pool),
/// inline otherwise. A panic in `f` (a custom encoder, predictor or scorer may run there)
/// becomes an [`Error::Backend`] that says so; a cancelled task becomes
/// [`Error::Cancelled`].
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => match handle.spawn_blocking(f).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => Err(Error::backend(
                "blocking task",
                format!("panicked: {}", panic_message(&*e.into_panic())),
            )),
            Err(e) => Err(Error::Cancelled(format!("blocking task: {e}"))),
        },
        Err(_) => f(),
    }
}

/// The message of a caught panic's payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_panic_becomes_an_error_and_work_runs_outside_a_runtime_too() {
        let err = blocking::<()>(|| panic!("boom")).await.unwrap_err();
        assert!(err.to_string().contains("panicked: boom"), "{err}");
        let inline = futures::executor::block_on(blocking(|| Ok(7)));
        assert_eq!(inline.unwrap(), 7);
    }
}
