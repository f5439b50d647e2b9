//! The dense anchor: the link predictor's logits blended with the query's cosine to each
//! candidate, the blend's weight chosen at build time on training questions held out of
//! the predictor's training.
//!
//! Over one query's candidates both scores are standardised (mean 0, spread 1) and mixed,
//! `w · z(logit) + (1 − w) · z(cos)`, then put back on the logit's scale, so weight 1 is the
//! predictor's logit exactly and weight 0 the dense order. [`Anchor::Selected`] holds a
//! share of the query nodes out of training, ranks them as user queries are ranked at every
//! weight of [`ANCHOR_WEIGHTS`], and keeps the best of the weights that are not worse than
//! the dense order on passage Recall@2 and Recall@5 and better on significantly more
//! questions than worse ([`choose`]): questions that cannot tell the weights apart keep the
//! dense order, questions the trained model ranks better move it.

use std::collections::{HashMap, HashSet};

use lprag_core::{ChunkId, EdgeKind, Error, LinkGraph, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{ParentScoring, Parents};

/// The weights [`Anchor::Selected`] tries, from the dense order (0) to the predictor alone (1).
pub const ANCHOR_WEIGHTS: [f32; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// How much of the ranking the link predictor decides, against the dense order of the
/// same candidates ([`LpRagConfig::anchor`](super::LpRagConfig::anchor)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Anchor {
    /// The predictor's logits alone (the paper's setting).
    Off,
    /// A fixed weight in `[0, 1]`: 1 is the predictor alone, 0 the dense order of the
    /// candidates.
    Fixed {
        /// The predictor's weight.
        weight: f32,
    },
    /// Chosen at build time: `holdout` of the query nodes (at most `max_questions`) are
    /// left out of training and ranked at every weight of [`ANCHOR_WEIGHTS`]; of the
    /// weights whose passage Recall@2 and Recall@5 on them are both at least the dense
    /// order's and that rank significantly more of them better than worse, the one with
    /// the highest sum is kept, else the dense order ([`choose`];
    /// [`IndexStats::anchor`](super::IndexStats::anchor) says what was measured). With
    /// fewer than `min_questions` to hold out, or a training-free scorer or transferred
    /// predictor, the predictor ranks alone (weight 1). The weight is chosen when the index
    /// is built and kept through updates and [`LpRag::retrain`](super::LpRag::retrain).
    Selected {
        /// Share of the query nodes held out of training, in `(0, 0.5]` (default 0.1).
        #[serde(default = "default_holdout")]
        holdout: f32,
        /// At most this many held out (default 500).
        #[serde(default = "default_max_questions")]
        max_questions: usize,
        /// No selection below this many (the predictor then ranks alone; default 20).
        #[serde(default = "default_min_questions")]
        min_questions: usize,
    },
}

fn default_holdout() -> f32 {
    0.1
}

fn default_max_questions() -> usize {
    500
}

fn default_min_questions() -> usize {
    20
}

impl Default for Anchor {
    fn default() -> Self {
        Anchor::Selected {
            holdout: default_holdout(),
            max_questions: default_max_questions(),
            min_questions: default_min_questions(),
        }
    }
}

impl Anchor {
    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Anchor::Off => Ok(()),
            Anchor::Fixed { weight } if (0.0..=1.0).contains(&weight) => Ok(()),
            Anchor::Fixed { weight } => Err(Error::invalid(
                "LpRagConfig.anchor.weight",
                format!("must be in [0, 1], got {weight}"),
            )),
            Anchor::Selected { holdout, .. } if !(holdout > 0.0 && holdout <= 0.5) => {
                Err(Error::invalid(
                    "LpRagConfig.anchor.holdout",
                    format!("must be in (0, 0.5], got {holdout}"),
                ))
            }
            Anchor::Selected {
                max_questions,
                min_questions,
                ..
            } if max_questions == 0 || min_questions > max_questions => Err(Error::invalid(
                "LpRagConfig.anchor",
                format!(
                    "max_questions ({max_questions}) must be positive and at least \
                     min_questions ({min_questions})"
                ),
            )),
            Anchor::Selected { .. } => Ok(()),
        }
    }
}

/// What [`Anchor::Selected`] measured on the held-out questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnchorSelection {
    /// The weight kept.
    pub weight: f32,
    /// Questions held out of training and ranked.
    pub questions: usize,
    /// `(weight, Recall@2, Recall@5)` in % on those questions, passage level, for every
    /// weight tried (the first is the dense order).
    pub measured: Vec<(f32, f64, f64)>,
    /// For every weight tried, the questions it ranks better and worse than the dense
    /// order (by R@2 + R@5).
    #[serde(default)]
    pub versus_dense: Vec<(usize, usize)>,
    /// Why nothing was selected (empty when a weight was).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skipped: String,
}

