//! Okapi BM25, scored exactly as `rank_bm25.BM25Okapi`.

use std::collections::HashMap;

use async_trait::async_trait;
use lprag_core::{Chunk, Document, Error, Result, Retriever, ScoredChunk, Selection};
use serde::{Deserialize, Serialize};

use super::{check_chunks, passage_chunks, select};

/// Parameters of [`Bm25Retriever`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bm25Config {
    /// Term-frequency saturation. Default 1.5.
    pub k1: f64,
    /// Length normalisation, in `[0, 1]`. Default 0.75.
    pub b: f64,
    /// Floor for negative IDFs, as a fraction of the average IDF (rank_bm25's
    /// `epsilon`). Default 0.25.
    pub epsilon: f64,
}

impl Default for Bm25Config {
    fn default() -> Self {
        Self {
            k1: 1.5,
            b: 0.75,
            epsilon: 0.25,
        }
    }
}

impl Bm25Config {
    /// Check the numbers: `k1 ≥ 0`, `0 ≤ b ≤ 1`, all finite.
    pub fn validate(&self) -> Result<()> {
        if !self.k1.is_finite() || self.k1 < 0.0 {
            return Err(Error::invalid(
                "Bm25Config.k1",
                format!("must be finite and >= 0, got {}", self.k1),
            ));
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(Error::invalid(
                "Bm25Config.b",
                format!("must be in [0, 1], got {}", self.b),
            ));
        }
        if !self.epsilon.is_finite() {
            return Err(Error::invalid("Bm25Config.epsilon", "must be finite"));
        }
        Ok(())
    }
}

/// The BM25 tokeniser: the text lower-cased, then every maximal run of word characters
/// (Unicode alphanumerics and `_`), like Python's `re.findall(r"\w+", text.lower())`.
///
/// It differs from Python's `\w` only on rare characters (combining marks that Unicode
/// calls alphabetic, such as some Indic vowel signs, are word characters here).
///
/// ```
/// use lprag_eval::baselines::bm25_tokens;
/// assert_eq!(bm25_tokens("Hello, World! It's 3.5 km_h"), ["hello", "world", "it", "s", "3", "5", "km_h"]);
/// ```
pub fn bm25_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

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
    config: Bm25Config,
    chunks: Vec<Chunk>,
    terms: HashMap<String, usize>,
    /// Per term: (chunk, term frequency), chunks ascending.
    postings: Vec<Vec<(u32, u32)>>,
    idf: Vec<f64>,
    /// Per chunk: `k1 · (1 − b + b·|d|/avgdl)`.
    norm: Vec<f64>,
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
        if chunks.len() > u32::MAX as usize {
            return Err(Error::invalid("bm25", "more than 2^32 - 1 chunks"));
        }
        let mut terms: HashMap<String, usize> = HashMap::new();
        let mut postings: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut doc_len = Vec::with_capacity(chunks.len());
        let mut total_len: u64 = 0;
        for (d, chunk) in chunks.iter().enumerate() {
            let tokens = bm25_tokens(&chunk.embedding_text());
            doc_len.push(tokens.len());
            total_len += tokens.len() as u64;
            for t in tokens {
                let next = terms.len();
                let id = *terms.entry(t).or_insert(next);
                if id == postings.len() {
                    postings.push(Vec::new());
                }
                let list = &mut postings[id];
                match list.last_mut() {
                    Some((doc, tf)) if *doc == d as u32 => *tf += 1,
                    _ => list.push((d as u32, 1)),
                }
            }
        }
        let n = chunks.len() as f64;
        // Term ids are in order of first appearance, the order in which rank_bm25 sums
        // IDFs, so the mean (and the ε floor) agree to the last bit.
        let mut idf: Vec<f64> = postings
            .iter()
            .map(|p| {
                let df = p.len() as f64;
                (n - df + 0.5).ln() - (df + 0.5).ln()
            })
            .collect();
        if !idf.is_empty() {
            let mut sum = 0.0;
            for v in &idf {
                sum += v;
            }
            let floor = config.epsilon * (sum / idf.len() as f64);
            for v in idf.iter_mut().filter(|v| **v < 0.0) {
                *v = floor;
            }
        }
        let avgdl = total_len as f64 / n;
        let norm = doc_len
            .iter()
            .map(|&l| {
                let ratio = if avgdl > 0.0 {
                    config.b * l as f64 / avgdl
                } else {
                    0.0
                };
                config.k1 * (1.0 - config.b + ratio)
            })
            .collect();
        Ok(Self {
            config,
            chunks,
            terms,
            postings,
            idf,
            norm,
        })
    }

    /// The parameters in use.
    pub fn config(&self) -> &Bm25Config {
        &self.config
    }

    /// Number of distinct terms in the index.
    pub fn vocabulary_size(&self) -> usize {
        self.terms.len()
    }

    /// The (floored) IDF of a term, if it occurs in the corpus. The term is used as given
    /// (pass a token of [`bm25_tokens`]).
    pub fn idf(&self, term: &str) -> Option<f64> {
        self.terms.get(term).map(|&t| self.idf[t])
    }

    /// The BM25 score of `query` against every chunk, in chunk order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let k1 = self.config.k1;
        let mut scores = vec![0.0f64; self.chunks.len()];
        for token in bm25_tokens(query) {
            let Some(&t) = self.terms.get(&token) else {
                continue;
            };
            let idf = self.idf[t];
            for &(d, tf) in &self.postings[t] {
                let tf = f64::from(tf);
                scores[d as usize] += idf * (tf * (k1 + 1.0) / (tf + self.norm[d as usize]));
            }
        }
        scores
    }
}

