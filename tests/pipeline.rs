//! End-to-end behaviour of the `LpRag` pipeline with the offline defaults.

use crate::common;

use std::sync::Arc;

use lprag::{
    Document, Error, HashingEncoder, LpRag, LpRagConfig, PassageChunker, Retriever, Selection,
    SentenceChunker, TrainConfig,
};

fn quick_config() -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs: 15,
            ..TrainConfig::default()
        },
        ..LpRagConfig::default()
    }
}

fn corpus() -> Vec<Document> {
    common::three_sentence_corpus()
}

/// The offline hashing encoder, given explicitly so these tests do not depend on whether
/// the MiniLM model is installed.
async fn build(docs: &[Document]) -> lprag::Result<LpRag> {
    LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .build(docs)
        .await
}

fn assert_send_sync<T: Send + Sync + 'static>() {}

#[test]
fn retriever_types_are_send_sync() {
    assert_send_sync::<LpRag>();
    assert_send_sync::<Arc<dyn Retriever>>();
    assert_send_sync::<Error>();
}

#[tokio::test]
async fn ranks_the_answering_chunk_first_and_queries_differ() {
    let rag = build(&corpus()).await.unwrap();
    let stats = rag.stats();
    // The default PassageChunker keeps each (short) document as one chunk.
    assert_eq!(stats.chunks, corpus().len(), "{stats:?}");
    assert!(stats.queries > 0 && stats.train.epochs_run > 0, "{stats:?}");

    let everest = rag
        .retrieve("highest mountain Himalayas Nepal", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(
        everest[0].chunk.provenance.document_id, "everest",
        "{everest:#?}"
    );
    let tokyo = rag
        .retrieve("Tokyo Summer Olympics 1964", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(tokyo[0].chunk.provenance.document_id, "tokyo", "{tokyo:#?}");
    assert!(everest.iter().all(|h| (0.0..=1.0).contains(&h.score)));
    assert!(everest.windows(2).all(|w| w[0].score >= w[1].score));

    // Threshold selection keeps exactly the chunks with σ(φ) ≥ τ.
    let all = rag
        .retrieve("Tokyo Summer Olympics 1964", Selection::TopK(1000))
        .await
        .unwrap();
    let above = rag
        .retrieve("Tokyo Summer Olympics 1964", Selection::Threshold(0.5))
        .await
        .unwrap();
    assert_eq!(above.len(), all.iter().filter(|h| h.score >= 0.5).count());
}

#[tokio::test]
async fn sentence_chunker_gives_atomic_chunks_that_still_rank() {
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .chunker(Arc::new(SentenceChunker::default()))
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    let stats = rag.stats();
    assert!(stats.chunks >= 15, "{stats:?}");
    let hits = rag
        .retrieve("Which river flows through Warsaw?", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "warsaw", "{hits:#?}");
    assert!(hits[0].chunk.text.contains("Vistula"), "{hits:#?}");
}

#[tokio::test]
async fn works_behind_arc_dyn_retriever_across_tasks() {
    let rag: Arc<dyn Retriever> = Arc::new(build(&corpus()).await.unwrap());
    let handles: Vec<_> = ["Kyoto temples", "Alfred Nobel dynamite"]
        .into_iter()
        .map(|q| {
            let rag = rag.clone();
            tokio::spawn(async move { rag.retrieve(q, Selection::TopK(2)).await })
        })
        .collect();
    for h in handles {
        assert_eq!(h.await.unwrap().unwrap().len(), 2);
    }
}

#[tokio::test]
async fn save_and_load_round_trip() {
    let rag = build(&corpus()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    // Saving again over an existing index replaces it atomically.
    rag.save(&path).unwrap();
    let loaded = LpRag::load(&path, Arc::new(HashingEncoder::default())).unwrap();
    assert_eq!(loaded.chunks(), rag.chunks());
    let q = "Which river flows through Warsaw?";
    let a = rag.retrieve(q, Selection::TopK(5)).await.unwrap();
    let b = loaded.retrieve(q, Selection::TopK(5)).await.unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.chunk.id, y.chunk.id);
        assert!((x.score - y.score).abs() < 1e-5);
    }

    // A different encoder is refused with a message naming both.
    let other = lprag::text::HashingEncoder::new(lprag::text::HashingEncoderConfig {
        dim: 64,
        ..Default::default()
    })
    .unwrap();
    let err = LpRag::load(&path, Arc::new(other)).unwrap_err();
    assert!(err.to_string().contains("encoder"), "{err}");

    // A corrupt manifest is a format error naming the file.
    std::fs::write(path.join("manifest.json"), b"{not json").unwrap();
    let err = LpRag::load(&path, Arc::new(HashingEncoder::default())).unwrap_err();
    assert!(err.to_string().contains("manifest.json"), "{err}");
}

#[tokio::test]
async fn empty_and_whitespace_corpora_are_typed_errors() {
    let err = build(&[]).await.unwrap_err();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");
    let err = build(&[
        Document::new("a", "", "   \n\t "),
        Document::new("b", "", ""),
    ])
    .await
    .unwrap_err();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");
}

#[tokio::test]
async fn empty_query_and_zero_k_are_typed_errors() {
    let rag = build(&corpus()).await.unwrap();
    assert!(matches!(
        rag.retrieve("  ", Selection::TopK(3)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        rag.retrieve("Tokyo", Selection::TopK(0)).await,
        Err(Error::InvalidInput { .. })
    ));
}

#[tokio::test]
async fn one_chunk_corpus_and_k_larger_than_corpus() {
    let docs = [Document::new(
        "only",
        "Solo",
        "The only fact in this corpus is about the Moon.",
    )];
    let rag = build(&docs).await.unwrap();
    assert_eq!(rag.chunks().len(), 1);
    let hits = rag
        .retrieve("What is the fact about?", Selection::TopK(10))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);

    // k larger than the corpus: every chunk comes back once.
    let rag = build(&corpus()).await.unwrap();
    let hits = rag
        .retrieve("capital", Selection::TopK(10_000))
        .await
        .unwrap();
    assert_eq!(hits.len(), rag.chunks().len());
    let mut ids: Vec<usize> = hits.iter().map(|h| h.chunk.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rag.chunks().len());
}

#[tokio::test]
async fn duplicate_texts_and_non_ascii() {
    let docs = vec![
        Document::new(
            "a",
            "Zürich",
            "Zürich liegt am Zürichsee. Die Stadt hat rund 420 000 Einwohner.",
        ),
        Document::new(
            "b",
            "Zürich (copy)",
            "Zürich liegt am Zürichsee. Die Stadt hat rund 420 000 Einwohner.",
        ),
        Document::new("c", "東京", "東京は日本の首都です。人口は約1400万人です。"),
        Document::new(
            "d",
            "Kraków",
            "Kraków leży nad Wisłą. Było stolicą Polski do 1596 roku.",
        ),
    ];
    let rag = LpRag::builder()
        .chunker(Arc::new(PassageChunker))
        .config(quick_config())
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.chunks().len(), 4);
    let hits = rag
        .retrieve("東京の人口", Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "c");
    let hits = rag
        .retrieve("Zürichsee Einwohner", Selection::TopK(2))
        .await
        .unwrap();
    let mut top: Vec<&str> = hits
        .iter()
        .map(|h| h.chunk.provenance.document_id.as_str())
        .collect();
    top.sort_unstable();
    assert_eq!(top, vec!["a", "b"]);
}

