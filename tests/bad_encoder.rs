//! A faulty encoder (non-finite values, the wrong width, no rows) is a typed error in every
//! builder and every retriever, never a panic or a garbage ranking.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lprag::{Embeddings, Encoder, HashingEncoder, Result, Selection};

use crate::common;

const OK: u8 = 0;
const NAN: u8 = 1;
const WIDE: u8 = 2;
const NO_ROWS: u8 = 3;

/// The hashing encoder, broken on demand.
struct Faulty {
    inner: HashingEncoder,
    mode: Arc<AtomicU8>,
}

#[async_trait]
impl Encoder for Faulty {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        let good = self.inner.embed(texts).await?;
        let d = good.dim();
        Ok(match self.mode.load(Ordering::SeqCst) {
            NAN => {
                let mut v = good.as_slice().to_vec();
                let last = v.len() - 1;
                v[last] = f32::NAN;
                Embeddings::new(d, v)?
            }
            WIDE => Embeddings::new(d + 1, vec![0.5; texts.len() * (d + 1)])?,
            NO_ROWS => Embeddings::new(d, Vec::new())?,
            _ => good,
        })
    }
}

fn faulty(mode: &Arc<AtomicU8>) -> impl Fn() -> Arc<dyn Encoder> + '_ {
    move || {
        Arc::new(Faulty {
            inner: HashingEncoder::default(),
            mode: mode.clone(),
        })
    }
}

#[tokio::test]
async fn every_builder_refuses_a_faulty_encoder() {
    for m in [NAN, WIDE, NO_ROWS] {
        let mode = Arc::new(AtomicU8::new(m));
        for (name, built) in common::build_each(faulty(&mode)).await {
            let err = built.err();
            assert!(
                err.is_some(),
                "{name} built with a faulty encoder (mode {m})"
            );
        }
    }
}

#[tokio::test]
async fn every_retriever_refuses_a_faulty_query_embedding() {
    let mode = Arc::new(AtomicU8::new(OK));
    let rs = common::retrievers_with(faulty(&mode)).await.unwrap();
    let q = "Which river flows through Warsaw?";
    for r in &rs {
        assert!(
            r.retrieve(q, Selection::TopK(3)).await.is_ok(),
            "{}",
            r.name()
        );
    }
    for m in [NAN, WIDE, NO_ROWS] {
        mode.store(m, Ordering::SeqCst);
        for r in &rs {
            let err = r.retrieve(q, Selection::TopK(3)).await.err();
            assert!(
                err.is_some(),
                "{} ranked with a faulty query (mode {m})",
                r.name()
            );
        }
    }
}
