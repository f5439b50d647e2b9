//! A feature-hashing text encoder: the offline default `Encoder` (see [`HashingEncoder`]).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

use lprag_core::{Embeddings, Encoder, Error, Result};

/// Configuration of [`HashingEncoder`].
///
/// The defaults were chosen by flat-cosine passage retrieval on a 100-question MuSiQue
/// sample; they are sensible, not tuned to the digit (`dim` 4096 gains about 2 points of
/// recall at four times the memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashingEncoderConfig {
    /// Width of every vector (number of hash buckets). Default 1024; larger values mean
    /// fewer collisions and slightly better recall at proportional memory cost.
    pub dim: usize,
    /// Weight of the word-unigram block. Default 1.0.
    pub word_weight: f32,
    /// Weight of the character n-gram block. Default 1.0.
    pub char_weight: f32,
    /// Smallest character n-gram length. Default 3.
    pub char_ngram_min: usize,
    /// Largest character n-gram length (inclusive). Default 5.
    pub char_ngram_max: usize,
    /// Drop a fixed list of English function words before making features. Default true.
    pub stop_words: bool,
    /// Seed mixed into every hash; different seeds give different (equally good) bucket
    /// assignments. Default 0.
    pub seed: u64,
}

impl Default for HashingEncoderConfig {
    fn default() -> Self {
        Self {
            dim: 1024,
            word_weight: 1.0,
            char_weight: 1.0,
            char_ngram_min: 3,
            char_ngram_max: 5,
            stop_words: true,
            seed: 0,
        }
    }
}

impl HashingEncoderConfig {
    /// Check the numbers: `dim ≥ 1`, `1 ≤ char_ngram_min ≤ char_ngram_max`, weights finite
    /// and non-negative, not both zero.
    pub fn validate(&self) -> Result<()> {
        if self.dim == 0 {
            return Err(Error::invalid(
                "HashingEncoderConfig.dim",
                "must be at least 1",
            ));
        }
        if self.char_ngram_min == 0 || self.char_ngram_min > self.char_ngram_max {
            return Err(Error::invalid(
                "HashingEncoderConfig.char_ngram_min",
                format!(
                    "need 1 <= char_ngram_min <= char_ngram_max, got {}..={}",
                    self.char_ngram_min, self.char_ngram_max
                ),
            ));
        }
        for (name, w) in [
            ("word_weight", self.word_weight),
            ("char_weight", self.char_weight),
        ] {
            if !w.is_finite() || w < 0.0 {
                return Err(Error::invalid(
                    format!("HashingEncoderConfig.{name}"),
                    format!("must be finite and non-negative, got {w}"),
                ));
            }
        }
        if self.word_weight == 0.0 && self.char_weight == 0.0 {
            return Err(Error::invalid(
                "HashingEncoderConfig.word_weight",
                "word_weight and char_weight are both zero",
            ));
        }
        Ok(())
    }
}

