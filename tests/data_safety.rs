//! Data safety: a save never deletes or overwrites what lprag did not write, a reused work
//! directory never mixes the outputs of other components, and one build holds a work
//! directory at a time.

use std::path::Path;
use std::sync::Arc;

use lprag::core::dirs::DirLock;
use lprag::text::SentenceChunkerConfig;
use lprag::{
    Document, Encoder, Error, G2Rag, GfmRag, HashingEncoder, HashingEncoderConfig, LesegrConfig,
    LesegrRag, LesegrVariant, LpRag, LpRagConfig, QcgRag, SentenceChunker,
};

use crate::common::{corpus, hashing, lprag_config, ranked, small_gfm_config};

fn config() -> LpRagConfig {
    lprag_config(2)
}

/// A directory of the user's: a note and a note in a subdirectory.
fn users_directory(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("my-notes.txt"), "mine").unwrap();
    std::fs::write(dir.join("sub/keep.txt"), "mine too").unwrap();
}

fn assert_untouched(dir: &Path) {
    assert_eq!(
        std::fs::read_to_string(dir.join("my-notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/keep.txt")).unwrap(),
        "mine too"
    );
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 2, "nothing added");
}

fn assert_foreign(what: &str, result: lprag::Result<()>, dir: &Path) {
    let e = result.expect_err(what);
    assert!(matches!(e, Error::ForeignDirectory { .. }), "{what}: {e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&dir.display().to_string()) && text.contains("nothing was changed"),
        "{what}: {text}"
    );
}

