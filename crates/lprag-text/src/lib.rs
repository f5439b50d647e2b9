//! # lprag-text
//!
//! The offline text components of lprag: implementations of lprag-core's traits that need
//! no LLM and no downloaded weights, deterministic and fast. They are the defaults of every
//! retriever and the fallbacks of the LLM-backed components in `lprag-llm`.
//!
//! - Chunkers: [`SentenceChunker`] (atomic statements), [`PassageChunker`] (one chunk per
//!   document), [`TokenChunker`] and [`BoundedPassageChunker`] (passages that fit an
//!   encoder's input, split with `text-splitter`).
//! - [`HeuristicQueryGenerator`]: wh-, cloze- and multi-hop questions per batch.
//! - [`HashingEncoder`]: hashed word and character n-grams, optional IDF.
//! - [`Bm25`] / [`Bm25Index`]: Okapi BM25 behind [`lprag_core::SparseEncoder`].
//! - [`CooccurrenceExtractor`]: entities and co-occurrence triples behind
//!   [`lprag_core::TripleExtractor`].
//!
//! ```
//! use lprag_core::{Chunker, Document};
//! use lprag_text::SentenceChunker;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let docs = vec![Document::new("d1", "Paris", "Paris is the capital of France. It has 2.1 million people.")];
//! let chunks = SentenceChunker::default().chunk(&docs).await.unwrap();
//! assert_eq!(chunks.len(), 2);
//! assert_eq!(chunks[1].provenance.document_id, "d1");
//! # });
//! ```
#![warn(missing_docs)]

pub mod bm25;
mod chunker;
pub mod cooccurrence;
mod hashing;
mod markdown;
mod querygen;
mod token;

pub use bm25::{bm25_tokens, Bm25, Bm25Config, Bm25Index};
pub use chunker::{PassageChunker, SentenceChunker, SentenceChunkerConfig};
pub use cooccurrence::{CooccurrenceConfig, CooccurrenceExtractor};
pub use hashing::{HashingEncoder, HashingEncoderConfig, HashingIdf};
pub use markdown::{MarkdownChunker, HEADING_KEY};
pub use querygen::{HeuristicQueryGenerator, HeuristicQueryGeneratorConfig};
pub use token::{
    over_long, split_to_fit, split_to_fit_async, split_to_fit_with, truncation_warning,
    BoundedPassageChunker, TokenChunker, BOUNDED_PASSAGES,
};

/// Test support shared by this crate's unit tests.
#[cfg(test)]
mod test_support {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Await `work` while another task of the same (current-thread) runtime counts its
    /// turns; the result and how many turns that task got meanwhile (0 when `work` held
    /// the worker the whole time).
    pub(crate) async fn turns_beside<T>(work: impl std::future::Future<Output = T>) -> (T, usize) {
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                t.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        });
        let before = ticks.load(Ordering::SeqCst);
        let out = work.await;
        let during = ticks.load(Ordering::SeqCst) - before;
        ticker.abort();
        (out, during)
    }
}
