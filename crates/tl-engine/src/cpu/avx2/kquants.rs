//! The integer sums of the K-quant products with AVX2. Batches take eight
//! weight rows at once with the rows in vector lanes ([`LaneTile`]): an
//! activation row's four bytes, broadcast, meet four values of each row in
//! one `vpdpbusd` (AVX-512 VNNI) or `maddubs` (AVX2), so each row's sums
//! build up in its own lane; single rows stream through lean kernels.
//! `maddubs` multiplies the unsigned stored quants by the activations into
//! 16-bit pairs, which cannot saturate (2 · 63 · 127 < 2¹⁵); a type's offset
//! comes off as `offset · Σ scale · Σ a` over each run, from the
//! activations' run sums. Every step is exact, so the sums equal the
//! portable ones.

use std::arch::x86_64::*;

use super::repacked::sum_each;
use super::simd::{f16x8_to_f32, transpose_8x8};
use crate::cpu::kquants::{
    single_finish, single_step, step, GroupSums, KArithmetic, Lanes, Q8KBlock, RowState,
    SuperBlock, Unpacked,
};

/// One weight super-block in registers.
struct WeightRegisters {
    quants: [__m256i; 8],
    /// Each 32-value chunk's scales: its first run's in the low half, its
    /// second run's in the high half.
    chunk_scales: [__m256i; 8],
    /// The 16 run scales, those times the offset, and the 16 minimums.
    scales: __m256i,
    offset_scales: __m256i,
    mins: __m256i,
    /// What the quants are stored above zero (Q3_K 4, Q6_K 32).
    offset: i16,
}

#[target_feature(enable = "avx2,fma,f16c")]
fn load_32(values: &[u8]) -> __m256i {
    assert!(values.len() >= 32);
    // SAFETY: at least 32 readable bytes (checked above); `loadu` has no
    // alignment requirement.
    unsafe { _mm256_loadu_si256(values.as_ptr().cast()) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn load_i8x32(values: &[i8; 32]) -> __m256i {
    // SAFETY: the reference covers 32 readable bytes; `loadu` has no
    // alignment requirement.
    unsafe { _mm256_loadu_si256(values.as_ptr().cast()) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn load_i16x16(values: &[i16; 16]) -> __m256i {
    // SAFETY: the reference covers 32 readable bytes; `loadu` has no
    // alignment requirement.
    unsafe { _mm256_loadu_si256(values.as_ptr().cast()) }
}

/// Registers from the unsigned quants, the 16 run scales and minimums, and
/// the type's offset.
#[target_feature(enable = "avx2,fma,f16c")]
fn registers(quants: [__m256i; 8], scales: __m256i, mins: __m256i, offset: i16) -> WeightRegisters {
    // The scales of runs 2c and 2c + 1 are dword c: spread it, then keep its
    // low i16 in the low half and its high i16 in the high half.
    let pick = _mm256_setr_epi8(
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
        2, 3,
    );
    // Loops rather than closures through `array::from_fn`, which cannot
    // inline a closure that uses this function's target features.
    let mut chunk_scales = [_mm256_setzero_si256(); 8];
    for (c, chunk) in chunk_scales.iter_mut().enumerate() {
        let spread = _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(c as i32));
        *chunk = _mm256_shuffle_epi8(spread, pick);
    }
    WeightRegisters {
        quants,
        chunk_scales,
        scales,
        offset_scales: _mm256_mullo_epi16(scales, _mm256_set1_epi16(offset)),
        mins,
        offset,
    }
}

/// Q4_K straight from its bytes (the layout `unpack_q4_k` reads).
#[target_feature(enable = "avx2,fma,f16c")]
fn load_q4_k(block: &[u8; 144]) -> WeightRegisters {
    let [scales, mins] = crate::cpu::kquants::k4_scales(&block[4..16]);
    let nibbles = _mm256_set1_epi8(0x0f);
    let mut quants = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let bytes = load_32(&block[16 + 32 * j..]);
        quants[2 * j] = _mm256_and_si256(bytes, nibbles);
        quants[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), nibbles);
    }
    registers(quants, runs_of_16(scales), runs_of_16(mins), 0)
}

/// The 16 run values of 8 sub-block values (each for two runs of 16).
#[target_feature(enable = "avx2,fma,f16c")]
fn runs_of_16(values: [u8; 8]) -> __m256i {
    let widened = _mm_cvtepu8_epi16(_mm_set_epi64x(0, u64::from_le_bytes(values) as i64));
    let twice = _mm256_setr_epi8(
        0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13,
        14, 15, 14, 15,
    );
    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(widened), twice)
}

/// Q6_K straight from its bytes (the layout `unpack_q6_k` reads).
#[target_feature(enable = "avx2,fma,f16c")]
fn load_q6_k(block: &[u8; 210]) -> WeightRegisters {
    let low4 = _mm256_set1_epi8(0x0f);
    let two = |bits: i8| _mm256_set1_epi8(bits);
    let mut quants = [_mm256_setzero_si256(); 8];
    for j in 0..2 {
        let first = load_32(&block[64 * j..]);
        let second = load_32(&block[64 * j + 32..]);
        let high = load_32(&block[128 + 32 * j..]);
        let top = |mask: i8| _mm256_and_si256(high, two(mask));
        quants[4 * j] = _mm256_or_si256(
            _mm256_and_si256(first, low4),
            _mm256_slli_epi16::<4>(top(0x03)),
        );
        quants[4 * j + 1] = _mm256_or_si256(
            _mm256_and_si256(second, low4),
            _mm256_slli_epi16::<2>(top(0x0c)),
        );
        quants[4 * j + 2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(first), low4),
            top(0x30),
        );
        quants[4 * j + 3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(second), low4),
            _mm256_srli_epi16::<2>(top(0xc0u8 as i8)),
        );
    }
    // SAFETY: 16 readable bytes at 192; `loadu` has no alignment requirement.
    let scales = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(block[192..208].as_ptr().cast()) });
    registers(quants, scales, _mm256_setzero_si256(), 32)
}

