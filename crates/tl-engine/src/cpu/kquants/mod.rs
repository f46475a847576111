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

pub(crate) use activations::SuperBlockActivations;
use blocks::Unpacked;
pub(crate) use dot::KArithmetic;
use dot::{finish, step, Accumulators};

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
                unpack(block, &mut unpacked);
                for (a, acc) in accs.iter_mut().enumerate() {
                    step(kind, &unpacked, &acts.row(a)[b], acc);
                }
            }
            for (a, acc) in accs.iter().enumerate() {
                out.set(a, column, finish(kind, acc));
            }
        }
    });
}
