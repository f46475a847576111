//! The x86-64 path, compiled when the build enables AVX2, FMA and F16C (the
//! workspace's `.cargo/config.toml` does). Kernels reproduce llama.cpp's AVX2
//! arithmetic; this file walks tiles over a thread's share of the output.
//!
//! Decode (one activation row) streams the weights once, a row at a time (8
//! for repacked Q4_0, whose arithmetic sums 8 rows' blocks together), with a
//! software prefetch a few rows ahead. Prefill takes the activation rows in chunks small enough to
//! stay in L2; for each chunk it unpacks a few weight rows into L1 once and runs
//! them against every group of 4 activation rows of the chunk (4 weight rows a
//! tile with AVX-512 VNNI, found at run time; 2 with AVX2 alone).

mod gemm;
mod kquants;
#[cfg(test)]
mod loop_peak;
mod prepared;
mod quantize;
mod repacked;
mod simd;
mod vec_dot;

use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
use std::ops::Range;

use self::prepared::{Layout, PreparedRows};
use self::vec_dot::{GroupBatch, TileScratch, BATCH_GROUPS};
use super::activations::{QuantizedActivations, QuantizedBlock, GROUP_ROWS};
use super::blocks::WeightBlock;
use super::matrix::{Arithmetic, WeightRows, TILE_ROWS};
use super::parallel::OutputColumns;
use super::weight_type::{WeightType, BLOCK_VALUES};

pub(crate) use gemm::f32_product_block;

/// Quantizes one block of 32 activations like llama.cpp's AVX2 code.
pub(crate) fn quantize_block(x: &[f32; BLOCK_VALUES]) -> QuantizedBlock {
    // SAFETY: this module is compiled only when the build enables AVX2, FMA and
    // F16C (see `cpu/mod.rs`), so any CPU running this code has them.
    unsafe { quantize::quantize_block(x) }
}

/// Adds the terms of the K-quant super-block `w` with activation row
/// `block(i)` to the accumulators of every row `i` (loaded straight from
/// its bytes; `scratch` is for the portable path's signature).
pub(crate) fn kquant_accumulate<'a, const N: usize>(
    kind: super::kquants::KArithmetic,
    w: &super::kquants::SuperBlock<'_, N>,
    scratch: &mut super::kquants::Unpacked,
    block: impl Fn(usize) -> &'a super::kquants::Q8KBlock,
    accumulators: (&mut [f32], &mut [f32]),
) {
    // SAFETY: as for `quantize_block`, the features are enabled at build time.
    unsafe { kquants::accumulate(kind, w, scratch, block, accumulators) }
}

/// Adds the lanes of the K-quant super-block `w` with activation row
/// `block(i)` to the single-row state of every row `i`.
pub(crate) fn kquant_single_accumulate<'a, const N: usize>(
    kind: super::kquants::KArithmetic,
    w: &super::kquants::SuperBlock<'_, N>,
    scratch: &mut super::kquants::Unpacked,
    block: impl Fn(usize) -> &'a super::kquants::Q8KBlock,
    states: &mut [super::kquants::RowState],
) {
    // SAFETY: as for `quantize_block`, the features are enabled at build time.
    unsafe { kquants::single_accumulate(kind, w, scratch, block, states) }
}

/// The lean single-row kernel for a K-quant weight row, as a function of
/// the activation row: Q4_K's and Q6_K's own, one for Q2_K, Q3_K and Q5_K.
pub(crate) fn kquant_row<const N: usize>(
    row: &[[u8; N]],
    kind: super::kquants::KArithmetic,
) -> Option<impl Fn(&[super::kquants::Q8KBlock]) -> f32 + '_> {
    let bytes = row.as_flattened();
    let (q4_k, q6_k) = match N {
        144 => (bytes.as_chunks::<144>().0, &[][..]),
        210 => (&[][..], bytes.as_chunks::<210>().0),
        _ => (&[][..], &[][..]),
    };
    Some(move |acts: &[super::kquants::Q8KBlock]| {
        // SAFETY: as for `quantize_block`, the features are enabled at build time.
        unsafe {
            match N {
                144 => kquants::q4_k_row(kind, q4_k, acts),
                210 => kquants::q6_k_row(q6_k, acts),
                _ => kquants::k_row(kind, row, acts),
            }
        }
    })
}

