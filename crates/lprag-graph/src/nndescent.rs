//! Approximate k-NN lists by NN-descent (Dong, Charikar and Li, WWW 2011): start from random
//! lists and repeatedly compare each row's neighbours with each other ("a neighbour of a
//! neighbour is likely a neighbour"), keeping every row's best `list` candidates, until an
//! iteration changes almost nothing.
//!
//! Each iteration compares, for every row, its neighbours that are new since the last
//! iteration (forward and reverse, at most `list` of each) with each other and with its old
//! ones: about `6·list²` dot products per row, so the cost grows with the rows times the
//! iterations (typically 5–12), not with their square as exact search does. Lists are kept
//! as sorted top-`list` sets with the exact tie rule of [`crate::knn`], and an iteration's
//! result does not depend on the order its comparisons ran in, so the output is
//! deterministic for a seed (threads included).

use std::sync::{Mutex, MutexGuard};

use lprag_core::dot;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::kernels::ranks_before;
use crate::GraphError;

/// Parameters of NN-descent ([`crate::KnnBackend::NnDescent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NnDescentParams {
    /// Candidates kept per row while descending (raised to `k` when smaller); the result is
    /// each row's best `k` of them. Larger finds more true neighbours and costs about
    /// `list²` per row and iteration.
    pub list: usize,
    /// Most iterations (at least 1).
    pub max_iterations: usize,
    /// Stop once an iteration changes fewer than `stop_per_mille / 1000 · rows · list`
    /// list entries.
    pub stop_per_mille: u32,
    /// Seed of the initial lists and the reverse-neighbour samples.
    pub seed: u64,
    /// Start from an inverted file's lists ([`crate::IvfIndex`] with `⌈√rows⌉` lists and
    /// this many probes) instead of random ones; 0 (the default) starts at random.
    #[serde(default)]
    pub init_probes: usize,
}

impl Default for NnDescentParams {
    /// `list = 32`, 30 iterations at most, stop below 1 ‰ changed entries, seed 0, random
    /// start. On the hashing features of the padded MuSiQue corpus it found 94.8 % of the
    /// exact lists' neighbours at 30,000 rows and 94.0 % at 100,000; with `list = 20`,
    /// 78 %.
    fn default() -> Self {
        Self {
            list: 32,
            max_iterations: 30,
            stop_per_mille: 1,
            seed: 0,
            init_probes: 0,
        }
    }
}

impl NnDescentParams {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), GraphError> {
        if self.list == 0 {
            return Err(GraphError::arg(
                "NnDescentParams.list",
                "must be at least 1",
            ));
        }
        if self.max_iterations == 0 {
            return Err(GraphError::arg(
                "NnDescentParams.max_iterations",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// Candidates kept per row for `k` neighbours of `n > k` rows: `list`, at least `k`,
    /// at most `n − 1`.
    pub(crate) fn list_len(&self, n: usize, k: usize) -> usize {
        self.list.max(k).min(n - 1)
    }
}

/// One row's candidates, best first: `(row, similarity, new since the last join)`.
struct Candidates {
    items: Vec<(u32, f32, bool)>,
}

impl Candidates {
    /// Offer `(j, s)`; true when it was taken.
    fn offer(&mut self, cap: usize, j: u32, s: f32) -> bool {
        if self.items.len() == cap {
            let &(li, ls, _) = &self.items[cap - 1];
            if !ranks_before(s, j, ls, li) {
                return false;
            }
        }
        if self.items.iter().any(|&(i, _, _)| i == j) {
            return false;
        }
        if self.items.len() == cap {
            self.items.pop();
        }
        let pos = self
            .items
            .partition_point(|&(i, t, _)| ranks_before(t, i, s, j));
        self.items.insert(pos, (j, s, true));
        true
    }

    /// The worst kept similarity once full, else −∞.
    fn floor(&self, cap: usize) -> f32 {
        if self.items.len() == cap {
            self.items[cap - 1].1
        } else {
            f32::NEG_INFINITY
        }
    }
}

/// Approximate top-`k` lists over unit rows `x` (`n × d`), `1 ≤ k < n`, by NN-descent,
/// starting from `start` (row `i`'s initial candidates, best first, up to
/// [`NnDescentParams::list_len`] of them; rows past its end start empty).
pub(crate) fn nndescent_knn(
    x: &[f32],
    n: usize,
    d: usize,
    k: usize,
    p: &NnDescentParams,
    start: Vec<Vec<(u32, f32)>>,
) -> Vec<Vec<(u32, f32)>> {
    let cap = p.list_len(n, k);
    let rows = UnitRows { x, d };
    let lists = initial_lists(rows, n, cap, p.seed, &start);
    let stop = (p.stop_per_mille as f64 / 1000.0 * n as f64 * cap as f64) as usize;
    for iteration in 0..p.max_iterations {
        let hoods = neighbourhoods(&lists, n, cap, p.seed, iteration);
        local_joins(rows, cap, &lists, &hoods);
        // Entries taken in this join and still kept: independent of the joins' order.
        let changed: usize = (0..n)
            .into_par_iter()
            .map(|i| lock(&lists[i]).items.iter().filter(|e| e.2).count())
            .sum();
        if changed <= stop {
            break;
        }
    }
    best_k(lists, k)
}

/// Unit rows `x` of width `d`.
#[derive(Clone, Copy)]
struct UnitRows<'a> {
    x: &'a [f32],
    d: usize,
}

impl UnitRows<'_> {
    fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.d..(i + 1) * self.d]
    }
}

