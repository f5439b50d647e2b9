//! Embedding in checked batches: every encoder call's rows, width and values are checked
//! (a faulty encoder is a typed error, not a garbage index), with progress per batch; and
//! the checked embedding of a user query.

use lprag_core::{Embeddings, Encoder, Error, NoProgress, Progress, Result};

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
    progress.start(stage, Some(texts.len() as u64));
    for (i, batch) in texts.chunks(EMBED_BATCH).enumerate() {
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
