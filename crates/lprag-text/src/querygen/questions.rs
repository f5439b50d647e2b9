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

pub(super) fn cand(toks: Vec<String>, answer: Option<String>, score: i32) -> Option<Cand> {
    let text = finish(toks);
    (text.split_whitespace().count() >= 3).then_some(Cand {
        text,
        answer,
        score,
    })
}

pub(super) fn sentence_questions(s: &Sent, title: &[String], person: bool) -> Vec<Cand> {
    let mut out = Vec::new();
    let t = &s.toks;
    let subj = || decapitalise_phrase(&t[..s.subj_end]);
    let subject_is_title =
        !title.is_empty() && s.subj_end > 0 && find_seq(&t[..s.subj_end], title) == Some(0);

    // Life dates.
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

    let aux = s.aux;
    let aux_w = aux.map(|a| lower(&t[a])).unwrap_or_default();
    let is_be = BE.contains(&aux_w);

    // Dates → "When ...?" (inverted) or "... in what year?" (in place).
    let date_from = if aux.is_some() { s.subj_end } else { 0 };
    if let Some(&(d0, d1, wh)) = find_dates(t, date_from).first() {
        let answer = join(&t[d0..d1]);
        let answer = answer
            .split_once(' ')
            .filter(|(p, _)| PREPOSITIONS.contains(p) || *p == "c.")
            .map_or(answer.clone(), |(_, r)| r.to_string());
        let after_end = clause_end(t, d1).min(after_and(t, d1));
        let after = &t[d1..after_end];
        match aux {
            Some(a) if d0 > a && wh != "until when" && wh != "since when" => {
                // "X is an American rock band formed in 1990" → "When was X formed?"
                let reduced = if is_be
                    && t.get(a + 1)
                        .is_some_and(|w| matches!(lower(w).as_str(), "a" | "an" | "the"))
                {
                    (a + 2..d0).find(|&p| {
                        past_of_participle(&t[p]).is_some()
                            && !t[a + 2..p]
                                .iter()
                                .any(|w| CLAUSE_WORDS.contains(w) || w == ";")
                    })
                } else {
                    None
                };
                let q = if let Some(p) = reduced {
                    [
                        vec!["When".into(), "was".into()],
                        subj(),
                        t[p..d0].to_vec(),
                        after.to_vec(),
                    ]
                    .concat()
                } else {
                    [
                        vec!["When".into(), aux_w.clone()],
                        subj(),
                        t[a + 1..d0].to_vec(),
                        after.to_vec(),
                    ]
                    .concat()
                };
                out.extend(cand(q, Some(answer), 3));
            }
            _ => {
                let q = [t[..d0].to_vec(), words(wh), after.to_vec()].concat();
                out.extend(cand(q, Some(answer), 2));
            }
        }
    }

    // Counts → "How many ...?".
    if let Some((i, j)) = find_count(t, date_from) {
        let np = t[i + 1..j].to_vec();
        let rest = &t[j..clause_end(t, j).min(after_and(t, j))];
        let have = matches!(aux_w.as_str(), "has" | "have" | "had");
        match aux {
            Some(a) if have && i == a + 1 => {
                let do_w = match aux_w.as_str() {
                    "has" => "does",
                    "have" => "do",
                    _ => "did",
                };
                let q = [
                    vec!["How".into(), "many".into()],
                    np,
                    vec![do_w.into()],
                    subj(),
                    vec!["have".into()],
                    rest.to_vec(),
                ]
                .concat();
                out.extend(cand(q, Some(t[i].clone()), 3));
            }
            _ => {
                let q = [t[..i].to_vec(), words("how many"), np, rest.to_vec()].concat();
                out.extend(cand(q, Some(t[i].clone()), 2));
            }
        }
    }

    let ents = entity_spans(t);

    if let Some(a) = aux {
        let subject = &t[..s.subj_end];
        let named_subject = subject
            .iter()
            .any(|w| is_cap(w) && !NON_ENTITY_CAPS.contains(w));
        let comp_head = if is_be { head_noun(t, a + 1) } else { None };
        let comp_person = is_be
            && t[a + 1..clause_end(t, a + 1)]
                .iter()
                .any(|w| PERSON_NOUNS.contains(w));
        // "Its general secretary is ..." : the subject names a role.
        let role_subject = subject
            .iter()
            .any(|w| PERSON_NOUNS.contains(&lower(w.trim_end_matches("'s"))));
        // Passive agent: "... developed by Carl Rogers" → "Who developed X?".
        if let Some(q) = passive_agent(t, a, subject, false) {
            out.push(q);
        }
        // Place: "X was born in Pyongyang" → "Where was X born?".
        if is_be {
            if let Some(q) = where_question(t, a, &aux_w, subj()) {
                out.push(q);
            }
        }
        // Copular complement.
        if is_be && a + 1 < t.len() {
            let comp = &t[a + 1..];
            if let Some(&(e0, e1)) = ents.iter().find(|(e0, _)| *e0 == a + 1) {
                // "X is Michel Thooris" → "Who is X?"
                let wh = wh_for(&t[e0..e1], role_subject);
                let q = [wh, vec![aux_w.clone()], subj()].concat();
                out.extend(cand(q, Some(join(&t[e0..e1])), 3));
            } else if let Some(head) = comp_head.clone() {
                let l0 = lower(&comp[0]);
                if named_subject && l0 != "the" {
                    let q = [
                        words(&format!("What kind of {head}")),
                        vec![aux_w.clone()],
                        subj(),
                    ]
                    .concat();
                    out.extend(cand(q, Some(join(&comp[..clause_end(comp, 1)])), 2));
                }
            }
        }
        // Subject: "X is a journal published by Y" → "What is a journal published by Y?"
        if named_subject && s.subj_end <= 8 && a + 1 < t.len() {
            let end = clause_end(t, a + 1);
            if end > a + 1 {
                let mut wh = wh_for(
                    subject,
                    (person && subject_is_title) || comp_person || role_subject,
                );
                if wh
                    .get(1)
                    .is_some_and(|x| comp_head.as_deref() == Some(x.as_str()))
                {
                    wh = vec!["What".into()];
                }
                let q = [wh, vec![aux_w.clone()], t[a + 1..end].to_vec()].concat();
                out.extend(cand(q, Some(join(subject)), 2));
            }
        }
    } else if let Some(&(0, e1)) = ents.first() {
        // "Sheeran wrote the song" → "Who wrote the song?"
        if e1 < t.len() && is_verb_like(&t[e1]) {
            let end = clause_end(t, e1);
            if end > e1 + 1 {
                let wh = wh_for(&t[..e1], person && find_seq(&t[..e1], title) == Some(0));
                let q = [wh, t[e1..end].to_vec()].concat();
                out.extend(cand(q, Some(join(&t[..e1])), 2));
            }
        }
    }

    // Cloze: an entity in the predicate replaced in place.
    let pred_from = if aux.is_some() { s.subj_end + 1 } else { 1 };
    if let Some(&(e0, e1)) = ents.iter().find(|(e0, e1)| {
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
    }) {
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
        out.extend(cand(q, Some(join(span)), 1));
    }
    out
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
