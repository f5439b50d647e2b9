//! [`SentenceEncoder`]: tokenizer + [`BertModel`] + pooling + normalisation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use burn::tensor::{Device, Int, Tensor, TensorData};
use lprag_core::{Embeddings, Encoder, Error, Result};
use tokenizers::{Tokenizer, TruncationParams};

use super::config::{BertConfig, Pipeline, PoolingConfig};
use super::cpu::{CpuBert, Precision};
use super::model::BertModel;
use super::resolve::{resolve_model_dir, DEFAULT_MODEL_ID};
use super::tokens::TokenCounter;

/// Texts per forward pass unless [`SentenceEncoder::with_batch_size`] says otherwise
/// (sentence-transformers' default).
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// A sentence-transformers BERT model (such as all-MiniLM-L6-v2) as an
/// [`lprag_core::Encoder`].
///
/// The pipeline follows sentence-transformers: WordPiece tokenisation from
/// `tokenizer.json` with `[CLS] … [SEP]`, truncation to `max_seq_length`
/// (`sentence_bert_config.json`), the BERT encoder, pooling over the non-padding tokens
/// (`1_Pooling/config.json`; mean for MiniLM), then L2 normalisation when `modules.json`
/// lists a `Normalize` module (it does for all-MiniLM-L6-v2).
///
/// Texts are encoded in batches of [`SentenceEncoder::batch_size`], sorted by token count
/// so each batch is padded only to its own longest text; rows come back in input order.
/// On `Device::flex()` with a CPU that has AVX-512F, the transformer runs on lprag's own
/// f32 kernels (no padding at all, weights packed for the CPU; about 1.35× burn's ops on
/// two cores, the same vectors to about 1e-6): see [`SentenceEncoder::with_cpu_kernels`].
/// On a CPU with AVX-512-FP16, [`SentenceEncoder::with_fp16_kernels`] runs the dense layers
/// in half precision (opt-in; about 1.4× the f32 kernels, vectors within a cosine of
/// 0.99999).
/// [`Encoder::embed`] runs the computation on tokio's blocking pool, so it does not stall
/// an async runtime; [`SentenceEncoder::encode`] is the synchronous entry point. Clones
/// share the model.
#[derive(Clone)]
pub struct SentenceEncoder {
    inner: Arc<Inner>,
    batch_size: usize,
    name: String,
    /// Prepended to queries ([`Encoder::embed_queries`]) and to documents
    /// ([`Encoder::embed`]); empty for symmetric models such as MiniLM.
    query_prefix: String,
    document_prefix: String,
    /// Use [`Inner::cpu`] when there is one.
    cpu_kernels: bool,
    /// Run [`Inner::cpu`]'s dense layers in fp16 where the CPU can.
    fp16: bool,
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation, to count what an input would take, with
    /// `max_seq_length` and `do_lower_case`.
    counter: TokenCounter,
    config: BertConfig,
    device: Device,
    dir: PathBuf,
    pooling: PoolingConfig,
    normalize: bool,
    /// Run several batches at once (the flex CPU backend).
    parallel_batches: bool,
    /// The model packed for lprag's CPU kernels (flex backend on an AVX-512F CPU).
    cpu: Option<CpuBert>,
}

impl std::fmt::Debug for SentenceEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEncoder")
            .field("name", &self.name)
            .field("dir", &self.inner.dir)
            .field("dimension", &self.dimension())
            .field("max_seq_length", &self.inner.counter.max_seq_length())
            .field("pooling", &self.inner.pooling)
            .field("normalize", &self.inner.normalize)
            .field("batch_size", &self.batch_size)
            .field("device", &self.inner.device)
            .field("cpu_kernels", &self.uses_cpu_kernels())
            .field("fp16_kernels", &self.uses_fp16_kernels())
            .finish()
    }
}

