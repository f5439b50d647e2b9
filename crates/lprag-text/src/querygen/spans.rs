//! Spans of a tokenised sentence that questions are written about: entity names and their
//! types, head nouns, dates, counts and clause ends.

use super::text::*;
use super::words::*;

/// Capitalised entity spans `(start, end)` (connectors allowed inside).
pub(super) fn entity_spans(toks: &[String]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let starts = is_cap(t)
            && !NON_ENTITY_CAPS.contains(t)
            && !MONTHS.contains(t)
            && t.chars().any(char::is_alphabetic);
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        let mut end = j;
        while j < toks.len() {
            let w = &toks[j];
            if (is_cap(w) && !MONTHS.contains(w)) || (is_number(w) && !is_year(w)) {
                j += 1;
                end = j;
            } else if ENTITY_CONNECTORS.contains(w) && toks.get(j + 1).is_some_and(|n| is_cap(n)) {
                j += 1;
            } else {
                break;
            }
        }
        out.push((i, end));
        i = end.max(i + 1);
    }
    out
}

/// A span of two to four capitalised words with no type word ("Carl Rogers").
pub(super) fn looks_like_person(span: &[String]) -> bool {
    (2..=4).contains(&span.len())
        && span.iter().all(|t| {
            is_cap(t)
                && t.chars()
                    .all(|c| c.is_alphabetic() || matches!(c, '.' | '-' | '\''))
        })
        && !span.iter().any(|t| TYPE_WORDS.contains(t))
}

/// The type word of a name, lower-cased: "University of California" → "university",
/// "Humaya River" → "river".
pub(super) fn type_word(span: &[String]) -> Option<String> {
    let head = span.iter().position(|w| w == "of").unwrap_or(span.len());
    span[..head]
        .iter()
        .rev()
        .find(|w| TYPE_WORDS.contains(w))
        .map(|w| lower(w))
}

/// "Who", "Which university", or "What" for an entity span.
pub(super) fn wh_for(span: &[String], person_hint: bool) -> Vec<String> {
    if let Some(t) = type_word(span) {
        return vec!["Which".into(), t];
    }
    if person_hint {
        vec!["Who".into()]
    } else {
        vec!["What".into()]
    }
}

/// First index ≥ `from` that ends the clause (or the length).
pub(super) fn clause_end(toks: &[String], from: usize) -> usize {
    (from..toks.len())
        .find(|&i| is_clause_break(&toks[i]))
        .unwrap_or(toks.len())
}

/// The head noun of "a/an/the [modifiers] head ..." starting at `from`; "a form of
/// psychotherapy" gives "psychotherapy".
pub(super) fn head_noun(toks: &[String], from: usize) -> Option<String> {
    let first = toks.get(from)?;
    if !matches!(lower(first).as_str(), "a" | "an" | "the") {
        return None;
    }
    let mut head = None;
    let mut k = from + 1;
    let limit = (from + 9).min(toks.len());
    while k < limit {
        let t = &toks[k];
        let l = lower(t);
        if l == "of"
            && head.as_deref().is_some_and(|h: &str| {
                is_in(
                    &[
                        "branch", "form", "genus", "kind", "member", "part", "species", "style",
                        "type", "variety",
                    ],
                    h,
                )
            })
        {
            head = None;
            k += 1;
            if toks
                .get(k)
                .is_some_and(|a| matches!(lower(a).as_str(), "a" | "an" | "the"))
            {
                k += 1;
            }
            continue;
        }
        let stop = is_punct(t)
            || PREPOSITIONS.contains(&l)
            || CLAUSE_WORDS.contains(&l)
            || matches!(l.as_str(), "that" | "and" | "or" | "located" | "based")
            || (l.len() > 4 && l.ends_with("ed") && head.is_some());
        if stop {
            break;
        }
        if t.chars().all(|c| c.is_alphabetic() || c == '-') && is_lower_word(t) {
            head = Some(l);
        } else if is_cap(t) || is_number(t) {
            head = None;
        }
        k += 1;
    }
    head
}

/// A date phrase: `(start incl. preposition, end, wh-phrase)`.
pub(super) fn find_dates(toks: &[String], from: usize) -> Vec<(usize, usize, &'static str)> {
    let mut out = Vec::new();
    let mut i = from;
    while i < toks.len() {
        let t = toks[i].as_str();
        let found = if MONTHS.contains(t) {
            month_date(toks, i)
        } else if is_year(t) || is_decade(t) {
            year_date(toks, i)
        } else {
            None
        };
        let Some(d) = found else {
            i += 1;
            continue;
        };
        let mut start = d.start;
        let prep = if start > 0 {
            lower(&toks[start - 1])
        } else {
            String::new()
        };
        let Some(wh) = date_wh(&prep, &d) else {
            i = d.end;
            continue;
        };
        if matches!(
            prep.as_str(),
            "in" | "on"
                | "since"
                | "until"
                | "till"
                | "by"
                | "before"
                | "after"
                | "during"
                | "around"
                | "circa"
                | "c."
        ) {
            start -= 1;
        }
        out.push((start, d.end, wh));
        i = d.end;
    }
    out
}

