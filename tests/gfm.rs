//! GFM-RAG end to end with the offline components (co-occurrence KG, hashing encoder).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lprag::core::{Extraction, Triple, TripleExtractor};
use lprag::model::gfm::GfmModelConfig;
use lprag::{Chunk, Document, Error, GfmConfig, GfmRag, HashingEncoder, Retriever, Selection};

fn corpus() -> Vec<Document> {
    vec![
        Document::new(
            "curie",
            "Marie Curie",
            "Marie Curie was born in Warsaw in 1867. Curie won the Nobel Prize in Physics with Pierre Curie.",
        ),
        Document::new(
            "warsaw",
            "Warsaw",
            "Warsaw is the capital of Poland. Warsaw lies on the Vistula River.",
        ),
        Document::new(
            "nobel",
            "Alfred Nobel",
            "Alfred Nobel invented dynamite in Stockholm. The Nobel Prize was founded by Alfred Nobel.",
        ),
        Document::new(
            "tokyo",
            "Tokyo",
            "Tokyo is the capital of Japan. Tokyo hosted the Summer Olympics in 1964.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain. Mount Everest lies in the Himalayas of Nepal.",
        ),
    ]
}

/// A small network and short training: fast enough for a debug-build test.
fn small() -> GfmConfig {
    let mut c = GfmConfig {
        model: GfmModelConfig {
            hidden: 16,
            layers: 2,
        },
        pretrain_queries: 40,
        synthetic_queries: 5,
        ..GfmConfig::default()
    };
    c.pretrain.epochs = 3;
    c.finetune.epochs = 3;
    c
}

async fn build(config: GfmConfig) -> GfmRag {
    GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config)
        .build(&corpus())
        .await
        .unwrap()
}

#[tokio::test]
async fn builds_a_kg_trains_and_retrieves() {
    let rag = build(small()).await;
    let s = rag.stats().clone();
    assert_eq!(s.chunks, 5);
    assert!(s.entities >= 15, "{s:?}");
    // Every triple and equivalence has an inverse edge.
    assert_eq!(s.edges, 2 * (s.triples + s.equivalent_pairs));
    assert_eq!(s.relations, rag.relations().len());
    assert!(rag.relations().contains(&"co-occurs with".to_string()));
    assert!(rag.relations().contains(&"inverse of mentions".to_string()));
    assert!(s.pretrain_queries > 0 && s.pretrain.is_some());
    assert_eq!(s.finetune_source, "synthetic");
    // Each entity's mentions point at chunks that contain its name.
    let warsaw = rag.entities().iter().position(|e| e == "Warsaw").unwrap();
    assert_eq!(rag.mentions()[warsaw], vec![0, 1]);

    // Query entities come from the question's spans, linked by name.
    let x = rag
        .explain("Which river flows through Warsaw?")
        .await
        .unwrap();
    assert_eq!(x.query_entities, vec!["Warsaw"]);
    assert!(!x.fallback);
    assert_eq!(x.top_entities.len(), 20.min(s.entities));
    // Chunk scores are eq. 16 sums of 1/df over the top entities: positive, sorted.
    assert!(x.chunks.windows(2).all(|w| w[0].1 >= w[1].1));
    assert!(x.chunks.iter().all(|&(_, v)| v > 0.0));

    // No span links: the nearest entity names stand in (the fallback).
    let y = rag.explain("which river flows there?").await.unwrap();
    assert!(y.fallback);
    assert_eq!(y.query_entities.len(), 5);

    let hits = rag
        .retrieve("Which river flows through Warsaw?", Selection::TopK(5))
        .await
        .unwrap();
    assert_eq!(hits.len(), 5, "padded with dense search");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let ids: Vec<&str> = hits
        .iter()
        .map(|h| h.chunk.provenance.document_id.as_str())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 5, "no chunk twice: {ids:?}");
}

