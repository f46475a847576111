//! K-quant weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: super-blocks of 256 values
//! with 16 or 8 sub-block scales) times Q8_K activations, with the rounding
//! of llama.cpp's CPU kernels for batches ([`dot`] says which). Checked bit
//! for bit against ggml's own `ggml_mul_mat` in `cpu::golden_tests`.
//!
//! In a batch, eight weight rows' super-blocks at one position are unpacked
//! once (the backend's lanes kernels) and met by every activation row of a
//! chunk; each output's arithmetic depends on its weight row and activation
//! row alone, so batching and threads never change a result. llama.cpp
//! quantizes the activations of its repacked gemm 4 rows at a time with an AVX2
//! routine that rounds like `quantize_row_q8_K_ref` but, when a super-block's
//! largest magnitude appears with both signs, may take the other sign; we
//! use the reference everywhere, so such ties can differ from its batches
//! (never from its single rows).

mod activations;
mod blocks;
mod dot;

use std::cell::RefCell;
use std::ops::Range;

pub(crate) use activations::{Q8KBlock, SuperBlockActivations};
pub(crate) use blocks::{factors, k4_scales, Unpacked};
pub(crate) use dot::{
    finish, offset_per_value, row_arithmetic, single_finish, single_step, step, GroupSums,
    KArithmetic, Lanes, RowState,
};

use super::matrix::{WeightRows, TILE_ROWS};
use super::parallel::OutputColumns;
use super::weight_type::WeightType;

/// Values per K-quant super-block (`QK_K`).
pub(crate) const SUPER_BLOCK_VALUES: usize = 256;

/// Activation bytes of one super-block position over a chunk of rows: reread
/// for every weight row of a tile, so it should stay in L1.
const ACTIVATION_COLUMN_BYTES: usize = 24 * 1024;
/// Weight rows that meet one super-block position of the activations before
/// the next position (their accumulators stay in memory between).
const COLUMN_TILE: usize = 16;

/// Activation rows below which a single-row arithmetic streams each weight
/// row through the lean kernels rather than unpacking each super-block once
/// for all the rows.
const LEAN_ROWS: usize = 4;

