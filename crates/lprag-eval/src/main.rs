//! `lprag-eval`: the benchmark command line ([`lprag_eval::cli`]).

use std::process::ExitCode;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    lprag_eval::cli::main(&[lprag_eval::scale::memory_store]).await
}
