//! `Reranked`: any retriever followed by a `Reranker`.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use lprag::{
    Bm25Retriever, Document, Error, Filter, Reranked, Reranker, Result, Retriever, Selection,
};

/// Scores a text by how many times it contains the query's last word; counts its calls.
struct LastWord {
    calls: AtomicUsize,
    seen: AtomicUsize,
}

impl LastWord {
    fn new() -> Self {
        Self {
            calls: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl Reranker for LastWord {
    fn name(&self) -> &str {
        "last-word"
    }

    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.fetch_add(texts.len(), Ordering::SeqCst);
        let word = query.split_whitespace().last().unwrap_or("").to_lowercase();
        Ok(texts
            .iter()
            .map(|t| t.to_lowercase().matches(word.as_str()).count() as f32)
            .collect())
    }
}

/// A reranker that answers with the wrong number of scores, or a NaN.
struct Faulty {
    nan: bool,
}

#[async_trait]
impl Reranker for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }

    async fn score(&self, _query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        Ok(if self.nan {
            vec![f32::NAN; texts.len()]
        } else {
            vec![1.0; texts.len().saturating_sub(1)]
        })
    }
}

fn docs() -> Vec<Document> {
    vec![
        Document::new("a", "A", "apples and pears in the orchard").with_metadata("kind", "fruit"),
        Document::new("b", "B", "pears pears pears, orchard pears").with_metadata("kind", "fruit"),
        Document::new("c", "C", "the orchard of apples").with_metadata("kind", "tree"),
        Document::new("d", "D", "an orchard with one pear tree").with_metadata("kind", "tree"),
        Document::new("e", "E", "nothing to do with fruit").with_metadata("kind", "other"),
    ]
}

async fn bm25() -> Bm25Retriever {
    Bm25Retriever::builder().build(&docs()).await.unwrap()
}

fn ids(hits: &[lprag::ScoredChunk]) -> Vec<String> {
    hits.iter()
        .map(|h| h.chunk.provenance.document_id.clone())
        .collect()
}

#[tokio::test]
async fn the_reranker_orders_the_shortlist_and_the_selection_reads_its_scores() {
    let first = bm25().await;
    let plain = first
        .retrieve("orchard pears", Selection::TopK(5))
        .await
        .unwrap();
    let search = Reranked::new(first, LastWord::new());
    assert_eq!(search.name(), "bm25+last-word");
    let hits = search
        .retrieve("orchard pears", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    // "pears" counted: b (4), a (1), d ("pear" is not "pears": 0), c (0).
    assert_eq!(ids(&hits)[..2], ["b", "a"]);
    assert_eq!(hits[0].score, 4.0);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // Ties keep the first stage's order.
    let tied: Vec<String> = ids(&plain)
        .into_iter()
        .filter(|d| d != "b" && d != "a")
        .collect();
    assert_eq!(ids(&hits)[2], tied[0]);
    // A threshold applies to the reranker's scores.
    let above = search
        .retrieve("orchard pears", Selection::Threshold(1.0))
        .await
        .unwrap();
    assert_eq!(ids(&above), ["b", "a"]);
}

#[tokio::test]
async fn it_rescores_as_many_candidates_as_asked_and_k_when_more() {
    let search = Reranked::new(bm25().await, LastWord::new()).with_candidates(2);
    let hits = search
        .retrieve("orchard pears", Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(search.reranker().seen.load(Ordering::SeqCst), 2);
    let hits = search
        .retrieve("orchard pears", Selection::TopK(4))
        .await
        .unwrap();
    assert_eq!(hits.len(), 4);
    assert_eq!(search.reranker().seen.load(Ordering::SeqCst), 2 + 4);
    assert_eq!(search.reranker().calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn filters_reach_the_first_stage() {
    let search = Reranked::new(bm25().await, LastWord::new());
    let hits = search
        .retrieve_filtered(
            "orchard pears",
            Selection::TopK(5),
            &Filter::eq("kind", "tree"),
        )
        .await
        .unwrap();
    let mut got = ids(&hits);
    got.sort();
    assert_eq!(got, ["c", "d"]);
    let batch = search
        .retrieve_batch(
            &["orchard pears".to_string(), "orchard apples".to_string()],
            Selection::TopK(1),
        )
        .await
        .unwrap();
    assert_eq!(ids(&batch[0]), ["b"]);
    assert_eq!(batch[1][0].score, 1.0);
}

#[tokio::test]
async fn a_faulty_reranker_is_an_error_naming_it_and_bad_selections_are_refused() {
    for nan in [false, true] {
        let search = Reranked::new(bm25().await, Faulty { nan });
        let e = search
            .retrieve("orchard pears", Selection::TopK(2))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
        assert!(e.to_string().contains("faulty"), "{e}");
    }
    let search = Reranked::new(bm25().await, LastWord::new());
    assert!(search
        .retrieve("orchard", Selection::TopK(0))
        .await
        .is_err());
    assert_eq!(search.reranker().calls.load(Ordering::SeqCst), 0);
}
