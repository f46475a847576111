//! RoPE with the K/V cache write, and attention over the cache.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::ops::{blocks_for, int};

/// Warps per block of the attention kernels (`ATTN_WARPS` in attention.cu).
const WARPS: usize = 4;
/// The largest head the kernels hold in registers (`MAX_HEAD_DIM`).
pub const MAX_HEAD_DIM: usize = 256;

/// The attention geometry of a model.
#[derive(Debug, Clone, Copy)]
pub struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl Heads {
    /// Errors unless the kernels support this geometry.
    pub fn check(&self) -> Result<()> {
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(32) || self.head_dim > MAX_HEAD_DIM {
            return Err(CudaError::Unsupported(format!(
                "the CUDA attention kernels need a head size that is a multiple of 32 up to {MAX_HEAD_DIM}; this model has {}",
                self.head_dim
            )));
        }
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(CudaError::Unsupported(format!(
                "{} query heads do not divide into {} key/value heads",
                self.heads, self.kv_heads
            )));
        }
        Ok(())
    }

    fn q_width(&self) -> usize {
        self.heads * self.head_dim
    }

    fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Values one layer's key (or value) cache holds for `capacity` positions.
    pub fn cache_len(&self, capacity: usize) -> usize {
        self.kv_width() * capacity
    }

    fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// One layer's key and value caches, `[kv_head][capacity][head_dim]` f16.
#[derive(Debug, Clone, Copy)]
pub struct LayerCache<'a> {
    pub keys: Span<'a, u16>,
    pub values: Span<'a, u16>,
    pub capacity: usize,
}

impl LayerCache<'_> {
    fn check(&self, h: &Heads) -> Result<()> {
        self.keys.require(h.cache_len(self.capacity), "key cache")?;
        self.values
            .require(h.cache_len(self.capacity), "value cache")
    }
}

/// Rotates the queries of `rows` rows of `qkv` in place and writes the rotated
/// keys and the values at positions `*start + r` of the cache. `cos_sin` holds
/// (cos, sin) pairs for positions `0..max_position`; `*start + rows` must not
/// exceed it or the cache capacity (the caller keeps `start` in range).
pub fn rope_store_kv(
    gpu: &Gpu,
    h: Heads,
    qkv: Span<'_, f32>,
    rows: usize,
    cos_sin: Span<'_, f32>,
    start: Span<'_, i32>,
    cache: LayerCache<'_>,
) -> Result<()> {
    h.check()?;
    cache.check(&h)?;
    qkv.require(rows * (h.q_width() + 2 * h.kv_width()), "qkv")?;
    cos_sin.require(cache.capacity * h.head_dim, "rope table")?;
    start.require(1, "start position")?;
    let args = [
        qkv.into(),
        Arg::I32(int(h.heads, "heads")?),
        Arg::I32(int(h.kv_heads, "kv heads")?),
        Arg::I32(int(h.head_dim, "head dim")?),
        cos_sin.into(),
        start.into(),
        cache.keys.into(),
        cache.values.into(),
        Arg::I32(int(cache.capacity, "capacity")?),
    ];
    // SAFETY: matches rope_store_kv's signature; qkv holds `rows` rows, the
    // table and caches hold `capacity` positions, and the caller guarantees
    // *start + rows <= capacity (the host checks room before every pass).
    unsafe {
        gpu.launch(
            "rope_store_kv",
            (int(rows, "rows")? as u32, 1),
            256,
            0,
            &args,
        )
    }
}

/// Attention of one query (`heads × head_dim`) over positions `0..=*last`,
/// split over `splits` blocks per head; `partial` is scratch of
/// [`decode_partial_len`] values.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode(
    gpu: &Gpu,
    h: Heads,
    q: Span<'_, f32>,
    cache: LayerCache<'_>,
    last: Span<'_, i32>,
    splits: usize,
    partial: Span<'_, f32>,
    out: Span<'_, f32>,
) -> Result<()> {
    h.check()?;
    cache.check(&h)?;
    q.require(h.q_width(), "query")?;
    out.require(h.q_width(), "attention output")?;
    partial.require(decode_partial_len(h, splits), "attention scratch")?;
    last.require(1, "last position")?;
    let split_args = [
        q.into(),
        cache.keys.into(),
        cache.values.into(),
        last.into(),
        Arg::I32(int(h.heads, "heads")?),
        Arg::I32(int(h.kv_heads, "kv heads")?),
        Arg::I32(int(h.head_dim, "head dim")?),
        Arg::I32(int(cache.capacity, "capacity")?),
        Arg::F32(h.scale()),
        partial.into(),
    ];
    let grid = (int(h.heads, "heads")? as u32, int(splits, "splits")? as u32);
    // SAFETY: matches attention_decode_split's signature; positions read are
    // 0..=*last < capacity (the host keeps it so), partial holds heads × splits
    // × (head_dim + 2) values.
    unsafe {
        gpu.launch(
            "attention_decode_split",
            grid,
            (WARPS * 32) as u32,
            0,
            &split_args,
        )?
    };
    let merge_args = [
        partial.into(),
        Arg::I32(splits as i32),
        Arg::I32(h.head_dim as i32),
        out.into(),
    ];
    // SAFETY: matches attention_decode_merge(const float*, int, int, float*);
    // reads the partials written above and writes heads × head_dim values.
    unsafe {
        gpu.launch(
            "attention_decode_merge",
            (h.heads as u32, 1),
            h.head_dim as u32,
            0,
            &merge_args,
        )
    }
}

/// Scratch values [`attention_decode`] needs.
pub fn decode_partial_len(h: Heads, splits: usize) -> usize {
    h.heads * splits * (h.head_dim + 2)
}

/// Causal attention of `rows` query rows (row r at position `*start + r`, rows
/// `q_stride` floats apart) over the cache; `out` is f16 `[row][heads × head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn attention_prefill(
    gpu: &Gpu,
    h: Heads,
    q: Span<'_, f32>,
    q_stride: usize,
    rows: usize,
    cache: LayerCache<'_>,
    start: Span<'_, i32>,
    out: Span<'_, u16>,
) -> Result<()> {
    h.check()?;
    cache.check(&h)?;
    if rows == 0 {
        return Ok(());
    }
    q.require((rows - 1) * q_stride + h.q_width(), "queries")?;
    out.require(rows * h.q_width(), "attention output")?;
    start.require(1, "start position")?;
    let args = [
        q.into(),
        Arg::I32(int(q_stride, "query stride")?),
        cache.keys.into(),
        cache.values.into(),
        start.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(h.heads, "heads")?),
        Arg::I32(int(h.kv_heads, "kv heads")?),
        Arg::I32(int(h.head_dim, "head dim")?),
        Arg::I32(int(cache.capacity, "capacity")?),
        Arg::F32(h.scale()),
        out.into(),
    ];
    // SAFETY: matches attention_prefill's signature; queries and output are
    // checked for `rows` rows, and positions read stay below *start + rows <=
    // capacity (the host checks room before every pass).
    unsafe {
        gpu.launch(
            "attention_prefill",
            (blocks_for(rows * h.heads, WARPS), 1),
            (WARPS * 32) as u32,
            0,
            &args,
        )
    }
}