/// A model name for [`Encoder::name`]: `org/name` for a Hugging Face cache snapshot
/// (`…/models--org--name/snapshots/…`), else the directory's own name.
pub(super) fn model_name(dir: &Path) -> String {
    for c in dir.components().rev() {
        let c = c.as_os_str().to_string_lossy();
        if let Some(rest) = c.strip_prefix("models--") {
            return rest.replace("--", "/");
        }
    }
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

impl SentenceEncoder {
    /// Load the model in `dir` (a Hugging Face / sentence-transformers model directory)
    /// onto `device` (`Device::flex()` for the pure-Rust CPU backend, or a GPU device when
    /// the crate is built with `wgpu`/`cuda`).
    ///
    /// Reads `config.json`, `tokenizer.json` and `model.safetensors` (required), and
    /// `modules.json`, `sentence_bert_config.json` and the pooling module's `config.json`
    /// when present. Without `modules.json` the output is mean-pooled (or pooled per
    /// `1_Pooling/config.json` if it exists) and not normalised, as sentence-transformers
    /// does for a plain transformers checkpoint. `max_seq_length` defaults to
    /// `max_position_embeddings` and is capped by it.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file or directory that cannot be read (a missing required
    /// file included); [`Error::Format`] naming the file that is malformed or describes
    /// something this encoder cannot run.
    pub fn from_dir(dir: impl AsRef<Path>, device: &Device) -> Result<Self> {
        let dir = dir.as_ref();
        let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let config_path = dir.join("config.json");
        let config = BertConfig::from_file(&config_path)?;

        let modules_path = dir.join("modules.json");
        let pipeline = Pipeline::from_file(&modules_path)?;
        let pooling_path = match &pipeline {
            Some(Pipeline {
                pooling_dir: Some(p),
                ..
            }) => Some(dir.join(p).join("config.json")),
            Some(_) => None,
            None => Some(dir.join("1_Pooling").join("config.json")).filter(|p| p.exists()),
        };
        let pooling = match &pooling_path {
            Some(p) => PoolingConfig::from_file(p)?,
            None => PoolingConfig::default(),
        };
        if let (Some(p), Some(d)) = (&pooling_path, pooling.word_embedding_dimension) {
            if d != config.hidden_size {
                return Err(Error::format(
                    p,
                    format!(
                        "word_embedding_dimension {d} differs from hidden_size {} of config.json",
                        config.hidden_size
                    ),
                ));
            }
        }
        let normalize = pipeline.as_ref().is_some_and(|p| p.normalize);

        let counter = TokenCounter::with_config(dir, &config)?;
        let tokenizer = configure_tokenizer(counter.tokenizer().clone(), counter.max_seq_length())
            .map_err(|m| Error::format(dir.join("tokenizer.json"), m))?;

        let weights_path = dir.join("model.safetensors");
        let on_cpu = *device == Device::flex();
        let model =
            BertModel::from_safetensors(&weights_path, &config, device)?.with_cpu_tuning(on_cpu);
        let cpu = if on_cpu {
            CpuBert::from_model(&model, &config)
        } else {
            None
        };

        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                counter,
                config,
                device: device.clone(),
                dir: dir.to_path_buf(),
                pooling,
                normalize,
                parallel_batches: on_cpu,
                cpu,
            }),
            batch_size: DEFAULT_BATCH_SIZE,
            name: model_name(dir),
            query_prefix: String::new(),
            document_prefix: String::new(),
            cpu_kernels: true,
            fp16: false,
        })
    }

    /// Prefix queries and documents, as instruction-trained models want (e5:
    /// `with_prefixes("query: ", "passage: ")`; bge: its query instruction and `""`).
    /// The prefixes become part of [`Encoder::fingerprint`], so an index built with them
    /// does not reopen without them.
    pub fn with_prefixes(mut self, query: impl Into<String>, document: impl Into<String>) -> Self {
        self.query_prefix = query.into();
        self.document_prefix = document.into();
        self
    }

    /// The prefixes of [`SentenceEncoder::with_prefixes`] (query, document).
    pub fn prefixes(&self) -> (&str, &str) {
        (&self.query_prefix, &self.document_prefix)
    }

    /// `texts` with `prefix` in front (borrowed when there is none).
    fn prefixed<'a>(prefix: &str, texts: &'a [String]) -> std::borrow::Cow<'a, [String]> {
        if prefix.is_empty() {
            std::borrow::Cow::Borrowed(texts)
        } else {
            std::borrow::Cow::Owned(texts.iter().map(|t| format!("{prefix}{t}")).collect())
        }
    }

    /// Embed on tokio's blocking pool when inside a runtime.
    async fn embed_texts(&self, texts: Vec<String>) -> Result<Embeddings> {
        if texts.is_empty() {
            return Ok(Embeddings::empty(self.dimension()));
        }
        let inner = Arc::clone(&self.inner);
        let (batch_size, engine) = (self.batch_size, self.engine());
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || inner.encode(&texts, batch_size, engine))
                .await
                .map_err(|e| {
                    if e.is_cancelled() {
                        Error::Cancelled("bert encoder task".into())
                    } else {
                        Error::backend("bert encoder", e.to_string())
                    }
                })?,
            // Not inside tokio (another executor): compute in place.
            Err(_) => inner.encode(&texts, batch_size, engine),
        }
    }

    /// Find a model with [`resolve_model_dir`] and load it on the pure-Rust CPU backend
    /// (`Device::flex()`). `model` is a Hugging Face model id or a local directory;
    /// `None` means [`DEFAULT_MODEL_ID`] (all-MiniLM-L6-v2).
    ///
    /// # Errors
    /// Those of [`resolve_model_dir`] and [`SentenceEncoder::from_dir`].
    pub fn load(model: Option<&str>) -> Result<Self> {
        Self::load_on(model, &Device::flex())
    }

    /// [`SentenceEncoder::load`] onto `device`.
    ///
    /// # Errors
    /// Those of [`resolve_model_dir`] and [`SentenceEncoder::from_dir`].
    pub fn load_on(model: Option<&str>, device: &Device) -> Result<Self> {
        let model = model.unwrap_or(DEFAULT_MODEL_ID);
        let as_path = Path::new(model);
        let explicit = as_path.is_dir().then_some(as_path);
        let dir = resolve_model_dir(explicit, model)?;
        let mut enc = Self::from_dir(&dir, device)?;
        if explicit.is_none() {
            enc.name = model.to_string();
        }
        Ok(enc)
    }

    /// Use batches of `batch_size` texts (at least 1) per forward pass. Larger batches
    /// amortise per-call overhead; padding waste is small because texts are sorted by
    /// length first. Default [`DEFAULT_BATCH_SIZE`].
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Run the transformer on lprag's CPU kernels (`true`, the default) or on burn's ops
    /// (`false`). The kernels are used only where they apply: on `Device::flex()` with a
    /// CPU that has AVX-512F (x86-64); elsewhere this changes nothing. Both compute in
    /// f32 and agree to about 1e-6; `false` is there to compare them, and as a way back.
    pub fn with_cpu_kernels(mut self, on: bool) -> Self {
        self.cpu_kernels = on;
        self
    }

    /// Whether texts are embedded with lprag's CPU kernels (see
    /// [`SentenceEncoder::with_cpu_kernels`]).
    pub fn uses_cpu_kernels(&self) -> bool {
        self.cpu_kernels && self.inner.cpu.is_some()
    }

    /// Run the CPU kernels' dense layers in half precision (`true`; default `false`):
    /// weights and inputs rounded to fp16, products summed in fp16 64 at a time and in f32
    /// beyond. Applies only where the CPU kernels run
    /// ([`SentenceEncoder::uses_cpu_kernels`]) on a CPU with AVX-512-FP16 (Intel Xeon
    /// since Sapphire Rapids); elsewhere this changes nothing. Faster (1.39× the f32
    /// kernels on MiniLM, two cores), and the vectors move slightly: lowest cosine
    /// 0.999997 to the f32 vectors over MuSiQue-100, recall unchanged
    /// (`docs/benchmarks.md`, "fp16 dense layers"). A block of rows whose fp16 product
    /// overflows is recomputed in f32; values below fp16's normal range (6.1e-5) keep
    /// fewer bits, so check another model's vectors with the encoder bench
    /// (`LPRAG_BENCH_FP16=1 LPRAG_BENCH_PARITY=N`) before relying on it. The encoder's
    /// [`Encoder::fingerprint`] does not change, so an index built in f32 can be queried
    /// in fp16 and the other way round.
    pub fn with_fp16_kernels(mut self, on: bool) -> Self {
        self.fp16 = on;
        self
    }

    /// Whether the dense layers run in fp16 (see [`SentenceEncoder::with_fp16_kernels`]).
    pub fn uses_fp16_kernels(&self) -> bool {
        self.engine() == Some(Precision::F16)
    }

    /// The CPU kernels and their precision, or `None` for burn's ops.
    fn engine(&self) -> Option<Precision> {
        CpuBert::engine(self.inner.cpu.as_ref(), self.cpu_kernels, self.fp16)
    }

    /// Replace the name reported by [`Encoder::name`] (by default the model id, or the
    /// directory name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Texts per forward pass.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Inputs are truncated to this many tokens, `[CLS]` and `[SEP]` included.
    pub fn max_seq_length(&self) -> usize {
        self.inner.counter.max_seq_length()
    }

    /// Whether output rows are L2-normalised.
    pub fn normalizes(&self) -> bool {
        self.inner.normalize
    }

    /// The pooling applied to the token embeddings.
    pub fn pooling(&self) -> &PoolingConfig {
        &self.inner.pooling
    }

    /// The transformer's configuration.
    pub fn config(&self) -> &BertConfig {
        &self.inner.config
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The device the model runs on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The token ids the model sees for `text` (special tokens included, truncated).
    ///
    /// # Errors
    /// [`Error::Backend`] when the tokenizer fails.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let mut enc = self.inner.tokenize(&[text])?;
        Ok(enc.remove(0).ids)
    }

    /// Embed `texts` synchronously on the calling thread: one row per text, in order.
    /// Async callers should use [`Encoder::embed`], which moves this work off the runtime.
    ///
    /// # Errors
    /// [`Error::Backend`] when the tokenizer fails.
    pub fn encode<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Embeddings> {
        self.inner.encode(texts, self.batch_size, self.engine())
    }
}

