//! The baselines (`DenseRetriever`, `Bm25Retriever`, `HybridRetriever`) as library
//! retrievers: built, filtered inside their scans, updated (equal to a fresh build on the
//! final documents), cloned independently, saved and reopened, kept out of foreign
//! directories, and brought in line by `lprag::sync`.

use std::path::Path;

use lprag::{
    baselines::passage_chunks, Bm25Config, Bm25Retriever, DenseConfig, DenseRetriever, Document,
    Error, Filter, HybridRetriever, Live, Retriever, RrfConfig, Selection, Updatable, UpdateInputs,
    UpdateReport,
};

use crate::common;

const QUERIES: [&str; 4] = [
    "Which river flows through Warsaw?",
    "highest mountain above sea level",
    "imperial capital of Japan",
    "Who invented dynamite?",
];

/// What the tests need of each baseline beyond [`Updatable`]: its builder (with the
/// hashing encoder where it takes one), its inherent updates and its reopening.
trait Baseline: Updatable + std::fmt::Debug {
    async fn make(docs: &[Document]) -> Self;
    fn reopen(dir: &Path) -> lprag::Result<Self>;
    async fn add(&mut self, docs: &[Document]) -> lprag::Result<UpdateReport>;
    async fn replace(&mut self, docs: &[Document]) -> lprag::Result<UpdateReport>;
    async fn remove(&mut self, ids: &[String]) -> lprag::Result<UpdateReport>;
    fn save_to(&self, dir: &Path) -> lprag::Result<()>;
}

macro_rules! baseline {
    ($ty:ty, |$docs:ident| $make:expr, |$dir:ident| $reopen:expr) => {
        impl Baseline for $ty {
            async fn make($docs: &[Document]) -> Self {
                $make.await.unwrap()
            }
            fn reopen($dir: &Path) -> lprag::Result<Self> {
                $reopen
            }
            async fn add(&mut self, docs: &[Document]) -> lprag::Result<UpdateReport> {
                self.add_documents(docs).await
            }
            async fn replace(&mut self, docs: &[Document]) -> lprag::Result<UpdateReport> {
                self.update_documents(docs).await
            }
            async fn remove(&mut self, ids: &[String]) -> lprag::Result<UpdateReport> {
                self.remove_documents(ids).await
            }
            fn save_to(&self, dir: &Path) -> lprag::Result<()> {
                self.save(dir)
            }
        }
    };
}

baseline!(
    DenseRetriever,
    |docs| DenseRetriever::builder()
        .encoder(common::hashing())
        .build(docs),
    |dir| DenseRetriever::load(dir, common::hashing())
);
baseline!(
    Bm25Retriever,
    |docs| Bm25Retriever::builder().build(docs),
    |dir| Bm25Retriever::open(dir)
);
baseline!(
    HybridRetriever,
    |docs| HybridRetriever::builder()
        .encoder(common::hashing())
        .build(docs),
    |dir| HybridRetriever::load(dir, common::hashing())
);

/// Every hit for `query` as (document id, chunk text, score), best first.
async fn ranking<R: Retriever>(r: &R, query: &str) -> Vec<(String, String, f32)> {
    r.retrieve(query, Selection::TopK(100))
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.chunk.provenance.document_id, h.chunk.text, h.score))
        .collect()
}

/// `a` and `b` answer every query with the same hits and scores.
async fn same_answers<A: Retriever, B: Retriever>(a: &A, b: &B, what: &str) {
    for q in QUERIES {
        assert_eq!(ranking(a, q).await, ranking(b, q).await, "{what}: {q}");
    }
}

fn doc<'a>(docs: &'a [Document], id: &str) -> &'a Document {
    docs.iter().find(|d| d.id == id).unwrap()
}

