//! `FastembedEncoder` with a real model: all-MiniLM-L6-v2 exported to ONNX
//! (`scripts/fetch-onnx.sh`) must reproduce sentence-transformers' embeddings of the
//! reference texts, count their tokens as the reference tokenizer did, and keep queries
//! and documents apart only when prefixes are set.
//!
//! Needs `LPRAG_ONNX_MODEL_DIR`, `ORT_DYLIB_PATH` and the reference vectors
//! (`$LPRAG_DATA/reference/minilm_reference_vectors.json`); without them each test says
//! what is missing and passes, unless `LPRAG_REQUIRE_FASTEMBED=1` makes that a failure.

use std::path::PathBuf;

use lprag_adapters::fastembed::FastembedEncoder;
use lprag_core::Encoder;

struct Setup {
    encoder: FastembedEncoder,
    reference: serde_json::Value,
}

fn setup(test: &str) -> Option<Setup> {
    let required =
        std::env::var_os("LPRAG_REQUIRE_FASTEMBED").is_some_and(|v| !v.is_empty() && v != "0");
    let missing = |what: &str| {
        assert!(!required, "LPRAG_REQUIRE_FASTEMBED is set but {what}");
        eprintln!("{test}: skipped, {what} (eval \"$(scripts/fetch-onnx.sh)\")");
        None
    };
    let Some(dir) = std::env::var_os("LPRAG_ONNX_MODEL_DIR") else {
        return missing("LPRAG_ONNX_MODEL_DIR is not set");
    };
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        return missing("ORT_DYLIB_PATH is not set");
    }
    let data = std::env::var_os("LPRAG_DATA")
        .map(PathBuf::from)
        .or_else(|| {
            let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            Some(here.join("../../../shared/data"))
        })
        .filter(|d| d.join("reference").is_dir());
    let Some(data) = data else {
        return missing("the reference vectors are not found (set LPRAG_DATA)");
    };
    let bytes = std::fs::read(data.join("reference/minilm_reference_vectors.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let encoder = FastembedEncoder::from_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    Some(Setup { encoder, reference })
}

fn texts(reference: &serde_json::Value) -> Vec<String> {
    reference["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn reproduces_the_sentence_transformers_reference_embeddings() {
    let Some(Setup { encoder, reference }) = setup("reference embeddings") else {
        return;
    };
    assert_eq!(encoder.dimension(), 384);
    assert_eq!(encoder.max_input_tokens(), Some(256));
    assert_eq!(
        encoder.name(),
        "fastembed:sentence-transformers/all-MiniLM-L6-v2"
    );
    let texts = texts(&reference);
    // All texts in one padded batch: padding must not change any row.
    let emb = encoder.embed(&texts).await.unwrap();
    assert_eq!(emb.rows(), texts.len());
    let mut worst = 0f32;
    for (i, item) in reference["items"].as_array().unwrap().iter().enumerate() {
        let want: Vec<f32> = item["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        for (a, b) in emb.row(i).iter().zip(&want) {
            worst = worst.max((a - b).abs());
        }
        let n_tokens = item["n_tokens"].as_u64().unwrap() as usize;
        let counted = encoder.count_tokens(&texts[i]).unwrap();
        // The reference counts after truncation to 256; ours before it.
        assert_eq!(counted.min(256), n_tokens, "text {i}");
    }
    eprintln!("max |fastembed - sentence-transformers| = {worst:.2e}");
    assert!(worst <= 1e-4, "max abs difference {worst}");
}

#[tokio::test]
async fn prefixes_separate_queries_from_documents_and_enter_the_fingerprint() {
    let Some(Setup { encoder, .. }) = setup("prefixes") else {
        return;
    };
    let text = vec!["Where is the Eiffel Tower?".to_string()];
    assert!(!encoder.embeds_queries_apart());
    let (d, q) = (
        encoder.embed(&text).await.unwrap(),
        encoder.embed_queries(&text).await.unwrap(),
    );
    assert_eq!(d.row(0), q.row(0), "no prefixes: one embedding");
    let plain = encoder.fingerprint().unwrap();
    let e5 = encoder.clone().with_prefixes("query: ", "passage: ");
    assert!(e5.embeds_queries_apart());
    assert_ne!(e5.fingerprint().unwrap(), plain);
    let (d, q) = (
        e5.embed(&text).await.unwrap(),
        e5.embed_queries(&text).await.unwrap(),
    );
    assert_ne!(d.row(0), q.row(0), "prefixes: two embeddings");
    let norm: f32 = q.row(0).iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "unit rows, got norm {norm}");
}

/// `FastembedReranker` with a real ONNX cross-encoder named by `LPRAG_ONNX_RERANK_DIR`
/// (none can be had from the package registries, so this runs by hand): one score per
/// text in input order, and the relevant passage first.
#[tokio::test]
async fn the_reranker_scores_in_input_order() {
    use lprag_adapters::fastembed::FastembedReranker;
    use lprag_core::Reranker;
    let required =
        std::env::var_os("LPRAG_REQUIRE_FASTEMBED").is_some_and(|v| !v.is_empty() && v != "0");
    let (Some(dir), Some(_)) = (
        std::env::var_os("LPRAG_ONNX_RERANK_DIR"),
        std::env::var_os("ORT_DYLIB_PATH"),
    ) else {
        assert!(
            !required,
            "LPRAG_REQUIRE_FASTEMBED is set but LPRAG_ONNX_RERANK_DIR or ORT_DYLIB_PATH is not"
        );
        eprintln!("reranker: skipped, LPRAG_ONNX_RERANK_DIR and ORT_DYLIB_PATH name a cross-encoder and ONNX Runtime");
        return;
    };
    let reranker = FastembedReranker::from_dir(dir).unwrap();
    let texts = [
        "Bananas are rich in potassium.",
        "The Eiffel Tower is in Paris.",
        "Paris is the capital of France.",
    ];
    let scores = reranker
        .score("Where is the Eiffel Tower?", &texts)
        .await
        .unwrap();
    assert_eq!(scores.len(), 3);
    assert!(scores.iter().all(|s| s.is_finite()), "{scores:?}");
    assert!(scores[1] > scores[0] && scores[1] > scores[2], "{scores:?}");
}
