//! Sampling: A.2 query batches and negative chunks for link-prediction training.

use lprag_core::{ChunkId, LinkGraph};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::{ChunkGraph, GraphError};

/// LP-RAG Appendix A.2 batches: for every chunk `v`, draw `k_v` uniformly from
/// `{0, …, |N(v)|}`, sample `k_v` distinct neighbours of `v`, and form the batch
/// `[v, sampled neighbours…]` (neighbours ascending).
///
/// One batch per chunk, in chunk order, so `batches[v][0] == v`. The result depends only
/// on the graph and `seed` (ChaCha8, stable across platforms and releases of this crate).
pub fn sample_batches(graph: &ChunkGraph, seed: u64) -> Vec<Vec<ChunkId>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..graph.num_chunks())
        .map(|v| {
            let nb = graph.neighbors(v);
            let k = rng.random_range(0..=nb.len());
            let mut picked: Vec<ChunkId> = rand::seq::index::sample(&mut rng, nb.len(), k)
                .into_iter()
                .map(|p| nb[p] as ChunkId)
                .collect();
            picked.sort_unstable();
            let mut batch = Vec::with_capacity(k + 1);
            batch.push(v);
            batch.extend(picked);
            batch
        })
        .collect()
}

/// How negative chunks are drawn (LP-RAG §3.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub enum NegativeSampling {
    /// Every chunk equally likely.
    #[default]
    Uniform,
    /// Chunk `i` with probability ∝ `(degree_i + 1)^power` (Aiyappa et al. 2025 use
    /// degree-biased negatives; `power = 0.75` is the word2vec convention, `1.0` is
    /// proportional, negative powers favour rare chunks).
    Degree {
        /// Exponent applied to `degree + 1`; must be finite.
        power: f32,
    },
}

/// Draws negative chunk ids, uniformly or by degree (Vose alias table, O(1) per draw).
#[derive(Debug, Clone)]
pub struct NegativeSampler {
    n: usize,
    /// Normalised probabilities (`None` for uniform).
    probs: Option<Vec<f64>>,
    /// Alias-table acceptance thresholds and aliases (empty for uniform).
    accept: Vec<f64>,
    alias: Vec<u32>,
}

impl NegativeSampler {
    /// A sampler over chunks `0..degrees.len()`, `degrees[i]` being chunk `i`'s degree.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `degrees` is empty, has more than `u32::MAX`
    /// entries, or `power` is not finite.
    pub fn new(degrees: &[u32], strategy: NegativeSampling) -> Result<Self, GraphError> {
        let n = degrees.len();
        if n == 0 {
            return Err(GraphError::arg("degrees", "need at least one chunk"));
        }
        if n > u32::MAX as usize {
            return Err(GraphError::arg("degrees", "more than u32::MAX chunks"));
        }
        let power = match strategy {
            NegativeSampling::Uniform => {
                return Ok(Self {
                    n,
                    probs: None,
                    accept: Vec::new(),
                    alias: Vec::new(),
                })
            }
            NegativeSampling::Degree { power } if !power.is_finite() => {
                return Err(GraphError::arg(
                    "NegativeSampling::Degree.power",
                    format!("must be finite, got {power}"),
                ))
            }
            NegativeSampling::Degree { power } => f64::from(power),
        };
        // Work in log space and subtract the maximum so large powers cannot overflow.
        let logs: Vec<f64> = degrees
            .iter()
            .map(|&d| power * (f64::from(d) + 1.0).ln())
            .collect();
        let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = logs.iter().map(|&l| (l - max).exp()).collect();
        let total: f64 = w.iter().sum();
        let probs: Vec<f64> = w.iter().map(|&x| x / total).collect();
        let (accept, alias) = alias_table(&probs);
        Ok(Self {
            n,
            probs: Some(probs),
            accept,
            alias,
        })
    }

    /// A sampler over the chunks of `graph`, by their chunk–chunk degree.
    pub fn from_chunk_graph(
        graph: &ChunkGraph,
        strategy: NegativeSampling,
    ) -> Result<Self, GraphError> {
        Self::new(&graph.degrees(), strategy)
    }

    /// A sampler over the chunk nodes of `graph`, by their degree in the whole graph
    /// (chunk–chunk and query–chunk edges; self-loops count once).
    pub fn from_link_graph(
        graph: &LinkGraph,
        strategy: NegativeSampling,
    ) -> Result<Self, GraphError> {
        let mut deg = vec![0u32; graph.num_chunks];
        for e in &graph.edges {
            for end in [e.a, e.b] {
                if let Some(d) = deg.get_mut(end as usize) {
                    *d = d.saturating_add(1);
                }
            }
            if e.a == e.b {
                if let Some(d) = deg.get_mut(e.a as usize) {
                    *d -= 1;
                }
            }
        }
        Self::new(&deg, strategy)
    }

    /// Number of chunks the sampler draws from.
    pub fn num_chunks(&self) -> usize {
        self.n
    }

    /// Probability of drawing chunk `i` (0 when out of range).
    pub fn probability(&self, i: usize) -> f64 {
        match &self.probs {
            _ if i >= self.n => 0.0,
            None => 1.0 / self.n as f64,
            Some(p) => p[i],
        }
    }

    fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let i = rng.random_range(0..self.n);
        if self.accept.is_empty() || rng.random::<f64>() < self.accept[i] {
            i as u32
        } else {
            self.alias[i]
        }
    }

    /// `n` chunk ids drawn independently (with replacement).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.draw(rng)).collect()
    }

    /// `n` chunk ids drawn independently from the sampler's distribution restricted to
    /// chunks not in `exclude` (for example the positives of the current query).
    ///
    /// Uses rejection while the excluded chunks hold at most half the probability mass,
    /// else draws from the renormalised remainder directly, so it never loops long.
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `n > 0` and every chunk with non-zero
    /// probability is excluded.
    pub fn sample_excluding<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        n: usize,
        exclude: &[u32],
    ) -> Result<Vec<u32>, GraphError> {
        if exclude.is_empty() {
            return Ok(self.sample(rng, n));
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut ex: Vec<u32> = exclude
            .iter()
            .copied()
            .filter(|&i| (i as usize) < self.n)
            .collect();
        ex.sort_unstable();
        ex.dedup();
        let excluded_mass: f64 = ex.iter().map(|&i| self.probability(i as usize)).sum();
        if excluded_mass <= 0.5 {
            let mut out = Vec::with_capacity(n);
            while out.len() < n {
                let c = self.draw(rng);
                if ex.binary_search(&c).is_err() {
                    out.push(c);
                }
            }
            return Ok(out);
        }
        // Cumulative distribution over the allowed chunks; binary search per draw.
        let mut ids = Vec::with_capacity(self.n - ex.len());
        let mut cum = Vec::with_capacity(self.n - ex.len());
        let mut acc = 0.0f64;
        for i in 0..self.n as u32 {
            let p = self.probability(i as usize);
            if p > 0.0 && ex.binary_search(&i).is_err() {
                acc += p;
                ids.push(i);
                cum.push(acc);
            }
        }
        if ids.is_empty() {
            return Err(GraphError::arg(
                "exclude",
                format!("excludes every one of the {} chunks", self.n),
            ));
        }
        Ok((0..n)
            .map(|_| {
                let u = rng.random::<f64>() * acc;
                let p = cum.partition_point(|&c| c <= u).min(ids.len() - 1);
                ids[p]
            })
            .collect())
    }
}