#[tokio::test]
async fn default_encoder_is_recorded_and_open_rebuilds_it() {
    // No encoder given: MiniLM when installed, else the fitted hashing encoder (warned).
    let rag = LpRag::builder()
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    let spec = rag
        .default_encoder()
        .cloned()
        .expect("default encoder recorded");
    match &spec {
        lprag::DefaultEncoder::FittedHashing { .. } => {
            assert_eq!(rag.stats().warnings.len(), 1);
            assert!(rag.stats().warnings[0].contains("fetch-model.sh"));
        }
        lprag::DefaultEncoder::SentenceTransformer { model, .. } => {
            assert!(rag.stats().warnings.is_empty());
            assert_eq!(rag.encoder().dimension(), 384);
            // Portable: the model id, not this machine's cache path.
            assert_eq!(model, "sentence-transformers/all-MiniLM-L6-v2");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    let opened = LpRag::open(&path).unwrap();
    assert_eq!(opened.default_encoder(), Some(&spec));
    let q = "Which river flows through Warsaw?";
    let a = rag.retrieve(q, Selection::TopK(4)).await.unwrap();
    let b = opened.retrieve(q, Selection::TopK(4)).await.unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.chunk.id, y.chunk.id);
        assert!((x.score - y.score).abs() < 1e-4);
    }

    // An index built with a custom encoder cannot be opened without it.
    let custom = build(&corpus()).await.unwrap();
    let path2 = dir.path().join("custom");
    custom.save(&path2).unwrap();
    let err = LpRag::open(&path2).unwrap_err();
    assert!(err.to_string().contains("LpRag::load"), "{err}");
}

