//! G²RAG end to end with the offline components, and its LLM merge path with a fake model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lprag::llm::{ChatModel, ChatRequest, ChatResponse, LlmError};
use lprag::{
    Document, Error, G2Config, G2Rag, G2Source, HashingEncoder, MergeOrder, OutlierPolicy,
    Retriever, Selection,
};

/// Three topics, several passages each, and one stray passage.
fn corpus() -> Vec<Document> {
    let texts = [
        (
            "curie1",
            "Marie Curie",
            "Marie Curie was a physicist and chemist born in Warsaw.",
        ),
        (
            "curie2",
            "Marie Curie",
            "Marie Curie won the Nobel Prize in Physics and in Chemistry.",
        ),
        (
            "curie3",
            "Marie Curie",
            "Marie Curie discovered polonium and radium with Pierre Curie.",
        ),
        (
            "curie4",
            "Pierre Curie",
            "Pierre Curie was a physicist, the husband of Marie Curie.",
        ),
        (
            "tokyo1",
            "Tokyo",
            "Tokyo is the capital of Japan and its largest city.",
        ),
        (
            "tokyo2",
            "Tokyo",
            "Tokyo hosted the Summer Olympics in 1964 and in 2021.",
        ),
        (
            "tokyo3",
            "Tokyo",
            "The Tokyo metropolis lies on Tokyo Bay in Japan.",
        ),
        (
            "tokyo4",
            "Japan",
            "Japan's capital Tokyo is served by the Shinkansen railway.",
        ),
        (
            "everest1",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level.",
        ),
        (
            "everest2",
            "Mount Everest",
            "Mount Everest lies in the Himalayas on the Nepal border.",
        ),
        (
            "everest3",
            "Mount Everest",
            "Climbers of Mount Everest face altitude sickness in the Himalayas.",
        ),
        (
            "everest4",
            "Himalayas",
            "The Himalayas hold Mount Everest, the highest mountain.",
        ),
        (
            "cheese",
            "Cheddar",
            "Cheddar cheese ripens for months in caves.",
        ),
    ];
    texts
        .iter()
        .map(|(id, title, text)| Document::new(*id, *title, *text))
        .collect()
}

/// Small clusters for a small corpus.
fn small() -> G2Config {
    G2Config {
        min_cluster_size: 3,
        min_samples: Some(2),
        knn_k: 2,
        ..G2Config::default()
    }
}

async fn build(config: G2Config) -> G2Rag {
    G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config)
        .build(&corpus())
        .await
        .unwrap()
}

#[tokio::test]
async fn builds_communities_and_retrieves_from_both_levels() {
    let rag = build(small()).await;
    let s = rag.stats().clone();
    assert_eq!(s.chunks, 13);
    assert!(s.clusters >= 2, "{s:?}");
    assert!(
        s.components >= s.clusters && s.subgroups >= s.components,
        "{s:?}"
    );
    assert!(s.communities <= s.subgroups, "{s:?}");
    assert!(!s.llm_merge);
    // Communities partition the clustered chunks; outliers are in none of them.
    let mut seen: Vec<usize> = rag
        .communities()
        .iter()
        .flat_map(|c| c.members.clone())
        .chain(rag.outliers().iter().copied())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..13).collect::<Vec<_>>());
    for c in rag.communities() {
        let norm: f32 = c.centroid.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }

    let q = "Which city hosted the Summer Olympics in 1964?";
    let hits = rag.retrieve(q, Selection::TopK(4)).await.unwrap();
    assert_eq!(hits.len(), 4);
    assert_eq!(hits[0].chunk.provenance.document_id, "tokyo2", "{hits:#?}");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let why = rag.explain(q).await.unwrap();
    assert_eq!(why.chunk_level.len(), 5);
    assert_eq!(why.merged[0].chunk, hits[0].chunk.id);
    assert_eq!(why.merged[0].source, G2Source::Chunk);
    // The best community is a Tokyo one, and its chunks are in the ranking.
    if let Some(&(best, _)) = why.communities.first() {
        let c = &rag.communities()[best];
        let docs: Vec<&str> = c
            .members
            .iter()
            .map(|&m| rag.chunks()[m].provenance.document_id.as_str())
            .collect();
        assert!(docs.iter().all(|d| d.starts_with("tokyo")), "{docs:?}");
        // Its members are all in the merged list (from whichever level gave them first).
        assert!(c
            .members
            .iter()
            .all(|m| why.merged.iter().any(|h| h.chunk == *m)));
    }

    // Threshold selections use the capped scores and never pad.
    let all = rag.retrieve(q, Selection::Threshold(-1.0)).await.unwrap();
    assert_eq!(all.len(), why.merged.len());
}

