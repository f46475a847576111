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

/// The exact integer sums of one weight super-block with one activation
/// super-block, for each 64 values: `scaled[p] = Σ scale·Σ w·a` and
/// `mins[p] = Σ min·Σ a` over runs `4p..4p + 4` of 16 values.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct GroupSums {
    pub scaled: [i32; 4],
    pub mins: [i32; 4],
}

/// [`GroupSums`] on plain integers (the portable path, and the reference the
/// SIMD one is tested against).
pub(crate) fn group_sums(w: &Unpacked, a: &Q8KBlock) -> GroupSums {
    let (wq, _) = w.quants.as_chunks::<16>();
    let (aq, _) = a.quants.as_chunks::<16>();
    let mut sums = GroupSums::default();
    for run in 0..16 {
        let dot: i32 = (0..16)
            .map(|i| (i32::from(wq[run][i]) - i32::from(w.offset)) * i32::from(aq[run][i]))
            .sum();
        let scaled = i32::from(w.scales[run]).wrapping_mul(dot);
        let min = i32::from(w.mins[run]) * i32::from(a.sums16[run]);
        sums.scaled[run / 4] = sums.scaled[run / 4].wrapping_add(scaled);
        sums.mins[run / 4] = sums.mins[run / 4].wrapping_add(min);
    }
    sums
}

fn total(values: [i32; 4]) -> i32 {
    values.iter().fold(0i32, |sum, &v| sum.wrapping_add(v))
}

/// Adds one super-block's terms to an output's accumulators (`acc_min`
/// serves the repacked gemm alone): `sums` of weights with factors
/// `(d, dmin)` with an activation super-block of scale `a_d`.
pub(crate) fn step(
    kind: KArithmetic,
    (d, dmin): (f32, f32),
    sums: &GroupSums,
    a_d: f32,
    (acc, acc_min): (&mut f32, &mut f32),
) {
    match kind {
        KArithmetic::Tiled | KArithmetic::TiledWithMins => {
            let mut r = d * total(sums.scaled) as f32;
            if kind == KArithmetic::TiledWithMins {
                r = (-dmin).mul_add(total(sums.mins) as f32, r);
            }
            *acc = r.mul_add(a_d, *acc);
        }
        KArithmetic::Q4KRepacked => {
            let (scale, min_scale) = (d * a_d, dmin * a_d);
            for p in 0..4 {
                *acc = (sums.scaled[p] as f32).mul_add(scale, *acc);
                *acc_min = (sums.mins[p] as f32).mul_add(min_scale, *acc_min);
            }
        }
    }
}

/// The output once every super-block is in.
pub(crate) fn finish(kind: KArithmetic, acc: f32, acc_min: f32) -> f32 {
    match kind {
        KArithmetic::Tiled | KArithmetic::TiledWithMins => acc,
        KArithmetic::Q4KRepacked => acc - acc_min,
    }
}