/// A deterministic in-process "LLM" that answers the paper's C-PROMPT (one statement per
/// sentence, prefixed so the test can tell them from offline chunks) and S-PROMPT (one
/// question per chunk of the bag).
struct ScriptedLlm;

#[async_trait::async_trait]
impl lprag::llm::ChatModel for ScriptedLlm {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(
        &self,
        request: &lprag::llm::ChatRequest,
    ) -> Result<lprag::llm::ChatResponse, lprag::llm::LlmError> {
        let system = &request.messages[0].content;
        let user = &request.messages[1].content;
        let body: Vec<&str> = user.lines().filter(|l| !l.starts_with("[The ")).collect();
        let content = if system.contains("extract the Chunks") {
            let mut out = String::from("[Extracted Chunks in Sentence 1]\n");
            for s in body.join(" ").split_inclusive(". ") {
                out.push_str(&format!("[LLM: {}]\n", s.trim()));
            }
            out
        } else {
            let mut out = String::new();
            let mut i = 0;
            for line in body {
                if line.starts_with("[Chunk ") {
                    i += 1;
                    out.push_str(&format!("[Questions Chunk {i}]\n"));
                } else {
                    out.push_str(&format!("[What about {}?]\n", line.trim_end_matches('.')));
                }
            }
            out
        };
        let mut r = lprag::llm::ChatResponse::text(content);
        r.usage = Some(lprag::llm::Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        });
        Ok(r)
    }
}

#[tokio::test]
async fn an_llm_chunks_and_writes_queries_and_its_tokens_are_counted() {
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .llm(Arc::new(ScriptedLlm))
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    let stats = rag.stats();
    assert!(stats.chunks >= 15, "{stats:?}");
    assert!(rag.chunks().iter().all(|c| c.text.starts_with("LLM: ")));
    assert!(rag
        .synthetic_queries()
        .iter()
        .all(|q| q.text.starts_with("What about LLM: ")));
    let chunking = stats.llm_usage["chunking"];
    assert_eq!(chunking.calls, corpus().len() as u64);
    assert_eq!(chunking.prompt_tokens, 10 * corpus().len() as u64);
    let queries = stats.llm_usage["queries"];
    assert_eq!(
        queries.calls, stats.chunks as u64,
        "one S-PROMPT call per A.2 batch"
    );
    let hits = rag
        .retrieve("highest mountain Himalayas Nepal", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "everest", "{hits:#?}");

    // An explicit chunker wins over the LLM's; the LLM still writes the queries.
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .llm(Arc::new(ScriptedLlm))
        .chunker(Arc::new(PassageChunker))
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(rag.stats().chunks, corpus().len());
    assert!(!rag.stats().llm_usage.contains_key("chunking"));
    assert!(rag.stats().llm_usage["queries"].calls > 0);
}