async fn builds_and_ranks<R: Baseline>() {
    let docs = common::corpus();
    let r = R::make(&docs).await;
    let name = r.name().to_string();
    assert_eq!(
        r.chunks().len(),
        docs.len(),
        "{name}: one chunk per passage"
    );
    for c in r.chunks() {
        let d = doc(&docs, &c.provenance.document_id);
        assert_eq!(c.document_hash(), Some(d.content_hash().as_str()), "{name}");
    }
    for (q, want) in [("the capital of Poland", "warsaw"), (QUERIES[1], "everest")] {
        let hits = r.retrieve(q, Selection::TopK(3)).await.unwrap();
        assert_eq!(hits.len(), 3, "{name}");
        assert_eq!(hits[0].chunk.provenance.document_id, want, "{name}: {q}");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{name}");
    }
    assert!(
        r.retrieve("  ", Selection::TopK(3)).await.is_err(),
        "{name}"
    );
    let long = "x".repeat(lprag::DEFAULT_MAX_QUERY_BYTES + 1);
    let e = r.retrieve(&long, Selection::TopK(3)).await.unwrap_err();
    assert!(e.to_string().contains("max_query_bytes"), "{name}: {e}");
}

#[tokio::test]
async fn each_baseline_builds_and_ranks_the_matching_document_first() {
    builds_and_ranks::<DenseRetriever>().await;
    builds_and_ranks::<Bm25Retriever>().await;
    builds_and_ranks::<HybridRetriever>().await;
}

#[tokio::test]
async fn the_query_length_bound_is_configurable() {
    let docs = common::corpus();
    let q = "Which river flows through Warsaw?";
    let dense = DenseRetriever::builder()
        .encoder(common::hashing())
        .config(DenseConfig { max_query_bytes: 8 })
        .build(&docs)
        .await
        .unwrap();
    let bm25 = Bm25Retriever::builder()
        .config(Bm25Config {
            max_query_bytes: 8,
            ..Bm25Config::default()
        })
        .build(&docs)
        .await
        .unwrap();
    let hybrid = HybridRetriever::builder()
        .encoder(common::hashing())
        .config(RrfConfig {
            max_query_bytes: 8,
            ..RrfConfig::default()
        })
        .build(&docs)
        .await
        .unwrap();
    assert!(dense.retrieve(q, Selection::TopK(1)).await.is_err());
    assert!(bm25.retrieve(q, Selection::TopK(1)).await.is_err());
    assert!(hybrid.retrieve(q, Selection::TopK(1)).await.is_err());
    assert!(dense.retrieve("Warsaw", Selection::TopK(1)).await.is_ok());
    assert!(bm25.retrieve("Warsaw", Selection::TopK(1)).await.is_ok());
    assert!(hybrid.retrieve("Warsaw", Selection::TopK(1)).await.is_ok());
}

/// The shared corpus with a `region` on every document.
fn regional() -> Vec<Document> {
    common::corpus()
        .into_iter()
        .map(|d| {
            let region = match d.id.as_str() {
                "tokyo" | "kyoto" | "everest" => "asia",
                _ => "europe",
            };
            d.with_metadata("region", region)
        })
        .collect()
}

