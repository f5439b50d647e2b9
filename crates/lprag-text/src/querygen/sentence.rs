//! Sentence preparation: normalise and tokenise a sentence, drop discourse openers, put
//! the title for leading pronouns, and find the subject, the auxiliary and life dates.

use super::text::*;
use super::words::*;
use super::Sent;
use crate::chunker::is_initialism;

/// The title without a trailing disambiguation ("Brother (Pearl Jam song)" → "Brother").
pub(super) fn clean_title(title: &str) -> String {
    let t = title.trim();
    match (t.rfind(" ("), t.ends_with(')')) {
        (Some(i), true) if i > 0 => t[..i].trim().to_string(),
        _ => t.to_string(),
    }
}

/// Normalise tokenised-text artefacts: ``quotes'', "Person - centered", " ,", " 's".
pub(super) fn normalise(s: &str) -> String {
    let s = s
        .replace("``", "\"")
        .replace("''", "\"")
        .replace(['“', '”'], "\"")
        .replace(['‘', '’'], "'")
        .replace('\u{feff}', "");
    let mut s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [
        (" - ", "-"),
        (" ,", ","),
        (" ;", ";"),
        (" :", ":"),
        (" .", "."),
        (" 's", "'s"),
        ("( ", "("),
        (" )", ")"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// Remove bracketed asides; return the text and the asides with the number of words
/// before each.
pub(super) fn strip_brackets(s: &str) -> (String, Vec<(usize, String)>) {
    let mut out = String::new();
    let mut asides = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' => {
                if depth == 0 {
                    cur.clear();
                }
                depth += 1;
            }
            ')' | ']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    asides.push((out.split_whitespace().count(), cur.trim().to_string()));
                }
            }
            _ if depth > 0 => cur.push(c),
            _ => out.push(c),
        }
    }
    (out.split_whitespace().collect::<Vec<_>>().join(" "), asides)
}

/// Split a normalised sentence into word and punctuation tokens (quotes dropped).
pub(super) fn tokenise(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in s.split_whitespace() {
        let mut p = piece.trim_start_matches(['"', '\'', '`']);
        let mut tail = Vec::new();
        while let Some(last) = p.chars().last() {
            if matches!(last, '"' | '`' | '!' | '?') {
                p = &p[..p.len() - last.len_utf8()];
            } else if matches!(last, ',' | ';' | ':') {
                tail.push(last.to_string());
                p = &p[..p.len() - 1];
            } else if last == '.' {
                let stem = &p[..p.len() - 1];
                if is_initialism(stem) || MONTHS.contains(p) || stem.ends_with('.') {
                    break;
                }
                p = stem;
            } else if last == '\'' && !p.ends_with("s'") {
                p = &p[..p.len() - 1];
            } else {
                break;
            }
        }
        if !p.is_empty() {
            out.push(p.to_string());
        }
        out.extend(tail.into_iter().rev());
    }
    out
}

/// A sentence of a chunk prepared for rewriting: normalised and tokenised, discourse
/// openers dropped, a leading pronoun or generic subject replaced by the title, subject
/// and auxiliary found. `None` when nothing is left, or for a clause piece ("which ...")
/// of a chunk without a title. `title`: the chunk's title tokenised; `title_words`: the
/// full title's words, lower-cased.
pub(super) fn prepare_sentence(
    raw: &str,
    title: &[String],
    title_words: &[String],
) -> Option<Sent> {
    let norm = normalise(raw);
    let (plain, asides) = strip_brackets(&norm);
    let mut toks = tokenise(&plain);
    drop_openers(&mut toks);
    // A clause piece "which ..." / "who ...": its subject is (usually) the title.
    if toks.first().is_some_and(|f| f == "which" || f == "who") {
        if title.is_empty() {
            return None;
        }
        toks.splice(0..1, title.iter().cloned());
    }
    move_leading_adverbial(&mut toks);
    if !title.is_empty() && toks.len() > 1 {
        title_for_subject(&mut toks, title, title_words);
    }
    if !toks.iter().any(|t| !is_punct(t)) {
        return None;
    }
    if let Some(f) = toks.first_mut() {
        *f = capitalise(f);
    }
    let (aux, subj_end) = match subject_and_aux(&toks) {
        Some(a) => attach_title(&mut toks, a, title),
        None => (None, 0),
    };
    let life = life_dates(&toks, &asides);
    Some(Sent {
        toks,
        aux,
        subj_end,
        life,
    })
}

/// Drop leading discourse words ("However,", "and", "while") and punctuation.
fn drop_openers(toks: &mut Vec<String>) {
    while let Some(f) = toks.first() {
        let l = lower(f);
        if DROP_OPENERS.contains(&l) || is_punct(f) {
            toks.remove(0);
        } else {
            break;
        }
    }
}