/// The lean kernel of a tile of eight K-quant weight rows
/// ([`WeightRows::tiled`]) for the arithmetic `kind`, as a function of the
/// activation row; `None` where there is none (only Q4_K's `Q4KGemv` has one).
pub(crate) fn kquant_tile<const N: usize>(
    tile: &[[[u8; N]; TILE_ROWS]],
    kind: super::kquants::KArithmetic,
) -> Option<impl Fn(&[super::kquants::Q8KBlock]) -> [f32; TILE_ROWS] + '_> {
    if N != 144 || kind != super::kquants::KArithmetic::Q4KGemv {
        return None;
    }
    let (q4_k, _) = tile.as_flattened().as_flattened().as_chunks::<144>();
    let (q4_k, _) = q4_k.as_chunks::<TILE_ROWS>();
    Some(move |acts: &[super::kquants::Q8KBlock]| {
        // SAFETY: as for `quantize_block`, the features are enabled at build time.
        unsafe { kquants::q4_k_tile(q4_k, acts) }
    })
}

/// Adds the terms of eight K-quant weight rows' super-blocks at one
/// position with activation row `block(i)` to the accumulators of every row
/// `i` (lane `r` for weight row `r`; `scratch` is for the portable path's
/// signature).
pub(crate) fn kquant_accumulate_lanes<'a, const N: usize>(
    kind: super::kquants::KArithmetic,
    vnni: bool,
    rows: [&super::kquants::SuperBlock<'_, N>; TILE_ROWS],
    scratch: &mut super::kquants::Unpacked,
    block: impl Fn(usize) -> &'a super::kquants::Q8KBlock,
    accumulators: (&mut [[f32; TILE_ROWS]], &mut [[f32; TILE_ROWS]]),
) {
    // Checked again here, where it makes the kernel's `unsafe` call sound.
    let vnni = vnni && vnni_available();
    // SAFETY: as for `quantize_block`, the features are enabled at build
    // time, and VNNI's were found above.
    unsafe { kquants::accumulate_lanes(kind, vnni, rows, scratch, block, accumulators) }
}

/// Repacked Q4_0 and Q4_K matrices are read in tiles ([`WeightRows::tiled`]).
pub(crate) const READS_TILES: bool = true;

/// Computes the output columns of `out` for all `m` activation rows.
pub(crate) fn compute_rows(
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    // SAFETY: as for `quantize_block`, the features are enabled at build time.
    unsafe { compute_rows_avx2(weights, acts, m, out) }
}

/// Activation bytes per chunk: the chunk is reread for every tile of weight rows
/// of a thread's share, so it should stay in L2 (512 KiB a core on Zen 3).
const ACTIVATION_CHUNK_BYTES: usize = 192 * 1024;

/// Weight rows per decode tile (vec_dot arithmetic): one stream from memory
/// at a time reads faster than four interleaved on the 2-core machine
/// (Q8_0, 32000 × 2048: 12 → 20 GB/s a thread), which outweighs sharing
/// each activation load between rows.
const DECODE_ROWS: usize = 1;

/// Weight rows per prefill tile (vec_dot arithmetic), each run against 4
/// activation rows at a time: 8 accumulators, leaving registers for the rest.
const PREFILL_ROWS: usize = 2;

/// Weight rows per prefill tile with AVX-512 VNNI: its 32 vector registers
/// hold 16 accumulators, so each activation block loaded serves 4 rows.
const VNNI_PREFILL_ROWS: usize = 4;

/// Whether this CPU has the AVX-512 features of the VNNI tiles (VNNI on
/// 256-bit vectors, hence VL; F and BW, which they build on). Checked at run
/// time: the build names only AVX2, FMA and F16C.
pub(crate) fn vnni_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

