//! Where a model runs: the CPU (`Model`) or an NVIDIA GPU (`CudaModel`), chosen
//! at load time. Everything above this (sessions, generation, the commands)
//! talks to a [`Backend`] and a [`SequenceCache`] and does not care which.

use std::sync::Arc;

pub use tl_cuda::KernelTime;
use tl_gguf::GgufFile;

use crate::cuda::{CudaCache, CudaModel};
use crate::error::{Error, Result};
use crate::model::{KvCache, Logits, Model, ModelConfig};
use crate::sampler::{argmax, SamplingParams};

/// The device a user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The CPU.
    Cpu,
    /// The first CUDA GPU; an error if there is none.
    Cuda,
    /// The first CUDA GPU when one is usable, else the CPU.
    #[default]
    Auto,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" | "gpu" => Ok(DeviceChoice::Cuda),
            "auto" => Ok(DeviceChoice::Auto),
            other => Err(format!(
                "unknown device '{other}' (expected cpu, cuda, gpu or auto)"
            )),
        }
    }
}

/// A loaded model on its device. One exists per loaded model, so the size
/// difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    Cpu(Model),
    Cuda(CudaModel),
}

/// One sequence's KV cache, on the model's device.
pub enum SequenceCache {
    Cpu(KvCache),
    Cuda(Box<CudaCache>),
}

/// A loaded backend and, when `auto` fell back to the CPU, why.
pub struct Loaded {
    pub backend: Backend,
    pub fallback: Option<Fallback>,
}

/// Why `auto` chose the CPU.
pub struct Fallback {
    /// The error the GPU path gave.
    pub reason: String,
    /// True when this machine simply has no usable CUDA (no driver, library or
    /// GPU): the expected case on most machines, not worth a warning.
    pub no_gpu: bool,
}

impl Backend {
    /// Loads the model in `file` on the chosen device, for caches of up to
    /// `max_positions`; a GPU is opened with `gpu_options`.
    pub fn load(
        file: &GgufFile,
        max_positions: usize,
        choice: DeviceChoice,
        gpu_options: &tl_cuda::GpuOptions,
    ) -> Result<Loaded> {
        let cuda = || -> Result<Backend> {
            let gpu = Arc::new(tl_cuda::Gpu::open(0, gpu_options.clone())?);
            Ok(Backend::Cuda(CudaModel::load(file, max_positions, gpu)?))
        };
        let cpu = || -> Result<Backend> { Ok(Backend::Cpu(Model::load(file, max_positions)?)) };
        match choice {
            DeviceChoice::Cpu => Ok(Loaded {
                backend: cpu()?,
                fallback: None,
            }),
            DeviceChoice::Cuda => Ok(Loaded {
                backend: cuda()?,
                fallback: None,
            }),
            DeviceChoice::Auto => match cuda() {
                Ok(backend) => Ok(Loaded {
                    backend,
                    fallback: None,
                }),
                Err(e) => {
                    let no_gpu = matches!(
                        e,
                        Error::Cuda(
                            tl_cuda::CudaError::LibraryMissing { .. }
                                | tl_cuda::CudaError::NoDevice
                        )
                    );
                    Ok(Loaded {
                        backend: cpu()?,
                        fallback: Some(Fallback {
                            reason: e.to_string(),
                            no_gpu,
                        }),
                    })
                }
            },
        }
    }

    pub fn config(&self) -> &ModelConfig {
        match self {
            Backend::Cpu(m) => m.config(),
            Backend::Cuda(m) => m.config(),
        }
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        match self {
            Backend::Cpu(m) => m.weight_bytes(),
            Backend::Cuda(m) => m.weight_bytes(),
        }
    }

    /// Bytes of f16 weight copies kept on the GPU for prompt GEMMs (0 on the
    /// CPU, or when the GPU had no room for them).
    pub fn f16_copy_bytes(&self) -> usize {
        match self {
            Backend::Cpu(_) => 0,
            Backend::Cuda(m) => m.f16_copy_bytes(),
        }
    }

    pub fn max_positions(&self) -> usize {
        match self {
            Backend::Cpu(m) => m.max_positions(),
            Backend::Cuda(m) => m.max_positions(),
        }
    }