/// Q5_K straight from its bytes (the layout `unpack_q5_k` reads): Q4_K's
/// nibbles and scales, and the fifth bit of value `32c + i` at bit `c` of
/// byte `i` of the 32 bytes before the nibbles.
#[target_feature(enable = "avx2,fma,f16c")]
fn load_q5_k(block: &[u8; 176]) -> WeightRegisters {
    let (scales, mins) = q4_k_scales(&block[4..20]);
    let nibbles = _mm256_set1_epi8(0x0f);
    let fifths = load_32(&block[16..]);
    let mut quants = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let bytes = load_32(&block[48 + 32 * j..]);
        quants[2 * j] = _mm256_or_si256(
            _mm256_and_si256(bytes, nibbles),
            bit_as(fifths, 1 << (2 * j), 0x10),
        );
        quants[2 * j + 1] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), nibbles),
            bit_as(fifths, 1 << (2 * j + 1), 0x10),
        );
    }
    registers(quants, runs_of_pairs(scales), runs_of_pairs(mins), 0)
}

/// The 16 run values of 8 sub-block values in i16 lanes (each for two runs).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn runs_of_pairs(values: __m128i) -> __m256i {
    _mm256_set_m128i(
        _mm_unpackhi_epi16(values, values),
        _mm_unpacklo_epi16(values, values),
    )
}

/// `value` in each byte of `bytes` where `bit` is set, else 0.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn bit_as(bytes: __m256i, bit: u8, value: u8) -> __m256i {
    let bit = _mm256_set1_epi8(bit as i8);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(value as i8))
}

/// The 2-bit field `k` of each byte of the 32 at `bytes` (value
/// `128j + 32k + i` of Q2_K and Q3_K lies in byte `32j + i`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn two_bits(bytes: __m256i, k: usize) -> __m256i {
    let shifted = _mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * k as i32));
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x03))
}

/// Q2_K's 16 run scales and minimums as i16: the low and high nibbles of
/// its first 16 bytes (`q2_k_scales` in vector lanes).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q2_k_run_values(block: &[u8; 84]) -> (__m256i, __m256i) {
    // SAFETY: 16 readable bytes at 0; `loadu` has no alignment requirement.
    let bytes = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
    let low = _mm_set1_epi8(0x0f);
    let scales = _mm_and_si128(bytes, low);
    let mins = _mm_and_si128(_mm_srli_epi16::<4>(bytes), low);
    (_mm256_cvtepu8_epi16(scales), _mm256_cvtepu8_epi16(mins))
}

/// Q3_K's 16 run scales as i16 from its 12 bytes of 6-bit scales (stored +
/// 32), four at a time in 32-bit words (`q3_k_scales` in vector lanes).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q3_k_run_scales(block: &[u8; 110]) -> __m256i {
    let word = |i: usize| {
        let at = 96 + 4 * i;
        u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]])
    };
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let (low4, low2) = (0x0f0f_0f0f, 0x0303_0303);
    // Scales 4q..4q + 4: a nibble of w0 or w1, and two bits of w2 above it.
    let quarter = |nibbles: u32, shift: u32| (nibbles & low4) | (((w2 >> shift) & low2) << 4);
    let stored = _mm_setr_epi32(
        quarter(w0, 0) as i32,
        quarter(w1, 2) as i32,
        quarter(w0 >> 4, 4) as i32,
        quarter(w1 >> 4, 6) as i32,
    );
    _mm256_cvtepi8_epi16(_mm_sub_epi8(stored, _mm_set1_epi8(32)))
}

/// Q2_K straight from its bytes (the layout `unpack_q2_k` reads).
#[target_feature(enable = "avx2,fma,f16c")]
fn load_q2_k(block: &[u8; 84]) -> WeightRegisters {
    let mut quants = [_mm256_setzero_si256(); 8];
    for j in 0..2 {
        let bytes = load_32(&block[16 + 32 * j..]);
        for k in 0..4 {
            quants[4 * j + k] = two_bits(bytes, k);
        }
    }
    let (scales, mins) = q2_k_run_values(block);
    registers(quants, scales, mins, 0)
}

/// Q3_K straight from its bytes (the layout `unpack_q3_k` reads): the two
/// low bits, and 4 where bit `4j + k` of high byte `i` is set.
#[target_feature(enable = "avx2,fma,f16c")]
fn load_q3_k(block: &[u8; 110]) -> WeightRegisters {
    let high = load_32(&block[..32]);
    let mut quants = [_mm256_setzero_si256(); 8];
    for j in 0..2 {
        let bytes = load_32(&block[32 + 32 * j..]);
        for k in 0..4 {
            let top = bit_as(high, 1 << (4 * j + k), 4);
            quants[4 * j + k] = _mm256_or_si256(two_bits(bytes, k), top);
        }
    }
    registers(quants, q3_k_run_scales(block), _mm256_setzero_si256(), 4)
}

/// A super-block in registers, straight from its bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn load_super_block<const N: usize>(w: &SuperBlock<'_, N>) -> WeightRegisters {
    load_bytes(w.bytes)
}

/// A super-block of any K-quant type in registers.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn load_bytes<const N: usize>(bytes: &[u8; N]) -> WeightRegisters {
    let bytes = bytes.as_slice();
    if let Ok(q4_k) = <&[u8; 144]>::try_from(bytes) {
        load_q4_k(q4_k)
    } else if let Ok(q6_k) = <&[u8; 210]>::try_from(bytes) {
        load_q6_k(q6_k)
    } else if let Ok(q5_k) = <&[u8; 176]>::try_from(bytes) {
        load_q5_k(q5_k)
    } else if let Ok(q2_k) = <&[u8; 84]>::try_from(bytes) {
        load_q2_k(q2_k)
    } else if let Ok(q3_k) = <&[u8; 110]>::try_from(bytes) {
        load_q3_k(q3_k)
    } else {
        unreachable!("K-quant super-blocks are 84, 110, 144, 176 or 210 bytes")
    }
}

/// The four i32 totals of four vectors.
#[target_feature(enable = "avx2,fma,f16c")]
fn totals(v: [__m256i; 4]) -> [i32; 4] {
    let halves = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    let sums = _mm_add_epi32(
        _mm256_castsi256_si128(halves),
        _mm256_extracti128_si256::<1>(halves),
    );
    let mut out = [0i32; 4];
    // SAFETY: `out` is 16 writable bytes; `storeu` has no alignment requirement.
    unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), sums) };
    out
}

