//! Logging for the examples: the library's `tracing` spans and events on stderr
//! (`RUST_LOG=info` shows the build stages; the default shows warnings).

/// Install a `tracing-subscriber` formatter filtered by `RUST_LOG` (default `warn`).
pub fn init() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}
