//! Small AVX2/F16C building blocks shared by the kernels: loads from block byte
//! arrays, nibble unpacking, half-precision conversion and `hsum_float_8`. Every
//! function needs the features its kernel module is compiled with.

use std::arch::x86_64::*;

use crate::cpu::blocks::{Quants, WeightBlock};

/// Loads 32 bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn load_u8x32(bytes: &[u8; 32]) -> __m256i {
    // SAFETY: the reference covers 32 readable bytes and `loadu` has no alignment
    // requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// Loads 32 signed bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn load_i8x32(bytes: &[i8; 32]) -> __m256i {
    // SAFETY: the reference covers 32 readable bytes and `loadu` has no alignment
    // requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// Stores 32 bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn store_u8x32(dst: &mut [u8; 32], value: __m256i) {
    // SAFETY: the exclusive reference covers 32 writable bytes and `storeu` has no
    // alignment requirement.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), value) }
}

/// Loads 4 floats.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn load_f32x4(values: &[f32; 4]) -> __m128 {
    // SAFETY: the reference covers 4 readable floats and `loadu` has no alignment
    // requirement.
    unsafe { _mm_loadu_ps(values.as_ptr()) }
}

/// Stores 8 floats.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn store_f32x8(dst: &mut [f32; 8], value: __m256) {
    // SAFETY: the exclusive reference covers 8 writable floats and `storeu` has no
    // alignment requirement.
    unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), value) }
}

/// Stores 32 signed bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn store_i8x32(dst: &mut [i8; 32], value: __m256i) {
    // SAFETY: the exclusive reference covers 32 writable bytes and `storeu` has no
    // alignment requirement.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), value) }
}

/// Loads 8 floats.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn load_f32x8(values: &[f32; 8]) -> __m256 {
    // SAFETY: the reference covers 8 readable floats and `loadu` has no alignment
    // requirement.
    unsafe { _mm256_loadu_ps(values.as_ptr()) }
}

/// Stores 8 floats.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn to_array(value: __m256) -> [f32; 8] {
    let mut out = [0.0f32; 8];
    // SAFETY: `out` holds 8 writable floats and `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), value) };
    out
}

/// 32 packed nibbles as 32 bytes in 0..=15, in value order (`bytes_from_nibbles_32`:
/// low nibbles first, then high nibbles).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn unpack_nibbles(packed: &[u8; 16]) -> __m256i {
    // SAFETY: the reference covers 16 readable bytes and `loadu` has no alignment
    // requirement.
    let both = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(packed.as_ptr().cast()) });
    // Shifting only the upper copy right by 4 brings the high nibbles down; bits
    // crossing byte boundaries land in the high half of each byte and are masked.
    let shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f))
}

/// Q5's 32 unsigned 5-bit values: [`unpack_nibbles`] of `low`, with bit `j` of
/// `high` as the fifth bit of value `j`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn unpack_five_bits(low: &[u8; 16], high: u32) -> __m256i {
    // Byte j of the vector gets byte j / 8 of `high`, then keeps bit j % 8.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(high as i32),
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_or_si256(
        unpack_nibbles(low),
        _mm256_and_si256(set, _mm256_set1_epi8(0x10)),
    )
}

/// A block's 32 stored quants as unsigned bytes (Q8_0's as its signed bytes).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn raw_quants<B: WeightBlock>(block: &B) -> __m256i {
    match block.quants() {
        Quants::Nibbles(packed) => unpack_nibbles(packed),
        Quants::FiveBits { low, high } => unpack_five_bits(low, high),
        Quants::Bytes(bytes) => load_u8x32(bytes),
    }
}

/// Half-precision bits to f32, exactly.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn f16_to_f32(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// Eight half-precision values to f32, exactly.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn f16x8_to_f32(bits: [u16; 8]) -> __m256 {
    let [b0, b1, b2, b3, b4, b5, b6, b7] = bits.map(|b| b as i16);
    _mm256_cvtph_ps(_mm_setr_epi16(b0, b1, b2, b3, b4, b5, b6, b7))
}

