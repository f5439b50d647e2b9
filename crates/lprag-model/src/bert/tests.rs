//! Tests of the BERT encoder: a tiny random model written to a temp dir exercises loading,
//! errors, batching and pooling; the real all-MiniLM-L6-v2 (when present) is checked
//! against sentence-transformers' vectors.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use lprag_core::{cosine, Encoder, Error};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::json;

use super::cpu::CpuBert;
use super::resolve::{find_in_cache, resolve_with};
use super::*;

// ---------------------------------------------------------------- tiny model fixture

const VOCAB: [&str; 24] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "dog", "a", "big", "red",
    "ran", "to", "##s", ".", ",", "house", "green", "small", "tree", "and", "is",
];
const HIDDEN: usize = 8;
const HEADS: usize = 2;
const LAYERS: usize = 2;
const INTER: usize = 16;
const MAX_POS: usize = 16;

pub(super) fn bert_config() -> serde_json::Value {
    json!({
        "architectures": ["BertModel"],
        "hidden_act": "gelu",
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": MAX_POS,
        "model_type": "bert",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": VOCAB.len()
    })
}

pub(super) fn tokenizer_json() -> serde_json::Value {
    let vocab: serde_json::Map<String, serde_json::Value> = VOCAB
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), json!(i)))
        .collect();
    let special = |id: usize, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    json!({
        "version": "1.0",
        "truncation": {"max_length": 128, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
                         special(3, "[SEP]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// Deterministic pseudo-random values in [-scale, scale].
pub(super) fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// HF tensor names and shapes of the tiny model, pooler included.
pub(super) fn tensor_specs() -> Specs {
    let mut v = vec![
        (
            "embeddings.word_embeddings.weight".to_string(),
            vec![VOCAB.len(), HIDDEN],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![MAX_POS, HIDDEN],
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        ),
        ("embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        ("embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
        ("pooler.dense.weight".into(), vec![HIDDEN, HIDDEN]),
        ("pooler.dense.bias".into(), vec![HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        for n in ["query", "key", "value"] {
            v.push((
                format!("{p}.attention.self.{n}.weight"),
                vec![HIDDEN, HIDDEN],
            ));
            v.push((format!("{p}.attention.self.{n}.bias"), vec![HIDDEN]));
        }
        v.push((
            format!("{p}.attention.output.dense.weight"),
            vec![HIDDEN, HIDDEN],
        ));
        v.push((format!("{p}.attention.output.dense.bias"), vec![HIDDEN]));
        v.push((
            format!("{p}.attention.output.LayerNorm.weight"),
            vec![HIDDEN],
        ));
        v.push((format!("{p}.attention.output.LayerNorm.bias"), vec![HIDDEN]));
        v.push((
            format!("{p}.intermediate.dense.weight"),
            vec![INTER, HIDDEN],
        ));
        v.push((format!("{p}.intermediate.dense.bias"), vec![INTER]));
        v.push((format!("{p}.output.dense.weight"), vec![HIDDEN, INTER]));
        v.push((format!("{p}.output.dense.bias"), vec![HIDDEN]));
        v.push((format!("{p}.output.LayerNorm.weight"), vec![HIDDEN]));
        v.push((format!("{p}.output.LayerNorm.bias"), vec![HIDDEN]));
    }
    v
}

/// Tensor names and shapes.
pub(super) type Specs = Vec<(String, Vec<usize>)>;

/// A safetensors file of the tiny model; `edit` may drop or reshape tensors first.
pub(super) fn safetensors_bytes(edit: impl FnOnce(&mut Specs)) -> Vec<u8> {
    let mut specs = tensor_specs();
    edit(&mut specs);
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = specs
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let n: usize = shape.iter().product();
            let mut v = values(n, i as u64 + 1, 0.5);
            if name.contains("LayerNorm.weight") {
                v.iter_mut().for_each(|x| *x += 1.0);
            }
            let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name, shape, bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

pub(super) fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// A complete sentence-transformers directory of the tiny model (mean pooling,
/// normalisation, max_seq_length 12).
pub(super) fn tiny_model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_json(&d.join("config.json"), &bert_config());
    write_json(&d.join("tokenizer.json"), &tokenizer_json());
    std::fs::write(d.join("model.safetensors"), safetensors_bytes(|_| {})).unwrap();
    write_json(
        &d.join("modules.json"),
        &json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]),
    );
    write_json(
        &d.join("sentence_bert_config.json"),
        &json!({"max_seq_length": 12, "do_lower_case": false}),
    );
    write_json(
        &d.join("1_Pooling/config.json"),
        &json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": false,
                "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
                "pooling_mode_mean_sqrt_len_tokens": false}),
    );
    dir
}

pub(super) fn cpu() -> Device {
    Device::flex()
}

fn sentences() -> Vec<String> {
    [
        "the cat sat on the mat.",
        "a dog",
        "the big red dog ran to the green house, and the small cat is on a tree.",
        "",
        "cats and dogs",
        "the mat is red",
        "zebra",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub(super) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

// ---------------------------------------------------------------- tiny model: behaviour

#[test]
fn bert_tiny_loads_and_reads_the_pipeline() {
    let dir = tiny_model_dir();
    let enc = SentenceEncoder::from_dir(dir.path(), &cpu()).unwrap();
    assert_eq!(enc.dimension(), HIDDEN);
    assert_eq!(enc.max_seq_length(), 12);
    assert!(enc.normalizes());
    assert!(enc.pooling().pooling_mode_mean_tokens);
    assert_eq!(enc.config().num_hidden_layers, LAYERS);
    assert_eq!(
        enc.token_ids("The cats sat").unwrap(),
        vec![2, 4, 5, 15, 6, 3]
    );
    // Truncated to 12 tokens, [SEP] kept last.
    let long = enc.token_ids(&"cat ".repeat(40)).unwrap();
    assert_eq!(long.len(), 12);
    assert_eq!(long[11], 3);
}

#[test]
fn bert_token_counter_reads_no_weights_and_counts_as_the_encoder() {
    let dir = tiny_model_dir();
    let enc = SentenceEncoder::from_dir(dir.path(), &cpu()).unwrap();
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let counter = TokenCounter::from_dir(dir.path()).unwrap();
    assert_eq!(counter.max_seq_length(), 12);
    assert_eq!(Some(counter.max_seq_length()), enc.max_input_tokens());
    let long = "cat ".repeat(40);
    for text in sentences()
        .iter()
        .map(String::as_str)
        .chain([long.as_str(), "The CATS"])
    {
        assert_eq!(counter.count(text), enc.count_tokens(text), "{text:?}");
    }
    // Counted before the cut: 40 words and [CLS]/[SEP], not max_seq_length.
    assert_eq!(counter.count(&long), Some(42));
    assert_eq!(counter.count("The cats sat"), Some(6));

    // Lower-casing follows sentence_bert_config.json.
    write_json(
        &dir.path().join("sentence_bert_config.json"),
        &json!({"max_seq_length": 8, "do_lower_case": true}),
    );
    let lower = TokenCounter::from_dir(dir.path()).unwrap();
    assert!(lower.do_lower_case());
    assert_eq!(lower.max_seq_length(), 8);
    assert_eq!(lower.count("THE CATS SAT"), counter.count("the cats sat"));

    // No room beside [CLS] and [SEP]: refused as the encoder refuses it.
    write_json(
        &dir.path().join("sentence_bert_config.json"),
        &json!({"max_seq_length": 2}),
    );
    match TokenCounter::from_dir(dir.path()).unwrap_err() {
        Error::Format { path, .. } => {
            assert!(path.ends_with("sentence_bert_config.json"), "{path:?}")
        }
        other => panic!("expected a Format error, got {other:?}"),
    }

    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    match TokenCounter::from_dir(dir.path()).unwrap_err() {
        Error::Io { path, .. } => assert!(path.ends_with("tokenizer.json"), "{path:?}"),
        other => panic!("expected an Io error, got {other:?}"),
    }
}

#[test]
fn bert_tiny_batches_agree_with_single_texts_in_input_order() {
    let dir = tiny_model_dir();
    let enc = SentenceEncoder::from_dir(dir.path(), &cpu())
        .unwrap()
        .with_batch_size(3);
    let texts = sentences();
    let all = enc.encode(&texts).unwrap();
    assert_eq!(all.rows(), texts.len());
    assert_eq!(all.dim(), HIDDEN);
    for (i, t) in texts.iter().enumerate() {
        let one = enc.encode(std::slice::from_ref(t)).unwrap();
        let d = max_abs_diff(all.row(i), one.row(0));
        assert!(
            d < 1e-5,
            "row {i} ({t:?}) differs from its single encoding by {d}"
        );
        let norm: f32 = all.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "row {i} has norm {norm}");
    }
    // Different texts, different vectors.
    assert!(cosine(all.row(0), all.row(1)) < 0.9999);
    assert!(enc.encode::<&str>(&[]).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bert_tiny_embed_runs_off_the_runtime_and_matches_encode() {
    let dir = tiny_model_dir();
    let enc = SentenceEncoder::from_dir(dir.path(), &cpu()).unwrap();
    let texts = sentences();
    let a = enc.embed(&texts).await.unwrap();
    let b = enc.encode(&texts).unwrap();
    assert_eq!(a, b);
    let one = enc.embed_one(&texts[2]).await.unwrap();
    assert!(max_abs_diff(&one, b.row(2)) < 1e-5);
    assert_eq!(enc.embed(&[]).await.unwrap().rows(), 0);
    // Usable as a trait object.
    let dynenc: std::sync::Arc<dyn Encoder> = std::sync::Arc::new(enc);
    assert_eq!(dynenc.dimension(), HIDDEN);
}

#[test]
fn bert_tiny_without_modules_json_mean_pools_without_normalising() {
    let dir = tiny_model_dir();
    let d = dir.path();
    std::fs::remove_file(d.join("modules.json")).unwrap();
    let plain = SentenceEncoder::from_dir(d, &cpu()).unwrap();
    assert!(!plain.normalizes());
    std::fs::remove_dir_all(d.join("1_Pooling")).unwrap();
    std::fs::remove_file(d.join("sentence_bert_config.json")).unwrap();
    let bare = SentenceEncoder::from_dir(d, &cpu()).unwrap();
    assert_eq!(bare.max_seq_length(), MAX_POS);
    let texts = sentences();
    let a = plain.encode(&texts).unwrap();
    let b = bare.encode(&texts).unwrap();
    // Same mean pooling; only truncation differs (text 2 is longer than 12 tokens).
    for i in [0, 1, 3, 4, 5, 6] {
        assert!(max_abs_diff(a.row(i), b.row(i)) < 1e-5);
    }
    let norm: f32 = a.row(0).iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() > 1e-3, "not normalised, norm {norm}");
    // Normalising the plain output gives the normalised encoder's output.
    let normed = SentenceEncoder::from_dir(tiny_model_dir().path(), &cpu())
        .unwrap()
        .encode(&texts[..1])
        .unwrap();
    let mut a0 = lprag_core::Embeddings::new(HIDDEN, a.row(0).to_vec()).unwrap();
    a0.normalize();
    assert!(max_abs_diff(a0.row(0), normed.row(0)) < 1e-5);
}

#[test]
fn bert_tiny_concatenates_pooling_modes() {
    let dir = tiny_model_dir();
    let d = dir.path();
    write_json(
        &d.join("1_Pooling/config.json"),
        &json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": true,
                "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true,
                "pooling_mode_mean_sqrt_len_tokens": false}),
    );
    write_json(
        &d.join("modules.json"),
        &json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
        ]),
    );
    let enc = SentenceEncoder::from_dir(d, &cpu())
        .unwrap()
        .with_batch_size(4);
    assert_eq!(enc.dimension(), 3 * HIDDEN);
    let texts = sentences();
    let all = enc.encode(&texts).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let one = enc.encode(std::slice::from_ref(t)).unwrap();
        assert!(max_abs_diff(all.row(i), one.row(0)) < 1e-5, "row {i}");
        // max ≥ mean element-wise, over the same tokens.
        let r = all.row(i);
        for k in 0..HIDDEN {
            assert!(r[HIDDEN + k] >= r[2 * HIDDEN + k] - 1e-5);
        }
    }
}

