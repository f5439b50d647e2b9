//! A small corpus shared by the integration tests: six short articles, two of them linked
//! by a multi-hop question (Curie → Warsaw → Vistula), and a progress reporter that counts
//! training steps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub mod store_cases;

use async_trait::async_trait;
use lprag::{
    Document, DocumentSource, Encoder, Error, G2Rag, GfmConfig, GfmRag, LesegrConfig, LesegrRag,
    LesegrVariant, LpRag, LpRagConfig, QcgRag, Result, Retriever, TrainConfig,
};

/// Six documents of three sentences each (`tests/pipeline.rs`, and `tests/device_parity.rs`,
/// whose figures in `docs/benchmarks.md` were measured on exactly these).
#[allow(dead_code)]
pub fn three_sentence_corpus() -> Vec<Document> {
    vec![
        Document::new("curie", "Marie Curie", "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903. She also won the Nobel Prize in Chemistry in 1911."),
        Document::new("warsaw", "Warsaw", "Warsaw is the capital of Poland. The city lies on the Vistula River. Its Old Town was rebuilt after 1945."),
        Document::new("nobel", "Alfred Nobel", "Alfred Nobel invented dynamite in 1867. He was born in Stockholm. His will established the Nobel Prizes."),
        Document::new("tokyo", "Tokyo", "Tokyo is the capital of Japan. The Sumida River flows through the city. Tokyo hosted the Summer Olympics in 1964."),
        Document::new("kyoto", "Kyoto", "Kyoto was the imperial capital of Japan for over a thousand years. It is famous for its Buddhist temples and gardens."),
        Document::new("everest", "Mount Everest", "Mount Everest is the highest mountain above sea level. It lies in the Himalayas on the border of Nepal and China."),
    ]
}

/// Six documents, one passage each.
#[allow(dead_code)]
pub fn corpus() -> Vec<Document> {
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
            "Tokyo is the capital of Japan. The Sumida River flows through the city.",
        ),
        Document::new(
            "kyoto",
            "Kyoto",
            "Kyoto was the imperial capital of Japan for over a thousand years.",
        ),
        Document::new(
            "everest",
            "Mount Everest",
            "Mount Everest is the highest mountain above sea level, in the Himalayas.",
        ),
    ]
}

/// The offline hashing encoder, as a trait object.
#[allow(dead_code)]
pub fn hashing() -> Arc<dyn Encoder> {
    Arc::new(lprag::HashingEncoder::default())
}

/// LP-RAG's defaults with `epochs` training epochs.
#[allow(dead_code)]
pub fn lprag_config(epochs: usize) -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs,
            ..TrainConfig::default()
        },
        ..LpRagConfig::default()
    }
}

/// GFM-RAG on the CPU, small enough for a test: hidden 8, one layer, one epoch of each
/// training stage on a few queries.
#[allow(dead_code)]
pub fn small_gfm_config() -> GfmConfig {
    let mut c = GfmConfig::cpu();
    c.model.hidden = 8;
    c.model.layers = 1;
    c.pretrain_queries = 10;
    c.synthetic_queries = 2;
    c.pretrain.epochs = 1;
    c.finetune.epochs = 1;
    c
}

/// Each of the five retrievers (LP-RAG, QCG-RAG, G²RAG, LeSeGR lite, GFM-RAG) built on
/// [`corpus`] with small settings and the encoders `enc` makes, with its name, whether or
/// not the build succeeded.
#[allow(dead_code)]
pub async fn build_each(
    enc: impl Fn() -> Arc<dyn Encoder>,
) -> Vec<(&'static str, Result<Arc<dyn Retriever>>)> {
    build_each_on(&corpus(), enc).await
}

