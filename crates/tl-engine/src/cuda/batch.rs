//! Decode steps of several sequences in one pass: the same kernels as a lone
//! step, launched once for all sequences (a second grid dimension), so each
//! weight is read from memory once per step for the whole batch and each
//! sequence's numbers are exactly those of its lone step. Each sequence keeps
//! its own KV cache; the kernels find it through a table of cache addresses.
//! Launched directly (no graph: the batch's make-up changes every step), one
//! host sync per step for the whole batch.

use tl_cuda::ops::attention::{chunk_slots, SplitBuffers};
use tl_cuda::ops::rows as row_ops;
use tl_cuda::ops::sample::{self as sample_ops, SampleBuffers};
use tl_cuda::{Buffer, Gpu};

use super::pass::{CudaPass, PassShape};
use super::{CudaCache, CudaModel};
use crate::model::step::{check_tokens, Picked, Wanted};

use crate::error::{Error, Result};
use crate::model::config::ModelConfig;
use crate::model::schedule::{self, Head};

/// The most sequences one pass runs (larger batches run in several passes).
pub const MAX_BATCH: usize = 64;

/// Device buffers of a batched step, `[sequence][feature]`.
pub struct BatchBuffers {
    pub tokens: Buffer<u32>,
    pub positions: Buffer<i32>,
    /// `[layer][keys | values][sequence]` cache addresses.
    pub tables: Buffer<u64>,
    pub x: Buffer<f32>,
    pub qkv: Buffer<f32>,
    pub attention: Buffer<f32>,
    pub hidden: Buffer<f32>,
    pub post_norm: super::cache::PostNormBuffers,
    pub logits: Buffer<f32>,
    pub next: Buffer<u32>,
    pub sampler: SampleBuffers,
    /// Where attention's chunks of long contexts meet (grown with the
    /// longest context of a step).
    pub split: SplitBuffers,
}

/// Bytes of the activation buffers of a batched step (those that grow with
/// the model; the token, position, table, argmax and sampler buffers are
/// small).
pub fn batch_bytes(c: &ModelConfig) -> u64 {
    let q_width = c.query_width();
    let post_norm = if c.post_norms {
        2 * c.embedding_length
    } else {
        0
    };
    let per_sequence = c.embedding_length
        + post_norm
        + (q_width + 2 * c.key_value_width())
        + q_width
        + c.feed_forward_length
        + c.vocab_size;
    (MAX_BATCH * per_sequence) as u64 * 4
}

impl BatchBuffers {
    pub fn new(gpu: &Gpu, c: &ModelConfig) -> Result<Self> {
        let n = MAX_BATCH;
        let q_width = c.query_width();
        let qkv_width = q_width + 2 * c.key_value_width();
        Ok(BatchBuffers {
            tokens: Buffer::zeros(gpu, n)?,
            positions: Buffer::zeros(gpu, n)?,
            tables: Buffer::zeros(gpu, c.block_count * 2 * n)?,
            x: Buffer::zeros(gpu, n * c.embedding_length)?,
            qkv: Buffer::zeros(gpu, n * qkv_width)?,
            attention: Buffer::zeros(gpu, n * q_width)?,
            hidden: Buffer::zeros(gpu, n * c.feed_forward_length)?,
            post_norm: super::cache::PostNormBuffers::new(gpu, c, n)?,
            logits: Buffer::zeros(gpu, n * c.vocab_size)?,
            next: Buffer::zeros(gpu, n * row_ops::argmax_output_len(gpu))?,
            sampler: SampleBuffers::new(gpu, n)?,
            split: SplitBuffers::new(gpu, super::cache::heads_of(c), n, 1)?,
        })
    }

    /// Room in `split` for steps whose longest context ends at `position`.
    fn make_split_room(&mut self, gpu: &Gpu, c: &ModelConfig, position: usize) -> Result<()> {
        let slots = chunk_slots(position, None);
        if slots > self.split.slots() {
            self.split = SplitBuffers::new(gpu, super::cache::heads_of(c), MAX_BATCH, slots)?;
        }
        Ok(())
    }
}