/// The tiny model with feed-forward activation `act` and all four pooling modes.
fn tiny_model_pooling_every_way(act: &str) -> tempfile::TempDir {
    let dir = tiny_model_dir();
    let d = dir.path();
    let mut config = bert_config();
    config["hidden_act"] = json!(act);
    write_json(&d.join("config.json"), &config);
    write_json(
        &d.join("1_Pooling/config.json"),
        &json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": true,
                "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true,
                "pooling_mode_mean_sqrt_len_tokens": true}),
    );
    dir
}

/// lprag's CPU kernels and burn's ops give the same vectors: every pooling mode, every
/// activation, batches of mixed lengths (the kernels pack sequences without padding).
#[test]
fn bert_cpu_kernels_agree_with_burns_ops() {
    for act in ["gelu", "gelu_new", "relu"] {
        let dir = tiny_model_pooling_every_way(act);
        let enc = SentenceEncoder::from_dir(dir.path(), &cpu())
            .unwrap()
            .with_batch_size(3);
        let burn_ops = enc.clone().with_cpu_kernels(false);
        assert!(!burn_ops.uses_cpu_kernels());
        if !enc.uses_cpu_kernels() {
            println!("skipping: this CPU has no AVX-512F, so both are burn's ops");
            return;
        }
        let texts = sentences();
        let a = enc.encode(&texts).unwrap();
        let b = burn_ops.encode(&texts).unwrap();
        assert_eq!(a.dim(), 4 * HIDDEN);
        for i in 0..texts.len() {
            let diff = max_abs_diff(a.row(i), b.row(i));
            assert!(diff < 1e-5, "{act}, text {i}: {diff}");
        }
    }
}