#[target_feature(enable = "avx2,fma,f16c")]
fn compute_rows_avx2(
    weights: &WeightRows<'_>,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    let per_row = weights.blocks_per_row;
    let kernels = match (weights.weight_type, weights.arithmetic) {
        (WeightType::Q4_0, Arithmetic::RepackedQ4_0) => Kernels::Repacked,
        // Checked again here, where it makes the kernels' `unsafe` calls sound.
        _ if weights.vnni && vnni_available() => Kernels::VecDotVnni,
        _ => Kernels::VecDot,
    };
    match weights.weight_type {
        WeightType::Q4_0 => typed_rows(weights.blocks::<18>(), per_row, kernels, acts, m, out),
        WeightType::Q5_0 => typed_rows(weights.blocks::<22>(), per_row, kernels, acts, m, out),
        WeightType::Q5_1 => typed_rows(weights.blocks::<24>(), per_row, kernels, acts, m, out),
        WeightType::Q4_1 => typed_rows(weights.blocks::<20>(), per_row, kernels, acts, m, out),
        WeightType::Q8_0 => typed_rows(weights.blocks::<34>(), per_row, kernels, acts, m, out),
        other => unreachable!("{other} matrices run in cpu::kquants"),
    }
}

/// Which tile kernels run: `vec_dot`'s (with AVX2 alone, or their 4-row
/// prefill tiles with AVX-512 VNNI, which [`vnni_available`] found), or the
/// 8-row repacked Q4_0 ones.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernels {
    VecDot,
    VecDotVnni,
    Repacked,
}

#[target_feature(enable = "avx2,fma,f16c")]
fn typed_rows<B: WeightBlock>(
    blocks: &[B],
    per_row: usize,
    kernels: Kernels,
    acts: &QuantizedActivations,
    m: usize,
    out: &mut OutputColumns<'_>,
) {
    let rows = Rows { blocks, per_row };
    if m == 1 {
        decode(rows, kernels, acts, out);
    } else {
        let group_bytes = GROUP_ROWS * per_row * BLOCK_VALUES;
        let groups_per_chunk = (ACTIVATION_CHUNK_BYTES / group_bytes).max(1);
        let groups = m.div_ceil(GROUP_ROWS);
        for start in (0..groups).step_by(groups_per_chunk) {
            let chunk = start..(start + groups_per_chunk).min(groups);
            prepared::with_buffer(|buffer| prefill(rows, kernels, acts, chunk, buffer, out));
        }
    }
}

/// The weight matrix as rows of blocks.
struct Rows<'a, B> {
    blocks: &'a [B],
    per_row: usize,
}

impl<B> Clone for Rows<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Rows<'_, B> {}

impl<'a, B> Rows<'a, B> {
    /// The tile of [`TILE_ROWS`] rows from row `first` of a tiled matrix,
    /// block-major.
    fn tile(&self, first: usize) -> &'a [[B; TILE_ROWS]] {
        let blocks = &self.blocks[first * self.per_row..(first + TILE_ROWS) * self.per_row];
        blocks.as_chunks::<TILE_ROWS>().0
    }

    fn get<const R: usize>(&self, first: usize) -> [&'a [B]; R] {
        std::array::from_fn(|i| {
            let row = first + i;
            &self.blocks[row * self.per_row..(row + 1) * self.per_row]
        })
    }
}

/// One activation row against this share's weight rows.
#[target_feature(enable = "avx2,fma,f16c")]
fn decode<B: WeightBlock>(
    rows: Rows<'_, B>,
    kernels: Kernels,
    acts: &QuantizedActivations,
    out: &mut OutputColumns<'_>,
) {
    let columns = out.columns();
    let act = acts.row(0);
    let mut row = columns.start;
    if kernels == Kernels::Repacked {
        while row + repacked::ROWS <= columns.end {
            let values = repacked::row_tile(rows.tile(row), act);
            write(out, row, 0..1, [values]);
            row += repacked::ROWS;
        }
        // Shares are multiples of 8 rows, so nothing is left here.
        debug_assert_eq!(row, columns.end);
    }
    while row + DECODE_ROWS <= columns.end {
        let values = vec_dot::row_tile::<B, DECODE_ROWS>(rows.get(row), act);
        write(out, row, 0..1, [values]);
        row += DECODE_ROWS;
    }
    for row in row..columns.end {
        let values = vec_dot::row_tile::<B, 1>(rows.get(row), act);
        write(out, row, 0..1, [values]);
    }
}