/// Per group `p`, the sum of lanes `2p` and `2p + 1` of `runs`, whose lane `l`
/// holds runs `2l` and `2l + 1`.
#[target_feature(enable = "avx2,fma,f16c")]
fn group_totals(runs: __m256i) -> [i32; 4] {
    let pairs = _mm256_hadd_epi32(runs, runs);
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` is 32 writable bytes; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), pairs) };
    [lanes[0], lanes[1], lanes[4], lanes[5]]
}

/// The lanes whose totals are a super-block's `S` (offset taken off) and
/// `M`, in no particular order within the vector.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn whole_lanes(w: &WeightRegisters, a: &Q8KBlock) -> (__m256i, __m256i) {
    let mut scaled = _mm256_setzero_si256();
    let (chunks, _) = a.quants.as_chunks::<32>();
    for (c, chunk) in chunks.iter().enumerate() {
        let pairs = _mm256_maddubs_epi16(w.quants[c], load_i8x32(chunk));
        scaled = _mm256_add_epi32(scaled, _mm256_madd_epi16(pairs, w.chunk_scales[c]));
    }
    let run_sums = load_i16x16(&a.sums16);
    let scaled = _mm256_sub_epi32(scaled, _mm256_madd_epi16(w.offset_scales, run_sums));
    (scaled, _mm256_madd_epi16(w.mins, run_sums))
}

/// The whole super-block's sums only, in `scaled[0]` and `mins[0]` (what
/// the tiled arithmetic reads): one reduction instead of eight.
#[target_feature(enable = "avx2,fma,f16c")]
fn whole_sums(w: &WeightRegisters, a: &Q8KBlock) -> GroupSums {
    let (scaled, mins) = whole_lanes(w, a);
    // [s01 s23 m01 m23 | s45 s67 m45 m67], then [s0..3 m0..3 .. | s4..7 m4..7 ..].
    let quads = _mm256_hadd_epi32(_mm256_hadd_epi32(scaled, mins), _mm256_setzero_si256());
    let both = _mm_add_epi32(
        _mm256_castsi256_si128(quads),
        _mm256_extracti128_si256::<1>(quads),
    );
    GroupSums {
        scaled: [_mm_cvtsi128_si32(both), 0, 0, 0],
        mins: [_mm_extract_epi32::<1>(both), 0, 0, 0],
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn sums(w: &WeightRegisters, a: &Q8KBlock) -> GroupSums {
    let mut groups = [_mm256_setzero_si256(); 4];
    let (chunks, _) = a.quants.as_chunks::<32>();
    for (c, chunk) in chunks.iter().enumerate() {
        let activations = load_i8x32(chunk);
        let pairs = _mm256_maddubs_epi16(w.quants[c], activations);
        let scaled = _mm256_madd_epi16(pairs, w.chunk_scales[c]);
        groups[c / 2] = _mm256_add_epi32(groups[c / 2], scaled);
    }
    let run_sums = load_i16x16(&a.sums16);
    let offsets = group_totals(_mm256_madd_epi16(w.offset_scales, run_sums));
    let scaled = totals(groups);
    GroupSums {
        scaled: std::array::from_fn(|p| scaled[p].wrapping_sub(offsets[p])),
        mins: group_totals(_mm256_madd_epi16(w.mins, run_sums)),
    }
}

/// Adds the terms of `w` with activation row `block(i)` to the
/// accumulators of every row `i`, a row at a time through [`step`] (the
/// weight rows left over after the lanes kernels' groups of eight), the
/// super-block loaded straight from its bytes (`_scratch` is the portable
/// path's, whose signature this shares).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn accumulate<'a, const N: usize>(
    kind: KArithmetic,
    w: &SuperBlock<'_, N>,
    _scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    (acc, acc_min): (&mut [f32], &mut [f32]),
) {
    let registers = load_super_block(w);
    for (i, (acc, acc_min)) in acc.iter_mut().zip(acc_min.iter_mut()).enumerate() {
        let a = block(i);
        let sums = if kind == KArithmetic::Q4KRepacked {
            sums(&registers, a)
        } else {
            whole_sums(&registers, a)
        };
        step(kind, w.factors, &sums, a.d, (acc, acc_min));
    }
}

/// `v`'s eight i32 lanes summed (exact: the lanes' total fits an i32).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn total(v: __m256i) -> i32 {
    let half = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let quarter = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
    _mm_cvtsi128_si32(_mm_add_epi32(quarter, _mm_shuffle_epi32::<1>(quarter)))
}

/// A super-block's f16 factors at `at` (and `at + 2` for `dmin`).
#[inline]
fn half_at(block: &[u8], at: usize) -> f32 {
    crate::cpu::blocks::f16_to_f32(u16::from_le_bytes([block[at], block[at + 1]]))
}

/// Byte shuffles that spread i16 lane `j` of each 128-bit half over it.
const SPREAD_I16: [[u8; 32]; 8] = {
    let mut picks = [[0u8; 32]; 8];
    let mut j = 0;
    while j < 8 {
        let mut i = 0;
        while i < 32 {
            picks[j][i] = (2 * j + i % 2) as u8;
            i += 1;
        }
        j += 1;
    }
    picks
};

/// The 128-bit half `h` of `v` in both halves.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn half_in_both_lanes(v: __m256i, h: usize) -> __m256i {
    if h == 0 {
        _mm256_permute2x128_si256::<0x00>(v, v)
    } else {
        _mm256_permute2x128_si256::<0x11>(v, v)
    }
}

/// Byte shuffles for 32-value chunk `c` in the row kernels, of the run
/// scales widened to i16 with the chunk's half (`c / 4`) in both 128-bit
/// lanes: run `2c`'s scale into every i16 of the low lane, run `2c + 1`'s
/// into the high lane.
const RUN_SCALE_PAIRS: [[u8; 32]; 8] = {
    let mut picks = [[0u8; 32]; 8];
    let mut c = 0;
    while c < 8 {
        let mut i = 0;
        while i < 32 {
            let run = (2 * c + i / 16) % 8;
            picks[c][i] = (2 * run + i % 2) as u8;
            i += 1;
        }
        c += 1;
    }
    picks
};

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn shuffle_by(values: __m256i, pick: &[u8; 32]) -> __m256i {
    // SAFETY: `pick` is 32 readable bytes; `loadu` has no alignment requirement.
    _mm256_shuffle_epi8(values, unsafe { _mm256_loadu_si256(pick.as_ptr().cast()) })
}

/// Q4_K's 12 bytes of 6-bit scales and minimums (at `bytes[..12]`, which
/// must hold 16 readable bytes) as i16 lanes: scales `s_0..s_8` then
/// minimums `m_0..m_8` — `k4_scales` on 32-bit lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q4_k_scales(bytes: &[u8]) -> (__m128i, __m128i) {
    assert!(bytes.len() >= 16);
    // SAFETY: 16 readable bytes (checked above); `loadu` has no alignment requirement.
    let words = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
    // Words [w0, w1]: the low 6 bits of scales and minimums 0..4.
    let low = _mm_and_si128(words, _mm_set1_epi32(0x3f3f_3f3f));
    // Scales and minimums 4..8: the nibbles of w2, the top 2 bits of w0 and w1.
    let w2 = _mm_shuffle_epi32::<0b10_10_10_10>(words);
    let nibbles = _mm_and_si128(
        _mm_srlv_epi32(w2, _mm_setr_epi32(0, 4, 0, 0)),
        _mm_set1_epi32(0x0f0f_0f0f),
    );
    let tops = _mm_slli_epi32::<4>(_mm_and_si128(
        _mm_srli_epi32::<6>(words),
        _mm_set1_epi32(0x0303_0303),
    ));
    let high = _mm_or_si128(nibbles, tops);
    // [s0..4, s4..8, m0..4, m4..8] as bytes, then widened.
    let bytes = _mm_unpacklo_epi32(low, high);
    (
        _mm_cvtepu8_epi16(bytes),
        _mm_cvtepu8_epi16(_mm_unpackhi_epi64(bytes, bytes)),
    )
}

/// One Q4_K weight row against one activation row, streamed a super-block
/// at a time with nothing unpacked to memory: per 64 values one load of 32
/// nibble bytes, two `maddubs` and two `madd` with the sub-block scales;
/// the minimums meet the activations' 16-value sums in one `madd`. The f32
/// steps are [`single_step`]'s (`kind` is `VecDot(Q4_K)` or `Q4KGemv`), in
/// vector lanes, so the result equals the general path's.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k_row(kind: KArithmetic, weights: &[[u8; 144]], acts: &[Q8KBlock]) -> f32 {
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm_setzero_ps());
    for (block, a) in weights.iter().zip(acts) {
        let (lanes, min_terms) = q4_k_lanes(block, a);
        let (d, dmin) = (half_at(block, 0), half_at(block, 2));
        if kind == KArithmetic::Q4KGemv {
            let sums = _mm_cvtepi32_ps(_mm_cvtsi32_si128(total(lanes)));
            let mins = _mm_cvtepi32_ps(_mm_cvtsi32_si128(total(min_terms)));
            let sum = _mm_fmadd_ss(sums, _mm_set_ss(d * a.d), _mm256_castps256_ps128(acc));
            acc = _mm256_castps128_ps256(sum);
            acc_min = _mm_fmadd_ss(mins, _mm_set_ss(dmin * a.d), acc_min);
        } else {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(a.d * d), _mm256_cvtepi32_ps(lanes), acc);
            // Lanes 2j and 2j + 1 of the minimums together: sub-blocks
            // 2j and 2j + 1.
            let pairs = _mm256_hadd_epi32(min_terms, min_terms);
            let mins = _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b10_00>(pairs));
            acc_min = _mm_fmadd_ps(_mm_set1_ps(-a.d * dmin), _mm_cvtepi32_ps(mins), acc_min);
        }
    }
    single_finish(kind, &row_state(acc, acc_min))
}

/// One Q4_K super-block's integer lanes with one activation super-block:
/// the scaled sums (per 64 values one load of 32 nibble bytes, two
/// `maddubs` and two `madd` with the sub-block scales), and in lane `j`
/// `min_j · (Σ of sub-block j's activations)` (lane j of each pair of runs).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q4_k_lanes(block: &[u8; 144], a: &Q8KBlock) -> (__m256i, __m256i) {
    let nibbles = _mm256_set1_epi8(0x0f);
    let (scales, mins) = q4_k_scales(&block[4..20]);
    let scales = _mm256_broadcastsi128_si256(scales);
    let (a_chunks, _) = a.quants.as_chunks::<32>();
    let mut lanes = _mm256_setzero_si256();
    for p in 0..4 {
        let bytes = load_32(&block[16 + 32 * p..]);
        let low = _mm256_and_si256(bytes, nibbles);
        let high = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), nibbles);
        let low = _mm256_madd_epi16(
            _mm256_maddubs_epi16(low, load_i8x32(&a_chunks[2 * p])),
            shuffle_by(scales, &SPREAD_I16[2 * p]),
        );
        let high = _mm256_madd_epi16(
            _mm256_maddubs_epi16(high, load_i8x32(&a_chunks[2 * p + 1])),
            shuffle_by(scales, &SPREAD_I16[2 * p + 1]),
        );
        lanes = _mm256_add_epi32(lanes, _mm256_add_epi32(low, high));
    }
    let widened = _mm256_cvtepu16_epi32(mins);
    let doubled = _mm256_or_si256(widened, _mm256_slli_epi32::<16>(widened));
    (lanes, _mm256_madd_epi16(doubled, load_i16x16(&a.sums16)))
}