/// Mix `logits` with `cos` (both over one query's candidates) at `weight`, on the logits'
/// scale: `μ + σ · (w · z(logit) + (1 − w) · z(cos))`. Weight 1 leaves the logits as they are.
pub(crate) fn fuse(logits: &mut [f32], cos: &[f32], weight: f32) {
    if weight >= 1.0 || logits.is_empty() {
        return;
    }
    let (ml, sl) = mean_sd(logits);
    let (mc, sc) = mean_sd(cos);
    // A flat logit list still carries the dense order at weight < 1.
    let sl = if sl > 1e-6 { sl } else { 1.0 };
    for (l, &c) in logits.iter_mut().zip(cos) {
        let zl = (*l - ml) / sl;
        let zc = if sc > 1e-12 { (c - mc) / sc } else { 0.0 };
        *l = ml + sl * (weight * zl + (1.0 - weight) * zc);
    }
}

fn mean_sd(v: &[f32]) -> (f32, f32) {
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m as f32, var.sqrt() as f32)
}

/// Cosine of `query` to each of `candidates`' rows of `graph`'s features.
pub(crate) fn cosines(graph: &LinkGraph, query: &[f32], candidates: &[ChunkId]) -> Vec<f32> {
    let qn = query.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    candidates
        .iter()
        .map(|&c| {
            let row = graph.features.row(c);
            let (dot, n) = row
                .iter()
                .zip(query)
                .fold((0.0f32, 0.0f32), |(d, n), (r, q)| (d + r * q, n + r * r));
            dot / (qn * n.sqrt().max(1e-12))
        })
        .collect()
}

/// A held-out question: its query node and the chunks it was linked to.
#[derive(Debug)]
pub(crate) struct HeldOut {
    pub(crate) node: usize,
    pub(crate) gold: Vec<ChunkId>,
}

/// The training graph without the held-out questions' edges, and the questions; or why
/// nothing is held out.
pub(crate) fn hold_out(
    graph: &LinkGraph,
    anchor: &Anchor,
    seed: u64,
) -> std::result::Result<(LinkGraph, Vec<HeldOut>), String> {
    let Anchor::Selected {
        holdout,
        max_questions,
        min_questions,
    } = *anchor
    else {
        return Err("the anchor is not selected".into());
    };
    let nc = graph.num_chunks;
    let mut gold: HashMap<usize, Vec<ChunkId>> = HashMap::new();
    for e in &graph.edges {
        if e.kind != EdgeKind::QueryChunk {
            continue;
        }
        let (a, b) = (e.a as usize, e.b as usize);
        match (a >= nc, b >= nc) {
            (true, false) => gold.entry(a).or_default().push(b),
            (false, true) => gold.entry(b).or_default().push(a),
            _ => {}
        }
    }
    let mut nodes: Vec<usize> = gold.keys().copied().collect();
    nodes.sort_unstable();
    let want = ((nodes.len() as f64 * holdout as f64).round() as usize).min(max_questions);
    if want < min_questions {
        return Err(format!(
            "{} of {} linked questions held out would be fewer than min_questions ({min_questions})",
            want,
            nodes.len()
        ));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x616e_6368_6f72);
    nodes.shuffle(&mut rng);
    nodes.truncate(want);
    nodes.sort_unstable();
    let held: HashSet<u32> = nodes.iter().map(|&n| n as u32).collect();
    let train = LinkGraph {
        features: graph.features.clone(),
        num_chunks: nc,
        edges: graph
            .edges
            .iter()
            .filter(|e| !held.contains(&e.a) && !held.contains(&e.b))
            .copied()
            .collect(),
    };
    let questions = nodes
        .into_iter()
        .map(|node| {
            let mut g = gold.remove(&node).unwrap_or_default();
            g.sort_unstable();
            g.dedup();
            HeldOut { node, gold: g }
        })
        .collect();
    Ok((train, questions))
}

/// One held-out question's candidates with their logits and cosines.
pub(crate) struct Ranked {
    pub(crate) candidates: Vec<ChunkId>,
    pub(crate) logits: Vec<f32>,
    pub(crate) cos: Vec<f32>,
}

/// [`select`] on a blocking thread, through `view` (the trained index's query path), with
/// progress as stage `"anchor"`.
pub(super) async fn select_weight(
    view: super::search::RankView,
    questions: Vec<HeldOut>,
    progress: std::sync::Arc<dyn lprag_core::Progress>,
) -> Result<AnchorSelection> {
    crate::retrievers::common::blocking(move || {
        progress.start("anchor", Some(questions.len() as u64));
        let rank = |q: &HeldOut| view.score(view.graph.features.row(q.node), None);
        let chosen = select(&questions, &rank, &view.parents, view.config.parents);
        progress.finish("anchor");
        chosen
    })
    .await
}

