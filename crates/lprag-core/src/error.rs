//! The error type shared by every lprag trait.

use std::path::PathBuf;

/// Result alias used across lprag.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure an lprag component can report.
///
/// The type is `Send + Sync + 'static`, so it crosses threads and async tasks. Variants say
/// *what* went wrong and *where* (a document id, a file, a field); backends wrap their own
/// errors in [`Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The corpus has no documents, or no document produced a chunk.
    #[error("empty corpus: {0}")]
    EmptyCorpus(String),
    /// An argument or a piece of input data is invalid.
    #[error("invalid input at {location}: {message}")]
    InvalidInput {
        /// Where the bad value is (a document id, an argument name, a record index).
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// Two things that must agree do not (vector dimensions, node counts).
    #[error("dimension mismatch at {location}: expected {expected}, got {actual}")]
    DimensionMismatch {
        /// Where the mismatch was found.
        location: String,
        /// The size that was expected.
        expected: usize,
        /// The size that was found.
        actual: usize,
    },
    /// An operation needs a trained model or a built index first.
    #[error("not ready: {0}")]
    NotReady(String),
    /// A file could not be read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A saved file is corrupt, of another format version, or otherwise unreadable.
    #[error("bad format in {path}: {message}")]
    Format {
        /// The file involved.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An error raised inside a pluggable backend (encoder, LLM, link predictor, ...).
    #[error("{component} failed: {source}")]
    Backend {
        /// The component that failed (for example `"encoder hashing"`).
        component: String,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A save, build or training was pointed at a directory that holds something other
    /// than what lprag writes there (a user's files, another kind of index); nothing in
    /// it was touched.
    #[error(
        "refusing to write {kind} into {path}: the directory is not empty and is not {kind} \
         ({found}); nothing was changed. Choose a new or empty directory"
    )]
    ForeignDirectory {
        /// The directory.
        path: PathBuf,
        /// What lprag was about to write (for example `"an LpRag index"`).
        kind: String,
        /// What was found there that lprag does not own (for example `"notes.txt"`).
        found: String,
    },
    /// Another process (or another build in this one) holds the directory: a work
    /// directory, a checkpoint directory or an index being saved.
    #[error(
        "{path} is in use by another lprag {what}; wait for it to finish or use another directory"
    )]
    Busy {
        /// The directory.
        path: PathBuf,
        /// What holds it (for example `"build"`).
        what: String,
    },
    /// The operation was cancelled (for example an async task was aborted).
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// A backend failed in a way that may pass if retried later (a timeout, a refused
    /// connection, HTTP 429 or 5xx after the backend's own retries). [`Error::is_transient`]
    /// is `true` for it and only for it; every other variant is permanent.
    #[error("{component} failed (transient, a retry may succeed): {source}")]
    Transient {
        /// The component that failed (for example `"llm"`).
        component: String,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// Build an [`Error::InvalidInput`].
    pub fn invalid(location: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            location: location.into(),
            message: message.into(),
        }
    }

    /// Build an [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Build an [`Error::Format`] for `path`.
    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Wrap a backend's error that may pass if retried ([`Error::Transient`]).
    pub fn transient(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Transient {
            component: component.into(),
            source: source.into(),
        }
    }

    /// Whether retrying the same call later may succeed ([`Error::Transient`]): what a
    /// caller of a [`crate::Chunker`], [`crate::Retriever`] or any other trait checks before
    /// retrying. Bad input, bad files and permanent backend failures are `false`.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. })
    }

    /// Wrap a backend's error.
    pub fn backend(
        component: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Backend {
            component: component.into(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_static() {
        assert_send_sync::<Error>();
    }

    #[test]
    fn messages_say_what_and_where() {
        let e = Error::invalid("document 'd7'", "text is empty");
        assert_eq!(
            e.to_string(),
            "invalid input at document 'd7': text is empty"
        );
    }
}