/// A tile of eight Q4_K weight rows (block-major: `tile[b][r]`) against one
/// activation row, with the repacked gemv's arithmetic (`Q4KGemv`): each
/// row's integer lanes as in [`q4_k_row`], one transposing reduction to the
/// eight rows' totals, then `acc = fma(S, d·d_a, acc)` and
/// `acc_min = fma(M, dmin·d_a, acc_min)` in the eight lanes, the operations
/// [`q4_k_row`] does one row at a time; the result is `acc − acc_min`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k_tile(tile: &[[[u8; 144]; 8]], acts: &[Q8KBlock]) -> [f32; 8] {
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for (blocks, a) in tile.iter().zip(acts) {
        let mut lanes = [_mm256_setzero_si256(); 8];
        let mut min_terms = [_mm256_setzero_si256(); 8];
        let (mut d, mut dmin) = ([0u16; 8], [0u16; 8]);
        for (r, block) in blocks.iter().enumerate() {
            (lanes[r], min_terms[r]) = q4_k_lanes(block, a);
            d[r] = u16::from_le_bytes([block[0], block[1]]);
            dmin[r] = u16::from_le_bytes([block[2], block[3]]);
        }
        let da = _mm256_set1_ps(a.d);
        let sums = _mm256_cvtepi32_ps(sum_each(lanes));
        let mins = _mm256_cvtepi32_ps(sum_each(min_terms));
        acc = _mm256_fmadd_ps(sums, _mm256_mul_ps(f16x8_to_f32(d), da), acc);
        acc_min = _mm256_fmadd_ps(mins, _mm256_mul_ps(f16x8_to_f32(dmin), da), acc_min);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: `out` is 8 writable f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
    out
}