async fn filters_inside_the_scan<R: Baseline>() {
    let docs = regional();
    let r = R::make(&docs).await;
    let name = r.name().to_string();
    let asia = Filter::eq("region", "asia");
    for q in QUERIES {
        let hits = r
            .retrieve_filtered(q, Selection::TopK(2), &asia)
            .await
            .unwrap();
        // Two admitted chunks although the best ones overall may be European.
        assert_eq!(hits.len(), 2, "{name}: {q}");
        assert!(hits.iter().all(|h| asia.matches(&h.chunk)), "{name}: {q}");
        let all = r
            .retrieve_filtered(q, Selection::TopK(10), &asia)
            .await
            .unwrap();
        assert_eq!(all.len(), 3, "{name}: every admitted chunk, none other");
        if name != "hybrid" {
            // A single ranking: the admitted chunks in the order (and with the scores) of
            // the unfiltered ranking.
            let unfiltered: Vec<_> = r
                .retrieve(q, Selection::TopK(10))
                .await
                .unwrap()
                .into_iter()
                .filter(|h| asia.matches(&h.chunk))
                .map(|h| (h.chunk.id, h.score))
                .collect();
            let filtered: Vec<_> = all.iter().map(|h| (h.chunk.id, h.score)).collect();
            assert_eq!(filtered, unfiltered, "{name}: {q}");
        }
    }
    let only = Filter::documents(["nobel"]);
    let hits = r
        .retrieve_filtered(QUERIES[0], Selection::TopK(3), &only)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{name}");
    assert_eq!(hits[0].chunk.provenance.document_id, "nobel", "{name}");
    // `All` is a plain retrieve.
    let plain = r.retrieve(QUERIES[0], Selection::TopK(3)).await.unwrap();
    let all = r
        .retrieve_filtered(QUERIES[0], Selection::TopK(3), &Filter::All)
        .await
        .unwrap();
    assert_eq!(plain, all, "{name}");
    assert!(r
        .retrieve_filtered(QUERIES[0], Selection::TopK(3), &Filter::eq("", "x"))
        .await
        .is_err());
}

#[tokio::test]
async fn filters_apply_inside_each_baselines_scan() {
    filters_inside_the_scan::<DenseRetriever>().await;
    filters_inside_the_scan::<Bm25Retriever>().await;
    filters_inside_the_scan::<HybridRetriever>().await;
}

async fn updates_equal_a_fresh_build<R: Baseline>() {
    let docs = common::corpus();
    let mut r = R::make(&docs[..4]).await;
    let name = r.name().to_string();
    let report = r.add(&docs[4..]).await.unwrap();
    assert_eq!(
        (report.added_documents, report.added_chunks),
        (2, 2),
        "{name}"
    );
    assert_eq!(report.chunks, 6, "{name}");
    same_answers(&r, &R::make(&docs).await, &format!("{name} after add")).await;
    // An added document already in the index is refused, and nothing changes.
    assert!(r.add(&docs[..1]).await.is_err(), "{name}");

    let warsaw = Document::new(
        "warsaw",
        "Warsaw",
        "Warsaw hosts the Chopin airport. The Vistula River flows through it.",
    );
    let report = r.replace(std::slice::from_ref(&warsaw)).await.unwrap();
    assert_eq!(
        (report.removed_chunks, report.added_chunks),
        (1, 1),
        "{name}"
    );
    let report = r.remove(&["nobel".to_string()]).await.unwrap();
    assert_eq!((report.removed_documents, report.chunks), (1, 5), "{name}");
    assert!(r.chunks().iter().enumerate().all(|(i, c)| c.id == i));

    // The kept documents in their order, then the replaced one.
    let fin: Vec<Document> = ["curie", "tokyo", "kyoto", "everest"]
        .iter()
        .map(|id| doc(&docs, id).clone())
        .chain([warsaw])
        .collect();
    let fresh = R::make(&fin).await;
    same_answers(&r, &fresh, &format!("{name} after replace and remove")).await;
    assert_eq!(r.document_hashes(), fresh.document_hashes(), "{name}");

    // Errors leave the index as it was.
    let before = ranking(&r, QUERIES[0]).await;
    assert!(r.remove(&["nope".to_string()]).await.is_err(), "{name}");
    let every: Vec<String> = fin.iter().map(|d| d.id.clone()).collect();
    assert!(r.remove(&every).await.is_err(), "{name}: never empty");
    assert_eq!(ranking(&r, QUERIES[0]).await, before, "{name}");

    // The trait's one-call update does the same.
    let mut t = R::make(&docs).await;
    let changed = doc(&fin, "warsaw").clone();
    let report = t
        .apply_changes(&[changed], &["nobel".to_string()], &UpdateInputs::default())
        .await
        .unwrap();
    assert_eq!(report.removed_documents, 2, "{name}: replaced + removed");
    same_answers(&t, &fresh, &format!("{name} apply_changes")).await;
}

