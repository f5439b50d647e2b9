//! Instruction throughput of one core: f32 FMA, bf16 dot (`vdpbf16ps`), int8 dot
//! (`vpdpbusd`) and fp16 FMA (`vfmadd231ph`, through inline assembly: its intrinsics are
//! not stable), each over 24 (fp16: 12) independent accumulators.
use std::arch::asm;
use std::arch::x86_64::*;
use std::time::Instant;

macro_rules! rate {
    ($name:ident, $init:expr, $op:expr) => {
        #[target_feature(enable = "avx512f,avx512bf16,avx512vnni,avx512bw")]
        unsafe fn $name(n: usize, a: __m512i, b: __m512i) -> __m512i {
            let mut acc = [$init; 24];
            for _ in 0..n {
                for j in 0..24 {
                    acc[j] = $op(acc[j], a, b);
                }
            }
            let mut s: __m512i = std::mem::transmute(acc[0]);
            for j in 1..24 {
                let t: __m512i = std::mem::transmute(acc[j]);
                s = _mm512_xor_si512(s, t);
            }
            s
        }
    };
}
rate!(fma, _mm512_setzero_ps(), |c, a: __m512i, b: __m512i| {
    _mm512_fmadd_ps(std::mem::transmute(a), std::mem::transmute(b), c)
});
rate!(bf16, _mm512_setzero_ps(), |c, a: __m512i, b: __m512i| {
    _mm512_dpbf16_ps(c, std::mem::transmute(a), std::mem::transmute(b))
});
rate!(vnni, _mm512_setzero_si512(), |c, a: __m512i, b: __m512i| {
    _mm512_dpbusd_epi32(c, a, b)
});

fn fp16(n: usize) {
    unsafe {
        asm!(
            "vxorps zmm0, zmm0, zmm0", "vxorps zmm1, zmm1, zmm1",
            "2:",
            "vfmadd231ph zmm2, zmm0, zmm1", "vfmadd231ph zmm3, zmm0, zmm1", "vfmadd231ph zmm4, zmm0, zmm1", "vfmadd231ph zmm5, zmm0, zmm1",
            "vfmadd231ph zmm6, zmm0, zmm1", "vfmadd231ph zmm7, zmm0, zmm1", "vfmadd231ph zmm8, zmm0, zmm1", "vfmadd231ph zmm9, zmm0, zmm1",
            "vfmadd231ph zmm10, zmm0, zmm1", "vfmadd231ph zmm11, zmm0, zmm1", "vfmadd231ph zmm12, zmm0, zmm1", "vfmadd231ph zmm13, zmm0, zmm1",
            "dec {n}", "jnz 2b",
            n = inout(reg) n => _,
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
            out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _,
        );
    }
}

fn main() {
    let n: usize = 50_000_000;
    let a = std::hint::black_box(unsafe { _mm512_set1_epi32(0x3f80_3f80) });
    let b = std::hint::black_box(unsafe { _mm512_set1_epi32(0x3f80_3f80) });
    for _ in 0..2 {
        let time = |f: &dyn Fn()| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        };
        let d = time(&|| {
            std::hint::black_box(unsafe { fma(n, a, b) });
        });
        println!(
            "vfmadd231ps (16 f32 lanes): {:.2} G/s",
            (n * 24) as f64 / d / 1e9
        );
        let d = time(&|| {
            std::hint::black_box(unsafe { bf16(n, a, b) });
        });
        println!(
            "vdpbf16ps (16 × 2 bf16): {:.2} G/s",
            (n * 24) as f64 / d / 1e9
        );
        let d = time(&|| {
            std::hint::black_box(unsafe { vnni(n, a, b) });
        });
        println!(
            "vpdpbusd (16 × 4 int8): {:.2} G/s",
            (n * 24) as f64 / d / 1e9
        );
        let d = time(&|| fp16(n));
        println!(
            "vfmadd231ph (32 fp16 lanes): {:.2} G/s",
            (n * 12) as f64 / d / 1e9
        );
    }
}
