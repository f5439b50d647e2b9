//! Evaluation metrics: passage Recall@k (HippoRAG protocol), MRR@k and nDCG@k (trec_eval's
//! definitions), answer EM / token F1 (SQuAD), retrieved tokens, latency percentiles.
//!
//! All functions are pure and cheap; the harness ([`crate::harness`]) applies them.

use std::collections::HashMap;

/// The cut-offs reported for Recall@k.
pub const RECALL_KS: [usize; 4] = [1, 2, 5, 10];

/// Recall@k of one question: `|top-k ∩ gold| / gold_count`.
///
/// `ranking` lists passage indices best first (duplicates after the first occurrence are
/// ignored); `gold` lists the gold passages present in the corpus; `gold_count` is the
/// number of gold passages including those missing from the corpus (the HippoRAG
/// denominator; see [`crate::datasets::Question::gold_count`]). Returns `None` when
/// `gold_count` is 0 (the question does not take part in Recall@k).
///
/// ```
/// use lprag_eval::metrics::recall_at_k;
/// // gold {3, 7}; 3 is ranked 1st, 7 is ranked 4th
/// let ranking = [3, 1, 2, 7];
/// assert_eq!(recall_at_k(&ranking, &[3, 7], 2, 2), Some(0.5));
/// assert_eq!(recall_at_k(&ranking, &[3, 7], 2, 5), Some(1.0));
/// assert_eq!(recall_at_k(&ranking, &[], 0, 5), None);
/// ```
pub fn recall_at_k(ranking: &[usize], gold: &[usize], gold_count: usize, k: usize) -> Option<f64> {
    if gold_count == 0 {
        return None;
    }
    let seen = first_occurrences(ranking, k);
    let hits = gold
        .iter()
        .enumerate()
        .filter(|&(i, g)| !gold[..i].contains(g) && seen.contains(g))
        .count();
    Some(hits as f64 / gold_count as f64)
}

/// The cut-off of the reported MRR and nDCG (BEIR reports nDCG@10, MS MARCO MRR@10).
pub const RANK_CUTOFF: usize = 10;

/// Reciprocal rank of the first gold passage within the top `k` (0 when none is there):
/// trec_eval's `recip_rank` cut at `k`. `None` when the question has no gold passage.
///
/// ```
/// use lprag_eval::metrics::mrr_at_k;
/// assert_eq!(mrr_at_k(&[4, 3, 7], &[3, 7], 2, 10), Some(0.5));
/// assert_eq!(mrr_at_k(&[4, 3, 7], &[3, 7], 2, 1), Some(0.0));
/// assert_eq!(mrr_at_k(&[4], &[], 0, 10), None);
/// ```
pub fn mrr_at_k(ranking: &[usize], gold: &[usize], gold_count: usize, k: usize) -> Option<f64> {
    if gold_count == 0 {
        return None;
    }
    Some(
        first_occurrences(ranking, k)
            .iter()
            .position(|p| gold.contains(p))
            .map_or(0.0, |i| 1.0 / (i + 1) as f64),
    )
}

/// nDCG@k with graded relevance, as trec_eval's `ndcg_cut` computes it: gain = the grade,
/// discount `log2(rank + 1)`, divided by the DCG of the ideal ranking of all
/// `gold_count` gold passages. `grades[i]` is the grade of `gold[i]` (missing grades,
/// and gold passages absent from the corpus, count as grade 1). `None` when the question
/// has no gold passage.
///
/// ```
/// use lprag_eval::metrics::ndcg_at_k;
/// // one gold passage, ranked 2nd: (1 / log2 3) / 1
/// let v = ndcg_at_k(&[4, 3], &[3], &[], 1, 10).unwrap();
/// assert!((v - 1.0 / 3f64.log2()).abs() < 1e-12);
/// assert_eq!(ndcg_at_k(&[3, 4], &[3], &[], 1, 10), Some(1.0));
/// ```
pub fn ndcg_at_k(
    ranking: &[usize],
    gold: &[usize],
    grades: &[u32],
    gold_count: usize,
    k: usize,
) -> Option<f64> {
    if gold_count == 0 {
        return None;
    }
    let grade = |g: usize| grades.get(g).copied().unwrap_or(1) as f64;
    let discount = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = first_occurrences(ranking, k)
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            gold.iter()
                .position(|g| g == p)
                .map(|g| grade(g) * discount(i))
        })
        .sum();
    let mut ideal: Vec<f64> = (0..gold_count).map(grade).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| g * discount(i))
        .sum();
    Some(if idcg > 0.0 { dcg / idcg } else { 0.0 })
}

