//! Knowledge-graph triples from chunks, for KG-indexed retrievers (GFM-RAG).
//!
//! [`TripleExtractor`] is the contract: one [`Extraction`] (entities and
//! `(subject, relation, object)` triples) per chunk. lprag ships two implementations: an
//! LLM with the OpenIE prompt (`lprag_llm::LlmTripleExtractor`) and the offline
//! `lprag_text::CooccurrenceExtractor`, which needs no model.
//!
//! - **entities** are capitalised spans (`Bob Dylan`, `University of Minnesota`, with
//!   lower-case connectors such as `of`/`the`/`de` allowed inside a span, a leading
//!   article dropped), four-digit years, and the chunk's title;
//! - **triples** are `(a, "co-occurs with", b)` for entities `a` before `b` in the same
//!   sentence, and `(title, "mentions", e)` for every other entity of the chunk.
//!
//! It is a stand-in for OpenIE, not a parser: relations carry no meaning beyond
//! co-occurrence, and lower-case concepts ("jazz", "piano") are not entities.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Chunk, Result};

/// One `(subject, relation, object)` fact.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Triple {
    /// Head entity.
    pub subject: String,
    /// Relation phrase (`"born in"`, `"co-occurs with"`).
    pub relation: String,
    /// Tail entity.
    pub object: String,
}

impl Triple {
    /// A triple from three phrases.
    pub fn new(
        subject: impl Into<String>,
        relation: impl Into<String>,
        object: impl Into<String>,
    ) -> Self {
        Self {
            subject: subject.into(),
            relation: relation.into(),
            object: object.into(),
        }
    }
}

/// What an extractor found in one chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extraction {
    /// Entities mentioned in the chunk (the triples' subjects and objects count as
    /// mentioned too, whether or not they are listed here).
    pub entities: Vec<String>,
    /// Facts stated in the chunk.
    pub triples: Vec<Triple>,
}

/// Reads entities and triples out of chunks (OpenIE).
#[async_trait]
pub trait TripleExtractor: Send + Sync {
    /// A short name for logs and saved manifests.
    fn name(&self) -> &str;

    /// One extraction per chunk, in order.
    async fn extract(&self, chunks: &[Chunk]) -> Result<Vec<Extraction>>;
}
