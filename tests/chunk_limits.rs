//! Nothing is cut silently: the default passage chunks are split to fit an encoder's input
//! limit, `TokenChunker` does the same on its own, and chunks another chunker made too long
//! are reported with counts.

use std::sync::Arc;

use crate::common::limited;

use async_trait::async_trait;
use lprag::{
    Chunk, Chunker, Document, Encoder, HashingEncoder, LpRag, LpRagConfig, QcgRag, Result,
    Retriever, Selection, SentenceChunker, TokenChunker, TrainConfig,
};

fn long_doc() -> Document {
    let text = (0..12)
        .map(|i| format!("Sentence number {i} talks about the river Vistula and Warsaw."))
        .collect::<Vec<_>>()
        .join(" ");
    Document::new("long", "Warsaw", text)
}

fn corpus() -> Vec<Document> {
    vec![
        long_doc(),
        Document::new("short", "Kyoto", "Kyoto was the imperial capital of Japan."),
        Document::new("tokyo", "Tokyo", "Tokyo is the capital of Japan."),
    ]
}

fn check_fits(chunks: &[Chunk], docs: &[Document], enc: &dyn Encoder) {
    for c in chunks {
        let t = enc.count_tokens(&c.embedding_text()).unwrap();
        assert!(
            t <= enc.max_input_tokens().unwrap(),
            "{t} tokens: {:?}",
            c.text
        );
        let doc = docs
            .iter()
            .find(|d| d.id == c.provenance.document_id)
            .unwrap();
        assert_eq!(
            &doc.text[c.provenance.span.clone()],
            c.text,
            "span of {:?}",
            c.text
        );
    }
    assert!(chunks.iter().enumerate().all(|(i, c)| c.id == i));
}

#[tokio::test]
async fn token_chunker_splits_long_documents_at_sentences_and_keeps_every_word() {
    let docs = corpus();
    let enc = limited(30);
    let chunks = TokenChunker::new(enc.clone()).chunk(&docs).await.unwrap();
    check_fits(&chunks, &docs, &*enc);
    let long: Vec<&Chunk> = chunks
        .iter()
        .filter(|c| c.provenance.document_id == "long")
        .collect();
    assert!(long.len() >= 4, "{} pieces", long.len());
    // Sentence boundaries: every piece ends a sentence.
    assert!(long.iter().all(|c| c.text.ends_with('.')), "{long:?}");
    let words: Vec<&str> = long
        .iter()
        .flat_map(|c| c.text.split_whitespace())
        .collect();
    assert_eq!(words, docs[0].text.split_whitespace().collect::<Vec<_>>());
    // Short documents stay whole; without a limit nothing is split.
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c.provenance.document_id == "short")
            .count(),
        1
    );
    let whole = TokenChunker::new(Arc::new(HashingEncoder::default()))
        .chunk(&docs)
        .await
        .unwrap();
    assert_eq!(whole.len(), docs.len());
}

#[tokio::test]
async fn splitting_off_thread_equals_splitting_in_place() {
    use lprag::core::Provenance;
    use lprag::text::{split_to_fit, split_to_fit_async};
    // Two long documents among short ones, and a long chunk that is not a slice of its
    // document (its spans stay the whole chunk's).
    let mut docs = corpus();
    let mut other = long_doc();
    other.id = "other".into();
    other.text = other.text.replace("Warsaw", "Krakow");
    docs.push(other);
    for i in 0..20 {
        let text = format!("Short text {i}.");
        docs.push(Document::new(format!("d{i}"), "", text));
    }
    let mut chunks = lprag::PassageChunker.chunk(&docs).await.unwrap();
    let moved = chunks.len();
    chunks.push(Chunk::new(
        moved,
        format!("{} and more words after it", docs[0].text),
        Provenance {
            document_id: "long".into(),
            title: "Warsaw".into(),
            span: 0..docs[0].text.len(),
        },
    ));
    // A later document under a long one's id (a chunker refuses such a corpus): both
    // ways read the last one's text.
    docs.push(Document::new(
        "long",
        "Warsaw",
        "A later text under the same id.",
    ));
    let enc = limited(30);
    let want = split_to_fit(chunks.clone(), &docs, &*enc);
    let got = split_to_fit_async(chunks.clone(), &docs, enc.clone())
        .await
        .unwrap();
    assert_eq!(got.1, 3, "three chunks were too long");
    assert_eq!(got, want);
    assert!(got.0.len() > chunks.len() + 6, "{} chunks", got.0.len());
    // Nothing to split: the chunks come back as they were.
    let few = lprag::PassageChunker.chunk(&docs[1..3]).await.unwrap();
    let same = split_to_fit_async(few.clone(), &docs, enc).await.unwrap();
    assert_eq!(same, (few, 0));
}