/// Feature-hashed word + character n-gram vectors: the offline default [`Encoder`].
///
/// It needs no weights and no network. It maps a text to a sparse bag of
/// lower-cased words and character n-grams, hashes every feature into a fixed number of
/// signed buckets ("the hashing trick", Weinberger et al. 2009), weights term counts
/// sublinearly and L2-normalises the result, so that the dot product of two rows is their
/// cosine similarity.
///
/// It is a lexical encoder: it matches shared words and word pieces (which makes it robust
/// to inflection and spelling variants) but knows no synonyms. Expect it to trail a trained
/// dense encoder (MiniLM, Contriever) on paraphrased questions; it exists so that every
/// part of lprag runs offline and deterministically.
///
/// **Fit it on your corpus.** [`HashingEncoder::default`] is stateless and weights every
/// feature alike; [`HashingEncoder::fitted`] adds inverse document frequencies counted on
/// the chunk texts ([`HashingIdf`]), which matters far more than any other setting: on a
/// 100-question MuSiQue sample (flat cosine over 1,890 passages) passage Recall@2 / @5 goes
/// from 23.2 / 34.3 (default) to 39.1 / 51.5 (fitted), against 47.2 / 62.2 for
/// all-MiniLM-L6-v2.
///
/// # Features
///
/// * **Words**: the text is split into words with the Unicode word boundaries of
///   UAX #29 (`unicode-segmentation`), each word is further split at internal punctuation
///   (apostrophes, periods, commas, colons), so that tokens are runs of letters, digits,
///   marks and `_`, like the regex `\w+`; tokens are lower-cased with
///   [`str::to_lowercase`].
/// * **Character n-grams**: for every word token `w`, the n-grams of `<w>` (with `<` and
///   `>` marking the word's start and end) for every `n` in
///   `char_ngram_min..=char_ngram_max`, counted in Unicode scalar values.
/// * Optionally ([`HashingEncoderConfig::stop_words`], on by default) a small fixed list
///   of English function words (`the`, `of`, `is`, `what`, ...) is dropped before either
///   kind of feature is made, because without inverse document frequencies they would
///   otherwise dominate every vector.
///
/// # Hashing
///
/// Each feature is hashed with 64-bit FNV-1a over the bytes
/// `seed (8 bytes, little endian) ‖ kind tag (b'w' or b'c') ‖ 0x00 ‖ UTF-8 feature`,
/// followed by the SplitMix64 finaliser. Bucket = `hash % dim`; sign = `+1` when bit 63
/// of the hash is 0, else `-1`. Both functions are written out in this module, so vectors
/// are identical on every platform and Rust version (std's `RandomState` is never used).
/// Lower-casing follows the Unicode tables of the Rust standard library, which change only
/// for newly assigned characters.
///
/// # Weighting
///
/// A feature seen `tf` times weighs `1 + ln(tf)`, times its IDF when the encoder is fitted. The word block and the n-gram block are
/// each L2-normalised, scaled by `word_weight` and `char_weight`, added, and the sum is
/// L2-normalised again.
///
/// A text with no word token (empty, whitespace, punctuation only, or only stop words)
/// becomes the **all-zero vector**; [`lprag_core::cosine`] returns 0 for it, so it matches
/// nothing.
///
///
/// `embed` is CPU-bound: about a few microseconds per short text. Calls with
/// [`HashingEncoder::BLOCKING_FROM_BYTES`] of text or more run on tokio's blocking pool,
/// so the async executor is not stalled; smaller ones run inline. Batches of
/// [`HashingEncoder::PARALLEL_THRESHOLD`] texts or more are spread over the rayon thread
/// pool. [`HashingEncoder::embed_sync`] is the synchronous body, for callers already on a
/// blocking thread.
///
/// ```
/// use lprag_core::{cosine, Encoder};
/// use lprag_text::HashingEncoder;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let enc = HashingEncoder::default();
/// let e = enc
///     .embed(&["Paris is in France".into(), "the capital of France".into(), "".into()])
///     .await
///     .unwrap();
/// assert_eq!(e.dim(), 1024);
/// assert!(cosine(e.row(0), e.row(1)) > 0.0);
/// assert!(e.row(2).iter().all(|&x| x == 0.0)); // no words: the zero vector
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct HashingEncoder {
    /// The configuration; checked by every call to `embed`.
    pub config: HashingEncoderConfig,
    idf: Option<Arc<HashingIdf>>,
}

impl HashingEncoder {
    /// Batches at least this large are encoded in parallel with rayon.
    pub const PARALLEL_THRESHOLD: usize = 64;

    /// From this many bytes of text in one call, [`Encoder::embed`] runs on tokio's
    /// blocking pool instead of the calling async worker (inline when no runtime runs).
    /// Encoding costs about 100 ns a byte (words and 3–5-grams, hashed and counted;
    /// measured in the test profile: 200 bytes 34 µs, 16 KiB 2 ms), so 1 KiB is about the
    /// 100 µs a task should run at most between `.await`s, and many times the cost of the
    /// hand-off (a thread wake-up and one copy of the texts): a typical query (tens to
    /// hundreds of bytes) stays inline, a long text or an indexing batch moves off the
    /// worker.
    pub const BLOCKING_FROM_BYTES: usize = 1024;

