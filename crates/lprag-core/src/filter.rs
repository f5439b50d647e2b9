//! Metadata filters for retrieval: which chunks a query may return.
//!
//! A [`Filter`] is a small boolean expression over a chunk's [`Chunk::metadata`] and its
//! source document, evaluated before ranking (see [`crate::Retriever::retrieve_filtered`]).
//! It is plain data (serde), so it can arrive in a JSON request.
//!
//! ```
//! use lprag_core::Filter;
//! let f = Filter::eq("lang", "en").and(Filter::any_of("year", ["2023", "2024"]));
//! assert!(f.validate().is_ok());
//! ```

use serde::{Deserialize, Serialize};

use crate::{Chunk, Error, Result};

/// Deepest nesting [`Filter::validate`] accepts (a filter read from a request cannot
/// recurse the evaluator into a stack overflow).
pub const MAX_FILTER_DEPTH: usize = 32;

/// Which chunks a query may return: a boolean expression over metadata and document ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// Every chunk.
    All,
    /// The metadata value under `key` equals `value`.
    Eq {
        /// Metadata key.
        key: String,
        /// Required value.
        value: String,
    },
    /// The metadata value under `key` is one of `values` (none matches an empty list).
    In {
        /// Metadata key.
        key: String,
        /// Admitted values.
        values: Vec<String>,
    },
    /// The chunk's metadata has `key`, with any value.
    Exists {
        /// Metadata key.
        key: String,
    },
    /// The chunk comes from one of these documents ([`crate::Provenance::document_id`]).
    Documents(Vec<String>),
    /// The inner filter does not match.
    Not(Box<Filter>),
    /// Every inner filter matches (an empty list matches everything).
    And(Vec<Filter>),
    /// At least one inner filter matches (an empty list matches nothing).
    Or(Vec<Filter>),
}

impl Filter {
    /// `metadata[key] == value`.
    pub fn eq(key: impl Into<String>, value: impl Into<String>) -> Self {
        Filter::Eq {
            key: key.into(),
            value: value.into(),
        }
    }

    /// `metadata[key]` is one of `values`.
    pub fn any_of<I, S>(key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Filter::In {
            key: key.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// The metadata has `key`.
    pub fn exists(key: impl Into<String>) -> Self {
        Filter::Exists { key: key.into() }
    }

    /// Chunks of these documents only.
    pub fn documents<I, S>(ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Filter::Documents(ids.into_iter().map(Into::into).collect())
    }

    /// Both `self` and `other`.
    pub fn and(self, other: Filter) -> Self {
        match self {
            Filter::And(mut all) => {
                all.push(other);
                Filter::And(all)
            }
            first => Filter::And(vec![first, other]),
        }
    }

    /// `self` or `other`.
    pub fn or(self, other: Filter) -> Self {
        match self {
            Filter::Or(mut any) => {
                any.push(other);
                Filter::Or(any)
            }
            first => Filter::Or(vec![first, other]),
        }
    }

    /// Everything `self` rejects.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        Filter::Not(Box::new(self))
    }

    /// Whether `chunk` passes.
    pub fn matches(&self, chunk: &Chunk) -> bool {
        match self {
            Filter::All => true,
            Filter::Eq { key, value } => chunk.metadata.get(key) == Some(value),
            Filter::In { key, values } => chunk
                .metadata
                .get(key)
                .is_some_and(|v| values.iter().any(|x| x == v)),
            Filter::Exists { key } => chunk.metadata.contains_key(key),
            Filter::Documents(ids) => ids.contains(&chunk.provenance.document_id),
            Filter::Not(f) => !f.matches(chunk),
            Filter::And(all) => all.iter().all(|f| f.matches(chunk)),
            Filter::Or(any) => any.iter().any(|f| f.matches(chunk)),
        }
    }

    /// Whether the filter admits every chunk without looking at it ([`Filter::All`], or
    /// an `And` of such filters).
    pub fn is_all(&self) -> bool {
        match self {
            Filter::All => true,
            Filter::And(all) => all.iter().all(Filter::is_all),
            _ => false,
        }
    }

    /// Check the filter's shape: nesting at most [`MAX_FILTER_DEPTH`], no empty key.
    pub fn validate(&self) -> Result<()> {
        self.check(1)
    }

    fn check(&self, depth: usize) -> Result<()> {
        if depth > MAX_FILTER_DEPTH {
            return Err(Error::invalid(
                "filter",
                format!("nested deeper than {MAX_FILTER_DEPTH} levels"),
            ));
        }
        match self {
            Filter::Eq { key, .. } | Filter::In { key, .. } | Filter::Exists { key }
                if key.is_empty() =>
            {
                Err(Error::invalid("filter", "a metadata key is empty"))
            }
            Filter::Not(f) => f.check(depth + 1),
            Filter::And(fs) | Filter::Or(fs) => fs.iter().try_for_each(|f| f.check(depth + 1)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Provenance;

    fn chunk(doc: &str, meta: &[(&str, &str)]) -> Chunk {
        let mut c = Chunk::new(
            0,
            "text",
            Provenance {
                document_id: doc.into(),
                title: String::new(),
                span: 0..4,
            },
        );
        c.metadata = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c
    }

    #[test]
    fn each_rule_matches_what_it_says() {
        let en = chunk("d1", &[("lang", "en"), ("year", "2024")]);
        let de = chunk("d2", &[("lang", "de")]);
        let bare = chunk("d3", &[]);
        let cases = [
            (Filter::All, [true, true, true]),
            (Filter::eq("lang", "en"), [true, false, false]),
            (Filter::any_of("lang", ["de", "fr"]), [false, true, false]),
            (
                Filter::any_of("lang", Vec::<String>::new()),
                [false, false, false],
            ),
            (Filter::exists("year"), [true, false, false]),
            (Filter::documents(["d2", "d3"]), [false, true, true]),
            (Filter::eq("lang", "en").not(), [false, true, true]),
            (
                Filter::exists("lang").and(Filter::eq("year", "2024")),
                [true, false, false],
            ),
            (
                Filter::eq("lang", "de").or(Filter::documents(["d3"])),
                [false, true, true],
            ),
            (Filter::And(vec![]), [true, true, true]),
            (Filter::Or(vec![]), [false, false, false]),
        ];
        for (f, want) in cases {
            let got = [f.matches(&en), f.matches(&de), f.matches(&bare)];
            assert_eq!(got, want, "{f:?}");
        }
    }

    #[test]
    fn bad_shapes_are_refused_with_the_reason() {
        let err = Filter::eq("", "x").validate().unwrap_err().to_string();
        assert!(err.contains("key is empty"), "{err}");
        let mut deep = Filter::All;
        for _ in 0..MAX_FILTER_DEPTH {
            deep = deep.not();
        }
        let err = deep.validate().unwrap_err().to_string();
        assert!(err.contains("nested deeper"), "{err}");
        assert!(Filter::eq("a", "b").not().validate().is_ok());
    }

    #[test]
    fn filters_round_trip_through_json() {
        let f = Filter::eq("lang", "en").and(Filter::documents(["d1"]).not());
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<Filter>(&json).unwrap(), f);
        assert!(json.contains("\"eq\""), "{json}");
        assert!(Filter::And(vec![Filter::All]).is_all());
        assert!(!Filter::eq("a", "b").is_all());
    }
}
