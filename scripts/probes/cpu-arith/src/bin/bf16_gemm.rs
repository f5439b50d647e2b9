//! The bf16 GEMM prototype (`vdpbf16ps`, weights packed as bf16 pairs) beside the `gemm`
//! crate and the f32 kernel lprag uses (packed panels of 48 columns), on the encoder's shapes.
use rayon::prelude::*;
use std::arch::x86_64::*;
use std::time::Instant;

const MR: usize = 8;
const NV: usize = 3;
const NR: usize = 16 * NV;

/// Weights [k, n] (row-major f32) packed as bf16 pairs: panels of NR columns,
/// within a panel [kp][NR] u32 (low half = row 2kp, high = row 2kp+1).
struct PackedB {
    kp: usize,
    n: usize,
    panels: usize,
    data: Vec<u32>,
}

fn bf16_rne(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let r = 0x7fff + ((b >> 16) & 1);
    ((b.wrapping_add(r)) >> 16) as u16
}

fn pack_b(w: &[f32], k: usize, n: usize) -> PackedB {
    let kp = k.div_ceil(2);
    let panels = n.div_ceil(NR);
    let mut data = vec![0u32; panels * kp * NR];
    for p in 0..panels {
        for q in 0..kp {
            for c in 0..NR {
                let col = p * NR + c;
                if col >= n {
                    continue;
                }
                let lo = bf16_rne(w[(2 * q) * n + col]) as u32;
                let hi = if 2 * q + 1 < k {
                    bf16_rne(w[(2 * q + 1) * n + col]) as u32
                } else {
                    0
                };
                data[(p * kp + q) * NR + c] = lo | (hi << 16);
            }
        }
    }
    PackedB {
        kp,
        n,
        panels,
        data,
    }
}

#[target_feature(enable = "avx512f,avx512bf16,avx512bw,avx512vl")]
unsafe fn pack_a_rows(x: &[f32], k: usize, out: &mut [u32]) {
    // one row: k floats -> kp pairs
    let kp = k.div_ceil(2);
    let mut q = 0;
    while 2 * q + 32 <= k {
        let a0 = _mm512_loadu_ps(x.as_ptr().add(2 * q));
        let a1 = _mm512_loadu_ps(x.as_ptr().add(2 * q + 16));
        let v = _mm512_cvtne2ps_pbh(a1, a0);
        _mm512_storeu_si512(
            out.as_mut_ptr().add(q) as *mut _,
            std::mem::transmute::<_, __m512i>(v),
        );
        q += 16;
    }
    while q < kp {
        let lo = bf16_rne(x[2 * q]) as u32;
        let hi = if 2 * q + 1 < k {
            bf16_rne(x[2 * q + 1]) as u32
        } else {
            0
        };
        out[q] = lo | (hi << 16);
        q += 1;
    }
}

/// `acc + bias` into the first `rows × cols` of `c` (row stride `ldc`): both kernels' end.
#[target_feature(enable = "avx512f")]
unsafe fn store(
    acc: &[[__m512; NV]; MR],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    bias: *const f32,
) {
    for (r, acc) in acc.iter().enumerate().take(rows) {
        for (v, &sum) in acc.iter().enumerate() {
            let c0 = v * 16;
            if c0 >= cols {
                break;
            }
            let left = cols - c0;
            let mask: __mmask16 = if left >= 16 {
                0xffff
            } else {
                ((1u32 << left) - 1) as u16
            };
            let bb = _mm512_maskz_loadu_ps(mask, bias.add(c0));
            _mm512_mask_storeu_ps(c.add(r * ldc + c0), mask, _mm512_add_ps(sum, bb));
        }
    }
}

#[target_feature(enable = "avx512f,avx512bf16,avx512bw,avx512vl")]
unsafe fn kernel(
    a: *const u32,
    kp: usize,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    bias: *const f32,
) {
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    for q in 0..kp {
        let bp = b.add(q * NR);
        let bv = [
            _mm512_loadu_si512(bp as *const _),
            _mm512_loadu_si512(bp.add(16) as *const _),
            _mm512_loadu_si512(bp.add(32) as *const _),
        ];
        for r in 0..MR {
            let av = _mm512_set1_epi32(*a.add(r * kp + q) as i32);
            for v in 0..NV {
                acc[r][v] = _mm512_dpbf16_ps(
                    acc[r][v],
                    std::mem::transmute(av),
                    std::mem::transmute(bv[v]),
                );
            }
        }
    }
    store(&acc, c, ldc, rows, cols, bias);
}

fn gemm_bf16(x: &[f32], m: usize, k: usize, w: &PackedB, bias: &[f32], out: &mut [f32]) {
    let kp = w.kp;
    let n = w.n;
    const MB: usize = 64;
    out.par_chunks_mut(MB * n).enumerate().for_each(|(bi, oc)| {
        let m0 = bi * MB;
        let rows = (m - m0).min(MB);
        let tiles = rows.div_ceil(MR);
        let mut a = vec![0u32; tiles * MR * kp];
        for r in 0..rows {
            unsafe {
                pack_a_rows(
                    &x[(m0 + r) * k..(m0 + r + 1) * k],
                    k,
                    &mut a[r * kp..(r + 1) * kp],
                );
            }
        }
        for p in 0..w.panels {
            let col0 = p * NR;
            let cols = (n - col0).min(NR);
            for t in 0..tiles {
                let r0 = t * MR;
                unsafe {
                    kernel(
                        a.as_ptr().add(r0 * kp),
                        kp,
                        w.data.as_ptr().add(p * kp * NR),
                        oc.as_mut_ptr().add(r0 * n + col0),
                        n,
                        rows - r0,
                        cols,
                        bias.as_ptr().add(col0),
                    );
                }
            }
        }
    });
}

