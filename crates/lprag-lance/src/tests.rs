//! Tests against real embedded Lance datasets in temporary directories (no mock).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lprag_core::{Chunk, ChunkBatch, ChunkStore, Embeddings, Error, Filter, Provenance};

use super::*;

/// A small deterministic generator (no dependency for test data).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn float(&mut self) -> f32 {
        (self.next() % 10_000) as f32 / 5_000.0 - 1.0
    }
}

const LANGS: [&str; 3] = ["en", "de", "it's"];

fn chunk(i: usize, rng: &mut Lcg) -> Chunk {
    let mut c = Chunk::new(
        usize::MAX,
        format!("chunk {i}: text with a 'quote'"),
        Provenance {
            document_id: format!("doc-{}", i % 7),
            title: format!("Title {}", i % 7),
            span: i..i + 10,
        },
    );
    c.metadata
        .insert("lang".into(), LANGS[rng.next() as usize % 3].into());
    if i.is_multiple_of(4) {
        c.metadata
            .insert("year".into(), format!("{}", 2020 + i % 3));
    }
    c
}

/// `n` chunks with clustered `dim`-wide vectors (16 centres and noise).
fn batch(n: usize, dim: usize, seed: u64) -> ChunkBatch {
    let mut rng = Lcg(seed);
    let centres: Vec<Vec<f32>> = (0..16)
        .map(|_| (0..dim).map(|_| rng.float()).collect())
        .collect();
    let mut data = Vec::with_capacity(n * dim);
    let chunks = (0..n)
        .map(|i| {
            let c = &centres[rng.next() as usize % 16];
            data.extend(c.iter().map(|x| x + 0.3 * rng.float()));
            chunk(i, &mut rng)
        })
        .collect();
    ChunkBatch::new(chunks, Embeddings::new(dim, data).unwrap())
}

fn query(dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Lcg(seed);
    (0..dim).map(|_| rng.float()).collect()
}

/// The reference: every admitted row scored by cosine, nearest first, ties to the lower id.
struct Exact(ChunkBatch);

impl Exact {
    fn nearest(&self, q: &[f32], k: usize, filter: &Filter) -> Vec<(usize, f32)> {
        let mut all: Vec<(usize, f32)> = self
            .0
            .chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| filter.matches(c))
            .map(|(i, _)| (i, lprag_core::cosine(q, self.0.vectors.row(i))))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }
}

fn uri(dir: &tempfile::TempDir) -> String {
    dir.path().join("db").to_string_lossy().into_owned()
}

fn filters() -> Vec<Filter> {
    vec![
        Filter::All,
        Filter::eq("lang", "en"),
        Filter::eq("lang", "it's"),
        Filter::any_of("year", ["2020", "2022"]),
        Filter::any_of("year", Vec::<String>::new()),
        Filter::exists("year"),
        Filter::Documents(vec!["doc-1".into(), "doc-3".into()]),
        Filter::Not(Box::new(Filter::eq("lang", "de"))),
        Filter::eq("lang", "en").and(Filter::exists("year")),
        Filter::Or(vec![
            Filter::eq("lang", "de"),
            Filter::Documents(vec!["doc-0".into()]),
        ]),
        Filter::Or(vec![]),
        Filter::eq("missing", "x"),
    ]
}

