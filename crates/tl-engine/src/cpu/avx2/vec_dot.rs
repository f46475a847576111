//! Tiles with the rounding of llama.cpp's AVX2 `ggml_vec_dot_q4_0_q8_0` /
//! `_q4_1_q8_1` / `_q8_0_q8_0` (and of tinyBLAS, which rounds alike): per block, 8
//! lanes of 4-value integer dot products, `acc = fma(dw·da, lanes, acc)`; Q4_1's
//! `m·s` terms in a separate sum added after `hsum_float_8`. Each output's
//! arithmetic is that of one `vec_dot` call; tiling only changes which weight and
//! activation blocks sit in registers together.

use std::arch::x86_64::*;
use std::ops::Range;

use super::prepared::PreparedRows;
use super::simd::{hsum_f32x8, load_f32x4, load_i8x32, load_u8x32, to_array4, unpack_nibbles};
use crate::cpu::activations::{ActivationGroup, ActivationRow, QuantizedActivations, GROUP_ROWS};
use crate::cpu::blocks::{Quants, WeightBlock};
use crate::cpu::weight_type::{WeightType, BLOCK_VALUES};

/// The 8 lane sums (4 products each) of a block pair, as f32. `unsigned` is what
/// `maddubs` multiplies (Q4_1 nibbles, or |w|); `signs` the signed weights.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn lane_dots<B: WeightBlock>(unsigned: __m256i, signs: __m256i, activations: __m256i) -> __m256 {
    let signed = if B::TYPE == WeightType::Q4_1 {
        activations
    } else {
        _mm256_sign_epi8(activations, signs)
    };
    let pairs = _mm256_maddubs_epi16(unsigned, signed);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// The sum llama.cpp returns: `hsum_float_8(acc)`, plus `summs` for Q4_1.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn finish<B: WeightBlock>(acc: __m256, min_terms: f32) -> f32 {
    let sum = hsum_f32x8(acc);
    if B::TYPE == WeightType::Q4_1 {
        sum + min_terms
    } else {
        sum
    }
}

/// `R` GGUF weight rows · one activation row (decode): blocks are unpacked as
/// they stream from memory.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn row_tile<B: WeightBlock, const R: usize>(
    rows: [&[B]; R],
    act: ActivationRow<'_>,
) -> [f32; R] {
    let blocks = act.scales.len();
    let rows = rows.map(|row| &row[..blocks]);
    let (quants, act_scales, sums) = (
        &act.quants[..blocks],
        &act.scales[..blocks],
        &act.q8_1_sums[..blocks],
    );
    let mut acc = [_mm256_setzero_ps(); R];
    let mut min_terms = [0.0f32; R];
    for b in 0..blocks {
        let activations = load_i8x32(&quants[b]);
        let act_scale = _mm256_set1_ps(act_scales[b]);
        for r in 0..R {
            let block = &rows[r][b];
            prefetch_ahead(block, rows[r]);
            let raw = match block.quants() {
                Quants::Nibbles(packed) => unpack_nibbles(packed),
                Quants::Bytes(bytes) => load_u8x32(bytes),
            };
            let signed = if B::TYPE == WeightType::Q4_0 {
                _mm256_sub_epi8(raw, _mm256_set1_epi8(8))
            } else {
                raw
            };
            let unsigned = if B::TYPE == WeightType::Q4_1 {
                raw
            } else {
                _mm256_sign_epi8(signed, signed)
            };
            // Both halves of the block header at once: `[d, m]` (m = 0 unless Q4_1).
            let header = u32::from(block.scale_bits()) | (u32::from(block.min_bits()) << 16);
            let scale_and_min = _mm_cvtph_ps(_mm_cvtsi32_si128(header as i32));
            let weight_scale = _mm256_broadcastss_ps(scale_and_min);
            let lanes = lane_dots::<B>(unsigned, signed, activations);
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(weight_scale, act_scale), lanes, acc[r]);
            if B::TYPE == WeightType::Q4_1 {
                let min = _mm_cvtss_f32(_mm_movehdup_ps(scale_and_min));
                min_terms[r] = min.mul_add(sums[b], min_terms[r]);
            }
        }
    }
    std::array::from_fn(|r| finish::<B>(acc[r], min_terms[r]))
}

/// How far ahead of the block being read decode prefetches, in rows: weights
/// stream from DRAM once per token and the hardware prefetcher alone leaves the
/// memory bus idle part of the time.
const PREFETCH_ROWS_AHEAD: usize = 8;

/// Asks for the cache line of the same block `PREFETCH_ROWS_AHEAD` rows on
/// (rows are consecutive in memory).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn prefetch_ahead<B>(block: &B, row: &[B]) {
    let ahead = (block as *const B)
        .cast::<i8>()
        .wrapping_add(PREFETCH_ROWS_AHEAD * std::mem::size_of_val(row));
    // A prefetch is only a hint: it never faults, whatever the address.
    _mm_prefetch::<_MM_HINT_T0>(ahead)
}

/// Blocks whose `dw·da` products are computed in one pass before the dot
/// products use them.
const PRODUCT_CHUNK: usize = 32;

