//! The key/value cache: one preallocated buffer per layer for keys and one for
//! values, written in place at each step's positions. Nothing is concatenated or
//! reallocated per token; the capacity is fixed when the cache is made.

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};
use crate::model::config::ModelConfig;

/// Keys and values of every layer for one sequence.
pub struct KvCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    capacity: usize,
    len: usize,
}

impl KvCache {
    /// A cache for `capacity` positions, laid out `[kv_heads, capacity, head_dim]`
    /// per layer.
    pub fn new(config: &ModelConfig, capacity: usize, device: &Device) -> Result<Self> {
        let shape = (config.head_count_kv, capacity, config.head_dim);
        let layer = || Tensor::zeros(shape, DType::F32, device);
        Ok(KvCache {
            keys: (0..config.block_count)
                .map(|_| layer())
                .collect::<candle_core::Result<_>>()?,
            values: (0..config.block_count)
                .map(|_| layer())
                .collect::<candle_core::Result<_>>()?,
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
            .map(|t| t.elem_count() * t.dtype().size_in_bytes())
            .sum()
    }

    /// Checks that `count` new positions starting at `start` fit.
    pub fn check_room(&self, start: usize, count: usize) -> Result<()> {
        if start > self.len {
            return Err(Error::InvalidRequest(format!(
                "position {start} leaves a gap after the {} cached positions",
                self.len
            )));
        }
        if start + count > self.capacity {
            return Err(Error::InvalidRequest(format!(
                "context full: {start} cached + {count} new positions exceed the context of {}",
                self.capacity
            )));
        }
        Ok(())
    }

    /// Marks positions up to `end` as filled, once every layer has written them.
    pub(crate) fn commit(&mut self, end: usize) {
        self.len = end;
    }

    /// Writes `keys` and `values` (`[kv_heads, count, head_dim]`) of `layer` at
    /// positions `start..start+count` and returns views of all positions up to the
    /// end of what was written.
    pub fn append(
        &mut self,
        layer: usize,
        start: usize,
        keys: &Tensor,
        values: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let count = keys.dim(1)?;
        self.keys[layer].slice_set(keys, 1, start)?;
        self.values[layer].slice_set(values, 1, start)?;
        let end = start + count;
        Ok((
            self.keys[layer].narrow(1, 0, end)?,
            self.values[layer].narrow(1, 0, end)?,
        ))
    }
}
