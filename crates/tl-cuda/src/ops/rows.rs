//! Row-wise steps (norms, SwiGLU, conversions), dequantization, embedding
//! lookup and argmax.

use crate::buffer::Span;
use crate::error::Result;
use crate::gpu::{Arg, Gpu};
use crate::matrix::DeviceMatrix;
use crate::ops::{blocks_for, int};

const THREADS: u32 = 256;

/// Grid size for grid-stride loops over `n` items.
fn stride_blocks(gpu: &Gpu, n: usize) -> u32 {
    blocks_for(n, THREADS as usize).min((gpu.info().multiprocessors * 16) as u32)
}

/// `out[r] = f16(rmsnorm(x[r]) · weight)` for `rows` rows of `weight.len()` values.
pub fn rms_norm_f16(
    gpu: &Gpu,
    x: Span<'_, f32>,
    weight: Span<'_, f32>,
    eps: f32,
    out: Span<'_, u16>,
    rows: usize,
) -> Result<()> {
    out.require(rows * weight.len(), "norm output")?;
    rms_norm("rms_norm_f16", gpu, x, weight, eps, out.into(), rows)
}

/// `out[r] = rmsnorm(x[r]) · weight` in f32.
pub fn rms_norm_f32(
    gpu: &Gpu,
    x: Span<'_, f32>,
    weight: Span<'_, f32>,
    eps: f32,
    out: Span<'_, f32>,
    rows: usize,
) -> Result<()> {
    out.require(rows * weight.len(), "norm output")?;
    rms_norm("rms_norm_f32", gpu, x, weight, eps, out.into(), rows)
}

/// Launches one of the norm kernels; the caller has checked that `out` holds
/// `rows × weight.len()` values of the kernel's output type.
fn rms_norm(
    kernel: &str,
    gpu: &Gpu,
    x: Span<'_, f32>,
    weight: Span<'_, f32>,
    eps: f32,
    out: Arg,
    rows: usize,
) -> Result<()> {
    let cols = weight.len();
    x.require(rows * cols, "norm input")?;
    let args = [
        x.into(),
        weight.into(),
        Arg::F32(eps),
        out,
        Arg::I32(int(cols, "cols")?),
    ];
    // SAFETY: matches rms_norm_f16/_f32(const float*, const float*, float,
    // u16*/float*, int); one block per row reads and writes `cols` values of
    // rows the input span and (checked by the caller) the output hold.
    unsafe { gpu.launch(kernel, (int(rows, "rows")? as u32, 1), THREADS, 0, &args) }
}

/// `out[r][i] = f16(silu(gate_up[r][i]) · gate_up[r][width + i])`.
pub fn swiglu_f16(
    gpu: &Gpu,
    gate_up: Span<'_, f32>,
    out: Span<'_, u16>,
    rows: usize,
    width: usize,
) -> Result<()> {
    gate_up.require(rows * width * 2, "swiglu input")?;
    out.require(rows * width, "swiglu output")?;
    let args = [
        gate_up.into(),
        out.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(width, "width")?),
    ];
    // SAFETY: matches swiglu_f16(const float*, u16*, int, int); indices stay
    // below rows·width (out) and rows·2·width (input), both checked.
    unsafe {
        gpu.launch(
            "swiglu_f16",
            (stride_blocks(gpu, rows * width), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// `out[i] = f16(x[i])` for the first `n` values.
pub fn f32_to_f16(gpu: &Gpu, x: Span<'_, f32>, out: Span<'_, u16>, n: usize) -> Result<()> {
    x.require(n, "conversion input")?;
    out.require(n, "conversion output")?;
    let args = [x.into(), out.into(), Arg::U64(n as u64)];
    // SAFETY: matches f32_to_f16(const float*, u16*, u64); n checked on both.
    unsafe { gpu.launch("f32_to_f16", (stride_blocks(gpu, n), 1), THREADS, 0, &args) }
}

/// Dequantizes the whole matrix into `out` (rows × cols f16).
pub fn dequantize_f16(gpu: &Gpu, w: &DeviceMatrix, out: Span<'_, u16>) -> Result<()> {
    let n = w.rows() * w.cols();
    out.require(n, "dequantized matrix")?;
    let kernel = format!("dequantize_f16_{}", w.weight_type().kernel_suffix());
    let args = [
        w.quants().into(),
        w.scales().into(),
        out.into(),
        Arg::I32(int(w.rows(), "rows")?),
        Arg::I32(int(w.cols(), "cols")?),
    ];
    // SAFETY: matches dequantize_f16_<type>(const u8*, const u8*, u16*, int, int);
    // the matrix buffers hold rows × cols values of its type, out holds n.
    unsafe { gpu.launch(&kernel, (stride_blocks(gpu, n), 1), THREADS, 0, &args) }
}

/// `out[t] = table[ids[t]]` (f32) for `n` ids; ids outside the table give zeros.
pub fn embed(
    gpu: &Gpu,
    table: &DeviceMatrix,
    ids: Span<'_, u32>,
    n: usize,
    out: Span<'_, f32>,
) -> Result<()> {
    ids.require(n, "token ids")?;
    out.require(n * table.cols(), "embeddings")?;
    let kernel = format!("embed_{}", table.weight_type().kernel_suffix());
    let args = [
        table.quants().into(),
        table.scales().into(),
        ids.into(),
        Arg::I32(int(table.rows(), "vocabulary")?),
        out.into(),
        Arg::I32(int(table.cols(), "cols")?),
    ];
    // SAFETY: matches embed_<type>(const u8*, const u8*, const u32*, int, float*, int);
    // one block per id; the kernel checks each id against the vocabulary.
    unsafe { gpu.launch(&kernel, (int(n, "tokens")? as u32, 1), THREADS, 0, &args) }
}

/// Writes the index of the largest of the first `n` values of x into `out[0]`.
pub fn argmax(gpu: &Gpu, x: Span<'_, f32>, n: usize, out: Span<'_, u32>) -> Result<()> {
    x.require(n, "argmax input")?;
    out.require(1, "argmax output")?;
    let args = [x.into(), Arg::I32(int(n, "n")?), out.into()];
    // SAFETY: matches argmax(const float*, int, u32*); reads n values, writes one.
    unsafe { gpu.launch("argmax", (1, 1), 1024, 0, &args) }
}
