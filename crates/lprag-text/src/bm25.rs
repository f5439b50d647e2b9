//! Okapi BM25 ([`Bm25`], [`Bm25Index`]), scored exactly as the Python package `rank_bm25`:
//! the offline implementation of lprag-core's [`SparseEncoder`] / [`SparseIndex`].

use std::collections::HashMap;

use lprag_core::{Error, Result, SparseEncoder, SparseIndex, SparseVector};
use serde::{Deserialize, Serialize};

/// Parameters of Okapi BM25.
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
/// use lprag_text::bm25_tokens;
/// assert_eq!(bm25_tokens("Hello, World! It's 3.5 km_h"), ["hello", "world", "it", "s", "3", "5", "km_h"]);
/// ```
pub fn bm25_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Okapi BM25 as a [`SparseEncoder`]: `Bm25::default().fit(texts)` gives a [`Bm25Index`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bm25 {
    /// The parameters.
    pub config: Bm25Config,
}

impl Bm25 {
    /// BM25 with these parameters.
    pub fn new(config: Bm25Config) -> Self {
        Self { config }
    }
}

impl SparseEncoder for Bm25 {
    fn name(&self) -> &str {
        "bm25"
    }

    fn fit(&self, texts: &[String]) -> Result<Box<dyn SparseIndex>> {
        Ok(Box::new(Bm25Index::fit(texts, self.config)?))
    }
}

/// A fitted Okapi BM25 index (an in-memory inverted index), scoring exactly like
/// `rank_bm25.BM25Okapi` (k1 = 1.5, b = 0.75, ε = 0.25 by default).
///
/// For a query of tokens `q₁ … qₘ` (repeats count again, as in rank_bm25) the score of
/// text `d` is
///
/// ```text
/// Σᵢ idf(qᵢ) · tf(qᵢ, d)·(k1 + 1) / (tf(qᵢ, d) + k1·(1 − b + b·|d| / avgdl))
/// idf(t) = ln(N − n(t) + 0.5) − ln(n(t) + 0.5)
/// ```
///
/// with `N` texts, `n(t)` texts containing `t`, `|d|` the text's token count and `avgdl`
/// the mean count. Terms with a negative IDF (in more than half the texts) get
/// `ε · mean IDF` instead, as rank_bm25 does; query terms absent from the corpus add
/// nothing. Arithmetic is in `f64` in rank_bm25's order of operations, so scores (and
/// therefore rankings) agree with it to the last bit on the same tokens ([`bm25_tokens`]).
///
/// A text's [`SparseIndex::vector`] holds, per term, the weight a one-token query of that
/// term would score: `idf · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d|/avgdl))`.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    config: Bm25Config,
    len: usize,
    terms: HashMap<String, usize>,
    /// Per term: (text, weight), texts ascending.
    postings: Vec<Vec<(u32, f64)>>,
    idf: Vec<f64>,
}