/// Truncate at `max_len` tokens, no tokenizer-side padding (batches are padded here).
/// `max_len` leaves room beside the special tokens ([`TokenCounter`] checked it).
fn configure_tokenizer(
    mut tokenizer: Tokenizer,
    max_len: usize,
) -> std::result::Result<Tokenizer, String> {
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_len,
            ..TruncationParams::default()
        }))
        .map_err(|e| e.to_string())?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// One tokenised text.
struct Tokens {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
}

impl Inner {
    fn tokenize<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<Tokens>> {
        let encodings = if self.counter.do_lower_case() {
            let lower: Vec<String> = texts.iter().map(|t| t.as_ref().to_lowercase()).collect();
            self.tokenizer
                .encode_batch_fast(lower.iter().map(String::as_str).collect(), true)
        } else {
            self.tokenizer
                .encode_batch_fast(texts.iter().map(AsRef::as_ref).collect(), true)
        }
        .map_err(|e| Error::backend("bert tokenizer", e))?;
        Ok(encodings
            .into_iter()
            .map(|e| Tokens {
                ids: e.get_ids().to_vec(),
                type_ids: e.get_type_ids().to_vec(),
            })
            .collect())
    }

    fn dimension(&self) -> usize {
        self.config.hidden_size * self.pooling.modes()
    }

