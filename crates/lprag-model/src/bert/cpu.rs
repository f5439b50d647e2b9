//! The BERT forward pass on the CPU in plain Rust, which [`super::SentenceEncoder`] uses
//! on `Device::flex()` when the CPU has AVX-512F (others keep burn's ops).
//!
//! How: each dense layer's weights are packed once into panels of 48 columns for an
//! 8 × 48 register-blocked f32 kernel (bias, activation, residual and layer norm applied
//! as each block of rows is written); a batch's sequences are laid back to back without
//! padding (a token is a row); attention runs per sequence and head over that sequence's
//! own tokens. Everything is f32, like the burn model; only the order of the sums
//! differs (outputs agree to about 1e-6). On request ([`Precision::F16`], CPUs with
//! AVX-512-FP16) the dense layers multiply in half precision instead: weights and inputs
//! rounded to fp16, products summed in fp16 64 at a time and in f32 beyond.

use std::sync::OnceLock;

use rayon::prelude::*;

use super::config::{BertConfig, HiddenAct};
use super::model::{erf_f32, BertModel};

/// Output columns per packed panel: three 16-lane registers.
const NR: usize = 48;
/// Rows per kernel call (8 × 3 accumulators of the 32 registers).
const MR: usize = 8;
/// Rows per parallel task of a dense layer.
const ROW_BLOCK: usize = 128;
/// Pairs of inputs (`k`) the fp16 kernel sums in fp16 before adding into f32: each fp16
/// lane sums this many products (one input of each pair), an output's two lanes together
/// `2 · HALF_CHUNK` inputs. 16, 32 and 64 are measured in `docs/benchmarks.md`.
const HALF_CHUNK: usize = 64;

/// The arithmetic of the dense layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    /// f32 throughout.
    F32,
    /// fp16 weights and inputs, sums in fp16 over [`HALF_CHUNK`] pairs and f32 beyond
    /// (needs [`CpuBert::half_available`]).
    F16,
}

/// A dense layer `[in, out]` packed as `[panel][in][NR]` (zero past `out`) with its bias
/// (zero-padded to whole panels).
struct Packed {
    k: usize,
    n: usize,
    data: Vec<f32>,
    bias: Vec<f32>,
    /// The weights as fp16 bits, `[panel][k / 2][NR][2]` (pairs of inputs side by side,
    /// zero past `k` and `n`), made on first use of [`Precision::F16`].
    half: OnceLock<Vec<u16>>,
}

impl Packed {
    fn new(w: &[f32], k: usize, n: usize, bias: Option<Vec<f32>>) -> Self {
        let panels = n.div_ceil(NR);
        let mut data = vec![0f32; panels * k * NR];
        for p in 0..panels {
            let cols = (n - p * NR).min(NR);
            for q in 0..k {
                let dst = (p * k + q) * NR;
                data[dst..dst + cols].copy_from_slice(&w[q * n + p * NR..q * n + p * NR + cols]);
            }
        }
        let mut b = bias.unwrap_or_else(|| vec![0f32; n]);
        b.resize(panels * NR, 0.0);
        Self {
            k,
            n,
            data,
            bias: b,
            half: OnceLock::new(),
        }
    }

    /// The fp16 weights (see [`Packed::half`]), made from the f32 panels once.
    fn half(&self) -> &[u16] {
        self.half.get_or_init(|| {
            let (k, panels) = (self.k, self.n.div_ceil(NR));
            let kp = k.div_ceil(2);
            let mut staged = vec![0f32; panels * kp * 2 * NR];
            for p in 0..panels {
                for q in 0..k {
                    let src = &self.data[(p * k + q) * NR..(p * k + q + 1) * NR];
                    let dst = (p * kp + q / 2) * 2 * NR + q % 2;
                    for (c, &w) in src.iter().enumerate() {
                        staged[dst + 2 * c] = w;
                    }
                }
            }
            let mut half = vec![0u16; staged.len()];
            to_half(&staged, &mut half);
            half
        })
    }
}

/// A layer norm's scale and shift.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// One transformer layer's weights.
struct Layer {
    qkv: Packed,
    attention_out: Packed,
    attention_norm: Norm,
    intermediate: Packed,
    out: Packed,
    out_norm: Norm,
    act: HiddenAct,
}

/// What a dense layer does to its rows after `x · W + b`, in order.
#[derive(Clone, Copy, Default)]
struct Epilogue<'a> {
    act: Option<HiddenAct>,
    residual: Option<&'a [f32]>,
    norm: Option<&'a Norm>,
}

/// A BERT encoder's weights laid out for [`CpuBert::forward`].
pub(crate) struct CpuBert {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    eps: f32,
}

impl std::fmt::Debug for CpuBert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBert")
            .field("hidden", &self.hidden)
            .field("heads", &self.heads)
            .field("layers", &self.layers.len())
            .finish()
    }
}

/// A tensor's values as f32 (`None` when it holds another type).
fn values<const D: usize>(t: burn::tensor::Tensor<D>) -> Option<Vec<f32>> {
    t.into_data().try_into_vec::<f32>().ok()
}

fn linear(l: &burn::nn::Linear) -> Option<Packed> {
    let [k, n] = l.weight.dims();
    let w = values(l.weight.val())?;
    let b = match &l.bias {
        Some(b) => Some(values(b.val())?),
        None => None,
    };
    Some(Packed::new(&w, k, n, b))
}

fn norm(l: &burn::nn::LayerNorm, width: usize) -> Option<Norm> {
    let gamma = values(l.gamma.val())?;
    let beta = match &l.beta {
        Some(b) => values(b.val())?,
        None => vec![0.0; width],
    };
    Some(Norm { gamma, beta })
}

