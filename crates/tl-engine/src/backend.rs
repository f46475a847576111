//! Where a model runs: the CPU (`Model`) or an NVIDIA GPU (`CudaModel`), chosen
//! at load time. Everything above this (sessions, generation, the commands)
//! talks to a [`Backend`] and a [`SequenceCache`] and does not care which.

use std::sync::Arc;

pub use tl_cuda::KernelTime;
use tl_gguf::GgufFile;

use crate::cpu::kv_cache::KvCache;
use crate::cpu::model::{BatchStep, Model};
use crate::cuda::{CudaCache, CudaModel};
use crate::error::{Error, Result};
use crate::model::step::Logits;
pub use crate::model::step::{Picked, Wanted};
use crate::model::ModelConfig;
use crate::ops::{GpuOps, GpuTensor};
use crate::sampler::argmax;

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
                    let no_gpu = e.means_no_gpu();
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

    /// The public ops on this model's GPU, for programs that run their own
    /// forward pass there; none on the CPU.
    pub fn gpu_ops(&self) -> Option<GpuOps> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Cuda(m) => Some(GpuOps::new(m.gpu().clone())),
        }
    }

    /// Whether this runs on the CPU.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Backend::Cpu(_))
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
}

/// One sequence's part of a [`Backend::step`].
pub struct SequenceStep<'c, 'a> {
    /// The tokens to append: the next token of a decode step, or a chunk of
    /// a prompt.
    pub tokens: &'a [u32],
    /// The sequence's cache; the tokens go to the positions after what it
    /// holds.
    pub cache: &'c mut SequenceCache,
    pub want: Wanted<'a>,
}

impl Backend {
    /// One forward step of the model for each sequence of `steps`: its
    /// tokens are appended to its cache and it gets what it wants, exactly
    /// what it would get in a step of its own. Sequences of one token each
    /// (decode steps) run as one batch: every matrix product once for all
    /// rows on the CPU, every kernel launched once for all sequences on a GPU.
    /// A sequence of several tokens (a prompt chunk) runs as a pass of its
    /// own. On failure a cache may hold part of the step; the caller rolls
    /// back (see [`crate::Session`]).
    pub fn step(&self, steps: &mut [SequenceStep<'_, '_>]) -> Result<Vec<Picked>> {
        let decode_batch = steps.len() > 1
            && steps.iter().all(|s| {
                s.tokens.len() == 1 && !matches!(s.want, Wanted::EveryRow | Wanted::HiddenStates)
            });
        if decode_batch {
            return self.decode_batch(steps);
        }
        steps.iter_mut().map(|s| self.run_sequence(s)).collect()
    }

    /// [`Backend::step`] for one sequence.
    pub fn step_one(
        &self,
        tokens: &[u32],
        cache: &mut SequenceCache,
        want: Wanted<'_>,
    ) -> Result<Picked> {
        let mut step = SequenceStep {
            tokens,
            cache,
            want,
        };
        self.run_sequence(&mut step)
    }

    /// One sequence's tokens as a pass of their own.
    fn run_sequence(&self, step: &mut SequenceStep<'_, '_>) -> Result<Picked> {
        if step.want == Wanted::HiddenStates {
            return self.hidden_states(step.tokens, step.cache).map(Picked::Row);
        }
        let which = match step.want {
            Wanted::EveryRow => Logits::All,
            _ => Logits::Last,
        };
        match (self, &mut *step.cache) {
            (Backend::Cpu(m), SequenceCache::Cpu(c)) => {
                let logits = m.forward(step.tokens, c.len(), c, which)?;
                Ok(pick_on_host(logits, step.want))
            }
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => match (step.tokens, step.want) {
                (&[token], Wanted::Argmax) => Ok(Picked::Token(m.forward_greedy(token, c)?)),
                (&[token], Wanted::Sample { params, window }) => {
                    m.forward_sample(token, c, &params, window)
                }
                (tokens, want) => Ok(pick_on_host(m.forward(tokens, c, which)?, want)),
            },
            _ => Err(mismatch()),
        }
    }

    /// The final hidden states of `tokens` run after what `cache` holds (see
    /// [`Wanted::HiddenStates`]): a prompt pass on every backend, even for
    /// one token.
    fn hidden_states(&self, tokens: &[u32], cache: &mut SequenceCache) -> Result<Vec<f32>> {
        match (self, cache) {
            (Backend::Cpu(m), SequenceCache::Cpu(c)) => m.forward_hidden(tokens, c.len(), c),
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => m.forward_hidden(tokens, c),
            _ => Err(mismatch()),
        }
    }