/// Each retriever's `save` into a directory holding a user's files fails with a typed
/// error naming it, and leaves every file as it was (LP-RAG's used to swap the directory
/// out and delete it); into a new, empty or own index directory it saves, again and again.
#[tokio::test]
async fn no_save_touches_a_directory_that_is_not_its_index() {
    let docs = corpus();
    let lprag = LpRag::builder()
        .encoder(hashing())
        .config(config())
        .build(&docs)
        .await
        .unwrap();
    let qcg = QcgRag::builder()
        .encoder(hashing())
        .build(&docs)
        .await
        .unwrap();
    let g2 = G2Rag::builder()
        .encoder(hashing())
        .build(&docs)
        .await
        .unwrap();
    let lesegr = LesegrRag::builder()
        .encoder(hashing())
        .config(LesegrConfig {
            variant: LesegrVariant::Lite,
            ..LesegrConfig::default()
        })
        .build(&docs)
        .await
        .unwrap();
    let gfm = GfmRag::builder()
        .encoder(hashing())
        .config(small_gfm_config())
        .build(&docs)
        .await
        .unwrap();
    type Save<'a> = Box<dyn Fn(&Path) -> lprag::Result<()> + 'a>;
    let saves: Vec<(&str, Save<'_>)> = vec![
        ("lprag", Box::new(|d| lprag.save(d))),
        ("qcg", Box::new(|d| qcg.save(d))),
        ("g2", Box::new(|d| g2.save(d))),
        ("lesegr", Box::new(|d| lesegr.save(d))),
        ("gfm", Box::new(|d| gfm.save(d))),
    ];
    let root = tempfile::tempdir().unwrap();
    for (name, save) in &saves {
        let users = root.path().join(format!("users-{name}"));
        users_directory(&users);
        if *name == "lprag" {
            // Checked before a build is paid for.
            assert_foreign("check_save_dir", LpRag::check_save_dir(&users), &users);
            LpRag::check_save_dir(root.path().join("not-yet")).unwrap();
        }
        assert_foreign(name, save(&users), &users);
        assert_untouched(&users);

        // A file where the directory would be.
        let file = root.path().join(format!("file-{name}"));
        std::fs::write(&file, "a file").unwrap();
        assert_foreign(name, save(&file), &file);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a file");

        // New, then its own index again, then an empty directory.
        let own = root.path().join(format!("index-{name}"));
        save(&own).unwrap();
        save(&own).unwrap();
        let empty = root.path().join(format!("empty-{name}"));
        std::fs::create_dir(&empty).unwrap();
        save(&empty).unwrap();
    }
    // Indexes of another kind are not overwritten either.
    let qcg_dir = root.path().join("index-qcg");
    let before = std::fs::read(qcg_dir.join("qcg.json")).unwrap();
    assert_foreign("lprag over qcg", lprag.save(&qcg_dir), &qcg_dir);
    assert_eq!(std::fs::read(qcg_dir.join("qcg.json")).unwrap(), before);
    let lprag_dir = root.path().join("index-lprag");
    assert_foreign("qcg over lprag", qcg.save(&lprag_dir), &lprag_dir);
    // An LP-RAG index the user put a file into is not replaced (the file would go).
    std::fs::write(lprag_dir.join("my-notes.txt"), "mine").unwrap();
    assert_foreign(
        "lprag index with a note",
        lprag.save(&lprag_dir),
        &lprag_dir,
    );
    assert!(lprag_dir.join("my-notes.txt").is_file());
    // A user's manifest.json is not an index's.
    let lookalike = root.path().join("lookalike");
    std::fs::create_dir(&lookalike).unwrap();
    std::fs::write(lookalike.join("manifest.json"), r#"{"name": "my app"}"#).unwrap();
    assert_foreign("lprag over a manifest", lprag.save(&lookalike), &lookalike);
    assert_eq!(
        std::fs::read_to_string(lookalike.join("manifest.json")).unwrap(),
        r#"{"name": "my app"}"#
    );
    // What was saved opens.
    LpRag::load(root.path().join("index-lprag"), hashing()).unwrap();
    QcgRag::load(root.path().join("empty-qcg"), hashing()).unwrap();
}

/// A work directory reused with an encoder of the same name and width but other weights
/// (here: the hashing encoder fitted on the corpus vs. unfitted — the `--encoder
/// hashing-unfitted` then `--encoder hashing` case) recomputes the embeddings and
/// everything after them, and ranks exactly as a fresh build with that encoder.
#[tokio::test]
async fn a_reused_work_directory_never_mixes_encoders() {
    let docs = corpus();
    let texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
    let fitted: Arc<dyn Encoder> =
        Arc::new(HashingEncoder::fitted(HashingEncoderConfig::default(), &texts).unwrap());
    assert_eq!(fitted.name(), hashing().name());
    assert_ne!(fitted.fingerprint(), hashing().fingerprint());
    let work = tempfile::tempdir().unwrap();
    let build = |enc: Arc<dyn Encoder>, work: Option<&Path>| {
        let mut b = LpRag::builder().encoder(enc).config(config());
        if let Some(w) = work {
            b = b.work_dir(w);
        }
        let docs = docs.clone();
        async move { b.build(&docs).await.unwrap() }
    };
    let unfitted = build(hashing(), Some(work.path())).await;
    assert!(unfitted.stats().reused_stages.is_empty());
    let reused = build(fitted.clone(), Some(work.path())).await;
    assert_eq!(
        reused.stats().reused_stages,
        ["chunk"],
        "only the chunks do not depend on the encoder"
    );
    let fresh = build(fitted, None).await;
    for q in [
        "Where was Marie Curie born?",
        "Which river flows through Warsaw?",
        "imperial capital of Japan",
    ] {
        assert_eq!(
            ranked(&reused, q, 6).await,
            ranked(&fresh, q, 6).await,
            "{q}"
        );
    }
}

/// The chunker's settings are part of the chunk stage's key: other settings rechunk.
#[tokio::test]
async fn a_reused_work_directory_rechunks_when_the_chunkers_settings_change() {
    let docs = corpus();
    let work = tempfile::tempdir().unwrap();
    let build = |max_chars: usize| {
        let chunker = SentenceChunker::new(SentenceChunkerConfig {
            max_chars,
            ..SentenceChunkerConfig::default()
        });
        let docs = docs.clone();
        let work = work.path().to_path_buf();
        async move {
            LpRag::builder()
                .encoder(hashing())
                .chunker(Arc::new(chunker))
                .config(config())
                .work_dir(work)
                .build(&docs)
                .await
                .unwrap()
        }
    };
    let wide = build(400).await;
    let again = build(400).await;
    assert!(again.stats().reused_stages.contains(&"chunk".to_string()));
    let narrow = build(40).await;
    // Rechunked; the later stages are keyed by the chunks' content, so they are reused
    // exactly when the new settings cut the same chunks.
    assert!(
        !narrow.stats().reused_stages.contains(&"chunk".to_string()),
        "{:?}",
        narrow.stats().reused_stages
    );
    let same_chunks = narrow.chunks() == wide.chunks();
    assert_eq!(
        narrow.stats().reused_stages.contains(&"embed".to_string()),
        same_chunks
    );
}

/// A work directory is the build's alone: a user's directory is refused untouched, one
/// that another build holds is busy, and a damaged `chunks.json` (ids that are not their
/// positions) is recomputed with a warning instead of trusted.
#[tokio::test]
async fn a_work_directory_is_checked_locked_and_never_trusted_when_damaged() {
    let docs: Vec<Document> = corpus();
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("notes");
    users_directory(&users);
    let build = |work: &Path| {
        let b = LpRag::builder()
            .encoder(hashing())
            .config(config())
            .work_dir(work);
        let docs = docs.clone();
        async move { b.build(&docs).await }
    };
    let e = build(&users).await.map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::ForeignDirectory { .. }), "{e:?}");
    assert_untouched(&users);

    let work = root.path().join("work");
    let first = build(&work).await.unwrap();
    {
        let _held = DirLock::acquire(&work, "build").unwrap();
        let e = build(&work).await.map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::Busy { .. }), "{e:?}");
        assert!(
            e.to_string().contains("in use by another lprag build"),
            "{e}"
        );
    }
    // Damage: two chunks swap ids.
    let path = work.join("chunks.json");
    let mut chunks: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    chunks[0]["id"] = serde_json::json!(1);
    std::fs::write(&path, serde_json::to_vec(&chunks).unwrap()).unwrap();
    let repaired = build(&work).await.unwrap();
    assert!(
        !repaired
            .stats()
            .reused_stages
            .contains(&"chunk".to_string()),
        "{:?}",
        repaired.stats().reused_stages
    );
    assert!(
        repaired
            .stats()
            .warnings
            .iter()
            .any(|w| w.contains("chunks.json")),
        "{:?}",
        repaired.stats().warnings
    );
    let q = "Which river flows through Warsaw?";
    assert_eq!(ranked(&repaired, q, 6).await, ranked(&first, q, 6).await);
}