impl Bm25Index {
    /// Fit on `texts` (tokenised with [`bm25_tokens`]). Fails on an empty corpus, bad
    /// parameters or more than 2³² − 1 texts.
    pub fn fit(texts: &[String], config: Bm25Config) -> Result<Self> {
        config.validate()?;
        if texts.is_empty() {
            return Err(Error::EmptyCorpus("bm25: no texts to index".into()));
        }
        if texts.len() > u32::MAX as usize {
            return Err(Error::invalid("bm25", "more than 2^32 - 1 texts"));
        }
        let TermCounts {
            terms,
            tf_postings,
            doc_len,
            total_len,
        } = count_terms(texts);
        let n = texts.len() as f64;
        let idf = idf_weights(&tf_postings, n, config.epsilon);
        let avgdl = total_len as f64 / n;
        let norm = length_norms(&doc_len, avgdl, &config);
        let k1 = config.k1;
        let postings = tf_postings
            .iter()
            .zip(&idf)
            .map(|(list, &idf)| {
                list.iter()
                    .map(|&(d, tf)| {
                        let tf = f64::from(tf);
                        (d, idf * (tf * (k1 + 1.0) / (tf + norm[d as usize])))
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            config,
            len: texts.len(),
            terms,
            postings,
            idf,
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
}

/// What [`count_terms`] counts.
struct TermCounts {
    /// Term → id, ids in order of first appearance.
    terms: HashMap<String, usize>,
    /// Per term id: (text, term frequency), texts ascending.
    tf_postings: Vec<Vec<(u32, u32)>>,
    /// Per text: its length in tokens.
    doc_len: Vec<usize>,
    /// The sum of `doc_len`.
    total_len: u64,
}

/// The terms of `texts` (tokenised with [`bm25_tokens`]) and their frequencies.
fn count_terms(texts: &[String]) -> TermCounts {
    let mut terms: HashMap<String, usize> = HashMap::new();
    let mut tf_postings: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut doc_len = Vec::with_capacity(texts.len());
    let mut total_len: u64 = 0;
    for (d, text) in texts.iter().enumerate() {
        let tokens = bm25_tokens(text);
        doc_len.push(tokens.len());
        total_len += tokens.len() as u64;
        for t in tokens {
            let next = terms.len();
            let id = *terms.entry(t).or_insert(next);
            if id == tf_postings.len() {
                tf_postings.push(Vec::new());
            }
            let list = &mut tf_postings[id];
            match list.last_mut() {
                Some((doc, tf)) if *doc == d as u32 => *tf += 1,
                _ => list.push((d as u32, 1)),
            }
        }
    }
    TermCounts {
        terms,
        tf_postings,
        doc_len,
        total_len,
    }
}

/// The IDF of each term of a corpus of `n` texts, negative ones floored at `epsilon` times
/// the mean IDF (as rank_bm25's Okapi BM25).
fn idf_weights(tf_postings: &[Vec<(u32, u32)>], n: f64, epsilon: f64) -> Vec<f64> {
    // Term ids are in order of first appearance, the order in which rank_bm25 sums
    // IDFs, so the mean (and the ε floor) agree to the last bit.
    let mut idf: Vec<f64> = tf_postings
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
        let floor = epsilon * (sum / idf.len() as f64);
        for v in idf.iter_mut().filter(|v| **v < 0.0) {
            *v = floor;
        }
    }
    idf
}

/// Per text: `k1 · (1 − b + b · length / avgdl)`, the length normalisation of BM25.
fn length_norms(doc_len: &[usize], avgdl: f64, config: &Bm25Config) -> Vec<f64> {
    doc_len
        .iter()
        .map(|&l| {
            let ratio = if avgdl > 0.0 {
                config.b * l as f64 / avgdl
            } else {
                0.0
            };
            config.k1 * (1.0 - config.b + ratio)
        })
        .collect()
}

impl SparseIndex for Bm25Index {
    fn len(&self) -> usize {
        self.len
    }

    fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0f64; self.len];
        for token in bm25_tokens(query) {
            let Some(&t) = self.terms.get(&token) else {
                continue;
            };
            for &(d, w) in &self.postings[t] {
                scores[d as usize] += w;
            }
        }
        scores
    }

    fn vector(&self, i: usize) -> SparseVector {
        // Term ids in first-appearance order; a text's terms are found by scanning
        // postings, which is fine for the one-off uses (graph building).
        let mut entries: Vec<(u32, f32)> = Vec::new();
        for (t, list) in self.postings.iter().enumerate() {
            if let Ok(p) = list.binary_search_by_key(&(i as u32), |&(d, _)| d) {
                entries.push((t as u32, list[p].1 as f32));
            }
        }
        SparseVector { entries }
    }

    fn vectors(&self) -> Vec<SparseVector> {
        let mut out = vec![SparseVector::default(); self.len];
        for (t, list) in self.postings.iter().enumerate() {
            for &(d, w) in list {
                out[d as usize].entries.push((t as u32, w as f32));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        vec!["cat sat".into(), "Cat cat dog.".into(), "bird".into()]
    }

    #[test]
    fn idf_with_epsilon_floor_hand_computed() {
        let r = Bm25Index::fit(&corpus(), Bm25Config::default()).unwrap();
        // N = 3; df(cat) = 2 → ln(1.5) − ln(2.5) < 0; df(sat|dog|bird) = 1 → ln(2.5) − ln(1.5)
        let pos = 2.5f64.ln() - 1.5f64.ln();
        let mean = (-pos + 3.0 * pos) / 4.0;
        assert!((r.idf("sat").unwrap() - pos).abs() < 1e-12);
        assert!((r.idf("cat").unwrap() - 0.25 * mean).abs() < 1e-12);
        assert_eq!(r.idf("zebra"), None);
        assert_eq!(r.vocabulary_size(), 4);
    }

    #[test]
    fn scores_and_vectors_hand_computed() {
        let r = Bm25Index::fit(&corpus(), Bm25Config::default()).unwrap();
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

        // Vectors: text 1 = {cat: eps·5/4.0625, dog: pos·2.5/3.0625}; term ids by first
        // appearance: cat 0, sat 1, dog 2, bird 3.
        let v1 = r.vector(1);
        assert_eq!(v1.entries.len(), 2);
        assert_eq!(v1.entries[0].0, 0);
        assert!((f64::from(v1.entries[0].1) - eps * 5.0 / 4.0625).abs() < 1e-6);
        assert_eq!(v1.entries[1].0, 2);
        assert_eq!(r.vectors()[1], v1);
        // A one-token query scores the text's weight for that token.
        assert!((r.scores("dog")[1] - f64::from(v1.entries[1].1)).abs() < 1e-6);
        // Texts 0 and 2 share no term.
        assert_eq!(r.vector(0).cosine(&r.vector(2)), 0.0);
        assert!(r.vector(0).cosine(&r.vector(1)) > 0.0);
    }

    #[test]
    fn config_and_corpus_checked() {
        let bad = Bm25Config {
            b: 1.5,
            ..Bm25Config::default()
        };
        assert!(Bm25Index::fit(&corpus(), bad).is_err());
        assert!(matches!(
            Bm25::default().fit(&[]),
            Err(Error::EmptyCorpus(_))
        ));
        let idx = Bm25::default().fit(&corpus()).unwrap();
        assert_eq!(idx.len(), 3);
        assert!(!idx.is_empty());
    }
}