/// The state the lean kernels hold in registers, as [`single_finish`] reads it.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn row_state(lanes: __m256, mins: __m128) -> RowState {
    let mut state = RowState::default();
    // SAFETY: `lanes` holds 8 and `mins` 4 writable f32; `storeu` has no
    // alignment requirement.
    unsafe {
        _mm256_storeu_ps(state.lanes.as_mut_ptr(), lanes);
        _mm_storeu_ps(state.mins.as_mut_ptr(), mins);
    }
    state
}

/// One Q6_K weight row against one activation row (`vec_dot`'s arithmetic):
/// per 32 values one `maddubs` of the rebuilt 6-bit quants and one `madd`
/// with the two 16-value scales (one byte shuffle of the scales widened
/// once per super-block); the offset of 32 comes off through the
/// activations' 16-value sums.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_k_row(weights: &[[u8; 210]], acts: &[Q8KBlock]) -> f32 {
    let low4 = _mm256_set1_epi8(0x0f);
    let bits = |mask: u8| _mm256_set1_epi8(mask as i8);
    let mut acc = _mm256_setzero_ps();
    for (block, a) in weights.iter().zip(acts) {
        // SAFETY: 16 readable bytes at 192; `loadu` has no alignment requirement.
        let scales8 = unsafe { _mm_loadu_si128(block[192..208].as_ptr().cast()) };
        let scales = _mm256_cvtepi8_epi16(scales8);
        let mut sum = _mm256_setzero_si256();
        for h in 0..2 {
            let half_scales = half_in_both_lanes(scales, h);
            let first = load_32(&block[64 * h..]);
            let second = load_32(&block[64 * h + 32..]);
            let high = load_32(&block[128 + 32 * h..]);
            let top = |mask: u8| _mm256_and_si256(high, bits(mask));
            let quants = [
                _mm256_or_si256(
                    _mm256_and_si256(first, low4),
                    _mm256_slli_epi16::<4>(top(0x03)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(second, low4),
                    _mm256_slli_epi16::<2>(top(0x0c)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(first), low4),
                    top(0x30),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(second), low4),
                    _mm256_srli_epi16::<2>(top(0xc0)),
                ),
            ];
            for (k, q) in quants.into_iter().enumerate() {
                let c = 4 * h + k;
                let chunk = &a.quants.as_chunks::<32>().0[c];
                let run_scales = shuffle_by(half_scales, &RUN_SCALE_PAIRS[c]);
                let pairs = _mm256_maddubs_epi16(q, load_i8x32(chunk));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, run_scales));
            }
        }
        let offsets = _mm256_madd_epi16(scales, load_i16x16(&a.sums16));
        let scaled = _mm256_sub_epi32(sum, _mm256_slli_epi32::<5>(offsets));
        let d = _mm256_set1_ps(a.d * half_at(block, 208));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(scaled), acc);
    }
    let kind = KArithmetic::VecDot(crate::cpu::weight_type::WeightType::Q6_K);
    single_finish(kind, &row_state(acc, _mm_setzero_ps()))
}

/// [`Lanes`] from [`lane_vectors`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn single_lanes(w: &WeightRegisters, a: &Q8KBlock, per_value_offset: Option<i8>) -> Lanes {
    let (scaled, mins) = lane_vectors(w, a, per_value_offset);
    let mut lanes = Lanes::default();
    // SAFETY: each array is 32 writable bytes; `storeu` has no alignment
    // requirement.
    unsafe {
        _mm256_storeu_si256(lanes.scaled.as_mut_ptr().cast(), scaled);
        _mm256_storeu_si256(lanes.mins.as_mut_ptr().cast(), mins);
    }
    lanes
}

/// One Q2_K, Q3_K or Q5_K weight row against one activation row with the
/// single-row arithmetic `VecDot(type)` ([`single_step`] and
/// [`single_finish`] in vector registers): each super-block's chunks built
/// from its bytes where they are used ([`streamed_lanes`]), its lanes never
/// leaving registers.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn k_row<const N: usize>(
    kind: KArithmetic,
    weights: &[[u8; N]],
    acts: &[Q8KBlock],
) -> f32 {
    use crate::cpu::weight_type::WeightType as W;
    let KArithmetic::VecDot(ty) = kind else {
        unreachable!("{kind:?} is not a single-row arithmetic of every type")
    };
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm_setzero_ps());
    for (b, (bytes, a)) in weights.iter().zip(acts).enumerate() {
        prefetch_ahead(weights, b);
        let (scaled, mins) = streamed_lanes(bytes, a);
        let (d, dmin) = crate::cpu::kquants::factors(bytes);
        let (d, dmin) = (a.d * d, -a.d * dmin);
        if ty == W::Q2_K {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), acc);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(scaled), acc);
        if ty == W::Q5_K {
            let total = _mm_cvtepi32_ps(_mm_cvtsi32_si128(total(mins)));
            acc_min = _mm_fmadd_ss(_mm_set_ss(dmin), total, acc_min);
        }
    }
    single_finish(kind, &row_state(acc, acc_min))
}

