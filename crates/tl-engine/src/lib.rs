//! The TensorLogic engine: the loaded-model bundle (`loaded`), one step API
//! over the CPU and CUDA backends (`backend`; the model schedule and the
//! backends themselves are private), sessions, chat templates, sampling,
//! constrained decoding (`constraint`), tool calls in a model's output
//! (`tool_calls`), the generation loop, embeddings (`embedding`),
//! perplexity, host memory checks (`memory`), the arithmetic programs build
//! on (`ops`), and random-weight models of real shapes for benchmarks
//! (`synth`).

pub mod backend;
pub mod chat_template;
pub mod constraint;
mod cpu;
mod cuda;
pub mod embedding;
pub mod error;
pub mod generate;
pub mod loaded;
pub mod memory;
mod model;
pub mod ops;
pub mod perplexity;
pub mod quantize;
pub mod sampler;
pub mod session;
pub mod stop_strings;
pub mod synth;
pub mod tool_calls;

pub use backend::{
    Backend, DeviceChoice, KernelTime, KvHalf, Picked, SequenceCache, SequenceStep, Wanted,
};
pub use error::{Error, Result};
pub use generate::{Generation, GenerationConfig, GenerationStats, Generator, StopReason};

pub use loaded::{BeyondTraining, LoadedModel, ModelFile};
pub use model::ModelConfig;

/// The chat template an architecture uses for files that carry none (Jinja
/// source), if it has one.
pub fn architecture_template(architecture: &str) -> Option<&'static str> {
    model::arch::find(architecture).and_then(|a| a.chat_template)
}
pub use session::Session;
/// The settings a GPU is opened with, for whoever calls [`Backend::load`].
pub use tl_cuda::{options as gpu_options, GpuOptions};
