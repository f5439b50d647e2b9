//! The error type of `lprag-eval`.

use std::path::PathBuf;

/// Result alias used across `lprag-eval`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the harness can fail on.
///
/// Dataset problems name the file, the record and the field ([`Error::Malformed`]); errors
/// of lprag components (encoders, retrievers) arrive wrapped in [`Error::Core`], so `?`
/// works on any `lprag_core::Result`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A dataset file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A dataset file is not valid JSON (the message carries line and column).
    #[error("{path}: invalid JSON: {source}")]
    Json {
        /// The file involved.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A dataset record does not have the expected shape.
    #[error("{}: {}field `{field}`: {message}", path.display(), record_label(*record))]
    Malformed {
        /// The file involved.
        path: PathBuf,
        /// 0-based index of the record (position in the top-level list or object, or
        /// among the non-blank lines of a JSONL file); `None` for the file as a whole.
        record: Option<usize>,
        /// The field, as a path inside the record (for example `paragraphs[2].title`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A dataset directory holds no file layout this crate knows.
    #[error("{path}: {message}")]
    UnknownLayout {
        /// The directory.
        path: PathBuf,
        /// What was looked for.
        message: String,
    },
    /// A retriever name that the registry does not know.
    #[error("unknown retriever `{name}` (known: {known})")]
    UnknownRetriever {
        /// The name asked for.
        name: String,
        /// The names the registry knows, comma separated.
        known: String,
    },
    /// A feature that exists in the interface but is not implemented yet.
    #[error("{what} is not available yet: {reason}")]
    NotAvailable {
        /// The feature (for example `--encoder minilm`).
        what: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// An argument is invalid.
    #[error("invalid {location}: {message}")]
    Invalid {
        /// The argument or value involved.
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// An lprag component (encoder, retriever) failed.
    #[error(transparent)]
    Core(#[from] lprag_core::Error),
}

fn record_label(record: Option<usize>) -> String {
    match record {
        Some(i) => format!("record {i}, "),
        None => String::new(),
    }
}

impl Error {
    /// Build an [`Error::Invalid`].
    pub fn invalid(location: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid {
            location: location.into(),
            message: message.into(),
        }
    }

    /// Build an [`Error::NotAvailable`].
    pub fn not_available(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::NotAvailable {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Error>();
    }

    #[test]
    fn malformed_names_file_record_and_field() {
        let e = Error::Malformed {
            path: "data/questions.json".into(),
            record: Some(3),
            field: "paragraphs[1].title".into(),
            message: "expected a string, found a number".into(),
        };
        assert_eq!(
            e.to_string(),
            "data/questions.json: record 3, field `paragraphs[1].title`: expected a string, found a number"
        );
        let e = Error::Malformed {
            path: "c.json".into(),
            record: None,
            field: "(top level)".into(),
            message: "expected a list".into(),
        };
        assert_eq!(
            e.to_string(),
            "c.json: field `(top level)`: expected a list"
        );
    }
}
