//! Baseline retrievers implementing [`lprag_core::Retriever`]: exact flat cosine search
//! ([`DenseRetriever`]), Okapi BM25 ([`Bm25Retriever`]) and reciprocal-rank fusion of the
//! two ([`HybridRetriever`]). They live in the library ([`lprag::baselines`], with
//! builders, filters, updates and save/open); this module re-exports them for the
//! harness.
//!
//! The harness indexes whole passages (one [`lprag_core::Chunk`] per
//! [`lprag_core::Document`], see [`passage_chunks`]) with `build` / `from_chunks`. The
//! text a chunk is indexed under is [`lprag_core::Chunk::embedding_text`]:
//! `title + "\n" + text` (the HippoRAG passage string) when the title is not empty.
//!
//! Ranking is deterministic: equal scores are ordered by chunk id.

pub use lprag::baselines::{
    passage_chunks, Bm25Config, Bm25Retriever, DenseConfig, DenseRetriever, HybridRetriever,
    RrfConfig,
};
pub use lprag_text::bm25_tokens;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lprag_core::{Document, Filter, Retriever, Selection};

    use super::*;
    use crate::test_support::KeywordEncoder;

    #[tokio::test]
    async fn dense_ranks_by_cosine() {
        let docs = vec![
            Document::new("0", "", "apple apple"),
            Document::new("1", "", "banana"),
            Document::new("2", "", "apple banana"),
        ];
        let r = DenseRetriever::build(&docs, Arc::new(KeywordEncoder))
            .await
            .unwrap();
        let hits = r.retrieve("apple", Selection::TopK(3)).await.unwrap();
        let ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
        // cosines: doc0 = 1, doc2 = 1/√2, doc1 = 0
        assert_eq!(ids, vec![0, 2, 1]);
        assert!((hits[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        let hits = r
            .retrieve("apple", Selection::Threshold(0.5))
            .await
            .unwrap();
        assert_eq!(hits.len(), 2);
        assert!(r.retrieve("apple", Selection::TopK(0)).await.is_err());
        assert_eq!(r.chunks().len(), 3);
        // A filter ranks the admitted chunks only.
        let f = Filter::documents(["1", "2"]);
        let hits = r
            .retrieve_filtered("apple", Selection::TopK(1), &f)
            .await
            .unwrap();
        assert_eq!(hits[0].chunk.id, 2);
    }

    fn corpus() -> Vec<Document> {
        vec![
            Document::new("0", "", "cat sat"),
            Document::new("1", "", "Cat cat dog."),
            Document::new("2", "", "bird"),
        ]
    }

    #[tokio::test]
    async fn bm25_ranks_by_the_core_index_scores() {
        use lprag_core::SparseIndex;
        let r = Bm25Retriever::build(&corpus(), Bm25Config::default()).unwrap();
        // The scores are the core index's (hand-computed in lprag_text::bm25's tests).
        assert_eq!(r.scores("cat dog"), r.index().scores("cat dog"));
        assert!(r.idf("cat").is_some());
        assert_eq!(r.vocabulary_size(), 4);
        let hits = r.retrieve("cat dog", Selection::TopK(3)).await.unwrap();
        let ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
        assert_eq!(ids, vec![1, 0, 2]);
        assert_eq!(r.name(), "bm25");
    }

    #[test]
    fn bm25_indexes_titles_and_checks_its_config() {
        // (with N = 2, a term in one chunk has idf ln(1.5) − ln(1.5) = 0: use three)
        let docs = vec![
            Document::new("0", "Zebra", "stripes"),
            Document::new("1", "", "horse"),
            Document::new("2", "", "pony"),
        ];
        let r = Bm25Retriever::build(&docs, Bm25Config::default()).unwrap();
        assert!(r.scores("zebra")[0] > 0.0);
        let bad = Bm25Config {
            b: 1.5,
            ..Bm25Config::default()
        };
        assert!(Bm25Retriever::build(&docs, bad).is_err());
        assert!(Bm25Retriever::build(&[], Bm25Config::default()).is_err());
    }

    #[tokio::test]
    async fn hybrid_dense_bm25_over_passages() {
        let docs = vec![
            Document::new("0", "", "apple pie"),
            Document::new("1", "", "banana bread"),
            Document::new("2", "", "cherry tart"),
        ];
        let h = HybridRetriever::dense_bm25(&docs, Arc::new(KeywordEncoder))
            .await
            .unwrap();
        let hits = h.retrieve("banana", Selection::TopK(1)).await.unwrap();
        assert_eq!(hits[0].chunk.provenance.document_id, "1");
        assert_eq!(h.chunks().len(), 3);
        // RRF of the parts' rankings, with the default k = 60.
        let all = h.retrieve("banana", Selection::TopK(3)).await.unwrap();
        let dense = h
            .dense()
            .retrieve("banana", Selection::TopK(3))
            .await
            .unwrap();
        let bm25 = h
            .bm25()
            .retrieve("banana", Selection::TopK(3))
            .await
            .unwrap();
        for hit in &all {
            let rank = |list: &[lprag_core::ScoredChunk]| {
                list.iter()
                    .position(|x| x.chunk.id == hit.chunk.id)
                    .unwrap()
                    + 1
            };
            let expect = 1.0 / (60.0 + rank(&dense) as f64) + 1.0 / (60.0 + rank(&bm25) as f64);
            assert!((f64::from(hit.score) - expect).abs() < 1e-6);
        }
    }

    #[test]
    fn passage_chunks_mirror_documents() {
        let docs = vec![Document::new("a", "T", "body"), Document::new("b", "", "x")];
        let c = passage_chunks(&docs).unwrap();
        assert_eq!(c[1].id, 1);
        assert_eq!(c[1].provenance.document_id, "b");
        assert_eq!(c[0].embedding_text(), "T\nbody");
        assert_eq!(c[0].provenance.span, 0..4);
        assert_eq!(c[0].document_hash(), Some(docs[0].content_hash().as_str()));
        assert!(passage_chunks(&[]).is_err());
    }
}
