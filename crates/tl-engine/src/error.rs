//! The engine's error type: one enum for everything the engine can report, each
//! variant carrying enough context (op, shapes, names) to act on without a debugger.

use thiserror::Error;

/// Errors raised by the engine.
#[derive(Debug, Error)]
pub enum Error {
    /// The GGUF file could not be read or is malformed.
    #[error(transparent)]
    Gguf(#[from] tl_gguf::Error),

    /// The tokenizer could not be built or used.
    #[error(transparent)]
    Tokenizer(#[from] tl_tokenizer::Error),

    /// A tensor operation failed inside candle.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),

    /// The model's metadata or tensors do not describe a model we can run.
    #[error("unsupported model: {0}")]
    Unsupported(String),

    /// The model file lacks something the architecture needs, or has it in the
    /// wrong shape.
    #[error("invalid model: {0}")]
    InvalidModel(String),

    /// The chat template failed to parse or render.
    #[error("chat template: {0}")]
    Template(String),

    /// The GPU backend failed or cannot run this model.
    #[error(transparent)]
    Cuda(#[from] tl_cuda::CudaError),

    /// What a model or a request needs is more memory than there is (or than
    /// sizes can express): refused before allocating, or an allocation failed.
    #[error("not enough memory: {0}")]
    Memory(String),

    /// A grammar or JSON schema for constrained decoding is invalid, too
    /// large or allows nothing, or a constrained step failed.
    #[error("{0}")]
    Grammar(String),

    /// A request asked for something impossible (e.g. more tokens than the context).
    #[error("{0}")]
    InvalidRequest(String),
}

/// Result alias for the engine.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether this says the machine has no usable CUDA (no driver, library
    /// or GPU): the expected case on most machines, where `auto` quietly
    /// uses the CPU and GPU tests skip.
    pub fn means_no_gpu(&self) -> bool {
        matches!(
            self,
            Error::Cuda(tl_cuda::CudaError::LibraryMissing { .. } | tl_cuda::CudaError::NoDevice)
        )
    }
}
