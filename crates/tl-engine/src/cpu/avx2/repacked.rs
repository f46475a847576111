//! Tiles of 8 Q4_0 weight rows with the rounding of llama.cpp's repacked AVX2
//! kernels (`ggml_gemv_q4_0_8x8_q8_0` and its gemm), which llama.cpp uses for Q4_0
//! matrices whose row count is a multiple of 8: per block the whole 32-value
//! integer dot product, then `acc = fma(dot, dw·da, acc)`, one f32 accumulator per
//! output. The matrix holds its GGUF blocks in tiles of 8 rows, block-major
//! (`WeightRows::tiled`), so a tile is one stream from memory; integer sums are
//! exact, so grouping them differently from llama.cpp's layout changes nothing.

use std::arch::x86_64::*;

use super::prepared::PreparedRows;
use super::simd::{f16x8_to_f32, load_f32x8, load_i8x32, load_u8x32, to_array, unpack_nibbles};
use crate::cpu::activations::{ActivationGroup, ActivationRow, GROUP_ROWS};
use crate::cpu::blocks::{Quants, WeightBlock};
use crate::cpu::weight_type::BLOCK_VALUES;

/// Rows per tile: the 8 lanes of one f32 vector.
pub(super) const ROWS: usize = crate::cpu::matrix::TILE_ROWS;

/// Lane `r` of the result is the sum of the 8 lanes of `x[r]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn sum_each(x: [__m256i; ROWS]) -> __m256i {
    // Within each 128-bit half, two rounds of pairwise adds leave the sums of rows
    // 0..4 (then 4..8) over that half's lanes.
    let r01 = _mm256_hadd_epi32(x[0], x[1]);
    let r23 = _mm256_hadd_epi32(x[2], x[3]);
    let r45 = _mm256_hadd_epi32(x[4], x[5]);
    let r67 = _mm256_hadd_epi32(x[6], x[7]);
    let r0123 = _mm256_hadd_epi32(r01, r23);
    let r4567 = _mm256_hadd_epi32(r45, r67);
    let low_halves = _mm256_permute2x128_si256::<0x20>(r0123, r4567);
    let high_halves = _mm256_permute2x128_si256::<0x31>(r0123, r4567);
    _mm256_add_epi32(low_halves, high_halves)
}

/// One block step for one activation row: `Σ (nibble − 8)·q` for the 8 rows,
/// computed as `Σ nibble·q − 8·Σq` so that `maddubs` sees unsigned nibbles.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn block_dots(nibbles: &[__m256i; ROWS], activations: __m256i, quant_sum: i32) -> __m256 {
    let mut dots = [_mm256_setzero_si256(); ROWS];
    for r in 0..ROWS {
        let pairs = _mm256_maddubs_epi16(nibbles[r], activations);
        dots[r] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    }
    let offset = _mm256_set1_epi32(8 * quant_sum);
    _mm256_cvtepi32_ps(_mm256_sub_epi32(sum_each(dots), offset))
}

/// Blocks ahead of the one being read that decode asks the cache for: the
/// tile is one stream from memory, read once per token.
const PREFETCH_BLOCKS_AHEAD: usize = 4;

/// A tile of 8 Q4_0 rows (block-major: `tile[b][r]`) · one activation row
/// (decode).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn row_tile<B: WeightBlock>(tile: &[[B; ROWS]], act: ActivationRow<'_>) -> [f32; ROWS] {
    let blocks = act.scales.len();
    let tile = &tile[..blocks];
    let (quants, act_scales, quant_sums) = (
        &act.quants[..blocks],
        &act.scales[..blocks],
        &act.quant_sums[..blocks],
    );
    let mut acc = _mm256_setzero_ps();
    for b in 0..blocks {
        prefetch_tile_blocks(tile, b + PREFETCH_BLOCKS_AHEAD);
        let mut nibbles = [_mm256_setzero_si256(); ROWS];
        let mut scale_bits = [0u16; ROWS];
        for r in 0..ROWS {
            let block = &tile[b][r];
            scale_bits[r] = block.scale_bits();
            if let Quants::Nibbles(packed) = block.quants() {
                nibbles[r] = unpack_nibbles(packed);
            }
        }
        let dots = block_dots(&nibbles, load_i8x32(&quants[b]), quant_sums[b]);
        let scales = _mm256_mul_ps(f16x8_to_f32(scale_bits), _mm256_set1_ps(act_scales[b]));
        acc = _mm256_fmadd_ps(dots, scales, acc);
    }
    to_array(acc)
}

/// Asks for the cache lines of the tile's blocks `b` (its 8 rows' blocks).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn prefetch_tile_blocks<B>(tile: &[[B; ROWS]], b: usize) {
    const LINE: usize = 64;
    let first = tile.as_ptr().wrapping_add(b).cast::<i8>();
    for offset in (0..std::mem::size_of::<[B; ROWS]>() + LINE - 1).step_by(LINE) {
        // A prefetch is only a hint: it never faults, whatever the address.
        _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(offset));
    }
}

/// 8 prepared rows (raw nibbles) · a group of 4 activation rows; `out[c][r]`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn group_tile(
    prepared: &PreparedRows,
    group: &ActivationGroup<'_>,
) -> [[f32; ROWS]; GROUP_ROWS] {
    let blocks = group.scales.len();
    let weights: &[[[[u8; BLOCK_VALUES]; 2]; ROWS]] = prepared.weights().as_chunks().0;
    let scales: &[[f32; ROWS]] = prepared.scales().as_chunks().0;
    let (weights, scales) = (&weights[..blocks], &scales[..blocks]);
    let quants = &group.quants[..blocks];
    let (act_scales, quant_sums) = (&group.scales[..blocks], &group.quant_sums[..blocks]);
    let mut acc = [_mm256_setzero_ps(); GROUP_ROWS];
    for b in 0..blocks {
        let mut nibbles = [_mm256_setzero_si256(); ROWS];
        for r in 0..ROWS {
            nibbles[r] = load_u8x32(&weights[b][r][0]);
        }
        let weight_scales = load_f32x8(&scales[b]);
        for c in 0..GROUP_ROWS {
            let dots = block_dots(&nibbles, load_i8x32(&quants[b][c]), quant_sums[b][c]);
            let scale = _mm256_mul_ps(weight_scales, _mm256_set1_ps(act_scales[b][c]));
            acc[c] = _mm256_fmadd_ps(dots, scale, acc[c]);
        }
    }
    acc.map(|a| to_array(a))
}
