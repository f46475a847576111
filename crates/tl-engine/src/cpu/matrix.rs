//! A quantized weight matrix in GGUF layout and its product with f32
//! activations, `out = x · Wᵀ` like `ggml_mul_mat(W, x)` on llama.cpp's CPU
//! backend: the activations are quantized first (Q8_K for the K-quants, Q8_1
//! for the other types with a minimum, Q4_1 and Q5_1, Q8_0 for the rest), then
//! each output is one dot product with llama.cpp's rounding.

use std::cell::RefCell;

use super::activations::QuantizedActivations;
use super::backend;
use super::kquants::{self, KArithmetic, SuperBlockActivations};
use super::parallel;
use super::weight_type::{WeightType, BLOCK_VALUES};
use crate::error::{Error, Result};

/// Which llama.cpp kernel's rounding a matrix follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arithmetic {
    /// `ggml_vec_dot_*` (and tinyBLAS, which rounds alike).
    VecDot,
    /// The repacked `q4_0_8x8` kernels llama.cpp uses for Q4_0 on AVX2 CPUs.
    RepackedQ4_0,
    /// One of the K-quant kernels (run by [`kquants`]).
    KQuant(KArithmetic),
}

/// The weight data as the kernels read it.
#[derive(Clone, Copy)]
pub(crate) struct WeightRows<'a> {
    pub weight_type: WeightType,
    pub bytes: &'a [u8],
    pub blocks_per_row: usize,
    pub arithmetic: Arithmetic,
    /// Whether the blocks lie in tiles of [`TILE_ROWS`] rows, block-major
    /// (block `b` of row `r` at `((r / 8)·blocks_per_row + b)·8 + r % 8`),
    /// rather than row after row as in GGUF (see
    /// [`QuantizedMatrix::with_repacking`]).
    pub tiled: bool,
    /// Whether batches may use the AVX-512 VNNI tiles (same results; a
    /// backend that lacks them ignores this).
    // Read only by the x86-64 kernels.
    #[cfg_attr(not(x86_simd), allow(dead_code))]
    pub vnni: bool,
}

/// Rows per tile of a [`WeightRows::tiled`] matrix: those of llama.cpp's
/// repacked Q4_0 kernels.
pub(crate) const TILE_ROWS: usize = 8;

impl WeightRows<'_> {
    /// All blocks of the matrix as `N`-byte arrays (`N` being the block size
    /// of `weight_type`), in GGUF or tiled order.
    pub fn blocks<const N: usize>(&self) -> &[[u8; N]] {
        debug_assert_eq!(N, self.weight_type.block_bytes());
        self.bytes.as_chunks::<N>().0
    }

    /// Where block `block` of row `row` is in [`Self::blocks`].
    pub fn block_index(&self, row: usize, block: usize) -> usize {
        let per_row = self.blocks_per_row;
        if self.tiled {
            ((row / TILE_ROWS) * per_row + block) * TILE_ROWS + row % TILE_ROWS
        } else {
            row * per_row + block
        }
    }
}

/// `bytes` (blocks of `block_bytes`, rows of `blocks_per_row`) moved from
/// GGUF order into tiles of [`TILE_ROWS`] rows, or back with `untile`.
fn retile(bytes: &[u8], block_bytes: usize, blocks_per_row: usize, untile: bool) -> Vec<u8> {
    let mut moved = vec![0; bytes.len()];
    let row_bytes = block_bytes * blocks_per_row;
    let tile_bytes = row_bytes * TILE_ROWS;
    for (from, to) in bytes
        .chunks_exact(tile_bytes)
        .zip(moved.chunks_exact_mut(tile_bytes))
    {
        for r in 0..TILE_ROWS {
            for b in 0..blocks_per_row {
                let gguf = (r * blocks_per_row + b) * block_bytes;
                let tiled = (b * TILE_ROWS + r) * block_bytes;
                let (src, dst) = if untile { (tiled, gguf) } else { (gguf, tiled) };
                to[dst..dst + block_bytes].copy_from_slice(&from[src..src + block_bytes]);
            }
        }
    }
    moved
}

