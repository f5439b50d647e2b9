//! Every retriever treats a `Selection` the same way: invalid ones (`k = 0`, a non-finite
//! threshold) are the same typed error everywhere, and valid ones keep what they promise.

use std::sync::Arc;

use lprag::{Error, HashingEncoder, Retriever, Selection};

use crate::common;

async fn retrievers() -> Vec<Arc<dyn Retriever>> {
    common::retrievers_with(|| Arc::new(HashingEncoder::default()))
        .await
        .unwrap()
}

#[tokio::test]
async fn every_retriever_handles_selections_alike() {
    let q = "Which river flows through Warsaw?";
    for r in retrievers().await {
        for bad in [
            Selection::TopK(0),
            Selection::Threshold(f32::NAN),
            Selection::Threshold(f32::INFINITY),
            Selection::ThresholdTopK {
                threshold: 0.5,
                k: 0,
            },
            Selection::ThresholdTopK {
                threshold: f32::NAN,
                k: 3,
            },
        ] {
            let err = r.retrieve(q, bad).await.unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput { location, .. } if location == "selection"),
                "{} {bad:?}: {err}",
                r.name()
            );
        }
        let top = r.retrieve(q, Selection::TopK(2)).await.unwrap();
        assert_eq!(top.len(), 2, "{}", r.name());
        let all = r.retrieve(q, Selection::Threshold(-1.0)).await.unwrap();
        assert!(all.len() >= top.len(), "{}", r.name());
        assert!(
            all.windows(2).all(|w| w[0].score >= w[1].score),
            "{}: best first",
            r.name()
        );
        let capped = r
            .retrieve(
                q,
                Selection::ThresholdTopK {
                    threshold: -1.0,
                    k: 1,
                },
            )
            .await
            .unwrap();
        assert_eq!(capped.len(), 1, "{}", r.name());
        assert_eq!(capped[0].chunk.id, all[0].chunk.id, "{}", r.name());
    }
}
