//! Single-chunk question builders: wh-rewrites and cloze questions of one sentence, and
//! the fallback questions every chunk has.

use super::spans::*;
use super::text::*;
use super::words::*;
use super::{Cand, Sent};
use lprag_core::Chunk;

/// Prefix "In <title>, " when a question does not mention its chunk's title.
pub(super) fn with_title(q: &str, title: &[String], title_str: &str) -> String {
    if title.is_empty() || mentions(q, title) {
        return q.to_string();
    }
    let mut rest = q.to_string();
    let first: String = rest.split_whitespace().next().unwrap_or("").to_string();
    if NON_ENTITY_CAPS.contains(&first)
        || is_in(&["What", "Who", "When", "Where", "How", "Which"], &first)
    {
        rest = format!("{}{}", lower(&first), &rest[first.len()..]);
    }
    format!("In {title_str}, {rest}")
}

/// Does `q` mention at least half of the title's content words?
pub(super) fn mentions(q: &str, title: &[String]) -> bool {
    let qk: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(lower)
        .collect();
    let content: Vec<String> = title
        .iter()
        .flat_map(|t| {
            t.split(|c: char| !c.is_alphanumeric())
                .map(lower)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty() && !FUNCTION_WORDS.contains(w))
        .collect();
    if content.is_empty() {
        return true;
    }
    let hit = content.iter().filter(|w| qk.contains(w)).count();
    2 * hit >= content.len()
}

/// A candidate for the question `toks` (finished), or `None` when it has fewer than three
/// words.
pub(super) fn cand(toks: Vec<String>, answer: Option<String>, score: i32) -> Option<Cand> {
    let text = finish(toks);
    (text.split_whitespace().count() >= 3).then_some(Cand {
        text,
        answer,
        score,
    })
}

/// The single-sentence questions of `s`, in this order: life dates, a date, a count, the
/// questions about its subject and predicate, a cloze question. `person`: the chunk is
/// about a person.
pub(super) fn sentence_questions(s: &Sent, title: &[String], person: bool) -> Vec<Cand> {
    let mut out = life_questions(s);
    let p = Parts::new(s);
    // Dates and counts are looked for after the subject.
    let date_from = if s.aux.is_some() { s.subj_end } else { 0 };
    out.extend(date_question(&p, date_from));
    out.extend(count_question(&p, date_from));
    let ents = entity_spans(p.t);
    if let Some(a) = s.aux {
        out.extend(clause_questions(&p, a, &ents, title, person));
    } else if let Some(&(0, e1)) = ents.first() {
        out.extend(agent_question(p.t, e1, title, person));
    }
    out.extend(cloze_question(&p, &ents, title));
    out
}

/// A sentence with its auxiliary read: what the question builders of one sentence share.
struct Parts<'a> {
    s: &'a Sent,
    t: &'a [String],
    /// The auxiliary, lower-cased ("" when the sentence has none).
    aux_w: String,
    /// Whether the auxiliary is a form of "be".
    is_be: bool,
}

impl<'a> Parts<'a> {
    fn new(s: &'a Sent) -> Self {
        let aux_w = s.aux.map(|a| lower(&s.toks[a])).unwrap_or_default();
        let is_be = BE.contains(&aux_w);
        Self {
            s,
            t: &s.toks,
            aux_w,
            is_be,
        }
    }

    /// The subject, ready to follow a question word.
    fn subj(&self) -> Vec<String> {
        decapitalise_phrase(&self.t[..self.s.subj_end])
    }
}

/// "When was X born?" and "When did X die?" from life dates after the leading name.
fn life_questions(s: &Sent) -> Vec<Cand> {
    let mut out = Vec::new();
    if let Some((name, born, died)) = &s.life {
        if let Some(b) = born {
            out.extend(cand(
                [
                    vec!["When".into(), "was".into()],
                    name.clone(),
                    vec!["born".into()],
                ]
                .concat(),
                Some(b.clone()),
                3,
            ));
        }
        if let Some(d) = died {
            out.extend(cand(
                [
                    vec!["When".into(), "did".into()],
                    name.clone(),
                    vec!["die".into()],
                ]
                .concat(),
                Some(d.clone()),
                3,
            ));
        }
    }
    out
}