/// A quantized weight matrix: `rows` output features by `cols` input features,
/// holding the GGUF bytes of the tensor unchanged.
pub struct QuantizedMatrix {
    weight_type: WeightType,
    rows: usize,
    cols: usize,
    bytes: Vec<u8>,
    repacking: bool,
    /// Whether `bytes` are in tiles ([`WeightRows::tiled`]).
    tiled: bool,
    vnni: bool,
}

/// Weight rows per share below which splitting costs more than it saves.
const MIN_ROWS_PER_SHARE: usize = 64;

/// Shares per thread: threads take shares from a queue, so one slowed down (by
/// another process, say) leaves its remaining shares to the others.
const SHARES_PER_THREAD: usize = 4;

/// Activations quantized for every weight type: the 32-value formats and Q8_K.
#[derive(Default)]
struct Activations {
    blocks: QuantizedActivations,
    super_blocks: SuperBlockActivations,
}

thread_local! {
    /// The calling thread's quantized activations, reused across calls.
    static ACTIVATIONS: RefCell<Activations> = RefCell::default();
}

impl QuantizedMatrix {
    /// Wraps the GGUF data of a `rows × cols` tensor of type `ty` (GGUF dims
    /// `[cols, rows]`), when the CPU's own kernels run that type
    /// ([`crate::cpu::supports`]).
    pub fn from_gguf(
        ty: tl_gguf::GgmlType,
        rows: usize,
        cols: usize,
        bytes: Vec<u8>,
    ) -> Result<Self> {
        let weight_type = WeightType::from_gguf(ty).ok_or_else(|| {
            Error::Unsupported(format!(
                "the CPU's own kernels do not run {} weights",
                ty.name()
            ))
        })?;
        Self::new(weight_type, rows, cols, bytes)
    }

    /// Wraps the GGUF data of a `rows × cols` tensor (GGUF dims `[cols, rows]`).
    pub(crate) fn new(
        weight_type: WeightType,
        rows: usize,
        cols: usize,
        bytes: Vec<u8>,
    ) -> Result<Self> {
        let block_values = weight_type.block_values();
        if !cols.is_multiple_of(block_values) {
            return Err(Error::InvalidModel(format!(
                "{weight_type} matrix {rows}×{cols}: columns are not a multiple of {block_values}"
            )));
        }
        let expected = rows
            .checked_mul(cols / block_values)
            .and_then(|blocks| blocks.checked_mul(weight_type.block_bytes()));
        if expected != Some(bytes.len()) {
            return Err(Error::InvalidModel(format!(
                "{weight_type} matrix {rows}×{cols}: expected {expected:?} bytes, got {}",
                bytes.len()
            )));
        }
        Ok(QuantizedMatrix {
            weight_type,
            rows,
            cols,
            bytes,
            repacking: true,
            tiled: false,
            vnni: true,
        }
        .with_layout())
    }

    /// The matrix with its blocks in the order the backend's kernels for its
    /// arithmetic read: the repacked Q4_0 and Q4_K kernels read tiles of 8
    /// rows as one stream from memory (llama.cpp repacks those matrices at
    /// load too).
    fn with_layout(mut self) -> Self {
        let repacked = matches!(
            self.arithmetic(),
            Arithmetic::RepackedQ4_0 | Arithmetic::KQuant(KArithmetic::Q4KRepacked)
        );
        let tiled = backend::READS_TILES && repacked;
        if tiled != self.tiled {
            let blocks_per_row = self.cols / self.weight_type.block_values();
            let block_bytes = self.weight_type.block_bytes();
            self.bytes = retile(&self.bytes, block_bytes, blocks_per_row, self.tiled);
            self.tiled = tiled;
        }
        self
    }

    /// Whether a Q4_0 or Q4_K matrix with a multiple of 8 rows follows the
    /// rounding of llama.cpp's repacked kernels (its default on AVX2 CPUs, and
    /// ours) or that of `ggml_vec_dot_q4_0_q8_0` / `_q4_K_q8_K` (llama.cpp run
    /// with `--no-repack`).
    pub fn with_repacking(mut self, enabled: bool) -> Self {
        self.repacking = enabled;
        self.with_layout()
    }

