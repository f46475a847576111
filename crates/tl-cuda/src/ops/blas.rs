//! The prefill GEMM: f16 weights × f16 activations, f32 accumulation and output,
//! through cuBLAS (tensor cores).

use std::ffi::c_void;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::Gpu;
use crate::ops::gemv::Output;
use crate::ops::int;

/// `y[t] (+)= W · x[t]` for `tokens` rows: W is `[out][in]` f16, x `[tokens][in]`
/// f16, y `[tokens][out]` f32; with `accumulate` the product is added to y
/// (the residual connection comes free).
#[allow(clippy::too_many_arguments)]
pub fn gemm_f16(
    gpu: &Gpu,
    w: Span<'_, u16>,
    x: Span<'_, u16>,
    y: Span<'_, f32>,
    tokens: usize,
    out_features: usize,
    in_features: usize,
    accumulate: bool,
) -> Result<()> {
    let y = Output {
        y,
        stride: out_features,
    };
    gemm_f16_into(gpu, w, x, y, tokens, out_features, in_features, accumulate)
}

/// [`gemm_f16`] writing row t of the product at `y[t·stride..]` (a part of
/// wider rows: the keys of a QKV output, say).
#[allow(clippy::too_many_arguments)]
pub fn gemm_f16_into(
    gpu: &Gpu,
    w: Span<'_, u16>,
    x: Span<'_, u16>,
    output: Output<'_>,
    tokens: usize,
    out_features: usize,
    in_features: usize,
    accumulate: bool,
) -> Result<()> {
    let Output { y, stride } = output;
    w.require(out_features * in_features, "GEMM weights")?;
    x.require(tokens * in_features, "GEMM input")?;
    if stride < out_features {
        return Err(CudaError::Unsupported(format!(
            "a GEMM output stride of {stride} is less than its {out_features} rows"
        )));
    }
    if tokens == 0 {
        return Ok(());
    }
    y.require((tokens - 1) * stride + out_features, "GEMM output")?;
    let (m, n, k) = (
        int(out_features, "rows")?,
        int(tokens, "tokens")?,
        int(in_features, "cols")?,
    );
    let ldc = int(stride, "output stride")?;
    let alpha = 1.0f32;
    let beta = if accumulate { 1.0f32 } else { 0.0 };
    // Column-major view: Yᵀ (out × tokens) = Wᵀᵀ · Xᵀ, where W row-major is a
    // column-major (in × out) matrix used transposed and X row-major is a
    // column-major (in × tokens) matrix; Yᵀ's columns lie `stride` apart.
    let name = || format!("cublas gemm_f16 {out_features}x{in_features} x{tokens}");
    gpu.timed(name, || {
        // SAFETY: the three spans hold the sizes checked above (y: `tokens`
        // columns of `out_features` values, `stride` apart), the handle's stream
        // is our stream, and alpha/beta are live locals read during the call.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *gpu.blas().handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                &alpha as *const f32 as *const c_void,
                w.address() as *const c_void,
                cudaDataType::CUDA_R_16F,
                k,
                x.address() as *const c_void,
                cudaDataType::CUDA_R_16F,
                k,
                &beta as *const f32 as *const c_void,
                y.address() as *mut c_void,
                cudaDataType::CUDA_R_32F,
                ldc,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| CudaError::blas("gemm_f16", e))
    })
}

/// The sizes of a batched matrix product: `batches` products of an `m × k`
/// and a `k × n` matrix.
#[derive(Debug, Clone, Copy)]
pub struct BatchedProduct {
    pub batches: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

/// `c[b] = a[b] · b[b]` for row-major f32 matrices stored one batch after
/// another (a `[batches][m][k]`, b `[batches][k][n]`, c `[batches][m][n]`),
/// summed in f32 (`CUBLAS_COMPUTE_32F`: no TF32 shortcut), for the language's
/// index equations.
pub fn gemm_f32_batched(
    gpu: &Gpu,
    a: Span<'_, f32>,
    b: Span<'_, f32>,
    c: Span<'_, f32>,
    size: BatchedProduct,
) -> Result<()> {
    let BatchedProduct { batches, m, k, n } = size;
    let count = |x: usize, y: usize| {
        (batches.checked_mul(x))
            .and_then(|v| v.checked_mul(y))
            .ok_or_else(|| {
                CudaError::Unsupported(format!("a batched product of {batches}×{x}×{y} values"))
            })
    };
    a.require(count(m, k)?, "batched GEMM a")?;
    b.require(count(k, n)?, "batched GEMM b")?;
    c.require(count(m, n)?, "batched GEMM c")?;
    if batches == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // cuBLAS takes no leading dimension of 0; the product is zeros,
        // which the caller writes itself.
        return Err(CudaError::Unsupported(
            "a batched product over an empty inner dimension".into(),
        ));
    }
    let (rows, cols, inner) = (int(m, "rows")?, int(n, "cols")?, int(k, "inner size")?);
    let batch_count = int(batches, "batches")?;
    let stride = |x: usize, y: usize| (x * y) as i64;
    let (alpha, beta) = (1.0f32, 0.0f32);
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B's rows are Bᵀ's
    // columns (leading dimension n), A's rows Aᵀ's (leading dimension k).
    let name = || format!("cublas gemm_f32_batched {batches}x{m}x{k}x{n}");
    gpu.timed(name, || {
        // SAFETY: the spans hold the sizes checked above (each batch's matrix
        // lies `stride` values after the previous one), the handle's stream is
        // our stream, and alpha/beta are live locals read during the call.
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                *gpu.blas().handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                cols,
                rows,
                inner,
                &alpha as *const f32 as *const c_void,
                b.address() as *const c_void,
                cudaDataType::CUDA_R_32F,
                cols,
                stride(k, n),
                a.address() as *const c_void,
                cudaDataType::CUDA_R_32F,
                inner,
                stride(m, k),
                &beta as *const f32 as *const c_void,
                c.address() as *mut c_void,
                cudaDataType::CUDA_R_32F,
                cols,
                stride(m, n),
                batch_count,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| CudaError::blas("gemm_f32_batched", e))
    })
}
