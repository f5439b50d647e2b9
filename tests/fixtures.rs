//! Indexes saved by an earlier release (format version 1 of every index) stay readable:
//! each fixture under `tests/fixtures/v1/` opens with today's code and answers as it did
//! when it was written (`expected.json`, the top chunk ids per query at that time).
//!
//! The fixtures are committed. `cargo test --test fixtures -- --ignored` rewrites them,
//! which is only right when a format version changes on purpose (then add a `v2`
//! directory and keep `v1` readable or say why not in the CHANGELOG).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lprag::{
    Encoder, G2Rag, GfmRag, HashingEncoder, HashingEncoderConfig, LesegrConfig, LesegrRag,
    LesegrVariant, LpRag, LpRagConfig, ModelConfig, QcgRag, Retriever, Selection, TrainConfig,
};

mod common;

const QUERIES: [&str; 3] = [
    "Which river flows through Warsaw?",
    "Who invented dynamite?",
    "capital of Japan",
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
        "lprag" => Arc::new(LpRag::load(dir, encoder()).unwrap()),
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
    for name in ["lprag", "qcg", "g2", "lesegr", "gfm"] {
        let dir = root().join(name);
        let expected: BTreeMap<String, Vec<usize>> =
            serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
        let r = open(name, &dir.join("index"));
        assert_eq!(top_ids(&*r).await, expected, "{name}");
        seen += 1;
    }
    assert_eq!(seen, 5);
}

#[tokio::test]
#[ignore = "rewrites the committed fixtures"]
async fn regenerate_fixtures() {
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
    let _ = std::fs::remove_dir_all(root());
    let save = |name: &str, f: &dyn Fn(&Path)| {
        let dir = root().join(name).join("index");
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        f(&dir);
    };
    save("lprag", &|d| lprag.save(d).unwrap());
    save("qcg", &|d| qcg.save(d).unwrap());
    save("g2", &|d| g2.save(d).unwrap());
    save("lesegr", &|d| lesegr.save(d).unwrap());
    save("gfm", &|d| gfm.save(d).unwrap());
    for name in ["lprag", "qcg", "g2", "lesegr", "gfm"] {
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