impl CpuBert {
    /// Whether this CPU runs these kernels (x86-64 with AVX-512F).
    pub(crate) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Whether this CPU also runs [`Precision::F16`] (AVX-512-FP16 and AVX-512BW).
    pub(crate) fn half_available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            Self::available()
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512fp16")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// What an encoder with `cpu` (its packed model, if any) runs on: `None` for burn's
    /// ops (no packed model, or the kernels turned off), else the kernels in f32, or in
    /// fp16 when asked for and [`CpuBert::half_available`].
    pub(crate) fn engine(cpu: Option<&CpuBert>, on: bool, fp16: bool) -> Option<Precision> {
        (on && cpu.is_some()).then(|| {
            if fp16 && Self::half_available() {
                Precision::F16
            } else {
                Precision::F32
            }
        })
    }

    /// `model`'s weights, copied and packed; `None` when this CPU cannot run the kernels
    /// or the weights are not f32.
    pub(crate) fn from_model(model: &BertModel, config: &BertConfig) -> Option<Self> {
        if !Self::available() {
            return None;
        }
        let hidden = model.hidden_size();
        let e = &model.embeddings;
        let layers = model
            .layers
            .iter()
            .map(|l| {
                Some(Layer {
                    qkv: linear(&l.attention.qkv)?,
                    attention_out: linear(&l.attention.output)?,
                    attention_norm: norm(&l.attention.layer_norm, hidden)?,
                    intermediate: linear(&l.intermediate)?,
                    out: linear(&l.output)?,
                    out_norm: norm(&l.layer_norm, hidden)?,
                    act: l.act,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            word: values(e.word_embeddings.weight.val())?,
            position: values(e.position_embeddings.weight.val())?,
            token_type: values(e.token_type_embeddings.weight.val())?,
            embedding_norm: norm(&e.layer_norm, hidden)?,
            layers,
            hidden,
            heads: model.num_heads,
            eps: config.layer_norm_eps as f32,
        })
    }

    /// The last hidden states of each sequence (`(token ids, token type ids)`), back to
    /// back: `[total tokens, hidden]`, row-major.
    ///
    /// The dense layers compute in `precision` ([`Precision::F16`] falls back to f32
    /// where [`CpuBert::half_available`] is false).
    ///
    /// # Errors
    /// A message naming the id when a token, token type or position is outside the
    /// model's tables (a tokenizer that does not belong to the model).
    pub(crate) fn forward(
        &self,
        seqs: &[(&[u32], &[u32])],
        precision: Precision,
    ) -> Result<Vec<f32>, String> {
        let precision = match precision {
            Precision::F16 if Self::half_available() => Precision::F16,
            _ => Precision::F32,
        };
        let h = self.hidden;
        let lens: Vec<usize> = seqs.iter().map(|s| s.0.len()).collect();
        let total: usize = lens.iter().sum();
        let (vocab, types, positions) = (
            self.word.len() / h,
            self.token_type.len() / h,
            self.position.len() / h,
        );
        let mut x = Vec::with_capacity(total * h);
        for (ids, tys) in seqs {
            if ids.len() > positions {
                return Err(format!(
                    "a sequence of {} tokens is longer than the model's {positions} positions",
                    ids.len()
                ));
            }
            for (j, (&id, &ty)) in ids.iter().zip(tys.iter()).enumerate() {
                let (id, ty) = (id as usize, ty as usize);
                if id >= vocab {
                    return Err(format!(
                        "token id {id} is outside the vocabulary of {vocab}"
                    ));
                }
                if ty >= types {
                    return Err(format!(
                        "token type {ty} is outside the model's {types} types"
                    ));
                }
                let w = &self.word[id * h..(id + 1) * h];
                let t = &self.token_type[ty * h..(ty + 1) * h];
                let p = &self.position[j * h..(j + 1) * h];
                x.extend(w.iter().zip(t).zip(p).map(|((w, t), p)| w + t + p));
            }
        }
        let norm_only = Epilogue {
            norm: Some(&self.embedding_norm),
            ..Epilogue::default()
        };
        x.par_chunks_mut(ROW_BLOCK * h)
            .for_each(|block| finish(block, 0, h, norm_only, self.eps));
        // One set of buffers for every layer: no allocation, zeroing or page faults
        // past the first layer (every element is written before it is read).
        let mut bufs = Buffers::default();
        for layer in &self.layers {
            self.layer(layer, &mut x, &lens, total, precision, &mut bufs);
        }
        Ok(x)
    }

    /// One layer over `x` (`[m, hidden]`), in place.
    fn layer(
        &self,
        l: &Layer,
        x: &mut [f32],
        lens: &[usize],
        m: usize,
        precision: Precision,
        b: &mut Buffers,
    ) {
        let none = Epilogue::default();
        let h = self.hidden;
        let dense = |x: &[f32], w: &Packed, epi: Epilogue<'_>, out: &mut [f32]| {
            dense(x, m, w, epi, self.eps, precision, out);
        };
        let qkv = sized(&mut b.qkv, m * 3 * h);
        dense(x, &l.qkv, none, qkv);
        let ctx = sized(&mut b.ctx, m * h);
        attention(qkv, lens, h, self.heads, ctx);
        let a = sized(&mut b.a, m * h);
        dense(
            ctx,
            &l.attention_out,
            Epilogue {
                residual: Some(x),
                norm: Some(&l.attention_norm),
                ..none
            },
            a,
        );
        let f = sized(&mut b.f, m * l.intermediate.n);
        dense(
            a,
            &l.intermediate,
            Epilogue {
                act: Some(l.act),
                ..none
            },
            f,
        );
        dense(
            f,
            &l.out,
            Epilogue {
                residual: Some(a),
                norm: Some(&l.out_norm),
                ..none
            },
            x,
        );
    }
}

/// Scratch space of [`CpuBert::forward`], reused by every layer.
#[derive(Default)]
struct Buffers {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    a: Vec<f32>,
    f: Vec<f32>,
}

/// The first `len` values of `buf`, grown (with zeros) when it is shorter.
fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// `x · W + b` for the `m` rows of `x` (`[m, w.k]`), then the epilogue, into `out`
/// (`[m, w.n]`; every element is written). [`Precision::F16`] needs
/// [`CpuBert::half_available`]; a block of rows whose fp16 product is not finite is
/// recomputed in f32.
fn dense(
    x: &[f32],
    m: usize,
    w: &Packed,
    epi: Epilogue<'_>,
    eps: f32,
    precision: Precision,
    out: &mut [f32],
) {
    let (k, n) = (w.k, w.n);
    assert_eq!(x.len(), m * k, "dense input is [m, k]");
    assert_eq!(out.len(), m * n, "dense output is [m, n]");
    if m == 0 {
        return;
    }
    let panels = n.div_ceil(NR);
    let half = (precision == Precision::F16).then(|| w.half());
    out.par_chunks_mut(ROW_BLOCK * n).enumerate().for_each_init(
        Vec::new,
        |scratch, (bi, block)| {
            let r0 = bi * ROW_BLOCK;
            let rows = block.len() / n;
            let a = &x[r0 * k..(r0 + rows) * k];
            // f32, or fp16 that overflowed (a sum past fp16's 65,504): this block again
            // in f32, so fp16 never turns finite inputs into infinities.
            let finite =
                half.is_some_and(|half| half_product(a, rows, k, half, &w.bias, block, n, scratch));
            if !finite {
                for p in 0..panels {
                    let cols = (n - p * NR).min(NR);
                    let panel = &w.data[p * k * NR..(p + 1) * k * NR];
                    let bias = &w.bias[p * NR..(p + 1) * NR];
                    let c = &mut block[p * NR..];
                    panel_product(a, k, k, panel, bias, c, n, rows, cols);
                }
            }
            finish(block, r0, n, epi, eps);
        },
    );
}

/// `a · W + bias` in fp16 for the `rows` rows of `a` (`[rows, k]`) into `c` (`[rows, n]`):
/// `a` is rounded to fp16 into `scratch` (whole tiles of [`MR`] rows, zero past `rows`
/// and `k`), then [`half_tile`] runs over every panel of `half` (see [`Packed::half`]).
/// Whether every value written is finite.
#[allow(clippy::too_many_arguments)]
fn half_product(
    a: &[f32],
    rows: usize,
    k: usize,
    half: &[u16],
    bias: &[f32],
    c: &mut [f32],
    n: usize,
    scratch: &mut Vec<u16>,
) -> bool {
    let kp = k.div_ceil(2);
    let lda = 2 * kp;
    let tiles = rows.div_ceil(MR);
    if scratch.len() < tiles * MR * lda {
        scratch.resize(tiles * MR * lda, 0);
    }
    let scratch = &mut scratch[..tiles * MR * lda];
    for (src, dst) in a.chunks_exact(k).zip(scratch.chunks_exact_mut(lda)) {
        to_half(src, &mut dst[..k]);
        dst[k..].fill(0);
    }
    scratch[rows * lda..].fill(0);
    let mut finite = true;
    for p in 0..n.div_ceil(NR) {
        let cols = (n - p * NR).min(NR);
        let panel = &half[p * kp * 2 * NR..(p + 1) * kp * 2 * NR];
        for t in 0..tiles {
            let tile_rows = (rows - t * MR).min(MR);
            let a = &scratch[t * MR * lda..(t + 1) * MR * lda];
            let c = &mut c[t * MR * n + p * NR..];
            finite &= half_tile(a, lda, kp, panel, &bias[p * NR..], c, n, tile_rows, cols);
        }
    }
    finite
}

/// `src` rounded to fp16 (to nearest even) into `dst`, as bits.
fn to_half(src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len(), "to_half converts like for like");
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: only reached through a `CpuBert`, which exists where AVX-512F is; the
        // lengths match.
        unsafe { avx512::to_half(src, dst) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("CpuBert is only built on x86-64 with AVX-512F")
}

/// One `rows × cols` tile (`rows ≤ MR`, `cols ≤ NR`) of `a · panel + bias` in fp16 into
/// `c` (row stride `ldc`, f32): `a` holds [`MR`] rows of `2 · kp` fp16 values (row stride
/// `lda`; all of them are read, only `rows` are stored), `panel` `[kp][NR][2]`. Whether
/// every value stored is finite.
#[allow(clippy::too_many_arguments)]
fn half_tile(
    a: &[u16],
    lda: usize,
    kp: usize,
    panel: &[u16],
    bias: &[f32],
    c: &mut [f32],
    ldc: usize,
    rows: usize,
    cols: usize,
) -> bool {
    assert!(rows <= MR && cols <= NR && rows > 0 && kp > 0 && 2 * kp <= lda);
    assert!(a.len() >= (MR - 1) * lda + 2 * kp && panel.len() >= kp * 2 * NR);
    assert!(bias.len() >= NR && c.len() >= (rows - 1) * ldc + cols);
    assert!(
        CpuBert::half_available(),
        "the fp16 kernel needs AVX-512-FP16"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX-512F, BW and FP16 (asserted), and the asserts above
        // keep every access the kernel makes inside the slices.
        unsafe { avx512::half_tile(a, lda, kp, panel, bias, c, ldc, rows, cols) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("CpuBert is only built on x86-64 with AVX-512F")
}

/// The epilogue over a block of output rows starting at row `r0`.
fn finish(block: &mut [f32], r0: usize, n: usize, epi: Epilogue<'_>, eps: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: only reached through a `CpuBert`, which exists where AVX-512F is.
        unsafe { avx512::finish(block, r0, n, epi, eps) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    finish_body(block, r0, n, epi, eps)
}

/// The body of [`finish`], inlined into its AVX-512 instance so the loops vectorise.
#[inline(always)]
fn finish_body(block: &mut [f32], r0: usize, n: usize, epi: Epilogue<'_>, eps: f32) {
    for (r, row) in block.chunks_exact_mut(n).enumerate() {
        if let Some(act) = epi.act {
            activate(row, act);
        }
        if let Some(res) = epi.residual {
            let res = &res[(r0 + r) * n..(r0 + r + 1) * n];
            row.iter_mut().zip(res).for_each(|(y, r)| *y += r);
        }
        if let Some(nm) = epi.norm {
            layer_norm(row, nm, eps);
        }
    }
}

/// `rows × cols` of `a · panel + bias` into `c`, [`tile`] after tile: `a` is
/// `[rows, k]` with row stride `lda`, `c` has row stride `ldc`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn panel_product(
    a: &[f32],
    lda: usize,
    k: usize,
    panel: &[f32],
    bias: &[f32],
    c: &mut [f32],
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    let mut t = 0;
    while t < rows {
        let tile_rows = (rows - t).min(MR);
        let (a, c) = (&a[t * lda..], &mut c[t * ldc..]);
        tile(a, lda, k, panel, bias, c, ldc, tile_rows, cols);
        t += tile_rows;
    }
}

/// One `rows × cols` tile (`rows ≤ MR`, `cols ≤ NR`) of `a · panel + bias` into `c`
/// (row stride `ldc`): `a` is `[rows, k]` with row stride `lda`, `panel` `[k, NR]`,
/// `bias` `[NR]`.
#[allow(clippy::too_many_arguments)]
fn tile(
    a: &[f32],
    lda: usize,
    k: usize,
    panel: &[f32],
    bias: &[f32],
    c: &mut [f32],
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    assert!(rows <= MR && cols <= NR && rows > 0 && k <= lda);
    assert!(a.len() >= (rows - 1) * lda + k && panel.len() >= k * NR && bias.len() >= NR);
    assert!(c.len() >= (rows - 1) * ldc + cols);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `CpuBert` exists only where `available()` saw AVX-512F, and the
        // asserts above keep every access the kernel makes inside the slices.
        unsafe { avx512::tile(a, lda, k, panel, bias, c, ldc, rows, cols) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, lda, k, panel, bias, c, ldc, rows, cols);
        unreachable!("CpuBert is only built on x86-64 with AVX-512F")
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{HALF_CHUNK, MR, NR};

    /// See [`super::tile`], whose asserts this relies on.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a` reaches `(rows - 1) · lda + k`, `panel` holds `k × NR`
    /// and `bias` `NR` values, and `c` reaches `(rows - 1) · ldc + cols`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile(
        a: &[f32],
        lda: usize,
        k: usize,
        panel: &[f32],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
        rows: usize,
        cols: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 3]; MR];
        let ap = a.as_ptr();
        let bp = panel.as_ptr();
        // `acc[r] += a[r, ..k] · panel` for the first `$rows` rows. A macro, not a
        // function: through a call (even inlined) the accumulators went to the stack and
        // the encoder ran at 60 % of its speed; written out, they stay in registers.
        macro_rules! accumulate {
            ($rows:expr) => {
                for q in 0..k {
                    // SAFETY: q < k, so the panel's row q (NR values) is inside `panel`.
                    let b = unsafe {
                        let row = bp.add(q * NR);
                        [
                            _mm512_loadu_ps(row),
                            _mm512_loadu_ps(row.add(16)),
                            _mm512_loadu_ps(row.add(32)),
                        ]
                    };
                    for (r, acc) in acc.iter_mut().enumerate().take($rows) {
                        // SAFETY: r < rows and q < k: inside `a`.
                        let x = _mm512_set1_ps(unsafe { *ap.add(r * lda + q) });
                        for v in 0..3 {
                            acc[v] = _mm512_fmadd_ps(x, b[v], acc[v]);
                        }
                    }
                }
            };
        }
        // A whole tile with the row count a constant, so the row loop unrolls.
        if rows == MR {
            accumulate!(MR);
        } else {
            accumulate!(rows);
        }
        let cp = c.as_mut_ptr();
        for (r, acc) in acc.iter().enumerate().take(rows) {
            for (v, &sum) in acc.iter().enumerate() {
                let c0 = v * 16;
                if c0 >= cols {
                    break;
                }
                let mask = lanes(cols - c0);
                // SAFETY: the bias has NR values; the store writes the `cols - c0` (at most 16) columns
                // from c0 of row r, inside `c` by the caller's bound.
                unsafe {
                    let b = _mm512_loadu_ps(bias.as_ptr().add(c0));
                    _mm512_mask_storeu_ps(cp.add(r * ldc + c0), mask, _mm512_add_ps(sum, b));
                }
            }
        }
    }