/// [`lane_vectors`] of a Q2_K, Q3_K or Q5_K super-block with each chunk's
/// quants built where they are used, so that the eight never hold registers
/// at once; Q3_K's offset comes off each value.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn streamed_lanes<const N: usize>(bytes: &[u8; N], a: &Q8KBlock) -> (__m256i, __m256i) {
    let (scales, mins) = run_values(bytes);
    let (chunks, _) = a.quants.as_chunks::<32>();
    let mut scaled = _mm256_setzero_si256();
    for h in 0..2 {
        let half_scales = half_in_both_lanes(scales, h);
        for k in 0..4 {
            let c = 4 * h + k;
            let acts = load_i8x32(&chunks[c]);
            let mut pairs = _mm256_maddubs_epi16(chunk_quants(bytes, c), acts);
            if N == 110 {
                let offsets = _mm256_maddubs_epi16(_mm256_set1_epi8(4), acts);
                pairs = _mm256_sub_epi16(pairs, offsets);
            }
            let run_scales = shuffle_by(half_scales, &RUN_SCALE_PAIRS[c]);
            scaled = _mm256_add_epi32(scaled, _mm256_madd_epi16(pairs, run_scales));
        }
    }
    (scaled, _mm256_madd_epi16(mins, load_i16x16(&a.sums16)))
}

/// The 16 run scales and minimums (i16) of a Q2_K, Q3_K or Q5_K super-block.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn run_values<const N: usize>(bytes: &[u8; N]) -> (__m256i, __m256i) {
    let bytes = bytes.as_slice();
    if let Ok(q2_k) = <&[u8; 84]>::try_from(bytes) {
        q2_k_run_values(q2_k)
    } else if let Ok(q3_k) = <&[u8; 110]>::try_from(bytes) {
        (q3_k_run_scales(q3_k), _mm256_setzero_si256())
    } else {
        assert_eq!(bytes.len(), 176, "Q2_K, Q3_K or Q5_K super-blocks");
        let (scales, mins) = q4_k_scales(&bytes[4..20]);
        (runs_of_pairs(scales), runs_of_pairs(mins))
    }
}

/// The stored quants of chunk `c` (values `32c..32c + 32`) of a Q2_K, Q3_K
/// or Q5_K super-block (the layouts `load_q2_k`, `load_q3_k` and
/// `load_q5_k` read).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn chunk_quants<const N: usize>(bytes: &[u8; N], c: usize) -> __m256i {
    let (j, k) = (c / 4, c % 4);
    match N {
        84 => two_bits(load_32(&bytes[16 + 32 * j..]), k),
        110 => _mm256_or_si256(
            two_bits(load_32(&bytes[32 + 32 * j..]), k),
            bit_as(load_32(&bytes[..32]), 1 << c, 4),
        ),
        _ => {
            let nibbles = load_32(&bytes[48 + 32 * (c / 2)..]);
            let nibbles = if c.is_multiple_of(2) {
                nibbles
            } else {
                _mm256_srli_epi16::<4>(nibbles)
            };
            _mm256_or_si256(
                _mm256_and_si256(nibbles, _mm256_set1_epi8(0x0f)),
                bit_as(load_32(&bytes[16..]), 1 << c, 0x10),
            )
        }
    }
}

/// Super-blocks a row kernel asks the cache for ahead of their use.
const PREFETCH_BLOCKS: usize = 4;

/// Asks for super-block `b + PREFETCH_BLOCKS` of `blocks` (or, past the
/// row's end, the bytes after it: the next row, where rows are stored one
/// after another).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn prefetch_ahead<const N: usize>(blocks: &[[u8; N]], b: usize) {
    let ahead = blocks
        .as_ptr()
        .wrapping_add(b + PREFETCH_BLOCKS)
        .cast::<i8>();
    for line in (0..N).step_by(64) {
        // A hint that never faults, whatever the address.
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line));
    }
}

/// The scaled lanes and minimum lanes of [`Lanes`], in registers: the
/// chunks' `maddubs` and `madd` with their scales added lane by lane; the
/// offset comes off each value (`per_value_offset`, Q3_K's) or a run pair
/// at a time through the run sums.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn lane_vectors(
    w: &WeightRegisters,
    a: &Q8KBlock,
    per_value_offset: Option<i8>,
) -> (__m256i, __m256i) {
    let (chunks, _) = a.quants.as_chunks::<32>();
    let mut scaled = _mm256_setzero_si256();
    for (c, chunk) in chunks.iter().enumerate() {
        let acts = load_i8x32(chunk);
        let mut pairs = _mm256_maddubs_epi16(w.quants[c], acts);
        if let Some(offset) = per_value_offset {
            let offsets = _mm256_maddubs_epi16(_mm256_set1_epi8(offset), acts);
            pairs = _mm256_sub_epi16(pairs, offsets);
        }
        scaled = _mm256_add_epi32(scaled, _mm256_madd_epi16(pairs, w.chunk_scales[c]));
    }
    let run_sums = load_i16x16(&a.sums16);
    if per_value_offset.is_none() {
        scaled = _mm256_sub_epi32(scaled, _mm256_madd_epi16(w.offset_scales, run_sums));
    }
    (scaled, _mm256_madd_epi16(w.mins, run_sums))
}

/// Adds the lanes of `w` with activation row `block(i)` to the single-row
/// state of every row `i`: the weights in registers once, straight from
/// their bytes (`_scratch` is the portable path's, whose signature this
/// shares).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn single_accumulate<'a, const N: usize>(
    kind: KArithmetic,
    w: &SuperBlock<'_, N>,
    _scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    states: &mut [RowState],
) {
    let registers = load_super_block(w);
    let per_value =
        matches!(kind, KArithmetic::VecDot(ty) if crate::cpu::kquants::offset_per_value(ty));
    let per_value_offset = per_value.then_some(registers.offset as i8);
    for (i, state) in states.iter_mut().enumerate() {
        let a = block(i);
        let lanes = single_lanes(&registers, a, per_value_offset);
        single_step(kind, w.factors, &lanes, a.d, state);
    }
}

