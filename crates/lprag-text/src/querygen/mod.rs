//! A rule-based query generator (see [`HeuristicQueryGenerator`]).

use async_trait::async_trait;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chunker::sentence_spans;
use crate::hashing::{fnv1a64, splitmix64};
use lprag_core::{Chunk, ChunkId, Error, QueryGenerator, Result, SyntheticQuery};

mod multihop;
mod questions;
mod sentence;
mod spans;
mod text;
mod words;

use multihop::{bridge_plan, multi_hop_candidates, multi_hop_chunks};
use questions::{fallback_questions, mentions, sentence_questions, with_title};
use sentence::{clean_title, normalise, prepare_sentence, tokenise};
use text::{lower, token_hash};

/// Configuration of [`HeuristicQueryGenerator`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeuristicQueryGeneratorConfig {
    /// Queries written per batch (`n_B`, LP-RAG A.2). Default 2. For a batch of several
    /// chunks, the first `ceil(n_B / 2)` are multi-hop when a bridge between two chunks
    /// is found; the rest are single-chunk questions.
    pub queries_per_batch: usize,
    /// Seed of the choice among candidate questions. Default 0. The same seed, chunks and
    /// batch always give the same queries; a batch's queries do not depend on the other
    /// batches or on its position in the list.
    pub seed: u64,
    /// Candidate questions longer than this many words are used only when nothing shorter
    /// is available. Default 32.
    pub max_words: usize,
}

impl Default for HeuristicQueryGeneratorConfig {
    fn default() -> Self {
        Self {
            queries_per_batch: 2,
            seed: 0,
            max_words: 32,
        }
    }
}

/// Rule-based question writer: the offline default [`QueryGenerator`].
///
/// LP-RAG (§3.2, prompt S-PROMPT in Appendix D.3) has an LLM write `n_B = 2` human-like
/// questions per batch of chunks, multi-hop when the batch holds several chunks. A
/// prototype found that rule-made pseudo-queries which do not *look* like real questions
/// teach a link predictor a skill that does not transfer to real questions. So this
/// generator rewrites statements into questions with the shape of benchmark questions,
/// keeping entity names and the chunk's title:
///
/// * **wh-rewrites** of a salient span: a date ("When was Machu Picchu declared a Peruvian
///   Historic Sanctuary?"), a place ("Where was Kim Il-chol born?"), an agent ("Who
///   developed Person-centered therapy?"), a count ("How many stores does Publix have?"),
///   a copular complement ("Who is Action Police CFTC's general secretary?"), a subject
///   ("What is a peer-reviewed journal published monthly by the American Institute of
///   Physics?"), a category ("What kind of journal is the Journal of Mathematical
///   Physics?"), life dates from "Name (3 November 1886 – 10 December 1958)";
/// * **cloze questions**: an entity or number replaced in place by a wh-phrase ("... was
///   founded in Lahore with how many teams?");
/// * **multi-hop questions** for batches of several chunks: a question about an entity
///   from one chunk, where the entity is replaced by a description drawn from another
///   chunk ("When was the journal that is published by the American Institute of Physics
///   first published?", "Who was the first president of the association by which the
///   Journal of Psychotherapy Integration is published?").
///
/// Leading pronouns and generic subjects ("It", "His", "The journal") are replaced by the
/// chunk's title so that questions stay self-contained, and a question that would not
/// mention the title at all is prefixed with "In `<title>`, ...".
///
/// This is pattern matching on English surface forms, not parsing: some questions are
/// clumsy, some rewrites miss, and non-English text mostly gets the fallback question
/// ("What is the connection between `<title>` and `<entity>`?"). It is clearly weaker than an LLM, but
/// deterministic, offline and fast (microseconds per chunk).
///
/// For every batch it writes `queries_per_batch` distinct questions, each linked to the
/// chunks it draws on: a single-chunk question to its chunk, a multi-hop question to the
/// two chunks it joins. It writes fewer only when a batch is too small to yield that many
/// distinct questions. Questions never equal a chunk's text and always end with `?`;
/// [`SyntheticQuery::answer`] holds the span the question asks for when there is one.
///
/// Errors: an empty batch, a chunk id out of range, or `queries_per_batch == 0` is
/// [`Error::InvalidInput`].
///
/// ```
/// use lprag_core::{Chunk, Provenance, QueryGenerator};
/// use lprag_text::HeuristicQueryGenerator;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let chunk = Chunk::new(
///     0,
///     "Kim Il-chol was born in Pyongyang in 1933.",
///     Provenance { document_id: "d".into(), title: "Kim Il-chol".into(), span: 0..42 },
/// );
/// let qs = HeuristicQueryGenerator::default().generate(&[chunk], &[vec![0]]).await.unwrap();
/// assert_eq!(qs.len(), 2);
/// assert!(qs.iter().all(|q| q.text.ends_with('?') && q.chunk_ids == [0]));
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct HeuristicQueryGenerator {
    /// The configuration.
    pub config: HeuristicQueryGeneratorConfig,
}

