//! Helpers shared by the trainers, predictors and checkpoints: atomic, versioned JSON
//! manifests, row normalisation, tensors from rows, the BCE loss, scalars out of tensors
//! and negative draws. It depends on none of the modules that use it.

use std::path::Path;

use burn::tensor::activation::log_sigmoid;
use burn::tensor::{Device, Tensor, TensorData};
use lprag_core::dot;
use lprag_core::{Embeddings, Error, Result};
use lprag_graph::{NegativeSampler, NegativeSampling};
use rand::rngs::StdRng;

use crate::config::Negatives;
use crate::host::HostGraph;

/// Write `bytes` to `path` atomically and durably ([`lprag_core::dirs::write_atomic`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    lprag_core::dirs::write_atomic(path, bytes)
}

/// Write `value` as pretty JSON to `path`, atomically (the counterpart of
/// [`read_versioned`]).
pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| Error::format(path, e.to_string()))?;
    write_atomic(path, &json)
}

/// The JSON manifest at `path`, its `format_version` checked against `version` before the
/// rest is read.
pub(crate) fn read_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    version: u32,
) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))?;
    let found = v.get("format_version").and_then(|x| x.as_u64());
    if found != Some(version as u64) {
        return Err(Error::format(
            path,
            format!("format version {found:?}, this build reads version {version}"),
        ));
    }
    serde_json::from_value(v).map_err(|e| Error::format(path, e.to_string()))
}

fn normalized(e: &Embeddings) -> Embeddings {
    let mut e = e.clone();
    e.normalize();
    e
}

/// `e` with unit rows: borrowed when every row already has norm 1 or 0, as most encoders'
/// output does, so the node features are not copied; else a normalised copy. "Norm 1"
/// allows 1e-4: an encoder's f32 normalisation of a 1024-d row, re-measured in f32,
/// is off by a few 1e-6, and rescaling by that little changes nothing a model learns.
pub(crate) fn unit_rows(e: &Embeddings) -> std::borrow::Cow<'_, Embeddings> {
    let unit = e.iter().all(|r| {
        let n = dot(r, r).sqrt();
        n == 0.0 || (n - 1.0).abs() <= 1e-4
    });
    if unit {
        std::borrow::Cow::Borrowed(e)
    } else {
        std::borrow::Cow::Owned(normalized(e))
    }
}

/// `v` scaled to unit norm (a zero vector unchanged).
pub(crate) fn normalize_vec(v: &[f32]) -> Vec<f32> {
    let n = dot(v, v).sqrt();
    if n > 0.0 {
        v.iter().map(|x| x / n).collect()
    } else {
        v.to_vec()
    }
}

/// A `[rows, d]` tensor from row-major data.
pub(crate) fn rows_tensor(data: Vec<f32>, rows: usize, d: usize, device: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(data, [rows, d]), device)
}

/// A `[rows, d]` tensor holding `e`.
pub(crate) fn to_tensor(e: &Embeddings, device: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(
        TensorData::new(e.as_slice().to_vec(), [e.rows(), e.dim()]),
        device,
    )
}

/// Draws negative chunks for a positive edge (degrees from the message-passing graph).
pub(crate) struct NegativeDraw(NegativeSampler);

impl NegativeDraw {
    pub(crate) fn new(kind: Negatives, num_chunks: usize, host: &HostGraph) -> Result<Self> {
        let degrees: Vec<u32> = (0..num_chunks as u32)
            .map(|i| host.neighbors(i).len() as u32)
            .collect();
        let strategy = match kind {
            Negatives::Uniform => NegativeSampling::Uniform,
            Negatives::Degree(power) => NegativeSampling::Degree { power },
        };
        Ok(Self(NegativeSampler::new(&degrees, strategy)?))
    }

    /// One chunk other than `positive` (callers guarantee at least two chunks).
    pub(crate) fn draw(&self, rng: &mut StdRng, positive: u32) -> u32 {
        self.0
            .sample_excluding(rng, 1, &[positive])
            .ok()
            .and_then(|v| v.first().copied())
            .unwrap_or(positive)
    }
}

/// BCE with negative sampling: `−mean log σ(pos) − mean log(1 − σ(neg))`.
pub(crate) fn bce(logits: Tensor<1>, positives: usize) -> Tensor<1> {
    let p = logits.dims()[0];
    let pos = logits.clone().narrow(0, 0, positives);
    let loss = log_sigmoid(pos).mean().neg();
    if p > positives {
        let neg = logits.narrow(0, positives, p - positives);
        loss - log_sigmoid(neg.neg()).mean()
    } else {
        loss
    }
}

/// The first value of `t` (NaN when it cannot be read).
pub(crate) fn scalar(t: Tensor<1>) -> f32 {
    t.into_data()
        .try_into_vec::<f32>()
        .map(|v| v[0])
        .unwrap_or(f32::NAN)
}
