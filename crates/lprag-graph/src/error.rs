//! The error type of `lprag-graph`.

use std::path::PathBuf;

/// Everything that can go wrong while building, sampling or persisting graphs.
///
/// `Send + Sync + 'static`; converts into [`lprag_core::Error`] with `?`. Messages say what
/// went wrong and where (an argument, a row, a query, an edge, a file).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// An argument is out of its allowed range (for example `k == 0`).
    #[error("invalid argument `{name}`: {message}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A row of an embedding matrix contains NaN or an infinity.
    #[error("{matrix} row {row} contains a non-finite value (NaN or infinity)")]
    NonFinite {
        /// Which matrix (for example `"chunk embeddings"`).
        matrix: &'static str,
        /// Index of the offending row.
        row: usize,
    },
    /// Two sizes that must agree do not (row counts, vector dimensions).
    #[error("dimension mismatch at {location}: expected {expected}, got {actual}")]
    DimensionMismatch {
        /// Where the mismatch was found.
        location: String,
        /// The size that was expected.
        expected: usize,
        /// The size that was found.
        actual: usize,
    },
    /// An edge, a query or a node list names a node that does not exist, or is otherwise
    /// malformed (self-loop, non-finite weight, wrong kind).
    #[error("invalid graph input at {location}: {message}")]
    InvalidGraph {
        /// Where the bad value is (for example `"queries[3].chunk_ids[1]"`).
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// The HNSW backend failed (it panicked internally; the message is its panic text).
    #[error("HNSW backend failed: {0}")]
    Hnsw(String),
    /// A file could not be read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A saved file is truncated, of another kind, or otherwise unreadable.
    #[error("bad format in {path}: {message}")]
    Format {
        /// The file involved.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A saved file was written with another on-disk format version.
    #[error("{path} has format version {found}, this build reads version {expected}")]
    VersionMismatch {
        /// The file involved.
        path: PathBuf,
        /// The version found in the file.
        found: u64,
        /// The version this build reads and writes.
        expected: u64,
    },
    /// A saved file's payload does not match the checksum in its header (corruption).
    #[error(
        "checksum mismatch in {path}: header says {expected:016x}, payload hashes to {actual:016x}"
    )]
    ChecksumMismatch {
        /// The file involved.
        path: PathBuf,
        /// The checksum recorded in the header.
        expected: u64,
        /// The checksum of the payload actually read.
        actual: u64,
    },
}

impl GraphError {
    pub(crate) fn arg(name: &'static str, message: impl Into<String>) -> Self {
        GraphError::InvalidArgument {
            name,
            message: message.into(),
        }
    }

    pub(crate) fn graph(location: impl Into<String>, message: impl Into<String>) -> Self {
        GraphError::InvalidGraph {
            location: location.into(),
            message: message.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        GraphError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        GraphError::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl From<GraphError> for lprag_core::Error {
    fn from(e: GraphError) -> Self {
        use lprag_core::Error;
        let text = e.to_string();
        match e {
            GraphError::InvalidArgument { name, message } => Error::invalid(name, message),
            GraphError::NonFinite { matrix, row } => Error::invalid(
                format!("{matrix} row {row}"),
                "contains a non-finite value (NaN or infinity)",
            ),
            GraphError::DimensionMismatch {
                location,
                expected,
                actual,
            } => Error::DimensionMismatch {
                location,
                expected,
                actual,
            },
            GraphError::InvalidGraph { location, message } => Error::invalid(location, message),
            GraphError::Hnsw(msg) => Error::backend("hnsw", msg),
            GraphError::Io { path, source } => Error::io(path, source),
            GraphError::Format { path, message } => Error::format(path, message),
            GraphError::VersionMismatch { path, .. }
            | GraphError::ChecksumMismatch { path, .. } => Error::format(path, text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_static() {
        assert_send_sync::<GraphError>();
    }

    #[test]
    fn converts_to_core_error() {
        let e: lprag_core::Error = GraphError::arg("k", "must be at least 1").into();
        assert!(matches!(e, lprag_core::Error::InvalidInput { .. }), "{e}");
        assert!(e.to_string().contains("must be at least 1"));

        let e: lprag_core::Error = GraphError::NonFinite {
            matrix: "chunk embeddings",
            row: 7,
        }
        .into();
        assert!(e.to_string().contains("row 7"), "{e}");

        let e: lprag_core::Error = GraphError::VersionMismatch {
            path: "g.bin".into(),
            found: 9,
            expected: 1,
        }
        .into();
        assert!(matches!(e, lprag_core::Error::Format { .. }), "{e}");
        assert!(e.to_string().contains("version 9"), "{e}");

        let e: lprag_core::Error = GraphError::io("x", std::io::Error::other("disk full")).into();
        assert!(matches!(e, lprag_core::Error::Io { .. }));

        let e: lprag_core::Error = GraphError::Hnsw("boom".into()).into();
        assert!(matches!(e, lprag_core::Error::Backend { .. }));
    }
}