/// A row's candidates, even from a thread that panicked holding them.
fn lock(m: &Mutex<Candidates>) -> MutexGuard<'_, Candidates> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Initial lists: `start` (an inverted file's, or none), topped up at random, seeded per
/// row.
fn initial_lists(
    rows: UnitRows<'_>,
    n: usize,
    cap: usize,
    seed: u64,
    start: &[Vec<(u32, f32)>],
) -> Vec<Mutex<Candidates>> {
    (0..n)
        .into_par_iter()
        .map(|i| {
            let mut rng =
                ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut c = Candidates {
                items: Vec::with_capacity(cap + 1),
            };
            for &(j, s) in start.get(i).map(Vec::as_slice).unwrap_or_default() {
                c.offer(cap, j, s);
            }
            while c.items.len() < cap {
                let j = rng.random_range(0..n as u32);
                if j as usize != i {
                    c.offer(cap, j, dot(rows.row(i), rows.row(j as usize)));
                }
            }
            Mutex::new(c)
        })
        .collect()
}

/// One iteration's neighbourhoods: each row's new and old neighbours, forward and
/// reverse.
struct Neighbourhoods {
    new_fwd: Vec<Vec<u32>>,
    old_fwd: Vec<Vec<u32>>,
    new_rev: Vec<Vec<u32>>,
    old_rev: Vec<Vec<u32>>,
}

/// Each row's new and old neighbours (the new ones become old), and the reverse
/// neighbours of both kinds, at most `cap` of each kind per row, sampled by seed.
fn neighbourhoods(
    lists: &[Mutex<Candidates>],
    n: usize,
    cap: usize,
    seed: u64,
    iteration: usize,
) -> Neighbourhoods {
    let (new_fwd, old_fwd): (Vec<Vec<u32>>, Vec<Vec<u32>>) = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut c = lock(&lists[i]);
            let mut new = Vec::new();
            let mut old = Vec::new();
            for item in c.items.iter_mut() {
                if item.2 {
                    new.push(item.0);
                    item.2 = false;
                } else {
                    old.push(item.0);
                }
            }
            (new, old)
        })
        .unzip();
    let reverse = |fwd: &[Vec<u32>], salt: u64| -> Vec<Vec<u32>> {
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, l) in fwd.iter().enumerate() {
            for &j in l {
                rev[j as usize].push(i as u32);
            }
        }
        rev.par_iter_mut().enumerate().for_each(|(j, r)| {
            if r.len() > cap {
                let mut rng = ChaCha8Rng::seed_from_u64(
                    seed ^ salt
                        ^ ((iteration as u64) << 40)
                        ^ (j as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
                );
                r.shuffle(&mut rng);
                r.truncate(cap);
            }
        });
        rev
    };
    let new_rev = reverse(&new_fwd, 0x5EED_0001);
    let old_rev = reverse(&old_fwd, 0x5EED_0002);
    Neighbourhoods {
        new_fwd,
        old_fwd,
        new_rev,
        old_rev,
    }
}

/// Local joins: new × new and new × old around every row, each pair offered to both.
fn local_joins(
    rows: UnitRows<'_>,
    cap: usize,
    lists: &[Mutex<Candidates>],
    hoods: &Neighbourhoods,
) {
    (0..lists.len()).into_par_iter().for_each(|i| {
        let mut new: Vec<u32> = hoods.new_fwd[i]
            .iter()
            .chain(&hoods.new_rev[i])
            .copied()
            .collect();
        new.sort_unstable();
        new.dedup();
        let mut old: Vec<u32> = hoods.old_fwd[i]
            .iter()
            .chain(&hoods.old_rev[i])
            .copied()
            .collect();
        old.sort_unstable();
        old.dedup();
        old.retain(|j| new.binary_search(j).is_err());
        let offer = |a: u32, b: u32| {
            let s = dot(rows.row(a as usize), rows.row(b as usize));
            for (u, v) in [(a, b), (b, a)] {
                let mut c = lock(&lists[u as usize]);
                if s >= c.floor(cap) {
                    c.offer(cap, v, s);
                }
            }
        };
        for (x, &a) in new.iter().enumerate() {
            for &b in &new[x + 1..] {
                offer(a, b);
            }
            for &b in &old {
                if a != b {
                    offer(a, b);
                }
            }
        }
    });
}