thread_local! {
    /// Per activation row accumulators (`acc`, `acc_min`), reused across calls.
    static ACCUMULATORS: RefCell<(Vec<f32>, Vec<f32>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
    /// Per activation row states of the single-row arithmetic.
    static ROW_STATES: RefCell<Vec<RowState>> = const { RefCell::new(Vec::new()) };
}

/// Unpacks one super-block of the K-quant `ty` from its bytes (a block of
/// another length leaves `out` as it was).
pub(crate) fn unpack(ty: WeightType, bytes: &[u8], out: &mut Unpacked) {
    fn typed<const N: usize>(
        bytes: &[u8],
        out: &mut Unpacked,
        unpack: fn(&[u8; N], &mut Unpacked),
    ) {
        if let Ok(block) = <&[u8; N]>::try_from(bytes) {
            unpack(block, out);
        }
    }
    match ty {
        WeightType::Q2_K => typed(bytes, out, blocks::unpack_q2_k),
        WeightType::Q3_K => typed(bytes, out, blocks::unpack_q3_k),
        WeightType::Q4_K => typed(bytes, out, blocks::unpack_q4_k),
        WeightType::Q5_K => typed(bytes, out, blocks::unpack_q5_k),
        WeightType::Q6_K => typed(bytes, out, blocks::unpack_q6_k),
        _ => debug_assert!(false, "{ty} is not a K-quant"),
    }
}

/// Computes the output columns of `out` for the activation rows `rows`,
/// all with the arithmetic `kind`.
pub(crate) fn compute_rows(
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    rows: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    match weights.weight_type {
        WeightType::Q2_K => typed_rows(
            weights.blocks::<84>(),
            blocks::unpack_q2_k,
            weights,
            kind,
            acts,
            rows.clone(),
            out,
        ),
        WeightType::Q3_K => typed_rows(
            weights.blocks::<110>(),
            blocks::unpack_q3_k,
            weights,
            kind,
            acts,
            rows.clone(),
            out,
        ),
        WeightType::Q4_K => typed_rows(
            weights.blocks::<144>(),
            blocks::unpack_q4_k,
            weights,
            kind,
            acts,
            rows.clone(),
            out,
        ),
        WeightType::Q5_K => typed_rows(
            weights.blocks::<176>(),
            blocks::unpack_q5_k,
            weights,
            kind,
            acts,
            rows.clone(),
            out,
        ),
        WeightType::Q6_K => typed_rows(
            weights.blocks::<210>(),
            blocks::unpack_q6_k,
            weights,
            kind,
            acts,
            rows.clone(),
            out,
        ),
        other => unreachable!("{other} is not a K-quant"),
    }
}

fn typed_rows<const N: usize>(
    blocks: &[[u8; N]],
    unpack: fn(&[u8; N], &mut Unpacked),
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    all_rows: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    if all_rows.is_empty() {
        return;
    }
    if kind.is_single_row() {
        // Few rows (decode) stream each weight row (or tile) through the
        // lean kernels; more share each unpacked super-block.
        if all_rows.len() < LEAN_ROWS && lean_columns(blocks, weights, kind, acts, &all_rows, out) {
            return;
        }
        return single_rows(blocks, unpack, weights, kind, acts, all_rows, out);
    }
    let columns = out.columns();
    // Whole groups of eight weight rows go through the lanes kernels where
    // the backend has them; the rest a row at a time.
    let lanes_end = if HAS_LANE_KERNELS {
        columns.start + columns.len() / TILE_ROWS * TILE_ROWS
    } else {
        columns.start
    };
    let batch = BatchRows {
        blocks,
        unpack,
        weights,
        kind,
        acts,
    };
    let chunk_rows = chunk_rows();
    ACCUMULATORS.with_borrow_mut(|accumulators| {
        for first in all_rows.clone().step_by(chunk_rows) {
            let rows = first..(first + chunk_rows).min(all_rows.end);
            for group in (columns.start..lanes_end).step_by(COLUMN_TILE) {
                let group = group..(group + COLUMN_TILE).min(lanes_end);
                batch.lane_group(&rows, group, accumulators, out);
            }
            for group in (lanes_end..columns.end).step_by(COLUMN_TILE) {
                let group = group..(group + COLUMN_TILE).min(columns.end);
                batch.row_group(&rows, group, accumulators, out);
            }
        }
    });
}

/// A K-quant matrix product under a batch arithmetic.
struct BatchRows<'a, const N: usize> {
    blocks: &'a [[u8; N]],
    unpack: fn(&[u8; N], &mut Unpacked),
    weights: &'a WeightRows<'a>,
    kind: KArithmetic,
    acts: &'a SuperBlockActivations,
}

