//! Every retriever treats a `Selection` the same way: invalid ones (`k = 0`, a non-finite
//! threshold) are the same typed error everywhere, and valid ones keep what they promise.

use std::sync::Arc;

use lprag::{
    Document, Error, G2Rag, GfmConfig, GfmRag, HashingEncoder, LesegrConfig, LesegrRag,
    LesegrVariant, LpRag, LpRagConfig, QcgRag, Retriever, Selection, TrainConfig,
};

fn corpus() -> Vec<Document> {
    vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
        ),
        Document::new(
            "warsaw",
            "Warsaw",
            "Warsaw is the capital of Poland. The city lies on the Vistula River.",
        ),
        Document::new(
            "nobel",
            "Alfred Nobel",
            "Alfred Nobel invented dynamite in 1867. He was born in Stockholm.",
        ),
        Document::new(
            "tokyo",
            "Tokyo",
            "Tokyo is the capital of Japan. The Sumida River flows through the city.",
        ),
        Document::new(
            "kyoto",
            "Kyoto",
            "Kyoto was the imperial capital of Japan for over a thousand years.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level, in the Himalayas.",
        ),
    ]
}

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
