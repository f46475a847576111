//! The TensorLogic engine: model loading from GGUF, the CPU forward pass, the KV
//! cache, chat templates, sampling, the generation loop, and random-weight
//! models of real shapes for benchmarks (`synth`).

pub mod backend;
pub mod chat_template;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod generate;
pub mod model;
pub mod perplexity;
pub mod sampler;
pub mod session;
pub mod stop_strings;
pub mod synth;

pub use backend::{Backend, DeviceChoice, KernelTime, Picked, SequenceCache, SequenceStep, Wanted};
pub use error::{Error, Result};
pub use generate::{Generation, GenerationConfig, GenerationStats, Generator, StopReason};

pub use session::Session;
/// The settings a GPU is opened with, for whoever calls [`Backend::load`].
pub use tl_cuda::{options as gpu_options, GpuOptions};
