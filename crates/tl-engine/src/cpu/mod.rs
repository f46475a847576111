//! Quantized matrix multiplication on the CPU that follows llama.cpp's CPU
//! arithmetic (ggml-cpu, AVX2 build) closely enough to reproduce its greedy
//! tokens: the same activation quantization, the same per-block scale products,
//! FMAs and summation order; and fast enough to match it — tiles that reuse each
//! weight block across several activation rows, split over rayon's pool.
//!
//! Known differences from llama.cpp: F16/F32 weights are not handled here; NaN
//! inputs may quantize differently; and Q4_1's `Σ m·s` term assumes the C compiler
//! contracted `summs += m*s` into an FMA (GCC in its default gnu mode and Clang do
//! when FMA is enabled).
//!
//! The SIMD path is chosen at build time: with AVX2, FMA and F16C enabled (see the
//! workspace's `.cargo/config.toml`) `avx2`, otherwise the portable `scalar` path,
//! which performs the same f32 operations in the same order.

mod activations;
mod blocks;
mod matrix;
mod parallel;
mod weight_type;

// Compiled on every target: SIMD builds test their kernels against it.
#[cfg_attr(
    all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ),
    allow(dead_code)
)]
mod scalar;

#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
))]
mod avx2;

#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
))]
use avx2 as backend;
#[cfg(not(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
)))]
use scalar as backend;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use matrix::QuantizedMatrix;
pub use weight_type::{WeightType, BLOCK_VALUES};