/// Rank every question at every weight of [`ANCHOR_WEIGHTS`] (passages: `parents`) and keep
/// the weight [`choose`] picks.
pub(crate) fn select(
    questions: &[HeldOut],
    rank: &(dyn Fn(&HeldOut) -> Result<Ranked> + Sync),
    parents: &Parents,
    mode: ParentScoring,
) -> Result<AnchorSelection> {
    use rayon::prelude::*;
    let per_question: Vec<Vec<(f64, f64)>> = questions
        .par_iter()
        .map(|q| {
            let r = rank(q)?;
            let gold: HashSet<u32> = q.gold.iter().map(|&c| parents.parent(c)).collect();
            Ok(ANCHOR_WEIGHTS
                .iter()
                .map(|&w| {
                    let mut s = r.logits.clone();
                    fuse(&mut s, &r.cos, w);
                    let scored = r.candidates.iter().copied().zip(s).collect();
                    let ranked = parents.rank(scored, mode, None, |x| x);
                    let mut seen = Vec::new();
                    for (c, _) in ranked {
                        let p = parents.parent(c);
                        if !seen.contains(&p) {
                            seen.push(p);
                            if seen.len() == 5 {
                                break;
                            }
                        }
                    }
                    let hits = |k: usize| {
                        seen.iter().take(k).filter(|p| gold.contains(p)).count() as f64
                            / gold.len().max(1) as f64
                    };
                    (hits(2), hits(5))
                })
                .collect())
        })
        .collect::<Result<_>>()?;
    let n = questions.len().max(1) as f64;
    // Per weight: questions ranked better / worse than by the dense order (R@2 + R@5).
    let versus_dense: Vec<(usize, usize)> = (0..ANCHOR_WEIGHTS.len())
        .map(|i| {
            per_question.iter().fold((0, 0), |(w, l), q| {
                let (a, d) = (q[i].0 + q[i].1, q[0].0 + q[0].1);
                (w + usize::from(a > d + 1e-9), l + usize::from(a < d - 1e-9))
            })
        })
        .collect();
    let measured: Vec<(f32, f64, f64)> = ANCHOR_WEIGHTS
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let (r2, r5) = per_question
                .iter()
                .fold((0.0, 0.0), |(a, b), q| (a + q[i].0, b + q[i].1));
            (w, 100.0 * r2 / n, 100.0 * r5 / n)
        })
        .collect();
    let weight = choose(&measured, &versus_dense);
    Ok(AnchorSelection {
        weight,
        questions: questions.len(),
        measured,
        versus_dense,
        skipped: String::new(),
    })
}

/// Significance level of the sign test in [`choose`].
pub const ANCHOR_SIGNIFICANCE: f64 = 0.05;

/// The weight [`Anchor::Selected`] keeps from `measured` (`(weight, R@2, R@5)`, the dense
/// order first) and `versus_dense` (per weight, the questions it ranks better and worse
/// than the dense order, by R@2 + R@5): of the weights that are not worse than the dense
/// order on either recall and better on significantly more questions than worse (a
/// one-sided sign test at [`ANCHOR_SIGNIFICANCE`]), the one with the highest R@2 + R@5; of
/// equals, the one nearest the dense order; none, the dense order (0). Questions that
/// cannot tell the weights apart keep the dense order.
pub fn choose(measured: &[(f32, f64, f64)], versus_dense: &[(usize, usize)]) -> f32 {
    let Some(&(w0, d2, d5)) = measured.first() else {
        return 0.0;
    };
    let mut best = (w0, d2 + d5);
    for (&(w, r2, r5), &(wins, losses)) in measured.iter().zip(versus_dense).skip(1) {
        let significant = sign_test(wins, losses) < ANCHOR_SIGNIFICANCE;
        if significant && r2 >= d2 - 1e-9 && r5 >= d5 - 1e-9 && r2 + r5 > best.1 + 1e-9 {
            best = (w, r2 + r5);
        }
    }
    best.0
}

