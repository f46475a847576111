//! Batched products on tensor cores (gemv_mma.cu): the decode of many
//! sequences and a short prompt's rows, for the weight types and summation
//! orders that have int8 MMA kernels. Each sequence's numbers equal those of
//! a lone GEMV; a product takes two launches, one staging every sequence's x
//! into the GPU's workspace, one multiplying.

use crate::error::Result;
use crate::gpu::{Arg, Gpu, DEFAULT_SHARED_LIMIT};
use crate::matrix::{kernel_suffix, DeviceMatrix, GgmlType, SummationOrder};
use crate::ops::gemv::{staged_bytes, STATIC_SHARED};
use crate::ops::int;
use crate::options::MAX_TILE_THREADS;

/// Sequences one product takes at most (`MMA_SEQS` in gemv_mma.cu).
pub const MAX_SEQUENCES: usize = 64;

/// Sequences a warp takes (`MMA_WARP_SEQS`): launches pad to a multiple.
const WARP_SEQUENCES: usize = 8;

/// Output rows a block takes (`MMA_ROWS`).
const BLOCK_ROWS: usize = 16;

/// Stages of the product's ring (`MMA_STAGES`).
const STAGES: usize = 4;

/// The most blocks of 32 values a stage holds (`MMA_STAGE_BLOCKS`).
const MAX_STAGE_BLOCKS: usize = 8;

/// The most copies a thread makes of each block (`MMA_COPIES`).
const MAX_COPIES: usize = 3;

/// Bytes a row of a block of weights takes in the ring (`ring_row_bytes`:
/// Q8_0's 32 padded to 48, so that the fragments' reads miss bank conflicts).
fn ring_row_bytes(weight_type: GgmlType) -> usize {
    if weight_type == GgmlType::Q8_0 {
        48
    } else {
        16
    }
}

/// Shared memory of a block of the ring: the quants of the block's rows and
/// their 4-byte scale words, then x of every sequence (40 bytes each).
fn ring_block_bytes(weight_type: GgmlType, spans: usize, padded: usize) -> usize {
    spans * BLOCK_ROWS * (ring_row_bytes(weight_type) + 4) + padded * 40
}

/// The 16- and 4-byte copies of one block of the ring (`mma_copies`): the
/// rows' quants in 16-byte chunks, a scale word a row, then x's values, d
/// and aux in 16-byte chunks.
fn ring_block_copies(weight_type: GgmlType, spans: usize, padded: usize) -> usize {
    let rows = spans * BLOCK_ROWS;
    let chunks = if weight_type == GgmlType::Q8_0 { 2 } else { 1 };
    rows * chunks + rows + padded * 2 + padded / 2
}

/// Threads of a product for `spans` spans of rows and `padded` sequences: a
/// warp per span and 8 sequences.
fn product_threads(spans: usize, padded: usize) -> usize {
    32 * spans * padded / WARP_SEQUENCES
}

/// Blocks of 32 values a stage of the ring holds: 8 (`MAX_STAGE_BLOCKS`)
/// where a row has blocks for 8 stages of them and the ring fits in
/// `limit` bytes, else 4, so that short rows still run a pipeline (measured
/// on an H100: 8 gave a 1.1B model 16-21% more at 16 and 64 streams and
/// pp32; 4 gave a 135M model's rows of 576 and 1,536 values 15% more at
/// pp32). `None` when not even 4 fit.
fn stage_blocks(cols: usize, block_bytes: usize, limit: usize) -> Option<usize> {
    [MAX_STAGE_BLOCKS, 4]
        .into_iter()
        .filter(|&n| n == 4 || cols / 32 >= 8 * n)
        .find(|&n| STAGES * n * block_bytes <= limit)
}

/// Static shared memory of the product kernels (the finished sums, 8.5 KiB
/// for the gated products' two spans), with room to spare.
const PRODUCT_STATIC_SHARED: usize = 10 * 1024;