struct PackedF {
    k: usize,
    n: usize,
    panels: usize,
    data: Vec<f32>,
}
fn pack_f(w: &[f32], k: usize, n: usize) -> PackedF {
    let panels = n.div_ceil(NR);
    let mut data = vec![0f32; panels * k * NR];
    for p in 0..panels {
        for q in 0..k {
            for c in 0..NR {
                let col = p * NR + c;
                if col < n {
                    data[(p * k + q) * NR + c] = w[q * n + col];
                }
            }
        }
    }
    PackedF { k, n, panels, data }
}
#[target_feature(enable = "avx512f")]
unsafe fn kernel_f(
    a: *const f32,
    lda: usize,
    k: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    bias: *const f32,
) {
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    if rows >= MR {
        for q in 0..k {
            let bp = b.add(q * NR);
            let bv = [
                _mm512_loadu_ps(bp),
                _mm512_loadu_ps(bp.add(16)),
                _mm512_loadu_ps(bp.add(32)),
            ];
            for r in 0..MR {
                let av = _mm512_set1_ps(*a.add(r * lda + q));
                for v in 0..NV {
                    acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
                }
            }
        }
    } else {
        for q in 0..k {
            let bp = b.add(q * NR);
            let bv = [
                _mm512_loadu_ps(bp),
                _mm512_loadu_ps(bp.add(16)),
                _mm512_loadu_ps(bp.add(32)),
            ];
            for r in 0..rows {
                let av = _mm512_set1_ps(*a.add(r * lda + q));
                for v in 0..NV {
                    acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
                }
            }
        }
    }
    store(&acc, c, ldc, rows, cols, bias);
}
fn gemm_pf(x: &[f32], m: usize, w: &PackedF, bias: &[f32], out: &mut [f32], mb: usize) {
    let k = w.k;
    let n = w.n;
    out.par_chunks_mut(mb * n).enumerate().for_each(|(bi, oc)| {
        let m0 = bi * mb;
        let rows = (m - m0).min(mb);
        let tiles = rows.div_ceil(MR);
        for p in 0..w.panels {
            let col0 = p * NR;
            let cols = (n - col0).min(NR);
            for t in 0..tiles {
                let r0 = t * MR;
                unsafe {
                    kernel_f(
                        x.as_ptr().add((m0 + r0) * k),
                        k,
                        k,
                        w.data.as_ptr().add(p * k * NR),
                        oc.as_mut_ptr().add(r0 * n + col0),
                        n,
                        rows - r0,
                        cols,
                        bias.as_ptr().add(col0),
                    );
                }
            }
        }
    });
}
fn gemm_f32(x: &[f32], m: usize, k: usize, w: &[f32], n: usize, out: &mut [f32], threads: usize) {
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            x.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(threads),
        );
    }
}

fn main() {
    let threads = rayon::current_num_threads();
    let mut s = 1u64;
    let mut rnd = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    for &(m, k, n) in &[
        (3300usize, 384usize, 1152usize),
        (3300, 384, 384),
        (3300, 384, 1536),
        (3300, 1536, 384),
    ] {
        let x: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
        let w: Vec<f32> = (0..k * n).map(|_| rnd() * 0.1).collect();
        let bias = vec![0f32; n];
        let pb = pack_b(&w, k, n);
        let mut o1 = vec![0f32; m * n];
        let mut o2 = vec![0f32; m * n];
        let reps = 20;
        gemm_f32(&x, m, k, &w, n, &mut o1, threads);
        let t = Instant::now();
        for _ in 0..reps {
            gemm_f32(&x, m, k, &w, n, &mut o1, threads);
        }
        let tf = t.elapsed().as_secs_f64() / reps as f64;
        gemm_bf16(&x, m, k, &pb, &bias, &mut o2);
        let t = Instant::now();
        for _ in 0..reps {
            gemm_bf16(&x, m, k, &pb, &bias, &mut o2);
        }
        let tb = t.elapsed().as_secs_f64() / reps as f64;
        let pf = pack_f(&w, k, n);
        let mut o3 = vec![0f32; m * n];
        for mb in [32usize, 64, 128, 256] {
            gemm_pf(&x, m, &pf, &bias, &mut o3, mb);
            let t = Instant::now();
            for _ in 0..reps {
                gemm_pf(&x, m, &pf, &bias, &mut o3, mb);
            }
            let tp = t.elapsed().as_secs_f64() / reps as f64;
            let mut md = 0f32;
            for i in 0..m * n {
                md = md.max((o1[i] - o3[i]).abs());
            }
            println!(
                "  packed f32 mb {mb}: {:.1} GFLOPS ({:.2}x gemm), max diff {md:.2e}",
                2.0 * (m * k * n) as f64 / tp / 1e9,
                tf / tp
            );
        }
        let flops = 2.0 * (m * k * n) as f64;
        let mut maxd = 0f32;
        let mut maxv = 0f32;
        for i in 0..m * n {
            maxd = maxd.max((o1[i] - o2[i]).abs());
            maxv = maxv.max(o1[i].abs());
        }
        println!("{m}x{k}x{n}: f32 {:.1} GFLOPS, bf16 {:.1} GFLOPS ({:.2}x), max diff {maxd:.2e} of {maxv:.2e}", flops / tf / 1e9, flops / tb / 1e9, tf / tb);
    }
}
