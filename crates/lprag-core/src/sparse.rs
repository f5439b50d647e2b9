//! Sparse (lexical) relevance: the [`SparseEncoder`] / [`SparseIndex`] traits and the
//! [`SparseVector`] they produce. Okapi BM25 (`lprag_text::Bm25`) is the shipped
//! implementation.
//!
//! A sparse encoder is *fitted* on a corpus (BM25 needs document frequencies and lengths)
//! and gives back an index that scores a query against every fitted text, f_sparse(q, c_i),
//! and exposes each text's sparse vector for text–text relevance (CG-RAG's inter-document
//! edges use the cosine of two such vectors). Implement the traits to plug in SPLADE,
//! BGE-M3's lexical weights or TF-IDF.

use serde::{Deserialize, Serialize};

use crate::Result;

/// A sparse vector: term ids ascending, each with its weight.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SparseVector {
    /// `(term id, weight)`, term ids strictly ascending.
    pub entries: Vec<(u32, f32)>,
}

impl SparseVector {
    /// Euclidean norm.
    pub fn norm(&self) -> f32 {
        self.entries.iter().map(|(_, w)| w * w).sum::<f32>().sqrt()
    }

    /// Dot product (a merge over the sorted term ids).
    pub fn dot(&self, other: &SparseVector) -> f32 {
        let (mut i, mut j, mut s) = (0, 0, 0.0f32);
        let (a, b) = (&self.entries, &other.entries);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    s += a[i].1 * b[j].1;
                    i += 1;
                    j += 1;
                }
            }
        }
        s
    }

    /// Cosine similarity; 0 when either vector is zero.
    pub fn cosine(&self, other: &SparseVector) -> f32 {
        let n = self.norm() * other.norm();
        if n > 0.0 {
            self.dot(other) / n
        } else {
            0.0
        }
    }
}

/// A fitted sparse index over a list of texts (see [`SparseEncoder::fit`]).
pub trait SparseIndex: Send + Sync {
    /// Number of fitted texts.
    fn len(&self) -> usize;

    /// Whether no text was fitted.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// f_sparse(query, text_i) for every fitted text, in fit order. Larger is more
    /// relevant; 0 means no lexical evidence.
    fn scores(&self, query: &str) -> Vec<f64>;

    /// The sparse representation of fitted text `i` (`i < len()`).
    fn vector(&self, i: usize) -> SparseVector;

    /// Every fitted text's sparse vector, in fit order (override when one pass over the
    /// index is cheaper than `len()` calls of [`SparseIndex::vector`]).
    fn vectors(&self) -> Vec<SparseVector> {
        (0..self.len()).map(|i| self.vector(i)).collect()
    }
}

/// Builds a [`SparseIndex`] from a corpus. Deterministic encoders (BM25) can be refitted
/// on load instead of persisted.
pub trait SparseEncoder: Send + Sync {
    /// A short name, recorded in saved indexes.
    fn name(&self) -> &str;

    /// Fit on `texts` (text `i` is index row `i`).
    fn fit(&self, texts: &[String]) -> Result<Box<dyn SparseIndex>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_vector_algebra() {
        let a = SparseVector {
            entries: vec![(0, 3.0), (2, 4.0)],
        };
        let b = SparseVector {
            entries: vec![(1, 1.0), (2, 2.0)],
        };
        assert_eq!(a.norm(), 5.0);
        assert_eq!(a.dot(&b), 8.0);
        assert!((a.cosine(&b) - 8.0 / (5.0 * 5f32.sqrt())).abs() < 1e-6);
        assert_eq!(a.cosine(&SparseVector::default()), 0.0);
    }
}
