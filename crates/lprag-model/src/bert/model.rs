//! The BERT encoder as burn modules (inference only: no dropout).
//!
//! # Shapes
//! - token ids, token type ids, attention mask: `[batch, seq]`
//! - hidden states inside the encoder: `[batch * seq, hidden]` (rows are tokens), so every
//!   dense layer is one `[rows, in] × [in, out]` matrix product
//! - output: `[batch, seq, hidden]` (Hugging Face's `last_hidden_state`)

use burn::module::Module;
use burn::nn::{Embedding, LayerNorm, Linear};
use burn::tensor::activation::{gelu, gelu_approximate, relu};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Int, Tensor};
use rayon::prelude::*;

use super::config::{BertConfig, HiddenAct};

/// Word, position and token-type embeddings, summed and layer-normalised.
#[derive(Module, Debug)]
pub struct BertEmbeddings {
    /// `[vocab_size, hidden]`.
    pub word_embeddings: Embedding,
    /// `[max_position_embeddings, hidden]`; position `i` of every sequence uses row `i`.
    pub position_embeddings: Embedding,
    /// `[type_vocab_size, hidden]`.
    pub token_type_embeddings: Embedding,
    /// Normalisation of the sum.
    pub layer_norm: LayerNorm,
}

impl BertEmbeddings {
    /// # Shapes
    /// `input_ids, token_type_ids: [batch, seq] → [batch * seq, hidden]`
    pub fn forward(&self, input_ids: Tensor<2, Int>, token_type_ids: Tensor<2, Int>) -> Tensor<2> {
        let [b, s] = input_ids.dims();
        let words = self.word_embeddings.forward(input_ids);
        let [_, _, h] = words.dims();
        let types = self.token_type_embeddings.forward(token_type_ids);
        let positions = self
            .position_embeddings
            .weight
            .val()
            .narrow(0, 0, s)
            .unsqueeze_dim::<3>(0);
        let x = words + types + positions;
        self.layer_norm.forward(x.reshape([b * s, h]))
    }
}

/// Multi-head self-attention with its output projection and post-norm residual.
///
/// Query, key and value projections are fused into one `[hidden, 3 * hidden]` layer
/// (columns: all query heads, then key heads, then value heads).
#[derive(Module, Debug)]
pub struct BertAttention {
    /// Fused query/key/value projection.
    pub qkv: Linear,
    /// Output projection (`attention.output.dense`).
    pub output: Linear,
    /// `attention.output.LayerNorm`, applied to `output + input`.
    pub layer_norm: LayerNorm,
    /// Number of heads.
    pub num_heads: usize,
}

impl BertAttention {
    /// # Shapes
    /// `x: [batch * seq, hidden]`, `pad: [batch, heads, seq, seq]` (true = masked key)
    /// `→ [batch * seq, hidden]`
    pub fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        seq: usize,
        pad: Tensor<4, Bool>,
    ) -> Tensor<2> {
        let [_, hidden] = x.dims();
        let heads = self.num_heads;
        let dh = hidden / heads;
        // [b*s, 3h] -> [b, s, 3, heads, dh] -> [3, b, heads, s, dh]
        let qkv = self
            .qkv
            .forward(x.clone())
            .reshape([batch, seq, 3, heads, dh])
            .permute([2, 0, 3, 1, 4]);
        let part = |i: usize| qkv.clone().narrow(0, i, 1).squeeze_dim::<4>(0);
        let ctx = attention(
            part(0),
            part(1),
            part(2),
            Some(pad),
            None,
            AttentionModuleOptions::default(),
        );
        // [b, heads, s, dh] -> [b, s, heads, dh] -> [b*s, hidden]
        let ctx = ctx.swap_dims(1, 2).reshape([batch * seq, hidden]);
        self.layer_norm.forward(self.output.forward(ctx) + x)
    }
}

/// One transformer layer: attention, then the feed-forward block with post-norm residual.
#[derive(Module, Debug)]
pub struct BertLayer {
    /// Self-attention block.
    pub attention: BertAttention,
    /// `intermediate.dense`, `hidden → intermediate`.
    pub intermediate: Linear,
    /// `output.dense`, `intermediate → hidden`.
    pub output: Linear,
    /// `output.LayerNorm`, applied to `output + attention output`.
    pub layer_norm: LayerNorm,
    /// Feed-forward activation.
    #[module(skip)]
    pub act: HiddenAct,
    /// Compute the exact (erf) GELU in host memory, in parallel, with a vectorisable
    /// rational `erf` (a few ulp from the exact one) rather than with the backend's op.
    /// Only worth it when tensors live in host memory (the flex CPU backend), where the
    /// backend's scalar `erf` costs about a fifth of the encoder's time.
    #[module(skip)]
    pub host_gelu: bool,
}

