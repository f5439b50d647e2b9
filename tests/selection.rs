//! Every retriever treats a `Selection` the same way: invalid ones (`k = 0`, a non-finite
//! threshold) are the same typed error everywhere, and valid ones keep what they promise.

use std::sync::Arc;

use lprag::{
    Error, G2Rag, GfmConfig, GfmRag, HashingEncoder, LesegrConfig, LesegrRag, LesegrVariant, LpRag,
    LpRagConfig, QcgRag, Retriever, Selection, TrainConfig,
};

mod common;
use common::corpus;

async fn retrievers() -> Vec<Arc<dyn Retriever>> {
    let docs = corpus();
    let enc = || Arc::new(HashingEncoder::default());
    let lprag = LpRag::builder()
        .encoder(enc())
        .config(LpRagConfig {
            train: TrainConfig {
                epochs: 2,
                ..TrainConfig::default()
            },
            ..LpRagConfig::default()
        })
        .build(&docs)
        .await
        .unwrap();
    let qcg = QcgRag::builder().encoder(enc()).build(&docs).await.unwrap();
    let g2 = G2Rag::builder().encoder(enc()).build(&docs).await.unwrap();
    let lesegr = LesegrRag::builder()
        .encoder(enc())
        .config(LesegrConfig {
            variant: LesegrVariant::Lite,
            ..LesegrConfig::default()
        })
        .build(&docs)
        .await
        .unwrap();
    let mut gfm_config = GfmConfig::cpu();
    gfm_config.model.hidden = 8;
    gfm_config.model.layers = 1;
    gfm_config.pretrain_queries = 10;
    gfm_config.synthetic_queries = 2;
    gfm_config.pretrain.epochs = 1;
    gfm_config.finetune.epochs = 1;
    let gfm = GfmRag::builder()
        .encoder(enc())
        .config(gfm_config)
        .build(&docs)
        .await
        .unwrap();
    vec![
        Arc::new(lprag),
        Arc::new(qcg),
        Arc::new(g2),
        Arc::new(lesegr),
        Arc::new(gfm),
    ]
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