    /// The mask of the first `left` of 16 lanes (all of them from 16 on).
    #[inline(always)]
    fn lanes(left: usize) -> __mmask16 {
        if left >= 16 {
            0xffff
        } else {
            ((1u32 << left) - 1) as u16
        }
    }

    /// See [`super::to_half`].
    ///
    /// # Safety
    /// The CPU has AVX-512F; `src` and `dst` have the same length.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn to_half(src: &[f32], dst: &mut [u16]) {
        const ROUND: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        let (whole, tail) = (src.len() / 16 * 16, src.len() % 16);
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 ≤ whole ≤ both lengths.
            unsafe {
                let h = _mm512_cvtps_ph::<ROUND>(_mm512_loadu_ps(src.as_ptr().add(i)));
                _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), h);
            }
        }
        if tail > 0 {
            let (mut x, mut h) = ([0f32; 16], [0u16; 16]);
            x[..tail].copy_from_slice(&src[whole..]);
            // SAFETY: both buffers hold 16 values.
            unsafe {
                let v = _mm512_cvtps_ph::<ROUND>(_mm512_loadu_ps(x.as_ptr()));
                _mm256_storeu_si256(h.as_mut_ptr().cast(), v);
            }
            dst[whole..].copy_from_slice(&h[..tail]);
        }
    }

    /// See [`super::half_tile`], whose asserts this relies on.
    ///
    /// Each of the 24 accumulators holds 16 columns × 2 inputs in fp16 (`vfmadd231ph`,
    /// written in assembly: Rust's fp16 intrinsics are not stable); every [`HALF_CHUNK`]
    /// pairs they are widened and added into f32 sums, and at the end each column's two
    /// lanes are added.
    ///
    /// Whether every value stored is finite.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and FP16; `a` reaches `(MR - 1) · lda + 2 · kp`, `panel`
    /// holds `kp × 2 · NR` and `bias` `NR` values, and `c` reaches
    /// `(rows - 1) · ldc + cols`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn half_tile(
        a: &[u16],
        lda: usize,
        kp: usize,
        panel: &[u16],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
        rows: usize,
        cols: usize,
    ) -> bool {
        // f32 sums: row r, columns 16v..16v+8 (pairs) in [2v], 16v+8..16v+16 in [2v + 1].
        let mut sums = [[_mm512_setzero_ps(); 6]; MR];
        let ap = a.as_ptr();
        // SAFETY: r < MR rows of `a` exist.
        let row = |r: usize| unsafe { ap.add(r * lda) };
        let mut q0 = 0;
        while q0 < kp {
            let q1 = (q0 + HALF_CHUNK).min(kp);
            let mut acc = [_mm512_setzero_si512(); 24];
            // SAFETY: for q in q0..q1 (q1 > q0, q1 ≤ kp) the loop reads 4 bytes at byte
            // offset 4q of each of the MR rows (inside `a`: 2q + 2 ≤ 2 · kp values) and
            // 192 bytes (NR pairs) at pair q of `panel`; it writes only registers.
            unsafe {
                std::arch::asm!(
                    "2:",
                    "vmovdqu64 zmm24, [{b}]",
                    "vmovdqu64 zmm25, [{b} + 64]",
                    "vmovdqu64 zmm26, [{b} + 128]",
                    "vpbroadcastd zmm27, dword ptr [{a0} + {i}]",
                    "vfmadd231ph zmm0, zmm27, zmm24",
                    "vfmadd231ph zmm1, zmm27, zmm25",
                    "vfmadd231ph zmm2, zmm27, zmm26",
                    "vpbroadcastd zmm28, dword ptr [{a1} + {i}]",
                    "vfmadd231ph zmm3, zmm28, zmm24",
                    "vfmadd231ph zmm4, zmm28, zmm25",
                    "vfmadd231ph zmm5, zmm28, zmm26",
                    "vpbroadcastd zmm27, dword ptr [{a2} + {i}]",
                    "vfmadd231ph zmm6, zmm27, zmm24",
                    "vfmadd231ph zmm7, zmm27, zmm25",
                    "vfmadd231ph zmm8, zmm27, zmm26",
                    "vpbroadcastd zmm28, dword ptr [{a3} + {i}]",
                    "vfmadd231ph zmm9, zmm28, zmm24",
                    "vfmadd231ph zmm10, zmm28, zmm25",
                    "vfmadd231ph zmm11, zmm28, zmm26",
                    "vpbroadcastd zmm27, dword ptr [{a4} + {i}]",
                    "vfmadd231ph zmm12, zmm27, zmm24",
                    "vfmadd231ph zmm13, zmm27, zmm25",
                    "vfmadd231ph zmm14, zmm27, zmm26",
                    "vpbroadcastd zmm28, dword ptr [{a5} + {i}]",
                    "vfmadd231ph zmm15, zmm28, zmm24",
                    "vfmadd231ph zmm16, zmm28, zmm25",
                    "vfmadd231ph zmm17, zmm28, zmm26",
                    "vpbroadcastd zmm27, dword ptr [{a6} + {i}]",
                    "vfmadd231ph zmm18, zmm27, zmm24",
                    "vfmadd231ph zmm19, zmm27, zmm25",
                    "vfmadd231ph zmm20, zmm27, zmm26",
                    "vpbroadcastd zmm28, dword ptr [{a7} + {i}]",
                    "vfmadd231ph zmm21, zmm28, zmm24",
                    "vfmadd231ph zmm22, zmm28, zmm25",
                    "vfmadd231ph zmm23, zmm28, zmm26",
                    "add {b}, 192",
                    "add {i}, 4",
                    "cmp {i}, {end}",
                    "jb 2b",
                    b = inout(reg) panel.as_ptr().add(q0 * 2 * NR) => _,
                    i = inout(reg) q0 * 4 => _,
                    end = in(reg) q1 * 4,
                    a0 = in(reg) row(0),
                    a1 = in(reg) row(1),
                    a2 = in(reg) row(2),
                    a3 = in(reg) row(3),
                    a4 = in(reg) row(4),
                    a5 = in(reg) row(5),
                    a6 = in(reg) row(6),
                    a7 = in(reg) row(7),
                    inout("zmm0") acc[0],
                    inout("zmm1") acc[1],
                    inout("zmm2") acc[2],
                    inout("zmm3") acc[3],
                    inout("zmm4") acc[4],
                    inout("zmm5") acc[5],
                    inout("zmm6") acc[6],
                    inout("zmm7") acc[7],
                    inout("zmm8") acc[8],
                    inout("zmm9") acc[9],
                    inout("zmm10") acc[10],
                    inout("zmm11") acc[11],
                    inout("zmm12") acc[12],
                    inout("zmm13") acc[13],
                    inout("zmm14") acc[14],
                    inout("zmm15") acc[15],
                    inout("zmm16") acc[16],
                    inout("zmm17") acc[17],
                    inout("zmm18") acc[18],
                    inout("zmm19") acc[19],
                    inout("zmm20") acc[20],
                    inout("zmm21") acc[21],
                    inout("zmm22") acc[22],
                    inout("zmm23") acc[23],
                    out("zmm24") _,
                    out("zmm25") _,
                    out("zmm26") _,
                    out("zmm27") _,
                    out("zmm28") _,
                    options(nostack, readonly),
                );
            }
            for (sums, acc) in sums.iter_mut().zip(acc.chunks_exact(3)) {
                for (v, &h) in acc.iter().enumerate() {
                    let lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
                    let hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(h));
                    sums[2 * v] = _mm512_add_ps(sums[2 * v], lo);
                    sums[2 * v + 1] = _mm512_add_ps(sums[2 * v + 1], hi);
                }
            }
            q0 = q1;
        }
        // Lanes hold (even input, odd input) per column: add each pair, keep the evens.
        let evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        let infinity = _mm512_set1_ps(f32::INFINITY);
        let mut finite = true;
        let cp = c.as_mut_ptr();
        for (r, sums) in sums.iter().enumerate().take(rows) {
            for v in 0..3 {
                let c0 = v * 16;
                if c0 >= cols {
                    break;
                }
                let (lo, hi) = (sums[2 * v], sums[2 * v + 1]);
                let lo = _mm512_add_ps(lo, _mm512_permute_ps::<0b10_11_00_01>(lo));
                let hi = _mm512_add_ps(hi, _mm512_permute_ps::<0b10_11_00_01>(hi));
                let sum = _mm512_permutex2var_ps(lo, evens, hi);
                let mask = lanes(cols - c0);
                // SAFETY: the bias has NR values; the store writes the `cols - c0` (at most 16) columns
                // from c0 of row r, inside `c` by the caller's bound.
                unsafe {
                    let y = _mm512_add_ps(sum, _mm512_loadu_ps(bias.as_ptr().add(c0)));
                    _mm512_mask_storeu_ps(cp.add(r * ldc + c0), mask, y);
                    // |y| < ∞ is false for ±∞ and NaN.
                    let ok =
                        _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(mask, _mm512_abs_ps(y), infinity);
                    finite &= ok == mask;
                }
            }
        }
        finite
    }

    /// See [`super::finish`].
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn finish(
        block: &mut [f32],
        r0: usize,
        n: usize,
        epi: super::Epilogue<'_>,
        eps: f32,
    ) {
        super::finish_body(block, r0, n, epi, eps)
    }

    /// See [`super::attend`].
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn attend(
        qkv: &[f32],
        len: usize,
        hidden: usize,
        heads: usize,
        ctx: &mut [f32],
        bufs: &mut super::AttentionBuffers,
    ) {
        super::attend_body(qkv, len, hidden, heads, ctx, bufs)
    }
}