#[tokio::test]
async fn padding_merge_orders_and_outlier_policies() {
    let q = "highest mountain in the Himalayas";
    let rag = build(G2Config {
        chunk_top_k: 1,
        community_top_k: 1,
        community_chunk_cap: 1,
        ..small()
    })
    .await;
    let hits = rag.retrieve(q, Selection::TopK(13)).await.unwrap();
    assert_eq!(hits.len(), 13, "padded to k with dense order");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let rag = build(G2Config {
        chunk_top_k: 1,
        community_top_k: 1,
        community_chunk_cap: 1,
        pad_with_dense: false,
        ..small()
    })
    .await;
    assert!(rag.retrieve(q, Selection::TopK(13)).await.unwrap().len() <= 2);

    // Chunk-first with the default chunk_top_k is dense search for k ≤ 5.
    let chunk_first = build(G2Config {
        merge_order: MergeOrder::ChunkFirst,
        ..small()
    })
    .await;
    let why = chunk_first.explain(q).await.unwrap();
    let top5: Vec<usize> = chunk_first
        .retrieve(q, Selection::TopK(5))
        .await
        .unwrap()
        .iter()
        .map(|h| h.chunk.id)
        .collect();
    let dense: Vec<usize> = why.chunk_level.iter().map(|&(c, _)| c).collect();
    assert_eq!(top5, dense);

    // Singletons: every chunk is in exactly one community.
    let singletons = build(G2Config {
        outliers: OutlierPolicy::Singletons,
        ..small()
    })
    .await;
    let dropped = build(small()).await;
    assert_eq!(
        singletons.stats().communities,
        dropped.stats().communities + dropped.stats().outliers
    );
    let covered: usize = singletons
        .communities()
        .iter()
        .map(|c| c.members.len())
        .sum();
    assert_eq!(covered, 13);
}

#[tokio::test]
async fn save_load_round_trip_and_typed_errors() {
    let rag = build(small()).await;
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let loaded = G2Rag::load(dir.path(), Arc::new(HashingEncoder::default())).unwrap();
    assert_eq!(loaded.communities(), rag.communities());
    assert_eq!(loaded.stats(), rag.stats());
    for q in ["Who discovered radium?", "Japan capital", "cheese"] {
        let a = rag.retrieve(q, Selection::TopK(8)).await.unwrap();
        let b = loaded.retrieve(q, Selection::TopK(8)).await.unwrap();
        assert_eq!(a, b);
        assert_eq!(
            rag.explain(q).await.unwrap(),
            loaded.explain(q).await.unwrap()
        );
    }

    let other = lprag::text::HashingEncoder::new(lprag::text::HashingEncoderConfig {
        dim: 64,
        ..Default::default()
    })
    .unwrap();
    let err = G2Rag::load(dir.path(), Arc::new(other)).err().unwrap();
    assert!(err.to_string().contains("encoder"), "{err}");
    std::fs::write(dir.path().join("g2.json"), "{not json").unwrap();
    assert!(matches!(
        G2Rag::load(dir.path(), Arc::new(HashingEncoder::default())),
        Err(Error::Format { .. })
    ));

    assert!(matches!(
        rag.retrieve("  ", Selection::TopK(3)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        rag.retrieve("x", Selection::TopK(0)).await,
        Err(Error::InvalidInput { .. })
    ));
    for (config, field) in [
        (
            G2Config {
                knn_k: 0,
                ..G2Config::default()
            },
            "knn_k",
        ),
        (
            G2Config {
                split_distance: 3.0,
                ..G2Config::default()
            },
            "split_distance",
        ),
        (
            G2Config {
                merge_threshold: -2.0,
                ..G2Config::default()
            },
            "merge_threshold",
        ),
    ] {
        let err = G2Rag::builder()
            .encoder(Arc::new(HashingEncoder::default()))
            .config(config)
            .build(&corpus())
            .await
            .err()
            .unwrap();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert!(err.to_string().contains(field), "{err}");
    }
    let err = G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&[])
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");

    // A corpus too small for any cluster still builds and retrieves (chunk level only).
    let tiny = G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&corpus()[..2])
        .await
        .unwrap();
    assert_eq!(tiny.stats().communities, 0);
    assert_eq!(tiny.stats().outliers, 2);
    assert_eq!(
        tiny.retrieve("Curie", Selection::TopK(5))
            .await
            .unwrap()
            .len(),
        2
    );
}