impl<const N: usize> BatchRows<'_, N> {
    fn super_block(&self, column: usize, b: usize) -> SuperBlock<'_, N> {
        let bytes = &self.blocks[self.weights.block_index(column, b)];
        SuperBlock {
            bytes,
            unpack: self.unpack,
            factors: blocks::factors(bytes),
        }
    }

    /// The outputs of weight rows `columns` (whole groups of eight) for
    /// activation rows `rows`, each group's rows in the lanes of one vector.
    fn lane_group(
        &self,
        rows: &Range<usize>,
        columns: Range<usize>,
        (acc, acc_min): &mut (Vec<f32>, Vec<f32>),
        out: &mut OutputColumns<'_>,
    ) {
        reset(acc, columns.len() * rows.len());
        reset(acc_min, columns.len() * rows.len());
        let (lanes, _) = acc.as_chunks_mut::<TILE_ROWS>();
        let (min_lanes, _) = acc_min.as_chunks_mut::<TILE_ROWS>();
        let mut unpacked = Unpacked::default();
        for b in 0..self.weights.blocks_per_row {
            let per_tile = lanes
                .chunks_mut(rows.len())
                .zip(min_lanes.chunks_mut(rows.len()));
            for (first, accumulators) in columns.clone().step_by(TILE_ROWS).zip(per_tile) {
                let super_blocks: [SuperBlock<'_, N>; TILE_ROWS] =
                    std::array::from_fn(|r| self.super_block(first + r, b));
                let act = |a: usize| &self.acts.row(rows.start + a)[b];
                accumulate_lanes(
                    self.kind,
                    self.weights.vnni,
                    super_blocks.each_ref(),
                    &mut unpacked,
                    act,
                    accumulators,
                );
            }
        }
        let per_tile = lanes.chunks(rows.len()).zip(min_lanes.chunks(rows.len()));
        for (first, (lanes, min_lanes)) in columns.step_by(TILE_ROWS).zip(per_tile) {
            for (a, (acc, acc_min)) in rows.clone().zip(lanes.iter().zip(min_lanes)) {
                let values: [f32; TILE_ROWS] =
                    std::array::from_fn(|r| finish(self.kind, acc[r], acc_min[r]));
                out.set_run(a, first, &values);
            }
        }
    }

    /// The outputs of weight rows `columns` for activation rows `rows`, one
    /// weight super-block at a time against every activation row.
    fn row_group(
        &self,
        rows: &Range<usize>,
        columns: Range<usize>,
        (acc, acc_min): &mut (Vec<f32>, Vec<f32>),
        out: &mut OutputColumns<'_>,
    ) {
        reset(acc, columns.len() * rows.len());
        reset(acc_min, columns.len() * rows.len());
        let mut unpacked = Unpacked::default();
        for b in 0..self.weights.blocks_per_row {
            for (c, column) in columns.clone().enumerate() {
                let super_block = self.super_block(column, b);
                let act = |a: usize| &self.acts.row(rows.start + a)[b];
                let range = c * rows.len()..(c + 1) * rows.len();
                let accumulators = (&mut acc[range.clone()], &mut acc_min[range]);
                accumulate(self.kind, &super_block, &mut unpacked, act, accumulators);
            }
        }
        for (c, column) in columns.enumerate() {
            for (i, a) in rows.clone().enumerate() {
                let i = c * rows.len() + i;
                out.set(a, column, finish(self.kind, acc[i], acc_min[i]));
            }
        }
    }
}

/// `values` as `len` zeros.
fn reset(values: &mut Vec<f32>, len: usize) {
    values.clear();
    values.resize(len, 0.0);
}

/// Activation rows per chunk: their super-blocks at one position stay in L1
/// while a tile of weight rows passes over them.
fn chunk_rows() -> usize {
    (ACTIVATION_COLUMN_BYTES / std::mem::size_of::<Q8KBlock>()).max(8) / 8 * 8
}

/// Computes `rows` under a single-row arithmetic, each weight super-block
/// unpacked once for all of them.
fn single_rows<const N: usize>(
    blocks: &[[u8; N]],
    unpack: fn(&[u8; N], &mut Unpacked),
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    rows: Range<usize>,
    out: &mut OutputColumns<'_>,
) {
    let mut unpacked = Unpacked::default();
    ROW_STATES.with_borrow_mut(|states| {
        for column in out.columns() {
            states.clear();
            states.resize(rows.len(), RowState::default());
            for b in 0..weights.blocks_per_row {
                let block = &blocks[weights.block_index(column, b)];
                let super_block = SuperBlock {
                    bytes: block,
                    unpack,
                    factors: blocks::factors(block),
                };
                let act = |a: usize| &acts.row(rows.start + a)[b];
                single_accumulate(kind, &super_block, &mut unpacked, act, states);
            }
            for (a, state) in rows.clone().zip(states.iter()) {
                out.set(a, column, single_finish(kind, state));
            }
        }
    });
}

