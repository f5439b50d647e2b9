//! [`CrossEncoder`]: a BERT cross-encoder (Hugging Face `BertForSequenceClassification`,
//! such as `cross-encoder/ms-marco-MiniLM-L-6-v2`) as an [`lprag_core::Reranker`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor, TensorData};
use lprag_core::{Error, Reranker, Result};
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};

use super::config::BertConfig;
use super::cpu::{CpuBert, Precision};
use super::model::BertModel;

/// Query–text pairs per forward pass unless [`CrossEncoder::with_batch_size`] says
/// otherwise.
pub const CROSS_ENCODER_BATCH_SIZE: usize = 16;

/// A BERT cross-encoder: reads `[CLS] query [SEP] text [SEP]` (segments 0 and 1) and
/// scores the pair from the `[CLS]` state through BERT's pooler (dense + tanh) and the
/// classification head, as `transformers`' `BertForSequenceClassification` does.
///
/// The score is the head's logit when it has one label (the ms-marco cross-encoders), and
/// `logit[1] − logit[0]` when it has two (relevant vs. not: monotone in the softmax's
/// probability of "relevant"). Pairs longer than the model's `max_position_embeddings`
/// are cut longest-first, as `transformers` does. Runs on tokio's blocking pool from
/// [`Reranker::score`]; clones share the model.
#[derive(Clone)]
pub struct CrossEncoder {
    inner: Arc<Inner>,
    batch_size: usize,
    name: String,
    /// Use [`Inner::cpu`] when there is one.
    cpu_kernels: bool,
    /// Run [`Inner::cpu`]'s dense layers in fp16 where the CPU can.
    fp16: bool,
}

struct Inner {
    model: BertModel,
    /// The model packed for lprag's CPU kernels (flex backend on an AVX-512F CPU).
    cpu: Option<CpuBert>,
    pooler: Linear,
    classifier: Linear,
    labels: usize,
    tokenizer: Tokenizer,
    pad: i64,
    device: Device,
    dir: PathBuf,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("name", &self.name)
            .field("dir", &self.inner.dir)
            .field("labels", &self.inner.labels)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl CrossEncoder {
    /// Load the cross-encoder in `dir`: `config.json`, `tokenizer.json` and
    /// `model.safetensors` with the BERT tensors (optionally under a `bert.` prefix),
    /// `pooler.dense` beside them and `classifier.weight` / `classifier.bias` at the top
    /// level.
    ///
    /// # Errors
    /// [`Error::Io`] naming a missing file; [`Error::Format`] naming the malformed file,
    /// or the missing or misshapen tensor.
    pub fn from_dir(dir: impl AsRef<Path>, device: &Device) -> Result<Self> {
        let dir = dir.as_ref();
        let config_path = dir.join("config.json");
        let config = BertConfig::from_file(&config_path)?;
        let tokenizer_path = dir.join("tokenizer.json");
        let bytes = std::fs::read(&tokenizer_path).map_err(|e| Error::io(&tokenizer_path, e))?;
        let mut tokenizer = Tokenizer::from_bytes(&bytes)
            .map_err(|e| Error::format(&tokenizer_path, e.to_string()))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: config.max_position_embeddings,
                strategy: TruncationStrategy::LongestFirst,
                ..TruncationParams::default()
            }))
            .map_err(|e| Error::format(&tokenizer_path, e.to_string()))?;
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        let (model, pooler, classifier) =
            super::weights::with_classifier(&bytes, &weights_path, &config, device)?;
        let labels = classifier.weight.dims()[1];
        if !(1..=2).contains(&labels) {
            return Err(Error::format(
                &weights_path,
                format!("classifier has {labels} labels; a cross-encoder has 1 or 2"),
            ));
        }
        let on_cpu = *device == Device::flex();
        let cpu = if on_cpu {
            CpuBert::from_model(&model, &config)
        } else {
            None
        };
        Ok(Self {
            inner: Arc::new(Inner {
                cpu,
                model: model.with_cpu_tuning(on_cpu),
                pooler,
                classifier,
                labels,
                tokenizer,
                pad: config.pad_token_id as i64,
                device: device.clone(),
                dir: dir.to_path_buf(),
            }),
            batch_size: CROSS_ENCODER_BATCH_SIZE,
            name: super::encoder::model_name(dir),
            cpu_kernels: true,
            fp16: false,
        })
    }

    /// Pairs per forward pass (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Run the transformer on lprag's CPU kernels (`true`, the default, where they apply:
    /// `Device::flex()` on an AVX-512F CPU) or on burn's ops (`false`), as
    /// [`super::SentenceEncoder::with_cpu_kernels`].
    pub fn with_cpu_kernels(mut self, on: bool) -> Self {
        self.cpu_kernels = on;
        self
    }

    /// Whether pairs are scored with lprag's CPU kernels.
    pub fn uses_cpu_kernels(&self) -> bool {
        self.cpu_kernels && self.inner.cpu.is_some()
    }

    /// Run the CPU kernels' dense layers in fp16 (default `false`), as
    /// [`super::SentenceEncoder::with_fp16_kernels`]: only where the CPU kernels run on a
    /// CPU with AVX-512-FP16; scores move slightly.
    pub fn with_fp16_kernels(mut self, on: bool) -> Self {
        self.fp16 = on;
        self
    }

    /// Whether pairs are scored with the dense layers in fp16.
    pub fn uses_fp16_kernels(&self) -> bool {
        self.engine() == Some(Precision::F16)
    }

    /// The CPU kernels and their precision, or `None` for burn's ops.
    fn engine(&self) -> Option<Precision> {
        CpuBert::engine(self.inner.cpu.as_ref(), self.cpu_kernels, self.fp16)
    }

    /// Rename (the default is the model's id from the Hugging Face cache layout, else the
    /// directory's name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Score `texts` against `query` synchronously on the calling thread: one score per
    /// text, in order. Async callers use [`Reranker::score`].
    ///
    /// # Errors
    /// [`Error::Backend`] when the tokenizer fails.
    pub fn score_sync<S: AsRef<str>>(&self, query: &str, texts: &[S]) -> Result<Vec<f32>> {
        let pairs: Vec<(&str, &str)> = texts.iter().map(|t| (query, t.as_ref())).collect();
        let encodings = self
            .inner
            .tokenizer
            .encode_batch_fast(pairs, true)
            .map_err(|e| Error::backend("cross-encoder tokenizer", e))?;
        let tokens: Vec<(Vec<u32>, Vec<u32>)> = encodings
            .into_iter()
            .map(|e| (e.get_ids().to_vec(), e.get_type_ids().to_vec()))
            .collect();
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].0.len()));
        let mut out = vec![0f32; tokens.len()];
        for batch in order.chunks(self.batch_size) {
            let cpu = self.inner.cpu.as_ref().zip(self.engine());
            let scores = self.inner.forward(cpu, batch.iter().map(|&i| &tokens[i]))?;
            for (&i, s) in batch.iter().zip(scores) {
                out[i] = s;
            }
        }
        Ok(out)
    }
}

