//! The library's spans and events: a build span with one child span per stage, one span
//! per retrieve (with its candidate count), for LP-RAG and a peer.

use std::io::Write;
use std::sync::{Arc, Mutex};

use lprag::{HashingEncoder, LpRag, LpRagConfig, QcgRag, Retriever, Selection, TrainConfig};
use tracing_subscriber::fmt::format::FmtSpan;

mod common;

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn builds_and_retrieves_are_traced() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let rag = LpRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .config(LpRagConfig {
            train: TrainConfig {
                epochs: 1,
                ..TrainConfig::default()
            },
            ..LpRagConfig::default()
        })
        .build(&common::corpus())
        .await
        .unwrap();
    rag.retrieve("Which river flows through Warsaw?", Selection::TopK(3))
        .await
        .unwrap();
    let qcg = QcgRag::builder()
        .encoder(Arc::new(HashingEncoder::default()))
        .build(&common::corpus())
        .await
        .unwrap();
    qcg.retrieve("Warsaw", Selection::TopK(3)).await.unwrap();
    let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    for stage in ["chunk", "embed", "graph", "queries", "train"] {
        let line = format!("lprag.build{{documents=6}}:stage{{name=\"{stage}\"}}");
        assert!(log.contains(&line), "no span for stage {stage}:\n{log}");
    }
    assert!(log.contains("stage finished"), "{log}");
    let retrieve = log
        .lines()
        .find(|l| l.contains("lprag.retrieve{") && l.contains("close"))
        .unwrap_or_else(|| panic!("no closed retrieve span:\n{log}"));
    assert!(retrieve.contains("candidates=6"), "{retrieve}");
    assert!(log.contains("qcg.retrieve"), "{log}");
}