thread_local! {
    /// The lanes kernels' integer sums per activation row, reused across calls.
    static SUMS: std::cell::RefCell<Vec<__m256i>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Eight weight rows' super-blocks at one position with the rows in vector
/// lanes, for the batch kernels: an activation row's four bytes broadcast
/// to every lane meet four values of each row at once, so each row's sums
/// build up in its own lane with no reduction across lanes (the layout of
/// llama.cpp's repacked gemm, built here from the rows as they are stored).
struct LaneTile {
    /// Chunk `c`'s quants (values `32c..32c + 32`): vector `m` holds each
    /// row's stored values `32c + 4m..32c + 4m + 4` in its lane.
    quants: [[__m256i; 8]; 8],
    /// Run `t`'s scale (16 values), lane `r` for row `r`, as an i32.
    run_scales: [__m256i; 16],
    /// Per pair of runs `k`, lane `r`: row `r`'s offset times the scales of
    /// runs `2k` and `2k + 1`, as an i16 pair.
    offset_pairs: [__m256i; 8],
    /// The same for the runs' minimums.
    min_pairs: [__m256i; 8],
    d: __m256,
    dmin: __m256,
}

/// [`LaneTile`] of the super-blocks `rows`, straight from their bytes.
#[target_feature(enable = "avx2,fma,f16c")]
fn lane_tile<const N: usize>(rows: [&SuperBlock<'_, N>; 8]) -> LaneTile {
    let zero = _mm256_setzero_si256();
    let mut quants = [[zero; 8]; 8];
    let (mut scales, mut offsets, mut mins) = ([zero; 8], [zero; 8], [zero; 8]);
    let (mut d, mut dmin) = ([0.0f32; 8], [0.0f32; 8]);
    for (r, row) in rows.into_iter().enumerate() {
        let registers = load_super_block(row);
        quants[r] = registers.quants;
        scales[r] = registers.scales;
        offsets[r] = registers.offset_scales;
        mins[r] = registers.mins;
        (d[r], dmin[r]) = row.factors;
    }
    // (Loops, not `map` with a closure: see `registers`.)
    let mut lanes = [[zero; 8]; 8];
    for (c, chunk) in lanes.iter_mut().enumerate() {
        let mut by_row = [zero; 8];
        for (row, quants) in by_row.iter_mut().zip(&quants) {
            *row = quants[c];
        }
        *chunk = transpose_8x8(by_row);
    }
    // Dword `k` of a row's 16 i16 values is the pair of runs `2k`, `2k + 1`.
    let scale_pairs = transpose_8x8(scales);
    let mut run_scales = [zero; 16];
    for (k, pair) in scale_pairs.into_iter().enumerate() {
        run_scales[2 * k] = _mm256_srai_epi32::<16>(_mm256_slli_epi32::<16>(pair));
        run_scales[2 * k + 1] = _mm256_srai_epi32::<16>(pair);
    }
    // SAFETY: `d` and `dmin` are 8 readable f32 each; `loadu` has no
    // alignment requirement.
    let (d, dmin) = unsafe { (_mm256_loadu_ps(d.as_ptr()), _mm256_loadu_ps(dmin.as_ptr())) };
    LaneTile {
        quants: lanes,
        run_scales,
        offset_pairs: transpose_8x8(offsets),
        min_pairs: transpose_8x8(mins),
        d,
        dmin,
    }
}

/// Activation bytes `4m..4m + 4` of `values` in every lane.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn broadcast_dword(values: &[i8; 32], m: usize) -> __m256i {
    let bytes = [
        values[4 * m],
        values[4 * m + 1],
        values[4 * m + 2],
        values[4 * m + 3],
    ];
    _mm256_set1_epi32(i32::from_le_bytes(bytes.map(|b| b as u8)))
}

/// The activation sums of runs `2k` and `2k + 1` as an i16 pair in every lane.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn broadcast_run_pair(a: &Q8KBlock, k: usize) -> __m256i {
    let pair = u32::from(a.sums16[2 * k] as u16) | (u32::from(a.sums16[2 * k + 1] as u16) << 16);
    _mm256_set1_epi32(pair as i32)
}

/// `Σ_k pairs[k] · (run sums 2k, 2k + 1)`: per lane, the runs' factors
/// times the activations' run sums.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn run_pair_sums(pairs: &[__m256i], a: &Q8KBlock, first: usize) -> __m256i {
    let mut sum = _mm256_setzero_si256();
    for (k, &pair) in pairs.iter().enumerate() {
        sum = _mm256_add_epi32(
            sum,
            _mm256_madd_epi16(pair, broadcast_run_pair(a, first + k)),
        );
    }
    sum
}

/// One chunk's scaled sums with AVX2 alone: `maddubs` pairs, two summed in
/// i16 (each at most 2·63·127), then `madd` with the run's scales (`scales`
/// hold lane `r`'s scale in both i16 halves).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn chunk_sums(
    quants: &[__m256i; 8],
    acts: &[i8; 32],
    scales: [__m256i; 2],
    _same_scale: bool,
) -> __m256i {
    let mut sum = _mm256_setzero_si256();
    for m in (0..8).step_by(2) {
        let first = _mm256_maddubs_epi16(quants[m], broadcast_dword(acts, m));
        let second = _mm256_maddubs_epi16(quants[m + 1], broadcast_dword(acts, m + 1));
        let pairs = _mm256_add_epi16(first, second);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, scales[m / 4]));
    }
    sum
}

/// A run's scales as [`chunk_sums`] takes them.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn scales_in_pairs(scale: __m256i) -> __m256i {
    let low = _mm256_and_si256(scale, _mm256_set1_epi32(0xffff));
    _mm256_or_si256(low, _mm256_slli_epi32::<16>(scale))
}