fn small() -> LpRagConfig {
    LpRagConfig {
        train: TrainConfig {
            epochs: 1,
            ..TrainConfig::default()
        },
        ..LpRagConfig::default()
    }
}

#[tokio::test]
async fn pipelines_split_default_chunks_and_warn_about_others() {
    let docs = corpus();
    let enc = limited(30);
    let rag = LpRag::builder()
        .encoder(enc.clone())
        .config(small())
        .build(&docs)
        .await
        .unwrap();
    assert!(rag.chunks().len() > docs.len());
    check_fits(rag.chunks(), &docs, &*enc);
    assert!(
        rag.stats()
            .warnings
            .iter()
            .any(|w| w.contains("were split")),
        "{:?}",
        rag.stats().warnings
    );
    // The peers use the same rule.
    let qcg = QcgRag::builder()
        .encoder(enc.clone())
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(qcg.chunks().len(), rag.chunks().len());
    check_fits(qcg.chunks(), &docs, &*enc);
    // A chunker of the user's is not second-guessed, but its over-long chunks are named.
    let one_sentence_cap = limited(12);
    let rag = LpRag::builder()
        .encoder(one_sentence_cap)
        .chunker(Arc::new(LongChunks))
        .config(small())
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.chunks().len(), docs.len());
    let warning = rag
        .stats()
        .warnings
        .iter()
        .find(|w| w.contains("will be cut"))
        .unwrap_or_else(|| panic!("{:?}", rag.stats().warnings));
    assert!(warning.starts_with("1 of 3 chunks"), "{warning}");
    assert!(
        warning.contains("12 tokens; the longest has 123"),
        "{warning}"
    );
    // Whole passages on request: the encoder cuts them, and says so.
    let rag = LpRag::builder()
        .encoder(limited(30))
        .chunker(Arc::new(lprag::PassageChunker))
        .config(small())
        .build(&docs)
        .await
        .unwrap();
    assert_eq!(rag.chunks().len(), docs.len());
    assert!(rag
        .stats()
        .warnings
        .iter()
        .any(|w| w.contains("will be cut")));
    // Splitting keeps retrieval working on the pieces.
    let rag = LpRag::builder()
        .encoder(limited(30))
        .chunker(Arc::new(SentenceChunker::default()))
        .config(small())
        .build(&docs)
        .await
        .unwrap();
    assert!(rag
        .stats()
        .warnings
        .iter()
        .all(|w| !w.contains("will be cut")));
    let hits = rag
        .retrieve("Kyoto imperial capital", Selection::TopK(1))
        .await
        .unwrap();
    assert_eq!(hits[0].chunk.provenance.document_id, "short");
}

/// One chunk per document, under another name than the passage chunker.
struct LongChunks;

#[async_trait]
impl Chunker for LongChunks {
    fn name(&self) -> &str {
        "mine"
    }
    async fn chunk(&self, documents: &[Document]) -> Result<Vec<Chunk>> {
        lprag::PassageChunker.chunk(documents).await
    }
}
