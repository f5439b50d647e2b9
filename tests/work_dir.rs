//! `LpRagBuilder::work_dir`: finished stages are kept on disk and a later build reuses
//! them, so an interrupted build resumes after its last finished stage.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lprag::core::{Chunk, ChunkId, Embeddings, Encoder, QueryGenerator, SyntheticQuery};
use lprag::{
    Document, Error, HashingEncoder, HeuristicQueryGenerator, LpRag, LpRagConfig, TrainConfig,
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
            "Tokyo is the capital of Japan. Tokyo hosted the Summer Olympics in 1964.",
        ),
        Document::new(
            "kyoto",
            "Kyoto",
            "Kyoto was the imperial capital of Japan for over a thousand years.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level.",
        ),
    ]
}

/// Counts the texts it embeds.
struct CountingEncoder {
    inner: HashingEncoder,
    texts: AtomicUsize,
}

impl CountingEncoder {
    /// The hashing encoder, nothing counted yet.
    fn shared() -> Arc<Self> {
        Arc::new(Self {
            inner: HashingEncoder::default(),
            texts: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Encoder for CountingEncoder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> lprag::Result<Embeddings> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).await
    }
}

/// Counts its calls; fails while `fail` is set (an interrupted stage).
struct CountingGenerator {
    calls: AtomicUsize,
    fail: AtomicBool,
}

impl CountingGenerator {
    /// No call counted yet; failing from the start when `fail`.
    fn shared(fail: bool) -> Arc<Self> {
        Arc::new(Self {
            calls: AtomicUsize::new(0),
            fail: AtomicBool::new(fail),
        })
    }
}

#[async_trait]
impl QueryGenerator for CountingGenerator {
    fn name(&self) -> &str {
        "counting-heuristic"
    }
    async fn generate(
        &self,
        chunks: &[Chunk],
        batches: &[Vec<ChunkId>],
    ) -> lprag::Result<Vec<SyntheticQuery>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::invalid("CountingGenerator", "interrupted"));
        }
        HeuristicQueryGenerator::default()
            .generate(chunks, batches)
            .await
    }
}

fn config(epochs: usize) -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs,
            ..TrainConfig::default()
        },
        ..LpRagConfig::default()
    }
}

/// [`config`] with two epochs and k = 2 (another graph than `config`'s).
fn config_k2() -> LpRagConfig {
    let mut c = config(2);
    c.knn_k = 2;
    c
}

async fn build(
    dir: &std::path::Path,
    enc: &Arc<CountingEncoder>,
    generator: &Arc<CountingGenerator>,
    config: LpRagConfig,
) -> lprag::Result<LpRag> {
    LpRag::builder()
        .encoder(enc.clone())
        .query_generator(generator.clone())
        .config(config)
        .work_dir(dir)
        .build(&corpus())
        .await
}

