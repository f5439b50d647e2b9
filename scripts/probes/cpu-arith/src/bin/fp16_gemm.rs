//! The fp16 GEMM prototype (`vfmadd231ph` through inline assembly, pairs of k per 32-bit
//! broadcast, f32 sums every CHUNK pairs) on the encoder's shapes, with its error against f64.
use rayon::prelude::*;
use std::arch::asm;
use std::arch::x86_64::*;
use std::time::Instant;

const MR: usize = 8;
const CHUNK: usize = 16;

fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (r & 1) == 1) {
        r += 1;
    }
    sign | r as u16
}

/// a: rows of kpad (even) halves; panel: [kp][48 cols][2] halves.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn tile16(
    a: &[u16],
    lda: usize,
    kp: usize,
    panel: &[u16],
    bias: &[f32],
    c: &mut [f32],
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    let mut accf = [[_mm512_setzero_ps(); 6]; MR];
    let ap = a.as_ptr();
    let bp = panel.as_ptr();
    let mut q0 = 0;
    while q0 < kp {
        let q1 = (q0 + CHUNK).min(kp);
        let mut acc = [_mm512_setzero_si512(); 24];
        let rp = |r: usize| unsafe { ap.add(r.min(rows - 1) * lda) };
        unsafe {
            asm!(
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
                b = inout(reg) bp.add(q0 * 96) => _,
                i = inout(reg) q0 * 4 => _,
                end = in(reg) q1 * 4,
                a0 = in(reg) rp(0), a1 = in(reg) rp(1), a2 = in(reg) rp(2), a3 = in(reg) rp(3),
                a4 = in(reg) rp(4), a5 = in(reg) rp(5), a6 = in(reg) rp(6), a7 = in(reg) rp(7),
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
                out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _, out("zmm28") _,
                options(nostack, readonly),
            );
        }
        for r in 0..MR {
            for v in 0..3 {
                accf[r][2 * v] = _mm512_add_ps(
                    accf[r][2 * v],
                    _mm512_cvtph_ps(_mm512_castsi512_si256(acc[r * 3 + v])),
                );
                accf[r][2 * v + 1] = _mm512_add_ps(
                    accf[r][2 * v + 1],
                    _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(acc[r * 3 + v])),
                );
            }
        }
        q0 = q1;
    }
    // lanes hold (even k, odd k) pairs per column: add them, keep the even lanes.
    let idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    let cp = c.as_mut_ptr();
    for r in 0..rows {
        for v in 0..3 {
            let c0 = v * 16;
            if c0 >= cols {
                break;
            }
            let lo = accf[r][2 * v];
            let hi = accf[r][2 * v + 1];
            let lo = _mm512_add_ps(lo, _mm512_permute_ps::<0b10_11_00_01>(lo));
            let hi = _mm512_add_ps(hi, _mm512_permute_ps::<0b10_11_00_01>(hi));
            let sum = _mm512_permutex2var_ps(lo, idx, hi);
            let left = cols - c0;
            let mask: __mmask16 = if left >= 16 {
                0xffff
            } else {
                ((1u32 << left) - 1) as u16
            };
            unsafe {
                let b = _mm512_loadu_ps(bias.as_ptr().add(c0));
                _mm512_mask_storeu_ps(cp.add(r * ldc + c0), mask, _mm512_add_ps(sum, b));
            }
        }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn to_f16(x: &[f32], out: &mut [u16]) {
    let n = x.len();
    let mut i = 0;
    while i + 16 <= n {
        unsafe {
            let v = _mm512_loadu_ps(x.as_ptr().add(i));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, h);
        }
        i += 16;
    }
    while i < n {
        out[i] = f16_bits(x[i]);
        i += 1;
    }
}

fn gemm16(x: &[f32], _m: usize, k: usize, w: &[u16], n: usize, bias: &[f32], out: &mut [f32]) {
    let panels = n.div_ceil(48);
    let kp = k.div_ceil(2);
    let kpad = kp * 2;
    const MB: usize = 128;
    out.par_chunks_mut(MB * n).enumerate().for_each(|(bi, oc)| {
        let m0 = bi * MB;
        let rows = oc.len() / n;
        let tiles = rows.div_ceil(MR);
        let mut a = vec![0u16; tiles * MR * kpad];
        for r in 0..rows {
            unsafe {
                to_f16(
                    &x[(m0 + r) * k..(m0 + r + 1) * k],
                    &mut a[r * kpad..r * kpad + k],
                );
            }
        }
        for p in 0..panels {
            let cols = (n - p * 48).min(48);
            for t in 0..tiles {
                let tr = (rows - t * MR).min(MR);
                unsafe {
                    tile16(
                        &a[t * MR * kpad..],
                        kpad,
                        kp,
                        &w[p * kp * 96..],
                        &bias[p * 48..],
                        &mut oc[t * MR * n + p * 48..],
                        n,
                        tr,
                        cols,
                    );
                }
            }
        }
    });
}

fn main() {
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
        let x: Vec<f32> = (0..m * k).map(|_| rnd() * 4.0).collect();
        let w: Vec<f32> = (0..k * n).map(|_| rnd() * 0.1).collect();
        let panels = n.div_ceil(48);
        let kp = k.div_ceil(2);
        let mut wp = vec![0u16; panels * kp * 96];
        for p in 0..panels {
            for q in 0..kp {
                for c in 0..48 {
                    let col = p * 48 + c;
                    if col >= n {
                        continue;
                    }
                    for h in 0..2 {
                        let kk = 2 * q + h;
                        if kk < k {
                            wp[(p * kp + q) * 96 + 2 * c + h] = f16_bits(w[kk * n + col]);
                        }
                    }
                }
            }
        }
        let bias = vec![0f32; panels * 48];
        let mut o = vec![0f32; m * n];
        gemm16(&x, m, k, &wp, n, &bias, &mut o);
        let reps = 10;
        let t = Instant::now();
        for _ in 0..reps {
            gemm16(&x, m, k, &wp, n, &bias, &mut o);
        }
        let dt = t.elapsed().as_secs_f64() / reps as f64;
        // accuracy vs f64 on some rows
        let mut num = 0f64;
        let mut den = 0f64;
        let mut maxrel = 0f64;
        for r in (0..m).step_by(97) {
            for c in 0..n {
                let mut acc = 0f64;
                for q in 0..k {
                    acc += x[r * k + q] as f64 * w[q * n + c] as f64;
                }
                let e = o[r * n + c] as f64 - acc;
                num += e * e;
                den += acc * acc;
                maxrel = maxrel.max(e.abs());
            }
        }
        println!(
            "{m}x{k}x{n}: f16 {:.1} GFLOPS, rel rms err {:.2e}, max abs err {maxrel:.2e}",
            2.0 * (m * k * n) as f64 / dt / 1e9,
            (num / den).sqrt()
        );
    }
}