/// Answers every merge question with a fixed verdict and counts the calls.
struct FakeJudge {
    answer: &'static str,
    calls: AtomicUsize,
}

#[async_trait]
impl ChatModel for FakeJudge {
    fn name(&self) -> &str {
        "fake-judge"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // The first user turn shows the groups (a retry appends the model's answer and a
        // request to answer again).
        let user = &request.messages[1].content;
        assert!(user.contains("[Group A]") && user.contains("[Group B]"));
        Ok(ChatResponse::text(self.answer))
    }
}

#[tokio::test]
async fn llm_verdicts_decide_the_merges() {
    // δ = 0 cuts every k-NN edge (no two passages are identical), so every chunk of a
    // cluster is its own subgroup and the merge step decides everything.
    let config = G2Config {
        split_distance: 0.0,
        ..small()
    };
    let with = |answer: &'static str| {
        let config = config.clone();
        async move {
            let model = Arc::new(FakeJudge {
                answer,
                calls: AtomicUsize::new(0),
            });
            let rag = G2Rag::builder()
                .encoder(Arc::new(HashingEncoder::default()))
                .llm(model.clone())
                .config(config)
                .build(&corpus())
                .await
                .unwrap();
            (rag, model.calls.load(Ordering::SeqCst))
        }
    };
    let (yes, yes_calls) = with("Yes, they are about the same topic.").await;
    let (no, no_calls) = with("no").await;
    let s = yes.stats();
    assert!(s.llm_merge && s.merge_pairs > 0, "{s:?}");
    assert_eq!(yes_calls, s.merge_pairs);
    assert_eq!(no_calls, no.stats().merge_pairs);
    assert_eq!(s.merges_accepted, s.merge_pairs);
    assert_eq!(no.stats().merges_accepted, 0);
    // "yes" merges every component back into one community; "no" keeps every chunk of
    // a cluster apart.
    assert_eq!(s.communities, s.components);
    assert_eq!(no.stats().communities, no.stats().subgroups);
    assert!(no.stats().communities > s.communities);
    let clustered = 13 - s.outliers;
    assert_eq!(no.stats().communities, clustered);

    // An unparseable verdict (asked twice) falls back to the θ rule for that pair,
    // counted: the same communities as the offline build.
    let unsure = Arc::new(FakeJudge {
        answer: "It depends.",
        calls: AtomicUsize::new(0),
    });
    let fell_back = G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .llm(unsure.clone())
        .config(config.clone())
        .build(&corpus())
        .await
        .unwrap();
    let offline = G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config.clone())
        .build(&corpus())
        .await
        .unwrap();
    let f = fell_back.stats();
    assert_eq!(f.merge_fallbacks, f.merge_pairs);
    assert_eq!(unsure.calls.load(Ordering::SeqCst), 2 * f.merge_pairs);
    assert_eq!(f.merges_accepted, offline.stats().merges_accepted);
    assert_eq!(f.communities, offline.stats().communities);
    // Strict: an error, not a silent "no".
    let strict = lprag::llm::LlmMergeJudge::new(Arc::new(FakeJudge {
        answer: "It depends.",
        calls: AtomicUsize::new(0),
    }))
    .on_unparseable(lprag::llm::OnUnparseable::Fail);
    let err = G2Rag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .merge_judge(strict)
        .config(config)
        .build(&corpus())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("merge"), "{err}");
}
