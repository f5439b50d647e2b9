//! Property tests (proptest) for the graph builders and samplers: mutual k-NN, A.2
//! batches, negative sampling.

use lprag_core::{cosine, Embeddings};
use lprag_graph::{
    knn, mutual_knn_edges, sample_batches, ChunkGraph, KnnBackend, NegativeSampler,
    NegativeSampling,
};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// `n` rows of width `d` with values in [-1, 1].
fn embeddings() -> impl Strategy<Value = Embeddings> {
    (2usize..30, 1usize..6).prop_flat_map(|(n, d)| {
        proptest::collection::vec(-1.0f32..1.0, n * d)
            .prop_map(move |v| Embeddings::new(d, v).unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn mutual_knn_edges_are_mutual_unique_and_weighted_by_cosine(emb in embeddings(), k in 1usize..6) {
        let edges = mutual_knn_edges(&emb, k, &KnnBackend::Exact).unwrap();
        let lists = knn(&emb, k, &KnnBackend::Exact).unwrap();
        let n = emb.rows();
        let mut degree = vec![0usize; n];
        for w in edges.windows(2) {
            prop_assert!((w[0].a, w[0].b) < (w[1].a, w[1].b), "sorted and unique");
        }
        for e in &edges {
            prop_assert!(e.a < e.b && (e.b as usize) < n);
            let (a, b) = (e.a as usize, e.b as usize);
            prop_assert!(lists[a].iter().any(|&(j, _)| j as usize == b));
            prop_assert!(lists[b].iter().any(|&(j, _)| j as usize == a));
            prop_assert!((e.weight - cosine(emb.row(a), emb.row(b))).abs() < 1e-4);
            degree[a] += 1;
            degree[b] += 1;
        }
        prop_assert!(degree.iter().all(|&d| d <= k));
        // Every mutual pair of the lists is an edge.
        for (a, list) in lists.iter().enumerate() {
            for &(b, _) in list {
                let b = b as usize;
                if lists[b].iter().any(|&(j, _)| j as usize == a) {
                    let (x, y) = (a.min(b) as u32, a.max(b) as u32);
                    prop_assert!(edges.iter().any(|e| e.a == x && e.b == y));
                }
            }
        }
    }

    #[test]
    fn a2_batches_are_a_root_and_distinct_neighbours(emb in embeddings(), k in 1usize..6, seed in any::<u64>()) {
        let edges = mutual_knn_edges(&emb, k, &KnnBackend::Exact).unwrap();
        let graph = ChunkGraph::from_edges(emb.rows(), &edges).unwrap();
        let batches = sample_batches(&graph, seed);
        prop_assert_eq!(batches.len(), emb.rows());
        for (v, b) in batches.iter().enumerate() {
            prop_assert_eq!(b[0], v);
            let nb = graph.neighbors(v);
            for w in b[1..].windows(2) {
                prop_assert!(w[0] < w[1], "ascending and distinct");
            }
            prop_assert!(b[1..].iter().all(|&c| nb.contains(&(c as u32))));
        }
        prop_assert_eq!(batches, sample_batches(&graph, seed));
    }

    #[test]
    fn negatives_stay_in_range_and_avoid_the_excluded(
        degrees in proptest::collection::vec(0u32..20, 1..40),
        power in -1.0f32..2.0,
        uniform in any::<bool>(),
        seed in any::<u64>(),
        exclude_mask in any::<u64>(),
    ) {
        let n = degrees.len();
        let strategy = if uniform { NegativeSampling::Uniform } else { NegativeSampling::Degree { power } };
        let sampler = NegativeSampler::new(&degrees, strategy).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        prop_assert!(sampler.sample(&mut rng, 50).iter().all(|&c| (c as usize) < n));
        let exclude: Vec<u32> = (0..n as u32).filter(|i| exclude_mask >> (i % 64) & 1 == 1).collect();
        match sampler.sample_excluding(&mut rng, 50, &exclude) {
            Ok(drawn) => {
                prop_assert_eq!(drawn.len(), 50);
                prop_assert!(drawn.iter().all(|c| (*c as usize) < n && !exclude.contains(c)));
            }
            // Only when nothing is left to draw.
            Err(_) => prop_assert_eq!(exclude.len(), n),
        }
    }
}
