//! The offline [`TripleExtractor`]: [`CooccurrenceExtractor`] reads entities and
//! triples out of chunks without a model:
//!
//! - **entities** are capitalised spans (`Bob Dylan`, `University of Minnesota`, with
//!   lower-case connectors such as `of`/`the`/`de` allowed inside a span, a leading
//!   article dropped), four-digit years, and the chunk's title;
//! - **triples** are `(a, "co-occurs with", b)` for entities `a` before `b` in the same
//!   sentence, and `(title, "mentions", e)` for every other entity of the chunk.
//!
//! It is a stand-in for OpenIE, not a parser: relations carry no meaning beyond
//! co-occurrence, and lower-case concepts ("jazz", "piano") are not entities.

use std::collections::HashSet;

use async_trait::async_trait;
use lprag_core::{Chunk, Extraction, Result, Triple, TripleExtractor};
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

use crate::chunker::sentence_spans;

/// Settings of [`CooccurrenceExtractor`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CooccurrenceConfig {
    /// Relation written between two entities of one sentence. Default `"co-occurs with"`.
    pub relation: String,
    /// Relation from the chunk's title to each of its entities; `None` adds no such
    /// triples. Default `Some("mentions")`.
    pub title_relation: Option<String>,
    /// Entities of a sentence that enter pairs (the first ones; a sentence with `m`
    /// entities gives `m(m−1)/2` triples). Default 8.
    pub max_entities_per_sentence: usize,
    /// Longest span in words. Default 6.
    pub max_span_words: usize,
    /// Count four-digit years (1000–2099) as entities. Default true.
    pub years: bool,
}

impl Default for CooccurrenceConfig {
    fn default() -> Self {
        Self {
            relation: "co-occurs with".into(),
            title_relation: Some("mentions".into()),
            max_entities_per_sentence: 8,
            max_span_words: 6,
            years: true,
        }
    }
}

/// The offline [`TripleExtractor`]: capitalised spans, years and titles as entities,
/// sentence co-occurrence and title mentions as triples (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct CooccurrenceExtractor {
    config: CooccurrenceConfig,
}

impl CooccurrenceExtractor {
    /// An extractor with `config`.
    pub fn new(config: CooccurrenceConfig) -> Self {
        Self { config }
    }

    /// The settings.
    pub fn config(&self) -> &CooccurrenceConfig {
        &self.config
    }

    /// Entity spans of one sentence (or any short text, e.g. a question), in order of
    /// appearance, without duplicates.
    pub fn spans(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        let mut push = |s: String| {
            if seen.insert(s.to_lowercase()) {
                out.push(s);
            }
        };
        let words: Vec<&str> = text.split_word_bounds().collect();
        let mut cur: Vec<&str> = Vec::new();
        let flush = |cur: &mut Vec<&str>, push: &mut dyn FnMut(String)| {
            while cur.last().is_some_and(|w| CONNECTORS.contains(w)) {
                cur.pop();
            }
            if cur.first().is_some_and(|w| ARTICLES.contains(w)) {
                cur.remove(0);
            }
            let lone_stop = cur.len() == 1 && STOP.contains(&cur[0].to_lowercase().as_str());
            if !cur.is_empty() && !lone_stop && cur.len() <= self.config.max_span_words {
                push(cur.join(" "));
            }
            cur.clear();
        };
        for w in words.iter().filter(|w| !w.trim().is_empty()) {
            let alnum = w.chars().any(char::is_alphanumeric);
            if (alnum && is_capitalised(w)) || (!cur.is_empty() && CONNECTORS.contains(w)) {
                cur.push(w);
            } else {
                flush(&mut cur, &mut push);
                if self.config.years && is_year(w) {
                    push(w.to_string());
                }
            }
        }
        flush(&mut cur, &mut push);
        out
    }

    /// The extraction of one chunk (what [`TripleExtractor::extract`] returns for it).
    pub fn extract_one(&self, chunk: &Chunk) -> Extraction {
        let c = &self.config;
        let title = chunk.provenance.title.trim();
        let mut entities: Vec<String> = Vec::new();
        let mut keys = HashSet::new();
        let mut add = |e: &str, entities: &mut Vec<String>| {
            if keys.insert(e.to_lowercase()) {
                entities.push(e.to_string());
            }
        };
        if !title.is_empty() {
            add(title, &mut entities);
        }
        let mut triples = Vec::new();
        let mut seen_triples = HashSet::new();
        for r in sentence_spans(&chunk.text) {
            let spans = self.spans(&chunk.text[r]);
            let spans = &spans[..spans.len().min(c.max_entities_per_sentence)];
            for (i, a) in spans.iter().enumerate() {
                add(a, &mut entities);
                for b in &spans[i + 1..] {
                    let t = Triple::new(a.clone(), c.relation.clone(), b.clone());
                    if seen_triples.insert(t.clone()) {
                        triples.push(t);
                    }
                }
            }
        }
        if let (Some(rel), false) = (&c.title_relation, title.is_empty()) {
            for e in &entities {
                if !e.eq_ignore_ascii_case(title) {
                    triples.push(Triple::new(title, rel.clone(), e.clone()));
                }
            }
        }
        Extraction { entities, triples }
    }
}