#[tokio::test]
async fn an_interrupted_build_resumes_and_later_stages_are_recomputed_when_their_inputs_change() {
    let dir = tempfile::tempdir().unwrap();
    let enc = CountingEncoder::shared();
    let generator = CountingGenerator::shared(true);

    // Interrupted in the query stage: chunks, embeddings and graph are kept.
    let err = build(dir.path(), &enc, &generator, config(3))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert_eq!(enc.texts.load(Ordering::SeqCst), 6);
    for f in ["chunks.json", "chunk-embeddings.bin", "chunk-graph.json"] {
        assert!(dir.path().join(f).is_file(), "{f} kept");
    }

    // Resumed: the first three stages are loaded, not recomputed.
    generator.fail.store(false, Ordering::SeqCst);
    let first = build(dir.path(), &enc, &generator, config(3))
        .await
        .unwrap();
    assert_eq!(first.stats().reused_stages, ["chunk", "embed", "graph"]);
    let n_queries = first.synthetic_queries().len();
    assert!(n_queries > 0);
    // Only the synthetic queries were embedded this time.
    assert_eq!(enc.texts.load(Ordering::SeqCst), 6 + n_queries);
    assert_eq!(generator.calls.load(Ordering::SeqCst), 2);

    // Another training configuration reuses every stage before training.
    let second = build(dir.path(), &enc, &generator, config(2))
        .await
        .unwrap();
    assert_eq!(
        second.stats().reused_stages,
        ["chunk", "embed", "graph", "queries", "query-embed"]
    );
    assert_eq!(generator.calls.load(Ordering::SeqCst), 2);
    assert_eq!(enc.texts.load(Ordering::SeqCst), 6 + n_queries);
    assert_eq!(second.synthetic_queries(), first.synthetic_queries());
    assert_eq!(second.graph().edges, first.graph().edges);
    assert_eq!(
        second.graph().features.as_slice(),
        first.graph().features.as_slice()
    );
    assert_eq!(second.stats().train.epochs_run, 2);

    // The k-NN lists behind the loaded graph were kept beside it: the resumed index saves
    // them (updates extend them instead of computing them again), the lists of an index
    // built in one go.
    let saves = tempfile::tempdir().unwrap();
    let saved = |rag: &LpRag, name: &str| {
        let path = saves.path().join(name);
        rag.save(&path).unwrap();
        std::fs::read(path.join("knn.bin")).ok()
    };
    let once = {
        let other = tempfile::tempdir().unwrap();
        let generator = CountingGenerator::shared(false);
        let rag = build(other.path(), &enc, &generator, config(2))
            .await
            .unwrap();
        assert!(rag.stats().reused_stages.is_empty());
        saved(&rag, "once").expect("a build in one go saves its k-NN lists")
    };
    assert_eq!(saved(&first, "first").as_ref(), Some(&once));
    assert_eq!(saved(&second, "second").as_ref(), Some(&once));
    // Unreadable lists are dropped with a warning, never trusted.
    let kept = dir.path().join("chunk-knn.bin");
    let mut bytes = std::fs::read(&kept).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&kept, bytes).unwrap();
    let damaged = build(dir.path(), &enc, &generator, config(2))
        .await
        .unwrap();
    warned(&damaged, "chunk-knn.bin", "k-NN lists");
    assert_eq!(saved(&damaged, "damaged"), None);

    // A different k changes the graph, hence the queries; the embeddings stay.
    let third = build(dir.path(), &enc, &generator, config_k2())
        .await
        .unwrap();
    assert_eq!(third.stats().reused_stages, ["chunk", "embed"]);
    assert_eq!(generator.calls.load(Ordering::SeqCst), 3);

    // A damaged file is recomputed with a warning, never trusted.
    std::fs::write(dir.path().join("queries.json"), b"[{\"text\": ").unwrap();
    let fourth = build(dir.path(), &enc, &generator, config_k2())
        .await
        .unwrap();
    assert_eq!(
        fourth.stats().reused_stages,
        ["chunk", "embed", "graph", "query-embed"]
    );
    assert_eq!(generator.calls.load(Ordering::SeqCst), 4);
    warned(&fourth, "queries.json", "recomputing");
    assert_eq!(fourth.synthetic_queries(), third.synthetic_queries());

    // A damaged embedding file likewise: it is read straight into the graph's feature
    // buffer, which must come out as if it had never been read.
    let bin = dir.path().join("query-embeddings.bin");
    let mut bytes = std::fs::read(&bin).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&bin, bytes).unwrap();
    let embedded = enc.texts.load(Ordering::SeqCst);
    let repaired = build(dir.path(), &enc, &generator, config_k2())
        .await
        .unwrap();
    assert_eq!(
        repaired.stats().reused_stages,
        ["chunk", "embed", "graph", "queries"]
    );
    warned(&repaired, "query-embeddings.bin", "recomputing");
    assert_eq!(
        enc.texts.load(Ordering::SeqCst),
        embedded + repaired.synthetic_queries().len()
    );
    assert_eq!(
        repaired.graph().features.as_slice(),
        fourth.graph().features.as_slice()
    );

    // Changed documents invalidate everything.
    let mut docs = corpus();
    docs[0].text.push_str(" She died in 1934.");
    let fifth = LpRag::builder()
        .encoder(enc.clone())
        .query_generator(generator.clone())
        .config(config(2))
        .work_dir(dir.path())
        .build(&docs)
        .await
        .unwrap();
    assert!(fifth.stats().reused_stages.is_empty());
}

/// Assert that `rag`'s build warned about `file`, saying `what`.
fn warned(rag: &LpRag, file: &str, what: &str) {
    let warnings = &rag.stats().warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(file) && w.contains(what)),
        "{warnings:?}"
    );
}

/// The top three chunks (id, score) of each question.
async fn answers(index: &LpRag) -> Vec<Vec<(usize, f32)>> {
    use lprag::Retriever;
    let mut out = Vec::new();
    for q in [
        "Where was Marie Curie born?",
        "What is the capital of Japan?",
        "Who invented dynamite?",
    ] {
        let hits = index.retrieve(q, lprag::Selection::TopK(3)).await.unwrap();
        out.push(hits.iter().map(|h| (h.chunk.id, h.score)).collect());
    }
    out
}