    /// An encoder with a checked configuration and no IDF weighting.
    pub fn new(config: HashingEncoderConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self { config, idf: None })
    }

    /// An encoder whose features are weighted by inverse document frequencies counted on
    /// `corpus` (see [`HashingIdf`]). Fit on the chunk texts you will index, then embed
    /// both chunks and queries with the result.
    pub fn fitted(config: HashingEncoderConfig, corpus: &[String]) -> Result<Self> {
        let idf = HashingIdf::fit(&config, corpus)?;
        Ok(Self {
            config,
            idf: Some(Arc::new(idf)),
        })
    }

    /// Use a previously fitted (for example deserialised) IDF table. Fails when the table
    /// was fitted with other feature settings (seed, n-gram range, stop words).
    pub fn with_idf(mut self, idf: HashingIdf) -> Result<Self> {
        idf.check(&self.config)?;
        self.idf = Some(Arc::new(idf));
        Ok(self)
    }

    /// The IDF table in use, if any (serialise it to persist a fitted encoder).
    pub fn idf(&self) -> Option<&HashingIdf> {
        self.idf.as_deref()
    }

    fn check(&self) -> Result<()> {
        self.config.validate()?;
        if let Some(idf) = &self.idf {
            idf.check(&self.config)?;
        }
        Ok(())
    }

    /// Encode one text into a unit vector (or the zero vector when it has no word).
    pub fn encode(&self, text: &str) -> Result<Vec<f32>> {
        self.check()?;
        Ok(encode_one(&self.config, self.idf.as_deref(), text))
    }

    /// The synchronous body of [`Encoder::embed`]: one row per text, in order.
    pub fn embed_sync(&self, texts: &[String]) -> Result<Embeddings> {
        self.check()?;
        let cfg = &self.config;
        let idf = self.idf.as_deref();
        let rows: Vec<Vec<f32>> = if texts.len() >= Self::PARALLEL_THRESHOLD {
            texts.par_iter().map(|t| encode_one(cfg, idf, t)).collect()
        } else {
            texts.iter().map(|t| encode_one(cfg, idf, t)).collect()
        };
        let mut data = Vec::with_capacity(rows.len() * cfg.dim);
        for r in rows {
            data.extend_from_slice(&r);
        }
        Embeddings::new(cfg.dim, data)
    }
}

/// Inverse document frequencies of hashed features, counted on a corpus.
///
/// Without IDF every word counts the same, so frequent content words ("city", "name",
/// "country") drown the rare names a question hinges on. With a table fitted on the chunk
/// texts, a feature that occurs in `df` of `N` texts is weighted by the smoothed IDF
/// `ln((N + 1) / (df + 1)) + 1`; features never seen get `ln(N + 1) + 1`. The table is
/// keyed by the full 64-bit feature hash (before reduction to buckets), so bucket
/// collisions do not mix frequencies. It is plain data: serialise it with serde to keep a
/// fitted encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HashingIdf {
    /// Number of texts the table was fitted on.
    pub num_docs: u64,
    /// `(feature hash, document frequency)`, sorted by hash.
    pub df: Vec<(u64, u32)>,
    /// [`HashingEncoderConfig::seed`] at fitting time.
    pub seed: u64,
    /// [`HashingEncoderConfig::char_ngram_min`] at fitting time.
    pub char_ngram_min: usize,
    /// [`HashingEncoderConfig::char_ngram_max`] at fitting time.
    pub char_ngram_max: usize,
    /// [`HashingEncoderConfig::stop_words`] at fitting time.
    pub stop_words: bool,
}

impl HashingIdf {
    /// Count document frequencies of every word and n-gram feature of `corpus`.
    /// An empty corpus is [`Error::EmptyCorpus`].
    pub fn fit(config: &HashingEncoderConfig, corpus: &[String]) -> Result<Self> {
        Self::fit_iter(config, corpus)
    }