#[async_trait]
impl Retriever for Bm25Retriever {
    fn name(&self) -> &str {
        "bm25"
    }

    async fn retrieve(&self, query: &str, selection: Selection) -> Result<Vec<ScoredChunk>> {
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

    #[test]
    fn idf_with_epsilon_floor_hand_computed() {
        let r = Bm25Retriever::build(&corpus(), Bm25Config::default()).unwrap();
        // N = 3; df(cat) = 2 → ln(1.5) − ln(2.5) < 0; df(sat|dog|bird) = 1 → ln(2.5) − ln(1.5)
        let pos = 2.5f64.ln() - 1.5f64.ln();
        let mean = (-pos + 3.0 * pos) / 4.0;
        assert!((r.idf("sat").unwrap() - pos).abs() < 1e-12);
        assert!((r.idf("cat").unwrap() - 0.25 * mean).abs() < 1e-12);
        assert_eq!(r.idf("zebra"), None);
        assert_eq!(r.vocabulary_size(), 4);
    }

    #[tokio::test]
    async fn scores_hand_computed() {
        let r = Bm25Retriever::build(&corpus(), Bm25Config::default()).unwrap();
        let pos = 2.5f64.ln() - 1.5f64.ln();
        let eps = 0.25 * (2.0 * pos / 4.0);
        // avgdl = (2 + 3 + 1) / 3 = 2
        // doc 0: |d| = 2 → norm = 1.5·(0.25 + 0.75) = 1.5; cat tf 1: eps · 2.5 / 2.5
        let s0 = eps;
        // doc 1: |d| = 3 → norm = 1.5·(0.25 + 1.125) = 2.0625
        // cat tf 2: eps · 5 / 4.0625; dog tf 1: pos · 2.5 / 3.0625
        let s1 = eps * 5.0 / 4.0625 + pos * 2.5 / 3.0625;
        let s = r.scores("cat dog");
        assert!((s[0] - s0).abs() < 1e-12, "{s:?}");
        assert!((s[1] - s1).abs() < 1e-12, "{s:?}");
        assert_eq!(s[2], 0.0);
        // repeated query tokens count twice (rank_bm25 behaviour)
        let twice = r.scores("dog dog");
        assert!((twice[1] - 2.0 * pos * 2.5 / 3.0625).abs() < 1e-12);
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
