//! A tile of 8 Q4_0 weight rows × `C` activation rows with the rounding of
//! llama.cpp's repacked AVX2 kernels (`ggml_gemv_q4_0_8x8_q8_0` and its gemm),
//! which llama.cpp uses for Q4_0 matrices whose row count is a multiple of 8: per
//! block the whole 32-value integer dot product, then `acc = fma(dot, dw·da, acc)`,
//! one f32 accumulator per output. We read GGUF blocks in place instead of
//! repacking them; the integer sums are exact, so only their grouping differs.

use std::arch::x86_64::*;

use super::simd::{f16x8_to_f32, load_i8x32, to_array, unpack_nibbles};
use crate::cpu::activations::ActivationRow;
use crate::cpu::blocks::{Quants, WeightBlock};

/// Rows per tile: the 8 lanes of one f32 vector.
pub(super) const ROWS: usize = 8;

/// Dot products of 8 Q4_0 rows with `C` activation rows; `out[c][r]`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn tile<const C: usize>(
    rows: [&[[u8; 18]]; ROWS],
    acts: [ActivationRow<'_>; C],
) -> [[f32; ROWS]; C] {
    let blocks = acts[0].scales.len();
    let rows = rows.map(|row| &row[..blocks]);
    let mut acc = [_mm256_setzero_ps(); C];
    for b in 0..blocks {
        // Nibbles stay unsigned (0..=15) for `maddubs`; the offset of 8 comes off
        // the integer sum as 8·Σq.
        let mut nibbles = [_mm256_setzero_si256(); ROWS];
        let mut scale_bits = [0u16; ROWS];
        for r in 0..ROWS {
            let block = &rows[r][b];
            scale_bits[r] = block.scale_bits();
            if let Quants::Nibbles(packed) = block.quants() {
                nibbles[r] = unpack_nibbles(packed);
            }
        }
        let weight_scales = f16x8_to_f32(scale_bits);
        for c in 0..C {
            let act = acts[c];
            let quants = load_i8x32(&act.quants[b]);
            let mut dots = [_mm256_setzero_si256(); ROWS];
            for r in 0..ROWS {
                let pairs = _mm256_maddubs_epi16(nibbles[r], quants);
                dots[r] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
            }
            let offset = _mm256_set1_epi32(8 * act.quant_sums[b]);
            let sums = _mm256_sub_epi32(sum_each(dots), offset);
            let scales = _mm256_mul_ps(weight_scales, _mm256_set1_ps(act.scales[b]));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scales, acc[c]);
        }
    }
    acc.map(|a| to_array(a))
}

/// Lane `r` of the result is the sum of the 8 lanes of `x[r]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sum_each(x: [__m256i; ROWS]) -> __m256i {
    // Within each 128-bit half: after two rounds of pairwise adds, the half holds
    // the sums of rows 0..4 (or 4..8) over that half's lanes.
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
