//! Errors of the CUDA backend, each worded for the person at the terminal: what
//! is missing or what failed, and what to do about it.

use thiserror::Error;

/// Result of a CUDA backend operation.
pub type Result<T> = std::result::Result<T, CudaError>;

/// What can go wrong on the GPU side.
#[derive(Debug, Error)]
pub enum CudaError {
    /// A shared library the backend loads at run time is not on this machine.
    #[error("the CUDA library {library} was not found ({hint})")]
    LibraryMissing {
        library: &'static str,
        hint: &'static str,
    },
    /// The driver loaded but reports no GPU.
    #[error("no CUDA GPU was found")]
    NoDevice,
    /// A driver call failed.
    #[error("CUDA driver error in {during}: {message}")]
    Driver { during: String, message: String },
    /// NVRTC rejected the kernel sources (a bug in this program; the log says where).
    #[error("compiling the CUDA kernels for {arch} failed:\n{log}")]
    Compile { arch: String, log: String },
    /// A cuBLAS call failed.
    #[error("cuBLAS error in {during}: {message}")]
    Blas { during: String, message: String },
    /// The model or request does not fit what the kernels support.
    #[error("{0}")]
    Unsupported(String),
    /// A [`GpuOptions`](crate::GpuOptions) value outside its range.
    #[error("{0}")]
    InvalidOption(String),
}

impl CudaError {
    /// Wraps a driver error with what was being done.
    pub fn driver(during: impl Into<String>, error: impl std::fmt::Debug) -> Self {
        CudaError::Driver {
            during: during.into(),
            message: format!("{error:?}"),
        }
    }

    /// Wraps a cuBLAS error with what was being done.
    pub fn blas(during: impl Into<String>, error: impl std::fmt::Debug) -> Self {
        CudaError::Blas {
            during: during.into(),
            message: format!("{error:?}"),
        }
    }
}