impl HeuristicQueryGenerator {
    /// A generator with the given configuration.
    pub fn new(config: HeuristicQueryGeneratorConfig) -> Self {
        Self { config }
    }

    /// The synchronous body of [`QueryGenerator::generate`].
    pub fn generate_sync(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>> {
        let n_b = self.config.queries_per_batch;
        if n_b == 0 {
            return Err(Error::invalid(
                "HeuristicQueryGeneratorConfig.queries_per_batch",
                "must be at least 1",
            ));
        }
        for (i, b) in batches.iter().enumerate() {
            if b.is_empty() {
                return Err(Error::invalid(format!("batches[{i}]"), "empty batch"));
            }
            if let Some(&bad) = b.iter().find(|&&id| id >= chunks.len()) {
                return Err(Error::invalid(
                    format!("batches[{i}]"),
                    format!("chunk id {bad} out of range ({} chunks)", chunks.len()),
                ));
            }
        }
        Ok(self.write_groups(chunks, batches, ANALYSIS_GROUP))
    }

    /// The queries of `batches` (checked), written `group` batches at a time.
    fn write_groups(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
        group: usize,
    ) -> Vec<SyntheticQuery> {
        // Batches are written a group at a time: the chunks a group names are analysed
        // (once each), then each of its batches is written on its own (a batch's choices
        // are seeded by its chunk ids alone), both on rayon's pool. Analyses are large
        // (≈ 14 KB per passage, 14 GB for a million), so only one group's are held; a
        // chunk named by batches of two groups is analysed twice, to the same result.
        let max_words = self.config.max_words;
        let mut out = Vec::new();
        for group in batches.chunks(group.max(1)) {
            let mut ids: Vec<ChunkId> = group.iter().flatten().copied().collect();
            ids.sort_unstable();
            ids.dedup();
            let analysed: Vec<Analysed> = ids
                .par_iter()
                .map(|&id| analyse(id, &chunks[id], max_words))
                .collect();
            let per_batch: Vec<Vec<SyntheticQuery>> = group
                .par_iter()
                .map(|batch| {
                    let mut seen: Vec<ChunkId> = Vec::with_capacity(batch.len());
                    for &id in batch {
                        if !seen.contains(&id) {
                            seen.push(id);
                        }
                    }
                    let batch: Vec<&Analysed> = seen
                        .iter()
                        .filter_map(|id| ids.binary_search(id).ok().map(|i| &analysed[i]))
                        .collect();
                    self.batch_queries(&batch, chunks)
                })
                .collect();
            out.extend(per_batch.into_iter().flatten());
        }
        out
    }

    /// Queries for one batch (ids deduplicated, in batch order).
    fn batch_queries(&self, batch: &[&Analysed], chunks: &[Chunk]) -> Vec<SyntheticQuery> {
        let n_b = self.config.queries_per_batch;
        let mut key = Vec::with_capacity(batch.len() * 8);
        for a in batch {
            key.extend_from_slice(&(a.id as u64).to_le_bytes());
        }
        let mut rng = Rng(self.config.seed ^ fnv1a64(&[&key]));
        let forbidden: Vec<String> = batch
            .iter()
            .filter_map(|a| chunks.get(a.id))
            .map(|c| norm_key(&c.text))
            .collect();
        let mut chosen: Vec<SyntheticQuery> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mut take = |q: Cand, ids: Vec<ChunkId>, chosen: &mut Vec<SyntheticQuery>| -> bool {
            let k = norm_key(&q.text);
            if q.text.is_empty() || seen.contains(&k) || forbidden.contains(&k) {
                return false;
            }
            seen.push(k);
            chosen.push(SyntheticQuery {
                text: q.text,
                chunk_ids: ids,
                answer: q.answer,
            });
            true
        };

        // Multi-hop questions first, for batches of several chunks.
        if batch.len() > 1 {
            let want = n_b.div_ceil(2);
            let joinable = multi_hop_chunks(batch, &mut rng);
            let mut multi = multi_hop_candidates(&joinable, self.config.max_words);
            let mut used_pairs: Vec<(ChunkId, ChunkId)> = Vec::new();
            while chosen.len() < want && !multi.is_empty() {
                // Prefer a pair not used yet.
                let fresh: Vec<usize> = (0..multi.len())
                    .filter(|&i| !used_pairs.contains(&multi[i].1))
                    .collect();
                let pool = if fresh.is_empty() {
                    (0..multi.len()).collect()
                } else {
                    fresh
                };
                let weights: Vec<f64> = pool.iter().map(|&i| weight(multi[i].0.score)).collect();
                let pick = pool[rng.weighted(&weights)];
                let (cand, pair) = multi.swap_remove(pick);
                if take(cand, vec![pair.0, pair.1], &mut chosen) {
                    used_pairs.push(pair);
                }
            }
        }

        // Single-chunk questions: spread over the batch's chunks, the target chunk first.
        let mut pools: Vec<(ChunkId, Vec<Cand>)> =
            batch.iter().map(|a| (a.id, a.cands.clone())).collect();
        let mut turn = 0usize;
        let mut stalled = 0usize;
        while chosen.len() < n_b && stalled < pools.len() {
            let slot = turn % pools.len();
            turn += 1;
            let (id, pool) = &mut pools[slot];
            let mut got = false;
            while !pool.is_empty() {
                let weights: Vec<f64> = pool.iter().map(|c| weight(c.score)).collect();
                let i = rng.weighted(&weights);
                let c = pool.swap_remove(i);
                if take(c, vec![*id], &mut chosen) {
                    got = true;
                    break;
                }
            }
            stalled = if got { 0 } else { stalled + 1 };
        }
        chosen
    }
}

#[async_trait]
impl QueryGenerator for HeuristicQueryGenerator {
    fn name(&self) -> &str {
        "heuristic"
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!("{:?}", self.config))
    }

