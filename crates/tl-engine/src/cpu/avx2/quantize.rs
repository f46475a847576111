//! Activation quantization, instruction for instruction as llama.cpp's AVX2
//! `quantize_row_q8_0`/`quantize_row_q8_1`: amax by a max tree, `d = amax/127`,
//! values times `127/amax`, rounded half to even, packed with saturation.

use std::arch::x86_64::*;

use super::simd::{hsum_i32x8, load_f32x8, store_i8x32};
use crate::cpu::activations::QuantizedBlock;
use crate::cpu::weight_type::BLOCK_VALUES;

/// Quantizes one block of 32 activations.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn quantize_block(x: &[f32; BLOCK_VALUES]) -> QuantizedBlock {
    let (eighths, _) = x.as_chunks::<8>();
    let [v0, v1, v2, v3] = [0, 1, 2, 3].map(|i| eighths[i]);
    let v = [
        load_f32x8(&v0),
        load_f32x8(&v1),
        load_f32x8(&v2),
        load_f32x8(&v3),
    ];

    let sign_bit = _mm256_set1_ps(-0.0);
    let mut max_abs = _mm256_andnot_ps(sign_bit, v[0]);
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[1]));
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[2]));
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v[3]));
    let mut max4 = _mm_max_ps(
        _mm256_extractf128_ps::<1>(max_abs),
        _mm256_castps256_ps128(max_abs),
    );
    max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
    max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
    let amax = _mm_cvtss_f32(max4);

    let scale = amax / 127.0;
    let inverse = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
    let round = |x: __m256| -> __m256i {
        // Rounding mode 0 is `_MM_ROUND_NEAREST`: half to even.
        _mm256_cvtps_epi32(_mm256_round_ps::<0>(_mm256_mul_ps(x, inverse)))
    };
    let i0 = round(v[0]);
    let i1 = round(v[1]);
    let i2 = round(v[2]);
    let i3 = round(v[3]);
    let quant_sum = hsum_i32x8(_mm256_add_epi32(
        _mm256_add_epi32(i0, i1),
        _mm256_add_epi32(i2, i3),
    ));

    // The packs work per 128-bit half; the permute puts the bytes back in order.
    let low = _mm256_packs_epi32(i0, i1);
    let high = _mm256_packs_epi32(i2, i3);
    let packed = _mm256_packs_epi16(low, high);
    let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    let mut quants = [0i8; BLOCK_VALUES];
    store_i8x32(&mut quants, ordered);
    QuantizedBlock {
        quants,
        scale,
        quant_sum,
    }
}
