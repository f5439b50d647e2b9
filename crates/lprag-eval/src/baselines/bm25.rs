//! Okapi BM25 as a retriever over [`lprag_text::Bm25Index`], scored exactly as
//! `rank_bm25.BM25Okapi`.

use async_trait::async_trait;
use lprag_core::{Chunk, Document, Result, Retriever, ScoredChunk, Selection, SparseIndex};
use lprag_text::Bm25Index;
pub use lprag_text::{bm25_tokens, Bm25Config};

use super::{check_chunks, passage_chunks, select};

/// Okapi BM25 over an in-memory inverted index, scoring exactly like the Python package
/// `rank_bm25` (`BM25Okapi`, k1 = 1.5, b = 0.75, ε = 0.25).
///
/// For a query of tokens `q₁ … qₘ` (repeats count again, as in rank_bm25) the score of
/// chunk `d` is
///
/// ```text
/// Σᵢ idf(qᵢ) · tf(qᵢ, d)·(k1 + 1) / (tf(qᵢ, d) + k1·(1 − b + b·|d| / avgdl))
/// idf(t) = ln(N − n(t) + 0.5) − ln(n(t) + 0.5)
/// ```
///
/// with `N` chunks, `n(t)` chunks containing `t`, `|d|` the chunk's token count and
/// `avgdl` the mean count. Terms with a negative IDF (in more than half the chunks) get
/// `ε · mean IDF` instead, as rank_bm25 does; query terms absent from the corpus add
/// nothing. Arithmetic is in `f64` in rank_bm25's order of operations, so scores (and
/// therefore rankings) agree with it to the last bit on the same tokens. Tokens come from
/// [`bm25_tokens`] applied to [`Chunk::embedding_text`] (`title + "\n" + text`).
///
/// # Why not tantivy?
///
/// tantivy is a fine search engine, but the wrong tool for a reference baseline:
/// - **Its scores differ from the reference.** tantivy implements Lucene's BM25: IDF
///   `ln(1 + (N − n + 0.5)/(n + 0.5))` (never negative, no ε floor), and document
///   lengths stored as one-byte quantised field norms. Rankings then differ from
///   rank_bm25, which is what the Python reference figures (and most RAG papers' "BM25"
///   rows) use; this implementation reproduces them exactly.
/// - **Its machinery buys nothing here.** Benchmark corpora are 10³–10⁵ passages held in
///   memory; a plain inverted index scores a query in microseconds to a millisecond, with
///   no schema, index writer, segments, commits or directory to manage.
/// - **Weight.** tantivy adds dozens of crates to the build of a crate that otherwise
///   needs only `lprag-core`; this file is ~150 lines and easy to audit against the
///   formula above.
///
/// For corpora that do not fit in memory, or for phrase queries and incremental updates,
/// use tantivy behind your own [`Retriever`] implementation.
#[derive(Debug, Clone)]
pub struct Bm25Retriever {
    chunks: Vec<Chunk>,
    index: Bm25Index,
}

impl Bm25Retriever {
    /// Index whole passages (one chunk per document, see [`passage_chunks`]).
    pub fn build(docs: &[Document], config: Bm25Config) -> Result<Self> {
        Self::from_chunks(passage_chunks(docs)?, config)
    }

    /// Index the given chunks (ids must be their positions).
    pub fn from_chunks(chunks: Vec<Chunk>, config: Bm25Config) -> Result<Self> {
        config.validate()?;
        check_chunks(&chunks, "bm25")?;
        let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
        let index = Bm25Index::fit(&texts, config)?;
        Ok(Self { chunks, index })
    }

    /// The parameters in use.
    pub fn config(&self) -> &Bm25Config {
        self.index.config()
    }

    /// The fitted index (a [`lprag_core::SparseIndex`]).
    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    /// Number of distinct terms in the index.
    pub fn vocabulary_size(&self) -> usize {
        self.index.vocabulary_size()
    }

    /// The (floored) IDF of a term, if it occurs in the corpus. The term is used as given
    /// (pass a token of [`bm25_tokens`]).
    pub fn idf(&self, term: &str) -> Option<f64> {
        self.index.idf(term)
    }

    /// The BM25 score of `query` against every chunk, in chunk order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        self.index.scores(query)
    }
}

#[async_trait]
impl Retriever for Bm25Retriever {
    fn name(&self) -> &str {
        "bm25"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
        lprag_core::check_query_len(query, lprag_core::DEFAULT_MAX_QUERY_BYTES)?;
        let scores = self.scores(query);
        Ok(select(&scores, selection)?
            .into_iter()
            .map(|(i, s)| ScoredChunk {
                chunk: self.chunks[i].clone(),
                score: s as f32,
            })
            .collect())
    }

    fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<Document> {
        vec![
            Document::new("0", "", "cat sat"),
            Document::new("1", "", "Cat cat dog."),
            Document::new("2", "", "bird"),
        ]
    }

    #[tokio::test]
    async fn ranks_by_the_core_index_scores() {
        let r = Bm25Retriever::build(&corpus(), Bm25Config::default()).unwrap();
        // The scores are the core index's (hand-computed in lprag_core::sparse's tests).
        assert_eq!(r.scores("cat dog"), r.index().scores("cat dog"));
        assert!(r.idf("cat").is_some());
        assert_eq!(r.vocabulary_size(), 4);
        let hits = r.retrieve("cat dog", Selection::TopK(3)).await.unwrap();
        let ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
        assert_eq!(ids, vec![1, 0, 2]);
        assert_eq!(r.name(), "bm25");
    }

    #[test]
    fn titles_are_indexed_and_config_checked() {
        // (with N = 2, a term in one chunk has idf ln(1.5) − ln(1.5) = 0: use three)
        let docs = vec![
            Document::new("0", "Zebra", "stripes"),
            Document::new("1", "", "horse"),
            Document::new("2", "", "pony"),
        ];
        let r = Bm25Retriever::build(&docs, Bm25Config::default()).unwrap();
        assert!(r.scores("zebra")[0] > 0.0);
        let bad = Bm25Config {
            b: 1.5,
            ..Bm25Config::default()
        };
        assert!(Bm25Retriever::build(&docs, bad).is_err());
        assert!(Bm25Retriever::build(&[], Bm25Config::default()).is_err());
    }
}