/// Dates → "When ...?" (inverted) or "... in what year?" (in place).
fn date_question(p: &Parts, date_from: usize) -> Option<Cand> {
    let t = p.t;
    let &(d0, d1, wh) = find_dates(t, date_from).first()?;
    let answer = join(&t[d0..d1]);
    let answer = answer
        .split_once(' ')
        .filter(|(w, _)| PREPOSITIONS.contains(w) || *w == "c.")
        .map_or(answer.clone(), |(_, r)| r.to_string());
    let after_end = clause_end(t, d1).min(after_and(t, d1));
    let after = &t[d1..after_end];
    match p.s.aux {
        Some(a) if d0 > a && wh != "until when" && wh != "since when" => {
            // "X is an American rock band formed in 1990" → "When was X formed?"
            let q = if let Some(r) = reduced_participle(p, a, d0) {
                [
                    vec!["When".into(), "was".into()],
                    p.subj(),
                    t[r..d0].to_vec(),
                    after.to_vec(),
                ]
                .concat()
            } else {
                [
                    vec!["When".into(), p.aux_w.clone()],
                    p.subj(),
                    t[a + 1..d0].to_vec(),
                    after.to_vec(),
                ]
                .concat()
            };
            cand(q, Some(answer), 3)
        }
        _ => {
            let q = [t[..d0].to_vec(), words(wh), after.to_vec()].concat();
            cand(q, Some(answer), 2)
        }
    }
}

/// In "X is a/an/the <noun> <participle> ... <date>", the participle's index.
fn reduced_participle(p: &Parts, a: usize, d0: usize) -> Option<usize> {
    let t = p.t;
    let article = t
        .get(a + 1)
        .is_some_and(|w| matches!(lower(w).as_str(), "a" | "an" | "the"));
    if !(p.is_be && article) {
        return None;
    }
    (a + 2..d0).find(|&k| {
        past_of_participle(&t[k]).is_some()
            && !t[a + 2..k]
                .iter()
                .any(|w| CLAUSE_WORDS.contains(w) || w == ";")
    })
}

/// Counts → "How many ...?".
fn count_question(p: &Parts, date_from: usize) -> Option<Cand> {
    let t = p.t;
    let (i, j) = find_count(t, date_from)?;
    let np = t[i + 1..j].to_vec();
    let rest = &t[j..clause_end(t, j).min(after_and(t, j))];
    let have = matches!(p.aux_w.as_str(), "has" | "have" | "had");
    match p.s.aux {
        Some(a) if have && i == a + 1 => {
            let do_w = match p.aux_w.as_str() {
                "has" => "does",
                "have" => "do",
                _ => "did",
            };
            let q = [
                vec!["How".into(), "many".into()],
                np,
                vec![do_w.into()],
                p.subj(),
                vec!["have".into()],
                rest.to_vec(),
            ]
            .concat();
            cand(q, Some(t[i].clone()), 3)
        }
        _ => {
            let q = [t[..i].to_vec(), words("how many"), np, rest.to_vec()].concat();
            cand(q, Some(t[i].clone()), 2)
        }
    }
}