/// Computes `rows` with the lean single-row kernels, where the backend has
/// one for the type; false when it has none.
fn lean_columns<const N: usize>(
    blocks: &[[u8; N]],
    weights: &WeightRows<'_>,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    rows: &Range<usize>,
    out: &mut OutputColumns<'_>,
) -> bool {
    let per_row = weights.blocks_per_row;
    if weights.tiled {
        return lean_tiles(blocks, per_row, kind, acts, rows, out);
    }
    for column in out.columns() {
        let row = &blocks[column * per_row..(column + 1) * per_row];
        let Some(lean) = lean_rows(row, kind) else {
            return false;
        };
        for a in rows.clone() {
            out.set(a, column, lean(acts.row(a)));
        }
    }
    true
}

/// [`lean_columns`] of a tiled matrix ([`WeightRows::tiled`]), whose shares
/// are whole tiles.
fn lean_tiles<const N: usize>(
    blocks: &[[u8; N]],
    per_row: usize,
    kind: KArithmetic,
    acts: &SuperBlockActivations,
    rows: &Range<usize>,
    out: &mut OutputColumns<'_>,
) -> bool {
    let columns = out.columns();
    debug_assert!(
        columns.start.is_multiple_of(TILE_ROWS) && columns.len().is_multiple_of(TILE_ROWS)
    );
    for first in columns.step_by(TILE_ROWS) {
        let tile = &blocks[first * per_row..(first + TILE_ROWS) * per_row];
        let Some(lean) = lean_tile(tile.as_chunks::<TILE_ROWS>().0, kind) else {
            return false;
        };
        for a in rows.clone() {
            out.set_run(a, first, &lean(acts.row(a)));
        }
    }
    true
}

/// The lean kernel of a tile of weight rows for every activation row, where
/// the backend has one for the type and arithmetic.
#[cfg(x86_simd)]
fn lean_tile<const N: usize>(
    tile: &[[[u8; N]; TILE_ROWS]],
    kind: KArithmetic,
) -> Option<impl Fn(&[Q8KBlock]) -> [f32; TILE_ROWS] + '_> {
    super::avx2::kquant_tile(tile, kind)
}

#[cfg(not(x86_simd))]
fn lean_tile<const N: usize>(
    _tile: &[[[u8; N]; TILE_ROWS]],
    _kind: KArithmetic,
) -> Option<fn(&[Q8KBlock]) -> [f32; TILE_ROWS]> {
    None
}

/// The lean kernel of one weight row for every activation row, where the
/// backend has one for the type.
#[cfg(x86_simd)]
fn lean_rows<const N: usize>(
    row: &[[u8; N]],
    kind: KArithmetic,
) -> Option<impl Fn(&[Q8KBlock]) -> f32 + '_> {
    super::avx2::kquant_row(row, kind)
}

#[cfg(not(x86_simd))]
fn lean_rows<const N: usize>(
    _row: &[[u8; N]],
    _kind: KArithmetic,
) -> Option<fn(&[Q8KBlock]) -> f32> {
    None
}

/// One weight super-block as the backends take it: its bytes, how to unpack
/// them, and its `(d, dmin)`.
pub(crate) struct SuperBlock<'a, const N: usize> {
    pub bytes: &'a [u8; N],
    pub unpack: fn(&[u8; N], &mut Unpacked),
    pub factors: (f32, f32),
}

/// Whether the backend has the lanes kernels ([`accumulate_lanes`]).
const HAS_LANE_KERNELS: bool = cfg!(x86_simd);

#[cfg(x86_simd)]
use super::avx2::kquant_accumulate_lanes as accumulate_lanes;

#[cfg(not(x86_simd))]
fn accumulate_lanes<'a, const N: usize>(
    _kind: KArithmetic,
    _vnni: bool,
    _rows: [&SuperBlock<'_, N>; TILE_ROWS],
    _scratch: &mut Unpacked,
    _block: impl Fn(usize) -> &'a Q8KBlock,
    _accumulators: (&mut [[f32; TILE_ROWS]], &mut [[f32; TILE_ROWS]]),
) {
    unreachable!("no lanes kernels without x86 SIMD")
}

