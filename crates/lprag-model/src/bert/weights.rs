//! Loading a [`BertModel`] from a Hugging Face `model.safetensors`.
//!
//! Tensor names follow `transformers`' `BertModel` (`embeddings.word_embeddings.weight`,
//! `encoder.layer.{i}.attention.self.query.weight`, ...), optionally under a common prefix
//! such as `bert.` (checkpoints of `BertForMaskedLM` and friends). Linear weights are stored
//! `[out, in]` by PyTorch and transposed to burn's `[in, out]`; query, key and value are
//! fused into one layer. F32, F16, BF16 and F64 tensors are read (as f32). The pooler is
//! ignored.

use std::path::{Path, PathBuf};

use burn::module::Param;
use burn::nn::{Embedding, LayerNorm, LayerNormConfig, Linear};
use burn::tensor::{bf16, f16, Device, Tensor, TensorData};
use lprag_core::{Error, Result};
use safetensors::{Dtype, SafeTensors};

use super::config::BertConfig;
use super::model::{BertAttention, BertEmbeddings, BertLayer, BertModel};

const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";

impl BertModel {
    /// Load the weights of `path` (a `model.safetensors`) for the architecture `config`.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Format`] naming the file when
    /// it is not a safetensors file, or a tensor is missing, has an unexpected shape or an
    /// unsupported dtype (the message names the tensor).
    pub fn from_safetensors(path: &Path, config: &BertConfig, device: &Device) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_safetensors_bytes(&bytes, path, config, device)
    }

    /// Like [`BertModel::from_safetensors`] for a file already in memory; `path` only names
    /// it in errors.
    ///
    /// # Errors
    /// [`Error::Format`] naming `path`, as for [`BertModel::from_safetensors`].
    pub fn from_safetensors_bytes(
        bytes: &[u8],
        path: &Path,
        config: &BertConfig,
        device: &Device,
    ) -> Result<Self> {
        config.validate().map_err(|m| Error::format(path, m))?;
        let st = SafeTensors::deserialize(bytes)
            .map_err(|e| Error::format(path, format!("not a safetensors file: {e}")))?;
        let prefix = find_prefix(&st)
            .ok_or_else(|| Error::format(path, format!("no tensor named {WORD_EMBEDDINGS:?}")))?;
        let w = Weights {
            st,
            prefix,
            path: path.to_path_buf(),
            device: device.clone(),
        };
        let model = w.model(config)?;
        debug_assert!(model.matches(config));
        Ok(model)
    }
}

/// A `BertForSequenceClassification` checkpoint: the BERT tensors (under their prefix),
/// the pooler (`{prefix}pooler.dense`) and the head (`classifier`, at the top level), as
/// `(model, pooler, classifier)`.
///
/// # Errors
/// [`Error::Format`] naming `path`, as for [`BertModel::from_safetensors`], or the missing
/// pooler or classifier tensor.
pub(crate) fn with_classifier(
    bytes: &[u8],
    path: &Path,
    config: &BertConfig,
    device: &Device,
) -> Result<(BertModel, Linear, Linear)> {
    config.validate().map_err(|m| Error::format(path, m))?;
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::format(path, format!("not a safetensors file: {e}")))?;
    let prefix = find_prefix(&st)
        .ok_or_else(|| Error::format(path, format!("no tensor named {WORD_EMBEDDINGS:?}")))?;
    let labels = match st.tensor("classifier.weight") {
        Ok(t) if t.shape().len() == 2 => t.shape()[0],
        Ok(t) => {
            return Err(Error::format(
                path,
                format!("tensor \"classifier.weight\" has shape {:?}, expected [labels, {}]", t.shape(), config.hidden_size),
            ))
        }
        Err(_) => {
            return Err(Error::format(
                path,
                "missing tensor \"classifier.weight\": not a sequence-classification (cross-encoder) checkpoint",
            ))
        }
    };
    let mut w = Weights {
        st,
        prefix,
        path: path.to_path_buf(),
        device: device.clone(),
    };
    let h = config.hidden_size;
    let model = w.model(config)?;
    let pooler = w.linear("pooler.dense", h, h)?;
    w.prefix = String::new();
    let classifier = w.linear("classifier", h, labels)?;
    Ok((model, pooler, classifier))
}

/// The prefix under which the BERT tensors live (`""` or `"bert."`, say).
fn find_prefix(st: &SafeTensors<'_>) -> Option<String> {
    let names = st.names();
    if names.contains(&WORD_EMBEDDINGS) {
        return Some(String::new());
    }
    let mut candidates: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix(WORD_EMBEDDINGS))
        .collect();
    candidates.sort_by_key(|p| p.len());
    candidates.first().map(|p| p.to_string())
}

struct Weights<'a> {
    st: SafeTensors<'a>,
    prefix: String,
    path: PathBuf,
    device: Device,
}