/// The fewest sequences that take the tensor cores. Each warp walks all of
/// a row's blocks in order, so a product costs about the same from 1 to 64
/// sequences; the CUDA-core tiles (the same bits) re-read the weights from
/// L2 once per sequence and stay faster below this (measured on an H100 with
/// a 1.1B Q4_0 model: 3,042 against 1,756 tok/s at 4 streams, 2,869 against
/// 3,059 at 8, 3,623 against 4,667 at 16).
pub const MIN_SEQUENCES: usize = 16;

/// Workspace bytes for products of rows of up to `cols` values: 40 bytes
/// per sequence and block of 32 (`MmaWorkspace` in gemv_mma.cu). Reserve
/// them with [`Gpu::reserve_gemv_workspace`].
pub fn workspace_bytes(cols: usize) -> usize {
    cols.div_ceil(32) * MAX_SEQUENCES * 40
}

/// The weight types and summation orders with MMA kernels.
const KINDS: [(GgmlType, SummationOrder); 3] = [
    (GgmlType::Q4_0, SummationOrder::WholeBlocks),
    (GgmlType::Q4_1, SummationOrder::Lanes),
    (GgmlType::Q8_0, SummationOrder::Lanes),
];

/// Whether rows of `weight_type` summed in `order` have MMA kernels.
pub fn supported(weight_type: GgmlType, order: SummationOrder) -> bool {
    KINDS.contains(&(weight_type, order))
}

/// Whether the GEMV unit whose kernels end in `suffix` (the type's, then
/// the order's) also holds the MMA kernels (see `compile`).
pub(crate) fn unit_has_kernels(suffix: &str) -> bool {
    KINDS.iter().any(|&(weight_type, order)| {
        format!("{}{}", kernel_suffix(weight_type), order.kernel_suffix()) == suffix
    })
}

/// How a product runs on the tensor cores: its batch, its epilogue, and
/// the workspace and ring it takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MmaPlan {
    workspace: u64,
    sequences: usize,
    /// `sequences` rounded up to whole warps.
    padded: usize,
    kind: MmaEpilogue,
    stage_blocks: usize,
    ring_bytes: usize,
}

/// The plan for a product of `w` in `order` for `sequences` vectors followed
/// by `kind`, when it takes the tensor cores: the option is on, the type and
/// order have kernels, the batch is in range, the staged x and the ring fit
/// in shared memory and the workspace was reserved large enough.
pub(crate) fn plan(
    gpu: &Gpu,
    w: &DeviceMatrix,
    order: SummationOrder,
    sequences: usize,
    kind: MmaEpilogue,
) -> Option<MmaPlan> {
    let wanted = gpu.options().tensor_core_gemv
        && supported(w.weight_type(), order)
        && (MIN_SEQUENCES..=MAX_SEQUENCES).contains(&sequences);
    let cols = w.cols();
    let limit = gpu.info().shared_per_block_optin.max(DEFAULT_SHARED_LIMIT);
    if !wanted || staged_bytes(w.weight_type(), cols) + STATIC_SHARED > limit {
        return None;
    }
    let padded = sequences.next_multiple_of(WARP_SEQUENCES);
    let spans = kind.spans();
    // Each thread makes at most MAX_COPIES copies of a block (true of every
    // batch in range: the tests).
    if ring_block_copies(w.weight_type(), spans, padded)
        > MAX_COPIES * product_threads(spans, padded)
    {
        return None;
    }
    let block_bytes = ring_block_bytes(w.weight_type(), spans, padded);
    let stage_blocks = stage_blocks(cols, block_bytes, limit - PRODUCT_STATIC_SHARED)?;
    Some(MmaPlan {
        workspace: gpu.gemv_workspace(workspace_bytes(cols))?,
        sequences,
        padded,
        kind,
        stage_blocks,
        ring_bytes: STAGES * stage_blocks * block_bytes,
    })
}