/// The fp16 dense layers: off by default, on only with the CPU kernels where the CPU
/// has AVX-512-FP16, and then close to the f32 vectors (every activation and pooling).
#[test]
fn bert_fp16_kernels_stay_close_to_f32() {
    for act in ["gelu", "gelu_new", "relu"] {
        let dir = tiny_model_pooling_every_way(act);
        let enc = SentenceEncoder::from_dir(dir.path(), &cpu())
            .unwrap()
            .with_batch_size(3);
        assert!(!enc.uses_fp16_kernels(), "f32 is the default");
        let half = enc.clone().with_fp16_kernels(true);
        assert!(!half.clone().with_cpu_kernels(false).uses_fp16_kernels());
        if !half.uses_fp16_kernels() {
            assert!(!CpuBert::half_available() || !enc.uses_cpu_kernels());
            println!("skipping: no fp16 kernels on this CPU");
            return;
        }
        let texts = sentences();
        let a = half.encode(&texts).unwrap();
        let b = enc.encode(&texts).unwrap();
        let mut moved = 0f32;
        for i in 0..texts.len() {
            let c = cosine(a.row(i), b.row(i));
            assert!(c >= 0.9999, "{act}, text {i}: cosine {c}");
            moved = moved.max(max_abs_diff(a.row(i), b.row(i)));
        }
        assert!(moved > 0.0, "{act}: identical vectors, so fp16 did not run");
    }
}