/// Each row's best `k` candidates, `(row, similarity)`.
fn best_k(lists: Vec<Mutex<Candidates>>, k: usize) -> Vec<Vec<(u32, f32)>> {
    lists
        .into_iter()
        .map(|m| {
            let c = m.into_inner().unwrap_or_else(|e| e.into_inner());
            c.items
                .into_iter()
                .take(k)
                .map(|(j, s, _)| (j, s))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{knn, KnnBackend};
    use lprag_core::Embeddings;

    fn clustered(n: usize, d: usize, seed: u64) -> Embeddings {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let centres: Vec<f32> = (0..20 * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut data = Vec::with_capacity(n * d);
        for _ in 0..n {
            let c = rng.random_range(0..20);
            for j in 0..d {
                data.push(centres[c * d + j] + rng.random_range(-0.7f32..0.7));
            }
        }
        Embeddings::new(d, data).unwrap()
    }

    fn recall(exact: &[Vec<(u32, f32)>], got: &[Vec<(u32, f32)>]) -> f64 {
        let hits: usize = exact
            .iter()
            .zip(got)
            .map(|(e, g)| e.iter().filter(|x| g.iter().any(|y| y.0 == x.0)).count())
            .sum();
        hits as f64 / exact.iter().map(Vec::len).sum::<usize>() as f64
    }

    #[test]
    fn finds_most_exact_neighbours_in_the_exact_order_and_format() {
        let emb = clustered(3000, 24, 7);
        let exact = knn(&emb, 5, &KnnBackend::Exact).unwrap();
        let got = knn(&emb, 5, &KnnBackend::NnDescent(NnDescentParams::default())).unwrap();
        let r = recall(&exact, &got);
        assert!(r > 0.9, "recall of exact lists {r}");
        for (i, l) in got.iter().enumerate() {
            assert_eq!(l.len(), 5, "row {i}");
            assert!(
                l.iter().all(|&(j, _)| j as usize != i),
                "row {i} lists itself"
            );
            for w in l.windows(2) {
                assert!(
                    ranks_before(w[0].1, w[0].0, w[1].1, w[1].0),
                    "row {i}: {l:?}"
                );
            }
            let mut ids: Vec<u32> = l.iter().map(|e| e.0).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), 5, "row {i} repeats a neighbour");
        }
        // A neighbour found is scored as exact search scores it (to rounding).
        for (e, g) in exact.iter().zip(&got) {
            for &(j, s) in g {
                if let Some(&(_, t)) = e.iter().find(|x| x.0 == j) {
                    assert!((s - t).abs() < 1e-5, "{s} vs {t}");
                }
            }
        }
    }

    #[test]
    fn is_deterministic_for_a_seed_whatever_the_threads() {
        let emb = clustered(1500, 16, 3);
        let p = NnDescentParams::default();
        let run = |threads: usize, p: NnDescentParams| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| knn(&emb, 5, &KnnBackend::NnDescent(p)).unwrap())
        };
        let one = run(1, p);
        assert_eq!(one, run(4, p));
        assert_eq!(one, run(2, p));
        // Another seed starts elsewhere (its lists may still agree where both converged).
        let other = run(2, NnDescentParams { seed: 11, ..p });
        assert!(recall(&one, &other) > 0.8);
    }

    #[test]
    fn more_candidates_and_iterations_find_more() {
        let emb = clustered(3000, 48, 5);
        let exact = knn(&emb, 5, &KnnBackend::Exact).unwrap();
        let r = |list: usize, max_iterations: usize| {
            let p = NnDescentParams {
                list,
                max_iterations,
                ..NnDescentParams::default()
            };
            recall(&exact, &knn(&emb, 5, &KnnBackend::NnDescent(p)).unwrap())
        };
        let (small, large) = (r(5, 1), r(20, 12));
        assert!(
            large > small + 0.2,
            "list 5 / 1 iteration {small}, list 20 / 12 {large}"
        );
    }

    #[test]
    fn tiny_inputs_and_bad_parameters() {
        let emb = clustered(4, 8, 1);
        let l = knn(&emb, 10, &KnnBackend::NnDescent(NnDescentParams::default())).unwrap();
        assert!(
            l.iter().all(|x| x.len() == 3),
            "k clamps to rows − 1: {l:?}"
        );
        let ids = |l: &[Vec<(u32, f32)>]| -> Vec<Vec<u32>> {
            l.iter().map(|x| x.iter().map(|e| e.0).collect()).collect()
        };
        assert_eq!(ids(&l), ids(&knn(&emb, 10, &KnnBackend::Exact).unwrap()));
        for bad in [
            NnDescentParams {
                list: 0,
                ..NnDescentParams::default()
            },
            NnDescentParams {
                max_iterations: 0,
                ..NnDescentParams::default()
            },
        ] {
            let e = knn(&emb, 2, &KnnBackend::NnDescent(bad)).unwrap_err();
            assert!(e.to_string().contains("NnDescentParams"), "{e}");
        }
    }
}