/// Room a share's tiles of `R` weight rows reuse (zeroing it afresh for each
/// activation group cost as much as a small batch's dot products).
pub(super) struct TileScratch<const R: usize> {
    /// One chunk of `dw·da` products for one activation group, `[block][r][c]`.
    products: [[[f32; GROUP_ROWS]; R]; PRODUCT_CHUNK],
    /// Q4_1's `Σ m·s` for each activation group of the chunk, `[group][r][c]`.
    min_terms: Vec<[[f32; GROUP_ROWS]; R]>,
}

impl<const R: usize> TileScratch<R> {
    pub(super) fn new() -> Self {
        TileScratch {
            products: [[[0.0; GROUP_ROWS]; R]; PRODUCT_CHUNK],
            min_terms: Vec::new(),
        }
    }
}

/// Activation groups whose `Σ m·s` chains run interleaved.
const MIN_TERM_GROUPS: usize = 4;

/// Q4_1's `Σ m·s` terms of `R` prepared rows against every activation group
/// of `chunk`, into `scratch` for [`group_tile`]. Each output's FMAs run in
/// block order as in `vec_dot`; only the chains of several groups are
/// interleaved, so they overlap instead of each waiting out its latency.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prepare_min_terms<B: WeightBlock, const R: usize>(
    prepared: &PreparedRows,
    acts: &QuantizedActivations,
    chunk: Range<usize>,
    scratch: &mut TileScratch<R>,
) {
    scratch.min_terms.clear();
    if B::TYPE != WeightType::Q4_1 {
        return;
    }
    let mins: &[[f32; R]] = prepared.mins().as_chunks().0;
    for first in chunk.clone().step_by(MIN_TERM_GROUPS) {
        // Past the chunk's end the last group is repeated and its sums dropped.
        let sums: [&[[f32; GROUP_ROWS]]; MIN_TERM_GROUPS] =
            std::array::from_fn(|g| acts.group((first + g).min(chunk.end - 1)).0.q8_1_sums);
        let mut acc = [[_mm_setzero_ps(); R]; MIN_TERM_GROUPS];
        for (b, mins) in mins.iter().enumerate() {
            for (acc, sums) in acc.iter_mut().zip(&sums) {
                let act_sums = load_f32x4(&sums[b]);
                for r in 0..R {
                    acc[r] = _mm_fmadd_ps(_mm_set1_ps(mins[r]), act_sums, acc[r]);
                }
            }
        }
        let count = (chunk.end - first).min(MIN_TERM_GROUPS);
        for acc in &acc[..count] {
            scratch.min_terms.push(acc.map(|a| to_array4(a)));
        }
    }
}

/// `R` prepared weight rows · a group of 4 activation rows (prefill); `out[c][r]`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn group_tile<B: WeightBlock, const R: usize>(
    prepared: &PreparedRows,
    (group, index): (&ActivationGroup<'_>, usize),
    scratch: &mut TileScratch<R>,
) -> [[f32; R]; GROUP_ROWS] {
    let blocks = group.scales.len();
    let weights: &[[[[u8; BLOCK_VALUES]; 2]; R]] = prepared.weights().as_chunks().0;
    let scales: &[[f32; R]] = prepared.scales().as_chunks().0;
    let (weights, scales) = (&weights[..blocks], &scales[..blocks]);
    let (quants, act_scales) = (group.quants, group.scales);

    let mut acc = [[_mm256_setzero_ps(); R]; GROUP_ROWS];
    let products = &mut scratch.products;
    for start in (0..blocks).step_by(PRODUCT_CHUNK) {
        let chunk = start..(start + PRODUCT_CHUNK).min(blocks);
        let block_products = products.iter_mut().zip(&scales[chunk.clone()]);
        for ((products, scales), act_scales) in block_products.zip(&act_scales[chunk.clone()]) {
            let act_scales = load_f32x4(act_scales);
            for r in 0..R {
                products[r] = to_array4(_mm_mul_ps(_mm_set1_ps(scales[r]), act_scales));
            }
        }
        // Opaque to the optimizer, which would otherwise turn the broadcasts from
        // memory below back into register shuffles on the vector pipes.
        let products = std::hint::black_box(&*products);
        // 8 accumulators; with the weights, activations and temporaries they
        // just about fill the 16 vector registers. Iterators, not indices, keep
        // bounds checks (and the registers they need) out of the loop.
        let blocks = weights[chunk.clone()].iter().zip(&quants[chunk]);
        for ((weights, quants), products) in blocks.zip(products.iter()) {
            for r in 0..R {
                let [unsigned, signs] = &weights[r];
                let unsigned = load_u8x32(unsigned);
                let signs = if B::TYPE == WeightType::Q4_1 {
                    _mm256_setzero_si256()
                } else {
                    load_u8x32(signs)
                };
                for c in 0..GROUP_ROWS {
                    let lanes = lane_dots::<B>(unsigned, signs, load_i8x32(&quants[c]));
                    let scale = _mm256_broadcast_ss(&products[r][c]);
                    acc[c][r] = _mm256_fmadd_ps(scale, lanes, acc[c][r]);
                }
            }
        }
    }
    // Q4_1's `m·s` sums of this group, from `prepare_min_terms`.
    let min_terms = match scratch.min_terms.get(index) {
        Some(terms) if B::TYPE == WeightType::Q4_1 => *terms,
        _ => [[0.0; GROUP_ROWS]; R],
    };
    std::array::from_fn(|c| std::array::from_fn(|r| finish::<B>(acc[c][r], min_terms[r][c])))
}
