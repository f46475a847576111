//! The integer sums of the K-quant products ([`GroupSums`]) with AVX2: one
//! weight super-block is held in registers while it meets every activation
//! row of the batch. `maddubs` multiplies the unsigned stored quants by the
//! activations into 16-bit pairs, which cannot saturate (2 · 63 · 127 < 2¹⁵);
//! `madd` applies the 16-value scales; a type's offset comes off as
//! `offset · Σ scale · Σ a` over each run, from the activations' run sums.
//! Every step is exact, so the sums equal the portable ones.

use std::arch::x86_64::*;

use super::repacked::sum_each;
use crate::cpu::kquants::{step, GroupSums, KArithmetic, Q8KBlock, SuperBlock, Unpacked};

/// One weight super-block in registers.
struct WeightRegisters {
    quants: [__m256i; 8],
    /// Each 32-value chunk's scales: its first run's in the low half, its
    /// second run's in the high half.
    chunk_scales: [__m256i; 8],
    /// The 16 run scales times the offset, and the 16 minimums.
    offset_scales: __m256i,
    mins: __m256i,
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
    let chunk_scales = std::array::from_fn(|c| {
        let spread = _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(c as i32));
        _mm256_shuffle_epi8(spread, pick)
    });
    WeightRegisters {
        quants,
        chunk_scales,
        offset_scales: _mm256_mullo_epi16(scales, _mm256_set1_epi16(offset)),
        mins,
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn load(w: &Unpacked) -> WeightRegisters {
    let quants = std::array::from_fn(|c| load_32(&w.quants[32 * c..]));
    registers(
        quants,
        load_i16x16(&w.scales),
        load_i16x16(&w.mins),
        w.offset,
    )
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

/// The tiled arithmetic for eight activation rows at once: each row's
/// integer lanes, one transposing reduction to the eight sums `S` and `M`,
/// then `r = d·S`, `r = fma(−dmin, M, r)`, `acc = fma(r, d_a, acc)` in the
/// eight lanes, the same operations [`step`] does one row at a time.
#[target_feature(enable = "avx2,fma,f16c")]
fn tiled_eight(
    w: &WeightRegisters,
    (d, dmin): (f32, f32),
    with_mins: bool,
    acts: [&Q8KBlock; 8],
    acc: &mut [f32; 8],
) {
    let mut scaled = [_mm256_setzero_si256(); 8];
    let mut mins = [_mm256_setzero_si256(); 8];
    for (r, a) in acts.iter().enumerate() {
        (scaled[r], mins[r]) = whole_lanes(w, a);
    }
    let mut r = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum_each(scaled)));
    if with_mins {
        let m = _mm256_cvtepi32_ps(sum_each(mins));
        r = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), m, r);
    }
    let scales = _mm256_setr_ps(
        acts[0].d, acts[1].d, acts[2].d, acts[3].d, acts[4].d, acts[5].d, acts[6].d, acts[7].d,
    );
    // SAFETY: `acc` is 32 readable and writable bytes; `loadu`/`storeu` have
    // no alignment requirement.
    unsafe {
        let updated = _mm256_fmadd_ps(r, scales, _mm256_loadu_ps(acc.as_ptr()));
        _mm256_storeu_ps(acc.as_mut_ptr(), updated);
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
/// accumulators of every row `i`: Q4_K and Q6_K loaded straight from their
/// bytes, the other types through `scratch`; the tiled arithmetic eight rows
/// at a time, the rest (and the repacked gemm's) a row at a time through
/// [`step`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn accumulate<'a, const N: usize>(
    kind: KArithmetic,
    w: &SuperBlock<'_, N>,
    scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    (acc, acc_min): (&mut [f32], &mut [f32]),
) {
    let registers = if let Ok(q4_k) = <&[u8; 144]>::try_from(w.bytes.as_slice()) {
        load_q4_k(q4_k)
    } else if let Ok(q6_k) = <&[u8; 210]>::try_from(w.bytes.as_slice()) {
        load_q6_k(q6_k)
    } else {
        (w.unpack)(w.bytes, scratch);
        load(scratch)
    };
    let rows = acc.len();
    let mut first = 0;
    if kind != KArithmetic::Q4KRepacked {
        let with_mins = kind == KArithmetic::TiledWithMins;
        for (group, acc) in acc.as_chunks_mut::<8>().0.iter_mut().enumerate() {
            let acts = std::array::from_fn(|r| block(8 * group + r));
            tiled_eight(&registers, w.factors, with_mins, acts, acc);
        }
        first = rows / 8 * 8;
    }
    for i in first..rows {
        let a = block(i);
        let sums = if kind == KArithmetic::Q4KRepacked {
            sums(&registers, a)
        } else {
            whole_sums(&registers, a)
        };
        step(kind, w.factors, &sums, a.d, (&mut acc[i], &mut acc_min[i]));
    }
}