    /// [`HashingIdf::fit`] over texts made as they are read (the embedding texts of a
    /// million chunks, say), 4,096 at a time, so they are never all in memory: the same
    /// table as `fit` gives the same texts in the same order.
    pub fn fit_iter<I, S>(config: &HashingEncoderConfig, texts: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str> + Sync,
    {
        config.validate()?;
        // Blocks of texts, so only one block's texts and feature lists are alive at a time
        // (all of them at once took about 1 GB at 100,000 passages).
        const BLOCK: usize = 4096;
        let mut counts: HashMap<u64, u32> = HashMap::new();
        let mut num_docs = 0u64;
        let mut texts = texts.into_iter().peekable();
        while texts.peek().is_some() {
            let block: Vec<S> = texts.by_ref().take(BLOCK).collect();
            num_docs += block.len() as u64;
            let per_doc: Vec<Vec<u64>> = block
                .par_iter()
                .map(|t| {
                    let (mut f, c) = features(config, t.as_ref());
                    f.extend(c);
                    f.sort_unstable();
                    f.dedup();
                    f
                })
                .collect();
            for f in per_doc {
                for h in f {
                    *counts.entry(h).or_insert(0) += 1;
                }
            }
        }
        if num_docs == 0 {
            return Err(Error::EmptyCorpus("no texts to fit IDF on".into()));
        }
        let mut df: Vec<(u64, u32)> = counts.into_iter().collect();
        df.sort_unstable();
        Ok(Self {
            num_docs,
            df,
            seed: config.seed,
            char_ngram_min: config.char_ngram_min,
            char_ngram_max: config.char_ngram_max,
            stop_words: config.stop_words,
        })
    }

    /// The IDF weight of one feature hash.
    fn weight(&self, h: u64) -> f32 {
        let df = match self.df.binary_search_by_key(&h, |&(k, _)| k) {
            Ok(i) => self.df[i].1,
            Err(_) => 0,
        };
        (((self.num_docs + 1) as f64 / (f64::from(df) + 1.0)).ln() + 1.0) as f32
    }

    fn check(&self, config: &HashingEncoderConfig) -> Result<()> {
        if (
            self.seed,
            self.char_ngram_min,
            self.char_ngram_max,
            self.stop_words,
        ) != (
            config.seed,
            config.char_ngram_min,
            config.char_ngram_max,
            config.stop_words,
        ) {
            return Err(Error::invalid(
                "HashingEncoder idf",
                "IDF table was fitted with another seed, n-gram range or stop-word setting",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Encoder for HashingEncoder {
    /// `"hashing"`. The name does not encode the configuration: indices built with
    /// different seeds or weights are not comparable, so keep the config with the index.
    fn name(&self) -> &str {
        "hashing"
    }

    fn dimension(&self) -> usize {
        self.config.dim
    }

    /// FNV-1a (64-bit) of the configuration and the fitted IDF table, if any: two hashing
    /// encoders agree on it exactly when they embed alike.
    fn fingerprint(&self) -> Option<String> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(serde_json::to_string(&self.config)
            .unwrap_or_default()
            .as_bytes());
        match &self.idf {
            None => eat(b"no-idf"),
            Some(idf) => {
                eat(&idf.num_docs.to_le_bytes());
                for &(f, df) in &idf.df {
                    eat(&f.to_le_bytes());
                    eat(&df.to_le_bytes());
                }
            }
        }
        Some(format!("hashing-fnv1a64:{h:016x}"))
    }

    /// Inline for inputs under [`HashingEncoder::BLOCKING_FROM_BYTES`] in all; larger ones
    /// on tokio's blocking pool ([`lprag_core::blocking`]), so the async worker is free.
    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        let bytes: usize = texts.iter().map(String::len).sum();
        if bytes < Self::BLOCKING_FROM_BYTES {
            return self.embed_sync(texts);
        }
        let (me, texts) = (self.clone(), texts.to_vec());
        lprag_core::blocking(move || me.embed_sync(&texts)).await
    }
}

/// English function words dropped when [`HashingEncoderConfig::stop_words`] is set.
/// Sorted, for binary search.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "during",
    "each", "for", "from", "had", "has", "have", "having", "he", "her", "hers", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "me", "more", "most", "my", "no",
    "nor", "not", "of", "on", "once", "one", "only", "or", "other", "our", "out", "over", "own",
    "s", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "whose", "why", "will", "with", "would", "you", "your",
];

/// Lower-cased `\w+`-style word tokens of `text` (see the module docs).
pub(crate) fn word_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in text.unicode_words() {
        for piece in w.split(is_inner_punct) {
            if !piece.is_empty() {
                out.push(piece.to_lowercase());
            }
        }
    }
    out
}

/// Punctuation that UAX #29 allows inside a word (MidLetter, MidNum, MidNumLet).
fn is_inner_punct(c: char) -> bool {
    (c.is_ascii_punctuation() && c != '_')
        || matches!(
            c,
            '\u{00B7}'
                | '\u{0387}'
                | '\u{055F}'
                | '\u{05F4}'
                | '\u{060C}'
                | '\u{060D}'
                | '\u{066C}'
                | '\u{07F8}'
                | '\u{2018}'
                | '\u{2019}'
                | '\u{2024}'
                | '\u{2027}'
                | '\u{2044}'
                | '\u{FE13}'
                | '\u{FE50}'
                | '\u{FE52}'
                | '\u{FE54}'
                | '\u{FE55}'
                | '\u{FF07}'
                | '\u{FF0C}'
                | '\u{FF0E}'
                | '\u{FF1A}'
                | '\u{FF1B}'
        )
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a over several byte slices, as if concatenated.
pub(crate) fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h = FNV_OFFSET;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    }
    h
}

/// The SplitMix64 finaliser (a bijective bit mixer).
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn feature_hash(seed: &[u8; 8], tag: u8, feature: &[u8]) -> u64 {
    splitmix64(fnv1a64(&[seed, &[tag, 0], feature]))
}

/// Add the sublinear-tf, signed, hashed features to `out` (L2-normalised, scaled by
/// `weight`). `hashes` is consumed (sorted in place to count repeats deterministically).
fn add_block(out: &mut [f32], hashes: &mut [u64], weight: f32, idf: Option<&HashingIdf>) {
    if hashes.is_empty() || weight == 0.0 {
        return;
    }
    hashes.sort_unstable();
    let dim = out.len() as u64;
    let mut block = vec![0.0f32; out.len()];
    let mut i = 0;
    while i < hashes.len() {
        let h = hashes[i];
        let mut j = i + 1;
        while j < hashes.len() && hashes[j] == h {
            j += 1;
        }
        let tf = (j - i) as f32;
        let w = (1.0 + tf.ln()) * idf.map_or(1.0, |idf| idf.weight(h));
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        block[(h % dim) as usize] += sign * w;
        i = j;
    }
    let norm = block.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        let s = weight / norm;
        for (o, b) in out.iter_mut().zip(&block) {
            *o += b * s;
        }
    }
}