/// The activation groups of `chunk` against this share's weight rows.
#[target_feature(enable = "avx2,fma,f16c")]
fn prefill<B: WeightBlock>(
    rows: Rows<'_, B>,
    kernels: Kernels,
    acts: &QuantizedActivations,
    chunk: Range<usize>,
    buffer: &mut PreparedRows,
    out: &mut OutputColumns<'_>,
) {
    let columns = out.columns();
    let mut row = columns.start;
    if kernels == Kernels::Repacked {
        while row + repacked::ROWS <= columns.end {
            buffer.fill_tile(rows.tile(row), Layout::RawNibbles);
            prefetch_rows(rows, row + repacked::ROWS..row + 2 * repacked::ROWS);
            for g in chunk.clone() {
                let (group, act_rows) = acts.group(g);
                write(out, row, act_rows, repacked::group_tile(buffer, &group));
            }
            row += repacked::ROWS;
        }
        debug_assert_eq!(row, columns.end);
    }
    if row == columns.end {
        return;
    }
    // The groups of the chunk in batches, looked up once for every tile.
    let batches: Vec<GroupBatch<'_>> = chunk
        .clone()
        .step_by(BATCH_GROUPS)
        .map(|first| GroupBatch::new(acts, first..(first + BATCH_GROUPS).min(chunk.end)))
        .collect();
    if kernels == Kernels::VecDotVnni {
        let mut scratch = TileScratch::new();
        while row + VNNI_PREFILL_ROWS <= columns.end {
            let tile = (row, &mut scratch);
            prefill_tile::<B, VNNI_PREFILL_ROWS, true>(rows, tile, &batches, buffer, out);
            row += VNNI_PREFILL_ROWS;
        }
    }
    let mut scratch = TileScratch::new();
    while row + PREFILL_ROWS <= columns.end {
        let tile = (row, &mut scratch);
        prefill_tile::<B, PREFILL_ROWS, false>(rows, tile, &batches, buffer, out);
        row += PREFILL_ROWS;
    }
    let mut scratch = TileScratch::new();
    for row in row..columns.end {
        let tile = (row, &mut scratch);
        prefill_tile::<B, 1, false>(rows, tile, &batches, buffer, out);
    }
}

/// Weight rows `row..row + R` against the batches of activation groups, with
/// the VNNI group tile if `VNNI` (only for [`Kernels::VecDotVnni`]).
#[target_feature(enable = "avx2,fma,f16c")]
fn prefill_tile<B: WeightBlock, const R: usize, const VNNI: bool>(
    rows: Rows<'_, B>,
    (row, scratch): (usize, &mut TileScratch<R>),
    batches: &[GroupBatch<'_>],
    buffer: &mut PreparedRows,
    out: &mut OutputColumns<'_>,
) {
    buffer.fill(&rows.get::<R>(row), Layout::VecDot);
    prefetch_rows(rows, row + R..row + 2 * R);
    for batch in batches {
        vec_dot::prepare_groups::<B, R>(buffer, batch, scratch);
        for (index, group, act_rows) in batch.iter() {
            let tile = (group, index);
            let values = if VNNI {
                // SAFETY: VNNI tiles run only for `Kernels::VecDotVnni`, chosen
                // where `vnni_available()` found the features this needs.
                unsafe { vec_dot::group_tile_vnni::<B, R>(buffer, tile, scratch) }
            } else {
                vec_dot::group_tile::<B, R>(buffer, tile, scratch)
            };
            write(out, row, act_rows, values);
        }
    }
}

/// Asks for the weight rows `next` (those that exist) to be brought into the
/// cache: batches read each tile's rows once, right after the previous tile's
/// dot products, and without the hint unpacking them waited on memory (a
/// sixth of a 16-row decode step).
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch_rows<B>(rows: Rows<'_, B>, next: Range<usize>) {
    let total = rows.blocks.len();
    let start = (next.start * rows.per_row).min(total);
    let end = (next.end * rows.per_row).min(total);
    let blocks = &rows.blocks[start..end];
    let first = blocks.as_ptr().cast::<i8>();
    for offset in (0..std::mem::size_of_val(blocks)).step_by(CACHE_LINE_BYTES) {
        // A prefetch is only a hint: it never faults, whatever the address.
        _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(offset));
    }
}

const CACHE_LINE_BYTES: usize = 64;