/// A date found by [`find_dates`], before its preposition is looked at.
struct DateSpan {
    start: usize,
    end: usize,
    /// It names a day.
    has_day: bool,
    /// A month without a year ("in May").
    month: bool,
    /// A decade ("the 1980s").
    decade: bool,
}

/// The date around the month name `toks[i]` ("3 May 1950", "May 3, 1950", "May 1950"),
/// unless it has neither a day nor a year.
fn month_date(toks: &[String], i: usize) -> Option<DateSpan> {
    let mut s = i;
    let mut e = i + 1;
    let mut has_day = false;
    if i > 0 && is_day(&toks[i - 1]) {
        s = i - 1;
        has_day = true;
    }
    if toks.get(e).is_some_and(|d| is_day(d)) {
        e += 1;
        has_day = true;
        if toks.get(e).is_some_and(|c| c == ",") && toks.get(e + 1).is_some_and(|y| is_year(y)) {
            e += 1;
        }
    }
    let year = toks.get(e).is_some_and(|y| is_year(y));
    if year {
        e += 1;
    }
    if !year && !has_day {
        return None;
    }
    Some(DateSpan {
        start: s,
        end: e,
        has_day,
        month: !year,
        decade: false,
    })
}

/// The year or decade `toks[i]` as a date, unless it is a count, part of a name or a
/// modifier.
fn year_date(toks: &[String], i: usize) -> Option<DateSpan> {
    let t = toks[i].as_str();
    // Not a count ("1548 people") and not part of a name ("Bucheon FC 1995").
    // Nor a modifier ("a 1984 film", "the 1996 Summer Olympics").
    let next_lower = toks
        .get(i + 1)
        .is_some_and(|n| is_lower_word(n) && n.ends_with('s'));
    let prev = if i > 0 { toks[i - 1].as_str() } else { "" };
    let prev_cap = is_cap(prev) && !PREPOSITIONS.contains(&lower(prev));
    let modifier = (!is_decade(t) && matches!(prev, "a" | "an" | "the"))
        || toks
            .get(i + 1)
            .is_some_and(|n| is_cap(n) && !MONTHS.contains(n));
    if next_lower || prev_cap || modifier {
        return None;
    }
    let mut s = i;
    if is_decade(t) && i > 0 && toks[i - 1] == "the" {
        s = i - 1;
    }
    Some(DateSpan {
        start: s,
        end: i + 1,
        has_day: false,
        month: false,
        decade: is_decade(t),
    })
}

/// The wh-phrase asking for date `d` after the preposition `prep` (lower-cased); `None`
/// for a date in a range ("from 1990 to 1995").
fn date_wh(prep: &str, d: &DateSpan) -> Option<&'static str> {
    Some(match prep {
        "from" | "between" | "to" | "and" | "–" | "-" => return None,
        "since" => "since when",
        "until" | "till" => "until when",
        "by" => "by what year",
        "before" => "before what year",
        "after" => "after what year",
        _ if d.has_day || d.month => "on what date",
        _ if d.decade => "in what decade",
        _ => "in what year",
    })
}

/// End of a coordinated part after a removed span ("in 1981 and a UNESCO site ...").
pub(super) fn after_and(t: &[String], from: usize) -> usize {
    (from..t.len())
        .find(|&i| t[i] == "and" || t[i] == "but")
        .unwrap_or(t.len())
}

/// A number followed by a lower-case noun phrase: `(number index, end of phrase)`.
pub(super) fn find_count(t: &[String], from: usize) -> Option<(usize, usize)> {
    for i in from..t.len() {
        let w = &t[i];
        // A year is a count only before a plural ("1548 people").
        let year_like = is_year(w) && !t.get(i + 1).is_some_and(|n| n.ends_with('s'));
        let numeric =
            (is_number(w) && !w.starts_with('$') && !year_like) || NUMBER_WORDS.contains(&lower(w));
        if !numeric {
            continue;
        }
        if i > 0
            && (matches!(lower(&t[i - 1]).as_str(), "no." | "number" | "the" | "of")
                || (is_cap(&t[i - 1]) && !NON_ENTITY_CAPS.contains(&t[i - 1])))
        {
            continue;
        }
        let mut j = i + 1;
        while j < t.len() && j < i + 4 {
            let n = &t[j];
            let l = lower(n);
            if !is_lower_word(n)
                || !n.chars().all(|c| c.is_alphabetic() || c == '-')
                || PREPOSITIONS.contains(&l)
                || FUNCTION_WORDS.contains(&l)
                || AUX.contains(&l)
                || CLAUSE_WORDS.contains(&l)
                || is_in(
                    &[
                        "percent", "times", "million", "billion", "thousand", "hundred",
                    ],
                    &l,
                )
            {
                break;
            }
            j += 1;
        }
        if j > i + 1 {
            // Keep the phrase short: stop after the first plural noun.
            if let Some(k) = (i + 1..j).find(|&k| t[k].ends_with('s') && !t[k].ends_with("ss")) {
                j = k + 1;
            }
            return Some((i, j));
        }
    }
    None
}