#[test]
fn bert_tiny_accepts_a_prefixed_checkpoint() {
    let dir = tiny_model_dir();
    let d = dir.path();
    let reference = SentenceEncoder::from_dir(d, &cpu())
        .unwrap()
        .encode(&sentences())
        .unwrap();
    std::fs::write(
        d.join("model.safetensors"),
        safetensors_bytes(|specs| {
            for (n, _) in specs.iter_mut() {
                *n = format!("bert.{n}");
            }
        }),
    )
    .unwrap();
    let prefixed = SentenceEncoder::from_dir(d, &cpu())
        .unwrap()
        .encode(&sentences())
        .unwrap();
    assert_eq!(reference, prefixed);
}

#[test]
fn bert_fast_erf_and_host_gelu_match_the_backend() {
    use burn::tensor::{Tensor, TensorData};
    let xs: Vec<f32> = (-8000..=8000).map(|i| i as f32 * 1e-3).collect();
    let n = xs.len();
    let t = Tensor::<2>::from_data(TensorData::new(xs.clone(), [1, n]), &cpu());
    let exact_erf = t.clone().erf().into_data().try_into_vec::<f32>().unwrap();
    let erf_err = xs
        .iter()
        .zip(&exact_erf)
        .map(|(&x, &e)| (super::model::erf_f32(x) - e).abs())
        .fold(0.0, f32::max);
    assert!(erf_err < 1e-6, "erf error {erf_err}");
    let exact = burn::tensor::activation::gelu(t.clone())
        .into_data()
        .try_into_vec::<f32>()
        .unwrap();
    let host = super::model::gelu_host(t)
        .into_data()
        .try_into_vec::<f32>()
        .unwrap();
    let gelu_err = max_abs_diff(&exact, &host);
    assert!(gelu_err < 1e-5, "gelu error {gelu_err}");
    // erf saturates.
    assert!((super::model::erf_f32(50.0) - 1.0).abs() < 1e-6);
    assert!((super::model::erf_f32(-50.0) + 1.0).abs() < 1e-6);
}

// ---------------------------------------------------------------- typed errors

/// Load `dir` and return the error, which must name `file`.
fn load_error(dir: &Path, file: &str) -> Error {
    let e = SentenceEncoder::from_dir(dir, &cpu()).expect_err("load must fail");
    let named = match &e {
        Error::Io { path, .. } | Error::Format { path, .. } => path.clone(),
        other => panic!("expected Io or Format, got {other:?}"),
    };
    assert_eq!(named, dir.join(file), "error names the wrong file: {e}");
    e
}

#[test]
fn bert_missing_required_files_are_io_errors_naming_the_file() {
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        let dir = tiny_model_dir();
        std::fs::remove_file(dir.path().join(file)).unwrap();
        let e = load_error(dir.path(), file);
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{file}: {e:?}"
        );
    }
    // The pooling config named by modules.json is required too.
    let dir = tiny_model_dir();
    std::fs::remove_file(dir.path().join("1_Pooling/config.json")).unwrap();
    assert!(matches!(
        load_error(dir.path(), "1_Pooling/config.json"),
        Error::Io { .. }
    ));
    // A missing directory.
    let gone = dir.path().join("nope");
    let e = SentenceEncoder::from_dir(&gone, &cpu()).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if *path == gone),
        "{e:?}"
    );
}