/// What the product is followed by, as the kernel's name says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    /// Spans of rows each output row needs (gate and up rows when gated).
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
    ///
    /// # Safety
    /// The arguments are those `gemv::launch_gemv` checked for this plan's
    /// batch: x, y, the norm weight, the post-norm branch and the RoPE or
    /// GELU tables hold what the kernels read for `plan.sequences`
    /// sequences, and any position is below the caches' capacity.
    pub(crate) unsafe fn run(&self, gpu: &Gpu) -> Result<()> {
        let (w, plan) = (self.w, self.plan);
        let cols = w.cols();
        let suffix = w.gemv_suffix(self.order);
        let sequences = Arg::I32(int(plan.sequences, "sequences")?);
        let workspace = Arg::Ptr(plan.workspace);
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
        product.push(Arg::I32(int(plan.stage_blocks, "stage blocks")?));
        let blocks = int(self.out_rows.div_ceil(BLOCK_ROWS), "row tiles")? as u32;
        let threads = product_threads(plan.kind.spans(), plan.padded) as u32;
        let kernel = format!("gemv_mma_{}{suffix}", plan.kind.kernel_infix());
        // SAFETY: the caller's contract covers x, y, the norm weight, the
        // branch and the tables. The workspace holds `workspace_bytes(cols)`,
        // which covers MAX_SEQUENCES >= `plan.padded` sequences of cols / 32
        // blocks (`plan`); the staging grid is `plan.padded` blocks of
        // MAX_TILE_THREADS threads with `staged_bytes` of shared memory; the
        // product's ring is `plan.ring_bytes` (MMA_STAGES stages of
        // `stage_blocks` <= MAX_STAGE_BLOCKS blocks of `ring_block_bytes`)
        // and its threads, a warp per span and 8 sequences, make at most
        // MAX_COPIES copies a block each (both checked by the tests below).
        // The matrix's buffers hold its rows in its type's split layout, the
        // scales with the 4 bytes of padding the scale words may reach. Each
        // kernel waits for the one before it before touching what that one
        // writes, so the staging writes the workspace only after the product
        // before it has finished.
        unsafe {
            gpu.launch_dependent(
                &format!("mma_stage_{suffix}"),
                (1, plan.padded as u32),
                MAX_TILE_THREADS as u32,
                staged_bytes(w.weight_type(), cols) as u32,
                &stage,
            )?;
            gpu.launch_dependent(
                &kernel,
                (blocks, 1),
                threads,
                plan.ring_bytes as u32,
                &product,
            )
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
    fn every_batch_takes_at_most_three_copies_a_thread() {
        for weight_type in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
            for spans in [1, 2] {
                for sequences in MIN_SEQUENCES..=MAX_SEQUENCES {
                    let padded = sequences.next_multiple_of(WARP_SEQUENCES);
                    let copies = ring_block_copies(weight_type, spans, padded);
                    let threads = product_threads(spans, padded);
                    assert!(
                        copies <= MAX_COPIES * threads,
                        "{weight_type:?}, {spans} spans, {sequences} sequences: {copies} copies for {threads} threads"
                    );
                }
            }
        }
    }

    /// The host's constants are the kernels' `#define`s.
    #[test]
    fn the_constants_match_the_kernels() {
        let source = include_str!("../../kernels/gemv_mma.cu");
        let define = |name: &str| crate::ops::kernel_define(source, "gemv_mma.cu", name);
        assert_eq!(define("MMA_SEQS"), MAX_SEQUENCES);
        assert_eq!(define("MMA_WARP_SEQS"), WARP_SEQUENCES);
        assert_eq!(define("MMA_ROWS"), BLOCK_ROWS);
        assert_eq!(define("MMA_STAGES"), STAGES);
        assert_eq!(define("MMA_STAGE_BLOCKS"), MAX_STAGE_BLOCKS);
        assert_eq!(define("MMA_COPIES"), MAX_COPIES);
        assert_eq!(
            MAX_TILE_THREADS, 512,
            "the staging's threads (GEMV_MAX_THREADS)"
        );
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