/// [`ScriptedLlm`], except that it answers like a weak model for the Japanese articles:
/// an apology for their chunks, and statements instead of questions for batches whose
/// first chunk is about Japan.
struct WeakLlm;

#[async_trait::async_trait]
impl lprag::llm::ChatModel for WeakLlm {
    fn name(&self) -> &str {
        "weak"
    }

    async fn complete(
        &self,
        request: &lprag::llm::ChatRequest,
    ) -> Result<lprag::llm::ChatResponse, lprag::llm::LlmError> {
        let system = &request.messages[0].content;
        let user = &request.messages[1].content;
        let first_chunk = user.split("[Chunk 2]").next().unwrap_or_default();
        if user.contains("Japan") && system.contains("extract the Chunks") {
            return Ok(lprag::llm::ChatResponse::text(
                "I'm sorry, I can't help with that.",
            ));
        }
        if first_chunk.contains("Japan") && !system.contains("extract the Chunks") {
            return Ok(lprag::llm::ChatResponse::text(
                "[The End bag of chunks]\nTokyo is a big city in Japan.",
            ));
        }
        ScriptedLlm.complete(request).await
    }
}

#[tokio::test]
async fn a_weak_llm_falls_back_per_item_and_strict_mode_fails() {
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .llm(Arc::new(WeakLlm))
        .config(quick_config())
        .build(&corpus())
        .await
        .expect("unreadable answers do not abort the build");
    let stats = rag.stats();
    // Tokyo and Kyoto were split by the offline sentence chunker, the rest by the model.
    for c in rag.chunks() {
        let japan = ["tokyo", "kyoto"].contains(&c.provenance.document_id.as_str());
        assert_eq!(!c.text.starts_with("LLM: "), japan, "{c:?}");
    }
    let chunking = stats.llm_usage["chunking"];
    assert_eq!(chunking.fallbacks, 2);
    assert_eq!(chunking.calls, corpus().len() as u64 + 2, "one retry each");
    let queries = stats.llm_usage["queries"];
    assert!(queries.fallbacks > 0, "{stats:?}");
    // Batches that fell back got heuristic questions, the others the model's.
    assert!(rag
        .synthetic_queries()
        .iter()
        .any(|q| q.text.starts_with("What about LLM: ")));
    assert!(rag
        .synthetic_queries()
        .iter()
        .any(|q| !q.text.starts_with("What about LLM: ")));
    assert!(rag
        .synthetic_queries()
        .iter()
        .all(|q| !q.text.contains("Tokyo is a big city")));
    let warned: Vec<&String> = stats
        .warnings
        .iter()
        .filter(|w| w.contains("could not be parsed"))
        .collect();
    assert_eq!(warned.len(), 2, "{:?}", stats.warnings);
    assert!(warned[0].contains("2 of 6 documents"), "{warned:?}");

    let Err(err) = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .llm(Arc::new(WeakLlm))
        .llm_on_unparseable(lprag::llm::OnUnparseable::Fail)
        .config(quick_config())
        .build(&corpus())
        .await
    else {
        panic!("strict mode fails");
    };
    let msg = err.to_string();
    assert!(
        msg.contains("LLM chunking") && msg.contains("2 of 6"),
        "{msg}"
    );
    assert!(msg.contains("I'm sorry"), "{msg}");
}