#[tokio::test]
async fn training_is_checkpointed_and_finished_stages_are_not_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let run = |counts: Arc<crate::common::StepCounts>| {
        GfmRag::builder()
            .encoder(Arc::new(HashingEncoder::default()))
            .config(small())
            .checkpoints(dir.path())
            .progress(counts)
    };
    let docs = corpus();
    let first = Arc::new(crate::common::StepCounts::default());
    let rag = run(first.clone()).build(&docs).await.unwrap();
    let (pre, fine) = (
        rag.stats().pretrain.clone().unwrap(),
        rag.stats().finetune.clone().unwrap(),
    );
    assert_eq!(first.get("pretrain gfm"), pre.steps);
    assert_eq!(first.get("finetune gfm"), fine.steps);
    assert!(pre.steps > 0 && fine.steps > 0);
    for stage in ["pretrain", "finetune"] {
        assert!(dir.path().join(stage).join("train-state.json").is_file());
    }

    // Again: both stages are found finished, no step runs, the model is the same.
    let second = Arc::new(crate::common::StepCounts::default());
    let again = run(second.clone()).build(&docs).await.unwrap();
    assert_eq!(second.get("pretrain gfm") + second.get("finetune gfm"), 0);
    for (replayed, first) in [
        (again.stats().pretrain.clone(), &pre),
        (again.stats().finetune.clone(), &fine),
    ] {
        let mut replayed = replayed.unwrap();
        replayed.seconds = first.seconds;
        assert_eq!(&replayed, first);
    }
    let q = "Where was Marie Curie born?";
    assert_eq!(scored(&rag, q).await, scored(&again, q).await);
}

#[tokio::test]
async fn save_load_round_trip_and_typed_errors() {
    let rag = build(small()).await;
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let enc = Arc::new(HashingEncoder::default());
    let back = GfmRag::load(dir.path(), enc).unwrap();
    for q in ["Who founded the Nobel Prize?", "Where is Mount Everest?"] {
        let a = rag.retrieve(q, Selection::TopK(3)).await.unwrap();
        let b = back.retrieve(q, Selection::TopK(3)).await.unwrap();
        assert_eq!(a, b);
    }
    assert_eq!(back.stats(), rag.stats());

    // Another encoder: refused by name.
    let other = Arc::new(
        HashingEncoder::new(lprag::HashingEncoderConfig {
            dim: 64,
            ..Default::default()
        })
        .unwrap(),
    );
    assert!(GfmRag::load(dir.path(), other).is_err());
    // The JSON names its weights; a second save replaces the pair and leaves one.
    let weights = |d: &std::path::Path| -> Vec<String> {
        let mut w: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".bpk"))
            .collect();
        w.sort();
        w
    };
    let first = weights(dir.path());
    assert_eq!(first.len(), 1, "{first:?}");
    let json = std::fs::read_to_string(dir.path().join("gfm.json")).unwrap();
    assert!(json.contains(&first[0]), "gfm.json names its weights");
    // A user's own weights file beside the index is never touched.
    std::fs::write(dir.path().join("gfm-pretrained.bpk"), b"mine").unwrap();
    rag.save(dir.path()).unwrap();
    let second = weights(dir.path());
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(second.contains(&"gfm-pretrained.bpk".to_string()));
    assert!(!second.contains(&first[0]), "the old weights are gone");
    let again = GfmRag::load(dir.path(), Arc::new(HashingEncoder::default())).unwrap();
    assert_eq!(
        again
            .retrieve("Where is Mount Everest?", Selection::TopK(3))
            .await
            .unwrap(),
        rag.retrieve("Where is Mount Everest?", Selection::TopK(3))
            .await
            .unwrap()
    );
    // Missing weights: an I/O error naming the file.
    let current = second.iter().find(|n| *n != "gfm-pretrained.bpk").unwrap();
    std::fs::remove_file(dir.path().join(current)).unwrap();
    let err = GfmRag::load(dir.path(), Arc::new(HashingEncoder::default()))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(current.as_str()), "{err}");
    // A weights name that leaves the index directory is a format error.
    let tampered = json.replacen(&first[0], "../elsewhere.bpk", 1);
    std::fs::write(dir.path().join("gfm.json"), tampered).unwrap();
    let err = GfmRag::load(dir.path(), Arc::new(HashingEncoder::default()))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not a weights file name"), "{err}");

    // Bad input.
    assert!(matches!(
        rag.retrieve("  ", Selection::TopK(3)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(rag.retrieve("Warsaw", Selection::TopK(0)).await.is_err());
    let bad = GfmConfig {
        link_threshold: 2.0,
        ..small()
    };
    let err = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(bad)
        .build(&corpus())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("link_threshold"), "{err}");
    let err = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(small())
        .labelled(vec![("Who?".into(), vec!["missing".into()])])
        .build(&corpus())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("labelled[0]") && err.contains("missing"),
        "{err}"
    );
}

