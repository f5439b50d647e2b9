//! [`Reranker`]: a second stage that scores a query against each of a retriever's chunks
//! (a cross-encoder reads both texts at once, which a first-stage index cannot afford on
//! every chunk). The facade's `lprag::Reranked` puts one after any retriever.

use async_trait::async_trait;

use crate::{Error, Result};

/// Scores how relevant each text is to a query; higher is more relevant. The scale is the
/// reranker's own (a cross-encoder's logit, say), so thresholds are set per reranker.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// A short name (for example the model's id).
    fn name(&self) -> &str;

    /// One finite score per text of `texts`, in order.
    ///
    /// # Errors
    /// Whatever the model reports (an [`Error::Backend`] for a failing model or service).
    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>>;
}

/// Check a reranker's answer: one finite score per text. Callers of
/// [`Reranker::score`] use it so that a faulty implementation is an error naming it, not
/// a panic or a silently shortened ranking.
///
/// # Errors
/// [`Error::InvalidInput`] naming the reranker, when the count differs or a score is not
/// finite.
pub fn check_rerank_scores(name: &str, texts: usize, scores: &[f32]) -> Result<()> {
    let location = || format!("reranker {name:?}");
    if scores.len() != texts {
        return Err(Error::invalid(
            location(),
            format!("returned {} scores for {texts} texts", scores.len()),
        ));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(Error::invalid(
            location(),
            format!("score {i} is not finite ({})", scores[i]),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_counts_and_non_finite_scores_name_the_reranker() {
        assert!(check_rerank_scores("x", 2, &[1.0, -3.0]).is_ok());
        let e = check_rerank_scores("ce", 3, &[1.0])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"ce\"") && e.contains("1 scores for 3 texts"),
            "{e}"
        );
        let e = check_rerank_scores("ce", 2, &[1.0, f32::NAN])
            .unwrap_err()
            .to_string();
        assert!(e.contains("score 1 is not finite"), "{e}");
    }
}