#[tokio::test]
async fn supervised_mode_adds_or_replaces_synthetic_queries() {
    let pairs = vec![
        (
            "Which river flows through Warsaw?".to_string(),
            vec!["warsaw".to_string()],
        ),
        (
            "Where was the inventor of dynamite born?".to_string(),
            vec!["nobel".to_string(), "warsaw".to_string()],
        ),
    ];
    let only = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .labelled_only(pairs.clone())
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(only.stats().queries, 2);
    assert_eq!(only.stats().labelled_queries, 2);
    // Each question links to the chunks of its gold documents (passages: one each).
    let q = &only.synthetic_queries()[1];
    assert_eq!(q.text, "Where was the inventor of dynamite born?");
    assert_eq!(q.chunk_ids, vec![2, 1]);
    let hits = only
        .retrieve("Which river flows through Warsaw?", Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "warsaw");

    let added = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .labelled(pairs)
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(added.stats().labelled_queries, 2);
    assert!(added.stats().queries > 2, "synthetic queries stay");

    let err = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .labelled_only(vec![("Who?".into(), vec!["atlantis".into()])])
        .build(&corpus())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("labelled[0]") && err.contains("atlantis"),
        "{err}"
    );
}

#[tokio::test]
async fn the_paper_preset_builds_the_published_method() {
    let mut config = LpRagConfig::paper();
    config.train.epochs = 4;
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config)
        .build(&corpus())
        .await
        .unwrap();
    let stats = rag.stats();
    assert_eq!(stats.bridge_edges, 0, "mutual k-NN edges only");
    let report = &stats.train;
    assert_eq!(report.epochs_run, 4, "fixed epochs: {report:?}");
    assert!(
        report.val_loss.is_empty() && !report.stopped_early,
        "{report:?}"
    );
    assert!(!report.stopped_at_max_steps, "{report:?}");
    // Every chunk is scored (no candidate pool), and the query still matters.
    let a = rag
        .retrieve("highest mountain Himalayas Nepal", Selection::TopK(100))
        .await
        .unwrap();
    assert_eq!(a.len(), corpus().len());
    let b = rag
        .retrieve("dynamite Stockholm", Selection::TopK(100))
        .await
        .unwrap();
    let scores = |h: &[lprag::ScoredChunk]| {
        let mut s: Vec<(usize, f32)> = h.iter().map(|h| (h.chunk.id, h.score)).collect();
        s.sort_by_key(|p| p.0);
        s
    };
    assert_ne!(scores(&a), scores(&b), "two queries score differently");
}

/// Build with `config` (5 epochs), retrieve, save, reopen: the predictor is `name` and
/// scores the same after reopening.
async fn builds_saves_and_reopens(config: LpRagConfig, name: &str) {
    let config = LpRagConfig {
        train: TrainConfig {
            epochs: 5,
            ..config.train.clone()
        },
        ..config
    };
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config)
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(rag.predictor().name(), name);
    assert_eq!(rag.stats().train.epochs_run, 5);
    let q = "highest mountain Himalayas Nepal";
    let hits = rag.retrieve(q, Selection::TopK(100)).await.unwrap();
    assert_eq!(hits.len(), corpus().len(), "{name}: every chunk is scored");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    let reopened = LpRag::load(&path, Arc::new(HashingEncoder::default())).unwrap();
    assert_eq!(reopened.predictor().name(), name);
    let again = reopened.retrieve(q, Selection::TopK(100)).await.unwrap();
    let pairs =
        |h: &[lprag::ScoredChunk]| h.iter().map(|h| (h.chunk.id, h.score)).collect::<Vec<_>>();
    assert_eq!(pairs(&hits), pairs(&again), "{name}");
}

#[tokio::test]
async fn the_vgae_peg_and_seal_predictors_build_save_and_reopen() {
    builds_saves_and_reopens(
        LpRagConfig {
            predictor: lprag::BuiltinPredictor::Vgae(lprag::VgaeConfig { hidden: 8 }),
            ..LpRagConfig::paper_vgae()
        },
        "vgae",
    )
    .await;
    builds_saves_and_reopens(
        LpRagConfig {
            predictor: lprag::BuiltinPredictor::Peg(lprag::PegConfig {
                positional_dim: 4,
                ..lprag::PegConfig::default()
            }),
            ..LpRagConfig::paper_peg()
        },
        "peg",
    )
    .await;
    builds_saves_and_reopens(LpRagConfig::paper_seal(), "seal").await;
}