/// Self-attention of every sequence (`lens`, back to back) over the fused projections
/// `qkv` (`[tokens, 3 · hidden]`: queries, keys, values, each head after head):
/// the context `[tokens, hidden]` into `ctx` (every element is written).
fn attention(qkv: &[f32], lens: &[usize], hidden: usize, heads: usize, ctx: &mut [f32]) {
    let mut parts = Vec::with_capacity(lens.len());
    let (mut rest, mut q) = (ctx, qkv);
    for &len in lens {
        let (mine, tail) = rest.split_at_mut(len * hidden);
        let (qmine, qtail) = q.split_at(len * 3 * hidden);
        parts.push((qmine, len, mine));
        rest = tail;
        q = qtail;
    }
    parts
        .into_par_iter()
        .for_each_init(AttentionBuffers::default, |bufs, (q, len, out)| {
            attend(q, len, hidden, heads, out, bufs);
        });
}

/// Scratch space of [`attend`], reused across the sequences one thread takes.
#[derive(Default)]
struct AttentionBuffers {
    q: Vec<f32>,
    kt: Vec<f32>,
    vp: Vec<f32>,
    scores: Vec<f32>,
}

/// `buf` cleared to `len` zeros.
fn zeroed(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.clear();
    buf.resize(len, 0.0);
    buf
}

