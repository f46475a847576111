//! Matrix × vector for one token, with the step before or after it folded in.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::matrix::DeviceMatrix;
use crate::ops::{blocks_for, int};

/// Warps (rows in flight) per block; matches `GEMV_WARPS` in gemv.cu.
const WARPS: usize = 8;

/// The largest `cols` the normalising variants accept: x is staged in 48 KB of
/// shared memory.
pub const MAX_NORM_COLS: usize = 12 * 1024;

/// What the product is combined with.
#[derive(Debug, Clone, Copy)]
pub enum Epilogue<'a> {
    /// `y = W·x`
    Plain,
    /// `y += W·x`
    Residual,
    /// `y = W·rmsnorm(x)·weight`
    Norm { weight: Span<'a, f32>, eps: f32 },
    /// `y = silu(W_top·n) · (W_bottom·n)` with `n = rmsnorm(x)·weight`; W stacks
    /// the gate rows over the up rows and y has half as many rows as W.
    NormSwiglu { weight: Span<'a, f32>, eps: f32 },
}

/// Runs `y (op)= W·x` for one vector `x` of `W.cols()` values.
pub fn gemv(
    gpu: &Gpu,
    w: &DeviceMatrix,
    x: Span<'_, f32>,
    y: Span<'_, f32>,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    let (rows, cols) = (w.rows(), w.cols());
    x.require(cols, "gemv input")?;
    let out_rows = match epilogue {
        Epilogue::NormSwiglu { .. } => rows / 2,
        _ => rows,
    };
    y.require(out_rows, "gemv output")?;
    let suffix = w.weight_type().kernel_suffix();
    let (kernel, norm) = match epilogue {
        Epilogue::Plain => (format!("gemv_{suffix}"), None),
        Epilogue::Residual => (format!("gemv_residual_{suffix}"), None),
        Epilogue::Norm { weight, eps } => (format!("gemv_norm_{suffix}"), Some((weight, eps))),
        Epilogue::NormSwiglu { weight, eps } => {
            (format!("gemv_norm_swiglu_{suffix}"), Some((weight, eps)))
        }
    };
    let mut args = vec![w.quants().into(), w.scales().into(), x.into()];
    let mut shared = 0;
    let mut blocks = blocks_for(out_rows, WARPS);
    if let Some((weight, eps)) = norm {
        weight.require(cols, "norm weight")?;
        if cols > MAX_NORM_COLS {
            return Err(CudaError::Unsupported(format!(
                "a fused norm over {cols} values exceeds the kernels' {MAX_NORM_COLS}"
            )));
        }
        args.push(weight.into());
        args.push(Arg::F32(eps));
        shared = (cols * 4) as u32;
        // Each block normalises x once; a few blocks per multiprocessor suffice.
        blocks = blocks.min((gpu.info().multiprocessors * 8).max(1) as u32);
    }
    args.extend([
        y.into(),
        Arg::I32(int(out_rows, "rows")?),
        Arg::I32(int(cols, "cols")?),
    ]);
    // SAFETY: the argument list matches gemv.cu's signatures for this variant;
    // x holds cols values, y out_rows, the norm weight cols, and the matrix's
    // buffers hold rows × cols values in its type's split layout (checked on
    // upload), so every access is inside the spans.
    unsafe { gpu.launch(&kernel, (blocks, 1), (WARPS * 32) as u32, shared, &args) }
}
