//! Matrix × vector for one token, with the step before or after it folded in.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::matrix::{DeviceMatrix, WeightType};
use crate::ops::attention::{Heads, LayerCache};
use crate::ops::{blocks_for, int};

/// Warps (rows in flight) per block: 16 unless `TL_GEMV_WARPS` (2 to 16,
/// even; `GEMV_MAX_THREADS` in gemv.cu is 16 warps) says otherwise (a tuning
/// knob for measurements).
fn warps_per_block() -> usize {
    static WARPS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WARPS.get_or_init(|| {
        std::env::var("TL_GEMV_WARPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| (2..=16).contains(&n) && n % 2 == 0)
            .unwrap_or(16)
    })
}

/// Shared memory the kernels may use without raising the launch limit.
const SHARED_LIMIT: usize = 48 * 1024;

/// Bytes of shared memory x takes when staged: Q8 blocks (values, then scale,
/// scaled sum and integer sum per block) for quantized weights, f32 for float
/// weights.
fn staged_bytes(weight_type: WeightType, cols: usize) -> usize {
    if weight_type.is_quantized() {
        cols + cols / 32 * 12
    } else {
        cols * 4
    }
}

/// The most GEMV blocks per multiprocessor: 1 unless `TL_GEMV_BLOCKS_PER_SM`
/// says otherwise (a tuning knob for measurements).
fn blocks_per_multiprocessor() -> usize {
    static BLOCKS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BLOCKS.get_or_init(|| {
        std::env::var("TL_GEMV_BLOCKS_PER_SM")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1)
    })
}

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
    /// The fused QKV projection of one token: `y = W·rmsnorm(x)·weight`, then
    /// RoPE at `*position` on the query rows (left in y) and the key rows, and
    /// the keys and values written to the cache at `*position` (their rows of
    /// y are left unwritten). As `rope_store_kv` for one row.
    NormRope {
        weight: Span<'a, f32>,
        eps: f32,
        heads: Heads,
        cos_sin: Span<'a, f32>,
        position: Span<'a, i32>,
        cache: LayerCache<'a>,
    },
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
        Epilogue::NormRope { weight, eps, .. } => {
            (format!("gemv_norm_rope_{suffix}"), Some((weight, eps)))
        }
    };
    let mut args = vec![w.quants().into(), w.scales().into(), x.into()];
    let shared = staged_bytes(w.weight_type(), cols);
    if shared > SHARED_LIMIT {
        return Err(CudaError::Unsupported(format!(
            "a {:?} matrix with rows of {cols} values needs {shared} bytes of shared memory, more than the kernels' {SHARED_LIMIT}",
            w.weight_type()
        )));
    }
    if let Some((weight, eps)) = norm {
        weight.require(cols, "norm weight")?;
        args.push(weight.into());
        args.push(Arg::F32(eps));
    }
    // Each block stages x once for many rows; a few blocks per multiprocessor suffice.
    let warps = warps_per_block();
    let cap = gpu.info().multiprocessors * blocks_per_multiprocessor();
    let blocks = blocks_for(out_rows, warps).min(cap.max(1) as u32);
    args.extend([
        y.into(),
        Arg::I32(int(out_rows, "rows")?),
        Arg::I32(int(cols, "cols")?),
    ]);
    if let Epilogue::NormRope {
        heads,
        cos_sin,
        position,
        cache,
        ..
    } = epilogue
    {
        args.extend(rope_args(heads, cos_sin, position, cache, rows)?);
    }
    // SAFETY: the argument list matches gemv.cu's signatures for this variant;
    // x holds cols values, y out_rows, the norm weight cols, and the matrix's
    // buffers hold rows × cols values in its type's split layout (checked on
    // upload), so every access is inside the spans. With RoPE the table and
    // caches hold `capacity` positions and the caller keeps *position below it
    // (the host checks room before every step).
    // The kernel waits for the previous one before its first dependent access.
    unsafe {
        gpu.launch_dependent(
            &kernel,
            (blocks, 1),
            (warps * 32) as u32,
            shared as u32,
            &args,
        )
    }
}

/// The RoPE/cache arguments of `gemv_norm_rope_*`, after checking that the
/// matrix is the fused QKV projection of these heads.
fn rope_args(
    heads: Heads,
    cos_sin: Span<'_, f32>,
    position: Span<'_, i32>,
    cache: LayerCache<'_>,
    rows: usize,
) -> Result<Vec<Arg>> {
    heads.check()?;
    cache.check(&heads)?;
    let (q_width, kv_width) = (heads.q_width(), heads.kv_width());
    if rows != q_width + 2 * kv_width {
        return Err(CudaError::Unsupported(format!(
            "a QKV projection with RoPE needs {} rows; this matrix has {rows}",
            q_width + 2 * kv_width
        )));
    }
    cos_sin.require(cache.capacity * heads.head_dim, "rope table")?;
    position.require(1, "position")?;
    Ok(vec![
        cos_sin.into(),
        position.into(),
        Arg::I32(int(q_width, "query width")?),
        Arg::I32(int(kv_width, "key/value width")?),
        Arg::I32(int(heads.head_dim, "head dim")?),
        Arg::I32(int(cache.capacity, "capacity")?),
        cache.keys.into(),
        cache.values.into(),
    ])
}