#[tokio::test]
async fn records_and_vectors_come_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = LanceStore::create(&uri(&dir), StoreSpec::new(8))
        .await
        .unwrap();
    assert_eq!(store.len(), 0);
    let first = batch(30, 8, 1);
    let second = batch(20, 8, 2);
    assert_eq!(store.append(first.clone()).await.unwrap(), 0..30);
    assert_eq!(store.append(second.clone()).await.unwrap(), 30..50);
    assert_eq!(store.len(), 50);

    let ids = [42, 3, 42, 0, 49];
    let got = store.chunks(&ids).await.unwrap();
    for (c, &id) in got.iter().zip(&ids) {
        let want = if id < 30 {
            &first.chunks[id]
        } else {
            &second.chunks[id - 30]
        };
        assert_eq!(c.id, id);
        assert_eq!(
            (&c.text, &c.provenance, &c.metadata),
            (&want.text, &want.provenance, &want.metadata)
        );
    }
    let v = store.vectors(&ids).await.unwrap();
    for (r, &id) in ids.iter().enumerate() {
        let want = if id < 30 {
            first.vectors.row(id)
        } else {
            second.vectors.row(id - 30)
        };
        assert_eq!(v.row(r), want);
    }
    let block = store.vector_block(28..33).await.unwrap();
    assert_eq!(block.row(2), second.vectors.row(0));
    assert_eq!(store.representations(&[1]).await.unwrap(), None);

    assert!(matches!(
        store.chunks(&[50]).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(store.vectors(&[0, 99]).await.is_err());
    let mut wrong = batch(3, 4, 9);
    wrong.vectors = Embeddings::new(4, vec![0.0; 12]).unwrap();
    assert!(matches!(
        store.append(wrong).await,
        Err(Error::DimensionMismatch { .. })
    ));
    assert_eq!(store.len(), 50, "a refused batch writes nothing");

    // Another process (here: another handle) opens what was written.
    let again = LanceStore::open(&uri(&dir), DEFAULT_TABLE).await.unwrap();
    assert_eq!((again.len(), again.dim()), (50, 8));
    assert_eq!(
        again.chunks(&[42]).await.unwrap(),
        store.chunks(&[42]).await.unwrap()
    );
}

#[tokio::test]
async fn exact_search_and_pushed_filters_match_a_brute_force_scan() {
    let dir = tempfile::tempdir().unwrap();
    let dim = 24;
    let store = LanceStore::create(&uri(&dir), StoreSpec::new(dim))
        .await
        .unwrap();
    let data = batch(600, dim, 7);
    store.append(data.clone()).await.unwrap();
    let memory = Exact(data);
    for (fi, filter) in filters().iter().enumerate() {
        for seed in 0..3 {
            let q = query(dim, 100 + seed);
            let want = memory.nearest(&q, 15, filter);
            let got = store.nearest(&q, 15, filter).await.unwrap();
            let want_ids: Vec<_> = want.iter().map(|h| h.0).collect();
            let got_ids: Vec<_> = got.iter().map(|h| h.0).collect();
            assert_eq!(got_ids, want_ids, "filter {fi} {filter:?}, query {seed}");
            for (g, w) in got.iter().zip(&want) {
                assert!((g.1 - w.1).abs() < 1e-4, "scores {g:?} {w:?}");
            }
        }
    }
    assert!(store.nearest(&[0.0; 3], 5, &Filter::All).await.is_err());
    assert!(store
        .nearest(&query(dim, 1), 0, &Filter::All)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn filter_sql_quotes_what_it_is_given() {
    assert_eq!(filter_sql(&Filter::All), None);
    let sql = filter_sql(&Filter::eq("k'ey", "va'l\"ue")).unwrap();
    assert_eq!(
        sql,
        r#"array_has_any(meta_pairs, ['["k''ey","va''l\"ue"]'])"#
    );
    // A value that tries to close the literal is one value, not SQL.
    let dir = tempfile::tempdir().unwrap();
    let store = LanceStore::create(&uri(&dir), StoreSpec::new(4))
        .await
        .unwrap();
    let mut b = batch(5, 4, 3);
    b.chunks[2]
        .metadata
        .insert("who".into(), "x') OR TRUE --".into());
    store.append(b).await.unwrap();
    let hits = store
        .nearest(
            &[1.0, 0.0, 0.0, 0.0],
            5,
            &Filter::eq("who", "x') OR TRUE --"),
        )
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
    let none = store
        .nearest(&[1.0, 0.0, 0.0, 0.0], 5, &Filter::eq("who", "x"))
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn nothing_is_overwritten_and_foreign_tables_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let u = uri(&dir);
    let store = LanceStore::create(&u, StoreSpec::new(4)).await.unwrap();
    store.append(batch(5, 4, 1)).await.unwrap();
    let err = LanceStore::create(&u, StoreSpec::new(4)).await.unwrap_err();
    assert!(err.to_string().contains("exists already"), "{err}");
    assert_eq!(LanceStore::open(&u, DEFAULT_TABLE).await.unwrap().len(), 5);

    // A table some other program wrote.
    let conn = lancedb::connect(&u).execute().await.unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::UInt64, false)]));
    conn.create_empty_table("theirs", schema)
        .execute()
        .await
        .unwrap();
    let err = LanceStore::open(&u, "theirs").await.unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(LanceStore::open(&u, "absent").await.is_err());
    assert!(LanceStore::create(&u, StoreSpec::new(0)).await.is_err());
}

