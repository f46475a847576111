//! The steps of a program's own forward pass, one launch each (program.cu):
//! row norms, RoPE, elementwise sums, products and SiLU, axis swaps, and KV
//! cache writes and reads.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::ops::{int, stride_blocks, STRIDE_THREADS};

const THREADS: u32 = STRIDE_THREADS;

/// `out[r] = rmsnorm(x[r]) · weight` for `rows` rows of `weight.len()` values.
pub fn rms_norm(
    gpu: &Gpu,
    x: Span<'_, f32>,
    weight: Span<'_, f32>,
    eps: f32,
    out: Span<'_, f32>,
    rows: usize,
) -> Result<()> {
    let cols = weight.len();
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    x.require(rows * cols, "norm input")?;
    out.require(rows * cols, "norm output")?;
    let args = [
        x.into(),
        weight.into(),
        Arg::F32(eps),
        out.into(),
        Arg::I32(int(cols, "cols")?),
    ];
    // SAFETY: matches rms_norm_rows(const float*, const float*, float, float*,
    // int); one block per row reads `cols` values of x and the weight and
    // writes `cols` of out, all checked above.
    unsafe {
        gpu.launch(
            "rms_norm_rows",
            (int(rows, "rows")? as u32, 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// Rotates `x[rows][heads][head_dim]` in place, row r by `cos_sin[r]` (its
/// position's `head_dim / 2` (cos, sin) pairs, flattened); pairs are adjacent
/// elements, or half a head apart when `halves`.
pub fn rope(
    gpu: &Gpu,
    x: Span<'_, f32>,
    cos_sin: Span<'_, f32>,
    rows: usize,
    heads: usize,
    head_dim: usize,
    halves: bool,
) -> Result<()> {
    if !head_dim.is_multiple_of(2) {
        return Err(CudaError::Unsupported(format!(
            "RoPE needs an even head size, not {head_dim}"
        )));
    }
    let n = rows * heads * head_dim;
    if n == 0 {
        return Ok(());
    }
    x.require(n, "RoPE input")?;
    cos_sin.require(rows * head_dim, "RoPE table")?;
    let args = [
        x.into(),
        cos_sin.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(heads, "heads")?),
        Arg::I32(int(head_dim, "head dim")?),
        Arg::I32(i32::from(halves)),
    ];
    // SAFETY: matches rope_rows(float*, const float2*, int, int, int, int); it
    // touches rows·heads·head_dim values of x and rows·head_dim/2 pairs of the
    // table, both checked.
    unsafe {
        gpu.launch(
            "rope_rows",
            (stride_blocks(gpu, n / 2), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// An elementwise operation of two equally long f32 operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elementwise {
    Add,
    Mul,
}

/// `out[i] = a[i] op b[i]` for the first `n` values.
pub fn elementwise(
    gpu: &Gpu,
    op: Elementwise,
    a: Span<'_, f32>,
    b: Span<'_, f32>,
    out: Span<'_, f32>,
    n: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    for (span, what) in [(a, "left operand"), (b, "right operand"), (out, "result")] {
        span.require(n, what)?;
    }
    let args = [
        a.into(),
        b.into(),
        out.into(),
        Arg::U64(n as u64),
        Arg::I32(i32::from(op == Elementwise::Mul)),
    ];
    // SAFETY: matches elementwise_f32(const float*, const float*, float*, u64,
    // int); indices stay below n, which every span holds.
    unsafe {
        gpu.launch(
            "elementwise_f32",
            (stride_blocks(gpu, n), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// `out[i] = silu(x[i])` for the first `n` values, the first `n - n % 8` as
/// the CPU's vector loop computes them, the rest as its scalar tail.
pub fn silu(gpu: &Gpu, x: Span<'_, f32>, out: Span<'_, f32>, n: usize) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    x.require(n, "SiLU input")?;
    out.require(n, "SiLU output")?;
    let args = [
        x.into(),
        out.into(),
        Arg::U64(n as u64),
        Arg::U64((n - n % 8) as u64),
    ];
    // SAFETY: matches silu_f32(const float*, float*, u64, u64); indices stay
    // below n, which both spans hold.
    unsafe { gpu.launch("silu_f32", (stride_blocks(gpu, n), 1), THREADS, 0, &args) }
}

/// The sizes of a tensor seen as `[outer][a][mid][b][inner]`, axes a and b to
/// be swapped.
#[derive(Debug, Clone, Copy)]
pub struct SwapAxes {
    pub outer: usize,
    pub a: usize,
    pub mid: usize,
    pub b: usize,
    pub inner: usize,
}

impl SwapAxes {
    fn len(&self) -> usize {
        self.outer * self.a * self.mid * self.b * self.inner
    }
}

/// `out = x` with axes a and b of `shape` swapped, for values of 2 or 4 bytes.
pub fn swap_axes<T>(gpu: &Gpu, x: Span<'_, T>, out: Span<'_, T>, shape: SwapAxes) -> Result<()> {
    let kernel = match size_of::<T>() {
        4 => "swap_axes_32",
        2 => "swap_axes_16",
        other => {
            return Err(CudaError::Unsupported(format!(
                "swapping axes of {other}-byte values"
            )))
        }
    };
    let n = shape.len();
    if n == 0 {
        return Ok(());
    }
    x.require(n, "tensor to transpose")?;
    out.require(n, "transposed tensor")?;
    let sizes = [shape.outer, shape.a, shape.mid, shape.b, shape.inner];
    let mut args = vec![x.into(), out.into()];
    args.extend(sizes.map(|s| Arg::U64(s as u64)));
    // SAFETY: matches swap_axes_{32,16}(const T*, T*, u64 × 5) for T of the
    // span's size; both spans hold the product of the sizes, and every index
    // the kernel forms is below it.
    unsafe { gpu.launch(kernel, (stride_blocks(gpu, n), 1), THREADS, 0, &args) }
}

/// Where rows go in one layer's f16 key or value cache,
/// `[kv_head][capacity][head_dim]`.
#[derive(Debug, Clone, Copy)]
pub struct CacheRows {
    pub kv_heads: usize,
    pub head_dim: usize,
    pub capacity: usize,
}

/// Writes `rows` rows of `[kv_heads][head_dim]` f32 values into `cache` at
/// positions `start..start + rows`, rounded to f16.
pub fn store_kv(
    gpu: &Gpu,
    input: Span<'_, f32>,
    cache: Span<'_, u16>,
    layout: CacheRows,
    start: usize,
    rows: usize,
) -> Result<()> {
    let CacheRows {
        kv_heads,
        head_dim,
        capacity,
    } = layout;
    let n = rows * kv_heads * head_dim;
    if n == 0 {
        return Ok(());
    }
    if start + rows > capacity {
        return Err(CudaError::Unsupported(format!(
            "positions {start}..{} are beyond a cache of {capacity}",
            start + rows
        )));
    }
    input.require(n, "keys or values to store")?;
    cache.require(kv_heads * capacity * head_dim, "cache layer")?;
    let args = [
        input.into(),
        cache.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(kv_heads, "kv heads")?),
        Arg::I32(int(head_dim, "head dim")?),
        Arg::I32(int(capacity, "capacity")?),
        Arg::I32(int(start, "start")?),
    ];
    // SAFETY: matches store_kv_rows(const float*, u16*, int × 5); it reads n
    // input values and writes below (kv_heads·capacity)·head_dim, as start +
    // rows <= capacity; both checked.
    unsafe {
        gpu.launch(
            "store_kv_rows",
            (stride_blocks(gpu, n), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// `dst[o] = src[o][..dst_len]` for `outer` runs of `src_len` f16 values.
pub fn narrow(
    gpu: &Gpu,
    src: Span<'_, u16>,
    dst: Span<'_, u16>,
    outer: usize,
    src_len: usize,
    dst_len: usize,
) -> Result<()> {
    let n = outer * dst_len;
    if n == 0 {
        return Ok(());
    }
    if dst_len > src_len {
        return Err(CudaError::Unsupported(format!(
            "{dst_len} values of runs of {src_len}"
        )));
    }
    src.require(outer * src_len, "source")?;
    dst.require(n, "destination")?;
    let sizes = [outer, src_len, dst_len].map(|s| Arg::U64(s as u64));
    let args = [src.into(), dst.into(), sizes[0], sizes[1], sizes[2]];
    // SAFETY: matches narrow_16(const u16*, u16*, u64, u64, u64); reads stay
    // below outer·src_len and writes below outer·dst_len, both checked.
    unsafe { gpu.launch("narrow_16", (stride_blocks(gpu, n), 1), THREADS, 0, &args) }
}