#[test]
fn bert_malformed_files_are_format_errors_naming_the_file() {
    let garbage: [(&str, &[u8]); 7] = [
        ("config.json", b"{ not json"),
        (
            "config.json",
            br#"{"hidden_size": 10, "num_attention_heads": 3}"#,
        ),
        ("config.json", br#"{"hidden_act": "swish"}"#),
        ("tokenizer.json", b"{\"model\": 17}"),
        (
            "model.safetensors",
            b"\x10\x00\x00\x00\x00\x00\x00\x00not a header",
        ),
        (
            "modules.json",
            b"[{\"path\": \"\", \"type\": \"sentence_transformers.models.Dense\"}]",
        ),
        (
            "sentence_bert_config.json",
            b"{\"max_seq_length\": \"long\"}",
        ),
    ];
    for (file, bytes) in garbage {
        let dir = tiny_model_dir();
        std::fs::write(dir.path().join(file), bytes).unwrap();
        let e = load_error(dir.path(), file);
        assert!(matches!(e, Error::Format { .. }), "{file}: {e:?}");
    }
    let bad_pooling = [
        json!({"pooling_mode_weightedmean_tokens": true}),
        json!({"pooling_mode_mean_tokens": false}),
        json!({"word_embedding_dimension": 5, "pooling_mode_mean_tokens": true}),
    ];
    for v in bad_pooling {
        let dir = tiny_model_dir();
        write_json(&dir.path().join("1_Pooling/config.json"), &v);
        let e = load_error(dir.path(), "1_Pooling/config.json");
        assert!(matches!(e, Error::Format { .. }), "{v}: {e:?}");
    }
    // max_seq_length too small for [CLS] and [SEP].
    let dir = tiny_model_dir();
    write_json(
        &dir.path().join("sentence_bert_config.json"),
        &json!({"max_seq_length": 2}),
    );
    assert!(matches!(
        load_error(dir.path(), "sentence_bert_config.json"),
        Error::Format { .. }
    ));
}

#[test]
fn bert_bad_tensors_are_format_errors_naming_the_tensor() {
    type Edit = Box<dyn FnOnce(&mut Specs)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "encoder.layer.1.attention.self.key.bias",
            Box::new(|s: &mut Specs| {
                s.retain(|(n, _)| n != "encoder.layer.1.attention.self.key.bias")
            }),
        ),
        (
            "encoder.layer.0.intermediate.dense.weight",
            Box::new(|s: &mut Specs| {
                for (n, shape) in s.iter_mut() {
                    if n == "encoder.layer.0.intermediate.dense.weight" {
                        *shape = vec![HIDDEN, INTER];
                    }
                }
            }),
        ),
        (
            "embeddings.word_embeddings.weight",
            Box::new(|s: &mut Specs| s.retain(|(n, _)| !n.starts_with("embeddings.word"))),
        ),
    ];
    for (tensor, edit) in cases {
        let dir = tiny_model_dir();
        std::fs::write(
            dir.path().join("model.safetensors"),
            safetensors_bytes(edit),
        )
        .unwrap();
        let e = load_error(dir.path(), "model.safetensors");
        assert!(
            matches!(&e, Error::Format { message, .. } if message.contains(tensor)),
            "{e}"
        );
    }
}

// ---------------------------------------------------------------- resolution

fn env_of(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

/// A hub cache under `hub` with a complete snapshot `name` of `model_id`.
fn cache_snapshot(hub: &Path, model_id: &str, name: &str) -> PathBuf {
    let snap = hub
        .join(format!("models--{}", model_id.replace('/', "--")))
        .join("snapshots")
        .join(name);
    std::fs::create_dir_all(&snap).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::write(snap.join(f), b"{}").unwrap();
    }
    snap
}

const ID: &str = DEFAULT_MODEL_ID;

#[test]
fn bert_resolve_prefers_the_explicit_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let explicit = tmp.path().join("mine");
    std::fs::create_dir(&explicit).unwrap();
    let envdir = tmp.path().join("env");
    std::fs::create_dir(&envdir).unwrap();
    let hub = tmp.path().join("hub");
    cache_snapshot(&hub, ID, "abc");
    let env = env_of(&[(MODEL_DIR_ENV, &envdir), ("HF_HUB_CACHE", &hub)]);
    assert_eq!(resolve_with(Some(&explicit), ID, &env).unwrap(), explicit);
    // An explicit path that is not a directory is an error, not a fall-through.
    let missing = tmp.path().join("missing");
    let e = resolve_with(Some(&missing), ID, &env).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if *path == missing),
        "{e:?}"
    );
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        resolve_with(Some(&file), ID, &env),
        Err(Error::Io { .. })
    ));
}