/// Questions of a sentence with a subject and auxiliary `a`: a passive agent, a place, a
/// copular complement, the subject.
fn clause_questions(
    p: &Parts,
    a: usize,
    ents: &[(usize, usize)],
    title: &[String],
    person: bool,
) -> Vec<Cand> {
    let (s, t) = (p.s, p.t);
    let subject = &t[..s.subj_end];
    let subject_is_title =
        !title.is_empty() && s.subj_end > 0 && find_seq(subject, title) == Some(0);
    let named_subject = subject
        .iter()
        .any(|w| is_cap(w) && !NON_ENTITY_CAPS.contains(w));
    let comp_head = if p.is_be { head_noun(t, a + 1) } else { None };
    let comp_person = p.is_be
        && t[a + 1..clause_end(t, a + 1)]
            .iter()
            .any(|w| PERSON_NOUNS.contains(w));
    // "Its general secretary is ..." : the subject names a role.
    let role_subject = subject
        .iter()
        .any(|w| PERSON_NOUNS.contains(&lower(w.trim_end_matches("'s"))));
    let mut out = Vec::new();
    // Passive agent: "... developed by Carl Rogers" → "Who developed X?".
    out.extend(passive_agent(t, a, subject, false));
    // Place: "X was born in Pyongyang" → "Where was X born?".
    if p.is_be {
        out.extend(where_question(t, a, &p.aux_w, p.subj()));
    }
    let comp_head = comp_head.as_deref();
    out.extend(copular_question(
        p,
        a,
        ents,
        comp_head,
        named_subject,
        role_subject,
    ));
    if named_subject && s.subj_end <= 8 && a + 1 < t.len() {
        let person_hint = (person && subject_is_title) || comp_person || role_subject;
        out.extend(subject_question(p, a, comp_head, person_hint));
    }
    out
}

/// Copular complement: "X is Michel Thooris" → "Who is X?", "X is a journal ..." → "What
/// kind of journal is X?".
fn copular_question(
    p: &Parts,
    a: usize,
    ents: &[(usize, usize)],
    comp_head: Option<&str>,
    named_subject: bool,
    role_subject: bool,
) -> Option<Cand> {
    let t = p.t;
    if !p.is_be || a + 1 >= t.len() {
        return None;
    }
    let comp = &t[a + 1..];
    if let Some(&(e0, e1)) = ents.iter().find(|(e0, _)| *e0 == a + 1) {
        let wh = wh_for(&t[e0..e1], role_subject);
        let q = [wh, vec![p.aux_w.clone()], p.subj()].concat();
        return cand(q, Some(join(&t[e0..e1])), 3);
    }
    let head = comp_head?;
    if !named_subject || lower(&comp[0]) == "the" {
        return None;
    }
    let q = [
        words(&format!("What kind of {head}")),
        vec![p.aux_w.clone()],
        p.subj(),
    ]
    .concat();
    cand(q, Some(join(&comp[..clause_end(comp, 1)])), 2)
}

/// Subject: "X is a journal published by Y" → "What is a journal published by Y?"
fn subject_question(
    p: &Parts,
    a: usize,
    comp_head: Option<&str>,
    person_hint: bool,
) -> Option<Cand> {
    let t = p.t;
    let subject = &t[..p.s.subj_end];
    let end = clause_end(t, a + 1);
    if end <= a + 1 {
        return None;
    }
    let mut wh = wh_for(subject, person_hint);
    if wh.get(1).is_some_and(|x| comp_head == Some(x.as_str())) {
        wh = vec!["What".into()];
    }
    let q = [wh, vec![p.aux_w.clone()], t[a + 1..end].to_vec()].concat();
    cand(q, Some(join(subject)), 2)
}

/// A leading entity `t[..e1]` before a verb: "Sheeran wrote the song" → "Who wrote the
/// song?"
fn agent_question(t: &[String], e1: usize, title: &[String], person: bool) -> Option<Cand> {
    if e1 >= t.len() || !is_verb_like(&t[e1]) {
        return None;
    }
    let end = clause_end(t, e1);
    if end <= e1 + 1 {
        return None;
    }
    let wh = wh_for(&t[..e1], person && find_seq(&t[..e1], title) == Some(0));
    let q = [wh, t[e1..end].to_vec()].concat();
    cand(q, Some(join(&t[..e1])), 2)
}

