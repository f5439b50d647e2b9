//! Baseline retrievers implementing [`lprag_core::Retriever`]: exact flat cosine search
//! ([`DenseRetriever`]), Okapi BM25 ([`Bm25Retriever`]) and reciprocal-rank fusion of
//! several retrievers ([`HybridRetriever`]).
//!
//! All three index whole passages by default (one [`Chunk`] per [`Document`], see
//! [`passage_chunks`]) and can also be built over any chunk list (`from_chunks`). The
//! text a chunk is indexed under is [`Chunk::embedding_text`]: `title + "\n" + text`
//! (the HippoRAG passage string) when the title is not empty.
//!
//! Ranking is deterministic: equal scores are ordered by chunk id.

mod bm25;
mod dense;
mod hybrid;

pub use bm25::{bm25_tokens, Bm25Config, Bm25Retriever};
pub use dense::DenseRetriever;
pub use hybrid::{HybridRetriever, RrfConfig};

use lprag_core::{Chunk, Document, Error, Provenance, Result, Selection};

/// One chunk per document, holding its whole text: chunk `i` is document `i`, with
/// `provenance.document_id` = the document's id and span `0..text.len()`.
///
/// Fails with [`Error::EmptyCorpus`] when `docs` is empty.
pub fn passage_chunks(docs: &[Document]) -> Result<Vec<Chunk>> {
    if docs.is_empty() {
        return Err(Error::EmptyCorpus("no documents to index".into()));
    }
    Ok(docs
        .iter()
        .enumerate()
        .map(|(i, d)| Chunk {
            id: i,
            text: d.text.clone(),
            provenance: Provenance {
                document_id: d.id.clone(),
                title: d.title.clone(),
                span: 0..d.text.len(),
            },
            metadata: d.metadata.clone(),
        })
        .collect())
}

/// Check that chunk ids are positions (`chunks[i].id == i`) and that there is at least one.
pub(crate) fn check_chunks(chunks: &[Chunk], who: &str) -> Result<()> {
    if chunks.is_empty() {
        return Err(Error::EmptyCorpus(format!("{who}: no chunks to index")));
    }
    if let Some((i, c)) = chunks.iter().enumerate().find(|(i, c)| c.id != *i) {
        return Err(Error::invalid(
            format!("{who}: chunks[{i}]"),
            format!("chunk id is {} but must equal its position {i}", c.id),
        ));
    }
    Ok(())
}

/// Indices of `scores` that `selection` keeps, best first; equal scores by index; NaN
/// scores rank last.
pub(crate) fn select(scores: &[f64], selection: Selection) -> Result<Vec<(usize, f64)>> {
    selection.validate()?;
    let key = |i: usize| {
        let s = scores[i];
        if s.is_nan() {
            f64::NEG_INFINITY
        } else {
            s
        }
    };
    let cmp = |a: &usize, b: &usize| key(*b).total_cmp(&key(*a)).then(a.cmp(b));
    let (threshold, k) = match selection {
        Selection::TopK(k) => (None, Some(k)),
        Selection::Threshold(t) => (Some(f64::from(t)), None),
        Selection::ThresholdTopK { threshold, k } => (Some(f64::from(threshold)), Some(k)),
    };
    let mut idx: Vec<usize> = match threshold {
        Some(t) => (0..scores.len()).filter(|&i| key(i) >= t).collect(),
        None => (0..scores.len()).collect(),
    };
    if let Some(k) = k {
        if k < idx.len() {
            idx.select_nth_unstable_by(k - 1, cmp);
            idx.truncate(k);
        }
    }
    idx.sort_unstable_by(cmp);
    Ok(idx.into_iter().map(|i| (i, scores[i])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_orders_breaks_ties_and_thresholds() {
        let s = [0.5, 0.9, f64::NAN, 0.5, 0.1];
        let ids = |v: Vec<(usize, f64)>| v.into_iter().map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(ids(select(&s, Selection::TopK(3)).unwrap()), vec![1, 0, 3]);
        assert_eq!(
            ids(select(&s, Selection::TopK(10)).unwrap()),
            vec![1, 0, 3, 4, 2]
        );
        assert_eq!(
            ids(select(&s, Selection::Threshold(0.5)).unwrap()),
            vec![1, 0, 3]
        );
        assert_eq!(
            ids(select(
                &s,
                Selection::ThresholdTopK {
                    threshold: 0.2,
                    k: 2
                }
            )
            .unwrap()),
            vec![1, 0]
        );
        assert!(select(&s, Selection::TopK(0)).is_err());
    }

    #[test]
    fn passage_chunks_mirror_documents() {
        let docs = vec![Document::new("a", "T", "body"), Document::new("b", "", "x")];
        let c = passage_chunks(&docs).unwrap();
        assert_eq!(c[1].id, 1);
        assert_eq!(c[1].provenance.document_id, "b");
        assert_eq!(c[0].embedding_text(), "T\nbody");
        assert_eq!(c[0].provenance.span, 0..4);
        assert!(passage_chunks(&[]).is_err());
    }
}