#[tokio::test]
async fn transfer_attaches_a_saved_predictor_to_another_corpus_without_training() {
    let docs = corpus();
    let (a_docs, b_docs) = docs.split_at(3);
    let enc = || Arc::new(HashingEncoder::default());
    let a = LpRag::builder()
        .encoder(enc())
        .config(quick_config())
        .build(a_docs)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a_path = dir.path().join("a");
    a.save(&a_path).unwrap();

    let b = LpRag::builder()
        .encoder(enc())
        .transfer_from(&a_path)
        .build(b_docs)
        .await
        .unwrap();
    let stats = b.stats();
    assert_eq!(stats.chunks, b_docs.len());
    assert_eq!(stats.queries, 0, "no synthetic queries are written");
    assert_eq!(stats.train.epochs_run, 0, "nothing is trained");
    // Exactly A's model attached to B's chunk graph.
    let mut reference =
        lprag::extend::GnnLinkPredictor::from_dir(&a_path.join("predictor")).unwrap();
    lprag::LinkPredictor::attach(&mut reference, b.graph()).unwrap();
    let q = b.encoder().embed_one("capital of Japan").await.unwrap();
    let all: Vec<usize> = (0..b_docs.len()).collect();
    assert_eq!(
        lprag::LinkPredictor::score(&reference, &q, &all).unwrap(),
        b.predictor().score(&q, &all).unwrap()
    );
    // B saves and reopens as a built-in index.
    let b_path = dir.path().join("b");
    b.save(&b_path).unwrap();
    let reopened = LpRag::load(&b_path, enc()).unwrap();
    let x = b
        .retrieve("capital of Japan", Selection::TopK(3))
        .await
        .unwrap();
    let y = reopened
        .retrieve("capital of Japan", Selection::TopK(3))
        .await
        .unwrap();
    assert_eq!(x.len(), y.len());
    for (x, y) in x.iter().zip(&y) {
        // The saved chunk features are normalised once more on load (1e-7-level changes).
        assert_eq!(x.chunk.id, y.chunk.id);
        assert!((x.score - y.score).abs() < 1e-5);
    }

    // Another encoder is refused before anything is built.
    let other = lprag::HashingEncoderConfig {
        dim: 64,
        ..Default::default()
    };
    let err = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::new(other).unwrap()))
        .transfer_from(&a_path)
        .build(b_docs)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert!(err.to_string().contains("encoder"), "{err}");
}

#[tokio::test]
async fn the_device_is_chosen_without_burn_types_and_checked_first() {
    use lprag::ComputeDevice;
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .device(ComputeDevice::Cpu)
        .build(&corpus())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    let reopened = LpRag::load_on(
        &path,
        Arc::new(HashingEncoder::default()),
        ComputeDevice::Cpu,
    )
    .unwrap();
    assert_eq!(reopened.chunks(), rag.chunks());
    #[cfg(not(feature = "cuda"))]
    {
        let err = LpRag::builder()
            .encoder(Arc::new(HashingEncoder::default()))
            .device(ComputeDevice::Cuda(0))
            .build(&corpus())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert!(err.to_string().contains("cuda"), "{err}");
        let err = LpRag::load_on(
            &path,
            Arc::new(HashingEncoder::default()),
            ComputeDevice::Cuda(0),
        )
        .unwrap_err();
        assert!(err.to_string().contains("cuda"), "{err}");
    }
}

