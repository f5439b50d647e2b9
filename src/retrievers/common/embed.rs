//! Embedding in checked batches: every encoder call's rows, width and values are checked
//! (a faulty encoder is a typed error, not a garbage index), with progress per batch; and
//! the checked embedding of a user query.

use std::borrow::Cow;
use std::ops::Range;

use lprag_core::{Chunk, Embeddings, Encoder, Error, NoProgress, Progress, Result};

/// Texts embedded per encoder call while indexing (progress is reported per batch).
const EMBED_BATCH: usize = 256;

/// Texts (chunk embedding texts) embedded in checked batches of [`EMBED_BATCH`].
pub(crate) async fn embed_all(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
) -> Result<Embeddings> {
    embed_matrix(encoder, texts, stage, progress, false).await
}

/// [`embed_all`] for query texts ([`Encoder::embed_queries`]).
pub(crate) async fn embed_all_queries(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
) -> Result<Embeddings> {
    embed_matrix(encoder, texts, stage, progress, true).await
}

async fn embed_matrix(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    queries: bool,
) -> Result<Embeddings> {
    let mut out = Vec::with_capacity(texts.len() * encoder.dimension());
    embed_rows(encoder, texts, stage, progress, &mut out, queries).await?;
    Embeddings::new(encoder.dimension(), out)
}

/// The encoder's embedding of a user query ([`Encoder::embed_queries`]), checked: one
/// row, the encoder's width, finite values (a faulty custom encoder is a typed error, not
/// a garbage ranking).
pub(crate) async fn embed_query(encoder: &dyn Encoder, query: &str) -> Result<Vec<f32>> {
    let mut rows = embed_queries(encoder, &[query.to_string()]).await?;
    rows.pop().ok_or_else(|| Error::DimensionMismatch {
        location: format!("encoder '{}' query embedding", encoder.name()),
        expected: 1,
        actual: 0,
    })
}

/// Embed user queries in encoder batches, one checked vector each.
pub(crate) async fn embed_queries(
    encoder: &dyn Encoder,
    queries: &[String],
) -> Result<Vec<Vec<f32>>> {
    let d = encoder.dimension();
    let mut flat = Vec::with_capacity(queries.len() * d);
    embed_queries_into(encoder, queries, "query embedding", &NoProgress, &mut flat).await?;
    Ok(flat.chunks_exact(d.max(1)).map(<[f32]>::to_vec).collect())
}

/// Query texts ([`Encoder::embed_queries`]) embedded and appended to `out` (row-major, the
/// encoder's width).
pub(crate) async fn embed_queries_into(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    out: &mut Vec<f32>,
) -> Result<()> {
    embed_rows(encoder, texts, stage, progress, out, true).await
}

/// Embed in batches of [`EMBED_BATCH`] appended to `out` (see [`embed_batches`]).
async fn embed_rows(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    out: &mut Vec<f32>,
    queries: bool,
) -> Result<()> {
    let mut sink = |rows: &[f32]| {
        out.extend_from_slice(rows);
        Ok(())
    };
    embed_batches(encoder, texts, stage, progress, &mut sink, queries).await
}

/// Embed `texts` (query texts, [`Encoder::embed_queries`], when `queries`; else
/// [`Encoder::embed`]) in batches of [`EMBED_BATCH`], checking every batch's shape and
/// values before handing its rows to `sink` (row-major, the encoder's width); the rows are
/// not kept.
pub(crate) async fn embed_batches(
    encoder: &dyn Encoder,
    texts: &[String],
    stage: &str,
    progress: &dyn Progress,
    sink: &mut (dyn FnMut(&[f32]) -> Result<()> + Send),
    queries: bool,
) -> Result<()> {
    let batch = |r: Range<usize>| Cow::Borrowed(&texts[r]);
    embed_batches_of(encoder, texts.len(), &batch, stage, progress, sink, queries).await
}

/// The chunks' embedding texts ([`Chunk::embedding_text`]) embedded as [`embed_batches`]
/// does, each batch's texts made as it goes: never every chunk's text at once (1 GB at a
/// million passages).
pub(crate) async fn embed_chunk_batches(
    encoder: &dyn Encoder,
    chunks: &[Chunk],
    stage: &str,
    progress: &dyn Progress,
    sink: &mut (dyn FnMut(&[f32]) -> Result<()> + Send),
) -> Result<()> {
    let batch = |r: Range<usize>| -> Cow<'_, [String]> {
        Cow::Owned(chunks[r].iter().map(Chunk::embedding_text).collect())
    };
    embed_batches_of(encoder, chunks.len(), &batch, stage, progress, sink, false).await
}

/// [`embed_chunk_batches`] collected into one matrix.
pub(crate) async fn embed_all_chunks(
    encoder: &dyn Encoder,
    chunks: &[Chunk],
    stage: &str,
    progress: &dyn Progress,
) -> Result<Embeddings> {
    let mut out = Vec::with_capacity(chunks.len() * encoder.dimension());
    let mut sink = |rows: &[f32]| {
        out.extend_from_slice(rows);
        Ok(())
    };
    embed_chunk_batches(encoder, chunks, stage, progress, &mut sink).await?;
    Embeddings::new(encoder.dimension(), out)
}

