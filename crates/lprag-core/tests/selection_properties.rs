//! Property tests (proptest) for `Selection`: what `apply` keeps from a ranked list.

use lprag_core::Selection;
use proptest::prelude::*;

/// A list of scores sorted descending, as retrievers hand them to `apply`.
fn ranked() -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-5.0f32..5.0, 0..40).prop_map(|mut v| {
        v.sort_by(|a, b| b.total_cmp(a));
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn top_k_keeps_the_first_k(scores in ranked(), k in 1usize..50) {
        let kept = Selection::TopK(k).apply(scores.clone(), |s| *s);
        prop_assert_eq!(kept.len(), k.min(scores.len()));
        prop_assert_eq!(&kept[..], &scores[..kept.len()]);
    }

    #[test]
    fn a_threshold_keeps_exactly_the_scores_at_or_above_it(scores in ranked(), t in -6.0f32..6.0) {
        let kept = Selection::Threshold(t).apply(scores.clone(), |s| *s);
        prop_assert_eq!(kept.len(), scores.iter().filter(|&&s| s >= t).count());
        prop_assert!(kept.iter().all(|&s| s >= t));
    }

    #[test]
    fn threshold_top_k_is_both(scores in ranked(), t in -6.0f32..6.0, k in 1usize..50) {
        let both = Selection::ThresholdTopK { threshold: t, k }.apply(scores.clone(), |s| *s);
        let by_t = Selection::Threshold(t).apply(scores.clone(), |s| *s);
        prop_assert_eq!(&both[..], &by_t[..by_t.len().min(k)]);
        let sel = Selection::ThresholdTopK { threshold: t, k };
        prop_assert!(sel.validate().is_ok());
    }

    #[test]
    fn invalid_selections_are_refused(k in 0usize..1, t in prop_oneof![Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)]) {
        prop_assert!(Selection::TopK(k).validate().is_err());
        prop_assert!(Selection::Threshold(t).validate().is_err());
        let sel = Selection::ThresholdTopK { threshold: t, k: 3 };
        prop_assert!(sel.validate().is_err());
    }
}