#[tokio::test]
async fn features_on_disk_are_mapped_from_the_work_directory_and_answer_as_on_the_heap() {
    let (heap_dir, disk_dir, saved) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let enc = CountingEncoder::shared();
    let generator = CountingGenerator::shared(false);
    // Candidates from the column-wise copy, whatever the corpus' size.
    let scan_columns = || LpRagConfig {
        column_scan_from: Some(1),
        ..config(2)
    };
    let on_disk = |dir: &std::path::Path| {
        LpRag::builder()
            .encoder(enc.clone())
            .query_generator(generator.clone())
            .config(scan_columns())
            .work_dir(dir)
            .features_on_disk(true)
    };

    let heap = build(heap_dir.path(), &enc, &generator, scan_columns())
        .await
        .unwrap();
    let embedded = enc.texts.load(Ordering::SeqCst);
    let disk = on_disk(disk_dir.path()).build(&corpus()).await.unwrap();
    assert_eq!(enc.texts.load(Ordering::SeqCst), 2 * embedded);
    assert!(disk.graph().features.is_stored());
    assert!(!heap.graph().features.is_stored());
    assert!(disk_dir.path().join("features.bin").is_file());
    // The chunk rows were streamed to their stage file; the column copy is mapped too.
    assert!(disk_dir.path().join("chunk-embeddings.bin").is_file());
    assert!(disk.scans_columns() && heap.scans_columns());
    assert!(disk.columns_mapped() && !heap.columns_mapped());
    assert!(disk_dir.path().join("columns.bin").is_file());
    // So are the predictor's cached representations, the same as on the heap.
    assert!(disk.representations_mapped() && !heap.representations_mapped());
    assert!(disk_dir.path().join("representations.bin").is_file());
    let n = heap.chunks().len();
    let reps = |rag: &LpRag| rag.predictor().stored_representations(0..n).unwrap();
    let (on_file, held) = (reps(&disk), reps(&heap));
    assert_eq!(on_file.dim(), held.dim());
    let diff = on_file
        .as_slice()
        .iter()
        .zip(held.as_slice())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff <= 1e-6, "representations differ by {diff}");
    // The same rows in the same order, the same graph, the same answers.
    assert_eq!(
        disk.graph().features.as_slice(),
        heap.graph().features.as_slice()
    );
    assert_eq!(disk.graph().edges, heap.graph().edges);
    let expected = answers(&heap).await;
    assert_eq!(answers(&disk).await, expected);

    // Resumed: the saved question rows are mapped and copied, nothing is embedded again,
    // and the features file is rewritten beside the mapping the first index still reads.
    let before = enc.texts.load(Ordering::SeqCst);
    let again = on_disk(disk_dir.path()).build(&corpus()).await.unwrap();
    for stage in ["embed", "query-embed"] {
        assert!(again.stats().reused_stages.contains(&stage.to_string()));
    }
    assert_eq!(enc.texts.load(Ordering::SeqCst), before);
    assert!(again.graph().features.is_stored());
    assert!(again.columns_mapped() && again.representations_mapped());
    assert_eq!(answers(&again).await, expected);
    assert_eq!(answers(&disk).await, expected);
    // A build without the option resumes from the streamed stage files (the same format),
    // on the heap.
    let before = enc.texts.load(Ordering::SeqCst);
    let on_heap = build(disk_dir.path(), &enc, &generator, scan_columns())
        .await
        .unwrap();
    for stage in ["embed", "query-embed"] {
        assert!(on_heap.stats().reused_stages.contains(&stage.to_string()));
    }
    assert_eq!(enc.texts.load(Ordering::SeqCst), before);
    assert!(!on_heap.graph().features.is_stored() && !on_heap.columns_mapped());
    assert!(!on_heap.representations_mapped());
    assert_eq!(answers(&on_heap).await, expected);
    drop(on_heap);
    // Nothing but the build's own files is left in the work directory.
    for e in std::fs::read_dir(disk_dir.path()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(".tmp"), "{name} left behind");
    }

    // Saved and reopened, the index answers as built.
    let path = saved.path().join("index");
    disk.save(&path).unwrap();
    drop((disk, again));
    let reopened = LpRag::load(&path, enc.clone()).unwrap();
    assert_eq!(answers(&reopened).await, expected);

    // Without a work directory the option is refused before anything is paid for.
    let (calls, before) = (
        generator.calls.load(Ordering::SeqCst),
        enc.texts.load(Ordering::SeqCst),
    );
    let err = LpRag::builder()
        .encoder(enc.clone())
        .query_generator(generator.clone())
        .features_on_disk(true)
        .build(&corpus())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("work directory"), "{err}");
    assert_eq!(generator.calls.load(Ordering::SeqCst), calls);
    assert_eq!(enc.texts.load(Ordering::SeqCst), before);
}
