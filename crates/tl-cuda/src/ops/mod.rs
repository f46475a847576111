//! Typed, checked launch wrappers: each checks its spans against the sizes it
//! passes, then launches one kernel. The only `unsafe` is the launch itself.

pub mod attention;
pub mod blas;
pub mod gemv;
pub mod gemv_tile;
pub mod rows;
pub mod sample;

/// How much kernels ask L2 for ahead of need (`prefetch_l2` in prelude.cuh),
/// before waiting for the previous kernel: 0 nothing; 1 the first data they
/// read after the wait that is likely not in L2 (norm weights, older cache
/// positions); 2 (the default) also the weights of the matrix the step
/// multiplies by next (`gemv_batched`'s `next`). `TL_CUDA_L2_PREFETCH` sets it
/// (a knob for measurements).
pub(crate) fn l2_prefetch_level() -> i32 {
    static LEVEL: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        std::env::var("TL_CUDA_L2_PREFETCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|level| (0..=2).contains(level))
            .unwrap_or(2)
    })
}

/// Blocks of `threads` needed to cover `items`, at least one.
pub(crate) fn blocks_for(items: usize, per_block: usize) -> u32 {
    items.div_ceil(per_block).clamp(1, i32::MAX as usize) as u32
}

/// An int kernel argument, or an error when the size does not fit in one.
pub(crate) fn int(value: usize, what: &str) -> crate::Result<i32> {
    i32::try_from(value).map_err(|_| {
        crate::CudaError::Unsupported(format!("{what} {value} is too large for the kernels"))
    })
}