/// One chunk's scaled sums with AVX-512 VNNI: `vpdpbusd` adds four
/// products a lane at a time, then each run's lanes are multiplied by its
/// scales (i32 lanes), once for the chunk where its two runs share a scale
/// (`same_scale`). Every value fits, so the sums equal [`chunk_sums`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn chunk_sums_vnni(
    quants: &[__m256i; 8],
    acts: &[i8; 32],
    scales: [__m256i; 2],
    same_scale: bool,
) -> __m256i {
    // Four chains of two, so that rows in flight wait less on each other.
    let mut chains = [_mm256_setzero_si256(); 4];
    for (c, chain) in chains.iter_mut().enumerate() {
        let m = 2 * c;
        *chain = _mm256_dpbusd_epi32(*chain, quants[m], broadcast_dword(acts, m));
        *chain = _mm256_dpbusd_epi32(*chain, quants[m + 1], broadcast_dword(acts, m + 1));
    }
    let low = _mm256_add_epi32(chains[0], chains[1]);
    let high = _mm256_add_epi32(chains[2], chains[3]);
    if same_scale {
        _mm256_mullo_epi32(_mm256_add_epi32(low, high), scales[0])
    } else {
        _mm256_add_epi32(
            _mm256_mullo_epi32(low, scales[0]),
            _mm256_mullo_epi32(high, scales[1]),
        )
    }
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn scales_as_lanes(scale: __m256i) -> __m256i {
    scale
}

/// The batch kernels over a [`LaneTile`], once with AVX2 alone and once
/// with AVX-512 VNNI.
macro_rules! lane_kernels {
    ($(#[$attr:meta])* $name:ident, $chunk_sums:ident, $scale_form:ident) => {
/// A [`LaneTile`] against every activation row `block(i)`, adding to the
/// accumulators of row `i` (lane `r` for weight row `r`) the operations
/// [`step`] does one output at a time: the tiled kernels' `r = d·S`,
/// `r = fma(−dmin, M, r)`, `acc = fma(r, d_a, acc)` per super-block, or the
/// repacked gemm's `acc = fma(S, d·d_a, acc)` and
/// `acc_min = fma(M, dmin·d_a, acc_min)` per 64 values. The weights of 64
/// values stay in registers while every activation row passes; `sums`
/// (one per activation row) holds the integer sums between.
$(#[$attr])*
        fn $name<'a>(
    tile: &LaneTile,
    kind: KArithmetic,
    same_scale: bool,
    block: impl Fn(usize) -> &'a Q8KBlock,
    (acc, acc_min): (&mut [[f32; 8]], &mut [[f32; 8]]),
    sums: &mut [__m256i],
) {
    for p in 0..4 {
        let (low, high) = (tile.quants[2 * p], tile.quants[2 * p + 1]);
        let scales = [
            [$scale_form(tile.run_scales[4 * p]), $scale_form(tile.run_scales[4 * p + 1])],
            [$scale_form(tile.run_scales[4 * p + 2]), $scale_form(tile.run_scales[4 * p + 3])],
        ];
        let rows = acc.iter_mut().zip(acc_min.iter_mut()).zip(sums.iter_mut());
        for (i, ((acc, acc_min), sum)) in rows.enumerate() {
            let a = block(i);
            let (chunks, _) = a.quants.as_chunks::<32>();
            let group = _mm256_add_epi32(
                $chunk_sums(&low, &chunks[2 * p], scales[0], same_scale),
                $chunk_sums(&high, &chunks[2 * p + 1], scales[1], same_scale),
            );
            if kind == KArithmetic::Q4KRepacked {
                repacked_step(tile, p, a, group, (acc, acc_min));
            } else if p == 0 {
                *sum = group;
            } else if p < 3 {
                *sum = _mm256_add_epi32(*sum, group);
            } else {
                tiled_step(tile, kind, a, _mm256_add_epi32(*sum, group), acc);
            }
        }
    }
}
    };
}

/// The repacked gemm's step for 64 values `p` (Q4_K's offset is 0, so the
/// sums need no correction).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn repacked_step(
    tile: &LaneTile,
    p: usize,
    a: &Q8KBlock,
    sums: __m256i,
    (acc, acc_min): (&mut [f32; 8], &mut [f32; 8]),
) {
    let d_a = _mm256_set1_ps(a.d);
    let mins = run_pair_sums(&tile.min_pairs[2 * p..2 * p + 2], a, 2 * p);
    // SAFETY: each accumulator is 8 readable and writable f32;
    // `loadu`/`storeu` have no alignment requirement.
    unsafe {
        let total = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(sums),
            _mm256_mul_ps(tile.d, d_a),
            _mm256_loadu_ps(acc.as_ptr()),
        );
        _mm256_storeu_ps(acc.as_mut_ptr(), total);
        let total_min = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(mins),
            _mm256_mul_ps(tile.dmin, d_a),
            _mm256_loadu_ps(acc_min.as_ptr()),
        );
        _mm256_storeu_ps(acc_min.as_mut_ptr(), total_min);
    }
}

/// The tiled kernels' step for a whole super-block of scaled sums `sums`
/// (the offset not yet taken off).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn tiled_step(tile: &LaneTile, kind: KArithmetic, a: &Q8KBlock, sums: __m256i, acc: &mut [f32; 8]) {
    let sums = _mm256_sub_epi32(sums, run_pair_sums(&tile.offset_pairs, a, 0));
    let mut r = _mm256_mul_ps(tile.d, _mm256_cvtepi32_ps(sums));
    if kind == KArithmetic::TiledWithMins {
        let mins = _mm256_cvtepi32_ps(run_pair_sums(&tile.min_pairs, a, 0));
        r = _mm256_fnmadd_ps(tile.dmin, mins, r);
    }
    // SAFETY: `acc` is 8 readable and writable f32; `loadu`/`storeu` have
    // no alignment requirement.
    unsafe {
        let total = _mm256_fmadd_ps(r, _mm256_set1_ps(a.d), _mm256_loadu_ps(acc.as_ptr()));
        _mm256_storeu_ps(acc.as_mut_ptr(), total);
    }
}

lane_kernels!(
    #[target_feature(enable = "avx2,fma,f16c")]
    lane_tile_rows,
    chunk_sums,
    scales_in_pairs
);

lane_kernels!(
    /// Needs the features [`super::vnni_available`] checks.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    lane_tile_rows_vnni,
    chunk_sums_vnni,
    scales_as_lanes
);

/// Adds the terms of eight weight rows' super-blocks at one position with
/// activation row `block(i)` to the accumulators of every row `i` (lane `r`
/// for weight row `r`), with VNNI where `vnni` says the CPU has it
/// (`_scratch` is the portable path's, whose signature this shares).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn accumulate_lanes<'a, const N: usize>(
    kind: KArithmetic,
    vnni: bool,
    rows: [&SuperBlock<'_, N>; 8],
    _scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    accumulators: (&mut [[f32; 8]], &mut [[f32; 8]]),
) {
    let tile = lane_tile(rows);
    // Q4_K and Q5_K give both runs of a 32-value sub-block one scale.
    let same_scale = N == 144 || N == 176;
    SUMS.with_borrow_mut(|sums| {
        sums.clear();
        sums.resize(accumulators.0.len(), _mm256_setzero_si256());
        if vnni {
            // SAFETY: the caller found the features (`vnni_available`).
            unsafe { lane_tile_rows_vnni(&tile, kind, same_scale, block, accumulators, sums) }
        } else {
            lane_tile_rows(&tile, kind, same_scale, block, accumulators, sums)
        }
    })
}
