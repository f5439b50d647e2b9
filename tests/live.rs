//! `Live` (queries answered from a snapshot while an update runs aside) and `sync`
//! (content hashes: only what changed is chunked and embedded).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lprag::{
    sync, sync_from, DenseRetriever, Document, Embeddings, Encoder, Filter, GfmRag, HashingEncoder,
    HashingEncoderConfig, LesegrConfig, LesegrRag, LesegrVariant, Live, LpRag, QcgRag, Retriever,
    Selection, Updatable, UpdateInputs, DOCUMENT_HASH_KEY,
};

use crate::common::{corpus, lprag_config, small_gfm_config, Blocks};

/// Counts the texts it embeds.
struct Counting {
    inner: HashingEncoder,
    texts: AtomicUsize,
}

impl Counting {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: HashingEncoder::new(HashingEncoderConfig::default()).unwrap(),
            texts: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Encoder for Counting {
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

fn changed_corpus() -> Vec<Document> {
    let mut docs = corpus();
    docs.retain(|d| d.id != "nobel");
    let warsaw = docs.iter_mut().find(|d| d.id == "warsaw").unwrap();
    warsaw.text = "Warsaw has an Old Town rebuilt after the war.".into();
    docs.push(Document::new(
        "krakow",
        "Kraków",
        "Kraków was the royal capital of Poland for centuries.",
    ));
    docs
}

/// `sync` on an unchanged corpus embeds nothing and changes nothing; on a changed one it
/// embeds only the new and changed documents, and the index then holds exactly the
/// current documents.
async fn check_sync<R: Updatable>(mut index: R, enc: &Counting, name: &str) {
    let before = index.chunks().to_vec();
    assert!(
        before
            .iter()
            .all(|c| c.metadata.contains_key(DOCUMENT_HASH_KEY)),
        "{name}: chunks without a document hash"
    );
    let n = enc.texts.load(Ordering::SeqCst);
    let report = sync(&mut index, &corpus(), &UpdateInputs::default())
        .await
        .unwrap();
    assert!(report.update.is_none(), "{name}: {report:?}");
    assert_eq!(report.plan.unchanged, corpus().len());
    assert_eq!(
        enc.texts.load(Ordering::SeqCst),
        n,
        "{name}: embedded an unchanged corpus"
    );
    assert_eq!(index.chunks(), &before[..]);

    let report = sync(&mut index, &changed_corpus(), &UpdateInputs::default())
        .await
        .unwrap();
    assert_eq!(report.plan.added, ["krakow"], "{name}");
    assert_eq!(report.plan.changed, ["warsaw"], "{name}");
    assert_eq!(report.plan.removed, ["nobel"], "{name}");
    let embedded = enc.texts.load(Ordering::SeqCst) - n;
    // The two documents' chunks (one each), plus any questions written for them: a third
    // of the corpus, where the build embedded all of it.
    assert!(
        embedded >= 2 && embedded * 2 <= n,
        "{name}: embedded {embedded} texts, the build {n}"
    );
    let mut ids: Vec<String> = index.document_hashes().into_keys().collect();
    ids.sort();
    let mut want: Vec<String> = changed_corpus().into_iter().map(|d| d.id).collect();
    want.sort();
    assert_eq!(ids, want, "{name}");
    // The new versions are what is indexed.
    let text_of = |id: &str| {
        index
            .chunks()
            .iter()
            .filter(|c| c.provenance.document_id == id)
            .map(|c| c.text.clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(text_of("krakow").contains("royal capital"), "{name}");
    assert!(text_of("warsaw").contains("Old Town"), "{name}");
    assert!(!text_of("warsaw").contains("Vistula"), "{name}");
    let again = sync(&mut index, &changed_corpus(), &UpdateInputs::default())
        .await
        .unwrap();
    assert!(
        again.update.is_none(),
        "{name}: a second sync changed something"
    );
}

#[tokio::test]
async fn sync_changes_only_what_changed_for_every_retriever_that_updates() {
    let enc = Counting::new();
    let lprag = LpRag::builder()
        .encoder(enc.clone())
        .config(lprag_config(2))
        .build(&corpus())
        .await
        .unwrap();
    check_sync(lprag, &enc, "lprag").await;
    let enc = Counting::new();
    let qcg = QcgRag::builder()
        .encoder(enc.clone())
        .build(&corpus())
        .await
        .unwrap();
    check_sync(qcg, &enc, "qcg").await;
    let enc = Counting::new();
    let lesegr = LesegrRag::builder()
        .encoder(enc.clone())
        .config(LesegrConfig {
            variant: LesegrVariant::Lite,
            ..LesegrConfig::default()
        })
        .build(&corpus())
        .await
        .unwrap();
    check_sync(lesegr, &enc, "lesegr").await;
    let enc = Counting::new();
    let gfm = GfmRag::builder()
        .encoder(enc.clone())
        .config(small_gfm_config())
        .build(&corpus())
        .await
        .unwrap();
    check_sync(gfm, &enc, "gfm").await;
}

#[tokio::test]
async fn an_update_of_a_clone_leaves_the_original_answering_as_before() {
    let rag = LpRag::builder()
        .encoder(Counting::new())
        .config(lprag_config(2))
        .build(&corpus())
        .await
        .unwrap();
    let before = rag
        .retrieve("Vistula river", Selection::TopK(3))
        .await
        .unwrap();
    let mut next = rag.clone();
    next.apply_changes(
        &changed_corpus(),
        &["nobel".to_string()],
        &UpdateInputs::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        rag.retrieve("Vistula river", Selection::TopK(3))
            .await
            .unwrap(),
        before
    );
    assert_eq!(rag.chunks().len(), corpus().len());
    assert!(next.document_ids().contains("krakow"));
    assert!(!next.document_ids().contains("nobel"));
    // The copy-on-write update equals the in-place one.
    let mut in_place = rag;
    let twin = in_place.clone();
    drop(twin);
    in_place
        .apply_changes(
            &changed_corpus(),
            &["nobel".to_string()],
            &UpdateInputs::default(),
        )
        .await
        .unwrap();
    for q in ["Vistula river", "royal capital", "Nobel Prize"] {
        assert_eq!(
            in_place.retrieve(q, Selection::TopK(4)).await.unwrap(),
            next.retrieve(q, Selection::TopK(4)).await.unwrap(),
            "{q}"
        );
    }
    // Bad changes are refused and change nothing.
    let err = next
        .apply_changes(&[], &["nope".to_string()], &UpdateInputs::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    let both = [Document::new("krakow", "K", "x")];
    let err = next
        .apply_changes(&both, &["krakow".to_string()], &UpdateInputs::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("both"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_never_wait_for_an_update_and_always_see_a_complete_index() {
    let rag = LpRag::builder()
        .encoder(Counting::new())
        .config(lprag_config(2))
        .build(&corpus())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("index");
    let live = Arc::new(Live::new(rag).saving_to(&saved));
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..8 {
        let (live, stop) = (live.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut answered = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let batch = (answered + r) % 5;
                let filter = Filter::eq("batch", batch.to_string());
                let hits = live
                    .snapshot()
                    .retrieve_filtered("comet observatory", Selection::TopK(10), &filter)
                    .await
                    .unwrap();
                // Each batch arrives in one update: both of its documents or neither.
                assert!(
                    hits.is_empty() || hits.len() == 2,
                    "half an update: {hits:?}"
                );
                answered += 1;
            }
            answered
        }));
    }
    for b in 0..5 {
        let docs: Vec<Document> = ["a", "b"]
            .iter()
            .map(|h| {
                Document::new(
                    format!("{b}-{h}"),
                    "Report",
                    format!("Comet {b}{h} seen by the observatory."),
                )
                .with_metadata("batch", b.to_string())
            })
            .collect();
        live.apply(&docs, &[], &UpdateInputs::default())
            .await
            .unwrap();
        // Saved before it is answered from.
        let reopened = LpRag::load(&saved, Counting::new()).unwrap();
        assert!(reopened.document_ids().contains(format!("{b}-a").as_str()));
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for r in readers {
        total += r.await.unwrap();
    }
    assert!(total > 0);
    assert_eq!(live.snapshot().chunks().len(), corpus().len() + 10);
    // A failed update leaves the served index as it was.
    let before = live.snapshot().chunks().len();
    assert!(live
        .apply(&[], &["nope".to_string()], &UpdateInputs::default())
        .await
        .is_err());
    assert_eq!(live.snapshot().chunks().len(), before);
}

/// `sync_from` reads the current documents from a source a block at a time and does what
/// `sync` does with the same documents held: the same plan, the same index after.
#[tokio::test]
async fn sync_from_a_source_read_in_blocks_does_what_sync_does() {
    let build = || async {
        DenseRetriever::builder()
            .encoder(Counting::new())
            .build(&corpus())
            .await
            .unwrap()
    };
    let (mut held, mut read) = (build().await, build().await);
    let inputs = UpdateInputs::default();
    let source = Blocks::new(changed_corpus(), 2);
    let by_sync = sync(&mut held, &changed_corpus(), &inputs).await.unwrap();
    let by_source = sync_from(&mut read, &source, &inputs).await.unwrap();
    assert_eq!(by_source.plan, by_sync.plan);
    assert_eq!(by_source.plan.added, ["krakow"]);
    assert_eq!(read.chunks(), held.chunks());
    // In line now: one read through the source (blocks of two, then the empty read).
    let reads = source.reads.load(Ordering::SeqCst);
    let again = sync_from(&mut read, &source, &inputs).await.unwrap();
    assert!(again.update.is_none(), "{again:?}");
    let blocks = changed_corpus().len().div_ceil(2) + 1;
    assert_eq!(source.reads.load(Ordering::SeqCst) - reads, blocks);
    // One id in two blocks: refused, the index unchanged.
    let mut twice = changed_corpus();
    twice[4].id = twice[0].id.clone();
    let e = sync_from(&mut read, &Blocks::new(twice, 2), &inputs)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("appears twice"), "{e}");
    assert_eq!(read.chunks(), held.chunks());
}
