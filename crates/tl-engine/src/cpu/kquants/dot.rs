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
//! - for fewer than 8 rows, `ggml_vec_dot_*_q8_K` (AVX2): each super-block's
//!   sum is eight integer lanes, lane `k` holding bytes `4k..4k + 4` of every
//!   32-value chunk, each lane accumulated on its own by `fma` and the eight
//!   summed only at the end (`hsum_float_8`); the minimums follow a
//!   per-type route ([`single_step`]).
//! - its repacked gemv for Q4_K, on the rows left over after the gemm's
//!   groups of 4: per super-block `acc = fma(S, d·d_a, acc)` and
//!   `acc_min = fma(M, dmin·d_a, acc_min)`, then `acc − acc_min`.
//!
//! Which kernel a row meets depends on how llama.cpp batches it (see
//! [`row_arithmetic`]), so the model says how its rows are batched.

use super::activations::Q8KBlock;
use super::blocks::Unpacked;
use crate::cpu::weight_type::WeightType;

/// Which llama.cpp kernel's rounding an output follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KArithmetic {
    /// The tiled kernels, for a type without minimums (Q3_K, Q6_K).
    Tiled,
    /// The tiled kernels, for a type with minimums (Q2_K, Q4_K, Q5_K).
    TiledWithMins,
    /// The repacked Q4_K gemm.
    Q4KRepacked,
    /// `ggml_vec_dot_*_q8_K` for a weight type.
    VecDot(WeightType),
    /// The repacked Q4_K gemv.
    Q4KGemv,
}

impl KArithmetic {
    /// Whether each output keeps the per-row state of [`RowState`] (the
    /// single-row kernels) rather than one accumulator pair.
    pub fn is_single_row(self) -> bool {
        matches!(self, KArithmetic::VecDot(_) | KArithmetic::Q4KGemv)
    }
}

/// The kernels llama.cpp's CPU backend uses for a `ggml_mul_mat` of `rows`
/// activation rows with a matrix whose batch kernel is `batch`, as runs of
/// rows and the arithmetic of each: the repacked Q4_K gemm takes the rows in
/// groups of 4 and leaves the rest to its gemv; the other types take the
/// tiled kernels from 8 rows and `vec_dot` below.
pub(crate) fn row_arithmetic(
    batch: KArithmetic,
    weight_type: WeightType,
    rows: usize,
) -> [(usize, KArithmetic); 2] {
    match batch {
        KArithmetic::Q4KRepacked => {
            let grouped = rows - rows % 4;
            [
                (grouped, KArithmetic::Q4KRepacked),
                (rows - grouped, KArithmetic::Q4KGemv),
            ]
        }
        KArithmetic::Tiled | KArithmetic::TiledWithMins if rows >= 8 => [(rows, batch), (0, batch)],
        _ => [(rows, KArithmetic::VecDot(weight_type)), (0, batch)],
    }
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
        _ => debug_assert!(false, "{kind:?} is a single-row arithmetic"),
    }
}

/// The output once every super-block is in.
pub(crate) fn finish(kind: KArithmetic, acc: f32, acc_min: f32) -> f32 {
    match kind {
        KArithmetic::Q4KRepacked => acc - acc_min,
        _ => acc,
    }
}

/// The integer lanes of one weight super-block with one activation
/// super-block as llama.cpp's AVX2 single-row kernels hold them:
/// `scaled[k] = Σ scale·w·a` over bytes `4k..4k + 4` of the eight 32-value
/// chunks, and `mins[k] = Σ min·Σ a` over runs `2k` and `2k + 1` of 16 values.
/// Q6_K's offset comes off a lane at a time with the run sums of runs `2k`
/// and `2k + 1`, Q3_K's off each value, as those kernels do.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Lanes {
    pub scaled: [i32; 8],
    pub mins: [i32; 8],
}

/// Whether the type's offset comes off each value inside the lanes (Q3_K)
/// rather than a run pair at a time (Q6_K).
pub(crate) fn offset_per_value(weight_type: WeightType) -> bool {
    weight_type == WeightType::Q3_K
}

