//! Batched products on tensor cores (gemv_mma.cu): the decode of many
//! sequences and a short prompt's rows, for the weight types and summation
//! orders that have int8 MMA kernels. Each sequence's numbers equal those of
//! a lone GEMV; a product takes two launches, one staging every sequence's x
//! into the GPU's workspace, one multiplying.

use crate::error::Result;
use crate::gpu::{Arg, Gpu, DEFAULT_SHARED_LIMIT};
use crate::matrix::{DeviceMatrix, GgmlType, SummationOrder};
use crate::ops::int;

/// Sequences one product takes at most (`MMA_SEQS` in gemv_mma.cu).
pub const MAX_SEQUENCES: usize = 64;

/// Sequences a warp takes (`MMA_WARP_SEQS`): launches pad to a multiple.
const WARP_SEQUENCES: usize = 8;

/// Output rows a block takes (`MMA_ROWS`).
const BLOCK_ROWS: usize = 16;

/// Stages of the product's ring (`MMA_STAGES`).
const STAGES: usize = 4;

/// Shared memory of a block of the ring: the quants of the block's rows
/// (`mma_row_bytes`: Q8_0's padded to 48) and their 4-byte scale words, then
/// x of every sequence (40 bytes each).
fn ring_block_bytes(weight_type: GgmlType, spans: usize, padded: usize) -> usize {
    let row_bytes = if weight_type == GgmlType::Q8_0 {
        48
    } else {
        16
    };
    spans * BLOCK_ROWS * (row_bytes + 4) + padded * 40
}

/// Blocks of 32 values a stage of the ring holds: 8 (`MMA_STAGE_BLOCKS`)
/// where a row has blocks for 8 stages of them and the ring fits in
/// `limit` bytes, else 4, so that short rows still run a pipeline (measured
/// on an H100: 8 gave a 1.1B model 16-21% more at 16 and 64 streams and
/// pp32; 4 gave a 135M model's rows of 576 and 1,536 values 15% more at
/// pp32). `None` when not even 4 fit.
fn stage_blocks(cols: usize, block_bytes: usize, limit: usize) -> Option<usize> {
    [8, 4]
        .into_iter()
        .filter(|&n| n == 4 || cols / 32 >= 8 * n)
        .find(|&n| STAGES * n * block_bytes <= limit)
}

/// Static shared memory of the product kernels (the finished sums, 8.7 KiB
/// for SwiGLU's two spans), with room to spare.
const PRODUCT_STATIC_SHARED: usize = 10 * 1024;

/// Threads of the staging kernel (`GEMV_MAX_THREADS`).
const STAGE_THREADS: u32 = 512;

/// The fewest sequences that take the tensor cores. Each warp walks all of
/// a row's blocks in order, so a product costs about the same from 1 to 64
/// sequences; the CUDA-core tiles (the same bits) re-read the weights from
/// L2 once per sequence and stay faster below this (measured on an H100 with
/// a 1.1B Q4_0 model: 3,042 against 1,756 tok/s at 4 streams, 2,869 against
/// 3,059 at 8, 3,623 against 4,667 at 16).
pub const MIN_SEQUENCES: usize = 16;

/// Workspace bytes for products of rows of up to `cols` values: 40 bytes
/// per sequence and block of 32 (`MmaStaged` in gemv_mma.cu). Reserve them
/// with [`Gpu::reserve_gemv_workspace`].
pub fn workspace_bytes(cols: usize) -> usize {
    cols.div_ceil(32) * MAX_SEQUENCES * 40
}

/// Whether rows of `weight_type` summed in `order` have MMA kernels.
pub fn supported(weight_type: GgmlType, order: SummationOrder) -> bool {
    matches!(
        (weight_type, order),
        (GgmlType::Q4_0, SummationOrder::WholeBlocks)
            | (GgmlType::Q4_1, SummationOrder::Lanes)
            | (GgmlType::Q8_0, SummationOrder::Lanes)
    )
}

/// How a product runs on the tensor cores.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MmaPlan {
    workspace: u64,
    stage_blocks: usize,
    ring_bytes: usize,
}

/// The plan for a product of `w` in `order` for `sequences` vectors and
/// `spans` spans of rows (2 for SwiGLU's gate and up rows), when it takes
/// the tensor cores: the option is on, the type and order have kernels, the
/// batch is in range, the staged x and the ring fit in shared memory and
/// the workspace was reserved large enough.
pub(crate) fn plan(
    gpu: &Gpu,
    w: &DeviceMatrix,
    order: SummationOrder,
    sequences: usize,
    spans: usize,
) -> Option<MmaPlan> {
    let wanted = gpu.options().tensor_core_gemv
        && supported(w.weight_type(), order)
        && (MIN_SEQUENCES..=MAX_SEQUENCES).contains(&sequences);
    let cols = w.cols();
    let limit = gpu.info().shared_per_block_optin.max(DEFAULT_SHARED_LIMIT);
    if !wanted || staged_bytes(cols) + 1024 > limit {
        return None;
    }
    let padded = sequences.next_multiple_of(WARP_SEQUENCES);
    let block_bytes = ring_block_bytes(w.weight_type(), spans, padded);
    let stage_blocks = stage_blocks(cols, block_bytes, limit - PRODUCT_STATIC_SHARED)?;
    Some(MmaPlan {
        workspace: gpu.gemv_workspace(workspace_bytes(cols))?,
        stage_blocks,
        ring_bytes: STAGES * stage_blocks * block_bytes,
    })
}

/// Shared memory of the staging kernel: x as Q8 blocks (`stage_q8`).
fn staged_bytes(cols: usize) -> usize {
    cols + cols / 32 * 12
}

/// What the product is followed by, as the kernel's name says it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MmaEpilogue {
    Plain,
    Residual,
    Gated,
    Rope,
}