#[tokio::test]
async fn readers_see_whole_versions_until_they_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let u = uri(&dir);
    let writer = LanceStore::create(&u, StoreSpec::new(4)).await.unwrap();
    writer.append(batch(10, 4, 1)).await.unwrap();
    let reader = LanceStore::open(&u, DEFAULT_TABLE).await.unwrap();
    let v1 = reader.version();
    writer.append(batch(6, 4, 2)).await.unwrap();
    assert_eq!(reader.len(), 10, "a pinned reader does not move");
    let hits = reader
        .nearest(&[1.0, 0.0, 0.0, 0.0], 50, &Filter::All)
        .await
        .unwrap();
    assert_eq!(hits.len(), 10);
    let v2 = reader.refresh().await.unwrap();
    assert!(v2 > v1);
    assert_eq!((reader.len(), reader.version()), (16, writer.version()));
    reader.checkout(v1).await.unwrap();
    assert_eq!(reader.len(), 10);
}

#[tokio::test]
async fn representations_are_stored_when_the_store_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = LanceStore::create(&uri(&dir), StoreSpec::new(4).with_representations(3))
        .await
        .unwrap();
    let mut with = batch(4, 4, 1);
    with.representations = Some(Embeddings::new(3, (0..12).map(|x| x as f32).collect()).unwrap());
    store.append(with).await.unwrap();
    store.append(batch(2, 4, 2)).await.unwrap();
    let r = store.representations(&[3, 0]).await.unwrap().unwrap();
    assert_eq!(
        (r.row(0), r.row(1)),
        (&[9.0, 10.0, 11.0][..], &[0.0, 1.0, 2.0][..])
    );
    assert_eq!(store.representations(&[1, 5]).await.unwrap(), None);
    let reopened = LanceStore::open(&uri(&dir), DEFAULT_TABLE).await.unwrap();
    assert_eq!(reopened.representation_dim(), Some(3));
    let mut wrong = batch(1, 4, 3);
    wrong.representations = Some(Embeddings::new(2, vec![0.0; 2]).unwrap());
    assert!(store.append(wrong).await.is_err());
}

fn recall(got: &[(usize, f32)], want: &[(usize, f32)]) -> f64 {
    let want: std::collections::HashSet<_> = want.iter().map(|h| h.0).collect();
    got.iter().filter(|h| want.contains(&h.0)).count() as f64 / want.len().max(1) as f64
}

#[tokio::test]
async fn ann_indexes_find_most_of_the_exact_answer_and_honour_filters() {
    let dim = 32;
    let data = batch(3_000, dim, 11);
    let memory = Exact(data.clone());
    for index in [
        VectorIndex::IvfHnswSq {
            partitions: Some(4),
            m: 16,
            ef_construction: 100,
        },
        VectorIndex::IvfPq {
            partitions: Some(4),
            sub_vectors: Some(8),
        },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = LanceStore::create(&uri(&dir), StoreSpec::new(dim))
            .await
            .unwrap();
        store.append(data.clone()).await.unwrap();
        let before = store.version();
        assert!(store.build_index(index).await.unwrap() > before);
        store.set_search(SearchParams {
            nprobes: Some(4),
            ef: Some(100),
            refine_factor: Some(4),
        });
        let mut total = 0.0;
        for seed in 0..10 {
            // A query near the data: a row plus noise.
            let noise = query(dim, 500 + seed);
            let row = data.vectors.row(seed as usize * 97);
            let q: Vec<f32> = row.iter().zip(&noise).map(|(x, n)| x + 0.2 * n).collect();
            let want = memory.nearest(&q, 10, &Filter::All);
            total += recall(&store.nearest(&q, 10, &Filter::All).await.unwrap(), &want);
        }
        let mean = total / 10.0;
        println!("{index:?}: recall@10 {mean:.3}");
        assert!(mean >= 0.9, "{index:?}: recall@10 {mean}");
        let en = Filter::eq("lang", "en");
        let hits = store.nearest(&query(dim, 9), 20, &en).await.unwrap();
        assert_eq!(hits.len(), 20);
        let chunks = store
            .chunks(&hits.iter().map(|h| h.0).collect::<Vec<_>>())
            .await
            .unwrap();
        assert!(chunks.iter().all(|c| en.matches(c)), "{index:?}");
        // Rows appended after the index are found too.
        let extra = batch(5, dim, 12);
        let target = extra.vectors.row(3).to_vec();
        let ids = store.append(extra).await.unwrap();
        let top = store.nearest(&target, 1, &Filter::All).await.unwrap();
        assert_eq!(top[0].0, ids.start + 3, "{index:?}");
    }
}

// ---- Three processes on one dataset: one adds documents, two answer. ----