#[cfg(x86_simd)]
use super::avx2::kquant_accumulate as accumulate;

/// Adds the terms of `w` with activation row `block(i)` to the accumulators
/// of every row `i` (the portable path; `scratch` holds the unpacked block).
#[cfg_attr(x86_simd, allow(dead_code))]
fn portable_accumulate<'a, const N: usize>(
    kind: KArithmetic,
    w: &SuperBlock<'_, N>,
    scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    (acc, acc_min): (&mut [f32], &mut [f32]),
) {
    (w.unpack)(w.bytes, scratch);
    for (i, (acc, acc_min)) in acc.iter_mut().zip(acc_min.iter_mut()).enumerate() {
        let a = block(i);
        step(
            kind,
            w.factors,
            &dot::group_sums(scratch, a),
            a.d,
            (acc, acc_min),
        );
    }
}

#[cfg(not(x86_simd))]
use portable_accumulate as accumulate;

#[cfg(x86_simd)]
use super::avx2::kquant_single_accumulate as single_accumulate;

/// Adds the lanes of `w` with activation row `block(i)` to the single-row
/// state of every row `i` (the portable path).
#[cfg_attr(x86_simd, allow(dead_code))]
fn portable_single_accumulate<'a, const N: usize>(
    kind: KArithmetic,
    w: &SuperBlock<'_, N>,
    scratch: &mut Unpacked,
    block: impl Fn(usize) -> &'a Q8KBlock,
    states: &mut [RowState],
) {
    (w.unpack)(w.bytes, scratch);
    let per_value = matches!(kind, KArithmetic::VecDot(ty) if offset_per_value(ty));
    for (i, state) in states.iter_mut().enumerate() {
        let a = block(i);
        let lanes = dot::lanes(scratch, a, per_value);
        single_step(kind, w.factors, &lanes, a.d, state);
    }
}

#[cfg(not(x86_simd))]
use portable_single_accumulate as single_accumulate;

#[cfg(all(test, x86_simd))]
mod tests {
    use super::*;
    use crate::cpu::test_support::Rng;

