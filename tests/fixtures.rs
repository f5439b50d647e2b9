//! Indexes saved by an earlier release (format version 1 of every index) stay readable:
//! each fixture under `tests/fixtures/v1/` opens with today's code and answers as it did
//! when it was written (`expected.json`, the top chunk ids per query at that time).
//!
//! The fixtures are committed. `cargo test --test integration fixtures:: -- --ignored` rewrites them,
//! which is only right when a format version changes on purpose (then add a `v2`
//! directory and keep `v1` readable or say why not in the CHANGELOG).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lprag::{
    Encoder, G2Rag, GfmRag, HashingEncoder, HashingEncoderConfig, LesegrConfig, LesegrRag,
    LesegrVariant, LpRag, LpRagConfig, ModelConfig, QcgRag, Retriever, Selection, TrainConfig,
};

use crate::common;

const QUERIES: [&str; 3] = [
    "Which river flows through Warsaw?",
    "Who invented dynamite?",
    "capital of Japan",
];

/// The fixture folders: one per retriever kind, and LP-RAG once more with each built-in
/// burn predictor (their sizes live in the index's configuration).
const KINDS: [&str; 8] = [
    "lprag",
    "qcg",
    "g2",
    "lesegr",
    "gfm",
    "lprag-vgae",
    "lprag-peg",
    "lprag-seal",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

/// A small hashing encoder (64 dims) keeps the fixtures a few kilobytes.
fn encoder() -> Arc<dyn Encoder> {
    Arc::new(
        HashingEncoder::new(HashingEncoderConfig {
            dim: 64,
            ..HashingEncoderConfig::default()
        })
        .unwrap(),
    )
}

fn open(name: &str, dir: &Path) -> Arc<dyn Retriever> {
    match name {
        "lprag" | "lprag-vgae" | "lprag-peg" | "lprag-seal" => {
            Arc::new(LpRag::load(dir, encoder()).unwrap())
        }
        "qcg" => Arc::new(QcgRag::load(dir, encoder()).unwrap()),
        "g2" => Arc::new(G2Rag::load(dir, encoder()).unwrap()),
        "lesegr" => Arc::new(LesegrRag::load(dir, encoder()).unwrap()),
        "gfm" => Arc::new(GfmRag::load(dir, encoder()).unwrap()),
        other => panic!("no fixture kind {other}"),
    }
}

async fn top_ids(r: &dyn Retriever) -> BTreeMap<String, Vec<usize>> {
    let mut out = BTreeMap::new();
    for q in QUERIES {
        let hits = r.retrieve(q, Selection::TopK(3)).await.unwrap();
        out.insert(q.to_string(), hits.iter().map(|h| h.chunk.id).collect());
    }
    out
}

#[tokio::test]
async fn fixtures_of_format_v1_open_and_answer_as_written() {
    let mut seen = 0;
    for name in KINDS {
        let dir = root().join(name);
        let expected: BTreeMap<String, Vec<usize>> =
            serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
        let r = open(name, &dir.join("index"));
        assert_eq!(top_ids(&*r).await, expected, "{name}");
        seen += 1;
    }
    assert_eq!(seen, KINDS.len());
}

/// Every fixture of every format version kept (`tests/fixtures/v*/`) opens with today's
/// code, answers as written, and today's `save` recognises it as its own index: saving
/// over a copy of it replaces it (rather than refusing it as a user's directory), and the
/// result opens and answers the same.
#[tokio::test]
async fn every_fixture_of_every_version_opens_and_is_saved_over_as_its_own() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('v'))
        })
        .collect();
    versions.sort();
    assert!(!versions.is_empty());
    let mut seen = 0;
    for version in &versions {
        for name in KINDS {
            let dir = version.join(name);
            if !dir.exists() {
                continue;
            }
            let expected: BTreeMap<String, Vec<usize>> =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            let copy = tempfile::tempdir().unwrap();
            copy_tree(&dir.join("index"), copy.path());
            let what = format!("{}/{name}", version.display());
            assert_eq!(top_ids(&*open(name, copy.path())).await, expected, "{what}");
            save_over(name, copy.path());
            assert_eq!(
                top_ids(&*open(name, copy.path())).await,
                expected,
                "{what}, saved over"
            );
            seen += 1;
        }
    }
    assert!(seen >= KINDS.len(), "{seen} fixtures");
}