    fn encode<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        batch_size: usize,
        engine: Option<Precision>,
    ) -> Result<Embeddings> {
        let dim = self.dimension();
        if texts.is_empty() {
            return Ok(Embeddings::empty(dim));
        }
        let tokens = self.tokenize(texts)?;
        // Longest first: the first batch is the most expensive, and any memory
        // problem shows up at once. Stable, so equal lengths keep input order.
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].ids.len()));
        let mut out = vec![0f32; texts.len() * dim];
        let batches: Vec<&[usize]> = order.chunks(batch_size).collect();
        let cpu = self.cpu.as_ref().zip(engine);
        let run = |batch: &&[usize]| match cpu {
            Some((cpu, precision)) => {
                self.forward_cpu(cpu, precision, batch.iter().map(|&i| &tokens[i]))
            }
            None => Ok(self.forward_batch(batch.iter().map(|&i| &tokens[i]))),
        };
        let results: Vec<Vec<f32>> = if self.parallel_batches && batches.len() > 1 {
            // CPU: batches run side by side on rayon's pool. Most of the time goes to
            // matrix products, which are parallel anyway, but much of the rest (the
            // softmax inside attention, layer norms, copies) is single-threaded per
            // batch; two batches in flight keep every core busy (+40% on two cores).
            use rayon::prelude::*;
            batches.par_iter().map(run).collect::<Result<_>>()?
        } else {
            batches.iter().map(run).collect::<Result<_>>()?
        };
        for (batch, rows) in batches.iter().zip(results) {
            for (r, &i) in batch.iter().enumerate() {
                let row = &mut out[i * dim..(i + 1) * dim];
                row.copy_from_slice(&rows[r * dim..(r + 1) * dim]);
                if self.normalize {
                    // torch.nn.functional.normalize: x / max(‖x‖, 1e-12)
                    let n = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                    row.iter_mut().for_each(|x| *x /= n);
                }
            }
        }
        Embeddings::new(dim, out)
    }

    /// Pooled rows (`[batch, dimension]`, flat) of one batch on lprag's CPU kernels.
    fn forward_cpu<'a>(
        &self,
        cpu: &CpuBert,
        precision: Precision,
        batch: impl ExactSizeIterator<Item = &'a Tokens>,
    ) -> Result<Vec<f32>> {
        let seqs: Vec<(&[u32], &[u32])> = batch
            .map(|t| (t.ids.as_slice(), t.type_ids.as_slice()))
            .collect();
        let hidden = cpu
            .forward(&seqs, precision)
            .map_err(|m| Error::backend("bert encoder", m))?;
        let lens: Vec<usize> = seqs.iter().map(|s| s.0.len()).collect();
        Ok(pool_rows(
            &hidden,
            &lens,
            self.config.hidden_size,
            &self.pooling,
        ))
    }

    /// Pooled rows (`[batch, dimension]`, flat) of one padded batch.
    fn forward_batch<'a>(
        &self,
        batch: impl ExactSizeIterator<Item = &'a Tokens> + Clone,
    ) -> Vec<f32> {
        let pad = self.config.pad_token_id as i64;
        let [ids, types, mask] = padded_inputs(
            batch.map(|t| (t.ids.as_slice(), t.type_ids.as_slice())),
            pad,
            &self.device,
        );
        let hidden = self.model.forward(ids, types, mask.clone());
        let pooled = pool(hidden, mask, &self.pooling);
        pooled
            .into_data()
            .try_into_vec_as::<f32>()
            .expect("float tensor converts to f32")
    }
}