    /// "cpu", or "cuda (<GPU name>)".
    pub fn device_name(&self) -> String {
        match self {
            Backend::Cpu(_) => "cpu".into(),
            Backend::Cuda(m) => format!("cuda ({})", m.gpu().info().name),
        }
    }

    /// The CPU model, when that is where this runs.
    pub fn cpu_model(&self) -> Option<&Model> {
        match self {
            Backend::Cpu(m) => Some(m),
            Backend::Cuda(_) => None,
        }
    }

    /// Host-device synchronisations so far (0 on the CPU).
    pub fn syncs(&self) -> u64 {
        match self {
            Backend::Cpu(_) => 0,
            Backend::Cuda(m) => m.gpu().syncs(),
        }
    }

    /// Device memory in use, when on a GPU.
    pub fn device_memory_used(&self) -> Option<usize> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Cuda(m) => m.gpu().memory_used().ok(),
        }
    }

    /// Starts timing each GPU kernel on its own (nothing on the CPU); see
    /// [`tl_cuda::profile`]. Decode steps run without graph replay meanwhile.
    pub fn start_profile(&self) {
        if let Backend::Cuda(m) = self {
            m.gpu().start_profile();
        }
    }

    /// The kernel times since `start_profile`, longest first (empty on the CPU).
    pub fn finish_profile(&self) -> Vec<KernelTime> {
        match self {
            Backend::Cpu(_) => Vec::new(),
            Backend::Cuda(m) => m.gpu().finish_profile(),
        }
    }

    /// A fresh cache for up to `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> Result<SequenceCache> {
        Ok(match self {
            Backend::Cpu(m) => SequenceCache::Cpu(m.new_cache(capacity)?),
            Backend::Cuda(m) => SequenceCache::Cuda(Box::new(m.new_cache(capacity)?)),
        })
    }

    /// Runs `tokens` at positions `index_pos..` (see [`Model::forward`]).
    pub fn forward(
        &self,
        tokens: &[u32],
        index_pos: usize,
        cache: &mut SequenceCache,
        which: Logits,
    ) -> Result<Vec<f32>> {
        match (self, cache) {
            (Backend::Cpu(m), SequenceCache::Cpu(c)) => m.forward(tokens, index_pos, c, which),
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => m.forward(tokens, index_pos, c, which),
            _ => Err(mismatch()),
        }
    }

    /// Runs one token and returns the argmax of the logits that follow it; on
    /// the GPU only the token id comes back to the host.
    pub fn forward_greedy(
        &self,
        token: u32,
        index_pos: usize,
        cache: &mut SequenceCache,
    ) -> Result<u32> {
        match (self, cache) {
            (Backend::Cpu(m), SequenceCache::Cpu(c)) => {
                let logits = m.forward(&[token], index_pos, c, Logits::Last)?;
                crate::sampler::argmax(&logits)
                    .ok_or_else(|| Error::InvalidRequest("the logits are all NaN or -inf".into()))
            }
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => m.forward_greedy(token, index_pos, c),
            _ => Err(mismatch()),
        }
    }
}

/// What one sequence of a batched decode step needs back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wanted<'a> {
    /// The most likely next token.
    Argmax,
    /// A token picked by the sampler with these settings, the penalties
    /// looking at the `window` tokens (see [`Backend::forward_sample`]).
    Sample {
        params: SamplingParams,
        window: &'a [u32],
    },
    /// The whole row of logits.
    Logits,
}

/// What one sequence of a decode step got.
#[derive(Debug, Clone, PartialEq)]
pub enum Picked {
    /// The token, picked on the device.
    Token(u32),
    /// The whole row of logits, for the host to pick from (a CPU backend
    /// gives the row for every want but [`Wanted::Argmax`]).
    Row(Vec<f32>),
}