#[tokio::test]
async fn updates_equal_a_fresh_build_on_the_final_documents() {
    updates_equal_a_fresh_build::<DenseRetriever>().await;
    updates_equal_a_fresh_build::<Bm25Retriever>().await;
    updates_equal_a_fresh_build::<HybridRetriever>().await;
}

async fn clones_are_independent<R: Baseline>() {
    let docs = common::corpus();
    let original = R::make(&docs).await;
    let name = original.name().to_string();
    let before: Vec<_> = futures::future::join_all(QUERIES.map(|q| ranking(&original, q))).await;
    let mut copy = original.clone();
    copy.remove(&["everest".to_string()]).await.unwrap();
    copy.add(&[Document::new(
        "k2",
        "K2",
        "K2 is the second highest mountain.",
    )])
    .await
    .unwrap();
    assert_ne!(ranking(&copy, QUERIES[1]).await, before[1], "{name}");
    assert_eq!(original.chunks().len(), docs.len(), "{name}");
    let after: Vec<_> = futures::future::join_all(QUERIES.map(|q| ranking(&original, q))).await;
    assert_eq!(before, after, "{name}: the original changed with its clone");
}

#[tokio::test]
async fn a_clone_updates_without_touching_the_original() {
    clones_are_independent::<DenseRetriever>().await;
    clones_are_independent::<Bm25Retriever>().await;
    clones_are_independent::<HybridRetriever>().await;
}

async fn saves_and_reopens<R: Baseline>() {
    let docs = regional();
    let mut r = R::make(&docs[..5]).await;
    let name = r.name().to_string();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("index");
    r.save_to(&dir).unwrap();
    let back = R::reopen(&dir).unwrap();
    same_answers(&r, &back, &format!("{name} reopened")).await;
    assert_eq!(
        back.chunks(),
        r.chunks(),
        "{name}: metadata and hashes kept"
    );
    // Updated, saved over the old index (the other files of the directory kept).
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    r.add(&docs[5..]).await.unwrap();
    r.save_index(&dir).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );
    let mut back = R::reopen(&dir).unwrap();
    same_answers(&r, &back, &format!("{name} updated and reopened")).await;
    // A reopened index updates like the original.
    back.remove(&["kyoto".to_string()]).await.unwrap();
    r.remove(&["kyoto".to_string()]).await.unwrap();
    same_answers(&r, &back, &format!("{name} reopened and updated")).await;
}

#[tokio::test]
async fn each_baseline_saves_and_reopens_to_the_same_answers() {
    saves_and_reopens::<DenseRetriever>().await;
    saves_and_reopens::<Bm25Retriever>().await;
    saves_and_reopens::<HybridRetriever>().await;
}

