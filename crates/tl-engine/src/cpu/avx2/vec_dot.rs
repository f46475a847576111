//! A tile of `R` weight rows × `C` activation rows with the rounding of llama.cpp's
//! AVX2 `ggml_vec_dot_q4_0_q8_0` / `_q4_1_q8_1` / `_q8_0_q8_0`: per block, 8 lanes
//! of 4-value integer dot products, `acc = fma(dw·da, lanes, acc)`; Q4_1's `m·s`
//! terms in a scalar sum added after `hsum_float_8`. Each output's arithmetic is
//! that of one `vec_dot` call, so tiling changes speed, never results; the tile
//! only lets one weight block serve `C` activation rows while it is in registers.

use std::arch::x86_64::*;

use super::simd::{f16_to_f32, hsum_f32x8, load_i8x32, load_u8x32, to_array, unpack_nibbles};
use crate::cpu::activations::ActivationRow;
use crate::cpu::blocks::{Quants, WeightBlock};
use crate::cpu::weight_type::WeightType;

/// A weight block ready for `maddubs`, which multiplies unsigned by signed bytes.
#[derive(Clone, Copy)]
struct PreparedBlock {
    /// Q4_1: the nibbles; Q4_0/Q8_0: the absolute values (`_mm256_sign_epi8(x, x)`).
    unsigned: __m256i,
    /// Q4_0/Q8_0: the signed values, whose signs move onto the activations.
    signs: __m256i,
    scale: f32,
    min: f32,
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn prepare<B: WeightBlock>(block: &B) -> PreparedBlock {
    let raw = match block.quants() {
        Quants::Nibbles(packed) => unpack_nibbles(packed),
        Quants::Bytes(bytes) => load_u8x32(bytes),
    };
    let scale = f16_to_f32(block.scale_bits());
    let min = f16_to_f32(block.min_bits());
    match B::TYPE {
        WeightType::Q4_1 => PreparedBlock {
            unsigned: raw,
            signs: raw,
            scale,
            min,
        },
        WeightType::Q4_0 | WeightType::Q8_0 => {
            let signed = if B::TYPE == WeightType::Q4_0 {
                _mm256_sub_epi8(raw, _mm256_set1_epi8(8))
            } else {
                raw
            };
            PreparedBlock {
                unsigned: _mm256_sign_epi8(signed, signed),
                signs: signed,
                scale,
                min,
            }
        }
    }
}

/// The 8 lane sums (4 products each) of one block pair, as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn lane_dots<B: WeightBlock>(weights: &PreparedBlock, activations: __m256i) -> __m256 {
    let signed = if B::TYPE == WeightType::Q4_1 {
        activations
    } else {
        _mm256_sign_epi8(activations, weights.signs)
    };
    let pairs = _mm256_maddubs_epi16(weights.unsigned, signed);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// `value` in all 8 lanes, loaded from memory.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn broadcast(value: &f32) -> __m256 {
    _mm256_broadcast_ss(value)
}

/// Dot products of `R` weight rows with `C ≤ 8` activation rows; `out[c][r]`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn tile<B: WeightBlock, const R: usize, const C: usize>(
    rows: [&[B]; R],
    acts: [ActivationRow<'_>; C],
) -> [[f32; R]; C] {
    const { assert!(C <= 8) };
    let blocks = acts[0].scales.len();
    // Slicing everything to `blocks` up front lets the compiler drop the bounds
    // checks inside the loop.
    let rows = rows.map(|row| &row[..blocks]);
    let quants = acts.map(|act| &act.quants[..blocks]);
    let act_scales = acts.map(|act| &act.scales[..blocks]);
    let q8_1_sums = acts.map(|act| &act.q8_1_sums[..blocks]);
    let mut acc = [[_mm256_setzero_ps(); R]; C];
    // Q4_1's `m·s` sums, one lane per activation row: each lane is its own
    // sequential chain of FMAs, exactly the scalar `summs`.
    let mut min_terms = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let mut prepared = [PreparedBlock {
            unsigned: _mm256_setzero_si256(),
            signs: _mm256_setzero_si256(),
            scale: 0.0,
            min: 0.0,
        }; R];
        let act_scale = |c: usize| if c < C { act_scales[c][b] } else { 0.0 };
        let block_act_scales = _mm256_setr_ps(
            act_scale(0),
            act_scale(1),
            act_scale(2),
            act_scale(3),
            act_scale(4),
            act_scale(5),
            act_scale(6),
            act_scale(7),
        );
        // `dw·da` for every pair at once; the pairs then broadcast their product
        // from memory, which costs a load instead of two vector operations.
        let mut products = [[0.0f32; 8]; R];
        for r in 0..R {
            prepared[r] = prepare(&rows[r][b]);
            products[r] = to_array(_mm256_mul_ps(
                _mm256_set1_ps(prepared[r].scale),
                block_act_scales,
            ));
        }
        // Opaque to the optimizer, which would otherwise turn the loads back into
        // register shuffles.
        let products = std::hint::black_box(&products);
        for c in 0..C {
            let activations = load_i8x32(&quants[c][b]);
            for r in 0..R {
                let lanes = lane_dots::<B>(&prepared[r], activations);
                let scale = broadcast(&products[r][c]);
                acc[c][r] = _mm256_fmadd_ps(scale, lanes, acc[c][r]);
            }
        }
        if B::TYPE == WeightType::Q4_1 {
            let sum = |c: usize| if c < C { q8_1_sums[c][b] } else { 0.0 };
            let sums = _mm256_setr_ps(
                sum(0),
                sum(1),
                sum(2),
                sum(3),
                sum(4),
                sum(5),
                sum(6),
                sum(7),
            );
            for r in 0..R {
                min_terms[r] = _mm256_fmadd_ps(_mm256_set1_ps(prepared[r].min), sums, min_terms[r]);
            }
        }
    }
    let min_terms = min_terms.map(|m| to_array(m));
    let mut out = [[0.0f32; R]; C];
    for c in 0..C {
        for r in 0..R {
            out[c][r] = hsum_f32x8(acc[c][r]);
            if B::TYPE == WeightType::Q4_1 {
                out[c][r] += min_terms[r][c];
            }
        }
    }
    out
}
