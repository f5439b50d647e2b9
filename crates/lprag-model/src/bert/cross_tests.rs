//! [`CrossEncoder`] on a tiny `BertForSequenceClassification` the tests write: its scores
//! against the pooler and head computed by hand from the file's own tensors.

use std::path::Path;

use burn::tensor::{Int, Tensor, TensorData};
use lprag_core::{Error, Reranker};
use safetensors::SafeTensors;

use super::config::BertConfig;
use super::model::BertModel;
use super::tests::{bert_config, cpu, safetensors_bytes, tokenizer_json, write_json, Specs};
use super::CrossEncoder;

const HIDDEN: usize = 8;

/// A cross-encoder directory: BERT under `bert.`, the pooler, a head of `labels` labels.
fn tiny_cross_encoder(labels: usize, edit: impl FnOnce(&mut Specs)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_json(&d.join("config.json"), &bert_config());
    write_json(&d.join("tokenizer.json"), &tokenizer_json());
    let bytes = safetensors_bytes(|specs| {
        for (name, _) in specs.iter_mut() {
            *name = format!("bert.{name}");
        }
        specs.push(("classifier.weight".into(), vec![labels, HIDDEN]));
        specs.push(("classifier.bias".into(), vec![labels]));
        edit(specs);
    });
    std::fs::write(d.join("model.safetensors"), bytes).unwrap();
    dir
}

