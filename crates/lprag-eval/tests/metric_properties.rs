//! Property tests (proptest) for Recall@k.

use lprag_eval::metrics::recall_at_k;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn recall_is_a_fraction_that_never_falls_as_k_grows(
        ranking in proptest::collection::vec(0usize..30, 0..40),
        gold in proptest::collection::btree_set(0usize..30, 1..6),
        missing in 0usize..3,
    ) {
        let gold: Vec<usize> = gold.into_iter().collect();
        let count = gold.len() + missing;
        let mut last = 0.0;
        for k in 1..45 {
            let r = recall_at_k(&ranking, &gold, count, k).unwrap();
            prop_assert!((0.0..=1.0).contains(&r));
            prop_assert!(r >= last, "k = {k}: {r} < {last}");
            last = r;
        }
        // With every gold passage ranked, recall is the fraction present in the corpus.
        let mut all = gold.clone();
        all.extend(ranking.iter().copied());
        let full = recall_at_k(&all, &gold, count, all.len()).unwrap();
        prop_assert!((full - gold.len() as f64 / count as f64).abs() < 1e-12);
        prop_assert_eq!(recall_at_k(&ranking, &[], 0, 5), None);
    }
}