/// A batch of token sequences (ids and segment ids) as BERT's three `[batch, seq]`
/// inputs: ids right-padded with `pad` to the longest sequence, segment ids padded with
/// 0, and the attention mask (1 on tokens, 0 on padding).
pub(super) fn padded_inputs<'a>(
    batch: impl ExactSizeIterator<Item = (&'a [u32], &'a [u32])> + Clone,
    pad: i64,
    device: &Device,
) -> [Tensor<2, Int>; 3] {
    let b = batch.len();
    let s = batch.clone().map(|t| t.0.len()).max().unwrap_or(0).max(1);
    let mut ids = vec![pad; b * s];
    let mut types = vec![0i64; b * s];
    let mut mask = vec![0i64; b * s];
    for (r, (tid, tty)) in batch.enumerate() {
        for (j, (&id, &ty)) in tid.iter().zip(tty).enumerate() {
            ids[r * s + j] = id as i64;
            types[r * s + j] = ty as i64;
            mask[r * s + j] = 1;
        }
    }
    let int = |v: Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v, [b, s]), device);
    [int(ids), int(types), int(mask)]
}

/// sentence-transformers' `Pooling`: the enabled modes concatenated in the order cls,
/// max, mean, mean-sqrt-len, over the tokens where `mask` is 1.
///
/// # Shapes
/// `hidden: [batch, seq, hidden]`, `mask: [batch, seq] → [batch, modes * hidden]`
fn pool(hidden: Tensor<3>, mask: Tensor<2, Int>, cfg: &PoolingConfig) -> Tensor<2> {
    let [b, s, h] = hidden.dims();
    let maskf = mask.float().reshape([b, s, 1]);
    let mut parts = Vec::with_capacity(cfg.modes());
    if cfg.pooling_mode_cls_token {
        parts.push(hidden.clone().narrow(1, 0, 1).reshape([b, h]));
    }
    if cfg.pooling_mode_max_tokens {
        let pad = maskf.clone().equal_elem(0.0).expand([b, s, h]);
        parts.push(
            hidden
                .clone()
                .mask_fill(pad, -1e9)
                .max_dim(1)
                .reshape([b, h]),
        );
    }
    if cfg.pooling_mode_mean_tokens || cfg.pooling_mode_mean_sqrt_len_tokens {
        let sum = (hidden * maskf.clone()).sum_dim(1).reshape([b, h]);
        let count = maskf.sum_dim(1).reshape([b, 1]).clamp_min(1e-9);
        if cfg.pooling_mode_mean_tokens {
            parts.push(sum.clone() / count.clone());
        }
        if cfg.pooling_mode_mean_sqrt_len_tokens {
            parts.push(sum / count.sqrt());
        }
    }
    if parts.len() == 1 {
        parts.pop().expect("one part")
    } else {
        Tensor::cat(parts, 1)
    }
}