/// `hsum_float_8`: high half plus low half, then pairs, then the last two. The
/// order is part of the result's rounding.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum_f32x8(x: __m256) -> f32 {
    let mut sum = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    _mm_cvtss_f32(sum)
}

/// [`hsum_f32x8`] of eight vectors at once, every sum's additions in its order
/// (so the same bits): the halves of pairs of vectors, then pairs of lanes
/// for four vectors, then one horizontal add. Lanes hold the sums of
/// `x[0], x[2], x[4], x[6], x[1], x[3], x[5], x[7]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum_f32x8_eight(x: [__m256; 8]) -> __m256 {
    // [a.lo + a.hi | b.lo + b.hi]: hsum's first step for a and b.
    let halves = |a: __m256, b: __m256| {
        let low = _mm256_permute2f128_ps::<0x20>(a, b);
        let high = _mm256_permute2f128_ps::<0x31>(a, b);
        _mm256_add_ps(low, high)
    };
    // Per 128-bit lane, lanes 0 + 2 and 1 + 3 of a, then of b: its second step.
    let pairs = |a: __m256, b: __m256| {
        let even = _mm256_shuffle_ps::<0b01_00_01_00>(a, b);
        let odd = _mm256_shuffle_ps::<0b11_10_11_10>(a, b);
        _mm256_add_ps(even, odd)
    };
    let low = pairs(halves(x[0], x[1]), halves(x[2], x[3]));
    let high = pairs(halves(x[4], x[5]), halves(x[6], x[7]));
    // Its last step, lane 0 + lane 1, for all eight.
    _mm256_hadd_ps(low, high)
}

/// Sum of 8 i32 lanes (wrapping, like the integer adds it stands for).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum_i32x8(x: __m256i) -> i32 {
    let quad = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256::<1>(x));
    let pair = _mm_add_epi32(quad, _mm_unpackhi_epi64(quad, quad));
    let one = _mm_add_epi32(pair, _mm_shuffle_epi32::<0b10_11_00_01>(pair));
    _mm_cvtsi128_si32(one)
}

/// The 8×8 transpose of i32 lanes: lane `r` of output `j` is lane `j` of
/// input `r`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn transpose_8x8(x: [__m256i; 8]) -> [__m256i; 8] {
    let lo32 = |a, b| _mm256_unpacklo_epi32(a, b);
    let hi32 = |a, b| _mm256_unpackhi_epi32(a, b);
    let (t0, t1, t2, t3) = (
        lo32(x[0], x[1]),
        hi32(x[0], x[1]),
        lo32(x[2], x[3]),
        hi32(x[2], x[3]),
    );
    let (t4, t5, t6, t7) = (
        lo32(x[4], x[5]),
        hi32(x[4], x[5]),
        lo32(x[6], x[7]),
        hi32(x[6], x[7]),
    );
    let lo64 = |a, b| _mm256_unpacklo_epi64(a, b);
    let hi64 = |a, b| _mm256_unpackhi_epi64(a, b);
    let (u0, u1, u2, u3) = (lo64(t0, t2), hi64(t0, t2), lo64(t1, t3), hi64(t1, t3));
    let (u4, u5, u6, u7) = (lo64(t4, t6), hi64(t4, t6), lo64(t5, t7), hi64(t5, t7));
    [
        _mm256_permute2x128_si256::<0x20>(u0, u4),
        _mm256_permute2x128_si256::<0x20>(u1, u5),
        _mm256_permute2x128_si256::<0x20>(u2, u6),
        _mm256_permute2x128_si256::<0x20>(u3, u7),
        _mm256_permute2x128_si256::<0x31>(u0, u4),
        _mm256_permute2x128_si256::<0x31>(u1, u5),
        _mm256_permute2x128_si256::<0x31>(u2, u6),
        _mm256_permute2x128_si256::<0x31>(u3, u7),
    ]
}