impl BertLayer {
    /// # Shapes
    /// `x: [batch * seq, hidden]`, `pad: [batch, heads, seq, seq] → [batch * seq, hidden]`
    pub fn forward(
        &self,
        x: Tensor<2>,
        batch: usize,
        seq: usize,
        pad: Tensor<4, Bool>,
    ) -> Tensor<2> {
        let a = self.attention.forward(x, batch, seq, pad);
        let h = self.intermediate.forward(a.clone());
        let h = match self.act {
            HiddenAct::Gelu if self.host_gelu => gelu_host(h),
            HiddenAct::Gelu => gelu(h),
            HiddenAct::GeluTanh => gelu_approximate(h),
            HiddenAct::Relu => relu(h),
        };
        self.layer_norm.forward(self.output.forward(h) + a)
    }
}

/// A BERT encoder (Hugging Face `BertModel` without the pooler head).
///
/// Build it with [`BertModel::from_safetensors`]; run it with [`BertModel::forward`].
#[derive(Module, Debug)]
pub struct BertModel {
    /// Input embeddings.
    pub embeddings: BertEmbeddings,
    /// Encoder layers, in order.
    pub layers: Vec<BertLayer>,
    /// Number of attention heads (the attention mask is broadcast to it).
    pub num_heads: usize,
}

impl BertModel {
    /// Contextual token embeddings (`last_hidden_state`).
    ///
    /// `attention_mask` is 1 for real tokens and 0 for padding, as in Hugging Face;
    /// padding keys get no attention, and padded rows of the output are unspecified.
    ///
    /// # Shapes
    /// `input_ids, token_type_ids, attention_mask: [batch, seq] → [batch, seq, hidden]`
    pub fn forward(
        &self,
        input_ids: Tensor<2, Int>,
        token_type_ids: Tensor<2, Int>,
        attention_mask: Tensor<2, Int>,
    ) -> Tensor<3> {
        let [b, s] = input_ids.dims();
        let pad =
            attention_mask
                .equal_elem(0)
                .reshape([b, 1, 1, s])
                .expand([b, self.num_heads, s, s]);
        let mut x = self.embeddings.forward(input_ids, token_type_ids);
        for layer in &self.layers {
            x = layer.forward(x, b, s, pad.clone());
        }
        let [_, h] = x.dims();
        x.reshape([b, s, h])
    }

    /// Width of the hidden states.
    pub fn hidden_size(&self) -> usize {
        self.embeddings.word_embeddings.weight.dims()[1]
    }

    /// Tune for the flex CPU backend (a speed-up there, a slow-down on a GPU): GELU is
    /// computed in host memory with a vectorisable `erf` ([`BertLayer::host_gelu`]).
    /// [`BertModel::from_safetensors`] leaves it off; [`super::SentenceEncoder`] turns it
    /// on for `Device::flex()`.
    pub fn with_cpu_tuning(mut self, on: bool) -> Self {
        for l in &mut self.layers {
            l.host_gelu = on;
        }
        self
    }

    /// Check that `config` describes this model's shapes (used after loading).
    pub(crate) fn matches(&self, config: &BertConfig) -> bool {
        self.hidden_size() == config.hidden_size
            && self.layers.len() == config.num_hidden_layers
            && self.num_heads == config.num_attention_heads
    }
}

/// `erf` for f32 as a rational function of `x` (the approximation of Eigen and XLA:
/// within a few ulp of the exact value, saturating to ±1 beyond |x| = 4). Branch-free,
/// so loops over it vectorise.
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    // Plain multiply-adds: `mul_add` would call a software fma without target features.
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = -2.726_142e-10_f32;
    let p = p * x2 + 2.770_681_4e-8;
    let p = p * x2 - 2.101_024e-6;
    let p = p * x2 - 5.692_506_4e-5;
    let p = p * x2 - 7.349_906e-4;
    let p = p * x2 - 2.954_6e-3;
    let p = p * x2 - 1.609_603_3e-2;
    let q = -1.456_607_2e-5_f32;
    let q = q * x2 - 2.133_740_5e-4;
    let q = q * x2 - 1.682_827e-3;
    let q = q * x2 - 7.373_329e-3;
    let q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// Exact (erf) GELU of every element, computed in host memory in parallel chunks.
///
/// Falls back to the backend's [`gelu`] when the data is not f32.
pub(crate) fn gelu_host(x: Tensor<2>) -> Tensor<2> {
    let device = x.device();
    let mut data = x.into_data();
    match data.as_mut_slice::<f32>() {
        Ok(v) => {
            v.par_chunks_mut(1 << 15).for_each(|c| {
                for x in c {
                    *x = 0.5 * *x * (1.0 + erf_f32(*x * std::f32::consts::FRAC_1_SQRT_2));
                }
            });
            Tensor::from_data(data, &device)
        }
        Err(_) => gelu(Tensor::from_data(data, &device)),
    }
}
