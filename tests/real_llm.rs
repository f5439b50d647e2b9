//! The real-model tier: lprag's LLM components against a real model behind an
//! OpenAI-compatible server, checking structure (never wording).
//!
//! Opt in with `LPRAG_TEST_LLM_BASE_URL` (and `LPRAG_TEST_LLM_MODEL`, default `smollm2`);
//! without it every test here says it is skipped and returns. The variables are not the
//! examples' `LPRAG_LLM_*`, so a key for a paid API in your shell is never used by tests.
//! `scripts/llm-server.sh start` serves SmolLM2-135M-Instruct on a free loopback port:
//!
//! ```text
//! scripts/llm-server.sh install && eval "$(scripts/llm-server.sh start)"
//! LPRAG_TEST_LLM_BASE_URL=$LPRAG_LLM_BASE_URL cargo test --release --test integration real_llm::
//! scripts/llm-server.sh stop
//! ```
//!
//! A 135M model often answers outside the requested format; these tests check that every
//! stage still completes (parsed answers or the offline fallback, counted), and that the
//! parsed parts have the shape they must have.

use std::sync::Arc;

use lprag::core::TripleExtractor;
use lprag::llm::{
    CachedChat, ChatModel, LlmMergeJudge, LlmQueryGenerator, LlmTripleExtractor, OpenAiChat,
    OpenAiConfig, QueryMode, TokenMeter,
};
use lprag::{
    Chunk, Chunker, Document, G2Rag, GfmRag, LpRag, PassageChunker, QcgRag, QueryGenerator,
    Retriever, Selection,
};

use crate::mini_corpus;

