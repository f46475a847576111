//! The CPU backend: the model's stages ([`model`]) and quantized matrix
//! multiplication that reproduces llama.cpp's CPU
//! results bit for bit (ggml-cpu, AVX2 build: checked against ggml's own
//! `ggml_mul_mat` in `golden_tests`) and outruns it: the same activation
//! quantization, per-block scale products, FMAs and summation order, computed in
//! tiles that reuse each weight block across several activation rows, on
//! candle's persistent thread pool.
//!
//! Q4_0 matrices with a multiple of 8 rows follow llama.cpp's repacked kernels
//! (its default on AVX2 CPUs); `QuantizedMatrix::with_repacking(false)`
//! follows `ggml_vec_dot_q4_0_q8_0` instead (llama.cpp's `--no-repack`).
//! K-quant weights run in [`kquants`], with the rounding of llama.cpp's batch
//! kernels at every batch size. Differences left: F16/F32 weights are not handled here; NaN activations may
//! quantize differently; Q4_1's `Σ m·s` term relies on the C compiler fusing
//! `summs += m*s` into an FMA, as GCC (gnu modes) and Clang do with FMA enabled
//! (the llama.cpp build in the golden test does).
//!
//! The kernels are chosen at build time: with AVX2, FMA and F16C enabled (the
//! workspace's `.cargo/config.toml`) `avx2`, otherwise the portable `scalar`
//! path, which performs the same f32 operations in the same order. Within
//! `avx2`, batches take 4-row tiles with AVX-512 VNNI's integer dot products
//! where the CPU has them (checked at run time); the integer sums are exact, so
//! the results are the same bits.

pub(crate) mod activation;
mod activations;
pub(crate) mod attention;
mod blocks;
mod dequantize;
pub(crate) mod f16_vector;
pub(crate) mod gemm;
mod kquants;
pub(crate) mod kv_cache;
pub(crate) mod linear;
mod matrix;
pub mod model;
pub(crate) mod norm;
pub(crate) mod parallel;
mod pool;
mod weight_type;

// Compiled on every target: SIMD builds test their kernels against it.
#[cfg_attr(x86_simd, allow(dead_code))]
mod scalar;

#[cfg(x86_simd)]
mod avx2;

#[cfg(x86_simd)]
use avx2 as backend;
#[cfg(not(x86_simd))]
use scalar as backend;

#[cfg(test)]
pub(crate) mod bench;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod test_values;
#[cfg(test)]
mod tests;
mod tiled_attention;
mod vector_exp;

pub(crate) use dequantize::dequantize;
pub use matrix::QuantizedMatrix;
pub(crate) use weight_type::WeightType;

/// Whether the CPU's own kernels run weights of this type (the GGUF type
/// enum every backend shares); other float and quantized types run through
/// candle's matmul.
pub fn supports(ty: tl_gguf::GgmlType) -> bool {
    WeightType::from_gguf(ty).is_some()
}
#[cfg(test)]
use weight_type::BLOCK_VALUES;