/// Open the index `name` in `dir` and save it over itself.
fn save_over(name: &str, dir: &Path) {
    match name {
        "lprag" | "lprag-vgae" | "lprag-peg" | "lprag-seal" => {
            LpRag::load(dir, encoder()).unwrap().save(dir).unwrap()
        }
        "qcg" => QcgRag::load(dir, encoder()).unwrap().save(dir).unwrap(),
        "g2" => G2Rag::load(dir, encoder()).unwrap().save(dir).unwrap(),
        "lesegr" => LesegrRag::load(dir, encoder()).unwrap().save(dir).unwrap(),
        "gfm" => GfmRag::load(dir, encoder()).unwrap().save(dir).unwrap(),
        other => panic!("no fixture kind {other}"),
    }
}

/// Copy the tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A float beyond `f32`'s range (`1e39` parses as infinity) in any embedding or weight
/// array of a saved peer index is a format error naming the field, not NaN scores later
/// (LeSeGR's `transform` was found by the `index_files` fuzz harness).
#[test]
fn a_number_beyond_f32_in_a_saved_index_is_a_format_error() {
    let cases = [
        ("qcg", "qcg.json", "/query_emb/data/3", "query_emb"),
        ("g2", "g2.json", "/chunk_emb/data/5", "chunk_emb"),
        ("lesegr", "lesegr.json", "/transform/1083", "transform"),
        ("lesegr", "lesegr.json", "/alpha/0", "alpha"),
        ("gfm", "gfm.json", "/relation_emb/data/1", "relation_emb"),
    ];
    for (name, file, pointer, field) in cases {
        let tmp = edited_copy(name, file, pointer, serde_json::json!(1e39));
        let err = match name {
            "qcg" => QcgRag::load(tmp.path(), encoder()).map(|_| ()),
            "g2" => G2Rag::load(tmp.path(), encoder()).map(|_| ()),
            "lesegr" => LesegrRag::load(tmp.path(), encoder()).map(|_| ()),
            _ => GfmRag::load(tmp.path(), encoder()).map(|_| ()),
        }
        .expect_err(pointer);
        let msg = err.to_string();
        assert!(matches!(err, lprag::Error::Format { .. }), "{name}: {msg}");
        // Where: the field, once the number parsed as infinity; or, when serde_json's
        // `float_roundtrip` feature is on (rig turns it on; this workspace's tests run
        // with it), serde_json's own "number out of range at line L column C".
        let placed = msg.contains(&format!("`{field}`"))
            || (msg.contains("out of range") && msg.contains("column"));
        assert!(placed && msg.contains(file), "{name}: {msg}");
    }
}

/// A copy of fixture `name`'s index in a temporary folder.
fn copy_of(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&root().join(name).join("index"), tmp.path());
    tmp
}

/// A copy of fixture `name`'s index with the JSON value at `pointer` of `file` replaced.
fn edited_copy(
    name: &str,
    file: &str,
    pointer: &str,
    value: serde_json::Value,
) -> tempfile::TempDir {
    let tmp = copy_of(name);
    let path = tmp.path().join(file);
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    *doc.pointer_mut(pointer).expect(pointer) = value;
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    tmp
}

/// A saved model configuration edited to a width its weights file cannot hold (8 or 16 →
/// 50,000, inside the accepted range) is refused before the model is built: found by the
/// `index_files` fuzz harness, where building it first allocated 24 GB.
#[test]
fn a_model_wider_than_its_weights_file_is_refused_before_it_is_built() {
    for (name, file, pointer) in [
        ("gfm", "gfm.json", "/config/model/hidden"),
        ("lprag", "predictor/predictor.json", "/model/hidden"),
    ] {
        let tmp = edited_copy(name, file, pointer, serde_json::json!(50_000));
        let err = match name {
            "gfm" => GfmRag::load(tmp.path(), encoder()).map(|_| ()),
            _ => LpRag::load(tmp.path(), encoder()).map(|_| ()),
        }
        .expect_err(name);
        let msg = err.to_string();
        assert!(matches!(err, lprag::Error::Format { .. }), "{name}: {msg}");
        assert!(msg.contains("bytes can hold"), "{name}: {msg}");
    }
}

