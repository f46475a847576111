//! The shape of a quantized GEMV launch: rows per tile, threads per block and
//! shared memory (see `gemv_tiles` in gemv.cu). A tile's blocks of 32
//! weights are computed by all the block's threads at once and summed in the
//! CPU's order by one thread per chain afterwards; the terms wait in shared
//! memory in between.

use crate::error::{CudaError, Result};
use crate::matrix::{is_k_quant, GgmlType, SummationOrder};
use crate::options::{GpuOptions, MAX_TILE_THREADS};

/// Threads per block at most (`GEMV_MAX_THREADS` in gemv.cu).
const MAX_THREADS: usize = MAX_TILE_THREADS;

/// Values of x each thread holds when staging reads x once
/// (`STAGE_QUARTERS` quarters of 8 in gemv.cu).
const STAGED_PER_THREAD: usize = 16;

/// Rows per tile: by default the fewest that give every multiprocessor one
/// block (a block takes one tile of one sequence); the options'
/// `gemv_tile_rows` overrides it (a tuning knob for measurements).
fn wanted_rows(
    out_rows: usize,
    sequences: usize,
    multiprocessors: usize,
    options: &GpuOptions,
) -> usize {
    options
        .gemv_tile_rows
        .unwrap_or_else(|| (out_rows * sequences).div_ceil(multiprocessors.max(1)))
}

/// `wanted` rows per tile (even, at least 2) when they fit in `most`; else
/// the fewest rows that need no more waves of one tile per multiprocessor
/// than tiles of `most` rows, so that the last wave is not a fraction of
/// the others (Llama-8B's Q6_K output head took 409 tiles on 132
/// multiprocessors, a last wave of 13; now 526 in four nearly full waves).
fn balanced_rows(wanted: usize, most: usize, total_rows: usize, multiprocessors: usize) -> usize {
    let rows = wanted.max(2).next_multiple_of(2);
    if rows <= most {
        return rows;
    }
    let slots = multiprocessors.max(1);
    let waves = total_rows.div_ceil(most * slots);
    total_rows
        .div_ceil(waves * slots)
        .max(2)
        .next_multiple_of(2)
        .min(most)
}

/// A quantized matrix's summation, as the tile kernels see it.
#[derive(Debug, Clone, Copy)]
pub struct TileKind {
    pub weight_type: GgmlType,
    pub order: SummationOrder,
    /// Gate and up rows per output row (swiglu) rather than one row.
    pub pairs: bool,
}

impl TileKind {
    /// Chains a row is summed in (`Planes::CHAINS`): one thread walks each.
    fn chains(&self) -> usize {
        match self.order {
            SummationOrder::Lanes | SummationOrder::KLanes => 8,
            SummationOrder::WholeBlocks
            | SummationOrder::SuperBlocks
            | SummationOrder::RepackedQ4K
            | SummationOrder::RepackedQ4KGemv => 1,
        }
    }

    /// Floats a block leaves per row (`Planes::COUNT`): its chain terms,
    /// dw·da and, for Q4_1 and Q5_1, m; for a K-quant super-block its four
    /// 64-value sums (eight lane sums in `KLanes`) and d, and for types with
    /// minimums four minimum terms (eight for Q2_K's lanes) and dmin too.
    fn planes(&self) -> usize {
        let ty = self.weight_type;
        if is_k_quant(ty) {
            let lanes = self.order == SummationOrder::KLanes;
            let sums = if lanes { 8 } else { 4 };
            let min_terms = if lanes && ty == GgmlType::Q2_K { 8 } else { 4 };
            let with_mins = matches!(ty, GgmlType::Q2_K | GgmlType::Q4_K | GgmlType::Q5_K);
            return if with_mins {
                sums + min_terms + 2
            } else {
                sums + 1
            };
        }
        self.chains() + 1 + usize::from(matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1))
    }

    /// Items a thread loads at a time (`TileBatch::UNROLL`): blocks of 32
    /// weights, or 64-value groups of a K-quant super-block (up to 96 bytes
    /// each, so one at a time keeps them in registers).
    fn batch(&self) -> usize {
        match self.weight_type {
            GgmlType::Q8_0 => 4,
            ty if is_k_quant(ty) => 1,
            _ => 8,
        }
    }

    /// Values of a block (`BLOCK_VALUES` in gemv.cu): 256 for K-quants.
    fn block_values(&self) -> usize {
        if is_k_quant(self.weight_type) {
            256
        } else {
            32
        }
    }

    /// Items of a block (`ITEMS_PER_BLOCK`): a K-quant super-block's four
    /// groups of 64 values are computed by four threads.
    fn items_per_block(&self) -> usize {
        if is_k_quant(self.weight_type) {
            4
        } else {
            1
        }
    }

    fn spans(&self) -> usize {
        if self.pairs {
            2
        } else {
            1
        }
    }
}

