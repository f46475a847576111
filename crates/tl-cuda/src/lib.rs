//! The GPU side of TensorLogic: CUDA C kernels embedded in the binary and compiled
//! by NVRTC at run time (cached on disk), device buffers, typed launch wrappers,
//! cuBLAS GEMMs and CUDA graphs. Everything is loaded dynamically, so a binary
//! built here runs on machines with no CUDA at all and reports clearly what is
//! missing when a GPU is asked for.

pub mod compile;
pub mod error;
pub mod libraries;
pub mod options;

pub use error::{CudaError, Result};
pub mod buffer;
pub mod gpu;

pub use buffer::{Buffer, Span};
pub use gpu::{DeviceInfo, Gpu};
pub use options::{GpuOptions, KernelDefine};
pub mod graph;
pub mod matrix;
pub mod ops;
pub mod profile;

pub use graph::Graph;
pub use matrix::{device_bytes, supports, DeviceMatrix, GgmlType};
pub use profile::KernelTime;