impl CudaModel {
    /// One decode step for each of `caches` (token `tokens[i]` at the
    /// position equal to cache i's length), returning what each asked for.
    pub(crate) fn forward_batch(
        &self,
        tokens: &[u32],
        caches: &mut [&mut CudaCache],
        wants: &[Wanted<'_>],
    ) -> Result<Vec<Picked>> {
        check_tokens(tokens, self.config.vocab_size)?;
        if tokens.len() != caches.len() || wants.len() != caches.len() {
            return Err(Error::InvalidRequest(format!(
                "a batch of {} tokens, {} caches and {} requests",
                tokens.len(),
                caches.len(),
                wants.len()
            )));
        }
        let mut picked = Vec::with_capacity(tokens.len());
        let groups = tokens
            .chunks(MAX_BATCH)
            .zip(caches.chunks_mut(MAX_BATCH))
            .zip(wants.chunks(MAX_BATCH));
        for ((tokens, caches), wants) in groups {
            picked.extend(self.forward_group(tokens, caches, wants)?);
        }
        Ok(picked)
    }

    fn forward_group(
        &self,
        tokens: &[u32],
        caches: &mut [&mut CudaCache],
        wants: &[Wanted<'_>],
    ) -> Result<Vec<Picked>> {
        let capacity = caches.first().map_or(0, |c| c.capacity());
        for cache in caches.iter() {
            cache.check_room(cache.len(), 1)?;
            if cache.capacity() != capacity {
                return Err(Error::InvalidRequest(
                    "the caches of a batched step must have the same capacity".into(),
                ));
            }
        }
        let mut guard = self.batch.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(BatchBuffers::new(&self.gpu, &self.config)?);
        }
        let b = guard
            .as_mut()
            .ok_or_else(|| Error::InvalidRequest("batch buffers".into()))?;
        let last = caches.iter().map(|c| c.len()).max().unwrap_or(0);
        b.make_split_room(&self.gpu, &self.config, last)?;
        let b = &*b;
        let caches_ref: Vec<&CudaCache> = caches.iter().map(|c| &**c).collect();
        // Every upload before the step's launches, so none waits for them.
        let jobs = sample_jobs(wants);
        let prepared = sample_ops::prepare(&self.gpu, &jobs, &b.sampler)?;
        self.upload_batch(b, tokens, &caches_ref)?;
        self.record_batch(b, &caches_ref)?;
        let picked = self.select(b, wants, prepared)?;
        for cache in caches.iter_mut() {
            let end = cache.len() + 1;
            cache.commit(end);
        }
        Ok(picked)
    }

    /// Tokens, positions and every layer's cache addresses.
    fn upload_batch(&self, b: &BatchBuffers, tokens: &[u32], caches: &[&CudaCache]) -> Result<()> {
        let n = caches.len();
        let positions: Vec<i32> = caches.iter().map(|c| c.len() as i32).collect();
        let mut tables = vec![0u64; self.config.block_count * 2 * MAX_BATCH];
        for layer in 0..self.config.block_count {
            for (s, cache) in caches.iter().enumerate() {
                let l = cache.layer(layer)?;
                tables[(layer * 2) * MAX_BATCH + s] = l.keys.address();
                tables[(layer * 2 + 1) * MAX_BATCH + s] = l.values.address();
            }
        }
        self.gpu.upload(tokens, b.tokens.span(0, n)?)?;
        self.gpu.upload(&positions, b.positions.span(0, n)?)?;
        self.gpu.upload(&tables, b.tables.all())?;
        Ok(())
    }

    /// The launches of one batched step (as `record_decode`, for n sequences).
    fn record_batch(&self, b: &BatchBuffers, caches: &[&CudaCache]) -> Result<()> {
        let mut pass = CudaPass::new(self, caches.len(), PassShape::Batch { buffers: b, caches });
        schedule::run(&mut pass, self.blocks.len(), Head::Logits)
    }

    /// Argmax per sequence and the whole sampler for all sampling sequences
    /// at once on the device (their jobs `prepared`), then one download of
    /// the picked tokens for all (whole rows only where a sequence asked for
    /// one or the device could not decide).
    fn select(
        &self,
        b: &BatchBuffers,
        wants: &[Wanted<'_>],
        prepared: sample_ops::Prepared,
    ) -> Result<Vec<Picked>> {
        let gpu = &self.gpu;
        let vocab = self.config.vocab_size;
        let argmax_len = row_ops::argmax_output_len(gpu);
        let n = wants.len();
        let row = |s: usize| b.logits.span(s * vocab, vocab);
        let (logits, next) = (b.logits.all(), b.next.all());
        // Every row in one launch (a launch per greedy row cost more than the
        // rows the sampler then overwrites, or whose logits are read instead).
        if wants.contains(&Wanted::Argmax) {
            row_ops::argmax_rows(gpu, logits, vocab, n, next)?;
        }
        sample_ops::sample(gpu, logits, vocab, prepared, &b.sampler, next, argmax_len)?;
        let mut next = vec![0u32; n * argmax_len];
        gpu.download(b.next.span(0, n * argmax_len)?, &mut next)?;
        let mut picked = Vec::with_capacity(n);
        for (s, want) in wants.iter().enumerate() {
            let token = next[s * argmax_len];
            let on_device = match want {
                Wanted::Argmax => true,
                Wanted::Sample { params, window } => {
                    sample_ops::fits(params.top_k, window.len()) && token != sample_ops::FALLBACK
                }
                // (Hidden states never come to a batched step: see `Backend::step`.)
                Wanted::Logits | Wanted::EveryRow | Wanted::HiddenStates => false,
            };
            picked.push(if on_device {
                Picked::Token(token)
            } else {
                let mut logits = vec![0.0; vocab];
                gpu.download(row(s)?, &mut logits)?;
                Picked::Row(logits)
            });
        }
        Ok(picked)
    }
}

/// The sequences the device samples for: those that asked for a sampled
/// token with settings that fit its buffers.
fn sample_jobs<'a>(wants: &[Wanted<'a>]) -> Vec<sample_ops::SampleJob<'a>> {
    wants
        .iter()
        .enumerate()
        .filter_map(|(row, want)| match *want {
            Wanted::Sample { params, window } if sample_ops::fits(params.top_k, window.len()) => {
                Some(sample_ops::SampleJob {
                    row,
                    params: params.into(),
                    window,
                })
            }
            _ => None,
        })
        .collect()
}
