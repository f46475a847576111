//! The key/value cache: per layer, one preallocated f16 buffer for keys and one for
//! values, laid out `[kv_head][position][head_dim]`, written in place at each
//! step's positions. Nothing is concatenated or reallocated per token. f16 is what
//! llama.cpp stores by default; storing the same rounded values keeps attention
//! arithmetic comparable and halves the memory.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::error::Result;
use crate::memory;
use crate::model::config::ModelConfig;

/// Keys and values of every layer for one sequence.
pub struct KvCache {
    keys: Vec<Vec<f16>>,
    values: Vec<Vec<f16>>,
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    len: usize,
}

impl KvCache {
    /// A cache for `capacity` positions, or an error when the memory is not
    /// there (checked before any layer is allocated).
    pub fn new(config: &ModelConfig, capacity: usize) -> Result<Self> {
        let bytes = config.kv_cache_bytes(capacity)?;
        if bytes >= memory::CHECKED_ALLOCATION_BYTES {
            let purpose = format!("a KV cache of {capacity} positions");
            memory::check_available(&purpose, &[("keys and values", bytes)])?;
        }
        // `kv_cache_bytes` did not overflow, so neither does this.
        let layer_len = config.key_value_width() * capacity;
        let layer = || memory::filled_vec(layer_len, f16::ZERO, "KV cache");
        Ok(KvCache {
            keys: (0..config.block_count)
                .map(|_| layer())
                .collect::<Result<_>>()?,
            values: (0..config.block_count)
                .map(|_| layer())
                .collect::<Result<_>>()?,
            kv_heads: config.head_count_kv,
            head_dim: config.head_dim,
            capacity,
            len: 0,
        })
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Positions filled so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets positions from `len` on (keeps the first `len`). Used to reset a
    /// conversation or to roll back to a shared prefix.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes held by the buffers.
    pub fn size_bytes(&self) -> usize {
        self.keys
            .iter()
            .chain(&self.values)
            .map(|l| l.len() * 2)
            .sum()
    }

    /// Checks that `count` new positions starting at `start` fit.
    pub fn check_room(&self, start: usize, count: usize) -> Result<()> {
        crate::model::step::check_room(self.len, self.capacity, start, count)
    }

    /// Stores the keys and values of the token at `position` in `layer`; each is
    /// `kv_heads × head_dim` values, rounded to f16 as llama.cpp's copy into its
    /// f16 cache does.
    pub fn store(&mut self, layer: usize, position: usize, keys: &[f32], values: &[f32]) {
        let (dim, cap) = (self.head_dim, self.capacity);
        for head in 0..self.kv_heads {
            let at = (head * cap + position) * dim;
            let src = head * dim..(head + 1) * dim;
            // Vector conversions (F16C where the CPU has it) round to nearest
            // even, as the scalar one does: the same bits, 8 at a time.
            self.keys[layer][at..at + dim].convert_from_f32_slice(&keys[src.clone()]);
            self.values[layer][at..at + dim].convert_from_f32_slice(&values[src]);
        }
    }

    /// Keys of `head` in `layer` for positions `0..end`, `[end][head_dim]`.
    pub fn keys(&self, layer: usize, head: usize, end: usize) -> &[f16] {
        let at = head * self.capacity * self.head_dim;
        &self.keys[layer][at..at + end * self.head_dim]
    }

    /// Values of `head` in `layer` for positions `0..end`, `[end][head_dim]`.
    pub fn values(&self, layer: usize, head: usize, end: usize) -> &[f16] {
        let at = head * self.capacity * self.head_dim;
        &self.values[layer][at..at + end * self.head_dim]
    }

    /// Marks positions up to `end` as filled, once every layer has written them.
    pub fn commit(&mut self, end: usize) {
        self.len = end;
    }
}
