//! Token helpers of the query generator: word classes, joining tokens into text and
//! finishing a question.

use super::words::*;
use crate::hashing::fnv1a64;

/// Whether `w` is one of `list` (a short inline list).
pub(super) fn is_in(list: &[&str], w: &str) -> bool {
    list.contains(&w)
}

/// `w` lower-cased.
pub(super) fn lower(w: &str) -> String {
    w.to_lowercase()
}

/// A token with no letter or digit.
pub(super) fn is_punct(t: &str) -> bool {
    !t.chars().any(char::is_alphanumeric)
}

/// A token that starts with an upper-case letter.
pub(super) fn is_cap(t: &str) -> bool {
    t.chars().next().is_some_and(char::is_uppercase)
}

/// A token that starts with a lower-case letter.
pub(super) fn is_lower_word(t: &str) -> bool {
    t.chars().next().is_some_and(char::is_lowercase)
}

/// `,`, `;`, `:` or a word that opens a subordinate clause.
pub(super) fn is_clause_break(t: &str) -> bool {
    matches!(t, "," | ";" | ":") || CLAUSE_WORDS.contains(t)
}

/// A year from 1000 to 2099.
pub(super) fn is_year(t: &str) -> bool {
    t.len() == 4
        && t.chars().all(|c| c.is_ascii_digit())
        && matches!(t.parse::<u32>(), Ok(1000..=2099))
}

/// A decade: "1980s".
pub(super) fn is_decade(t: &str) -> bool {
    let d = t.strip_suffix('s').unwrap_or("");
    d.len() == 4 && d.ends_with('0') && is_year(d)
}

/// A day of the month: one or two digits.
pub(super) fn is_day(t: &str) -> bool {
    !t.is_empty() && t.len() <= 2 && t.chars().all(|c| c.is_ascii_digit())
}

/// A number, maybe with `$`, thousands separators or a decimal point.
pub(super) fn is_number(t: &str) -> bool {
    let t = t.trim_start_matches('$');
    let mut digits = 0;
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits += 1;
        } else if c != ',' && c != '.' {
            return false;
        }
    }
    digits > 0 && t.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// `written` → `wrote`, `developed` → `developed`; `None` when not a participle.
pub(super) fn past_of_participle(w: &str) -> Option<String> {
    if let Some((_, p)) = IRREGULAR.iter().find(|(pp, _)| *pp == w) {
        return Some((*p).to_string());
    }
    (w.len() > 4 && w.ends_with("ed") && w.chars().all(|c| c.is_alphabetic() || c == '-'))
        .then(|| w.to_string())
}

/// A lower-case word that looks like a finite verb or participle ("wrote", "founded",
/// "borders").
pub(super) fn is_verb_like(w: &str) -> bool {
    let l = lower(w);
    is_lower_word(w)
        && !FUNCTION_WORDS.contains(&l)
        && !PREPOSITIONS.contains(&l)
        && !AUX.contains(&l)
        && (past_of_participle(&l).is_some()
            || IRREGULAR.iter().any(|(_, past)| *past == l)
            || (l.len() > 3 && l.ends_with('s') && !l.ends_with("ss") && !l.ends_with("us")))
}

/// Capitalise the first letter.
pub(super) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Lower-case a leading determiner or pronoun so a phrase can follow a question word.
pub(super) fn decapitalise_phrase(toks: &[String]) -> Vec<String> {
    let mut v = toks.to_vec();
    if let Some(f) = v.first_mut() {
        if is_in(
            &[
                "A", "All", "An", "Both", "Each", "Every", "Her", "His", "Its", "Many", "Most",
                "Some", "That", "The", "Their", "These", "This", "Those",
            ],
            f,
        ) {
            *f = lower(f);
        }
    }
    v
}

/// Join tokens with English spacing (no space before `,;:.?!)` or after `(`).
pub(super) fn join(toks: &[String]) -> String {
    let mut s = String::new();
    for t in toks {
        let no_space_before = matches!(t.as_str(), "," | ";" | ":" | "." | "?" | "!" | ")" | "]")
            || t.starts_with('\'');
        if !s.is_empty() && !no_space_before && !s.ends_with('(') && !s.ends_with('[') {
            s.push(' ');
        }
        s.push_str(t);
    }
    s
}

/// The whitespace-separated words of `s`.
pub(super) fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Finish a question: drop dangling function words, capitalise, add `?`.
pub(super) fn finish(mut toks: Vec<String>) -> String {
    while let Some(last) = toks.last() {
        let l = lower(last);
        if is_punct(last)
            || (FUNCTION_WORDS.contains(&l) && l != "it")
            || PREPOSITIONS.contains(&l)
            || is_in(&["beginning", "dating", "starting"], &l)
        {
            toks.pop();
        } else {
            break;
        }
    }
    while toks.first().is_some_and(|t| is_punct(t)) {
        toks.remove(0);
    }
    if toks.is_empty() {
        return String::new();
    }
    format!("{}?", capitalise(&join(&toks)))
}

/// Whether `seq` occurs in `toks` (see [`find_seq`]).
pub(super) fn contains_seq(toks: &[String], seq: &[String]) -> bool {
    find_seq(toks, seq).is_some()
}

/// The first index of `seq` in `toks`, tokens compared without trailing possessives.
pub(super) fn find_seq(toks: &[String], seq: &[String]) -> Option<usize> {
    if seq.is_empty() || seq.len() > toks.len() {
        return None;
    }
    (0..=toks.len() - seq.len()).find(|&i| {
        toks[i..i + seq.len()]
            .iter()
            .zip(seq)
            .all(|(a, b)| strip_possessive(a) == strip_possessive(b))
    })
}

/// A token without trailing possessives, as [`find_seq`] compares tokens.
pub(super) fn strip_possessive(mut t: &str) -> &str {
    while let Some(rest) = t.strip_suffix("'s") {
        t = rest;
    }
    t
}

/// Hash of a token as [`find_seq`] compares it.
pub(super) fn token_hash(t: &str) -> u64 {
    fnv1a64(&[strip_possessive(t).as_bytes()])
}