/// A short leading adverbial ("In 2007, X was ...") moves to the end.
fn move_leading_adverbial(toks: &mut Vec<String>) {
    if let Some(first) = toks.first() {
        let lf = lower(first);
        if is_cap(first) && PREPOSITIONS.contains(&lf) {
            if let Some(c) = toks.iter().take(9).position(|t| t == ",") {
                if c + 1 < toks.len() {
                    let mut adv: Vec<String> = toks.drain(..=c).collect();
                    adv.pop();
                    adv[0] = lf;
                    toks.extend(adv);
                }
            }
        }
    }
}

/// Leading pronoun or generic subject ("It", "His", "The journal") → the title.
fn title_for_subject(toks: &mut Vec<String>, title: &[String], title_words: &[String]) {
    let first = toks[0].as_str();
    if matches!(first, "He" | "She" | "It" | "They") {
        toks.splice(0..1, title.iter().cloned());
    } else if matches!(first, "His" | "Her" | "Its" | "Their") {
        let mut t = title.to_vec();
        if let Some(l) = t.last_mut() {
            l.push_str("'s");
        }
        toks.splice(0..1, t);
    } else if matches!(first, "The" | "This" | "These") {
        let title_lc = title_words;
        let mentions_title = contains_seq(toks, title);
        for k in [2usize, 3] {
            let Some(head) = toks.get(k - 1) else { break };
            let next_ok = toks.get(k).is_some_and(|n| is_lower_word(n));
            let all_lower = toks[1..k].iter().all(|t| is_lower_word(t));
            if !mentions_title && all_lower && next_ok && title_lc.contains(&lower(head)) {
                toks.splice(0..k, title.iter().cloned());
                break;
            }
        }
    }
}

/// The subject and auxiliary of a sentence: `(auxiliary index, end of the subject)`.
fn subject_and_aux(toks: &[String]) -> Option<(usize, usize)> {
    let a = (1..toks.len().min(16)).find(|&i| AUX.contains(&toks[i]))?;
    let comma = toks[..a].iter().position(|t| t == ",");
    match comma {
        None if !toks[..a].iter().any(|t| CLAUSE_WORDS.contains(t)) => Some((a, a)),
        Some(c)
            if (1..=6).contains(&c)
                && toks[..c].iter().any(|t| is_cap(t))
                && !toks[..a].iter().any(|t| CLAUSE_WORDS.contains(t)) =>
        {
            Some((a, c))
        }
        _ => None,
    }
}

/// A generic subject gets the title attached: "The current editor is ..." → "The current
/// editor of <title> is ...". Takes and gives `(auxiliary index, end of the subject)`.
fn attach_title(
    toks: &mut Vec<String>,
    (a, subj_end): (usize, usize),
    title: &[String],
) -> (Option<usize>, usize) {
    let generic = subj_end == a
        && (3..=5).contains(&a)
        && toks[0] == "The"
        && toks[1..a].iter().all(|t| is_lower_word(t));
    if generic && !title.is_empty() && !contains_seq(toks, title) {
        let mut ins = vec!["of".to_string()];
        ins.extend(title.iter().cloned());
        let n = ins.len();
        toks.splice(a..a, ins);
        return (Some(a + n), a + n);
    }
    (Some(a), subj_end)
}

/// Life dates: "Name (3 November 1886 – 10 December 1958)" or "(born 1950)", from the
/// first aside with a digit after a leading capitalised name.
fn life_dates(toks: &[String], asides: &[(usize, String)]) -> Life {
    let (at, text) = asides
        .iter()
        .find(|(_, t)| t.chars().any(|c| c.is_ascii_digit()))?;
    let name: Vec<String> = toks.iter().take(*at).cloned().collect();
    if *at >= 1 && *at <= 6 && name.iter().all(|t| is_cap(t)) {
        parse_life(text).map(|(b, d)| (name, b, d))
    } else {
        None
    }
}

/// Life dates of a sentence: (name, born, died).
type Life = Option<(Vec<String>, Option<String>, Option<String>)>;

/// "born 9 May 1950" → (Some(born), None); "3 November 1886 – 10 December 1958" →
/// (Some, Some).
pub(super) fn parse_life(text: &str) -> Option<(Option<String>, Option<String>)> {
    let text = text.rsplit(';').next().unwrap_or(text).trim();
    let has_year = |s: &str| s.split(|c: char| !c.is_ascii_digit()).any(is_year);
    if let Some(rest) = text
        .strip_prefix("born ")
        .or_else(|| text.strip_prefix("b. "))
    {
        let born = rest
            .split(" in ")
            .next()
            .unwrap_or(rest)
            .trim()
            .trim_end_matches(',');
        return has_year(born).then(|| (Some(born.to_string()), None));
    }
    for dash in [" – ", " — ", " - ", "–", "—"] {
        if let Some((a, b)) = text.split_once(dash) {
            let (a, b) = (a.trim(), b.trim());
            if has_year(a) && has_year(b) && a.len() <= 25 && b.len() <= 25 {
                return Some((Some(a.to_string()), Some(b.to_string())));
            }
        }
    }
    None
}
