//! Activations quantized to 8 bits the way llama.cpp's CPU backend does before a
//! quantized matmul (`quantize_row_q8_0` / `quantize_row_q8_1`, AVX2 path): one
//! scale per block of 32 values, values rounded to nearest-even. Kept as separate
//! arrays (structure of arrays) so kernels load 32 quants without unpacking, and
//! for batches also with the per-block values of each group of 4 rows side by
//! side, so a kernel serving 4 rows loads their scales with one load.

use std::ops::Range;

use super::backend;
use super::parallel;
use super::weight_type::BLOCK_VALUES;

/// One block of activations quantized, before its scales are rounded to f16.
pub(crate) struct QuantizedBlock {
    /// `round(x · 127 / amax)`.
    pub quants: [i8; BLOCK_VALUES],
    /// `amax / 127` as f32; llama.cpp stores it as f16 but computes Q8_1's `s` from
    /// the f32 value.
    pub scale: f32,
    /// Sum of the quants.
    pub quant_sum: i32,
}

/// One quantized activation row, as kernels read it; every slice has one entry
/// per block.
#[derive(Clone, Copy)]
pub(crate) struct ActivationRow<'a> {
    pub quants: &'a [[i8; BLOCK_VALUES]],
    /// Block scale `d`, rounded to f16 (held as the exact f32 of that half).
    pub scales: &'a [f32],
    /// Q8_1's `s = f16(d_f32 · Σq)`, as f32; only Q4_1 weights use it.
    pub q8_1_sums: &'a [f32],
    /// `Σq` as an integer; the 8-row Q4_0 kernel uses it to remove the offset of 8.
    // Read by the AVX2 kernels only.
    #[cfg_attr(not(x86_simd), allow(dead_code))]
    pub quant_sums: &'a [i32],
}

/// Rows per activation group.
pub(crate) const GROUP_ROWS: usize = 4;

/// Up to 4 consecutive quantized activation rows, with their per-block values
/// side by side, quants included, so one pointer walks the group (entries past
/// the last row are zero: kernels may compute them and drop the results).
// Read by the AVX2 kernels only.
#[cfg_attr(not(x86_simd), allow(dead_code))]
#[derive(Clone, Copy)]
pub(crate) struct ActivationGroup<'a> {
    pub quants: &'a [[[i8; BLOCK_VALUES]; GROUP_ROWS]],
    pub scales: &'a [[f32; GROUP_ROWS]],
    pub q8_1_sums: &'a [[f32; GROUP_ROWS]],
    pub quant_sums: &'a [[i32; GROUP_ROWS]],
}

/// The quantized form of an `m × k` activation matrix, reused across calls so that
/// a matmul allocates nothing once the buffers have grown.
#[derive(Default)]
pub(crate) struct QuantizedActivations {
    blocks_per_row: usize,
    quants: Vec<[i8; BLOCK_VALUES]>,
    scales: Vec<f32>,
    q8_1_sums: Vec<f32>,
    quant_sums: Vec<i32>,
    rows: usize,
    group_quants: Vec<[[i8; BLOCK_VALUES]; GROUP_ROWS]>,
    group_scales: Vec<[f32; GROUP_ROWS]>,
    group_q8_1_sums: Vec<[f32; GROUP_ROWS]>,
    group_quant_sums: Vec<[i32; GROUP_ROWS]>,
}

/// Below this many blocks quantizing on one thread is cheaper than waking others.
const PARALLEL_MIN_BLOCKS: usize = 2048;

impl QuantizedActivations {
    /// Quantizes `x` (`rows × cols`, row-major, `cols` a multiple of 32).
    pub fn quantize(&mut self, x: &[[f32; BLOCK_VALUES]], cols: usize, threads: usize) {
        self.quantize_with(x, cols, threads, backend::quantize_block);
    }