#[test]
fn bert_resolve_uses_lprag_model_dir_before_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let envdir = tmp.path().join("env");
    std::fs::create_dir(&envdir).unwrap();
    let hub = tmp.path().join("hub");
    cache_snapshot(&hub, ID, "abc");
    let env = env_of(&[(MODEL_DIR_ENV, &envdir), ("HF_HUB_CACHE", &hub)]);
    assert_eq!(resolve_with(None, ID, &env).unwrap(), envdir);
    let missing = tmp.path().join("missing");
    let env = env_of(&[(MODEL_DIR_ENV, &missing), ("HF_HUB_CACHE", &hub)]);
    assert!(matches!(
        resolve_with(None, ID, &env),
        Err(Error::Io { .. })
    ));
    // Empty means unset.
    let env = env_of(&[(MODEL_DIR_ENV, Path::new("")), ("HF_HUB_CACHE", &hub)]);
    assert!(resolve_with(None, ID, &env)
        .unwrap()
        .ends_with("snapshots/abc"));
}

#[test]
fn bert_resolve_finds_the_hf_cache_by_each_variable() {
    let tmp = tempfile::tempdir().unwrap();
    // $HF_HUB_CACHE
    let hub = tmp.path().join("hubcache");
    let snap = cache_snapshot(&hub, ID, "s1");
    let home = tmp.path().join("home");
    let hf_home = tmp.path().join("hfhome");
    let env = env_of(&[
        ("HF_HUB_CACHE", &hub),
        ("HF_HOME", &hf_home),
        ("HOME", &home),
    ]);
    assert_eq!(resolve_with(None, ID, &env).unwrap(), snap);
    // $HF_HOME/hub
    let snap = cache_snapshot(&hf_home.join("hub"), ID, "s2");
    let env = env_of(&[("HF_HOME", &hf_home), ("HOME", &home)]);
    assert_eq!(resolve_with(None, ID, &env).unwrap(), snap);
    // ~/.cache/huggingface/hub
    let snap = cache_snapshot(&home.join(".cache/huggingface/hub"), ID, "s3");
    let env = env_of(&[("HOME", &home)]);
    assert_eq!(resolve_with(None, ID, &env).unwrap(), snap);
    // Another model id is not found there.
    let e = resolve_with(None, "org/other-model", &env).unwrap_err();
    if cfg!(not(feature = "hf-hub")) {
        assert!(
            matches!(&e, Error::NotReady(m) if m.contains("org/other-model")),
            "{e:?}"
        );
    }
}

#[test]
fn bert_resolve_picks_refs_main_and_skips_incomplete_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = tmp.path();
    let a = cache_snapshot(hub, ID, "aaa");
    let b = cache_snapshot(hub, ID, "bbb");
    let repo = hub.join("models--sentence-transformers--all-MiniLM-L6-v2");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "aaa\n").unwrap();
    assert_eq!(find_in_cache(hub, ID).unwrap(), a);
    // refs/main pointing at an incomplete snapshot: fall back to a complete one.
    std::fs::remove_file(a.join("model.safetensors")).unwrap();
    assert_eq!(find_in_cache(hub, ID).unwrap(), b);
    std::fs::remove_file(b.join("tokenizer.json")).unwrap();
    assert_eq!(find_in_cache(hub, ID), None);
}

#[test]
fn bert_resolve_reports_what_it_searched() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_of(&[("HF_HUB_CACHE", tmp.path())]);
    if cfg!(not(feature = "hf-hub")) {
        let e = resolve_with(None, ID, &env).unwrap_err();
        match e {
            Error::NotReady(m) => {
                assert!(m.contains(&tmp.path().display().to_string()), "{m}");
                assert!(m.contains("fetch-model.sh"), "{m}");
                assert!(m.contains("hf-hub"), "{m}");
                assert!(m.contains("LPRAG_MODEL_DIR"), "{m}");
            }
            other => panic!("expected NotReady, got {other:?}"),
        }
        let none = |_: &str| None;
        assert!(matches!(
            resolve_with(None, ID, &none),
            Err(Error::NotReady(_))
        ));
    }
}

#[test]
fn bert_encoder_name_comes_from_the_cache_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model_dir();
    let snap = tmp
        .path()
        .join("models--acme--tiny-bert")
        .join("snapshots")
        .join("0123");
    std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
    copy_dir(model.path(), &snap);
    let enc = SentenceEncoder::from_dir(&snap, &cpu()).unwrap();
    assert_eq!(enc.name(), "acme/tiny-bert");
    let enc = SentenceEncoder::from_dir(model.path(), &cpu())
        .unwrap()
        .with_name("x");
    assert_eq!(enc.name(), "x");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