/// One sequence's attention, every head (see [`attention`]).
fn attend(
    qkv: &[f32],
    len: usize,
    hidden: usize,
    heads: usize,
    ctx: &mut [f32],
    bufs: &mut AttentionBuffers,
) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: only reached through a `CpuBert`, which exists where AVX-512F is.
        unsafe { avx512::attend(qkv, len, hidden, heads, ctx, bufs) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    attend_body(qkv, len, hidden, heads, ctx, bufs)
}

/// The body of [`attend`], inlined into its AVX-512 instance so the loops vectorise.
///
/// Per head, both products go through [`tile`]: scores `Q · Kᵀ` with the keys packed as
/// panels (the scale folded into the queries), a row softmax, then `P · V` with the values
/// packed, written straight into the head's columns of `ctx`.
#[inline(always)]
fn attend_body(
    qkv: &[f32],
    len: usize,
    hidden: usize,
    heads: usize,
    ctx: &mut [f32],
    bufs: &mut AttentionBuffers,
) {
    if len == 0 {
        return;
    }
    let dh = hidden / heads;
    let stride = 3 * hidden;
    let scale = 1.0 / (dh as f32).sqrt();
    let key_panels = len.div_ceil(NR);
    let value_panels = dh.div_ceil(NR);
    let q = zeroed(&mut bufs.q, len * dh);
    // Zero past the last key / value column, so whole panels can be read.
    let kt = zeroed(&mut bufs.kt, key_panels * dh * NR);
    let vp = zeroed(&mut bufs.vp, value_panels * len * NR);
    let scores = zeroed(&mut bufs.scores, len * len);
    let zero = [0f32; NR];
    for h in 0..heads {
        for j in 0..len {
            let row = &qkv[j * stride..(j + 1) * stride];
            q[j * dh..(j + 1) * dh]
                .iter_mut()
                .zip(&row[h * dh..(h + 1) * dh])
                .for_each(|(q, &x)| *q = x * scale);
            let (p, c) = (j / NR, j % NR);
            for (d, &k) in row[hidden + h * dh..hidden + (h + 1) * dh]
                .iter()
                .enumerate()
            {
                kt[(p * dh + d) * NR + c] = k;
            }
            let value = &row[2 * hidden + h * dh..2 * hidden + (h + 1) * dh];
            for (vpanel, part) in value.chunks(NR).enumerate() {
                let at = (vpanel * len + j) * NR;
                vp[at..at + part.len()].copy_from_slice(part);
            }
        }
        for p in 0..key_panels {
            let cols = (len - p * NR).min(NR);
            let panel = &kt[p * dh * NR..(p + 1) * dh * NR];
            let c = &mut scores[p * NR..];
            panel_product(q, dh, dh, panel, &zero, c, len, len, cols);
        }
        for row in scores.chunks_exact_mut(len) {
            softmax(row);
        }
        for p in 0..value_panels {
            let cols = (dh - p * NR).min(NR);
            let panel = &vp[p * len * NR..(p + 1) * len * NR];
            let c = &mut ctx[h * dh + p * NR..];
            panel_product(scores, len, len, panel, &zero, c, hidden, len, cols);
        }
    }
}