const ROLE: &str = "LPRAG_LANCE_TEST_ROLE";
const DIR: &str = "LPRAG_LANCE_TEST_DIR";
const BATCHES: usize = 12;
const PER_BATCH: usize = 40;
const DIM: usize = 16;

fn numbered_batch(b: usize) -> ChunkBatch {
    let mut rng = Lcg(b as u64 + 1);
    let chunks = (0..PER_BATCH)
        .map(|i| {
            let mut c = Chunk::new(
                0,
                format!("batch {b} chunk {i}"),
                Provenance {
                    document_id: format!("batch-{b}"),
                    title: String::new(),
                    span: 0..1,
                },
            );
            c.metadata = BTreeMap::from([("batch".to_string(), b.to_string())]);
            c
        })
        .collect();
    let data = (0..PER_BATCH * DIM).map(|_| rng.float()).collect();
    ChunkBatch::new(chunks, Embeddings::new(DIM, data).unwrap())
}

/// Not a test on its own: the body of the writer and reader processes that
/// `three_processes_never_see_a_partial_update` starts (`--ignored`, with the role in
/// the environment).
#[tokio::test]
#[ignore = "the body of three_processes_never_see_a_partial_update's child processes"]
async fn process_role() {
    let (Ok(role), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) else {
        panic!("{ROLE} and {DIR} say what this process does");
    };
    let u = format!("{dir}/db");
    let store = LanceStore::open(&u, DEFAULT_TABLE).await.unwrap();
    let ready = |name: &str| std::path::Path::new(&dir).join(name);
    if role == "writer" {
        // Start once both readers read.
        let t0 = Instant::now();
        while !(ready("reader-0").exists() && ready("reader-1").exists()) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "readers never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for b in 0..BATCHES {
            let ids = store.append(numbered_batch(b)).await.unwrap();
            assert_eq!(ids, b * PER_BATCH..(b + 1) * PER_BATCH);
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        return;
    }
    std::fs::write(ready(&role), b"").unwrap();
    let t0 = Instant::now();
    let mut seen = std::collections::BTreeSet::new();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "the writer never finished"
        );
        store.refresh().await.unwrap();
        let len = store.len();
        assert_eq!(len % PER_BATCH, 0, "{role} saw {len} rows: part of a batch");
        seen.insert(len);
        if len > 0 {
            let last = len / PER_BATCH - 1;
            // Every row of the newest batch, by id and by a filtered search.
            let ids: Vec<usize> = (last * PER_BATCH..len).collect();
            let chunks = store.chunks(&ids).await.unwrap();
            for (i, c) in chunks.iter().enumerate() {
                assert_eq!(c.text, format!("batch {last} chunk {i}"));
            }
            let q = numbered_batch(last).vectors.row(5).to_vec();
            let hits = store
                .nearest(&q, PER_BATCH + 5, &Filter::eq("batch", last.to_string()))
                .await
                .unwrap();
            assert_eq!(hits.len(), PER_BATCH, "{role}: the newest batch in full");
            assert_eq!(hits[0].0, last * PER_BATCH + 5);
            let all = store.nearest(&q, len + 10, &Filter::All).await.unwrap();
            assert_eq!(all.len(), len, "{role}: a search sees the whole version");
        }
        if len == BATCHES * PER_BATCH {
            break;
        }
    }
    println!("{role}: saw {} distinct versions", seen.len());
    assert!(
        seen.len() >= 3,
        "{role} saw only {seen:?}: the test raced nothing"
    );
}

#[tokio::test]
async fn three_processes_never_see_a_partial_update() {
    let dir = tempfile::tempdir().unwrap();
    let u = uri(&dir);
    LanceStore::create(&u, StoreSpec::new(DIM)).await.unwrap();
    let exe = std::env::current_exe().unwrap();
    let spawn = |role: &str| {
        std::process::Command::new(&exe)
            .args([
                "tests::process_role",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, role)
            .env(DIR, dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children = [spawn("writer"), spawn("reader-0"), spawn("reader-1")];
    for (child, role) in children.into_iter().zip(["writer", "reader-0", "reader-1"]) {
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{role} failed:\n{text}");
        assert!(text.contains("1 passed"), "{role} ran no test:\n{text}");
        if role != "writer" {
            assert!(text.contains("distinct versions"), "{role}:\n{text}");
        }
    }
    let store = LanceStore::open(&u, DEFAULT_TABLE).await.unwrap();
    assert_eq!(store.len(), BATCHES * PER_BATCH);
}
