//! Exact nearest rows by cosine similarity for one query: a single scan over the rows with
//! precomputed inverse norms, keeping the best `m` (the candidate stage of LP-RAG queries).

use lprag_core::dot;

/// `1/‖row‖` for the first `n` rows of `rows` (0 for a zero row, so it scores 0).
pub fn inverse_norms(rows: &lprag_core::Embeddings, n: usize) -> Vec<f32> {
    rows.iter()
        .take(n)
        .map(|r| {
            let norm = dot(r, r).sqrt();
            if norm > 0.0 {
                1.0 / norm
            } else {
                0.0
            }
        })
        .collect()
}

/// The `m` rows among the first `inv_norms.len()` of `rows` most cosine-similar to `query`,
/// best first, as `(row, cosine × ‖query‖)` (the query's norm does not change the order).
/// Ties go to the lower row index. `m` larger than the row count returns every row.
pub fn nearest_by_cosine(
    rows: &lprag_core::Embeddings,
    inv_norms: &[f32],
    query: &[f32],
    m: usize,
) -> Vec<(u32, f32)> {
    nearest_by_cosine_where(rows, inv_norms, query, m, &|_| true)
}

/// [`nearest_by_cosine`] among the rows `keep` admits (a metadata filter, say); rows it
/// rejects are not scored.
pub fn nearest_by_cosine_where(
    rows: &lprag_core::Embeddings,
    inv_norms: &[f32],
    query: &[f32],
    m: usize,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<(u32, f32)> {
    let n = inv_norms.len().min(rows.rows());
    if m == 0 || n == 0 {
        return Vec::new();
    }
    let mut scored: Vec<(u32, f32)> = rows
        .iter()
        .take(n)
        .zip(inv_norms)
        .enumerate()
        .filter(|&(i, _)| keep(i))
        .map(|(i, (r, &inv))| (i as u32, dot(r, query) * inv))
        .collect();
    let m = m.min(scored.len());
    if m == 0 {
        return Vec::new();
    }
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if m < scored.len() {
        scored.select_nth_unstable_by(m - 1, order);
        scored.truncate(m);
    }
    scored.sort_unstable_by(order);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::Embeddings;

    #[test]
    fn nearest_rows_best_first_with_ties_to_the_lower_index() {
        let rows = Embeddings::from_rows(
            2,
            &[
                vec![1.0, 0.0],
                vec![0.0, 2.0],
                vec![3.0, 3.0],
                vec![0.0, 0.0],
                vec![2.0, 0.0],
                vec![9.0, 9.0],
            ],
        )
        .unwrap();
        // The last row is excluded by passing five norms.
        let inv = inverse_norms(&rows, 5);
        assert_eq!(inv.len(), 5);
        assert_eq!(inv[3], 0.0);
        let got = nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 3);
        let ids: Vec<u32> = got.iter().map(|p| p.0).collect();
        // rows 0 and 4 tie at cos ≈ 0.995·‖q‖, then row 2.
        assert_eq!(ids, vec![0, 4, 2]);
        assert!((got[0].1 - got[1].1).abs() < 1e-6);
        assert_eq!(nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 99).len(), 5);
        assert!(nearest_by_cosine(&rows, &inv, &[1.0, 0.1], 0).is_empty());
        // A full scan agrees with sorting every cosine.
        let all = nearest_by_cosine(&rows, &inv, &[0.2, 1.0], 5);
        let cos: Vec<f32> = (0..5)
            .map(|i| lprag_core::cosine(rows.row(i), &[0.2, 1.0]))
            .collect();
        for w in all.windows(2) {
            assert!(cos[w[0].0 as usize] >= cos[w[1].0 as usize]);
        }
        assert!((dot(&[1.0; 19], &[2.0; 19]) - 38.0).abs() < 1e-5);
    }
}