impl MmaEpilogue {
    fn kernel_infix(self) -> &'static str {
        match self {
            MmaEpilogue::Plain => "",
            MmaEpilogue::Residual => "residual_",
            MmaEpilogue::Gated => "gated_",
            MmaEpilogue::Rope => "rope_",
        }
    }

    /// Spans of rows each output row needs (gate and up rows for SwiGLU).
    fn spans(self) -> usize {
        match self {
            MmaEpilogue::Gated => 2,
            _ => 1,
        }
    }
}

/// One product's two launches, from the arguments `gemv::launch_gemv`
/// checked; `epilogue_args` are the eight RoPE/activation arguments the
/// `gemv_*` kernels take too.
pub(crate) struct MmaLaunch<'a> {
    pub w: &'a DeviceMatrix,
    pub order: SummationOrder,
    pub plan: MmaPlan,
    pub sequences: usize,
    pub kind: MmaEpilogue,
    /// x, the norm weight (or 0) and eps.
    pub input: [Arg; 3],
    /// The post-norm branch, its weight and x's output (or 0s).
    pub pre_add: [Arg; 3],
    pub y: Arg,
    pub out_rows: usize,
    pub y_stride: usize,
    pub epilogue_args: &'a [Arg],
}

impl MmaLaunch<'_> {
    /// Stages x, then multiplies.
    pub(crate) fn run(&self, gpu: &Gpu) -> Result<()> {
        let w = self.w;
        let cols = w.cols();
        let suffix = w.gemv_suffix(self.order);
        let padded = self.sequences.next_multiple_of(WARP_SEQUENCES);
        let sequences = Arg::I32(int(self.sequences, "sequences")?);
        let workspace = Arg::Ptr(self.plan.workspace);
        let cols_arg = Arg::I32(int(cols, "cols")?);
        let mut stage = self.input.to_vec();
        stage.extend([cols_arg, sequences, workspace]);
        stage.extend(self.pre_add);
        let mut product = vec![
            w.quants().into(),
            w.scales().into(),
            workspace,
            self.y,
            Arg::I32(int(self.out_rows, "rows")?),
            cols_arg,
            sequences,
        ];
        product.extend_from_slice(self.epilogue_args);
        product.push(Arg::I32(int(self.y_stride, "output stride")?));
        product.push(Arg::I32(self.plan.stage_blocks as i32));
        let blocks = int(self.out_rows.div_ceil(BLOCK_ROWS), "row tiles")? as u32;
        let spans = self.kind.spans();
        let threads = (32 * spans * padded / WARP_SEQUENCES) as u32;
        let ring = self.plan.ring_bytes as u32;
        let product_kernel = format!("gemv_mma_{}{suffix}", self.kind.kernel_infix());
        // SAFETY: the caller (`gemv::launch_gemv`) checked x (cols values a
        // sequence), y (out_rows at each multiple of the stride a sequence),
        // the norm and branch spans and the RoPE tables against these sizes;
        // the workspace holds `workspace_bytes(cols)` (checked by
        // `plan`), which covers `padded` sequences of cols / 32
        // blocks; the staging's shared memory is `staged_bytes(cols)`, the
        // product's its ring (`plan`: MMA_STAGES stages of `stage_blocks`
        // blocks of `ring_block_bytes`), and
        // the matrix's buffers hold its rows in its type's split layout. Each
        // kernel waits for the one before it before touching what that one
        // writes, and the staging writes the workspace only after the product
        // before it (its previous kernel's predecessor chain) has finished.
        unsafe {
            gpu.launch_dependent(
                &format!("mma_stage_{suffix}"),
                (1, padded as u32),
                STAGE_THREADS,
                staged_bytes(cols) as u32,
                &stage,
            )?;
            gpu.launch_dependent(&product_kernel, (blocks, 1), threads, ring, &product)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_holds_every_sequences_blocks() {
        // 40 bytes per (block of 32, sequence): 32 values, d and aux.
        assert_eq!(workspace_bytes(2048), 64 * 64 * 40);
        assert_eq!(workspace_bytes(32), 64 * 40);
    }

    #[test]
    fn the_ring_takes_stages_of_8_blocks_where_rows_are_long_and_they_fit() {
        // Q8_0's rows padded to 48 bytes, 4 of scales a row, 40 of x a
        // sequence.
        let block = ring_block_bytes(GgmlType::Q8_0, 2, 64);
        assert_eq!(block, 2 * 16 * 52 + 64 * 40);
        assert_eq!(ring_block_bytes(GgmlType::Q4_1, 1, 8), 16 * 20 + 8 * 40);
        assert_eq!(stage_blocks(2048, block, 227 * 1024), Some(8));
        assert_eq!(stage_blocks(2016, block, 227 * 1024), Some(4));
        // An sm_86 card's 99 KiB.
        assert_eq!(stage_blocks(2048, block, 89 * 1024), Some(4));
        assert_eq!(stage_blocks(2048, block, 32 * 1024), None);
    }

    #[test]
    fn only_types_with_mma_kernels_are_supported() {
        assert!(supported(GgmlType::Q4_0, SummationOrder::WholeBlocks));
        assert!(supported(GgmlType::Q8_0, SummationOrder::Lanes));
        assert!(supported(GgmlType::Q4_1, SummationOrder::Lanes));
        // Q4_0 rows summed in lanes (not a multiple of 8 rows) need lane
        // biases the kernels do not stage.
        assert!(!supported(GgmlType::Q4_0, SummationOrder::Lanes));
        assert!(!supported(GgmlType::Q4_K, SummationOrder::SuperBlocks));
        assert!(!supported(GgmlType::F16, SummationOrder::Lanes));
    }
}