/// Stores `values[c][r]` as output `(act_rows.start + c, row + r)`, for the
/// activation rows that exist.
fn write<const R: usize, const C: usize>(
    out: &mut OutputColumns<'_>,
    row: usize,
    act_rows: Range<usize>,
    values: [[f32; R]; C],
) {
    for (act, values) in act_rows.zip(values.iter()) {
        out.set_run(act, row, values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::parallel::split_columns;
    use crate::cpu::test_support::{random_blocks, Rng};

    /// Weight rows `0..rows` against every activation row, in tiles of `R`
    /// rows with the AVX2 group tile.
    fn run_tiles<B: WeightBlock, const R: usize>(
        weights: &[u8],
        (rows, cols): (usize, usize),
        acts: &QuantizedActivations,
        m: usize,
    ) -> Vec<f32> {
        let blocks: &[B] = {
            let size = std::mem::size_of::<B>();
            assert_eq!(weights.len() % size, 0);
            // SAFETY: `B` is a byte array type (`[u8; N]`, alignment 1) and
            // `weights` holds a whole number of them.
            unsafe { std::slice::from_raw_parts(weights.as_ptr().cast(), weights.len() / size) }
        };
        let per_row = cols / BLOCK_VALUES;
        let groups = m.div_ceil(GROUP_ROWS);
        let batches: Vec<GroupBatch<'_>> = (0..groups)
            .step_by(BATCH_GROUPS)
            .map(|first| GroupBatch::new(acts, first..(first + BATCH_GROUPS).min(groups)))
            .collect();
        let mut out = vec![f32::NAN; m * rows];
        let mut share = split_columns(&mut out, m, rows, 1, 8)
            .next()
            .expect("one share");
        let mut buffer = PreparedRows::default();
        let mut scratch = TileScratch::<R>::new();
        for row in (0..rows).step_by(R) {
            let tile = (row, &mut scratch);
            let rows = Rows { blocks, per_row };
            // SAFETY: this module is compiled only when the build enables AVX2,
            // FMA and F16C (see `cpu/mod.rs`).
            unsafe {
                prefill_tile::<B, R, false>(rows, tile, &batches, &mut buffer, &mut share);
            }
        }
        out
    }

    /// The 4-row tiles are AVX-512 VNNI's shape; this runs them with the AVX2
    /// tile, so that machines without VNNI check how they prepare the scale
    /// products and Q4_1's terms for two pairs of rows.
    #[test]
    fn four_row_tiles_equal_one_row_tiles() {
        let mut rng = Rng::new(11);
        let (rows, cols) = (8, 576);
        for ty in [
            WeightType::Q4_1,
            WeightType::Q4_0,
            WeightType::Q5_0,
            WeightType::Q5_1,
            WeightType::Q8_0,
        ] {
            let weights = random_blocks(ty, rows * cols / BLOCK_VALUES, &mut rng);
            // 21 rows: 6 groups in two batches, the last group partial.
            for m in [2, 21] {
                let x = rng.activations(m * cols);
                let mut acts = QuantizedActivations::default();
                acts.quantize(x.as_chunks().0, cols, 1);
                let shape = (rows, cols);
                let (one, four) = match ty {
                    WeightType::Q4_0 => (
                        run_tiles::<[u8; 18], 1>(&weights, shape, &acts, m),
                        run_tiles::<[u8; 18], 4>(&weights, shape, &acts, m),
                    ),
                    WeightType::Q4_1 => (
                        run_tiles::<[u8; 20], 1>(&weights, shape, &acts, m),
                        run_tiles::<[u8; 20], 4>(&weights, shape, &acts, m),
                    ),
                    WeightType::Q5_0 => (
                        run_tiles::<[u8; 22], 1>(&weights, shape, &acts, m),
                        run_tiles::<[u8; 22], 4>(&weights, shape, &acts, m),
                    ),
                    WeightType::Q5_1 => (
                        run_tiles::<[u8; 24], 1>(&weights, shape, &acts, m),
                        run_tiles::<[u8; 24], 4>(&weights, shape, &acts, m),
                    ),
                    WeightType::Q8_0 => (
                        run_tiles::<[u8; 34], 1>(&weights, shape, &acts, m),
                        run_tiles::<[u8; 34], 4>(&weights, shape, &acts, m),
                    ),
                    other => unreachable!("{other} is not in this test"),
                };
                assert!(
                    one.iter().all(|v| v.is_finite()),
                    "{ty} m={m}: not all written"
                );
                let same = one
                    .iter()
                    .zip(&four)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{ty} m={m}: 4-row tiles differ from 1-row tiles");
            }
        }
    }
}