    /// `quantize` with a given block quantizer (tests pass the scalar one).
    pub fn quantize_with(
        &mut self,
        x: &[[f32; BLOCK_VALUES]],
        cols: usize,
        threads: usize,
        quantize_block: fn(&[f32; BLOCK_VALUES]) -> QuantizedBlock,
    ) {
        self.blocks_per_row = cols / BLOCK_VALUES;
        let blocks = x.len();
        self.quants.resize(blocks, [0; BLOCK_VALUES]);
        self.scales.resize(blocks, 0.0);
        self.q8_1_sums.resize(blocks, 0.0);
        self.quant_sums.resize(blocks, 0);
        let parts = if blocks >= PARALLEL_MIN_BLOCKS {
            threads.max(1)
        } else {
            1
        };
        let per_part = blocks.div_ceil(parts).max(1);
        let chunks = x
            .chunks(per_part)
            .zip(self.quants.chunks_mut(per_part))
            .zip(self.scales.chunks_mut(per_part))
            .zip(self.q8_1_sums.chunks_mut(per_part))
            .zip(self.quant_sums.chunks_mut(per_part))
            .map(|((((x, q), d), s), qs)| Chunk {
                x,
                quants: q,
                scales: d,
                q8_1_sums: s,
                quant_sums: qs,
            });
        parallel::for_each(chunks, threads, |chunk| chunk.quantize(quantize_block));
        self.rows = blocks / self.blocks_per_row.max(1);
        if self.rows > 1 {
            self.gather_groups();
        }
    }

    /// Copies each group's per-block values side by side.
    fn gather_groups(&mut self) {
        let per_row = self.blocks_per_row;
        let len = self.rows.div_ceil(GROUP_ROWS) * per_row;
        self.group_quants.clear();
        self.group_quants
            .resize(len, [[0; BLOCK_VALUES]; GROUP_ROWS]);
        self.group_scales.clear();
        self.group_scales.resize(len, [0.0; GROUP_ROWS]);
        self.group_q8_1_sums.clear();
        self.group_q8_1_sums.resize(len, [0.0; GROUP_ROWS]);
        self.group_quant_sums.clear();
        self.group_quant_sums.resize(len, [0; GROUP_ROWS]);
        for row in 0..self.rows {
            let (group, lane) = (row / GROUP_ROWS, row % GROUP_ROWS);
            for b in 0..per_row {
                let (from, to) = (row * per_row + b, group * per_row + b);
                self.group_quants[to][lane] = self.quants[from];
                self.group_scales[to][lane] = self.scales[from];
                self.group_q8_1_sums[to][lane] = self.q8_1_sums[from];
                self.group_quant_sums[to][lane] = self.quant_sums[from];
            }
        }
    }

    /// Rows `4 * group ..` (up to 4 of them) as a group; only valid after
    /// quantizing more than one row. Read by the AVX2 kernels only.
    #[cfg_attr(not(x86_simd), allow(dead_code))]
    pub fn group(&self, group: usize) -> (ActivationGroup<'_>, Range<usize>) {
        let first = group * GROUP_ROWS;
        let rows = first..(first + GROUP_ROWS).min(self.rows);
        let per_row = self.blocks_per_row;
        let blocks = group * per_row..(group + 1) * per_row;
        let group = ActivationGroup {
            quants: &self.group_quants[blocks.clone()],
            scales: &self.group_scales[blocks.clone()],
            q8_1_sums: &self.group_q8_1_sums[blocks.clone()],
            quant_sums: &self.group_quant_sums[blocks],
        };
        (group, rows)
    }

    /// Activation row `i`.
    pub fn row(&self, i: usize) -> ActivationRow<'_> {
        let range = i * self.blocks_per_row..(i + 1) * self.blocks_per_row;
        ActivationRow {
            quants: &self.quants[range.clone()],
            scales: &self.scales[range.clone()],
            q8_1_sums: &self.q8_1_sums[range.clone()],
            quant_sums: &self.quant_sums[range],
        }
    }
}

/// A run of consecutive blocks quantized by one thread.
struct Chunk<'a> {
    x: &'a [[f32; BLOCK_VALUES]],
    quants: &'a mut [[i8; BLOCK_VALUES]],
    scales: &'a mut [f32],
    q8_1_sums: &'a mut [f32],
    quant_sums: &'a mut [i32],
}

impl Chunk<'_> {
    fn quantize(self, quantize_block: fn(&[f32; BLOCK_VALUES]) -> QuantizedBlock) {
        let outputs = self
            .quants
            .iter_mut()
            .zip(self.scales.iter_mut())
            .zip(self.q8_1_sums.iter_mut())
            .zip(self.quant_sums.iter_mut());
        for (x, (((quants, scale), q8_1_sum), quant_sum)) in self.x.iter().zip(outputs) {
            let block = quantize_block(x);
            *quants = block.quants;
            *scale = super::blocks::round_to_f16(block.scale);
            // `d * sum` in f32 with the unrounded `d`, then f16: llama.cpp's `y[i].s`.
            *q8_1_sum = super::blocks::round_to_f16(block.scale * block.quant_sum as f32);
            *quant_sum = block.quant_sum;
        }
    }
}