/// Cloze: an entity in the predicate replaced in place.
fn cloze_question(p: &Parts, ents: &[(usize, usize)], title: &[String]) -> Option<Cand> {
    let t = p.t;
    let pred_from = if p.s.aux.is_some() {
        p.s.subj_end + 1
    } else {
        1
    };
    let &(e0, e1) = ents.iter().find(|(e0, e1)| {
        let b = if *e0 >= 2 && t[*e0 - 1] == "the" {
            *e0 - 2
        } else {
            e0.saturating_sub(1)
        };
        let governed = *e0 >= 1 && (PREPOSITIONS.contains(&lower(&t[b])) || is_verb_like(&t[b]));
        *e0 >= pred_from
            && governed
            && !contains_seq(title, &t[*e0..*e1])
            && find_seq(&t[*e0..*e1], title).is_none()
    })?;
    let mut s0 = e0;
    if s0 > 0 && t[s0 - 1] == "the" {
        s0 -= 1;
    }
    let span = &t[e0..e1];
    let mut wh: Vec<String> = wh_for(span, false).into_iter().map(|w| lower(&w)).collect();
    if wh == ["who"] && s0 > 0 && PREPOSITIONS.contains(&lower(&t[s0 - 1])) {
        wh = vec!["whom".into()];
    }
    if wh == ["what"] && s0 > 0 && matches!(lower(&t[s0 - 1]).as_str(), "in" | "at" | "near") {
        wh = words("which place");
    }
    let end = clause_end(t, e1);
    let q = [t[..s0].to_vec(), wh, t[e1..end].to_vec()].concat();
    cand(q, Some(join(span)), 1)
}

/// "X is a journal published by Y" → "Who/Which ... published X?". `person`: the text
/// names the agent with a person noun ("by psychologist Carl Rogers").
pub(super) fn passive_agent(
    t: &[String],
    a: usize,
    subject: &[String],
    person: bool,
) -> Option<Cand> {
    if subject.is_empty() {
        return None;
    }
    let by = (a + 1..t.len()).find(|&i| t[i] == "by")?;
    // participle [adverbs] by
    let mut p = by.checked_sub(1)?;
    let mut adverbs = Vec::new();
    while p > a && t[p].ends_with("ly") && adverbs.len() < 2 {
        adverbs.insert(0, t[p].clone());
        p -= 1;
    }
    if p <= a || t[a + 1..p].iter().any(|w| is_clause_break(w)) {
        return None;
    }
    let past = past_of_participle(&t[p])?;
    // The agent: optional "the" / one role noun, then a capitalised span.
    let mut e0 = by + 1;
    let mut role_noun = false;
    if let Some(w) = t.get(e0) {
        if w == "the" {
            e0 += 1;
        } else if is_lower_word(w) && t.get(e0 + 1).is_some_and(|n| is_cap(n)) {
            role_noun = true;
            e0 += 1;
        }
    }
    let person = person || role_noun;
    let spans = entity_spans(t);
    let &(s0, e1) = spans.iter().find(|(s0, _)| *s0 == e0)?;
    let agent = &t[s0..e1];
    let wh = wh_for(agent, person || looks_like_person(agent));
    let q = [wh, vec![past], decapitalise_phrase(subject), adverbs].concat();
    cand(q, Some(join(&t[by + 1..e1])), 3)
}