impl Backend {
    /// One decode step for several sequences: `tokens[i]` goes to `caches[i]`
    /// at the position equal to the cache's length, and sequence i gets what
    /// `wants[i]` asks for, each exactly what a lone step would give. On the
    /// CPU every matrix product runs once for all rows; on a GPU every kernel
    /// is launched once for all sequences.
    pub fn forward_batch(
        &self,
        tokens: &[u32],
        caches: &mut [&mut SequenceCache],
        wants: &[Wanted<'_>],
    ) -> Result<Vec<Picked>> {
        match self {
            Backend::Cpu(model) => {
                let mut steps = caches
                    .iter_mut()
                    .map(|cache| match &mut **cache {
                        SequenceCache::Cpu(c) => Ok(crate::model::BatchStep {
                            position: c.len(),
                            cache: c,
                        }),
                        SequenceCache::Cuda(_) => Err(mismatch()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let logits = model.forward_batch(tokens, &mut steps)?;
                Ok(pick_rows(&logits, model.config().vocab_size, wants))
            }
            Backend::Cuda(model) => {
                let mut gpu_caches = caches
                    .iter_mut()
                    .map(|cache| match &mut **cache {
                        SequenceCache::Cuda(c) => Ok(&mut **c),
                        SequenceCache::Cpu(_) => Err(mismatch()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                model.forward_batch(tokens, &mut gpu_caches, wants)
            }
        }
    }
}

/// What each row of a CPU batch gives back: the argmax rows' tokens, found
/// on all threads (16 rows of a 49,152-token vocabulary took a serial
/// millisecond a step, while the pool's other threads waited); the other
/// rows, and any argmax row without a usable logit (the sampler then gives
/// its error), as the whole row.
fn pick_rows(logits: &[f32], vocab: usize, wants: &[Wanted<'_>]) -> Vec<Picked> {
    let rows = logits.chunks_exact(vocab);
    let mut tokens: Vec<Option<u32>> = vec![None; rows.len()];
    let items = tokens.iter_mut().zip(rows.clone()).zip(wants);
    let threads = rayon::current_num_threads();
    crate::cpu::parallel::for_each(items, threads, |((token, row), want)| {
        if matches!(want, Wanted::Argmax) {
            *token = argmax(row);
        }
    });
    tokens
        .into_iter()
        .zip(rows)
        .map(|(token, row)| token.map_or_else(|| Picked::Row(row.to_vec()), Picked::Token))
        .collect()
}

fn mismatch() -> Error {
    Error::InvalidRequest("a cache made by one backend was used with another".into())
}

impl Backend {
    /// Runs one token and picks the next with the sampler settings `params`
    /// (see [`crate::sampler::Sampler::device_sampling`]), its penalties
    /// looking at the `window` tokens: on a GPU the whole chain runs there
    /// and only the token id comes back; the CPU, or a GPU whose selection
    /// overflowed on ties, gives the whole row for the host's sampler.
    pub fn forward_sample(
        &self,
        token: u32,
        index_pos: usize,
        cache: &mut SequenceCache,
        params: &SamplingParams,
        window: &[u32],
    ) -> Result<Picked> {
        match (self, cache) {
            (Backend::Cpu(m), SequenceCache::Cpu(c)) => Ok(Picked::Row(m.forward(
                &[token],
                index_pos,
                c,
                Logits::Last,
            )?)),
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => {
                m.forward_sample(token, index_pos, c, params, window)
            }
            _ => Err(mismatch()),
        }
    }
}

impl From<Model> for Backend {
    fn from(model: Model) -> Self {
        Backend::Cpu(model)
    }
}

impl SequenceCache {
    pub fn capacity(&self) -> usize {
        match self {
            SequenceCache::Cpu(c) => c.capacity(),
            SequenceCache::Cuda(c) => c.capacity(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SequenceCache::Cpu(c) => c.len(),
            SequenceCache::Cuda(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn truncate(&mut self, len: usize) {
        match self {
            SequenceCache::Cpu(c) => c.truncate(len),
            SequenceCache::Cuda(c) => c.truncate(len),
        }
    }

    /// Bytes held by the KV cache.
    pub fn size_bytes(&self) -> usize {
        match self {
            SequenceCache::Cpu(c) => c.size_bytes(),
            SequenceCache::Cuda(c) => c.size_bytes(),
        }
    }
}