/// A user extractor: one hand-written triple per chunk, counting calls.
struct Manual(AtomicUsize);

#[async_trait]
impl TripleExtractor for Manual {
    fn name(&self) -> &str {
        "manual"
    }
    async fn extract(&self, chunks: &[Chunk]) -> lprag::Result<Vec<Extraction>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(chunks
            .iter()
            .map(|c| Extraction {
                entities: vec![c.provenance.title.clone()],
                triples: vec![Triple::new(
                    c.provenance.title.clone(),
                    "described in",
                    format!("passage {}", c.provenance.document_id),
                )],
            })
            .collect())
    }
}

#[tokio::test]
async fn custom_extractor_and_labelled_fine_tuning() {
    let x = Arc::new(Manual(AtomicUsize::new(0)));
    let rag = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .extractor(x.clone())
        .labelled(vec![
            ("Where was Marie Curie born?".into(), vec!["curie".into()]),
            ("What is the capital of Japan?".into(), vec!["tokyo".into()]),
        ])
        .config({
            // One top entity decides the ranking; train long enough on this tiny KG that
            // the query entity's own passage wins.
            let mut c = small();
            c.top_entities = 1;
            c.pretrain.epochs = 30;
            c.pretrain.learning_rate = 1e-2;
            c.finetune.learning_rate = 1e-2;
            c
        })
        .build(&corpus())
        .await
        .unwrap();
    assert_eq!(x.0.load(Ordering::SeqCst), 1);
    let s = rag.stats();
    // 5 titles + 5 passage entities, 5 triples, and the inverse relation.
    assert_eq!((s.entities, s.triples), (10, 5));
    let expected: &[&str] = if s.equivalent_pairs > 0 {
        &[
            "described in",
            "equivalent",
            "inverse of described in",
            "inverse of equivalent",
        ]
    } else {
        &["described in", "inverse of described in"]
    };
    assert_eq!(rag.relations(), expected);
    assert_eq!(s.finetune_source, "labelled");
    assert_eq!(s.finetune_queries, 2);
    // "Tokyo" links by name; the chunk that mentions it comes first.
    let hits = rag
        .retrieve("What did Tokyo host?", Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "tokyo");
}

#[tokio::test]
async fn empty_inputs_are_typed_errors() {
    let err = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(small())
        .build(&[])
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");
    // A corpus without any entity (all lower case): nothing to build a KG from.
    let err = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(small())
        .build(&[Document::new("a", "", "nothing but lower case words here.")])
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::EmptyCorpus(_)), "{err}");
}

/// What an index's retrieval reads besides the weights: chunks (id, document), entities,
/// mentions, relations and the edges.
type Snapshot = (
    Vec<(usize, String)>,
    Vec<String>,
    Vec<Vec<u32>>,
    Vec<String>,
    Vec<(u32, u32, u32)>,
);

fn snapshot(rag: &GfmRag) -> Snapshot {
    (
        rag.chunks()
            .iter()
            .map(|c| (c.id, c.provenance.document_id.clone()))
            .collect(),
        rag.entities().to_vec(),
        rag.mentions().to_vec(),
        rag.relations().to_vec(),
        (0..rag.edges().len())
            .map(|i| rag.edges().edge(i))
            .collect(),
    )
}

async fn build_on(config: GfmConfig, docs: &[Document]) -> GfmRag {
    GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(config)
        .build(docs)
        .await
        .unwrap()
}

/// Save `rag` into `dir` and return its weights file.
fn saved_weights(rag: &GfmRag, dir: &std::path::Path) -> std::path::PathBuf {
    rag.save(dir).unwrap();
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "bpk"))
        .unwrap()
}

/// No training: the weights stay as they start.
fn untrained() -> GfmConfig {
    GfmConfig {
        pretrain_queries: 0,
        synthetic_queries: 0,
        ..small()
    }
}

const GFM_QUESTIONS: [&str; 3] = [
    "Who founded the Nobel Prize?",
    "Which city hosted the Summer Olympics in 1964?",
    "Where does the Vistula flow?",
];

async fn scored(rag: &GfmRag, q: &str) -> Vec<(usize, f32)> {
    crate::common::ranked(rag, q, 3).await
}

