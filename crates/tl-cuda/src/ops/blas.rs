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