#[async_trait]
impl TripleExtractor for CooccurrenceExtractor {
    fn name(&self) -> &str {
        "cooccurrence"
    }

    async fn extract(&self, chunks: &[Chunk]) -> Result<Vec<Extraction>> {
        Ok(chunks.iter().map(|c| self.extract_one(c)).collect())
    }
}

fn is_capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
}

fn is_year(w: &str) -> bool {
    w.len() == 4
        && w.chars().all(|c| c.is_ascii_digit())
        && matches!(w.parse::<u32>(), Ok(1000..=2099))
}

/// Lower-case words allowed inside a capitalised span (`University of Minnesota`).
const CONNECTORS: &[&str] = &[
    "of", "the", "de", "la", "von", "van", "der", "del", "da", "&",
];
/// Dropped from the front of a span (`The Beatles` → `Beatles`).
const ARTICLES: &[&str] = &["The", "A", "An"];
/// Capitalised words that are not entities on their own (sentence openers, pronouns).
const STOP: &[&str] = &[
    "a", "after", "all", "also", "although", "an", "and", "as", "at", "because", "before", "but",
    "by", "during", "each", "for", "from", "he", "her", "his", "how", "however", "i", "if", "in",
    "it", "its", "many", "most", "on", "one", "or", "she", "since", "some", "that", "the", "their",
    "there", "these", "they", "this", "those", "though", "to", "under", "unlike", "until", "we",
    "what", "when", "where", "which", "while", "who", "whom", "whose", "why", "with", "within",
    "you",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassageChunker;
    use lprag_core::{Chunker, Document};

    fn chunk(title: &str, text: &str) -> Chunk {
        let docs = [Document::new("d", title, text)];
        let rt = block_on(PassageChunker.chunk(&docs));
        rt.unwrap().remove(0)
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn spans_are_capitalised_runs_with_connectors_years_and_no_openers() {
        let x = CooccurrenceExtractor::default();
        assert_eq!(
            x.spans("In 1961 Bob Dylan moved from the University of Minnesota to New York."),
            vec!["1961", "Bob Dylan", "University of Minnesota", "New York"]
        );
        // A lone sentence opener is not an entity; an article is dropped; duplicates go.
        assert_eq!(
            x.spans("The Beatles met He and the Beatles."),
            vec!["Beatles"]
        );
        // Trailing connectors are trimmed; punctuation ends a span.
        assert_eq!(x.spans("Queen of, Sheba"), vec!["Queen", "Sheba"]);
        let no_years = CooccurrenceExtractor::new(CooccurrenceConfig {
            years: false,
            ..Default::default()
        });
        assert_eq!(
            no_years.spans("Born in 1961 in Duluth"),
            vec!["Born", "Duluth"]
        );
    }

    #[test]
    fn triples_pair_entities_of_a_sentence_and_link_the_title() {
        let x = CooccurrenceExtractor::default();
        let c = chunk(
            "Bob Dylan",
            "Dylan grew up in Hibbing with Abe Zimmerman. He studied in Minneapolis.",
        );
        let e = x.extract_one(&c);
        assert_eq!(
            e.entities,
            vec![
                "Bob Dylan",
                "Dylan",
                "Hibbing",
                "Abe Zimmerman",
                "Minneapolis"
            ]
        );
        let co = |a: &str, b: &str| Triple::new(a, "co-occurs with", b);
        let m = |b: &str| Triple::new("Bob Dylan", "mentions", b);
        assert_eq!(
            e.triples,
            vec![
                co("Dylan", "Hibbing"),
                co("Dylan", "Abe Zimmerman"),
                co("Hibbing", "Abe Zimmerman"),
                m("Dylan"),
                m("Hibbing"),
                m("Abe Zimmerman"),
                m("Minneapolis"),
            ]
        );
        // The sentence cap keeps the first m entities only.
        let capped = CooccurrenceExtractor::new(CooccurrenceConfig {
            max_entities_per_sentence: 2,
            title_relation: None,
            ..Default::default()
        });
        let e = capped.extract_one(&c);
        assert_eq!(e.triples, vec![co("Dylan", "Hibbing")]);
        assert!(!e.entities.contains(&"Abe Zimmerman".to_string()));
    }
}
