//! The x86-64 path, compiled when the build enables AVX2, FMA and F16C (the
//! workspace's `.cargo/config.toml` does). Kernels reproduce llama.cpp's AVX2
//! arithmetic; this file only walks tiles over the output: for decode (one
//! activation row) 4 weight rows at a time, for prefill 2 weight rows × 4
//! activation rows, over chunks of activation rows small enough to stay in L2
//! while the weight rows of this thread's share stream past.

mod quantize;
mod repacked;
mod simd;
mod vec_dot;

use std::ops::Range;

use super::activations::{QuantizedActivations, QuantizedBlock};
use super::blocks::WeightBlock;
use super::matrix::{Arithmetic, WeightRows};
use super::parallel::OutputColumns;
use super::weight_type::{WeightType, BLOCK_VALUES};

/// Quantizes one block of 32 activations like llama.cpp's AVX2 code.
pub(crate) fn quantize_block(x: &[f32; BLOCK_VALUES]) -> QuantizedBlock {
    // SAFETY: this module is compiled only when the build enables AVX2, FMA and
    // F16C (see `cpu/mod.rs`), so any CPU running this code has them.
    unsafe { quantize::quantize_block(x) }
}

/// Computes the output columns of `out` for all `m` activation rows.
pub(crate) fn compute_rows(
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    // SAFETY: as for `quantize_block`, the features are enabled at build time.
    unsafe { compute_rows_avx2(weights, acts, m, out) }
}

/// Activation bytes a chunk may take; a chunk is reused by every weight row of a
/// thread's share, so it should stay in the (1 MiB or larger) L2.
const ACTIVATION_CHUNK_BYTES: usize = 16 * 1024;

/// Weight rows × activation rows per prefill tile.
const PREFILL_ROWS: usize = 2;
const PREFILL_ACTS: usize = 4;

#[target_feature(enable = "avx2,fma,f16c")]
fn compute_rows_avx2(
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    let per_row = weights.blocks_per_row;
    let chunk_rows = (ACTIVATION_CHUNK_BYTES / (per_row * BLOCK_VALUES)).max(PREFILL_ACTS);
    for start in (0..m).step_by(chunk_rows) {
        let act_range = start..(start + chunk_rows).min(m);
        match (weights.weight_type, weights.arithmetic) {
            (WeightType::Q4_0, Arithmetic::RepackedQ4_0) => {
                repacked_rows(weights.blocks::<18>(), per_row, acts, act_range, out)
            }
            (WeightType::Q4_0, Arithmetic::VecDot) => {
                vec_dot_rows(weights.blocks::<18>(), per_row, acts, act_range, out)
            }
            (WeightType::Q4_1, _) => {
                vec_dot_rows(weights.blocks::<20>(), per_row, acts, act_range, out)
            }
            (WeightType::Q8_0, _) => {
                vec_dot_rows(weights.blocks::<34>(), per_row, acts, act_range, out)
            }
        }
    }
}

/// The vec_dot-arithmetic tiles over this share's weight rows.
#[target_feature(enable = "avx2,fma,f16c")]
fn vec_dot_rows<B: WeightBlock>(
    blocks: &[B],
    per_row: usize,
    acts: &QuantizedActivations,
    act_range: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    let columns = out.columns();
    let mut row = columns.start;
    if act_range.len() == 1 {
        while row + 4 <= columns.end {
            vec_dot_row_tile::<B, 4, 1>(blocks, per_row, row, acts, act_range.clone(), out);
            row += 4;
        }
    } else {
        while row + PREFILL_ROWS <= columns.end {
            vec_dot_row_tile::<B, PREFILL_ROWS, PREFILL_ACTS>(
                blocks,
                per_row,
                row,
                acts,
                act_range.clone(),
                out,
            );
            row += PREFILL_ROWS;
        }
    }
    for row in row..columns.end {
        vec_dot_row_tile::<B, 1, PREFILL_ACTS>(blocks, per_row, row, acts, act_range.clone(), out);
    }
}

/// Weight rows `row..row + R` against the activation rows of `act_range`, `C` at
/// a time.
#[target_feature(enable = "avx2,fma,f16c")]
fn vec_dot_row_tile<B: WeightBlock, const R: usize, const C: usize>(
    blocks: &[B],
    per_row: usize,
    row: usize,
    acts: &QuantizedActivations,
    act_range: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    let rows: [&[B]; R] =
        std::array::from_fn(|i| &blocks[(row + i) * per_row..(row + i + 1) * per_row]);
    let mut act = act_range.start;
    while act + C <= act_range.end {
        let tile = vec_dot::tile::<B, R, C>(rows, std::array::from_fn(|i| acts.row(act + i)));
        write_tile(out, row, act, tile);
        act += C;
    }
    for act in act..act_range.end {
        let tile = vec_dot::tile::<B, R, 1>(rows, [acts.row(act)]);
        write_tile(out, row, act, tile);
    }
}

/// The repacked-Q4_0-arithmetic tiles over this share's weight rows (a multiple
/// of 8: the matrix has a multiple of 8 rows and shares are aligned to 8).
#[target_feature(enable = "avx2,fma,f16c")]
fn repacked_rows(
    blocks: &[[u8; 18]],
    per_row: usize,
    acts: &QuantizedActivations,
    act_range: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    let columns = out.columns();
    let mut row = columns.start;
    while row + repacked::ROWS <= columns.end {
        let rows: [&[[u8; 18]]; repacked::ROWS] =
            std::array::from_fn(|i| &blocks[(row + i) * per_row..(row + i + 1) * per_row]);
        let mut act = act_range.start;
        while act + PREFILL_ACTS <= act_range.end {
            let tile =
                repacked::tile::<PREFILL_ACTS>(rows, std::array::from_fn(|i| acts.row(act + i)));
            write_tile(out, row, act, tile);
            act += PREFILL_ACTS;
        }
        for act in act..act_range.end {
            write_tile(out, row, act, repacked::tile::<1>(rows, [acts.row(act)]));
        }
        row += repacked::ROWS;
    }
    // Unreachable for matrices built by `QuantizedMatrix`, kept exact anyway.
    for row in row..columns.end {
        let weights = &blocks[row * per_row..(row + 1) * per_row];
        for act in act_range.clone() {
            let value = super::scalar::repacked_dot(weights, acts.row(act));
            out.set(act, row, value);
        }
    }
}

/// Stores `tile[c][r]` as output `(act + c, row + r)`.
fn write_tile<const R: usize, const C: usize>(
    out: &mut OutputColumns<'_>,
    row: usize,
    act: usize,
    tile: [[f32; R]; C],
) {
    for (c, values) in tile.iter().enumerate() {
        for (r, &value) in values.iter().enumerate() {
            out.set(act + c, row + r, value);
        }
    }
}

#[cfg(test)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn probe_tile(
    rows: [&[[u8; 20]]; 2],
    acts: [super::activations::ActivationRow<'_>; 4],
) -> [[f32; 2]; 4] {
    vec_dot::tile::<[u8; 20], 2, 4>(rows, acts)
}