/// The same for the built-in VGAE, PEG and SEAL predictors (their sizes live in the
/// index's configuration, `/config/predictor`): an edited width is refused by the weights
/// file's size before the model is built (at 50,000 VGAE alone would ask for 10¹⁰ floats, 40 GB).
#[tokio::test]
async fn a_burn_predictor_wider_than_its_weights_file_is_refused_before_it_is_built() {
    for mut config in [
        LpRagConfig::paper_vgae(),
        LpRagConfig::paper_peg(),
        LpRagConfig::paper_seal(),
    ] {
        config.train.epochs = 2;
        let rag = LpRag::builder()
            .encoder(encoder())
            .config(config)
            .build(&common::corpus())
            .await
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        rag.save(tmp.path()).unwrap();
        // Unedited, it reopens.
        LpRag::load(tmp.path(), encoder()).unwrap();
        let path = tmp.path().join("manifest.json");
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let kind = doc["config"]["predictor"]["kind"].clone();
        *doc.pointer_mut("/config/predictor/hidden")
            .expect("a width") = serde_json::json!(50_000);
        std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
        let err = LpRag::load(tmp.path(), encoder()).map(|_| ()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, lprag::Error::Format { .. }), "{kind}: {msg}");
        assert!(msg.contains("bytes can hold"), "{kind}: {msg}");
    }
}

/// LeSeGR runs one propagation step per layer at every query: a saved configuration with
/// an absurd layer count (found by the `index_files` fuzz harness, 8.5·10¹⁸) is refused on
/// load instead of making every query spin.
#[test]
fn an_absurd_lesegr_layer_count_is_refused_on_load() {
    for pointer in ["/config/train/layers", "/config/lite_layers"] {
        let tmp = edited_copy(
            "lesegr",
            "lesegr.json",
            pointer,
            serde_json::json!(8_539_009_287_185_523_053u64),
        );
        let err = LesegrRag::load(tmp.path(), encoder())
            .map(|_| ())
            .expect_err(pointer);
        assert!(matches!(err, lprag::Error::Format { .. }), "{err}");
        assert!(err.to_string().contains("layers"), "{err}");
    }
}

/// `LPRAG_FIXTURES=lprag-vgae,lprag-peg` rewrites only the kinds named; all by default.
#[tokio::test]
#[ignore = "rewrites the committed fixtures"]
async fn regenerate_fixtures() {
    let only = std::env::var("LPRAG_FIXTURES").ok();
    let wanted = |name: &str| {
        only.as_deref()
            .is_none_or(|l| l.split(',').any(|n| n == name))
    };
    let docs = common::corpus();
    let lprag = LpRag::builder()
        .encoder(encoder())
        .config(LpRagConfig {
            model: ModelConfig {
                hidden: 16,
                ..ModelConfig::default()
            },
            train: TrainConfig {
                epochs: 3,
                ..TrainConfig::default()
            },
            ..LpRagConfig::default()
        })
        .build(&docs)
        .await
        .unwrap();
    let qcg = QcgRag::builder()
        .encoder(encoder())
        .build(&docs)
        .await
        .unwrap();
    let g2 = G2Rag::builder()
        .encoder(encoder())
        .build(&docs)
        .await
        .unwrap();
    let mut lesegr_config = LesegrConfig {
        variant: LesegrVariant::Trained,
        ..LesegrConfig::default()
    };
    lesegr_config.train.epochs = 2;
    let lesegr = LesegrRag::builder()
        .encoder(encoder())
        .config(lesegr_config)
        .build(&docs)
        .await
        .unwrap();
    let gfm = GfmRag::builder()
        .encoder(encoder())
        .config(common::small_gfm_config())
        .build(&docs)
        .await
        .unwrap();
    let mut burn = Vec::new();
    for (name, mut config) in [
        ("lprag-vgae", LpRagConfig::paper_vgae()),
        ("lprag-peg", LpRagConfig::paper_peg()),
        ("lprag-seal", LpRagConfig::paper_seal()),
    ] {
        config.train.epochs = 3;
        let rag = LpRag::builder()
            .encoder(encoder())
            .config(config)
            .build(&docs)
            .await
            .unwrap();
        burn.push((name, rag));
    }
    let save = |name: &str, f: &dyn Fn(&Path)| {
        if !wanted(name) {
            return;
        }
        let dir = root().join(name).join("index");
        let _ = std::fs::remove_dir_all(root().join(name));
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        f(&dir);
    };
    save("lprag", &|d| lprag.save(d).unwrap());
    save("qcg", &|d| qcg.save(d).unwrap());
    save("g2", &|d| g2.save(d).unwrap());
    save("lesegr", &|d| lesegr.save(d).unwrap());
    save("gfm", &|d| gfm.save(d).unwrap());
    for (name, rag) in &burn {
        save(name, &|d| rag.save(d).unwrap());
    }
    for name in KINDS.into_iter().filter(|n| wanted(n)) {
        let dir = root().join(name);
        let r = open(name, &dir.join("index"));
        let ids = top_ids(&*r).await;
        std::fs::write(
            dir.join("expected.json"),
            serde_json::to_vec_pretty(&ids).unwrap(),
        )
        .unwrap();
    }
}