/// The configured model behind a response cache in a fresh temporary directory (so
/// repeated identical requests within one test, e.g. a component and then the retriever
/// built on it, are paid once), or `None` (with a message) when the tier is not enabled.
fn model(test: &str) -> Option<(tempfile::TempDir, Arc<dyn ChatModel>)> {
    let Ok(url) = std::env::var("LPRAG_TEST_LLM_BASE_URL") else {
        eprintln!(
            "{test}: skipped, no real model configured (set LPRAG_TEST_LLM_BASE_URL; \
             scripts/llm-server.sh starts one)"
        );
        return None;
    };
    let name = std::env::var("LPRAG_TEST_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
    let mut config = OpenAiConfig::new(url, name);
    // One request at a time: a local server on two cores serves them in turn anyway.
    config.http.max_concurrency = 1;
    config.http.timeout = std::time::Duration::from_secs(300);
    let chat: Arc<dyn ChatModel> = Arc::new(OpenAiChat::new(config).expect("client"));
    let dir = tempfile::tempdir().expect("temporary directory");
    let cached = CachedChat::open(chat, dir.path()).expect("cache");
    Some((dir, Arc::new(cached)))
}

/// The tests share one server. llama-cpp-python's interrupts a streamed answer when
/// another request arrives, so the streaming test holds the server alone (a write guard)
/// while the others share it (read guards).
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn documents(n: usize) -> Vec<Document> {
    mini_corpus::documents().into_iter().take(n).collect()
}

#[tokio::test]
async fn lp_rag_with_a_real_llm_builds_and_retrieves() {
    let Some((_cache, model)) = model("lp_rag_with_a_real_llm_builds_and_retrieves") else {
        return;
    };
    let _shared = SERVER.read().await;
    let docs = documents(3);
    let rag = LpRag::builder()
        .llm(model)
        .build(&docs)
        .await
        .expect("a weak model never aborts the build");
    let stats = rag.stats();
    // Every document was chunked (by the model or its fallback), every chunk points into
    // its document, every batch got questions.
    assert!(stats.chunks >= docs.len(), "{stats:?}");
    for c in rag.chunks() {
        let doc = docs
            .iter()
            .find(|d| d.id == c.provenance.document_id)
            .expect("chunk of a given document");
        assert!(c.provenance.span.end <= doc.text.len());
        assert!(!c.text.trim().is_empty());
    }
    let chunking = stats.llm_usage["chunking"];
    assert!(chunking.calls >= docs.len() as u64);
    assert!(chunking.fallbacks <= docs.len() as u64);
    let queries = stats.llm_usage["queries"];
    assert!(queries.calls >= 1 && stats.queries > 0, "{stats:?}");
    // A fallback is always reported.
    let fell_back = chunking.fallbacks + queries.fallbacks;
    assert_eq!(
        stats
            .warnings
            .iter()
            .filter(|w| w.contains("could not be parsed"))
            .count(),
        usize::from(chunking.fallbacks > 0) + usize::from(queries.fallbacks > 0),
        "{:?}",
        stats.warnings
    );
    eprintln!(
        "LP-RAG: {} chunks, {} queries, {fell_back} items fell back; {:?}",
        stats.chunks, stats.queries, stats.llm_usage
    );
    // TopK counts documents: the LLM's chunks of one document come back together.
    let hits = rag
        .retrieve("Where was Marie Curie born?", Selection::TopK(2))
        .await
        .unwrap();
    let mut docs: Vec<&str> = hits
        .iter()
        .map(|h| h.chunk.provenance.document_id.as_str())
        .collect();
    docs.dedup();
    assert_eq!(docs.len(), 2, "{hits:?}");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
}

#[tokio::test]
async fn doc2query_merge_judge_and_openie_with_a_real_llm() {
    let Some((_cache, model)) = model("doc2query_merge_judge_and_openie_with_a_real_llm") else {
        return;
    };
    let _shared = SERVER.read().await;
    let docs = documents(3);
    let chunks: Vec<Chunk> = PassageChunker.chunk(&docs).await.unwrap();
    let meter = Arc::new(TokenMeter::new());

    // QCG-RAG's Doc2Query: pairs linked to their own chunk only.
    let generator = LlmQueryGenerator::doc2query(model.clone())
        .mode(QueryMode::Doc2Query { num_queries: 5 })
        .with_meter(meter.clone());
    let batches: Vec<Vec<usize>> = (0..chunks.len()).map(|c| vec![c]).collect();
    let queries = generator.generate(&chunks, &batches).await.unwrap();
    assert!(!queries.is_empty());
    for q in &queries {
        assert_eq!(q.chunk_ids.len(), 1);
        assert!(!q.text.trim().is_empty());
    }
    // …and the whole retriever on it.
    let qcg = QcgRag::builder()
        .query_generator(Arc::new(
            LlmQueryGenerator::doc2query(model.clone())
                .mode(QueryMode::Doc2Query { num_queries: 5 }),
        ))
        .build(&docs)
        .await
        .unwrap();
    assert!(qcg.stats().queries_kept > 0);
    let hits = qcg
        .retrieve("What is the capital of Poland?", Selection::TopK(2))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);

    // G²RAG's merge judge: one verdict (or a fallback) per pair, in order.
    let judge = LlmMergeJudge::new(model.clone()).with_meter(meter.clone());
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let verdicts = judge
        .judge_all(&[
            (vec![texts[0]], vec![texts[1]]),
            (vec![texts[1]], vec![texts[2]]),
        ])
        .await
        .unwrap();
    assert_eq!(verdicts.len(), 2);
    let usage = meter.snapshot();
    assert_eq!(
        usage["merge"].fallbacks as usize,
        verdicts.iter().filter(|v| v.is_none()).count()
    );
    // …and G²RAG end to end with the LLM merge (the 10-article corpus).
    let g2 = G2Rag::builder()
        .llm(model.clone())
        .build(&mini_corpus::documents())
        .await
        .unwrap();
    assert!(g2.stats().merge_fallbacks <= g2.stats().merge_pairs);

    // GFM-RAG's OpenIE: one extraction per chunk, triples with three non-empty parts.
    let extractor = LlmTripleExtractor::new(model.clone()).with_meter(meter.clone());
    let extractions = extractor.extract(&chunks).await.unwrap();
    assert_eq!(extractions.len(), chunks.len());
    for e in &extractions {
        for t in &e.triples {
            assert!(!t.subject.is_empty() && !t.relation.is_empty() && !t.object.is_empty());
        }
    }
    let gfm = GfmRag::builder()
        .extractor(Arc::new(LlmTripleExtractor::new(model)))
        .build(&docs)
        .await
        .unwrap();
    assert!(gfm.stats().entities > 0);
    eprintln!(
        "Doc2Query {} queries, merge {:?}, OpenIE {} triples; {:?}",
        queries.len(),
        verdicts,
        extractions.iter().map(|e| e.triples.len()).sum::<usize>(),
        meter.snapshot()
    );
}

/// A streamed answer from the real server: several pieces whose concatenation is the
/// answer the same request gets unstreamed (temperature 0), and which the response cache
/// then replays without asking again.
#[tokio::test]
async fn a_real_model_streams_the_answer_it_gives_unstreamed() {
    use futures::StreamExt;
    let Ok(url) = std::env::var("LPRAG_TEST_LLM_BASE_URL") else {
        eprintln!("streaming: skipped, no real model configured (LPRAG_TEST_LLM_BASE_URL)");
        return;
    };
    let _alone = SERVER.write().await;
    let name = std::env::var("LPRAG_TEST_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
    let mut config = OpenAiConfig::new(url, name);
    config.http.max_concurrency = 1;
    config.http.timeout = std::time::Duration::from_secs(300);
    let chat = OpenAiChat::new(config).expect("client");
    let rag = LpRag::builder().build(&documents(4)).await.unwrap();
    let q = "Where was Marie Curie born?";
    let hits = rag.retrieve(q, Selection::TopK(2)).await.unwrap();
    let answers = lprag::llm::AnswerGenerator::new(Arc::new(chat));
    let (stream, shown) = answers.answer_stream(q, &hits, true).await.unwrap();
    let pieces: Vec<String> = stream.map(|p| p.unwrap()).collect().await;
    let whole = answers.answer_with_citations(q, &hits).await.unwrap();
    eprintln!("streamed in {} pieces: {:?}", pieces.len(), pieces.concat());
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat().trim(), whole.answer.text);
    assert_eq!(shown, whole.answer.chunk_ids);
}