/// Floats per plane (`plane_stride` in gemv.cu): the blocks, rounded up to
/// whole 16-byte units and to an odd number of them (walkers of neighbouring
/// planes then read different banks).
pub fn plane_stride(blocks: usize) -> usize {
    let units = blocks.div_ceil(4);
    (if units.is_multiple_of(2) {
        units + 1
    } else {
        units
    }) * 4
}

/// Floats per row of a tile (`row_floats` in gemv.cu): its planes, plus 4
/// when they are an even number of 16-byte units (walkers of neighbouring
/// rows then read different banks).
fn row_floats(kind: TileKind, blocks: usize) -> usize {
    let floats = kind.planes() * plane_stride(blocks);
    if (floats / 4).is_multiple_of(2) {
        floats + 4
    } else {
        floats
    }
}

/// One launch's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileShape {
    /// Output rows per tile (even: RoPE pairs stay in one tile).
    pub rows: usize,
    pub threads: usize,
    /// Dynamic shared memory: the staged x, then the tile's planes.
    pub shared_bytes: usize,
}

impl TileShape {
    /// The shape for `out_rows` rows of `cols` values times `sequences`
    /// vectors, x staged in `staged_bytes`, with `shared_limit` bytes of
    /// shared memory per block (less the kernels' static share) on
    /// `multiprocessors`, and the tile knobs of `options`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: TileKind,
        out_rows: usize,
        sequences: usize,
        cols: usize,
        staged_bytes: usize,
        shared_limit: usize,
        multiprocessors: usize,
        options: &GpuOptions,
    ) -> Result<TileShape> {
        let blocks = cols / kind.block_values();
        let staged = staged_bytes.div_ceil(16) * 16;
        let row_bytes = kind.spans() * row_floats(kind, blocks) * 4;
        // The most rows that fit, even (walker threads take the rows in
        // passes when they outnumber them).
        let most = shared_limit.saturating_sub(staged) / row_bytes / 2 * 2;
        if most < 2 {
            return Err(CudaError::Unsupported(format!(
                "a {:?} GEMV with rows of {cols} values needs {} bytes of shared memory, more than the device's {shared_limit}",
                kind.weight_type,
                staged + 2 * row_bytes
            )));
        }
        let rows = balanced_rows(
            wanted_rows(out_rows, sequences, multiprocessors, options),
            most,
            out_rows * sequences,
            multiprocessors,
        );
        let items = kind.spans() * rows * blocks * kind.items_per_block();
        // At least the options' `gemv_tile_threads` (512 by default): every
        // thread stages part of x (its quarters of Q8 blocks) before any
        // product, so more threads shorten every tile's start (a 135M
        // model's decode, tiles of 8 rows, measured 1,098 tok/s at 96 threads a
        // block, 1,150 at 256, when each value took its own shuffle rounds).
        let threads = [
            items.div_ceil(kind.batch()),
            rows * kind.chains(),
            cols.div_ceil(STAGED_PER_THREAD),
            options.gemv_tile_threads,
        ]
        .into_iter()
        .max()
        .unwrap_or(MAX_THREADS)
        .next_multiple_of(32)
        .min(MAX_THREADS);
        Ok(TileShape {
            rows,
            threads,
            shared_bytes: staged + rows * row_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q4_0_blocks(pairs: bool) -> TileKind {
        TileKind {
            weight_type: GgmlType::Q4_0,
            order: SummationOrder::WholeBlocks,
            pairs,
        }
    }

    #[test]
    fn plane_strides_are_odd_counts_of_four_floats() {
        for blocks in 1..300 {
            let stride = plane_stride(blocks);
            assert!(
                stride >= blocks && stride.is_multiple_of(4) && !(stride / 4).is_multiple_of(2)
            );
            assert!(stride < blocks + 8);
        }
    }

    #[test]
    fn tiles_give_every_multiprocessor_one_when_they_fit() {
        // A 1.1B model's down projection: 2,048 rows of 5,632 values.
        let default = GpuOptions::default();
        let shape = TileShape::new(
            q4_0_blocks(false),
            2048,
            1,
            5632,
            7744,
            227 * 1024,
            132,
            &default,
        )
        .unwrap();
        assert_eq!(shape.rows, 16);
        assert_eq!(2048usize.div_ceil(shape.rows), 128);
        assert!(shape.threads.is_multiple_of(32) && shape.threads <= MAX_THREADS);
        // Two planes of 180 floats: 90 units, even, so 4 floats more.
        assert_eq!(shape.shared_bytes, 7744 + 16 * (2 * 180 + 4) * 4);
    }

    #[test]
    fn tiles_shrink_to_fit_shared_memory_and_stay_even() {
        let lanes = TileKind {
            weight_type: GgmlType::Q8_0,
            order: SummationOrder::Lanes,
            pairs: true,
        };
        let default = GpuOptions::default();
        let shape = TileShape::new(lanes, 5632, 1, 2048, 2816, 48 * 1024, 132, &default).unwrap();
        assert!(shape.rows.is_multiple_of(2) && shape.rows >= 2);
        assert!(shape.shared_bytes <= 48 * 1024);
        // Rows of 1M values cannot fit two rows' planes.
        assert!(TileShape::new(lanes, 8, 1, 1 << 20, 1 << 20, 48 * 1024, 132, &default).is_err());
    }

    #[test]
    fn tiles_too_large_for_shared_memory_fill_their_waves_evenly() {
        // Llama-8B's output head: 128,256 Q6_K rows of 4,096 values.
        let kind = TileKind {
            weight_type: GgmlType::Q6_K,
            order: SummationOrder::KLanes,
            pairs: false,
        };
        let default = GpuOptions::default();
        let shape = TileShape::new(kind, 128256, 1, 4096, 5184, 227 * 1024, 132, &default).unwrap();
        let tiles = 128256usize.div_ceil(shape.rows);
        let waves = tiles.div_ceil(132);
        // As many waves as tiles of the most rows that fit need, each nearly full.
        assert_eq!((shape.rows, tiles, waves), (244, 526, 4));
        assert!(shape.rows.is_multiple_of(2) && shape.shared_bytes <= 227 * 1024);
        assert_eq!(balanced_rows(10, 100, 1000, 132), 10);
        assert_eq!(balanced_rows(150, 100, 20000, 132), 76);
    }

    #[test]
    fn the_tile_knobs_set_rows_and_threads() {
        // A 135M model's QKV projection (960 rows of 576 values): by default 8
        // rows a tile on 132 multiprocessors, and 512 threads a block.
        let kind = q4_0_blocks(false);
        let shape = |options: &GpuOptions| {
            TileShape::new(kind, 960, 1, 576, 792, 227 * 1024, 132, options).unwrap()
        };
        let default = shape(&GpuOptions::default());
        assert_eq!((default.rows, default.threads), (8, MAX_THREADS));
        let tuned = shape(&GpuOptions {
            gemv_tile_rows: Some(31),
            gemv_tile_threads: 64,
            ..Default::default()
        });
        // 32 rows of 18 blocks take 72 threads at 8 blocks each: 96.
        assert_eq!((tuned.rows, tuned.threads), (32, 96));
    }
}
