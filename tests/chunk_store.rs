//! LP-RAG beside a chunk store: `LpRag::write_store` writes the index's chunks and vectors
//! (resuming a write that stopped, refusing a store of another corpus), and
//! `LpRag::attach_store` finds each query's nearest chunks with the store's search, the
//! filter handed to the store; with an exact store the ranking is the in-memory one.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lprag::{
    Chunk, ChunkBatch, ChunkId, ChunkStore, Document, Embeddings, Error, Filter, MemoryStore,
    NoProgress, Result, Retriever, Selection,
};

use crate::common::store_cases::{answers, index, labelled, QUERIES};
use crate::mini_corpus;

fn corpus() -> Vec<Document> {
    labelled(mini_corpus::documents())
}

/// A store that counts its searches and keeps the filters it was given.
#[derive(Debug)]
struct Spy {
    inner: MemoryStore,
    searches: AtomicUsize,
    filters: Mutex<Vec<Filter>>,
}

impl Spy {
    fn new(dim: usize) -> Self {
        Spy {
            inner: MemoryStore::new(dim, None).unwrap(),
            searches: AtomicUsize::new(0),
            filters: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl ChunkStore for Spy {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn representation_dim(&self) -> Option<usize> {
        self.inner.representation_dim()
    }
    fn version(&self) -> u64 {
        self.inner.version()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    async fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        self.inner.chunks(ids).await
    }
    async fn vectors(&self, ids: &[ChunkId]) -> Result<Embeddings> {
        self.inner.vectors(ids).await
    }
    async fn representations(&self, ids: &[ChunkId]) -> Result<Option<Embeddings>> {
        self.inner.representations(ids).await
    }
    async fn nearest(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
    ) -> Result<Vec<(ChunkId, f32)>> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        self.filters.lock().unwrap().push(filter.clone());
        self.inner.nearest(query, k, filter).await
    }
    async fn append(&self, batch: ChunkBatch) -> Result<Range<ChunkId>> {
        self.inner.append(batch).await
    }
    async fn refresh(&self) -> Result<u64> {
        self.inner.refresh().await
    }
}

#[tokio::test]
async fn an_attached_exact_store_ranks_as_memory_does_and_gets_the_filter() {
    let docs = corpus();
    let mut rag = index(&docs).await;
    let n = rag.chunks().len();
    assert!(n > 3, "the corpus must have more chunks than the pool: {n}");
    let half = Filter::eq("half", "b");
    let in_memory = answers(&rag, &half).await;

    let spy = Arc::new(Spy::new(rag.graph().features.dim()));
    let wrote = rag.write_store(&*spy, &NoProgress).await.unwrap();
    assert_eq!(
        (wrote.resumed_from, wrote.written, wrote.appends),
        (0, n, 1)
    );
    assert_eq!(spy.len(), n);
    rag.attach_store(spy.clone()).await.unwrap();
    assert!(rag.store().is_some());

    let from_store = answers(&rag, &half).await;
    assert_eq!(
        from_store, in_memory,
        "an exact store must rank as memory does"
    );
    // Every query searched the store; the filtered ones handed it the filter.
    assert!(spy.searches.load(Ordering::SeqCst) >= QUERIES.len() * 2);
    assert!(spy.filters.lock().unwrap().contains(&half));
    // Filtered answers hold only admitted chunks.
    let hits = rag
        .retrieve_filtered(QUERIES[0], Selection::TopK(10), &half)
        .await
        .unwrap();
    assert!(hits.iter().all(|h| half.matches(&h.chunk)));

    // Detached: memory again, the same answers, the store no longer asked.
    let searches = spy.searches.load(Ordering::SeqCst);
    assert!(rag.detach_store().unwrap().is_some());
    assert!(rag.store().is_none());
    assert_eq!(answers(&rag, &half).await, in_memory);
    assert_eq!(spy.searches.load(Ordering::SeqCst), searches);
}

#[tokio::test]
async fn a_stopped_write_resumes_and_other_stores_are_refused() {
    let docs = corpus();
    let rag = index(&docs).await;
    let n = rag.chunks().len();
    let features = &rag.graph().features;
    let dim = features.dim();

    // A write that stopped after two chunks resumes after them.
    let store = Arc::new(MemoryStore::new(dim, None).unwrap());
    store
        .append(ChunkBatch::new(
            rag.chunks()[..2].to_vec(),
            features.select(&[0, 1]),
        ))
        .await
        .unwrap();
    let mut partial = rag.clone();
    let err = partial.attach_store(store.clone()).await.unwrap_err();
    assert!(err.to_string().contains("write_store"), "{err}");
    let wrote = rag.write_store(&*store, &NoProgress).await.unwrap();
    assert_eq!((wrote.resumed_from, wrote.written), (2, n - 2));
    let again = rag.write_store(&*store, &NoProgress).await.unwrap();
    assert_eq!((again.written, again.appends), (0, 0));
    partial.attach_store(store.clone()).await.unwrap();
    assert_eq!(
        answers(&partial, &Filter::All).await,
        answers(&rag, &Filter::All).await
    );

    // Another corpus' chunk 0: refused before anything is written.
    let other = MemoryStore::new(dim, None).unwrap();
    let mut foreign = rag.chunks()[1].clone();
    foreign.text = "Something else entirely.".into();
    other
        .append(ChunkBatch::new(vec![foreign], features.select(&[1])))
        .await
        .unwrap();
    let err = rag.write_store(&other, &NoProgress).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert!(err.to_string().contains("chunk 0"), "{err}");
    assert_eq!(other.len(), 1);

    // Same texts, another encoder's vectors: refused too.
    let shifted = MemoryStore::new(dim, None).unwrap();
    let mut v = features.select(&[0]).into_vec();
    v.rotate_left(dim / 2);
    shifted
        .append(ChunkBatch::new(
            rag.chunks()[..1].to_vec(),
            Embeddings::new(dim, v).unwrap(),
        ))
        .await
        .unwrap();
    let err = rag.write_store(&shifted, &NoProgress).await.unwrap_err();
    assert!(err.to_string().contains("vector"), "{err}");

    // Another width, and a store holding more chunks than the index.
    let narrow = MemoryStore::new(dim + 1, None).unwrap();
    assert!(matches!(
        rag.write_store(&narrow, &NoProgress).await,
        Err(Error::DimensionMismatch { .. })
    ));
    let bigger = MemoryStore::new(dim, None).unwrap();
    rag.write_store(&bigger, &NoProgress).await.unwrap();
    bigger
        .append(ChunkBatch::new(
            rag.chunks()[..1].to_vec(),
            features.select(&[0]),
        ))
        .await
        .unwrap();
    let err = rag.write_store(&bigger, &NoProgress).await.unwrap_err();
    assert!(err.to_string().contains("another"), "{err}");
}

#[tokio::test]
async fn an_update_detaches_the_store_and_says_so() {
    let docs = corpus();
    let mut rag = index(&docs[..8]).await;
    let store = Arc::new(MemoryStore::new(rag.graph().features.dim(), None).unwrap());
    rag.write_store(&*store, &NoProgress).await.unwrap();
    rag.attach_store(store).await.unwrap();
    let report = rag.add_documents(&docs[8..]).await.unwrap();
    assert!(rag.store().is_none());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("chunk store was detached")),
        "{:?}",
        report.warnings
    );
    // The index answers from memory, over the new documents too.
    let hits = rag.retrieve(QUERIES[1], Selection::TopK(20)).await.unwrap();
    assert!(!hits.is_empty());
}
