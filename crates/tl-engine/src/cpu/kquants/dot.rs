//! The f32 arithmetic of llama.cpp's K-quant matrix products, one output at a
//! time, on plain integers. For each super-block, the integer sums
//! `S = Σ scale·Σ w·a` and (types with minimums) `M = Σ min·Σ a` are exact;
//! what must match is how they are scaled and accumulated:
//!
//! - ggml's tiled kernels (`ggml/src/ggml-cpu/tiled`), which llama.cpp runs
//!   for K-quant products of 8 activation rows or more (a prompt, a
//!   perplexity window): per super-block `r = d·S`, `r = fma(−dmin, M, r)`,
//!   `acc = fma(r, d_a, acc)`.
//! - its repacked gemm for Q4_K matrices whose row count is a multiple of 8
//!   (`ggml_gemm_q4_K_8x8_q8_K`): per 64 values `acc = fma(S, d·d_a, acc)`
//!   and `acc_min = fma(M, dmin·d_a, acc_min)`, then `acc − acc_min`.
//!
//! For fewer rows llama.cpp uses `vec_dot` (and the repacked gemv), which
//! round differently, so its last bits depend on the batch; ours follow the
//! batch kernels at every batch size (llama.cpp does the same with
//! `GGML_CPU_TILED_MM_FORCE=1`).

use super::activations::Q8KBlock;
use super::blocks::Unpacked;
use super::SUPER_BLOCK_VALUES;

/// Which llama.cpp kernel's rounding an output follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KArithmetic {
    /// The tiled kernels, for a type without minimums (Q3_K, Q6_K).
    Tiled,
    /// The tiled kernels, for a type with minimums (Q2_K, Q4_K, Q5_K).
    TiledWithMins,
    /// The repacked Q4_K gemm.
    Q4KRepacked,
}

/// The f32 state of one output while its super-blocks are summed.
#[derive(Clone, Copy, Default)]
pub(crate) struct Accumulators {
    acc: f32,
    /// The repacked gemm's `acc_min`.
    acc_min: f32,
}

/// The integer dot product of each run of 16 values.
fn run_dots(w: &[i8; SUPER_BLOCK_VALUES], a: &[i8; SUPER_BLOCK_VALUES]) -> [i32; 16] {
    let (w, _) = w.as_chunks::<16>();
    let (a, _) = a.as_chunks::<16>();
    std::array::from_fn(|run| {
        (0..16)
            .map(|i| i32::from(w[run][i]) * i32::from(a[run][i]))
            .sum()
    })
}

/// `S` and `M` over the runs of 16 values in `runs`.
fn sums(w: &Unpacked, a: &Q8KBlock, dots: &[i32; 16], runs: std::ops::Range<usize>) -> (i32, i32) {
    runs.fold((0i32, 0i32), |(s, m), run| {
        let scaled = w.scales[run].wrapping_mul(dots[run]);
        let min = w.mins[run].wrapping_mul(i32::from(a.sums16[run]));
        (s.wrapping_add(scaled), m.wrapping_add(min))
    })
}

/// Adds one super-block's terms (weights `w`, activations `a`) to `acc`.
pub(crate) fn step(kind: KArithmetic, w: &Unpacked, a: &Q8KBlock, acc: &mut Accumulators) {
    let dots = run_dots(&w.quants, &a.quants);
    match kind {
        KArithmetic::Tiled | KArithmetic::TiledWithMins => {
            let (s, m) = sums(w, a, &dots, 0..16);
            let mut r = w.d * s as f32;
            if kind == KArithmetic::TiledWithMins {
                r = (-w.dmin).mul_add(m as f32, r);
            }
            acc.acc = r.mul_add(a.d, acc.acc);
        }
        KArithmetic::Q4KRepacked => {
            let (scale, min_scale) = (w.d * a.d, w.dmin * a.d);
            for runs in [0..4, 4..8, 8..12, 12..16] {
                let (s, m) = sums(w, a, &dots, runs);
                acc.acc = (s as f32).mul_add(scale, acc.acc);
                acc.acc_min = (m as f32).mul_add(min_scale, acc.acc_min);
            }
        }
    }
}

/// The output once every super-block is in.
pub(crate) fn finish(kind: KArithmetic, acc: &Accumulators) -> f32 {
    match kind {
        KArithmetic::Tiled | KArithmetic::TiledWithMins => acc.acc,
        KArithmetic::Q4KRepacked => acc.acc - acc.acc_min,
    }
}