/// In-place softmax of one row.
#[inline(always)]
fn softmax(row: &mut [f32]) {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = row.chunks_exact(16);
    let mut max = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = if x > *l { x } else { *l };
        }
    }
    for l in lanes {
        max = if l > max { l } else { max };
    }
    row.iter_mut().for_each(|s| *s = exp_f32(*s - max));
    let inv = 1.0 / sum_f32(row);
    row.iter_mut().for_each(|s| *s *= inv);
}

/// A sum in 16 running lanes (so it vectorises).
#[inline(always)]
fn sum_f32(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let chunks = xs.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    lanes.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

/// `e^x` for f32, branch-free (Cephes' polynomial after a power-of-two range
/// reduction; within 2 ulp over the range softmax uses). Saturates below `e^-87`.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding it leaves an integer-valued f32 in the low mantissa bits.
    const SHIFTER: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.3);
    let n = (x * LOG2E + 0.5).floor();
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2ⁿ from n's bits (n is an integer in [-126, 127] after the clamp): not `n as i32`,
    // whose saturating conversion keeps the loops that call this from vectorising.
    let n_bits = (n + SHIFTER).to_bits().wrapping_sub(SHIFTER.to_bits());
    y * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// In-place layer norm of one row.
#[inline(always)]
fn layer_norm(row: &mut [f32], nm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = sum_f32(row) / n;
    let mut lanes = [0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += (x - mean) * (x - mean);
        }
    }
    let var =
        (lanes.iter().sum::<f32>() + tail.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>()) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((x, g), b) in row.iter_mut().zip(&nm.gamma).zip(&nm.beta) {
        *x = (*x - mean) * inv * g + b;
    }
}

