//! Multi-hop questions: a question about an entity of one chunk, with the entity replaced
//! by a description drawn from another chunk of the batch.

use std::collections::HashSet;

use super::sentence::tokenise;
use super::spans::*;
use super::text::*;
use super::words::*;
use super::{Analysed, BridgePlan, Cand, Rng, Sent};
use lprag_core::ChunkId;

/// Most chunks of one batch whose pairs are tried for multi-hop questions: every ordered
/// pair is tried below this (23 · 22 = 506 pairs), so the cost per batch is bounded
/// however many neighbours a hub chunk has.
pub(super) const MAX_MULTI_HOP_CHUNKS: usize = 23;

/// The chunks of `batch` tried for multi-hop questions: all of them when there are at most
/// [`MAX_MULTI_HOP_CHUNKS`], else the target chunk (first) and a random subset of the
/// others, in batch order.
pub(super) fn multi_hop_chunks<'a>(batch: &[&'a Analysed], rng: &mut Rng) -> Vec<&'a Analysed> {
    if batch.len() <= MAX_MULTI_HOP_CHUNKS {
        return batch.to_vec();
    }
    // Partial Fisher–Yates over the positions after the target.
    let mut pos: Vec<usize> = (1..batch.len()).collect();
    let keep = MAX_MULTI_HOP_CHUNKS - 1;
    for i in 0..keep {
        let j = i + (rng.next_u64() % (pos.len() - i) as u64) as usize;
        pos.swap(i, j);
    }
    pos.truncate(keep);
    pos.sort_unstable();
    std::iter::once(batch[0])
        .chain(pos.into_iter().map(|p| batch[p]))
        .collect()
}

/// Multi-hop candidates of a batch with the ordered chunk pair `(description source,
/// question source)` they join.
pub(super) fn multi_hop_candidates(
    batch: &[&Analysed],
    max_words: usize,
) -> Vec<(Cand, (ChunkId, ChunkId))> {
    let mut out = Vec::new();
    let mut texts: HashSet<String> = HashSet::new();
    for a in batch {
        for b in batch {
            if a.id == b.id {
                continue;
            }
            for plan in &b.plans {
                if let Some(c) = bridge(a, b, plan, max_words) {
                    if texts.insert(c.text.clone()) {
                        out.push((c, (a.id, b.id)));
                    }
                }
            }
        }
    }
    out
}

/// The entities question `qb` (of the chunk titled `title`) could be bridged on: spans
/// of the question, longest first, the title first; those in the answer, possessive
/// ones and appositions are dropped.
pub(super) fn bridge_plan(cand: usize, qb: &Cand, title: &[String]) -> BridgePlan {
    let q_toks = tokenise(qb.text.trim_end_matches('?'));
    let answer = qb.answer.as_deref().unwrap_or("");
    let mut ents: Vec<Vec<String>> = Vec::new();
    if !title.is_empty() {
        ents.push(title.to_vec());
    }
    for (e0, e1) in entity_spans(&q_toks) {
        // Multi-word names only: single capitalised words are often adjectives
        // ("American") or fragments.
        if e1 - e0 >= 2 && (e0 > 0 || e1 < q_toks.len()) {
            ents.push(q_toks[e0..e1].to_vec());
        }
    }
    let mut kept = Vec::new();
    for e in ents {
        let e_str = join(&e);
        if e_str.chars().count() < 3 || answer.contains(&e_str) {
            continue;
        }
        let Some(pos) = find_seq(&q_toks, &e) else {
            continue;
        };
        // Do not bridge on the possessive form ("X's editor").
        if q_toks[pos + e.len() - 1].ends_with("'s") {
            continue;
        }
        // Nor on an apposition ("the band Pearl Jam"): the entity must follow a
        // preposition, a verb, "the", or start the question.
        if pos > 0 {
            let prev = lower(&q_toks[pos - 1]);
            let ok = prev == "the"
                || prev == ","
                || PREPOSITIONS.contains(&prev)
                || AUX.contains(&prev)
                || is_in(
                    &[
                        "did", "do", "does", "what", "when", "where", "who", "which", "how",
                    ],
                    &prev,
                )
                || is_verb_like(&q_toks[pos - 1]);
            if !ok {
                continue;
            }
        }
        let h = token_hash(&e[0]);
        kept.push((e, pos, h));
    }
    BridgePlan {
        cand,
        q_toks,
        ents: kept,
    }
}

/// Join: take a question about chunk `b` (its `plan`), find an entity of it that chunk
/// `a` describes, and replace it by that description.
pub(super) fn bridge(
    a: &Analysed,
    b: &Analysed,
    plan: &BridgePlan,
    max_words: usize,
) -> Option<Cand> {
    let qb = &b.cands[plan.cand];
    let q_toks = &plan.q_toks;
    for (e, pos, h) in &plan.ents {
        // `describe` needs the entity in one of a's sentences.
        if a.vocab.binary_search(h).is_err() {
            continue;
        }
        let pos = *pos;
        for s in &a.sents {
            let Some(desc) = describe(a, s, e, b) else {
                continue;
            };
            let mut q: Vec<String> = q_toks[..pos].to_vec();
            if q.last().is_some_and(|w| w == "the" || w == "The") {
                q.pop();
            }
            q.extend(desc);
            q.extend(q_toks[pos + e.len()..].iter().cloned());
            let text = finish(q);
            let n = text.split_whitespace().count();
            if n < 5 || n > max_words + 8 {
                continue;
            }
            // "In <title>, " prefixes from the single-hop question stay meaningful.
            return Some(Cand {
                text,
                answer: qb.answer.clone(),
                score: qb.score + if *e == b.title { 1 } else { 0 },
            });
        }
    }
    None
}