    /// Decode steps of several sequences, one token each, as one batch.
    fn decode_batch(&self, steps: &mut [SequenceStep<'_, '_>]) -> Result<Vec<Picked>> {
        let tokens: Vec<u32> = steps.iter().map(|s| s.tokens[0]).collect();
        let wants: Vec<Wanted<'_>> = steps.iter().map(|s| s.want).collect();
        match self {
            Backend::Cpu(model) => {
                let mut batch = steps
                    .iter_mut()
                    .map(|step| match &mut *step.cache {
                        SequenceCache::Cpu(c) => Ok(BatchStep {
                            position: c.len(),
                            cache: c,
                        }),
                        SequenceCache::Cuda(_) => Err(mismatch()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let logits = model.forward_batch(&tokens, &mut batch)?;
                Ok(pick_rows(&logits, model.config().vocab_size, &wants))
            }
            Backend::Cuda(model) => {
                let mut caches = steps
                    .iter_mut()
                    .map(|step| match &mut *step.cache {
                        SequenceCache::Cuda(c) => Ok(&mut **c),
                        SequenceCache::Cpu(_) => Err(mismatch()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                model.forward_batch(&tokens, &mut caches, &wants)
            }
        }
    }
}

/// What a sequence gets from logits computed on the host side of a step:
/// the argmax when it asked for one (and one exists), else the rows.
fn pick_on_host(logits: Vec<f32>, want: Wanted<'_>) -> Picked {
    match want {
        Wanted::Argmax => argmax(&logits).map_or(Picked::Row(logits), Picked::Token),
        _ => Picked::Row(logits),
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

/// Which half of a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvHalf {
    Keys,
    Values,
}

impl Backend {
    /// Writes the keys and values of the token at `position` into layer
    /// `layer` of `cache` (`kv_heads × head_dim` each), rounded to f16 as a
    /// pass of the model stores them: for programs that run their own
    /// attention over the engine's cache. Call [`SequenceCache::commit`] once
    /// every layer holds the position.
    pub fn store_kv(
        &self,
        cache: &mut SequenceCache,
        layer: usize,
        position: usize,
        keys: &[f32],
        values: &[f32],
    ) -> Result<()> {
        let c = self.config();
        let width = c.key_value_width();
        if layer >= c.block_count || position >= cache.capacity() {
            return Err(Error::InvalidRequest(format!(
                "no layer {layer}, position {position} in a cache of {} layers and {} positions",
                c.block_count,
                cache.capacity()
            )));
        }
        if keys.len() != width || values.len() != width {
            return Err(Error::InvalidRequest(format!(
                "a position's keys and values are {width} values each, not {} and {}",
                keys.len(),
                values.len()
            )));
        }
        match (self, cache) {
            (Backend::Cpu(_), SequenceCache::Cpu(c)) => {
                c.store(layer, position, keys, values);
                Ok(())
            }
            (Backend::Cuda(m), SequenceCache::Cuda(c)) => {
                c.store_from_host(m.gpu(), layer, position, keys, values)
            }
            _ => Err(mismatch()),
        }
    }

    /// Layer `layer`'s cached keys or values of positions `0..end`, laid out
    /// `[kv_head][position][head_dim]`.
    pub fn read_kv(
        &self,
        cache: &SequenceCache,
        layer: usize,
        half: KvHalf,
        end: usize,
    ) -> Result<Vec<half::f16>> {
        let c = self.config();
        if layer >= c.block_count || end > cache.capacity() {
            return Err(Error::InvalidRequest(format!(
                "no layer {layer}, positions 0..{end} in a cache of {} layers and {} positions",
                c.block_count,
                cache.capacity()
            )));
        }
        match (self, cache) {
            (Backend::Cpu(_), SequenceCache::Cpu(cache)) => {
                let mut out = Vec::with_capacity(c.key_value_width() * end);
                for head in 0..c.head_count_kv {
                    out.extend_from_slice(match half {
                        KvHalf::Keys => cache.keys(layer, head, end),
                        KvHalf::Values => cache.values(layer, head, end),
                    });
                }
                Ok(out)
            }
            (Backend::Cuda(m), SequenceCache::Cuda(cache)) => {
                cache.read_to_host(m.gpu(), layer, half == KvHalf::Keys, end)
            }
            _ => Err(mismatch()),
        }
    }
}

/// The cache ops of [`GpuOps`], on a cache of the GPU's model.
impl GpuOps {
    /// Writes keys and values `[seq, kv_heads, head_dim]` (f32, on this GPU)
    /// into layer `layer` of `cache`, at positions `start..start + seq`, rounded
    /// to f16 as the model's passes store them. Call
    /// [`SequenceCache::commit`] once every layer holds them.
    pub fn store_kv(
        &self,
        cache: &mut SequenceCache,
        layer: usize,
        start: usize,
        keys: &GpuTensor,
        values: &GpuTensor,
    ) -> Result<()> {
        match cache {
            SequenceCache::Cuda(c) => self.store_kv_rows(c, layer, start, keys, values),
            SequenceCache::Cpu(_) => Err(mismatch()),
        }
    }

    /// Layer `layer`'s cached keys or values of positions `0..end`, as f16
    /// `[kv_heads, end, head_dim]` on this GPU.
    pub fn read_kv(
        &self,
        cache: &SequenceCache,
        layer: usize,
        half: KvHalf,
        end: usize,
    ) -> Result<GpuTensor> {
        match cache {
            SequenceCache::Cuda(c) => self.read_kv_rows(c, layer, half == KvHalf::Keys, end),
            SequenceCache::Cpu(_) => Err(mismatch()),
        }
    }
}

impl SequenceCache {
    /// Marks positions up to `end` (at most the capacity) as filled, once
    /// every layer holds them (see [`Backend::store_kv`]).
    pub fn commit(&mut self, end: usize) {
        let end = end.min(self.capacity());
        match self {
            SequenceCache::Cpu(c) => c.commit(end),
            SequenceCache::Cuda(c) => c.commit(end),
        }
    }

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