fn tensor(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The score of one pair computed apart from `CrossEncoder`: the BERT body on hand-made
/// ids and segments, then pooler and head on the host from the file's tensors.
fn by_hand(dir: &Path, ids: &[i64], types: &[i64], labels: usize) -> f32 {
    let config = BertConfig::from_file(&dir.join("config.json")).unwrap();
    let path = dir.join("model.safetensors");
    let model = BertModel::from_safetensors(&path, &config, &cpu()).unwrap();
    let s = ids.len();
    let int = |v: &[i64]| Tensor::<2, Int>::from_data(TensorData::new(v.to_vec(), [1, s]), &cpu());
    let hidden = model.forward(int(ids), int(types), int(&vec![1; s]));
    let cls: Vec<f32> = hidden
        .narrow(1, 0, 1)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (pw, pb) = (
        tensor(&st, "bert.pooler.dense.weight"),
        tensor(&st, "bert.pooler.dense.bias"),
    );
    let pooled: Vec<f32> = (0..HIDDEN)
        .map(|o| {
            (pb[o]
                + (0..HIDDEN)
                    .map(|i| pw[o * HIDDEN + i] * cls[i])
                    .sum::<f32>())
            .tanh()
        })
        .collect();
    let (cw, cb) = (
        tensor(&st, "classifier.weight"),
        tensor(&st, "classifier.bias"),
    );
    let logit = |l: usize| {
        cb[l]
            + (0..HIDDEN)
                .map(|i| cw[l * HIDDEN + i] * pooled[i])
                .sum::<f32>()
    };
    if labels == 2 {
        logit(1) - logit(0)
    } else {
        logit(0)
    }
}

// [CLS]=2 [SEP]=3 the=4 cat=5 sat=6 on=7 mat=8 dog=9 a=10 big=11 red=12 ran=13
/// "the cat" with "the cat sat on the mat": ids and segments.
const PAIR_1: ([i64; 11], [i64; 11]) = (
    [2, 4, 5, 3, 4, 5, 6, 7, 4, 8, 3],
    [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1],
);
/// "the cat" with "a big red dog ran".
const PAIR_2: ([i64; 10], [i64; 10]) = (
    [2, 4, 5, 3, 10, 11, 12, 9, 13, 3],
    [0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
);

#[test]
fn cross_encoder_scores_match_the_head_computed_by_hand() {
    for labels in [1, 2] {
        let dir = tiny_cross_encoder(labels, |_| {});
        let ce = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap();
        let texts = ["the cat sat on the mat", "a big red dog ran"];
        let got = ce.score_sync("the cat", &texts).unwrap();
        let want1 = by_hand(dir.path(), &PAIR_1.0, &PAIR_1.1, labels);
        let want2 = by_hand(dir.path(), &PAIR_2.0, &PAIR_2.1, labels);
        assert!(
            (got[0] - want1).abs() < 1e-4,
            "{labels} labels: {} vs {want1}",
            got[0]
        );
        assert!(
            (got[1] - want2).abs() < 1e-4,
            "{labels} labels: {} vs {want2}",
            got[1]
        );
        assert_ne!(got[0], got[1]);
        // The second segment is read as segment 1: with segment 0 the score differs.
        let flat = by_hand(dir.path(), &PAIR_1.0, &[0; 11], labels);
        assert!(
            (flat - want1).abs() > 1e-6,
            "segments make no difference here"
        );
    }
}

#[test]
fn cross_encoder_batches_agree_with_single_pairs_in_input_order() {
    let dir = tiny_cross_encoder(1, |_| {});
    let texts = [
        "the cat sat on the mat",
        "a dog",
        "the big red house is green and small",
        "tree",
        "the cat",
    ];
    let batched = CrossEncoder::from_dir(dir.path(), &cpu())
        .unwrap()
        .with_batch_size(2)
        .score_sync("the cat", &texts)
        .unwrap();
    let single = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap();
    for (t, b) in texts.iter().zip(&batched) {
        let one = single.score_sync("the cat", &[t]).unwrap()[0];
        assert!(
            (one - b).abs() < 1e-4,
            "{t:?}: {one} alone vs {b} in a batch"
        );
    }
    // lprag's CPU kernels (where this CPU has them) and burn's ops score alike.
    let burn_ops = single.clone().with_cpu_kernels(false);
    assert!(!burn_ops.uses_cpu_kernels());
    let other = burn_ops
        .with_batch_size(2)
        .score_sync("the cat", &texts)
        .unwrap();
    for ((t, a), b) in texts.iter().zip(&batched).zip(&other) {
        assert!((a - b).abs() < 1e-5, "{t:?}: {a} vs {b} on burn's ops");
    }
    // The fp16 dense layers (off by default; where this CPU has them) score close by.
    assert!(!single.uses_fp16_kernels());
    let half = single.clone().with_fp16_kernels(true);
    if half.uses_fp16_kernels() {
        let scores = half
            .with_batch_size(2)
            .score_sync("the cat", &texts)
            .unwrap();
        for ((t, a), b) in texts.iter().zip(&batched).zip(&scores) {
            assert!(
                (a - b).abs() < 1e-2 * a.abs().max(1.0),
                "{t:?}: {a} vs {b} in fp16"
            );
        }
        assert_ne!(scores, batched, "identical scores, so fp16 did not run");
    }
}

#[test]
fn cross_encoder_cuts_long_pairs_to_the_model_length() {
    // max_position_embeddings is 16: a 40-word text is cut, not an error.
    let dir = tiny_cross_encoder(1, |_| {});
    let ce = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap();
    let long = "the cat sat on the mat ".repeat(7);
    let s = ce.score_sync("the cat", &[long.as_str()]).unwrap();
    assert!(s[0].is_finite());
}

#[test]
fn a_checkpoint_without_a_classifier_is_a_format_error_naming_it() {
    let dir = tiny_cross_encoder(1, |specs| {
        specs.retain(|(n, _)| !n.starts_with("classifier"))
    });
    let e = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e:?}");
    assert!(e.to_string().contains("classifier.weight"), "{e}");
    let dir = tiny_cross_encoder(3, |_| {});
    let e = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap_err();
    assert!(e.to_string().contains("3 labels"), "{e}");
    let dir = tiny_cross_encoder(1, |specs| {
        specs.retain(|(n, _)| !n.starts_with("bert.pooler"))
    });
    let e = CrossEncoder::from_dir(dir.path(), &cpu()).unwrap_err();
    assert!(e.to_string().contains("bert.pooler.dense.weight"), "{e}");
}

#[tokio::test]
async fn the_reranker_trait_runs_off_the_runtime_and_matches_score_sync() {
    let dir = tiny_cross_encoder(1, |_| {});
    let ce = CrossEncoder::from_dir(dir.path(), &cpu())
        .unwrap()
        .with_name("tiny");
    assert_eq!(Reranker::name(&ce), "tiny");
    let texts = ["the cat sat on the mat", "a big red dog ran"];
    let a = ce.score("the cat", &texts).await.unwrap();
    let b = ce.score_sync("the cat", &texts).unwrap();
    assert_eq!(a, b);
    assert!(ce.score("the cat", &[]).await.unwrap().is_empty());
}