// ---------------------------------------------------------------- the real model

/// all-MiniLM-L6-v2 via the normal resolution, or `None` (with a message) when it is
/// absent and `LPRAG_REQUIRE_MODEL` is not set.
fn real_model() -> Option<SentenceEncoder> {
    let require =
        std::env::var_os("LPRAG_REQUIRE_MODEL").is_some_and(|v| !v.is_empty() && v != "0");
    match resolve_model_dir(None, DEFAULT_MODEL_ID) {
        Ok(dir) => Some(SentenceEncoder::from_dir(&dir, &cpu()).expect("the model loads")),
        Err(e) if !require => {
            println!("skipping: no all-MiniLM-L6-v2 ({e}); run scripts/fetch-model.sh");
            None
        }
        Err(e) => panic!("LPRAG_REQUIRE_MODEL is set but the model is missing: {e}"),
    }
}

#[derive(serde::Deserialize)]
struct Reference {
    items: Vec<ReferenceItem>,
}

#[derive(serde::Deserialize)]
struct ReferenceItem {
    kind: String,
    text: String,
    input_ids: Vec<u32>,
    embedding: Vec<f32>,
}

/// The shared benchmark data folder: `LPRAG_DATA`, else `shared/data` next to the
/// workspace.
fn data_dir() -> std::path::PathBuf {
    std::env::var_os("LPRAG_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
        })
}

#[test]
fn bert_minilm_matches_sentence_transformers() {
    let Some(enc) = real_model() else { return };
    let path = data_dir().join("reference/minilm_reference_vectors.json");
    let raw = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reference vectors {}: {e} (set LPRAG_DATA)", path.display()));
    let reference: Reference = serde_json::from_str(&raw).expect("reference JSON");
    assert!(!reference.items.is_empty());
    assert_eq!(enc.dimension(), 384);
    assert_eq!(enc.max_seq_length(), 256);
    assert!(enc.normalizes());
    let texts: Vec<&str> = reference.items.iter().map(|i| i.text.as_str()).collect();
    // Batched and padded (batch 5 over 12 texts of different lengths).
    let got = enc.clone().with_batch_size(5).encode(&texts).unwrap();
    let mut min_cos = f32::INFINITY;
    for (i, item) in reference.items.iter().enumerate() {
        assert_eq!(
            enc.token_ids(&item.text).unwrap(),
            item.input_ids,
            "tokens of {} {i}",
            item.kind
        );
        let c = cosine(got.row(i), &item.embedding);
        min_cos = min_cos.min(c);
        assert!(c >= 0.9999, "{} {i}: cosine {c}", item.kind);
    }
    println!(
        "min cosine vs sentence-transformers over {} texts: {min_cos:.7}",
        texts.len()
    );
    // The other engine (burn's ops where lprag's CPU kernels ran, or the reverse).
    let other = enc
        .clone()
        .with_batch_size(5)
        .with_cpu_kernels(!enc.uses_cpu_kernels())
        .encode(&texts)
        .unwrap();
    for i in 0..texts.len() {
        let d = got
            .row(i)
            .iter()
            .zip(other.row(i))
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-5, "text {i}: the two engines differ by {d}");
    }
    // The fp16 dense layers, where the CPU has them, against sentence-transformers too.
    let half = enc.clone().with_batch_size(5).with_fp16_kernels(true);
    if half.uses_fp16_kernels() {
        let got = half.encode(&texts).unwrap();
        let mut min_cos = f32::INFINITY;
        for (i, item) in reference.items.iter().enumerate() {
            min_cos = min_cos.min(cosine(got.row(i), &item.embedding));
        }
        println!("fp16 kernels: min cosine vs sentence-transformers {min_cos:.7}");
        assert!(min_cos >= 0.9999, "fp16 kernels: cosine {min_cos}");
    }
}

/// Flat-cosine passage recall on MuSiQue-100 (HippoRAG protocol): passages are
/// `title + "\n" + text`, gold passages are each question's paragraphs with
/// `is_supporting`, matched by title and text. Ignored by default (about a minute and a
/// half on two cores); run with `cargo test -p lprag-model --release bert_musique -- --ignored --nocapture`.
#[test]
#[ignore]
fn bert_musique_recall() {
    let Some(enc) = real_model() else { return };
    musique_recall(&enc);
}