/// Vose's alias method: `(accept, alias)` for probabilities summing to 1.
fn alias_table(probs: &[f64]) -> (Vec<f64>, Vec<u32>) {
    let n = probs.len();
    let mut accept: Vec<f64> = probs.iter().map(|&p| p * n as f64).collect();
    let mut alias: Vec<u32> = (0..n as u32).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| accept[i] < 1.0);
    while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
        alias[s] = l as u32;
        accept[l] -= 1.0 - accept[s];
        if accept[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Leftovers (rounding) accept themselves.
    for i in small.into_iter().chain(large) {
        accept[i] = 1.0;
    }
    (accept, alias)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::{EdgeKind, Embeddings, LinkEdge};

    fn e(a: u32, b: u32) -> LinkEdge {
        LinkEdge {
            a,
            b,
            weight: 1.0,
            kind: EdgeKind::Similarity,
        }
    }

    fn star_plus_path() -> ChunkGraph {
        // 0 is a hub of 1..=5; 6-7-8 is a path; 9 is isolated.
        let mut edges: Vec<LinkEdge> = (1..=5).map(|j| e(0, j)).collect();
        edges.extend([e(6, 7), e(7, 8)]);
        ChunkGraph::from_edges(10, &edges).unwrap()
    }

    #[test]
    fn batches_follow_a2() {
        let g = star_plus_path();
        for seed in 0..50 {
            let batches = sample_batches(&g, seed);
            assert_eq!(batches.len(), 10);
            for (v, b) in batches.iter().enumerate() {
                assert_eq!(b[0], v);
                let rest = &b[1..];
                assert!(rest.len() <= g.degree(v));
                assert!(rest.windows(2).all(|w| w[0] < w[1]), "distinct, sorted");
                assert!(rest.iter().all(|&u| g.neighbors(v).contains(&(u as u32))));
            }
            assert_eq!(batches[9], vec![9]);
        }
    }

    #[test]
    fn batches_are_deterministic_and_cover_all_sizes() {
        let g = star_plus_path();
        assert_eq!(sample_batches(&g, 7), sample_batches(&g, 7));
        assert_ne!(
            (0..20).map(|s| sample_batches(&g, s)).collect::<Vec<_>>(),
            vec![sample_batches(&g, 0); 20]
        );
        // k_0 is uniform on {0..=5}: every size 1..=6 appears over many seeds.
        let mut seen = [0usize; 7];
        for s in 0..600 {
            seen[sample_batches(&g, s)[0].len()] += 1;
        }
        assert_eq!(seen[0], 0);
        for (size, &count) in seen.iter().enumerate().skip(1) {
            assert!((60..=140).contains(&count), "size {size}: {count}");
        }
    }

    #[test]
    fn uniform_sampler_covers_range() {
        let s = NegativeSampler::new(&[0, 5, 1, 0], NegativeSampling::Uniform).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws = s.sample(&mut rng, 4000);
        let mut counts = [0usize; 4];
        draws.iter().for_each(|&d| counts[d as usize] += 1);
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(s.probability(2), 0.25);
    }

    #[test]
    fn degree_sampler_prefers_high_degree() {
        let degrees = [0u32, 1, 3, 100];
        let s = NegativeSampler::new(&degrees, NegativeSampling::Degree { power: 1.0 }).unwrap();
        let want = [1.0 / 108.0, 2.0 / 108.0, 4.0 / 108.0, 101.0 / 108.0];
        for (i, w) in want.iter().enumerate() {
            assert!(
                (s.probability(i) - w).abs() < 1e-12,
                "{i}: {} vs {w}",
                s.probability(i)
            );
        }
        for seed in 0..5 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = 20_000;
            let mut counts = [0usize; 4];
            s.sample(&mut rng, n)
                .iter()
                .for_each(|&d| counts[d as usize] += 1);
            for i in 0..4 {
                let expect = want[i] * n as f64;
                let sd = (expect * (1.0 - want[i])).sqrt();
                assert!(
                    (counts[i] as f64 - expect).abs() < 5.0 * sd + 1.0,
                    "seed {seed} chunk {i}: {counts:?}"
                );
            }
            assert!(counts[3] > counts[2] && counts[2] > counts[0]);
        }
        // Negative powers favour rare chunks; huge powers do not overflow.
        let inv = NegativeSampler::new(&degrees, NegativeSampling::Degree { power: -1.0 }).unwrap();
        assert!(inv.probability(0) > inv.probability(3));
        let big =
            NegativeSampler::new(&degrees, NegativeSampling::Degree { power: 500.0 }).unwrap();
        assert!((big.probability(3) - 1.0).abs() < 1e-9);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert!(big.sample(&mut rng, 100).iter().all(|&d| d == 3));
    }

    #[test]
    fn sampler_is_seeded() {
        let s = NegativeSampler::new(&[1, 2, 3, 4, 5], NegativeSampling::Degree { power: 0.75 })
            .unwrap();
        let a = s.sample(&mut ChaCha8Rng::seed_from_u64(9), 50);
        let b = s.sample(&mut ChaCha8Rng::seed_from_u64(9), 50);
        assert_eq!(a, b);
    }

    #[test]
    fn excluding_never_returns_excluded() {
        let degrees: Vec<u32> = (0..20).collect();
        for strategy in [
            NegativeSampling::Uniform,
            NegativeSampling::Degree { power: 1.0 },
        ] {
            let s = NegativeSampler::new(&degrees, strategy).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            // Small exclusion (rejection path) and large exclusion (direct path).
            for ex in [vec![19u32, 3, 3, 77], (0..18).collect::<Vec<u32>>()] {
                let got = s.sample_excluding(&mut rng, 500, &ex).unwrap();
                assert_eq!(got.len(), 500);
                assert!(got.iter().all(|d| !ex.contains(d)));
            }
            let all: Vec<u32> = (0..20).collect();
            assert!(s.sample_excluding(&mut rng, 1, &all).is_err());
            assert!(s.sample_excluding(&mut rng, 0, &all).unwrap().is_empty());
        }
        // The direct path keeps the degree bias among the remaining chunks.
        let s = NegativeSampler::new(
            &[0, 0, 0, 0, 1, 99],
            NegativeSampling::Degree { power: 1.0 },
        )
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let got = s.sample_excluding(&mut rng, 2000, &[5, 0]).unwrap();
        let c4 = got.iter().filter(|&&d| d == 4).count();
        // Remaining weights 1,1,1,2 → chunk 4 has probability 0.4.
        assert!((700..900).contains(&c4), "{c4}");
    }

    #[test]
    fn bad_sampler_input_is_typed() {
        assert!(NegativeSampler::new(&[], NegativeSampling::Uniform).is_err());
        assert!(NegativeSampler::new(&[1], NegativeSampling::Degree { power: f32::NAN }).is_err());
    }

    #[test]
    fn sampler_from_graphs() {
        let g = star_plus_path();
        let s =
            NegativeSampler::from_chunk_graph(&g, NegativeSampling::Degree { power: 1.0 }).unwrap();
        assert_eq!(s.num_chunks(), 10);
        assert!(s.probability(0) > s.probability(1));
        let lg = LinkGraph {
            features: Embeddings::new(1, vec![0.5; 4]).unwrap(),
            num_chunks: 3,
            edges: vec![e(0, 1), e(0, 3), e(1, 3), e(2, 3)],
        };
        let s =
            NegativeSampler::from_link_graph(&lg, NegativeSampling::Degree { power: 1.0 }).unwrap();
        assert_eq!(s.num_chunks(), 3);
        // degrees 2, 2, 1 → weights 3, 3, 2.
        assert!((s.probability(2) - 2.0 / 8.0).abs() < 1e-12);
    }
}