    /// Whether batched products may use AVX-512 VNNI where the CPU has it (the
    /// default): the results are the same bits either way, so this is only
    /// for tests and benchmarks of the AVX2 kernels on such CPUs.
    pub fn with_vnni(mut self, enabled: bool) -> Self {
        self.vnni = enabled;
        self
    }

    pub fn weight_type(&self) -> WeightType {
        self.weight_type
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// `out[m × rows] = x[m × cols] · Wᵀ`, row-major, on up to `threads` threads
    /// (the calling thread and candle's pool, whose size caps it), rounded as
    /// llama.cpp's `ggml_mul_mat` of `m` rows is. Each output depends only on
    /// its weight row, its activation row and (for K-quants) `m`: the thread
    /// count never changes a result.
    pub fn matmul(&self, x: &[f32], m: usize, out: &mut [f32], threads: usize) -> Result<()> {
        Self::matmul_shared_input(&mut [(self, out)], x, m, threads)
    }

    /// [`Self::matmul`] for several matrices of the same input width applied to
    /// the same `x` (a block's query, key and value projections, say): `x` is
    /// quantized once and the rows of all the matrices are shared among the
    /// threads in one go, so small matrices do not leave threads idle. Each
    /// output is what `matmul` gives it.
    pub fn matmul_shared_input(
        products: &mut [(&QuantizedMatrix, &mut [f32])],
        x: &[f32],
        m: usize,
        threads: usize,
    ) -> Result<()> {
        Self::matmul_micro_batches(products, x, m, m.max(1), threads)
    }

    /// [`Self::matmul_shared_input`] with the `m` rows rounded as llama.cpp
    /// rounds them when it runs them in consecutive micro-batches of up to
    /// `micro_batch` rows (1 for decode steps, which it runs alone). Only
    /// K-quant outputs depend on it (see `kquants::row_arithmetic`).
    pub fn matmul_micro_batches(
        products: &mut [(&QuantizedMatrix, &mut [f32])],
        x: &[f32],
        m: usize,
        micro_batch: usize,
        threads: usize,
    ) -> Result<()> {
        let Some(cols) = products.first().map(|(matrix, _)| matrix.cols) else {
            return Ok(());
        };
        for (matrix, out) in products.iter() {
            matrix.check_shapes(cols, x.len(), m, out.len())?;
        }
        if m == 0 {
            return Ok(());
        }
        ACTIVATIONS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut acts) => multiply(products, (x, cols), (m, micro_batch), &mut acts, threads),
            // Re-entered on this thread (from inside a pool job, say): use a
            // buffer of its own.
            Err(_) => {
                let acts = &mut Activations::default();
                multiply(products, (x, cols), (m, micro_batch), acts, threads)
            }
        });
        Ok(())
    }

    /// Errors unless `x` (`x_len` values) is `m × cols`, `cols` this matrix's
    /// width, and the output (`out_len` values) is `m × rows`.
    fn check_shapes(&self, cols: usize, x_len: usize, m: usize, out_len: usize) -> Result<()> {
        if cols != self.cols || x_len != m * self.cols || out_len != m * self.rows {
            return Err(Error::InvalidRequest(format!(
                "matmul with a {}×{} matrix: x has {x_len} values and out {out_len}, expected {m}×{} and {m}×{}",
                self.rows, self.cols, self.cols, self.rows
            )));
        }
        Ok(())
    }

    /// The kernels' view of the weights.
    fn weight_rows(&self) -> WeightRows<'_> {
        WeightRows {
            weight_type: self.weight_type,
            bytes: &self.bytes,
            blocks_per_row: self.cols / self.weight_type.block_values(),
            arithmetic: self.arithmetic(),
            tiled: self.tiled,
            vnni: self.vnni,
        }
    }

    /// How many column shares this matrix's output is cut into.
    fn share_count(&self, threads: usize) -> usize {
        if threads > 1 {
            (threads * SHARES_PER_THREAD)
                .min(self.rows / MIN_ROWS_PER_SHARE)
                .max(1)
        } else {
            1
        }
    }

    fn arithmetic(&self) -> Arithmetic {
        let repacked = self.repacking && self.rows.is_multiple_of(8);
        match self.weight_type {
            WeightType::Q4_0 if repacked => Arithmetic::RepackedQ4_0,
            WeightType::Q4_K if repacked => Arithmetic::KQuant(KArithmetic::Q4KRepacked),
            WeightType::Q2_K | WeightType::Q4_K | WeightType::Q5_K => {
                Arithmetic::KQuant(KArithmetic::TiledWithMins)
            }
            WeightType::Q3_K | WeightType::Q6_K => Arithmetic::KQuant(KArithmetic::Tiled),
            _ => Arithmetic::VecDot,
        }
    }
}