/// The hashed word and n-gram features of `text`, unsorted, with repeats.
fn features(cfg: &HashingEncoderConfig, text: &str) -> (Vec<u64>, Vec<u64>) {
    let seed = cfg.seed.to_le_bytes();
    let mut words = word_tokens(text);
    if cfg.stop_words {
        words.retain(|w| STOP_WORDS.binary_search(&w.as_str()).is_err());
    }
    let word_hashes: Vec<u64> = words
        .iter()
        .map(|w| feature_hash(&seed, b'w', w.as_bytes()))
        .collect();
    let mut char_hashes = Vec::new();
    let mut buf = String::new();
    for w in &words {
        let chars: Vec<char> = std::iter::once('<')
            .chain(w.chars())
            .chain(std::iter::once('>'))
            .collect();
        for n in cfg.char_ngram_min..=cfg.char_ngram_max {
            if n > chars.len() {
                break;
            }
            for win in chars.windows(n) {
                buf.clear();
                buf.extend(win);
                char_hashes.push(feature_hash(&seed, b'c', buf.as_bytes()));
            }
        }
    }
    (word_hashes, char_hashes)
}

fn encode_one(cfg: &HashingEncoderConfig, idf: Option<&HashingIdf>, text: &str) -> Vec<f32> {
    let (mut word_hashes, mut char_hashes) = features(cfg, text);
    let mut v = vec![0.0f32; cfg.dim];
    add_block(&mut v, &mut word_hashes, cfg.word_weight, idf);
    add_block(&mut v, &mut char_hashes, cfg.char_weight, idf);
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::cosine;

    fn enc(texts: &[&str]) -> Embeddings {
        let texts: Vec<String> = texts.iter().map(|s| s.to_string()).collect();
        HashingEncoder::default().embed_sync(&texts).unwrap()
    }

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn fnv1a_matches_reference_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(&[b""]), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x85944171f73967e8);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    #[test]
    fn tokens_are_lowercased_words() {
        assert_eq!(
            word_tokens("Client's self-actualizing (3.5) Ünïcode_x, Tōkyō!"),
            vec![
                "client",
                "s",
                "self",
                "actualizing",
                "3",
                "5",
                "ünïcode_x",
                "tōkyō"
            ]
        );
        assert!(word_tokens("  ... !? ").is_empty());
    }

    #[test]
    fn deterministic_and_normalised() {
        let a = enc(&["The Journal of Mathematical Physics is a peer-reviewed journal."]);
        let b = enc(&["The Journal of Mathematical Physics is a peer-reviewed journal."]);
        assert_eq!(a, b);
        let n: f32 = a.row(0).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-5, "norm {n}");
        let nz = a.row(0).iter().filter(|x| **x != 0.0).count();
        assert!(nz > 50, "{nz} non-zero buckets");
    }

    #[test]
    fn pinned_bucket_is_stable() {
        // "paris" alone, words only: one bucket with value ±1.
        let cfg = HashingEncoderConfig {
            char_weight: 0.0,
            ..Default::default()
        };
        let v = HashingEncoder::new(cfg).unwrap().encode("Paris").unwrap();
        let h = feature_hash(&0u64.to_le_bytes(), b'w', b"paris");
        let idx = (h % 1024) as usize;
        assert_eq!(v.iter().filter(|x| **x != 0.0).count(), 1);
        assert_eq!(v[idx].abs(), 1.0);
        // Pinned: a change here silently invalidates every saved index.
        assert_eq!((idx, v[idx]), (153, -1.0));
    }

    #[test]
    fn empty_text_is_zero_vector() {
        let e = enc(&["", "   \n", "?!", "the of and"]);
        for r in e.iter() {
            assert!(r.iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn similar_texts_score_higher() {
        let e = enc(&[
            "Who developed person-centered therapy?",
            "Person-centered therapy was developed by psychologist Carl Rogers in the 1940s.",
            "The Humaya River flows into the Pacific Ocean near Culiacán.",
        ]);
        let related = cosine(e.row(0), e.row(1));
        let unrelated = cosine(e.row(0), e.row(2));
        assert!(related > unrelated + 0.2, "{related} vs {unrelated}");
        // Inflection: char n-grams tie "developed" to "developing".
        let f = enc(&["developing therapies", "developed therapy", "river basin"]);
        assert!(cosine(f.row(0), f.row(1)) > cosine(f.row(0), f.row(2)) + 0.2);
    }

    #[test]
    fn seed_changes_buckets_not_quality() {
        let cfg = HashingEncoderConfig {
            seed: 7,
            ..Default::default()
        };
        let e1 = HashingEncoder::default().encode("Carl Rogers").unwrap();
        let e2 = HashingEncoder::new(cfg)
            .unwrap()
            .encode("Carl Rogers")
            .unwrap();
        assert_ne!(e1, e2);
    }

    #[test]
    fn parallel_and_serial_agree() {
        let texts: Vec<String> = (0..100)
            .map(|i| format!("text number {i} about Paris"))
            .collect();
        let all = HashingEncoder::default().embed_sync(&texts).unwrap();
        for (i, t) in texts.iter().enumerate().step_by(17) {
            let one = HashingEncoder::default().encode(t).unwrap();
            assert_eq!(all.row(i), one.as_slice());
        }
    }

    #[test]
    fn bad_config_is_a_typed_error() {
        for cfg in [
            HashingEncoderConfig {
                dim: 0,
                ..Default::default()
            },
            HashingEncoderConfig {
                char_ngram_min: 4,
                char_ngram_max: 3,
                ..Default::default()
            },
            HashingEncoderConfig {
                word_weight: f32::NAN,
                ..Default::default()
            },
            HashingEncoderConfig {
                word_weight: 0.0,
                char_weight: 0.0,
                ..Default::default()
            },
        ] {
            assert!(matches!(
                HashingEncoder::new(cfg.clone()),
                Err(Error::InvalidInput { .. })
            ));
            let e = HashingEncoder {
                config: cfg,
                idf: None,
            };
            assert!(e.embed_sync(&["x".into()]).is_err());
        }
    }

    #[test]
    fn idf_downweights_common_words() {
        let corpus: Vec<String> = [
            "Paris is a city in France.",
            "Lyon is a city in France.",
            "Nice is a city in France.",
            "Zyxwv Quartz is a city in France.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let query = "city in France named Zyxwv".to_string();
        let plain = HashingEncoder::default();
        let fitted = HashingEncoder::fitted(HashingEncoderConfig::default(), &corpus).unwrap();
        let margin = |enc: &HashingEncoder| {
            let d = enc.embed_sync(&corpus).unwrap();
            let q = enc.encode(&query).unwrap();
            cosine(&q, d.row(3)) - cosine(&q, d.row(0))
        };
        assert!(
            margin(&fitted) > margin(&plain) + 0.05,
            "{} vs {}",
            margin(&fitted),
            margin(&plain)
        );
        // Rows stay unit length; unseen words get the largest weight, not a panic.
        let v = fitted.encode("entirely unseen vocabulary").unwrap();
        assert!((v.iter().map(|x| x * x).sum::<f32>().sqrt() - 1.0).abs() < 1e-5);
    }

    #[test]
    fn idf_round_trips_and_checks_its_config() {
        let corpus = vec!["alpha beta".to_string(), "beta gamma".to_string()];
        let fitted = HashingEncoder::fitted(HashingEncoderConfig::default(), &corpus).unwrap();
        let idf = fitted.idf().unwrap().clone();
        assert_eq!(idf.num_docs, 2);
        assert!(idf.df.windows(2).all(|w| w[0].0 < w[1].0));
        let json = serde_json::to_string(&idf).unwrap();
        let back: HashingIdf = serde_json::from_str(&json).unwrap();
        let restored = HashingEncoder::default().with_idf(back).unwrap();
        assert_eq!(
            restored.encode("beta alpha").unwrap(),
            fitted.encode("beta alpha").unwrap()
        );
        let other = HashingEncoder::new(HashingEncoderConfig {
            seed: 9,
            ..Default::default()
        })
        .unwrap();
        assert!(matches!(
            other.with_idf(idf),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            HashingIdf::fit(&HashingEncoderConfig::default(), &[]),
            Err(Error::EmptyCorpus(_))
        ));
    }

    #[test]
    fn fitting_texts_made_as_they_are_read_gives_the_slices_table() {
        let config = HashingEncoderConfig::default();
        // More than one block of 4,096, with repeats so frequencies differ.
        let corpus: Vec<String> = (0..9_000)
            .map(|i| format!("passage {} about topic {} and river {}", i, i % 37, i % 5))
            .collect();
        let whole = HashingIdf::fit(&config, &corpus).unwrap();
        let made = HashingIdf::fit_iter(&config, (0..9_000).map(|i| corpus[i].clone())).unwrap();
        assert_eq!(made, whole);
        assert_eq!(made.num_docs, 9_000);
        let fewer = HashingIdf::fit(&config, &corpus[..4_096]).unwrap();
        assert_ne!(fewer, whole);
        assert!(matches!(
            HashingIdf::fit_iter(&config, std::iter::empty::<String>()),
            Err(Error::EmptyCorpus(_))
        ));
    }

    #[tokio::test]
    async fn encoder_trait_works() {
        let enc: std::sync::Arc<dyn Encoder> = std::sync::Arc::new(HashingEncoder::default());
        assert_eq!(enc.dimension(), 1024);
        let v = enc.embed_one("Paris").await.unwrap();
        assert_eq!(v.len(), 1024);
        let e = enc.embed(&[]).await.unwrap();
        assert!(e.is_empty());
    }

    /// A large `embed` runs off the async worker: on a current-thread runtime another task
    /// makes progress while it runs, and the vectors are those of `embed_sync`.
    #[tokio::test(flavor = "current_thread")]
    async fn a_large_embed_leaves_the_async_worker_free() {
        let enc = HashingEncoder::default();
        let big = vec!["Warsaw lies on the Vistula, the longest river of Poland. ".repeat(4_000)];
        let (e, during) = crate::test_support::turns_beside(enc.embed(&big)).await;
        let e = e.unwrap();
        assert!(
            during > 0,
            "the other task never ran while {} bytes were embedded",
            big[0].len()
        );
        assert_eq!(e, enc.embed_sync(&big).unwrap());
        // Small inputs stay inline and give the same vectors.
        let small = vec!["capital of Poland".to_string()];
        assert_eq!(
            enc.embed(&small).await.unwrap(),
            enc.embed_sync(&small).unwrap()
        );
    }
}