/// [`build_each`] on `docs`.
#[allow(dead_code)]
pub async fn build_each_on(
    docs: &[Document],
    enc: impl Fn() -> Arc<dyn Encoder>,
) -> Vec<(&'static str, Result<Arc<dyn Retriever>>)> {
    fn arc<R: Retriever + 'static>(r: Result<R>) -> Result<Arc<dyn Retriever>> {
        r.map(|r| Arc::new(r) as Arc<dyn Retriever>)
    }
    let lprag = LpRag::builder()
        .encoder(enc())
        .config(LpRagConfig {
            train: TrainConfig {
                epochs: 2,
                ..TrainConfig::default()
            },
            ..LpRagConfig::default()
        })
        .build(docs)
        .await;
    let qcg = QcgRag::builder().encoder(enc()).build(docs).await;
    let g2 = G2Rag::builder().encoder(enc()).build(docs).await;
    let lesegr = LesegrRag::builder()
        .encoder(enc())
        .config(LesegrConfig {
            variant: LesegrVariant::Lite,
            ..LesegrConfig::default()
        })
        .build(docs)
        .await;
    let gfm = GfmRag::builder()
        .encoder(enc())
        .config(small_gfm_config())
        .build(docs)
        .await;
    vec![
        ("lprag", arc(lprag)),
        ("qcg", arc(qcg)),
        ("g2", arc(g2)),
        ("lesegr-lite", arc(lesegr)),
        ("gfm", arc(gfm)),
    ]
}

/// [`build_each`], all of them or the first error.
#[allow(dead_code)]
pub async fn retrievers_with(
    enc: impl Fn() -> Arc<dyn Encoder>,
) -> Result<Vec<Arc<dyn Retriever>>> {
    build_each(enc).await.into_iter().map(|(_, r)| r).collect()
}

/// The top `k` of `retriever` for `query` as `(chunk id, score)`, best first.
#[allow(dead_code)]
pub async fn ranked(retriever: &dyn lprag::Retriever, query: &str, k: usize) -> Vec<(usize, f32)> {
    retriever
        .retrieve(query, lprag::Selection::TopK(k))
        .await
        .unwrap()
        .iter()
        .map(|h| (h.chunk.id, h.score))
        .collect()
}

/// Counts the training steps (ticks) each stage reports: zero for a stage means it did
/// not train (for example, resumed from a finished checkpoint).
#[allow(dead_code)] // not every test binary that includes this module uses it
#[derive(Default)]
pub struct StepCounts(std::sync::Mutex<std::collections::HashMap<String, usize>>);

#[allow(dead_code)]
impl StepCounts {
    /// Steps reported by `stage`.
    pub fn get(&self, stage: &str) -> usize {
        self.0.lock().unwrap().get(stage).copied().unwrap_or(0)
    }
}

impl lprag::Progress for StepCounts {
    fn tick(&self, stage: &str, _message: &str) {
        *self.0.lock().unwrap().entry(stage.to_string()).or_default() += 1;
    }
}

/// The hashing encoder with an input limit: a token is a whitespace-separated word, plus
/// two special tokens, at most `max` in all (`tests/chunk_limits.rs`,
/// `tests/streamed_build.rs`).
pub struct Limited {
    inner: lprag::HashingEncoder,
    max: usize,
}

#[async_trait::async_trait]
impl Encoder for Limited {
    fn name(&self) -> &str {
        "limited"
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> Result<lprag::Embeddings> {
        self.inner.embed(texts).await
    }
    fn max_input_tokens(&self) -> Option<usize> {
        Some(self.max)
    }
    fn count_tokens(&self, text: &str) -> Option<usize> {
        Some(text.split_whitespace().count() + 2)
    }
}

/// [`Limited`] at `max` tokens, as a trait object.
#[allow(dead_code)]
pub fn limited(max: usize) -> Arc<dyn Encoder> {
    Arc::new(Limited {
        inner: lprag::HashingEncoder::default(),
        max,
    })
}

/// Hands over `block` documents at a time and counts its reads; fails at position
/// `fail_at` when set.
#[allow(dead_code)]
pub struct Blocks {
    pub documents: Vec<Document>,
    pub block: usize,
    pub reads: AtomicUsize,
    pub fail_at: Option<usize>,
}

impl Blocks {
    /// `documents`, `block` at a time.
    #[allow(dead_code)]
    pub fn new(documents: Vec<Document>, block: usize) -> Self {
        Self {
            documents,
            block,
            reads: AtomicUsize::new(0),
            fail_at: None,
        }
    }
}

#[async_trait]
impl DocumentSource for Blocks {
    async fn read_from(&self, start: usize) -> Result<Vec<Document>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.fail_at.is_some_and(|f| f <= start) {
            return Err(Error::io(
                "corpus.jsonl",
                std::io::Error::other("the disk went away"),
            ));
        }
        let end = (start + self.block).min(self.documents.len());
        Ok(self.documents.get(start..end).unwrap_or_default().to_vec())
    }
}