/// The runs of activation rows and the K-quant arithmetic of each, for `m`
/// rows in micro-batches of `micro_batch` with a matrix whose batch kernel is
/// `batch`; neighbouring runs of one arithmetic are merged.
fn k_quant_runs(
    batch: KArithmetic,
    weight_type: WeightType,
    (m, micro_batch): (usize, usize),
) -> Vec<(std::ops::Range<usize>, KArithmetic)> {
    let mut runs: Vec<(std::ops::Range<usize>, KArithmetic)> = Vec::new();
    for first in (0..m).step_by(micro_batch.max(1)) {
        let mut start = first;
        let rows = micro_batch.min(m - first);
        for (len, kind) in kquants::row_arithmetic(batch, weight_type, rows) {
            match runs.last_mut() {
                _ if len == 0 => {}
                Some((last, last_kind)) if *last_kind == kind && last.end == start => {
                    last.end += len
                }
                _ => runs.push((start..start + len, kind)),
            }
            start += len;
        }
    }
    runs
}

/// Quantizes `x` (`m × cols`) once for each activation format the matrices
/// need, then runs every matrix's column shares from one queue.
fn multiply(
    products: &mut [(&QuantizedMatrix, &mut [f32])],
    (x, cols): (&[f32], usize),
    (m, micro_batch): (usize, usize),
    acts: &mut Activations,
    threads: usize,
) {
    let k_quant = |(matrix, _): &(&QuantizedMatrix, &mut [f32])| matrix.weight_type.is_k_quant();
    if products.iter().any(|p| !k_quant(p)) {
        acts.blocks
            .quantize(x.as_chunks::<BLOCK_VALUES>().0, cols, threads);
    }
    if products.iter().any(k_quant) {
        acts.super_blocks.quantize(x, cols, threads);
    }
    let acts = &*acts;
    let runs: Vec<_> = products
        .iter()
        .map(|(matrix, _)| match matrix.arithmetic() {
            Arithmetic::KQuant(batch) => k_quant_runs(batch, matrix.weight_type, (m, micro_batch)),
            _ => Vec::new(),
        })
        .collect();
    let shares = products
        .iter_mut()
        .zip(&runs)
        .flat_map(|((matrix, out), runs)| {
            let weights = matrix.weight_rows();
            let parts = matrix.share_count(threads);
            // Shares start at multiples of 8 so the 8-row Q4_0 tiles never straddle two.
            parallel::split_columns(out, m, matrix.rows, parts, 8)
                .map(move |share| (weights, runs, share))
        });
    parallel::for_each(
        shares,
        threads,
        |(weights, runs, mut share)| match weights.arithmetic {
            Arithmetic::KQuant(_) => {
                for (rows, kind) in runs {
                    let acts = &acts.super_blocks;
                    kquants::compute_rows(&weights, *kind, acts, rows.clone(), &mut share);
                }
            }
            _ => backend::compute_rows(&weights, &acts.blocks, m, &mut share),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_hold_each_rows_blocks_and_untile_back() {
        // 16 rows of 3 blocks of 2 bytes: byte pairs name (row, block).
        let (rows, blocks, block_bytes) = (16, 3, 2);
        let gguf: Vec<u8> = (0..rows)
            .flat_map(|r| (0..blocks).flat_map(move |b| [r as u8, b as u8]))
            .collect();
        let tiled = retile(&gguf, block_bytes, blocks, false);
        for r in 0..rows {
            for b in 0..blocks {
                let at = ((r / TILE_ROWS * blocks + b) * TILE_ROWS + r % TILE_ROWS) * block_bytes;
                assert_eq!(tiled[at..at + 2], [r as u8, b as u8]);
            }
        }
        assert_eq!(retile(&tiled, block_bytes, blocks, true), gguf);
    }
}