impl Inner {
    fn forward<'a>(
        &self,
        cpu: Option<(&CpuBert, Precision)>,
        batch: impl ExactSizeIterator<Item = &'a (Vec<u32>, Vec<u32>)> + Clone,
    ) -> Result<Vec<f32>> {
        let b = batch.len();
        let h = self.model.hidden_size();
        let cls = match cpu {
            Some((cpu, precision)) => {
                // The first token's row of each sequence, from the unpadded hidden states.
                let seqs: Vec<(&[u32], &[u32])> = batch
                    .map(|(ids, types)| (ids.as_slice(), types.as_slice()))
                    .collect();
                let hidden = cpu
                    .forward(&seqs, precision)
                    .map_err(|m| Error::backend("cross-encoder", m))?;
                let mut rows = Vec::with_capacity(b * h);
                let mut start = 0;
                for (ids, _) in &seqs {
                    rows.extend_from_slice(&hidden[start * h..(start + 1) * h]);
                    start += ids.len();
                }
                Tensor::<2>::from_data(TensorData::new(rows, [b, h]), &self.device)
            }
            None => {
                let [ids, types, mask] = super::encoder::padded_inputs(
                    batch.map(|(ids, types)| (ids.as_slice(), types.as_slice())),
                    self.pad,
                    &self.device,
                );
                let hidden = self.model.forward(ids, types, mask);
                hidden.narrow(1, 0, 1).reshape([b, h])
            }
        };
        let pooled = self.pooler.forward(cls).tanh();
        let logits = self.classifier.forward(pooled);
        let logits = if self.labels == 2 {
            logits.clone().narrow(1, 1, 1) - logits.narrow(1, 0, 1)
        } else {
            logits
        };
        Ok(logits
            .reshape([b])
            .into_data()
            .try_into_vec_as::<f32>()
            .expect("float tensor converts to f32"))
    }
}

#[async_trait]
impl Reranker for CrossEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let this = self.clone();
        let query = query.to_string();
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        lprag_core::blocking(move || this.score_sync(&query, &texts)).await
    }
}