    /// Random super-blocks of type `N` (any bytes are a valid block, given
    /// finite factors) against 11 random activation rows (a group of eight and
    /// three alone): the AVX2 accumulators, Q4_K and Q6_K loaded straight from
    /// the bytes, equal the portable ones bit for bit.
    fn check<const N: usize>(
        unpack: fn(&[u8; N], &mut Unpacked),
        kinds: &[KArithmetic],
        rng: &mut Rng,
    ) {
        for _ in 0..50 {
            let bytes: [u8; N] = random_block(rng);
            let rows = random_acts(rng, 11);
            let block = SuperBlock {
                bytes: &bytes,
                unpack,
                factors: blocks::factors(&bytes),
            };
            for &kind in kinds {
                let start: Vec<f32> = (0..11).map(|_| rng.normal(1.0)).collect();
                let (mut simd, mut simd_min) = (start.clone(), start.clone());
                let (mut portable, mut portable_min) = (start.clone(), start);
                let mut scratch = Unpacked::default();
                accumulate(
                    kind,
                    &block,
                    &mut scratch,
                    |i| &rows[i],
                    (&mut simd, &mut simd_min),
                );
                let accs = (&mut portable[..], &mut portable_min[..]);
                portable_accumulate(kind, &block, &mut scratch, |i| &rows[i], accs);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&simd), bits(&portable), "{N}-byte blocks, {kind:?}");
                assert_eq!(
                    bits(&simd_min),
                    bits(&portable_min),
                    "{N}-byte blocks, {kind:?}"
                );
            }
        }
    }

    /// The lanes kernels: eight random super-blocks against 11 random
    /// activation rows give each output the portable accumulators, with
    /// VNNI (where the CPU has it) and without.
    fn check_lanes<const N: usize>(
        unpack: fn(&[u8; N], &mut Unpacked),
        kinds: &[KArithmetic],
        rng: &mut Rng,
    ) {
        for _ in 0..20 {
            let bytes: [[u8; N]; TILE_ROWS] = std::array::from_fn(|_| random_block(rng));
            let super_blocks = bytes.each_ref().map(|bytes| SuperBlock {
                bytes,
                unpack,
                factors: blocks::factors(bytes),
            });
            let acts = random_acts(rng, 11);
            let start: Vec<[f32; TILE_ROWS]> = (0..acts.len())
                .map(|_| std::array::from_fn(|_| rng.normal(1.0)))
                .collect();
            let mut scratch = Unpacked::default();
            for (&kind, vnni) in kinds.iter().flat_map(|k| [(k, false), (k, true)]) {
                let (mut acc, mut acc_min) = (start.clone(), start.clone());
                accumulate_lanes(
                    kind,
                    vnni,
                    super_blocks.each_ref(),
                    &mut scratch,
                    |i| &acts[i],
                    (&mut acc[..], &mut acc_min[..]),
                );
                for (r, block) in super_blocks.iter().enumerate() {
                    for (i, a) in acts.iter().enumerate() {
                        let (mut expected, mut expected_min) = (start[i][r], start[i][r]);
                        let accumulators = (
                            std::slice::from_mut(&mut expected),
                            std::slice::from_mut(&mut expected_min),
                        );
                        portable_accumulate(kind, block, &mut scratch, |_| a, accumulators);
                        let context = format!("{N}-byte blocks, {kind:?}, VNNI {vnni}, {r} {i}");
                        assert_eq!(acc[i][r].to_bits(), expected.to_bits(), "{context}");
                        assert_eq!(acc_min[i][r].to_bits(), expected_min.to_bits(), "{context}");
                    }
                }
            }
        }
    }

    /// The single-row arithmetic: the AVX2 states, and the lean Q4_K and
    /// Q6_K kernels, equal the portable states bit for bit, over random rows
    /// of 3 super-blocks.
    fn check_single<const N: usize>(
        unpack: fn(&[u8; N], &mut Unpacked),
        kinds: &[KArithmetic],
        rng: &mut Rng,
    ) {
        for _ in 0..20 {
            let row: Vec<[u8; N]> = (0..3).map(|_| random_block(rng)).collect();
            let acts: Vec<Vec<Q8KBlock>> = (0..5).map(|_| random_acts(rng, 3)).collect();
            for &kind in kinds {
                let mut simd = vec![RowState::default(); acts.len()];
                let mut portable = simd.clone();
                let mut scratch = Unpacked::default();
                for (b, bytes) in row.iter().enumerate() {
                    let block = SuperBlock {
                        bytes,
                        unpack,
                        factors: blocks::factors(bytes),
                    };
                    let act = |i: usize| &acts[i][b];
                    single_accumulate(kind, &block, &mut scratch, act, &mut simd);
                    portable_single_accumulate(kind, &block, &mut scratch, act, &mut portable);
                }
                for (a, (simd, portable)) in simd.iter().zip(&portable).enumerate() {
                    let expected = single_finish(kind, portable).to_bits();
                    assert_eq!(
                        single_finish(kind, simd).to_bits(),
                        expected,
                        "{N} {kind:?}"
                    );
                    if let Some(lean) = lean_rows(&row, kind) {
                        assert_eq!(lean(&acts[a]).to_bits(), expected, "lean {N} {kind:?}");
                    }
                }
            }
        }
    }

    /// The Q4_K tile kernel gives each of its eight rows the portable
    /// single-row result (`Q4KGemv`).
    #[test]
    fn lean_tiles_equal_portable_rows() {
        let mut rng = Rng::new(13);
        for _ in 0..10 {
            let rows: Vec<Vec<[u8; 144]>> = (0..TILE_ROWS)
                .map(|_| (0..3).map(|_| random_block(&mut rng)).collect())
                .collect();
            let acts = random_acts(&mut rng, 3);
            let tile: Vec<[[u8; 144]; TILE_ROWS]> = (0..3)
                .map(|b| std::array::from_fn(|r| rows[r][b]))
                .collect();
            let Some(lean) = lean_tile(&tile, KArithmetic::Q4KGemv) else {
                eprintln!("skipped: this build has no Q4_K tile kernel");
                return;
            };
            let got = lean(&acts);
            for (r, row) in rows.iter().enumerate() {
                let mut state = [RowState::default()];
                let mut scratch = Unpacked::default();
                for (b, bytes) in row.iter().enumerate() {
                    let block = SuperBlock {
                        bytes,
                        unpack: blocks::unpack_q4_k,
                        factors: blocks::factors(bytes),
                    };
                    let act = |_: usize| &acts[b];
                    portable_single_accumulate(
                        KArithmetic::Q4KGemv,
                        &block,
                        &mut scratch,
                        act,
                        &mut state,
                    );
                }
                let expected = single_finish(KArithmetic::Q4KGemv, &state[0]);
                assert_eq!(got[r].to_bits(), expected.to_bits(), "row {r}");
            }
        }
    }

    /// Random bytes with finite, small f16 factors (any bytes are a valid
    /// block otherwise).
    fn random_block<const N: usize>(rng: &mut Rng) -> [u8; N] {
        let mut bytes: [u8; N] = std::array::from_fn(|_| rng.next_u64() as u8);
        for at in match N {
            84 => vec![80, 82],
            110 => vec![108],
            144 | 176 => vec![0, 2],
            _ => vec![208],
        } {
            let factor = half::f16::from_f32(rng.uniform() * 0.01);
            bytes[at..at + 2].copy_from_slice(&factor.to_le_bytes());
        }
        bytes
    }

    fn random_acts(rng: &mut Rng, blocks: usize) -> Vec<Q8KBlock> {
        (0..blocks)
            .map(|_| {
                let x: [f32; SUPER_BLOCK_VALUES] = std::array::from_fn(|_| rng.normal(1.0));
                let mut row = Q8KBlock::default();
                activations::quantize_block(&x, &mut row);
                row
            })
            .collect()
    }

    #[test]
    fn simd_single_row_states_equal_portable_ones() {
        use crate::cpu::weight_type::WeightType as W;
        use KArithmetic::*;
        let mut rng = Rng::new(9);
        check_single(blocks::unpack_q2_k, &[VecDot(W::Q2_K)], &mut rng);
        check_single(blocks::unpack_q3_k, &[VecDot(W::Q3_K)], &mut rng);
        check_single(blocks::unpack_q4_k, &[VecDot(W::Q4_K), Q4KGemv], &mut rng);
        check_single(blocks::unpack_q5_k, &[VecDot(W::Q5_K)], &mut rng);
        check_single(blocks::unpack_q6_k, &[VecDot(W::Q6_K)], &mut rng);
    }

    #[test]
    fn simd_accumulators_equal_portable_ones() {
        use KArithmetic::*;
        let mut rng = Rng::new(5);
        check(blocks::unpack_q2_k, &[TiledWithMins], &mut rng);
        check(blocks::unpack_q3_k, &[Tiled], &mut rng);
        check(blocks::unpack_q4_k, &[TiledWithMins, Q4KRepacked], &mut rng);
        check(blocks::unpack_q5_k, &[TiledWithMins], &mut rng);
        check(blocks::unpack_q6_k, &[Tiled], &mut rng);
    }

    #[test]
    fn lanes_accumulators_equal_portable_ones() {
        use KArithmetic::*;
        let mut rng = Rng::new(17);
        check_lanes(blocks::unpack_q2_k, &[TiledWithMins], &mut rng);
        check_lanes(blocks::unpack_q3_k, &[Tiled], &mut rng);
        check_lanes(blocks::unpack_q4_k, &[TiledWithMins, Q4KRepacked], &mut rng);
        check_lanes(blocks::unpack_q5_k, &[TiledWithMins], &mut rng);
        check_lanes(blocks::unpack_q6_k, &[Tiled], &mut rng);
    }
}