#[tokio::test]
async fn documents_added_later_give_the_knowledge_graph_a_full_build_gives() {
    let docs = corpus();
    let mut rag = build_on(untrained(), &docs[..2]).await;
    // The full build starts from the same weights (seeded initial weights are not enough:
    // burn's random state is shared by every test running in the process).
    let dir = tempfile::tempdir().unwrap();
    let full = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(untrained())
        .weights(saved_weights(&rag, dir.path()))
        .build(&docs)
        .await
        .unwrap();
    let report = rag.add_documents(&docs[2..]).await.unwrap();
    assert_eq!((report.added_documents, report.added_chunks), (3, 3));
    let stages: Vec<&str> = report.seconds.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(stages, ["chunk", "embed", "extract", "graph", "model"]);
    assert_eq!(snapshot(&rag), snapshot(&full));
    let (a, b) = (rag.stats(), full.stats());
    assert_eq!(
        (
            a.entities,
            a.relations,
            a.triples,
            a.equivalent_pairs,
            a.edges
        ),
        (
            b.entities,
            b.relations,
            b.triples,
            b.equivalent_pairs,
            b.edges
        )
    );
    // Same weights, same graph: the same scores.
    for q in GFM_QUESTIONS {
        assert_eq!(scored(&rag, q).await, scored(&full, q).await, "{q}");
    }

    // Removing the added documents gives the small build back (entities only they
    // mentioned go), and a replacement takes the new text's entities.
    let added: Vec<String> = docs[2..].iter().map(|d| d.id.clone()).collect();
    rag.remove_documents(&added).await.unwrap();
    assert_eq!(
        snapshot(&rag),
        snapshot(&build_on(untrained(), &docs[..2]).await)
    );
    assert!(!rag.entities().iter().any(|e| e.contains("Tokyo")));
    let mut warsaw = docs[1].clone();
    warsaw.text = "Warsaw is the capital of Poland. Warsaw hosted Frederic Chopin.".into();
    let report = rag.update_documents(&[warsaw]).await.unwrap();
    assert_eq!((report.removed_documents, report.added_documents), (1, 1));
    assert!(rag.entities().iter().any(|e| e.contains("Chopin")));
    assert!(!rag.entities().iter().any(|e| e.contains("Vistula")));

    // Typed errors, nothing changed.
    let before = snapshot(&rag);
    let e = rag.add_documents(&docs[..1]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    let e = rag.remove_documents(&["nope".into()]).await.unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    assert_eq!(snapshot(&rag), before);
}

#[tokio::test]
async fn a_trained_index_takes_updates_with_its_weights_and_saves_them() {
    let docs = corpus();
    let mut rag = build_on(small(), &docs[..3]).await;
    let trained = rag.stats().clone();
    let first = tempfile::tempdir().unwrap();
    let weights = saved_weights(&rag, first.path());
    rag.add_documents(&docs[3..]).await.unwrap();
    assert_eq!(rag.stats().pretrain, trained.pretrain, "no retraining");
    assert_eq!(rag.stats().chunks, 5);
    // The same weights on a build over all documents (training off) score exactly as
    // the updated index: the network was rebound to the grown graph, not changed.
    let reference = GfmRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(untrained())
        .weights(&weights)
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(snapshot(&rag), snapshot(&reference));
    for q in GFM_QUESTIONS {
        assert_eq!(scored(&rag, q).await, scored(&reference, q).await, "{q}");
    }

    // Saved and reopened, the updated index answers the same and updates again.
    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path()).unwrap();
    let mut back = GfmRag::load(dir.path(), Arc::new(HashingEncoder::default())).unwrap();
    for q in GFM_QUESTIONS {
        assert_eq!(scored(&back, q).await, scored(&rag, q).await, "{q}");
    }
    back.remove_documents(&["tokyo".into()]).await.unwrap();
    assert_eq!(back.chunks().len(), 4);

    // An index saved without its extractions (an older lprag) refuses, and says why.
    let path = dir.path().join("gfm.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("extractions");
    std::fs::write(&path, json.to_string()).unwrap();
    let mut legacy = GfmRag::load(dir.path(), Arc::new(HashingEncoder::default())).unwrap();
    let e = legacy
        .remove_documents(&["tokyo".into()])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("extractions"), "{e}");
}
