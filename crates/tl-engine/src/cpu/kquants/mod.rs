//! K-quant weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: super-blocks of 256 values
//! with 16 or 8 sub-block scales) times Q8_K activations, with the rounding
//! of llama.cpp's CPU kernels for batches ([`dot`] says which). Checked bit
//! for bit against ggml's own `ggml_mul_mat` in `cpu::golden_tests`.
//!
//! Each weight super-block is unpacked once and met by every activation row
//! of the batch; each output's arithmetic depends on its weight row and
//! activation row alone, so batching and threads never change a result.
//! llama.cpp quantizes
//! the activations of its repacked gemm 4 rows at a time with an AVX2
//! routine that rounds like `quantize_row_q8_K_ref` but, when a super-block's
//! largest magnitude appears with both signs, may take the other sign; we
//! use the reference everywhere, so such ties can differ from its batches
//! (never from its single rows).

mod activations;
mod blocks;
mod dot;

use std::cell::RefCell;

pub(crate) use activations::{Q8KBlock, SuperBlockActivations};
pub(crate) use blocks::{k4_scales, Unpacked};
use dot::{finish, step, Accumulators};
pub(crate) use dot::{GroupSums, KArithmetic};

use super::matrix::WeightRows;
use super::parallel::OutputColumns;
use super::weight_type::WeightType;

/// Values per K-quant super-block (`QK_K`).
pub(crate) const SUPER_BLOCK_VALUES: usize = 256;

thread_local! {
    /// Per activation row accumulators, reused across calls.
    static ACCUMULATORS: RefCell<Vec<Accumulators>> = const { RefCell::new(Vec::new()) };
}

/// Computes the output columns of `out` for all `m` activation rows.
pub(crate) fn compute_rows(
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    match weights.weight_type {
        WeightType::Q2_K => typed_rows(
            weights.blocks::<84>(),
            blocks::unpack_q2_k,
            weights,
            kind,
            acts,
            m,
            out,
        ),
        WeightType::Q3_K => typed_rows(
            weights.blocks::<110>(),
            blocks::unpack_q3_k,
            weights,
            kind,
            acts,
            m,
            out,
        ),
        WeightType::Q4_K => typed_rows(
            weights.blocks::<144>(),
            blocks::unpack_q4_k,
            weights,
            kind,
            acts,
            m,
            out,
        ),
        WeightType::Q5_K => typed_rows(
            weights.blocks::<176>(),
            blocks::unpack_q5_k,
            weights,
            kind,
            acts,
            m,
            out,
        ),
        WeightType::Q6_K => typed_rows(
            weights.blocks::<210>(),
            blocks::unpack_q6_k,
            weights,
            kind,
            acts,
            m,
            out,
        ),
        other => unreachable!("{other} is not a K-quant"),
    }
}

fn typed_rows<const N: usize>(
    blocks: &[[u8; N]],
    unpack: fn(&[u8; N], &mut Unpacked),
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    let per_row = weights.blocks_per_row;
    let mut unpacked = Unpacked::default();
    ACCUMULATORS.with_borrow_mut(|accs| {
        for column in out.columns() {
            accs.clear();
            accs.resize(m, Accumulators::default());
            let row = &blocks[column * per_row..(column + 1) * per_row];
            for (b, block) in row.iter().enumerate() {
                let factors = blocks::factors(block);
                let act = |a: usize| &acts.row(a)[b];
                let whole = kind != KArithmetic::Q4KRepacked;
                row_sums(whole, block, unpack, &mut unpacked, m, act, |a, sums| {
                    step(kind, factors, &sums, act(a).d, &mut accs[a]);
                });
            }
            for (a, acc) in accs.iter().enumerate() {
                out.set(a, column, finish(kind, acc));
            }
        }
    });
}

#[cfg(x86_simd)]
use super::avx2::kquant_sums as row_sums;

/// Calls `each(i, sums)` with the integer sums of `w` and `block(i)` for
/// every `i < rows` (the portable path).
#[cfg_attr(x86_simd, allow(dead_code))]
fn portable_row_sums<'a, const N: usize>(
    _whole: bool,
    bytes: &[u8; N],
    unpack: fn(&[u8; N], &mut Unpacked),
    w: &mut Unpacked,
    rows: usize,
    block: impl Fn(usize) -> &'a Q8KBlock,
    mut each: impl FnMut(usize, GroupSums),
) {
    unpack(bytes, w);
    for i in 0..rows {
        each(i, dot::group_sums(w, block(i)));
    }
}

#[cfg(not(x86_simd))]
use portable_row_sums as row_sums;

#[cfg(all(test, x86_simd))]
mod tests {
    use super::*;
    use crate::cpu::test_support::Rng;

    /// Random super-blocks of type `N` (any bytes are a valid block) against
    /// random activations: the AVX2 sums, Q4_K and Q6_K loaded straight from
    /// the bytes, equal the portable ones.
    fn check<const N: usize>(unpack: fn(&[u8; N], &mut Unpacked), rng: &mut Rng) {
        let mut x = [0.0f32; SUPER_BLOCK_VALUES];
        for _ in 0..100 {
            let bytes: [u8; N] = std::array::from_fn(|_| rng.next_u64() as u8);
            for v in &mut x {
                *v = rng.normal(1.0);
            }
            let mut act = Q8KBlock::default();
            activations::quantize_block(&x, &mut act);
            let (mut scratch, mut w) = (Unpacked::default(), Unpacked::default());
            let mut simd = Vec::new();
            for whole in [false, true] {
                row_sums(
                    whole,
                    &bytes,
                    unpack,
                    &mut scratch,
                    1,
                    |_| &act,
                    |_, sums| simd.push(sums),
                );
            }
            unpack(&bytes, &mut w);
            let portable = dot::group_sums(&w, &act);
            let total = |v: [i32; 4]| v.iter().fold(0i32, |s, &x| s.wrapping_add(x));
            let whole = GroupSums {
                scaled: [total(portable.scaled), 0, 0, 0],
                mins: [total(portable.mins), 0, 0, 0],
            };
            assert_eq!(simd, [portable, whole], "{N}-byte blocks");
        }
    }

    #[test]
    fn simd_sums_equal_portable_sums() {
        let mut rng = Rng::new(5);
        check(blocks::unpack_q2_k, &mut rng);
        check(blocks::unpack_q3_k, &mut rng);
        check(blocks::unpack_q4_k, &mut rng);
        check(blocks::unpack_q5_k, &mut rng);
        check(blocks::unpack_q6_k, &mut rng);
    }
}