/// The feed-forward activation, in place.
#[inline(always)]
fn activate(row: &mut [f32], act: HiddenAct) {
    match act {
        HiddenAct::Gelu => row
            .iter_mut()
            .for_each(|x| *x = 0.5 * *x * (1.0 + erf_f32(*x * std::f32::consts::FRAC_1_SQRT_2))),
        HiddenAct::GeluTanh => row.iter_mut().for_each(|x| {
            let y = 0.797_884_6 * (*x + 0.044_715 * *x * *x * *x);
            // tanh(y) = 1 - 2 / (e^{2y} + 1)
            let t = 1.0 - 2.0 / (exp_f32(2.0 * y) + 1.0);
            *x = 0.5 * *x * (1.0 + t);
        }),
        HiddenAct::Relu => row.iter_mut().for_each(|x| *x = x.max(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        super::super::tests::values(n, seed, 1.0)
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        super::super::tests::max_abs_diff(a, b)
    }

    /// Shapes that are not whole tiles or panels (37 rows: 4 tiles and 5; 100 columns:
    /// panels of 48, 48 and 4), with each epilogue, against a plain triple loop.
    #[test]
    fn dense_matches_a_plain_product_with_every_epilogue() {
        if !CpuBert::available() {
            println!("skipping: this CPU has no AVX-512F (the kernels are not used here)");
            return;
        }
        let (m, k, n) = (37, 50, 100);
        let x = values(m * k, 1);
        let w = values(k * n, 2);
        let bias = values(n, 3);
        let residual = values(m * n, 4);
        let nm = Norm {
            gamma: values(n, 5).iter().map(|g| g + 1.0).collect(),
            beta: values(n, 6),
        };
        let packed = Packed::new(&w, k, n, Some(bias.clone()));
        let mut plain = vec![0f32; m * n];
        for r in 0..m {
            for c in 0..n {
                let mut acc = 0f64;
                for q in 0..k {
                    acc += x[r * k + q] as f64 * w[q * n + c] as f64;
                }
                plain[r * n + c] = acc as f32 + bias[c];
            }
        }
        let none = Epilogue::default();
        let mut out = vec![f32::NAN; m * n];
        dense(&x, m, &packed, none, 1e-12, Precision::F32, &mut out);
        assert!(max_diff(&out, &plain) < 1e-5, "{}", max_diff(&out, &plain));

        for act in [HiddenAct::Gelu, HiddenAct::GeluTanh, HiddenAct::Relu] {
            let mut want = plain.clone();
            for y in &mut want {
                let v = *y as f64;
                *y = match act {
                    // erf_f32 itself is checked against burn's erf in bert::tests.
                    HiddenAct::Gelu => {
                        0.5 * *y * (1.0 + erf_f32(*y * std::f32::consts::FRAC_1_SQRT_2))
                    }
                    HiddenAct::GeluTanh => {
                        let t = (0.797_884_560_8 * (v + 0.044_715 * v * v * v)).tanh();
                        (0.5 * v * (1.0 + t)) as f32
                    }
                    HiddenAct::Relu => v.max(0.0) as f32,
                };
            }
            dense(
                &x,
                m,
                &packed,
                Epilogue {
                    act: Some(act),
                    ..none
                },
                1e-12,
                Precision::F32,
                &mut out,
            );
            assert!(
                max_diff(&out, &want) < 1e-5,
                "{act:?}: {}",
                max_diff(&out, &want)
            );
        }

        let mut want = plain.clone();
        for (r, row) in want.chunks_exact_mut(n).enumerate() {
            row.iter_mut()
                .zip(&residual[r * n..(r + 1) * n])
                .for_each(|(y, r)| *y += r);
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
            for (c, y) in row.iter_mut().enumerate() {
                *y = ((*y as f64 - mean) / (var + 1e-12).sqrt() * nm.gamma[c] as f64
                    + nm.beta[c] as f64) as f32;
            }
        }
        dense(
            &x,
            m,
            &packed,
            Epilogue {
                residual: Some(&residual),
                norm: Some(&nm),
                ..none
            },
            1e-12,
            Precision::F32,
            &mut out,
        );
        assert!(max_diff(&out, &want) < 1e-4, "{}", max_diff(&out, &want));
    }

    /// The fp16 product against an f64 loop: an odd `k` (a zero-padded last pair), 37
    /// rows and 100 columns (partial tiles and panels), `k` past one fp16 chunk; inputs
    /// that overflow fp16 fall back to f32 and stay finite.
    #[test]
    fn half_dense_stays_close_to_a_plain_product() {
        if !CpuBert::half_available() {
            println!("skipping: this CPU has no AVX-512-FP16 (the fp16 kernel is not used)");
            return;
        }
        let (m, n) = (37, 100);
        for k in [1, 51, 2 * HALF_CHUNK * 3 + 7] {
            let x = values(m * k, 7);
            let w = values(k * n, 8);
            let bias = values(n, 9);
            let packed = Packed::new(&w, k, n, Some(bias.clone()));
            let mut plain = vec![0f32; m * n];
            for r in 0..m {
                for c in 0..n {
                    let mut acc = 0f64;
                    for q in 0..k {
                        acc += x[r * k + q] as f64 * w[q * n + c] as f64;
                    }
                    plain[r * n + c] = acc as f32 + bias[c];
                }
            }
            let mut out = vec![f32::NAN; m * n];
            let none = Epilogue::default();
            dense(&x, m, &packed, none, 1e-12, Precision::F16, &mut out);
            let (mut err, mut norm) = (0f64, 0f64);
            for (o, p) in out.iter().zip(&plain) {
                err += ((o - p) as f64).powi(2);
                norm += (*p as f64).powi(2);
            }
            let rel = (err / norm).sqrt();
            // fp16 rounding (2^-11 relative) of both factors and of the partial sums.
            assert!(rel < 2e-3, "k {k}: relative rms error {rel:.2e}");
            assert!(rel > 0.0, "k {k}: exact, so the fp16 kernel did not run");

            // 1e5 is past fp16's range: the block is recomputed in f32.
            let big: Vec<f32> = x.iter().map(|v| v * 1e5).collect();
            dense(&big, m, &packed, none, 1e-12, Precision::F16, &mut out);
            let mut want = vec![0f32; m * n];
            dense(&big, m, &packed, none, 1e-12, Precision::F32, &mut want);
            assert!(out.iter().all(|y| y.is_finite()), "k {k}: not finite");
            assert_eq!(out, want, "k {k}: the overflow fallback is the f32 product");
        }
    }

    /// `to_half` rounds to nearest even like IEEE's fp16, over whole vectors and tails.
    #[test]
    fn to_half_rounds_like_ieee() {
        if !CpuBert::available() {
            println!("skipping: this CPU has no AVX-512F (the kernels are not used here)");
            return;
        }
        // (value, fp16 bits): exact, two ties (half an fp16 ulp past 1 and one and a half
        // ulp: to the even neighbour), largest, overflow,
        // subnormal, underflow, negative.
        let cases = [
            (1.0f32, 0x3c00u16),
            (1.0 + 2.0 / 4096.0, 0x3c00),
            (1.0 + 6.0 / 4096.0, 0x3c02),
            (65504.0, 0x7bff),
            (70000.0, 0x7c00),
            (6.0e-8, 0x0001),
            (1.0e-9, 0x0000),
            (-2.5, 0xc100),
        ];
        for len in [1, 8, 16, 17, 40] {
            let src: Vec<f32> = (0..len).map(|i| cases[i % cases.len()].0).collect();
            let mut dst = vec![0xffffu16; len];
            to_half(&src, &mut dst);
            for (i, &h) in dst.iter().enumerate() {
                let (v, want) = cases[i % cases.len()];
                assert_eq!(h, want, "{v} at {i} of {len}: {h:#06x}");
            }
        }
    }

    /// Attention over sequences of 1, 5 and 53 tokens (two key panels) with heads of 60
    /// (two value panels) and of 8, against softmax(q·k/√d)·v computed plainly.
    #[test]
    fn attention_matches_plain_softmax_attention() {
        if !CpuBert::available() {
            println!("skipping: this CPU has no AVX-512F (the kernels are not used here)");
            return;
        }
        for (hidden, heads) in [(120, 2), (24, 3)] {
            let lens = [1usize, 5, 53];
            let total: usize = lens.iter().sum();
            let qkv = values(total * 3 * hidden, hidden as u64);
            let mut ctx = vec![f32::NAN; total * hidden];
            attention(&qkv, &lens, hidden, heads, &mut ctx);
            let dh = hidden / heads;
            let mut want = vec![0f32; total * hidden];
            let mut start = 0;
            for &len in &lens {
                for h in 0..heads {
                    for i in 0..len {
                        let at = |t: usize, part: usize, d: usize| {
                            qkv[(start + t) * 3 * hidden + part * hidden + h * dh + d] as f64
                        };
                        let s: Vec<f64> = (0..len)
                            .map(|j| {
                                (0..dh).map(|d| at(i, 0, d) * at(j, 1, d)).sum::<f64>()
                                    / (dh as f64).sqrt()
                            })
                            .collect();
                        let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
                        let z: f64 = e.iter().sum();
                        for d in 0..dh {
                            let v: f64 = (0..len).map(|j| e[j] / z * at(j, 2, d)).sum();
                            want[(start + i) * hidden + h * dh + d] = v as f32;
                        }
                    }
                }
                start += len;
            }
            let d = max_diff(&ctx, &want);
            assert!(d < 1e-5, "hidden {hidden}, heads {heads}: {d}");
        }
    }

    #[test]
    fn exp_is_within_a_few_ulp() {
        let mut worst = 0f64;
        for i in 0..=20_000 {
            let x = -87.0 + i as f32 * (87.0 + 10.0) / 20_000.0;
            let want = (x as f64).exp();
            worst = worst.max(((exp_f32(x) as f64) - want).abs() / want);
        }
        assert!(worst < 4.0 * f32::EPSILON as f64, "relative error {worst}");
    }
}
