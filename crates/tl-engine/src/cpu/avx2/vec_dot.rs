//! Tiles with the rounding of llama.cpp's AVX2 `ggml_vec_dot_q4_0_q8_0` /
//! `_q4_1_q8_1` / `_q8_0_q8_0` (and of tinyBLAS, which rounds alike): per block, 8
//! lanes of 4-value integer dot products, `acc = fma(dw·da, lanes, acc)`; Q4_1's
//! `m·s` terms in a separate sum added after `hsum_float_8`. Each output's
//! arithmetic is that of one `vec_dot` call; tiling only changes which weight and
//! activation blocks sit in registers together.

use std::arch::x86_64::*;
use std::ops::Range;

use super::prepared::PreparedRows;
use super::simd::{
    hsum_f32x8, hsum_f32x8_eight, load_f32x4, load_i8x32, load_u8x32, raw_quants, store_f32x8,
    to_array,
};
use crate::cpu::activations::{ActivationGroup, ActivationRow, QuantizedActivations, GROUP_ROWS};
use crate::cpu::blocks::WeightBlock;
use crate::cpu::weight_type::BLOCK_VALUES;

/// The 8 lane sums (4 products each) of a block pair, as f32. `unsigned` is what
/// `maddubs` multiplies (Q4_1 nibbles, or |w|); `signs` the signed weights.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn lane_dots<B: WeightBlock>(unsigned: __m256i, signs: __m256i, activations: __m256i) -> __m256 {
    let signed = if B::HAS_MIN {
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
    if B::HAS_MIN {
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
            let raw = raw_quants(block);
            let signed = if B::OFFSET != 0 {
                _mm256_sub_epi8(raw, _mm256_set1_epi8(B::OFFSET))
            } else {
                raw
            };
            let unsigned = if B::HAS_MIN {
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
            if B::HAS_MIN {
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
pub(super) fn prefetch_ahead<B>(block: &B, row: &[B]) {
    let ahead = (block as *const B)
        .cast::<i8>()
        .wrapping_add(PREFETCH_ROWS_AHEAD * std::mem::size_of_val(row));
    // A prefetch is only a hint: it never faults, whatever the address.
    _mm_prefetch::<_MM_HINT_T0>(ahead)
}

/// Activation groups prepared together for a tile: their `dw·da` products
/// and their interleaved `Σ m·s` chains.
pub(super) const BATCH_GROUPS: usize = 4;

/// Activation rows of a batch: the lanes of a block's products for one
/// weight row, group after group.
const BATCH_ROWS: usize = BATCH_GROUPS * GROUP_ROWS;

/// Weight rows of a tile, at most: [`prepare_groups`] keeps two rows' `Σ m·s`
/// chains in each vector, for up to 2 pairs.
const MAX_TILE_ROWS: usize = 4;

/// Up to [`BATCH_GROUPS`] consecutive activation groups that tiles run
/// together, looked up once for a thread's share of weight rows and a chunk
/// of activation rows, rather than once per tile of weight rows.
pub(super) struct GroupBatch<'a> {
    /// The groups; past the batch's end the last one is repeated (the tiles
    /// compute it again and its results are dropped).
    groups: [ActivationGroup<'a>; BATCH_GROUPS],
    /// The activation rows of each group.
    rows: [Range<usize>; BATCH_GROUPS],
    /// How many groups the batch has.
    len: usize,
}

impl<'a> GroupBatch<'a> {
    /// The groups `groups` (1 to [`BATCH_GROUPS`] of them) of `acts`.
    pub(super) fn new(acts: &'a QuantizedActivations, groups: Range<usize>) -> Self {
        debug_assert!(!groups.is_empty() && groups.len() <= BATCH_GROUPS);
        let looked_up: [_; BATCH_GROUPS] =
            std::array::from_fn(|g| acts.group((groups.start + g).min(groups.end - 1)));
        GroupBatch {
            groups: looked_up.clone().map(|(group, _)| group),
            rows: looked_up.map(|(_, rows)| rows),
            len: groups.len(),
        }
    }

    /// Each group in the batch: its index in the batch, the group and its rows.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &ActivationGroup<'a>, Range<usize>)> {
        self.rows[..self.len]
            .iter()
            .enumerate()
            .map(|(index, rows)| (index, &self.groups[index], rows.clone()))
    }
}

/// Room a share's tiles of `R` weight rows reuse, filled by
/// [`prepare_groups`] for a [`GroupBatch`].
pub(super) struct TileScratch<const R: usize> {
    /// `dw·da` for each block, weight row and activation row of the batch,
    /// `[block][r][group · 4 + c]`.
    products: Vec<[[f32; BATCH_ROWS]; R]>,
    /// Q4_1's `Σ m·s` for each group of the batch, `[group][r][c]`.
    min_terms: [[[f32; GROUP_ROWS]; R]; BATCH_GROUPS],
}

impl<const R: usize> TileScratch<R> {
    pub(super) fn new() -> Self {
        TileScratch {
            products: Vec::new(),
            min_terms: [[[0.0; GROUP_ROWS]; R]; BATCH_GROUPS],
        }
    }
}

/// Prepares `R` prepared rows against a batch of activation groups for
/// [`group_tile`]: the `dw·da` products of every block, 8 at a time (a weight
/// row's scale times two groups' activation scales), and Q4_1's `Σ m·s`
/// terms, each output's FMAs in block order as in `vec_dot`. One pass over the
/// blocks does both: the `Σ m·s` chains are bound by the FMA's latency, and
/// the products fill the wait.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prepare_groups<B: WeightBlock, const R: usize>(
    prepared: &PreparedRows,
    batch: &GroupBatch<'_>,
    scratch: &mut TileScratch<R>,
) {
    debug_assert!(R <= MAX_TILE_ROWS);
    let batch = &batch.groups;
    let blocks = batch[0].scales.len();
    let scales: &[[f32; R]] = &prepared.scales().as_chunks().0[..blocks];
    // Grown once, then overwritten: zeroing it per batch would cost again what
    // the 8-wide products save.
    if scratch.products.len() < blocks {
        scratch.products.resize(blocks, [[0.0; BATCH_ROWS]; R]);
    }
    let products = &mut scratch.products[..blocks];
    let with_mins = B::HAS_MIN;
    let mins: &[[f32; R]] = if with_mins {
        &prepared.mins().as_chunks().0[..blocks]
    } else {
        &[]
    };
    // Sliced to the block count so that indexing by block needs no checks.
    let act_scales = batch.map(|group| &group.scales[..blocks]);
    let act_sums = batch.map(|group| &group.q8_1_sums[..blocks]);
    // Two weight rows a vector (the second repeated for a single row): `[r][c]`
    // of one group, as the terms are laid out.
    let pairs = R.div_ceil(2);
    let mut acc = [[_mm256_setzero_ps(); BATCH_GROUPS]; MAX_TILE_ROWS / 2];
    for (b, (products, scales)) in products.iter_mut().zip(scales).enumerate() {
        let act_scales = |g: usize| load_f32x4(&act_scales[g][b]);
        let first_groups = _mm256_set_m128(act_scales(1), act_scales(0));
        let last_groups = _mm256_set_m128(act_scales(3), act_scales(2));
        for (products, &scale) in products.iter_mut().zip(scales) {
            let scale = _mm256_set1_ps(scale);
            // Two vectors: the first two groups' products, then the last two's.
            let vectors = products.as_chunks_mut::<8>().0;
            store_f32x8(&mut vectors[0], _mm256_mul_ps(scale, first_groups));
            store_f32x8(&mut vectors[1], _mm256_mul_ps(scale, last_groups));
        }
        if !with_mins {
            continue;
        }
        for (p, acc) in acc[..pairs].iter_mut().enumerate() {
            let (low, high) = (mins[b][2 * p], mins[b][(2 * p + 1).min(R - 1)]);
            let mins = _mm256_set_m128(_mm_set1_ps(high), _mm_set1_ps(low));
            for (acc, act_sums) in acc.iter_mut().zip(&act_sums) {
                let act_sums = load_f32x4(&act_sums[b]);
                let act_sums = _mm256_set_m128(act_sums, act_sums);
                *acc = _mm256_fmadd_ps(mins, act_sums, *acc);
            }
        }
    }
    if !with_mins {
        return;
    }
    for (p, acc) in acc[..pairs].iter().enumerate() {
        for (terms, acc) in scratch.min_terms.iter_mut().zip(acc) {
            let [low, high] = to_pair4(*acc);
            terms[2 * p] = low;
            if 2 * p + 1 < R {
                terms[2 * p + 1] = high;
            }
        }
    }
}

/// The two halves of a vector, low first.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn to_pair4(value: __m256) -> [[f32; 4]; 2] {
    let [a0, a1, a2, a3, b0, b1, b2, b3] = to_array(value);
    [[a0, a1, a2, a3], [b0, b1, b2, b3]]
}

/// Emits a group tile, `$name<B, R>`: `R` prepared weight rows · group
/// `index` of the batch [`prepare_groups`] prepared (4 activation rows),
/// `out[c][r]`, its lane sums from `$lanes`. One body for the instruction
/// sets: a function's target features cannot depend on a generic parameter.
macro_rules! group_tile {
    ($(#[$attr:meta])* $name:ident, $lanes:ident) => {
        $(#[$attr])*
        pub(super) fn $name<B: WeightBlock, const R: usize>(
            prepared: &PreparedRows,
            (group, index): (&ActivationGroup<'_>, usize),
            scratch: &TileScratch<R>,
        ) -> [[f32; R]; GROUP_ROWS] {
            let blocks = group.scales.len();
            let weights: &[[[[u8; BLOCK_VALUES]; 2]; R]] = prepared.weights().as_chunks().0;
            let products = &scratch.products[..blocks];
            let first_lane = index * GROUP_ROWS;
            let mut acc = [[_mm256_setzero_ps(); R]; GROUP_ROWS];
            // 4·R accumulators; with the weights, activations and temporaries
            // 2 rows just about fill AVX2's 16 vector registers (4 rows take
            // AVX-512's 32). Iterators, not indices, keep bounds checks (and the
            // registers they need) out of the loop. The products are broadcast
            // from memory: loads, not shuffles on the busy vector pipes.
            let blocks = weights[..blocks].iter().zip(group.quants);
            for ((weights, quants), products) in blocks.zip(products) {
                for r in 0..R {
                    let [unsigned, signs] = &weights[r];
                    let unsigned = load_u8x32(unsigned);
                    let signs = if B::HAS_MIN {
                        _mm256_setzero_si256()
                    } else {
                        load_u8x32(signs)
                    };
                    for c in 0..GROUP_ROWS {
                        let lanes = $lanes::<B>(unsigned, signs, load_i8x32(&quants[c]));
                        let scale = _mm256_broadcast_ss(&products[r][first_lane + c]);
                        acc[c][r] = _mm256_fmadd_ps(scale, lanes, acc[c][r]);
                    }
                }
            }
            finish_tile::<B, R>(acc, scratch.min_terms[index])
        }
    };
}

group_tile!(
    #[target_feature(enable = "avx2,fma,f16c")]
    group_tile,
    lane_dots
);

group_tile!(
    /// Needs the features [`super::vnni_available`] checks.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    group_tile_vnni,
    lane_dots_vnni
);

/// [`lane_dots`] with AVX-512 VNNI's `vpdpbusd`, which sums each lane's 4
/// byte products in one instruction where `maddubs` + `madd` take two. The
/// sums are exact integers either way (`maddubs` cannot saturate on these
/// operands: 2 · 15 · 128 and 2 · 128 · 127 fit in 16 bits), so the result is
/// the same.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn lane_dots_vnni<B: WeightBlock>(
    unsigned: __m256i,
    signs: __m256i,
    activations: __m256i,
) -> __m256 {
    let signed = if B::HAS_MIN {
        activations
    } else {
        _mm256_sign_epi8(activations, signs)
    };
    _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(
        _mm256_setzero_si256(),
        unsigned,
        signed,
    ))
}

/// A tile's results from its accumulators: [`finish`] for each, with
/// Q4_1's `m·s` sums from [`prepare_groups`] (ignored for the other types).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn finish_tile<B: WeightBlock, const R: usize>(
    acc: [[__m256; R]; GROUP_ROWS],
    min_terms: [[f32; GROUP_ROWS]; R],
) -> [[f32; R]; GROUP_ROWS] {
    if R == 2 {
        return finish_pair::<B, R, R>(&acc, &min_terms, 0);
    }
    if R == 4 {
        let low = finish_pair::<B, R, 2>(&acc, &min_terms, 0);
        let high = finish_pair::<B, R, 2>(&acc, &min_terms, 2);
        return std::array::from_fn(|c| {
            std::array::from_fn(|r| if r < 2 { low[c][r] } else { high[c][r - 2] })
        });
    }
    std::array::from_fn(|c| std::array::from_fn(|r| finish::<B>(acc[c][r], min_terms[r][c])))
}

/// [`finish`] for the eight accumulators of weight rows `first` and `first + 1`
/// (× 4 activation rows) at once: the horizontal sums interleaved, and Q4_1's
/// terms added in one vector, the same bits as eight calls. `P` is 2, as an
/// array length the caller's `R` can be.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn finish_pair<B: WeightBlock, const R: usize, const P: usize>(
    acc: &[[__m256; R]; GROUP_ROWS],
    min_terms: &[[f32; GROUP_ROWS]; R],
    first: usize,
) -> [[f32; P]; GROUP_ROWS] {
    debug_assert_eq!(P, 2);
    // Sums come out as [r][c], the layout of the terms.
    let mut sums = hsum_f32x8_eight(std::array::from_fn(|k| acc[k / 2][first + k % 2]));
    if B::HAS_MIN {
        let terms = _mm256_set_m128(
            load_f32x4(&min_terms[first + 1]),
            load_f32x4(&min_terms[first]),
        );
        sums = _mm256_add_ps(sums, terms);
    }
    let lanes = to_array(sums);
    std::array::from_fn(|c| std::array::from_fn(|r| lanes[r * GROUP_ROWS + c]))
}