impl Weights<'_> {
    fn err(&self, message: String) -> Error {
        Error::format(&self.path, message)
    }

    /// The values of tensor `name` (without prefix) as f32, checking its shape.
    fn values(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .st
            .tensor(&full)
            .map_err(|_| self.err(format!("missing tensor {full:?}")))?;
        if view.shape() != shape {
            return Err(self.err(format!(
                "tensor {full:?} has shape {:?}, expected {shape:?}",
                view.shape()
            )));
        }
        let data = view.data();
        let v: Vec<f32> = match view.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::F64 => data
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32)
                .collect(),
            other => {
                return Err(self.err(format!("tensor {full:?} has unsupported dtype {other:?}")))
            }
        };
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(self.err(format!("tensor {full:?} has a non-finite value at {i}")));
        }
        Ok(v)
    }

    fn tensor1(&self, name: &str, n: usize) -> Result<Tensor<1>> {
        let v = self.values(name, &[n])?;
        Ok(Tensor::from_data(TensorData::new(v, [n]), &self.device))
    }

    fn tensor2(&self, name: &str, rows: usize, cols: usize) -> Result<Tensor<2>> {
        let v = self.values(name, &[rows, cols])?;
        Ok(Tensor::from_data(
            TensorData::new(v, [rows, cols]),
            &self.device,
        ))
    }

    fn embedding(&self, name: &str, n: usize, d: usize) -> Result<Embedding> {
        Ok(Embedding {
            weight: Param::from_tensor(self.tensor2(&format!("{name}.weight"), n, d)?),
        })
    }

    /// Several PyTorch linear layers `[out_i, d_in]` reading the same input, as one burn
    /// layer `[d_in, Σ out_i]` (columns in the order given).
    fn linear_fused(&self, names: &[&str], d_in: usize, d_out: usize) -> Result<Linear> {
        let total = d_out * names.len();
        let mut weight = vec![0f32; d_in * total];
        let mut bias = Vec::with_capacity(total);
        for (k, name) in names.iter().enumerate() {
            let w = self.values(&format!("{name}.weight"), &[d_out, d_in])?;
            for o in 0..d_out {
                for i in 0..d_in {
                    weight[i * total + k * d_out + o] = w[o * d_in + i];
                }
            }
            bias.extend(self.values(&format!("{name}.bias"), &[d_out])?);
        }
        Ok(Linear {
            weight: Param::from_tensor(Tensor::from_data(
                TensorData::new(weight, [d_in, total]),
                &self.device,
            )),
            bias: Some(Param::from_tensor(Tensor::from_data(
                TensorData::new(bias, [total]),
                &self.device,
            ))),
        })
    }

    fn linear(&self, name: &str, d_in: usize, d_out: usize) -> Result<Linear> {
        self.linear_fused(&[name], d_in, d_out)
    }

    /// `{name}.weight`/`{name}.bias`, or the older `{name}.gamma`/`{name}.beta`.
    fn layer_norm(&self, name: &str, d: usize, eps: f64) -> Result<LayerNorm> {
        let new_style = format!("{}{name}.weight", self.prefix);
        let (g, b) = if self.st.names().contains(&new_style.as_str()) {
            ("weight", "bias")
        } else {
            ("gamma", "beta")
        };
        let mut ln = LayerNormConfig::new(d).with_epsilon(eps).init(&self.device);
        ln.gamma = Param::from_tensor(self.tensor1(&format!("{name}.{g}"), d)?);
        ln.beta = Some(Param::from_tensor(self.tensor1(&format!("{name}.{b}"), d)?));
        Ok(ln)
    }

    fn model(&self, c: &BertConfig) -> Result<BertModel> {
        let h = c.hidden_size;
        let eps = c.layer_norm_eps;
        let embeddings = BertEmbeddings {
            word_embeddings: self.embedding("embeddings.word_embeddings", c.vocab_size, h)?,
            position_embeddings: self.embedding(
                "embeddings.position_embeddings",
                c.max_position_embeddings,
                h,
            )?,
            token_type_embeddings: self.embedding(
                "embeddings.token_type_embeddings",
                c.type_vocab_size,
                h,
            )?,
            layer_norm: self.layer_norm("embeddings.LayerNorm", h, eps)?,
        };
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let p = format!("encoder.layer.{i}");
                let qkv = ["query", "key", "value"].map(|n| format!("{p}.attention.self.{n}"));
                let qkv: Vec<&str> = qkv.iter().map(String::as_str).collect();
                Ok(BertLayer {
                    attention: BertAttention {
                        qkv: self.linear_fused(&qkv, h, h)?,
                        output: self.linear(&format!("{p}.attention.output.dense"), h, h)?,
                        layer_norm: self.layer_norm(
                            &format!("{p}.attention.output.LayerNorm"),
                            h,
                            eps,
                        )?,
                        num_heads: c.num_attention_heads,
                    },
                    intermediate: self.linear(
                        &format!("{p}.intermediate.dense"),
                        h,
                        c.intermediate_size,
                    )?,
                    output: self.linear(&format!("{p}.output.dense"), c.intermediate_size, h)?,
                    layer_norm: self.layer_norm(&format!("{p}.output.LayerNorm"), h, eps)?,
                    act: c.hidden_act,
                    host_gelu: false,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BertModel {
            embeddings,
            layers,
            num_heads: c.num_attention_heads,
        })
    }
}
