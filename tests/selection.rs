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

/// A query over the length limit ([`lprag::DEFAULT_MAX_QUERY_BYTES`] unless configured) is
/// the same typed error in every retriever and every retrieve path, before any embedding;
/// a query of exactly the limit is answered.
#[tokio::test]
async fn every_retriever_refuses_a_query_over_the_length_limit() {
    use lprag::{Filter, QcgConfig, QcgRag, DEFAULT_MAX_QUERY_BYTES};
    let limit = DEFAULT_MAX_QUERY_BYTES;
    let at = "Which river flows through Warsaw? ".repeat(limit / 34 + 1)[..limit].to_string();
    assert_eq!(at.len(), limit);
    let over = format!("{at}x");
    let refused = |name: &str, err: Error, len: usize, limit: usize| {
        assert!(
            matches!(&err, Error::InvalidInput { location, .. } if location == "query"),
            "{name}: {err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{len} bytes")) && msg.contains(&format!("limit of {limit}")),
            "{name}: {msg}"
        );
    };
    for r in retrievers().await {
        let name = r.name().to_string();
        let top = r.retrieve(&at, Selection::TopK(2)).await.unwrap();
        assert_eq!(top.len(), 2, "{name}");
        let err = r.retrieve(&over, Selection::TopK(2)).await.unwrap_err();
        refused(&name, err, limit + 1, limit);
        let filter = Filter::eq("lang", "en");
        let err = r
            .retrieve_filtered(&over, Selection::TopK(2), &filter)
            .await
            .unwrap_err();
        refused(&name, err, limit + 1, limit);
        let batch = ["capital of Japan".to_string(), over.clone()];
        let err = r
            .retrieve_batch(&batch, Selection::TopK(2))
            .await
            .unwrap_err();
        refused(&name, err, limit + 1, limit);
    }
    // The limit is a configuration field.
    let qcg = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(QcgConfig {
            max_query_bytes: 16,
            ..QcgConfig::default()
        })
        .build(&common::corpus())
        .await
        .unwrap();
    assert!(qcg
        .retrieve("capital of Japan", Selection::TopK(1))
        .await
        .is_ok());
    let err = qcg
        .retrieve("capital of Japan?", Selection::TopK(1))
        .await
        .unwrap_err();
    refused("qcg (16 bytes)", err, 17, 16);
}