/// [`bert_musique_recall`] with the CPU kernels' dense layers in fp16 (where the CPU has
/// AVX-512-FP16): the same recall.
#[test]
#[ignore]
fn bert_musique_recall_fp16() {
    let Some(enc) = real_model() else { return };
    let enc = enc.with_fp16_kernels(true);
    if !enc.uses_fp16_kernels() {
        println!("skipping: no fp16 kernels on this CPU");
        return;
    }
    musique_recall(&enc);
}

/// Flat-cosine Recall@2 and @5 of `enc` on MuSiQue-100, asserted against all-MiniLM's.
fn musique_recall(enc: &SentenceEncoder) {
    let data = data_dir().join("musique-100");
    let data = data.display();
    let corpus: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{data}/corpus.json")).unwrap())
            .unwrap();
    let questions: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{data}/questions.json")).unwrap())
            .unwrap();
    let key = |title: &str, text: &str| format!("{title}\u{0}{text}");
    let passages: Vec<String> = corpus
        .iter()
        .map(|p| {
            format!(
                "{}\n{}",
                p["title"].as_str().unwrap(),
                p["text"].as_str().unwrap()
            )
        })
        .collect();
    let index: HashMap<String, usize> = corpus
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                key(p["title"].as_str().unwrap(), p["text"].as_str().unwrap()),
                i,
            )
        })
        .collect();
    let t = std::time::Instant::now();
    let pe = enc.encode(&passages).unwrap();
    let qs: Vec<&str> = questions
        .iter()
        .map(|q| q["question"].as_str().unwrap())
        .collect();
    let qe = enc.encode(&qs).unwrap();
    println!(
        "encoded {} passages and {} questions in {:.1} s",
        passages.len(),
        qs.len(),
        t.elapsed().as_secs_f64()
    );
    let mut recall = [0f64; 2];
    for (qi, q) in questions.iter().enumerate() {
        let gold: Vec<usize> = q["paragraphs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["is_supporting"].as_bool() == Some(true))
            .map(|p| {
                *index
                    .get(&key(
                        p["title"].as_str().unwrap(),
                        p["paragraph_text"].as_str().unwrap(),
                    ))
                    .expect("gold passage is in the corpus")
            })
            .collect();
        assert!(!gold.is_empty());
        let mut scored: Vec<(f32, usize)> = pe
            .iter()
            .enumerate()
            .map(|(i, p)| (cosine(qe.row(qi), p), i))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (slot, k) in [2usize, 5].iter().enumerate() {
            let hit = scored[..*k]
                .iter()
                .filter(|(_, i)| gold.contains(i))
                .count();
            recall[slot] += hit as f64 / gold.len() as f64;
        }
    }
    let n = questions.len() as f64;
    let (r2, r5) = (100.0 * recall[0] / n, 100.0 * recall[1] / n);
    println!("MuSiQue-100 flat cosine: Recall@2 {r2:.2}, Recall@5 {r5:.2}");
    assert!(
        (r2 - 47.17).abs() <= 0.5,
        "Recall@2 {r2:.2}, expected 47.17 ± 0.5"
    );
    assert!(
        (r5 - 62.17).abs() <= 0.5,
        "Recall@5 {r5:.2}, expected 62.17 ± 0.5"
    );
}

#[test]
fn bert_counts_tokens_past_the_cut_and_prefixes_queries() {
    let Some(enc) = real_model() else { return };
    assert_eq!(enc.max_input_tokens(), Some(256));
    let long = "The river flows north through the old city. ".repeat(60);
    let n = enc.count_tokens(&long).unwrap();
    assert!(n > 256, "{n} tokens");
    assert_eq!(
        enc.token_ids(&long).unwrap().len(),
        256,
        "the model sees 256"
    );
    assert_eq!(
        enc.count_tokens("Warsaw").unwrap(),
        enc.token_ids("Warsaw").unwrap().len()
    );
    // Prefixes: queries and documents go in with their own.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let e5 = enc.clone().with_prefixes("query: ", "passage: ");
    assert!(e5.fingerprint().is_some() && enc.fingerprint().is_none());
    assert!(e5.embeds_queries_apart() && !enc.embeds_queries_apart());
    let q = rt.block_on(e5.embed_queries(&["Warsaw".into()])).unwrap();
    let d = rt.block_on(e5.embed(&["Warsaw".into()])).unwrap();
    let plain = enc.encode(&["query: Warsaw", "passage: Warsaw"]).unwrap();
    assert!(cosine(q.row(0), plain.row(0)) > 0.99999);
    assert!(cosine(d.row(0), plain.row(1)) > 0.99999);
    assert!(
        cosine(q.row(0), d.row(0)) < 0.9999,
        "the prefixes change the vectors"
    );
    assert_eq!(
        e5.count_tokens("Warsaw").unwrap(),
        enc.count_tokens("passage: Warsaw").unwrap()
    );
}
