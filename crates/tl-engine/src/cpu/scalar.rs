//! The portable path: plain-Rust activation quantization and dot products that
//! perform the same f32 operations, in the same order, as llama.cpp's AVX2 code
//! (and as `super::avx2`), so every result is bit-identical to the SIMD path. It
//! runs where AVX2/FMA/F16C are not compiled in, and tests compare against it.

use super::activations::{ActivationRow, QuantizedActivations, QuantizedBlock};
use super::blocks::{f16_to_f32, WeightBlock};
use super::matrix::{Arithmetic, WeightRows, TILE_ROWS};
use super::parallel::OutputColumns;
use super::weight_type::{WeightType, BLOCK_VALUES};

/// Quantizes 32 activations like `quantize_row_q8_0`/`_q8_1` on AVX2: `d = amax/127`,
/// multiplier `127/amax` (not `1/d`), round half to even.
pub(crate) fn quantize_block(x: &[f32; BLOCK_VALUES]) -> QuantizedBlock {
    let amax = x.iter().fold(0.0f32, |max, v| max.max(v.abs()));
    let scale = amax / 127.0;
    let inverse = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut quants = [0i8; BLOCK_VALUES];
    let mut quant_sum = 0i32;
    for (q, &v) in quants.iter_mut().zip(x) {
        let i = convert_to_i32((v * inverse).round_ties_even());
        quant_sum = quant_sum.wrapping_add(i);
        *q = i.clamp(i32::from(i8::MIN), i32::from(i8::MAX)) as i8;
    }
    QuantizedBlock {
        quants,
        scale,
        quant_sum,
    }
}

/// `_mm256_cvtps_epi32` on an already rounded value: out-of-range and NaN give
/// `i32::MIN`, where Rust's `as` would saturate.
fn convert_to_i32(rounded: f32) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&rounded) {
        rounded as i32
    } else {
        i32::MIN
    }
}

/// Whether this backend wants repacked Q4_0 matrices in tiles
/// ([`WeightRows::tiled`]); it reads either order.
pub(crate) const READS_TILES: bool = false;

/// Computes the output columns of `out` for all `m` activation rows.
pub(crate) fn compute_rows(
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    match weights.weight_type {
        WeightType::Q4_0 => typed_rows(weights.blocks::<18>(), weights, acts, m, out),
        WeightType::Q5_0 => typed_rows(weights.blocks::<22>(), weights, acts, m, out),
        WeightType::Q5_1 => typed_rows(weights.blocks::<24>(), weights, acts, m, out),
        WeightType::Q4_1 => typed_rows(weights.blocks::<20>(), weights, acts, m, out),
        WeightType::Q8_0 => typed_rows(weights.blocks::<34>(), weights, acts, m, out),
        other => unreachable!("{other} matrices run in cpu::kquants"),
    }
}

fn typed_rows<B: WeightBlock + Clone>(
    blocks: &[B],
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    let per_row = weights.blocks_per_row;
    for column in out.columns() {
        let gathered: Vec<B>;
        let row = if weights.tiled {
            let (tile, r) = (column / TILE_ROWS, column % TILE_ROWS);
            let tile_blocks = &blocks[tile * per_row * TILE_ROWS..(tile + 1) * per_row * TILE_ROWS];
            gathered = tile_blocks
                .iter()
                .skip(r)
                .step_by(TILE_ROWS)
                .cloned()
                .collect();
            &gathered[..]
        } else {
            &blocks[column * per_row..(column + 1) * per_row]
        };
        for a in 0..m {
            let value = match weights.arithmetic {
                Arithmetic::VecDot => vec_dot(row, acts.row(a)),
                Arithmetic::RepackedQ4_0 => repacked_dot(row, acts.row(a)),
                Arithmetic::KQuant(kind) => unreachable!("{kind:?} runs in cpu::kquants"),
            };
            out.set(a, column, value);
        }
    }
}

/// One weight row · one activation row as `ggml_vec_dot_{q4_0_q8_0, q4_1_q8_1,
/// q8_0_q8_0}` on AVX2 (and tinyBLAS, which rounds alike): per block, 8 lanes of
/// 4-value integer dot products, each lane `acc = fma(dw·da, lane, acc)`; Q4_1's
/// `m·s` terms in a separate scalar sum; the lanes summed as `hsum_float_8`.
pub(crate) fn vec_dot<B: WeightBlock>(row: &[B], act: ActivationRow<'_>) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut min_terms = 0.0f32;
    for (b, block) in row.iter().enumerate() {
        let scale = f16_to_f32(block.scale_bits()) * act.scales[b];
        let quants = &act.quants[b];
        for (lane, acc) in lanes.iter_mut().enumerate() {
            let dot: i32 = (4 * lane..4 * lane + 4)
                .map(|j| block.value(j) * i32::from(quants[j]))
                .sum();
            *acc = scale.mul_add(dot as f32, *acc);
        }
        if B::HAS_MIN {
            // `summs += m * s`, which C compilers contract to an FMA when FMA is on.
            min_terms = f16_to_f32(block.min_bits()).mul_add(act.q8_1_sums[b], min_terms);
        }
    }
    let sum = horizontal_sum(lanes);
    if B::HAS_MIN {
        sum + min_terms
    } else {
        sum
    }
}

/// `hsum_float_8`: high half plus low half, then pairs, then the last two.
pub(crate) fn horizontal_sum(lanes: [f32; 8]) -> f32 {
    let quad = [
        lanes[4] + lanes[0],
        lanes[5] + lanes[1],
        lanes[6] + lanes[2],
        lanes[7] + lanes[3],
    ];
    (quad[0] + quad[2]) + (quad[1] + quad[3])
}

/// One Q4_0 row · one activation row as llama.cpp's repacked AVX2 kernels
/// (`ggml_gemv/gemm_q4_0_8x8_q8_0`): per block the whole 32-value integer dot
/// product, then `acc = fma(dot, dw·da, acc)`.
pub(crate) fn repacked_dot<B: WeightBlock>(row: &[B], act: ActivationRow<'_>) -> f32 {
    let mut acc = 0.0f32;
    for (b, block) in row.iter().enumerate() {
        let quants = &act.quants[b];
        let dot: i32 = (0..BLOCK_VALUES)
            .map(|j| block.value(j) * i32::from(quants[j]))
            .sum();
        let scale = f16_to_f32(block.scale_bits()) * act.scales[b];
        acc = (dot as f32).mul_add(scale, acc);
    }
    acc
}