/// "the <type> <relative clause>" describing entity `e` from sentence `s` of chunk `a`.
pub(super) fn describe(a: &Analysed, s: &Sent, e: &[String], b: &Analysed) -> Option<Vec<String>> {
    let t = &s.toks;
    let pos = find_seq(t, e)?;
    let end = pos + e.len();
    // The whole name, not a part of a longer one.
    if t.get(end).is_some_and(|w| is_cap(w))
        || (pos > 0 && is_cap(&t[pos - 1]) && !NON_ENTITY_CAPS.contains(&t[pos - 1]))
    {
        return None;
    }
    // "The Journal of ... is": still the subject.
    let pos = if pos == 1 && t[0] == "The" { 0 } else { pos };
    let kind = type_of(e, a, b);
    let person = kind.as_deref().is_some_and(|k| PERSON_NOUNS.contains(k))
        || (e == b.title.as_slice() && b.person);
    let prep = pos
        .checked_sub(1 + usize::from(pos >= 2 && t[pos - 1] == "the"))
        .map(|i| lower(&t[i]))
        .unwrap_or_default();
    let noun = match kind {
        Some(k) => k,
        None if person => "person".into(),
        None if matches!(prep.as_str(), "in" | "at" | "near") => "place".into(),
        None => return None,
    };
    let out = vec!["the".to_string(), noun];
    if pos == 0 {
        describe_subject(t, end, person, out)
    } else {
        describe_object(s, pos, person, out)
    }
}

/// `out` ("the <type>") continued with the rest of the clause of which the entity ending
/// at `end` is the subject: "the journal that is published by ...".
fn describe_subject(
    t: &[String],
    end: usize,
    person: bool,
    mut out: Vec<String>,
) -> Option<Vec<String>> {
    let rest_end = clause_end(t, end);
    if t.get(end).is_some_and(|w| w == ",") || rest_end <= end + 1 {
        return None;
    }
    out.push(if person { "who" } else { "that" }.into());
    out.extend(t[end..rest_end].iter().cloned());
    Some(out)
}

/// `out` ("the <type>") continued with a relative clause made of the words before the
/// entity at `pos` of sentence `s`: "the singer who performed <subject>", "the society by
/// which <clause>", "the song that Sheeran wrote".
fn describe_object(
    s: &Sent,
    pos: usize,
    person: bool,
    mut out: Vec<String>,
) -> Option<Vec<String>> {
    let t = &s.toks;
    // Skip a determiner before the entity ("by the Society ...").
    let det = usize::from(pos >= 2 && t[pos - 1] == "the");
    let pos = pos - det;
    if pos == 0 {
        return None;
    }
    let before = lower(&t[pos - 1]);
    let cs = (0..pos)
        .rev()
        .find(|&i| is_clause_break(&t[i]))
        .map_or(0, |i| i + 1);
    if before == "by" && pos >= 2 {
        // "... performed by Hank Snow" → "the singer who performed <subject>"
        if let (Some(past), Some(aux)) = (past_of_participle(&t[pos - 2]), s.aux) {
            if aux < pos - 2 && s.subj_end > 0 {
                out.push(if person { "who" } else { "that" }.into());
                out.push(past);
                out.extend(decapitalise_phrase(&t[..s.subj_end]));
                return Some(out);
            }
        }
    }
    // The clause before the entity must have its own subject.
    let has_subject = cs == 0 || t.get(cs).is_some_and(|w| is_cap(w) || w == "the");
    if PREPOSITIONS.contains(&before) {
        if cs + 1 >= pos || !has_subject {
            return None;
        }
        let rel = if person && before == "by" {
            "whom"
        } else {
            "which"
        };
        out.push(before);
        out.push(rel.into());
        out.extend(decapitalise_phrase(&t[cs..pos - 1]));
        return Some(out);
    }
    let prev = &t[pos - 1];
    if is_verb_like(prev) && cs + 1 < pos && has_subject {
        // "Sheeran wrote I See Fire" → "the song that Sheeran wrote"
        out.push(if person { "whom" } else { "that" }.into());
        out.extend(decapitalise_phrase(&t[cs..pos]));
        return Some(out);
    }
    None
}

/// The kind of thing `e` is: from a definition "E is a <type> ..." in `b` or `a`, else
/// from a type word in its name.
pub(super) fn type_of(e: &[String], a: &Analysed, b: &Analysed) -> Option<String> {
    for an in [b, a] {
        for s in &an.sents {
            if let Some(aux) = s.aux {
                if BE.contains(&lower(&s.toks[aux]))
                    && match find_seq(&s.toks[..s.subj_end], e) {
                        Some(0) => true,
                        Some(1) => s.toks[0] == "The",
                        _ => false,
                    }
                {
                    if let Some(h) = head_noun(&s.toks, aux + 1) {
                        return Some(h);
                    }
                }
            }
        }
    }
    type_word(e)
}