/// [`pool`] over unpadded sequences: `hidden` holds each sequence's `lens[i]` token rows
/// (`[Σ lens, width]`) back to back; the output is `[lens.len(), modes * width]`.
fn pool_rows(hidden: &[f32], lens: &[usize], width: usize, cfg: &PoolingConfig) -> Vec<f32> {
    let mut out = Vec::with_capacity(lens.len() * cfg.modes() * width);
    let mut start = 0;
    for &len in lens {
        let rows = &hidden[start * width..(start + len) * width];
        start += len;
        if cfg.pooling_mode_cls_token {
            let mut cls = rows[..width.min(rows.len())].to_vec();
            cls.resize(width, 0.0);
            out.extend(cls);
        }
        if cfg.pooling_mode_max_tokens {
            let mut max = vec![if len == 0 { -1e9 } else { f32::NEG_INFINITY }; width];
            for row in rows.chunks_exact(width) {
                max.iter_mut().zip(row).for_each(|(m, &x)| *m = m.max(x));
            }
            out.extend(max);
        }
        if cfg.pooling_mode_mean_tokens || cfg.pooling_mode_mean_sqrt_len_tokens {
            let mut sum = vec![0f32; width];
            for row in rows.chunks_exact(width) {
                sum.iter_mut().zip(row).for_each(|(s, &x)| *s += x);
            }
            let count = (len as f32).max(1e-9);
            if cfg.pooling_mode_mean_tokens {
                out.extend(sum.iter().map(|s| s / count));
            }
            if cfg.pooling_mode_mean_sqrt_len_tokens {
                out.extend(sum.iter().map(|s| s / count.sqrt()));
            }
        }
    }
    out
}

#[async_trait]
impl Encoder for SentenceEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String]) -> Result<Embeddings> {
        self.embed_texts(Self::prefixed(&self.document_prefix, texts).into_owned())
            .await
    }

    async fn embed_queries(&self, texts: &[String]) -> Result<Embeddings> {
        self.embed_texts(Self::prefixed(&self.query_prefix, texts).into_owned())
            .await
    }

    fn embeds_queries_apart(&self) -> bool {
        self.query_prefix != self.document_prefix
    }

    fn fingerprint(&self) -> Option<String> {
        (!self.query_prefix.is_empty() || !self.document_prefix.is_empty()).then(|| {
            format!(
                "prefixes:{:?}/{:?}",
                self.query_prefix, self.document_prefix
            )
        })
    }

    fn max_input_tokens(&self) -> Option<usize> {
        Some(self.inner.counter.max_seq_length())
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        if self.document_prefix.is_empty() {
            self.inner.counter.count(text)
        } else {
            self.inner
                .counter
                .count(&format!("{}{text}", self.document_prefix))
        }
    }
}