/// [`embed_batches`] over `n` texts that `texts_at` gives a range at a time.
async fn embed_batches_of<'t>(
    encoder: &dyn Encoder,
    n: usize,
    texts_at: &(dyn Fn(Range<usize>) -> Cow<'t, [String]> + Sync),
    stage: &str,
    progress: &dyn Progress,
    sink: &mut (dyn FnMut(&[f32]) -> Result<()> + Send),
    queries: bool,
) -> Result<()> {
    progress.start(stage, Some(n as u64));
    for (i, start) in (0..n).step_by(EMBED_BATCH).enumerate() {
        let texts = texts_at(start..(start + EMBED_BATCH).min(n));
        let batch = &*texts;
        let e = if queries {
            encoder.embed_queries(batch).await?
        } else {
            encoder.embed(batch).await?
        };
        if e.rows() != batch.len() {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' output rows", encoder.name()),
                expected: batch.len(),
                actual: e.rows(),
            });
        }
        if e.dim() != encoder.dimension() {
            return Err(Error::DimensionMismatch {
                location: format!("encoder '{}' output width", encoder.name()),
                expected: encoder.dimension(),
                actual: e.dim(),
            });
        }
        if let Some(bad) = e.as_slice().iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(
                format!("encoder '{}' output", encoder.name()),
                format!(
                    "a non-finite value in the embedding of text {} (stage {stage})",
                    i * EMBED_BATCH + bad / e.dim().max(1)
                ),
            ));
        }
        sink(e.as_slice())?;
        progress.update(stage, (i * EMBED_BATCH + batch.len()) as u64, "");
    }
    progress.finish(stage);
    Ok(())
}

/// The embedding of a user query for an index of `dim`-wide embeddings: a query longer
/// than `max_bytes` ([`lprag_core::check_query_len`]) or empty or blank is refused, the
/// rest is trimmed, embedded and checked ([`embed_query`]).
pub(crate) async fn embed_user_query(
    encoder: &dyn Encoder,
    query: &str,
    dim: usize,
    max_bytes: usize,
) -> Result<Vec<f32>> {
    lprag_core::check_query(query, max_bytes)?;
    let q = embed_query(encoder, query.trim()).await?;
    if q.len() != dim {
        return Err(Error::DimensionMismatch {
            location: format!("encoder '{}' query vector", encoder.name()),
            expected: dim,
            actual: q.len(),
        });
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use lprag_core::Provenance;
    use std::sync::Mutex;

    /// The hashing encoder, recording each call's batch size, with NaN for "poison".
    #[derive(Default)]
    struct Recording {
        inner: lprag_text::HashingEncoder,
        calls: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl Encoder for Recording {
        fn name(&self) -> &str {
            "recording"
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
            self.calls.lock().unwrap().push(texts.len());
            let mut e = self.inner.embed(texts).await?.into_vec();
            let d = self.dimension();
            for (i, t) in texts.iter().enumerate() {
                if t.contains("poison") {
                    e[i * d] = f32::NAN;
                }
            }
            Embeddings::new(d, e)
        }
    }

    fn chunks(n: usize, poison: Option<usize>) -> Vec<Chunk> {
        (0..n)
            .map(|i| {
                let word = if poison == Some(i) { "poison" } else { "river" };
                let prov = Provenance {
                    document_id: format!("d{i}"),
                    title: format!("Title {}", i % 7),
                    span: 0..1,
                };
                Chunk::new(
                    i,
                    format!("chunk {i} about the {word} {}", i * 31 % 17),
                    prov,
                )
            })
            .collect()
    }

    /// Chunks embedded a batch of texts at a time equal the whole texts embedded at once.
    #[tokio::test]
    async fn chunks_embedded_batch_by_batch_equal_their_texts_embedded_whole() {
        let enc = Recording::default();
        let cs = chunks(2 * EMBED_BATCH + 37, None);
        let texts: Vec<String> = cs.iter().map(Chunk::embedding_text).collect();
        let whole = enc.inner.embed(&texts).await.unwrap();
        let got = embed_all_chunks(&enc, &cs, "embed chunks", &NoProgress)
            .await
            .unwrap();
        assert_eq!(got, whole);
        assert_eq!(*enc.calls.lock().unwrap(), [EMBED_BATCH, EMBED_BATCH, 37]);
        // A bad value names its text by its place among all the chunks.
        let cs = chunks(2 * EMBED_BATCH + 37, Some(EMBED_BATCH + 5));
        let e = embed_all_chunks(&enc, &cs, "embed chunks", &NoProgress)
            .await
            .unwrap_err();
        let want = format!("text {} (stage embed chunks)", EMBED_BATCH + 5);
        assert!(e.to_string().contains(&want), "{e}");
    }
}
