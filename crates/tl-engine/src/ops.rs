//! The engine's arithmetic for programs that build a transformer themselves
//! (the language's `rms_norm`, `rope`, `attention`, `silu`, `linear` and
//! `model.tensor`): each is the function a model pass on the CPU computes
//! with, so a program written with them gets the engine's numbers bit for bit.
//! [`matmul_f32`] is the CPU's dense f32 product, for the language's
//! contractions.
//! [`GpuOps`] are the same ops on the GPU a model was loaded on
//! ([`Backend::gpu_ops`](crate::Backend::gpu_ops)), over tensors that stay there.
//! Everything else in the engine's model code stays private to it.

pub use crate::cpu::activation::{silu_in_place, swiglu_in_place};
pub use crate::cpu::attention::attend_head;
pub use crate::cpu::gemm::{matmul_f32, MatmulShape};
pub use crate::cpu::linear::Linear;
pub use crate::cpu::norm::rms_norm;
pub use crate::cuda::program::{Elementwise, GpuMatrix, GpuOps, GpuTensor, HostValues};
pub use crate::model::rope::{RopeStyle, RopeTable};
pub use crate::model::weights::WeightLoader;

/// The CPU's quantized matrix kernels under a linear layer, for tests that
/// hold other backends to their bits.
pub use crate::cpu::QuantizedMatrix;