#[tokio::test]
async fn the_default_encoder_is_recorded_and_rebuilt_by_open_even_after_updates() {
    let docs = common::corpus();
    let root = tempfile::tempdir().unwrap();
    let mut dense = DenseRetriever::builder().build(&docs[..4]).await.unwrap();
    let mut hybrid = HybridRetriever::builder().build(&docs[..4]).await.unwrap();
    let spec = dense.default_encoder().cloned().expect("recorded");
    assert_eq!(hybrid.default_encoder(), Some(&spec));
    let (d, h) = (root.path().join("dense"), root.path().join("hybrid"));
    dense.save(&d).unwrap();
    hybrid.save(&h).unwrap();
    same_answers(&dense, &DenseRetriever::open(&d).unwrap(), "dense open").await;
    same_answers(&hybrid, &HybridRetriever::open(&h).unwrap(), "hybrid open").await;
    // After an update the chunks differ from those a fitted default encoder was fitted
    // on: `open` still rebuilds the encoder in use.
    dense.add_documents(&docs[4..]).await.unwrap();
    hybrid.add_documents(&docs[4..]).await.unwrap();
    dense.save(&d).unwrap();
    hybrid.save(&h).unwrap();
    let mut reopened = DenseRetriever::open(&d).unwrap();
    assert_eq!(reopened.default_encoder(), Some(&spec));
    same_answers(&dense, &reopened, "dense updated, open").await;
    same_answers(
        &hybrid,
        &HybridRetriever::open(&h).unwrap(),
        "hybrid updated, open",
    )
    .await;
    reopened.remove_documents(&["curie".into()]).await.unwrap();
    dense.remove_documents(&["curie".into()]).await.unwrap();
    same_answers(&dense, &reopened, "dense open, updated").await;

    // An index built with a given encoder opens only with `load`.
    let custom = DenseRetriever::builder()
        .encoder(common::hashing())
        .build(&docs)
        .await
        .unwrap();
    let c = root.path().join("custom");
    custom.save(&c).unwrap();
    let e = DenseRetriever::open(&c).unwrap_err();
    assert!(e.to_string().contains("DenseRetriever::load"), "{e}");
    // ... and with that encoder: another is refused.
    let other: std::sync::Arc<dyn lprag::Encoder> = std::sync::Arc::new(
        lprag::HashingEncoder::new(lprag::HashingEncoderConfig {
            dim: 64,
            ..Default::default()
        })
        .unwrap(),
    );
    assert!(DenseRetriever::load(&c, other).is_err());
}

fn assert_foreign(what: &str, result: lprag::Result<()>) {
    let e = result.expect_err(what);
    assert!(matches!(e, Error::ForeignDirectory { .. }), "{what}: {e:?}");
}

#[tokio::test]
async fn saving_into_a_foreign_directory_is_refused() {
    let docs = common::corpus();
    let dense = DenseRetriever::make(&docs).await;
    let bm25 = Bm25Retriever::make(&docs).await;
    let hybrid = HybridRetriever::make(&docs).await;
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("notes.txt"), "mine").unwrap();
    assert_foreign("dense", dense.save(&users));
    assert_foreign("bm25", bm25.save(&users));
    assert_foreign("hybrid", hybrid.save(&users));
    assert_eq!(
        std::fs::read_to_string(users.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_dir(&users).unwrap().count(),
        1,
        "nothing added"
    );
    // A file of the marker's name that is not lprag's is foreign too.
    let fake = root.path().join("fake");
    std::fs::create_dir(&fake).unwrap();
    std::fs::write(fake.join("bm25.json"), "{\"mine\": 1}").unwrap();
    assert_foreign("bm25 over a user's bm25.json", bm25.save(&fake));
    // One kind of index is not saved over another.
    let d = root.path().join("dense");
    dense.save(&d).unwrap();
    assert_foreign("bm25 over dense", bm25.save(&d));
    assert_foreign("hybrid over dense", hybrid.save(&d));
    assert!(Bm25Retriever::open(&d).is_err());
}

async fn syncs<R: Baseline>() {
    let docs = common::corpus();
    let mut r = R::make(&docs).await;
    let name = r.name().to_string();
    let inputs = UpdateInputs::default();
    let report = lprag::sync(&mut r, &docs, &inputs).await.unwrap();
    assert_eq!(report.update, None, "{name}: nothing to do");
    assert_eq!(report.plan.unchanged, docs.len(), "{name}");

    let now: Vec<Document> = docs
        .iter()
        .filter(|d| d.id != "nobel")
        .map(|d| {
            if d.id == "warsaw" {
                Document::new(
                    "warsaw",
                    "Warsaw",
                    "Warsaw is on the Vistula. Chopin was born nearby.",
                )
            } else {
                d.clone()
            }
        })
        .collect();
    let report = lprag::sync(&mut r, &now, &inputs).await.unwrap();
    assert_eq!(report.plan.changed, vec!["warsaw".to_string()], "{name}");
    assert_eq!(report.plan.removed, vec!["nobel".to_string()], "{name}");
    let update = report.update.expect("applied");
    assert_eq!(
        (update.added_documents, update.removed_documents),
        (1, 2),
        "{name}"
    );
    assert!(
        r.chunks().iter().any(|c| c.text.contains("Chopin")),
        "{name}"
    );
    assert!(
        r.chunks()
            .iter()
            .all(|c| c.provenance.document_id != "nobel"),
        "{name}"
    );
    let again = lprag::sync(&mut r, &now, &inputs).await.unwrap();
    assert_eq!(again.update, None, "{name}: in line now");
}