/// One-sided sign test: the probability of at least `wins` wins in `wins + losses` fair
/// coin flips.
pub(crate) fn sign_test(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    // ln C(n, i) − n ln 2, summed in linear space.
    let ln_fact = |k: usize| (1..=k).map(|i| (i as f64).ln()).sum::<f64>();
    let ln_n = ln_fact(n);
    (wins..=n)
        .map(|i| (ln_n - ln_fact(i) - ln_fact(n - i) - n as f64 * std::f64::consts::LN_2).exp())
        .sum::<f64>()
        .min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{Embeddings, LinkEdge};

    #[test]
    fn fuse_spans_the_dense_order_to_the_logits() {
        let logits = vec![3.0, 1.0, 2.0];
        let cos = vec![0.1, 0.9, 0.5];
        let mut one = logits.clone();
        fuse(&mut one, &cos, 1.0);
        assert_eq!(one, logits);
        let mut zero = logits.clone();
        fuse(&mut zero, &cos, 0.0);
        // the dense order: 1, 2, 0
        assert!(zero[1] > zero[2] && zero[2] > zero[0]);
        // on the logits' scale: same mean
        let m = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
        assert!((m(&zero) - m(&logits)).abs() < 1e-5);
        // a flat logit list still ranks by cosine below weight 1
        let mut flat = vec![0.0; 3];
        fuse(&mut flat, &cos, 0.5);
        assert!(flat[1] > flat[2] && flat[2] > flat[0]);
    }

    #[test]
    fn hold_out_removes_the_questions_edges_only() {
        // chunks 0..4, queries 4..34 each linked to chunk (q % 4); one chunk edge.
        let nc = 4;
        let nq = 30;
        let features = Embeddings::new(2, vec![1.0; (nc + nq) * 2]).unwrap();
        let mut edges = vec![LinkEdge {
            a: 0,
            b: 1,
            weight: 0.9,
            kind: EdgeKind::Similarity,
        }];
        for q in 0..nq {
            edges.push(LinkEdge {
                a: (nc + q) as u32,
                b: (q % nc) as u32,
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
        let graph = LinkGraph {
            features,
            num_chunks: nc,
            edges,
        };
        let anchor = Anchor::Selected {
            holdout: 0.2,
            max_questions: 100,
            min_questions: 5,
        };
        let (train, held) = hold_out(&graph, &anchor, 1).unwrap();
        assert_eq!(held.len(), 6);
        assert_eq!(train.edges.len(), graph.edges.len() - 6);
        for h in &held {
            assert_eq!(h.gold, vec![(h.node - nc) % nc]);
            assert!(train.edges.iter().all(|e| e.a as usize != h.node));
        }
        // the same seed holds out the same questions
        let again: Vec<usize> = hold_out(&graph, &anchor, 1)
            .unwrap()
            .1
            .iter()
            .map(|h| h.node)
            .collect();
        assert_eq!(again, held.iter().map(|h| h.node).collect::<Vec<_>>());
        let few = Anchor::Selected {
            holdout: 0.1,
            max_questions: 100,
            min_questions: 5,
        };
        assert!(hold_out(&graph, &few, 1).unwrap_err().contains("fewer"));
        assert!(Anchor::Fixed { weight: 1.5 }.validate().is_err());
    }

    #[test]
    fn the_choice_keeps_the_dense_order_unless_a_weight_is_significantly_better() {
        let flat = [(0.0, 50.0, 60.0), (0.5, 50.0, 60.0), (1.0, 50.0, 60.0)];
        assert_eq!(choose(&flat, &[(0, 0); 3]), 0.0);
        let better = [(0.0, 50.0, 60.0), (0.5, 51.0, 61.0), (1.0, 51.0, 61.0)];
        // 8 of 8 changed questions better: p = 1/256
        assert_eq!(choose(&better, &[(0, 0), (8, 0), (8, 0)]), 0.5);
        // 3 of 3: p = 1/8, not significant
        assert_eq!(choose(&better, &[(0, 0), (3, 0), (3, 0)]), 0.0);
        // 1.0 has the best sum but loses R@5 to the dense order
        let trade = [(0.0, 50.0, 60.0), (0.5, 50.5, 60.0), (1.0, 53.0, 59.0)];
        assert_eq!(choose(&trade, &[(0, 0), (10, 1), (30, 2)]), 0.5);
        let worse = [(0.0, 50.0, 60.0), (1.0, 40.0, 50.0)];
        assert_eq!(choose(&worse, &[(0, 0), (1, 20)]), 0.0);
    }

    #[test]
    fn the_sign_test_is_the_binomial_tail() {
        assert!((sign_test(1, 0) - 0.5).abs() < 1e-12);
        assert!((sign_test(3, 0) - 0.125).abs() < 1e-12);
        // P(X >= 2 | n = 3) = 4/8
        assert!((sign_test(2, 1) - 0.5).abs() < 1e-12);
        assert_eq!(sign_test(0, 0), 1.0);
        assert!(sign_test(300, 200) < 1e-5);
    }

    #[test]
    fn a_selected_anchor_reads_with_its_defaults() {
        let a: Anchor = serde_json::from_str(r#"{"kind":"selected"}"#).unwrap();
        assert_eq!(a, Anchor::default());
        let f: Anchor = serde_json::from_str(r#"{"kind":"fixed","weight":0.5}"#).unwrap();
        assert_eq!(f, Anchor::Fixed { weight: 0.5 });
    }
}