/// [`Lanes`] on plain integers (the portable path, and the reference the
/// SIMD one is tested against).
pub(crate) fn lanes(w: &Unpacked, a: &Q8KBlock, per_value: bool) -> Lanes {
    let mut out = Lanes::default();
    for v in 0..256 {
        let (lane, run) = (v % 32 / 4, v / 16);
        let mut q = i32::from(w.quants[v]);
        if per_value {
            q -= i32::from(w.offset);
        }
        let term = i32::from(w.scales[run]) * q * i32::from(a.quants[v]);
        out.scaled[lane] = out.scaled[lane].wrapping_add(term);
    }
    for (lane, (scaled, min)) in out.scaled.iter_mut().zip(&mut out.mins).enumerate() {
        for run in [2 * lane, 2 * lane + 1] {
            let sum = i32::from(a.sums16[run]);
            if !per_value {
                let offset = i32::from(w.offset) * i32::from(w.scales[run]) * sum;
                *scaled = scaled.wrapping_sub(offset);
            }
            *min = min.wrapping_add(i32::from(w.mins[run]) * sum);
        }
    }
    out
}

/// One output's accumulators under a single-row arithmetic: eight f32
/// lanes, and the minimums' four lanes (Q4_K), running sum (Q5_K) or
/// accumulator (the gemv).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct RowState {
    pub lanes: [f32; 8],
    pub mins: [f32; 4],
}

/// Adds one super-block's lanes to a single-row output, for weights with
/// factors `(d, dmin)` and activations of scale `a_d`.
pub(crate) fn single_step(
    kind: KArithmetic,
    (d, dmin): (f32, f32),
    lanes: &Lanes,
    a_d: f32,
    state: &mut RowState,
) {
    let as_f32 = |v: i32| v as f32;
    let (scaled, mins) = (lanes.scaled.map(as_f32), lanes.mins.map(as_f32));
    let total = |v: [i32; 8]| v.iter().fold(0i32, |s, &x| s.wrapping_add(x));
    match kind {
        KArithmetic::Q4KGemv => {
            let (scale, min_scale) = (d * a_d, dmin * a_d);
            state.lanes[0] = as_f32(total(lanes.scaled)).mul_add(scale, state.lanes[0]);
            state.mins[0] = as_f32(total(lanes.mins)).mul_add(min_scale, state.mins[0]);
        }
        KArithmetic::VecDot(ty) => {
            let (d, dmin) = (a_d * d, -a_d * dmin);
            if ty == WeightType::Q2_K {
                for (acc, m) in state.lanes.iter_mut().zip(mins) {
                    *acc = dmin.mul_add(m, *acc);
                }
            }
            for (acc, s) in state.lanes.iter_mut().zip(scaled) {
                *acc = d.mul_add(s, *acc);
            }
            match ty {
                WeightType::Q4_K => {
                    for (j, acc) in state.mins.iter_mut().enumerate() {
                        let pair = lanes.mins[2 * j].wrapping_add(lanes.mins[2 * j + 1]);
                        *acc = dmin.mul_add(as_f32(pair), *acc);
                    }
                }
                WeightType::Q5_K => {
                    state.mins[0] = dmin.mul_add(as_f32(total(lanes.mins)), state.mins[0]);
                }
                _ => {}
            }
        }
        _ => debug_assert!(false, "{kind:?} is not a single-row arithmetic"),
    }
}

/// `hsum_float_8`: the upper four lanes onto the lower, then `(0 + 2) + (1 + 3)`.
fn hsum_float_8(v: &[f32; 8]) -> f32 {
    let r: [f32; 4] = std::array::from_fn(|j| v[4 + j] + v[j]);
    (r[0] + r[2]) + (r[1] + r[3])
}

/// A single-row output once every super-block is in.
pub(crate) fn single_finish(kind: KArithmetic, state: &RowState) -> f32 {
    match kind {
        KArithmetic::Q4KGemv => state.lanes[0] - state.mins[0],
        KArithmetic::VecDot(WeightType::Q4_K) => {
            let m = &state.mins;
            hsum_float_8(&state.lanes) + ((m[0] + m[2]) + (m[1] + m[3]))
        }
        KArithmetic::VecDot(WeightType::Q5_K) => hsum_float_8(&state.lanes) + state.mins[0],
        _ => hsum_float_8(&state.lanes),
    }
}
