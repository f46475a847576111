//! Typed, checked launch wrappers: each checks its spans against the sizes it
//! passes, then launches one kernel. The only `unsafe` is the launch itself.

pub mod attention;
pub mod blas;
pub mod gemv;
pub mod gemv_mma;
pub mod gemv_tile;
pub mod program;
pub mod rows;
pub mod sample;

/// The kernels' `l2_prefetch` argument: [`GpuOptions::l2_prefetch`].
///
/// [`GpuOptions::l2_prefetch`]: crate::GpuOptions::l2_prefetch
pub(crate) fn l2_prefetch_level(gpu: &crate::Gpu) -> i32 {
    i32::from(gpu.options().l2_prefetch)
}

/// Blocks of `threads` needed to cover `items`, at least one.
pub(crate) fn blocks_for(items: usize, per_block: usize) -> u32 {
    items.div_ceil(per_block).clamp(1, i32::MAX as usize) as u32
}

/// Threads per block of the grid-stride kernels.
pub(crate) const STRIDE_THREADS: u32 = 256;

/// Grid size for grid-stride loops over `n` items, blocks of
/// [`STRIDE_THREADS`]: enough to fill the GPU, no more.
pub(crate) fn stride_blocks(gpu: &crate::Gpu, n: usize) -> u32 {
    blocks_for(n, STRIDE_THREADS as usize).min((gpu.info().multiprocessors * 16) as u32)
}

/// The value of `#define NAME VALUE` in kernel source `file` (`source`), for
/// the tests that check the host's constants against the kernels'.
#[cfg(test)]
pub(crate) fn kernel_define(source: &str, file: &str, name: &str) -> usize {
    let line = source
        .lines()
        .find(|l| l.starts_with(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("no #define {name} in {file}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// An int kernel argument, or an error when the size does not fit in one.
pub(crate) fn int(value: usize, what: &str) -> crate::Result<i32> {
    i32::try_from(value).map_err(|_| {
        crate::CudaError::Unsupported(format!("{what} {value} is too large for the kernels"))
    })
}