#[tokio::test]
async fn concurrent_saves_never_collide_and_a_reader_always_finds_an_index() {
    let rag = Arc::new(
        LpRag::builder()
            .encoder(Arc::new(HashingEncoder::default()))
            .config(quick_config())
            .build(&corpus())
            .await
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (path, done) = (path.clone(), done.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(
                    path.join("manifest.json").exists(),
                    "the index path had no index during a save"
                );
                checks += 1;
            }
            checks
        })
    };
    // Four writers, five saves each, all to the same path at once (the temporary
    // directories were named by process id before, so concurrent saves collided).
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (rag, path) = (rag.clone(), path.clone());
            std::thread::spawn(move || {
                for _ in 0..5 {
                    rag.save(&path).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let reopened = LpRag::load(&path, Arc::new(HashingEncoder::default())).unwrap();
    let q = "Nobel Prize Warsaw";
    let a = rag.retrieve(q, Selection::TopK(3)).await.unwrap();
    let b = reopened.retrieve(q, Selection::TopK(3)).await.unwrap();
    assert_eq!(
        a.iter().map(|h| h.chunk.id).collect::<Vec<_>>(),
        b.iter().map(|h| h.chunk.id).collect::<Vec<_>>()
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("index")],
        "no staging left"
    );
}

/// An index of [`corpus`] (hashing encoder, [`quick_config`]) saved under `DIR/index`.
async fn built_and_saved() -> (LpRag, tempfile::TempDir) {
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path().join("index")).unwrap();
    (rag, dir)
}

#[tokio::test]
async fn an_index_of_another_format_version_says_so_before_anything_else() {
    let (_rag, dir) = built_and_saved().await;
    let path = dir.path().join("index");
    let manifest = path.join("manifest.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    v["format_version"] = serde_json::json!(7);
    v.as_object_mut().unwrap().remove("encoder");
    std::fs::write(&manifest, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = LpRag::load(&path, Arc::new(HashingEncoder::default()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("format version 7"), "{err}");
}

#[tokio::test]
async fn an_encoder_with_the_same_name_but_other_tables_is_refused_on_load() {
    let texts: Vec<String> = corpus().iter().map(|d| d.text.clone()).collect();
    let fitted = || {
        Arc::new(HashingEncoder::fitted(lprag::HashingEncoderConfig::default(), &texts).unwrap())
    };
    let rag = LpRag::builder()
        .encoder(fitted())
        .config(quick_config())
        .build(&corpus())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    rag.save(&path).unwrap();
    // Same name ("hashing") and width, no IDF table: it used to load and rank garbage.
    let err = LpRag::load(&path, Arc::new(HashingEncoder::default()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("fingerprint"), "{err}");
    assert!(LpRag::load(&path, fitted()).is_ok());

    let qcg = lprag::QcgRag::builder()
        .encoder(fitted())
        .build(&corpus())
        .await
        .unwrap();
    let qdir = tempfile::tempdir().unwrap();
    qcg.save(qdir.path()).unwrap();
    let err = lprag::QcgRag::load(qdir.path(), Arc::new(HashingEncoder::default()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("fingerprint"), "{err}");
    assert!(lprag::QcgRag::load(qdir.path(), fitted()).is_ok());
}

#[tokio::test]
async fn absurd_model_sizes_in_a_saved_index_are_format_errors() {
    let (_rag, dir) = built_and_saved().await;
    let path = dir.path().join("index");
    let edit = |file: &std::path::Path, f: &dyn Fn(&mut serde_json::Value)| {
        let bytes = std::fs::read(file).unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        f(&mut v);
        std::fs::write(file, serde_json::to_vec(&v).unwrap()).unwrap();
        bytes
    };
    // A billion-wide layer would abort the process on allocation; it is refused first.
    for (file, set) in [
        (
            path.join("predictor").join("burn-predictor.json"),
            &(|v: &mut serde_json::Value| {
                v["model"]["hidden"] = serde_json::json!(1_000_000_000u64)
            }) as &dyn Fn(&mut serde_json::Value),
        ),
        (path.join("manifest.json"), &|v: &mut serde_json::Value| {
            v["config"]["model"]["layers"] = serde_json::json!(100_000)
        }),
    ] {
        let before = edit(&file, set);
        let err = LpRag::load(&path, Arc::new(HashingEncoder::default()))
            .err()
            .unwrap();
        assert!(matches!(err, lprag::Error::Format { .. }), "{err}");
        std::fs::write(&file, before).unwrap();
    }
    assert!(LpRag::load(&path, Arc::new(HashingEncoder::default())).is_ok());
}