#[tokio::test]
async fn sync_changes_only_what_differs() {
    syncs::<DenseRetriever>().await;
    syncs::<Bm25Retriever>().await;
    syncs::<HybridRetriever>().await;
}

#[tokio::test]
async fn a_live_baseline_saves_every_update() {
    let docs = common::corpus();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("bm25");
    let live = Live::new(Bm25Retriever::make(&docs[..5]).await).saving_to(&dir);
    live.apply(&docs[5..], &[], &UpdateInputs::default())
        .await
        .unwrap();
    let served = live.snapshot();
    assert_eq!(served.chunks().len(), 6);
    same_answers(&*served, &Bm25Retriever::open(&dir).unwrap(), "live bm25").await;
}

#[tokio::test]
async fn passage_chunks_index_like_the_builders_default() {
    // The benchmark constructors (one unsplit chunk per document) give the same index as
    // the builders when no passage needs splitting.
    let docs = common::corpus();
    let enc = common::hashing();
    let a = DenseRetriever::from_chunks(passage_chunks(&docs).unwrap(), enc.clone())
        .await
        .unwrap();
    same_answers(&a, &DenseRetriever::make(&docs).await, "dense from_chunks").await;
    let b = Bm25Retriever::build(&docs, Bm25Config::default()).unwrap();
    same_answers(&b, &Bm25Retriever::make(&docs).await, "bm25 build").await;
    let h = HybridRetriever::dense_bm25(&docs, enc).await.unwrap();
    same_answers(&h, &HybridRetriever::make(&docs).await, "hybrid dense_bm25").await;
    // A hybrid of parts over other chunks is refused.
    let e = HybridRetriever::from_parts(
        a,
        Bm25Retriever::build(&docs[..3], Bm25Config::default()).unwrap(),
        RrfConfig::default(),
    );
    assert!(e.is_err());
}

#[tokio::test]
async fn a_fitted_hashing_default_encoder_reopens_exactly_after_updates() {
    // Where the sentence model is installed the builders choose it; the offline fallback
    // (a hashing encoder fitted on the chunks) is made here by hand and recorded as the
    // default in the saved file, as a build without the model records it.
    let docs = common::corpus();
    let config = lprag::HashingEncoderConfig::default();
    let texts: Vec<String> = passage_chunks(&docs[..4])
        .unwrap()
        .iter()
        .map(lprag::Chunk::embedding_text)
        .collect();
    let fitted: std::sync::Arc<dyn lprag::Encoder> =
        std::sync::Arc::new(lprag::HashingEncoder::fitted(config.clone(), &texts).unwrap());
    let built = DenseRetriever::builder()
        .encoder(fitted)
        .build(&docs[..4])
        .await
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("dense");
    built.save(&d).unwrap();
    let file = d.join("dense.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    json["default_encoder"] =
        serde_json::to_value(lprag::DefaultEncoder::FittedHashing { config }).unwrap();
    std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();

    let mut dense = DenseRetriever::open(&d).unwrap();
    same_answers(&built, &dense, "fitted default, open").await;
    // The update changes the chunks the encoder was fitted on: its table is kept.
    dense.add_documents(&docs[4..]).await.unwrap();
    dense.remove_documents(&["curie".into()]).await.unwrap();
    dense.save(&d).unwrap();
    let back = DenseRetriever::open(&d).unwrap();
    same_answers(&dense, &back, "fitted default, updated, open").await;
    assert_eq!(back.encoder().fingerprint(), dense.encoder().fingerprint());
}