    async fn generate(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> Result<Vec<SyntheticQuery>> {
        self.generate_sync(chunks, batches)
    }
}

// ---------------------------------------------------------------------------------------
// Randomness (SplitMix64; no dependency, identical everywhere).

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.0)
    }

    /// A uniform float in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An index drawn with probability proportional to `weights` (all positive).
    fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.unit() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len().saturating_sub(1)
    }
}

/// Sampling weight of a candidate: each score point triples the odds.
fn weight(score: i32) -> f64 {
    3f64.powi(score.clamp(-4, 6))
}

/// A key for "same text": lower-case alphanumerics only.
fn norm_key(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The analysis of a chunk.

/// A sentence of a chunk, normalised and tokenised for rewriting.
#[derive(Debug, Clone)]
struct Sent {
    toks: Vec<String>,
    /// Index of the auxiliary verb (is/was/has/...) after the subject, if found.
    aux: Option<usize>,
    /// End of the subject (`toks[..subj_end]`), when `aux` is set.
    subj_end: usize,
    /// Life dates from a parenthetical after the leading name: (name, born, died).
    life: Option<(Vec<String>, Option<String>, Option<String>)>,
}

/// Batches whose chunks are analysed together (see `generate`). At 100,000 passages with
/// the defaults, 1,024 hold about 0.1 GiB of analyses at a time where 8,192 held about 0.6
/// GiB, for about a quarter more writing time (chunks shared by two groups are analysed
/// twice); `docs/benchmarks.md`, "Feature rows on disk during the build".
const ANALYSIS_GROUP: usize = 1024;

/// One chunk, analysed once per group of batches in a `generate` call.
#[derive(Debug, Clone)]
struct Analysed {
    id: ChunkId,
    title: Vec<String>,
    person: bool,
    sents: Vec<Sent>,
    cands: Vec<Cand>,
    /// Hashes of the sentences' tokens with a possessive "'s" stripped, sorted: a bridge
    /// entity whose first token is not here cannot be described by this chunk.
    vocab: Vec<u64>,
    /// The multi-hop plans of this chunk's questions (see [`BridgePlan`]).
    plans: Vec<BridgePlan>,
}

/// The part of a multi-hop join that depends only on the question's chunk: a question
/// (score ≥ 1) tokenised, with the entities it could be bridged on and where they stand.
#[derive(Debug, Clone)]
struct BridgePlan {
    /// Index into the chunk's `cands`.
    cand: usize,
    q_toks: Vec<String>,
    /// `(entity, position in q_toks, hash of its first token stripped)`, in trial order.
    ents: Vec<(Vec<String>, usize, u64)>,
}

/// A candidate question.
#[derive(Debug, Clone, PartialEq)]
struct Cand {
    text: String,
    answer: Option<String>,
    score: i32,
}

/// Analyse one chunk: its sentences, its single-chunk candidate questions and their
/// multi-hop plans.
fn analyse(id: ChunkId, chunk: &Chunk, max_words: usize) -> Analysed {
    let title_str = clean_title(&chunk.provenance.title);
    let title = tokenise(&normalise(&title_str));
    // Words of the full title, disambiguation included ("Wonder Woman (2017 film)").
    let title_words: Vec<String> = chunk
        .provenance
        .title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(lower)
        .collect();
    let text_lc = format!(" {} ", lower(&chunk.text));
    let person = [" he ", " she ", " his ", " him ", " her "]
        .iter()
        .any(|p| text_lc.contains(p));
    let sents: Vec<Sent> = sentence_spans(&chunk.text)
        .into_iter()
        .filter_map(|r| chunk.text.get(r))
        .filter_map(|s| prepare_sentence(s, &title, &title_words))
        .collect();
    let mut cands = Vec::new();
    for (k, s) in sents.iter().enumerate() {
        let person = person || s.life.is_some();
        for mut c in sentence_questions(s, &title, person) {
            // No prefix when the answer is the title itself (it would give it away).
            let answer_is_title = c.answer.as_deref().is_some_and(|a| {
                mentions(a, &title) && a.split_whitespace().count() <= title.len() + 1
            });
            if !answer_is_title {
                c.text = with_title(&c.text, &title, chunk.provenance.title.trim());
            }
            // Earlier sentences (definitions, main facts) are slightly preferred.
            c.score -= (k.min(6) / 3) as i32;
            let n = c.text.split_whitespace().count();
            if n > max_words {
                c.score -= 3;
            }
            if n > 2 * max_words.max(8) || c.text.is_empty() {
                continue;
            }
            if !cands
                .iter()
                .any(|x: &Cand| norm_key(&x.text) == norm_key(&c.text))
            {
                cands.push(c);
            }
        }
    }
    cands.extend(fallback_questions(chunk, &sents, &title_str));
    let mut vocab: Vec<u64> = sents
        .iter()
        .flat_map(|s| s.toks.iter())
        .map(|t| token_hash(t))
        .collect();
    vocab.sort_unstable();
    vocab.dedup();
    let plans = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.score >= 1)
        .map(|(i, c)| bridge_plan(i, c, &title))
        .filter(|p| !p.ents.is_empty())
        .collect();
    Analysed {
        id,
        title,
        person,
        sents,
        cands,
        vocab,
        plans,
    }
}

#[cfg(test)]
mod tests;