/// Place: "X was born in Pyongyang" → "Where was X born?" (`aux_w`: the auxiliary;
/// `subj`: the subject, ready to follow it).
pub(super) fn where_question(
    t: &[String],
    a: usize,
    aux_w: &str,
    subj: Vec<String>,
) -> Option<Cand> {
    let mut i = a + 1;
    while i < t.len() && i <= a + 3 && !WHERE_PARTICIPLES.contains(&t[i]) {
        i += 1;
    }
    if i >= t.len() || !WHERE_PARTICIPLES.contains(&t[i]) {
        return None;
    }
    let p = (i + 1..t.len().min(i + 5)).find(|&k| matches!(t[k].as_str(), "in" | "at" | "near"))?;
    let mut e0 = p + 1;
    if t.get(e0).is_some_and(|w| w == "the") {
        e0 += 1;
    }
    let place_tok = t.get(e0)?;
    if !is_cap(place_tok) || MONTHS.contains(place_tok) || is_year(place_tok) {
        return None;
    }
    let end = clause_end(t, e0);
    // A trailing ", Country" belongs to the answer.
    let mut ans_end = end;
    let mut k = end;
    while t.get(k).is_some_and(|c| c == ",") && t.get(k + 1).is_some_and(|w| is_cap(w)) {
        k = clause_end(t, k + 1);
        ans_end = k;
    }
    let answer: Vec<String> = t[e0..ans_end]
        .iter()
        .take_while(|w| !is_year(w) && !is_in(&["in", "on"], w))
        .cloned()
        .collect();
    let q = [
        vec!["Where".into(), aux_w.into()],
        subj,
        t[a + 1..p].to_vec(),
    ]
    .concat();
    cand(q, Some(join(&answer)), 3)
}

/// Questions that always exist, so every batch gets its queries: "What is the connection
/// between <title> and <entity>?", "What is known about the <noun> of <title>?".
pub(super) fn fallback_questions(chunk: &Chunk, sents: &[Sent], title: &str) -> Vec<Cand> {
    let title_lc = lower(title);
    let topic = if !title.is_empty() {
        title.to_string()
    } else {
        let first = sents.first().map(|s| entity_spans(&s.toks));
        match (first, sents.first()) {
            (Some(e), Some(s)) if !e.is_empty() => join(&s.toks[e[0].0..e[0].1]),
            _ => chunk
                .text
                .split_whitespace()
                .take(6)
                .collect::<Vec<_>>()
                .join(" "),
        }
    };
    let topic = topic
        .trim_end_matches(['.', ',', ';', ':', '!', '?'])
        .to_string();
    // Named entities of the chunk that are not the topic, in order.
    let mut names: Vec<String> = Vec::new();
    // Noun-like content words, longest first.
    let mut nouns: Vec<(usize, usize, String)> = Vec::new();
    for s in sents {
        for (e0, e1) in entity_spans(&s.toks) {
            if e0 == 0 && e1 == 1 {
                continue; // "Snowfall is ...": a capitalised common noun, likely.
            }
            let e = join(&s.toks[e0..e1]);
            let el = lower(&e);
            if !title_lc.contains(&el) && !lower(&topic).contains(&el) && !names.contains(&e) {
                names.push(e);
            }
        }
        for w in &s.toks {
            let l = lower(w);
            let n = l.chars().count();
            if is_lower_word(w)
                && n >= 5
                && l.chars().all(|c| c.is_alphabetic() || c == '-')
                && !l.ends_with("ly")
                && !l.ends_with("ing")
                && past_of_participle(&l).is_none()
                && !WEAK_WORDS.contains(&l)
                && !title_lc.contains(&l)
                && !nouns.iter().any(|(_, _, k)| *k == l)
            {
                nouns.push((usize::MAX - n, nouns.len(), l));
            }
        }
    }
    nouns.sort();
    let mk = |text: String, score| Cand {
        text,
        answer: None,
        score,
    };
    let mut out = Vec::new();
    if topic.is_empty() {
        out.push(mk("What does this passage say?".into(), -2));
        return out;
    }
    if let Some(e) = names.first() {
        out.push(mk(
            format!("What is the connection between {topic} and {e}?"),
            -1,
        ));
    }
    for (_, _, n) in nouns.iter().take(2) {
        out.push(mk(format!("What is known about the {n} of {topic}?"), -2));
    }
    out.push(mk(format!("What is known about {topic}?"), -3));
    out
}
