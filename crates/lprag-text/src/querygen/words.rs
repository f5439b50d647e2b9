//! The word lists of the query generator.
//!
//! Each list is a text file under `words/`, one entry per line, compiled in with
//! `include_str!` and parsed on first use into a [`WordList`] (a set for lookups that
//! keeps the file's order). `irregular.txt` holds "participle past" pairs, in order.

use std::collections::HashSet;
use std::sync::LazyLock;

/// A list of words, looked up by exact (case-sensitive) match.
pub(super) struct WordList {
    /// The words in file order.
    #[cfg_attr(not(test), allow(dead_code))]
    words: Vec<&'static str>,
    /// The same words, for lookups.
    set: HashSet<&'static str>,
}

impl WordList {
    /// The non-empty lines of `text`, trimmed.
    fn parse(text: &'static str) -> Self {
        let words: Vec<&'static str> = entries(text).collect();
        let set = words.iter().copied().collect();
        Self { words, set }
    }

    /// Whether `w` is in the list.
    pub(super) fn contains(&self, w: &str) -> bool {
        self.set.contains(w)
    }

    /// The words in file order.
    #[cfg(test)]
    pub(super) fn words(&self) -> &[&'static str] {
        &self.words
    }
}

/// The non-empty lines of a word file, trimmed.
fn entries(text: &'static str) -> impl Iterator<Item = &'static str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty())
}

/// Declare `static NAME: LazyLock<WordList>` loaded from `words/FILE`.
macro_rules! word_list {
    ($($(#[$doc:meta])* $name:ident = $file:literal;)*) => {$(
        $(#[$doc])*
        pub(super) static $name: LazyLock<WordList> =
            LazyLock::new(|| WordList::parse(include_str!(concat!("words/", $file))));
    )*};
}

word_list! {
    /// Auxiliary verbs that end a sentence's subject ("is", "has", "could").
    AUX = "auxiliaries.txt"; // not "aux.txt": AUX is a reserved file name on Windows
    /// Forms of "be" among [`AUX`].
    BE = "be.txt";
    /// Prepositions.
    PREPOSITIONS = "prepositions.txt";
    /// Words that open a subordinate clause.
    CLAUSE_WORDS = "clause_words.txt";
    /// Function words (articles, conjunctions, common prepositions and pronouns).
    FUNCTION_WORDS = "function_words.txt";
    /// Words that may open a sentence but are not part of an entity name.
    NON_ENTITY_CAPS = "non_entity_caps.txt";
    /// Lower-case words allowed inside an entity name ("University of California").
    ENTITY_CONNECTORS = "entity_connectors.txt";
    /// Month names and their abbreviations.
    MONTHS = "months.txt";
    /// Number words that start a count ("three", "hundreds").
    NUMBER_WORDS = "number_words.txt";
    /// Words that end an entity's name and say what kind of thing it is.
    TYPE_WORDS = "type_words.txt";
    /// Nouns that make "Who" the right question word.
    PERSON_NOUNS = "person_nouns.txt";
    /// Participles after which "in/at <Place>" answers "Where".
    WHERE_PARTICIPLES = "where_participles.txt";
    /// Openers that are dropped from the front of a sentence.
    DROP_OPENERS = "drop_openers.txt";
    /// Words that are poor topics for a fallback question.
    WEAK_WORDS = "weak_words.txt";
}

/// Irregular past participles and their past tense (for "Who <past> X?"), in file order.
pub(super) static IRREGULAR: LazyLock<Vec<(&'static str, &'static str)>> = LazyLock::new(|| {
    entries(include_str!("words/irregular.txt"))
        .map(|l| {
            let (participle, past) = l.split_once(' ').expect("irregular.txt: two words a line");
            (participle, past.trim())
        })
        .collect()
});
