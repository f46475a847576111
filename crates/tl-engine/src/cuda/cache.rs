//! One sequence's state on the GPU: the KV cache of every layer, the decode
//! step's buffers, and the decode step recorded as a CUDA graph (which bakes in
//! these buffers' addresses, so it belongs to the sequence).

use half::f16;
use tl_cuda::ops::attention::{chunk_slots, Heads, LayerCache, SplitBuffers};
use tl_cuda::ops::rows as row_ops;
use tl_cuda::ops::sample::SampleBuffers;
use tl_cuda::{Buffer, Gpu, Graph};

use crate::error::Result;
use crate::model::config::ModelConfig;

/// Buffers of one decode step, `[feature]`.
pub struct StepBuffers {
    /// The token to run (written by the host before each step).
    pub token: Buffer<u32>,
    /// Its position.
    pub position: Buffer<i32>,
    pub x: Buffer<f32>,
    pub qkv: Buffer<f32>,
    pub attention: Buffer<f32>,
    pub hidden: Buffer<f32>,
    /// A post-norm architecture's branch output and the residual's other
    /// buffer (see [`PostNormBuffers`]).
    pub post_norm: PostNormBuffers,
    pub logits: Buffer<f32>,
    /// The picked token, argmax or sampled (first value; the rest is the
    /// argmax kernel's scratch).
    pub next: Buffer<u32>,
    /// The device sampler's job, window and candidates.
    pub sampler: SampleBuffers,
}

/// Values per row of a prompt pass's QKV buffer: the fused projection's
/// output, which the branch outputs of a post-norm architecture reuse once
/// attention has read it (they are normalised there before joining the
/// residual).
pub(crate) fn qkv_buffer_width(c: &ModelConfig) -> usize {
    let qkv = c.query_width() + 2 * c.key_value_width();
    if c.post_norms {
        qkv.max(c.embedding_length)
    } else {
        qkv
    }
}

/// A decode step's buffers for a post-norm architecture: each branch output
/// waits in `branch` until the next product adds it to the residual
/// (normalised) as it stages its input, writing the sum to the residual's
/// other buffer, `x_alt`; the residual moves between `x` and `x_alt`. One
/// value each for other architectures.
pub struct PostNormBuffers {
    pub branch: Buffer<f32>,
    pub x_alt: Buffer<f32>,
}

impl PostNormBuffers {
    pub(crate) fn new(gpu: &Gpu, c: &ModelConfig, rows: usize) -> Result<Self> {
        let len = if c.post_norms {
            rows * c.embedding_length
        } else {
            1
        };
        Ok(PostNormBuffers {
            branch: Buffer::zeros(gpu, len)?,
            x_alt: Buffer::zeros(gpu, len)?,
        })
    }
}

/// A sequence's KV cache and decode state on the GPU.
pub struct CudaCache {
    keys: Buffer<u16>,
    values: Buffer<u16>,
    layer_len: usize,
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    len: usize,
    pub(crate) step: StepBuffers,
    /// Where a decode step's chunks of a long context meet (room for the
    /// most chunk slots a step up to `capacity` takes).
    pub(crate) split: SplitBuffers,
    /// The decode step's recording and the chunk slots it launches with
    /// (a step that needs other slots records again).
    pub(crate) graph: Option<(Graph, usize)>,
}

impl CudaCache {
    pub(crate) fn new(gpu: &Gpu, c: &ModelConfig, capacity: usize) -> Result<Self> {
        let heads = heads_of(c);
        let layer_len = heads.cache_len(capacity);
        let total = layer_len * c.block_count;
        let q_width = c.query_width();
        let qkv_width = q_width + 2 * c.key_value_width();
        let step = StepBuffers {
            token: Buffer::zeros(gpu, 1)?,
            position: Buffer::zeros(gpu, 1)?,
            x: Buffer::zeros(gpu, c.embedding_length)?,
            qkv: Buffer::zeros(gpu, qkv_width)?,
            attention: Buffer::zeros(gpu, q_width)?,
            hidden: Buffer::zeros(gpu, c.feed_forward_length)?,
            post_norm: PostNormBuffers::new(gpu, c, 1)?,
            logits: Buffer::zeros(gpu, c.vocab_size)?,
            next: Buffer::zeros(gpu, row_ops::argmax_output_len(gpu))?,
            sampler: SampleBuffers::new(gpu, 1)?,
        };
        Ok(CudaCache {
            keys: Buffer::zeros(gpu, total)?,
            values: Buffer::zeros(gpu, total)?,
            layer_len,
            kv_heads: c.head_count_kv,
            head_dim: c.head_dim,
            capacity,
            len: 0,
            step,
            split: SplitBuffers::new(gpu, heads, 1, chunk_slots(capacity.saturating_sub(1), None))?,
            graph: None,
        })
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn kv_heads(&self) -> usize {
        self.kv_heads
    }

    pub(crate) fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps the first `len` positions.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes of device memory held by the KV cache.
    pub fn size_bytes(&self) -> usize {
        self.keys.bytes() + self.values.bytes()
    }

    pub(crate) fn commit(&mut self, end: usize) {
        self.len = end;
    }

    /// Same contract as the CPU cache's `check_room`.
    pub(crate) fn check_room(&self, start: usize, count: usize) -> Result<()> {
        crate::model::step::check_room(self.len, self.capacity, start, count)
    }

    /// Writes one position's keys and values (f32 from the host, `[kv_head]
    /// [head_dim]`) into layer `layer`, rounded to f16 as the kernels round
    /// (to nearest even): one small copy per head.
    pub(crate) fn store_from_host(
        &mut self,
        gpu: &Gpu,
        layer: usize,
        position: usize,
        keys: &[f32],
        values: &[f32],
    ) -> Result<()> {
        let l = self.layer(layer)?;
        let dim = self.head_dim;
        for (source, cache) in [(keys, l.keys), (values, l.values)] {
            for (head, row) in source.chunks_exact(dim).enumerate() {
                let bits: Vec<u16> = row.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
                let at = (head * self.capacity + position) * dim;
                gpu.upload(&bits, cache.sub(at, dim)?)?;
            }
        }
        Ok(())
    }

    /// Layer `layer`'s keys (or values) of positions `0..end`,
    /// `[kv_head][position][head_dim]`, read back to the host.
    pub(crate) fn read_to_host(
        &self,
        gpu: &Gpu,
        layer: usize,
        keys: bool,
        end: usize,
    ) -> Result<Vec<f16>> {
        let l = self.layer(layer)?;
        let cache = if keys { l.keys } else { l.values };
        let dim = self.head_dim;
        if end == 0 {
            return Ok(Vec::new());
        }
        let mut bits = vec![0u16; self.kv_heads * end * dim];
        for (head, out) in bits.chunks_exact_mut(end * dim).enumerate() {
            gpu.download(cache.sub(head * self.capacity * dim, end * dim)?, out)?;
        }
        Ok(bits.into_iter().map(f16::from_bits).collect())
    }

    /// Layer `layer`'s key and value caches.
    pub(crate) fn layer(&self, layer: usize) -> Result<LayerCache<'_>> {
        Ok(LayerCache {
            keys: self.keys.span(layer * self.layer_len, self.layer_len)?,
            values: self.values.span(layer * self.layer_len, self.layer_len)?,
            capacity: self.capacity,
            tables: None,
        })
    }
}

/// The attention geometry of a model.
pub(crate) fn heads_of(c: &ModelConfig) -> Heads {
    Heads {
        heads: c.head_count,
        kv_heads: c.head_count_kv,
        head_dim: c.head_dim,
    }
}