/// The first `k` distinct entries of `ranking`, in order.
fn first_occurrences(ranking: &[usize], k: usize) -> Vec<usize> {
    let mut seen: Vec<usize> = Vec::with_capacity(k);
    for &p in ranking {
        if seen.len() == k {
            break;
        }
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen
}

/// SQuAD answer normalisation: lower-case, remove ASCII punctuation (Python's
/// `string.punctuation`), remove the articles `a`, `an`, `the` (whole words, like
/// `re.sub(r"\b(a|an|the)\b", " ", s)`), collapse whitespace.
///
/// ```
/// use lprag_eval::metrics::normalize_answer;
/// assert_eq!(normalize_answer("The  Eiffel-Tower, Paris!"), "eiffeltower paris");
/// assert_eq!(normalize_answer("An apple a day"), "apple day");
/// ```
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punc: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    let no_articles = remove_articles(&no_punc);
    no_articles.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A character of Python's `\w` for `str` patterns (approximately: Unicode alphanumeric or
/// `_`).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Replace every maximal run of word characters equal to `a`, `an` or `the` by one space
/// (what `\b(a|an|the)\b` matches).
fn remove_articles(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if matches!(word.as_str(), "a" | "an" | "the") {
            out.push(' ');
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in s.chars() {
        if is_word_char(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Exact match after [`normalize_answer`].
pub fn exact_match(prediction: &str, gold: &str) -> bool {
    normalize_answer(prediction) == normalize_answer(gold)
}

/// SQuAD v1.1 token F1 after [`normalize_answer`]: the harmonic mean of precision and
/// recall of the shared tokens, counted as a multiset. 0 when no token is shared
/// (including when either side normalises to nothing).
///
/// ```
/// use lprag_eval::metrics::token_f1;
/// // prediction tokens {paris, france}, gold {paris}: P = 1/2, R = 1, F1 = 2/3
/// assert!((token_f1("Paris, France", "Paris") - 2.0 / 3.0).abs() < 1e-12);
/// ```
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_answer(prediction);
    let g = normalize_answer(gold);
    let p: Vec<&str> = p.split_whitespace().collect();
    let g: Vec<&str> = g.split_whitespace().collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &g {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0usize;
    for t in &p {
        if let Some(c) = counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Exact match and token F1 of one prediction.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct QaScore {
    /// 1.0 when the prediction matches some accepted answer exactly (after
    /// normalisation), else 0.0.
    pub em: f64,
    /// The best token F1 over the accepted answers, in `[0, 1]`.
    pub f1: f64,
}

/// EM and F1 of `prediction`, each the maximum over `answers` (the answer and its aliases).
/// Both are 0 when `answers` is empty.
///
/// ```
/// use lprag_eval::metrics::qa_score;
/// let s = qa_score("J. Smith", &["John Smith".into(), "J. Smith".into()]);
/// assert_eq!((s.em, s.f1), (1.0, 1.0));
/// ```
pub fn qa_score(prediction: &str, answers: &[String]) -> QaScore {
    answers.iter().fold(QaScore::default(), |best, a| QaScore {
        em: best
            .em
            .max(if exact_match(prediction, a) { 1.0 } else { 0.0 }),
        f1: best.f1.max(token_f1(prediction, a)),
    })
}

/// The `p`-th percentile (`0 ≤ p ≤ 100`) by linear interpolation between the closest
/// ranks (NumPy's default): the value at fractional rank `p / 100 · (n − 1)` of the
/// sorted values. `None` for no values.
///
/// ```
/// use lprag_eval::metrics::percentile;
/// assert_eq!(percentile(&[4.0, 1.0, 3.0, 2.0], 50.0), Some(2.5));
/// assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 75.0), Some(4.0));
/// ```
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    Some(v[lo] + (v[hi] - v[lo]) * (rank - lo as f64))
}

/// Arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// Number of whitespace-separated tokens (Unicode whitespace), the unit of "retrieved
/// tokens per query".
pub fn whitespace_tokens(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn recall_hand_computed() {
        // gold {10, 20, 30}; ranking 20, 5, 30, 6, 10
        let r = [20, 5, 30, 6, 10];
        let g = [10, 20, 30];
        assert_eq!(recall_at_k(&r, &g, 3, 1), Some(1.0 / 3.0));
        assert_eq!(recall_at_k(&r, &g, 3, 2), Some(1.0 / 3.0));
        assert_eq!(recall_at_k(&r, &g, 3, 3), Some(2.0 / 3.0));
        assert_eq!(recall_at_k(&r, &g, 3, 5), Some(1.0));
        assert_eq!(recall_at_k(&r, &g, 3, 10), Some(1.0));
        // a gold passage missing from the corpus stays in the denominator
        assert_eq!(recall_at_k(&r, &g, 4, 10), Some(0.75));
        // repeated passages in the ranking do not take extra slots
        assert_eq!(recall_at_k(&[5, 5, 5, 10], &[10], 1, 2), Some(1.0));
        // repeated gold counts once
        assert_eq!(recall_at_k(&[10], &[10, 10], 1, 1), Some(1.0));
        assert_eq!(recall_at_k(&[], &[1], 1, 5), Some(0.0));
        assert_eq!(recall_at_k(&[1], &[], 0, 5), None);
    }

    #[test]
    fn squad_normalisation() {
        assert_eq!(normalize_answer("  The Beatles "), "beatles");
        assert_eq!(normalize_answer("A"), "");
        assert_eq!(normalize_answer("theatre an-d the."), "theatre and");
        assert_eq!(normalize_answer("Thé Ünïcode’s"), "thé ünïcode’s");
        assert_eq!(normalize_answer("snake_case"), "snakecase");
        assert_eq!(normalize_answer("1,000 km²"), "1000 km²");
        // articles are whole words only, also next to non-ASCII punctuation
        assert_eq!(normalize_answer("the–end"), "–end");
        assert_eq!(normalize_answer("Anthem of a nation"), "anthem of nation");
    }

    #[test]
    fn exact_match_and_f1_hand_computed() {
        assert!(exact_match("the Eiffel Tower", "Eiffel tower."));
        assert!(!exact_match("Eiffel", "Eiffel tower"));
        // pred {new, york, city}, gold {new, york}: P = 2/3, R = 1, F1 = 0.8
        assert!(close(token_f1("New York City", "new york"), 0.8));
        // multiset: pred {a-less: "b b b"}, gold "b c": same = 1, P = 1/3, R = 1/2, F1 = 0.4
        assert!(close(token_f1("b b b", "b c"), 0.4));
        assert_eq!(token_f1("", "x"), 0.0);
        assert_eq!(token_f1("the", "a"), 0.0); // both normalise to nothing
        assert_eq!(token_f1("Paris", "London"), 0.0);
        assert!(close(
            token_f1("Barack Obama", "Obama"),
            2.0 * 0.5 * 1.0 / 1.5
        ));
    }

    #[test]
    fn qa_score_takes_max_over_aliases() {
        let answers = vec!["United States of America".to_string(), "USA".to_string()];
        let s = qa_score("the U.S.A.", &answers);
        assert_eq!(s.em, 1.0);
        assert_eq!(s.f1, 1.0);
        // F1 vs answer 0: pred {united, states}, gold {united, states, of, america}:
        // P = 1, R = 1/2, F1 = 2/3; vs "USA": 0.
        let s = qa_score("United States", &answers);
        assert_eq!(s.em, 0.0);
        assert!(close(s.f1, 2.0 / 3.0));
        assert_eq!(qa_score("x", &[]), QaScore::default());
    }

    #[test]
    fn percentiles_and_tokens() {
        let v = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
        // rank 0.5·9 = 4.5 → 55; rank 0.95·9 = 8.55 → 90 + 0.55·10 = 95.5
        assert!(close(percentile(&v, 50.0).unwrap(), 55.0));
        assert!(close(percentile(&v, 95.0).unwrap(), 95.5));
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, 0.0), Some(10.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(&[]), None);
        assert_eq!(whitespace_tokens("Title\nsome  text\there "), 4);
        assert_eq!(whitespace_tokens(""), 0);
    }
}

#[cfg(test)]
mod rank_metric_tests {
    use super::*;

    #[test]
    fn mrr_and_ndcg_follow_trec_eval() {
        // Gold {3: grade 2, 7: grade 1}; ranking 5, 7, 3.
        let ranking = [5, 7, 3];
        assert_eq!(mrr_at_k(&ranking, &[3, 7], 2, 10), Some(0.5));
        let dcg = 1.0 / 3f64.log2() + 2.0 / 4f64.log2();
        let idcg = 2.0 + 1.0 / 3f64.log2();
        let got = ndcg_at_k(&ranking, &[3, 7], &[2, 1], 2, 10).unwrap();
        assert!((got - dcg / idcg).abs() < 1e-12, "{got}");
        // Cut at 2: only 7 counts.
        let got = ndcg_at_k(&ranking, &[3, 7], &[2, 1], 2, 2).unwrap();
        assert!((got - (1.0 / 3f64.log2()) / idcg).abs() < 1e-12);
        // An unmatched gold passage lowers the ideal's share, as in Recall@k.
        let got = ndcg_at_k(&[3], &[3], &[], 2, 10).unwrap();
        assert!((got - 1.0 / (1.0 + 1.0 / 3f64.log2())).abs() < 1e-12);
        // Repeats after the first occurrence are ignored; no gold, no value.
        assert_eq!(mrr_at_k(&[5, 5, 3], &[3], 1, 2), Some(0.5));
        assert_eq!(ndcg_at_k(&[1], &[], &[], 0, 10), None);
    }
}
