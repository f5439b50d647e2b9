//! The checks every retriever applies to a user query before it embeds it: its length
//! ([`check_query_len`], [`DEFAULT_MAX_QUERY_BYTES`]) and that it is not blank
//! ([`check_query`]).

use crate::{Error, Result};

/// The longest query, in bytes of UTF-8, a retriever embeds by default: 32 KiB.
///
/// That is about 8,000 tokens of English (≈ 4 bytes a token), far above the 512-token
/// window of the sentence encoders lprag uses (a longer query is cut to the window anyway,
/// so the bytes past it change nothing), yet small enough that a query costs milliseconds:
/// without a bound, a 10 MB query cost 0.4–0.6 GB of memory and about a second of CPU per
/// retriever before the encoder truncated it. Each retriever's configuration has a
/// `max_query_bytes` field to raise or lower it.
pub const DEFAULT_MAX_QUERY_BYTES: usize = 32 * 1024;

/// Refuse a query longer than `max_bytes` bytes (UTF-8) with [`Error::InvalidInput`] at
/// `"query"`; the message says the query's length and the limit. Cheap (it reads the
/// length only), so retrievers call it before any other work on the query.
///
/// ```
/// use lprag_core::{check_query_len, DEFAULT_MAX_QUERY_BYTES};
/// assert!(check_query_len("capital of Japan", DEFAULT_MAX_QUERY_BYTES).is_ok());
/// let err = check_query_len(&"x".repeat(11), 10).unwrap_err().to_string();
/// assert!(err.contains("11 bytes") && err.contains("limit of 10 bytes"), "{err}");
/// ```
pub fn check_query_len(query: &str, max_bytes: usize) -> Result<()> {
    if query.len() > max_bytes {
        return Err(Error::invalid(
            "query",
            format!(
                "the query is {} bytes long, over the limit of {max_bytes} bytes \
                 (max_query_bytes in the retriever's configuration)",
                query.len()
            ),
        ));
    }
    Ok(())
}

/// [`check_query_len`], then refuse a query that is empty or whitespace, with
/// [`Error::InvalidInput`] at `"query"`.
///
/// ```
/// use lprag_core::{check_query, DEFAULT_MAX_QUERY_BYTES};
/// assert!(check_query("capital of Japan", DEFAULT_MAX_QUERY_BYTES).is_ok());
/// let err = check_query(" \n", DEFAULT_MAX_QUERY_BYTES).unwrap_err().to_string();
/// assert!(err.contains("query") && err.contains("empty"), "{err}");
/// ```
pub fn check_query(query: &str, max_bytes: usize) -> Result<()> {
    check_query_len(query, max_bytes)?;
    if query.trim().is_empty() {
        return Err(Error::invalid("query", "empty or whitespace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_at_the_limit_passes_and_one_byte_more_is_refused() {
        let at = "é".repeat(DEFAULT_MAX_QUERY_BYTES / 2);
        assert_eq!(at.len(), DEFAULT_MAX_QUERY_BYTES);
        assert!(check_query_len(&at, DEFAULT_MAX_QUERY_BYTES).is_ok());
        let over = format!("{at}x");
        let err = check_query_len(&over, DEFAULT_MAX_QUERY_BYTES).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { location, .. } if location == "query"),
            "{err}"
        );
        assert!(err.to_string().contains("32769 bytes"), "{err}");
    }
}
