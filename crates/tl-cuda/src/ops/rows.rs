//! Row-wise steps (GEMM inputs in f16, SwiGLU), dequantization, embedding
//! lookup and argmax.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::matrix::{is_k_quant, DeviceMatrix, GgmlType};
use crate::ops::{int, stride_blocks, STRIDE_THREADS};

const THREADS: u32 = STRIDE_THREADS;

/// How a GEMM input is rounded before f16 (`ROUND_*` in rows.cu): as the
/// CPU backend's quantized matmul rounds the activations it multiplies by
/// weights of that type, so the GEMM sees the same activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Not at all (float weights).
    None,
    /// llama.cpp's Q8 blocks of 32 (the 32-value quantized types).
    Q8Blocks,
    /// llama.cpp's Q8_K super-blocks of 256 (K-quants).
    Q8KSuperBlocks,
}

impl Rounding {
    /// The rounding of the activations the CPU multiplies by `weight_type`.
    pub fn for_weights(weight_type: GgmlType) -> Self {
        if is_k_quant(weight_type) {
            Rounding::Q8KSuperBlocks
        } else if weight_type.is_quantized() {
            Rounding::Q8Blocks
        } else {
            Rounding::None
        }
    }

    /// The kernels' `rounding` argument.
    fn arg(self) -> i32 {
        match self {
            Rounding::None => 0,
            Rounding::Q8Blocks => 1,
            Rounding::Q8KSuperBlocks => 2,
        }
    }

    /// Errors unless rows of `width` values are whole blocks of this rounding.
    fn check(self, width: usize) -> Result<()> {
        let block = match self {
            Rounding::None => return Ok(()),
            Rounding::Q8Blocks => 32,
            Rounding::Q8KSuperBlocks => 256,
        };
        if width.is_multiple_of(block) {
            return Ok(());
        }
        Err(CudaError::Unsupported(format!(
            "{self:?} rounding needs rows of whole {block}-value blocks; these have {width}"
        )))
    }
}

/// The f16 input of a prefill GEMM: `rows` rows of `cols` values of x, each
/// normalised first when `norm` gives (weight, eps), and rounded as
/// `rounding` says first (for quantized weights, so the GEMM sees the
/// activations the CPU backend's matmul sees).
pub fn to_f16(
    gpu: &Gpu,
    x: Span<'_, f32>,
    norm: Option<(Span<'_, f32>, f32)>,
    rounding: Rounding,
    out: Span<'_, u16>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    x.require(rows * cols, "GEMM input")?;
    out.require(rows * cols, "f16 GEMM input")?;
    rounding.check(cols)?;
    let (weight, eps) = match norm {
        Some((weight, eps)) => {
            weight.require(cols, "norm weight")?;
            (weight.into(), eps)
        }
        None => (Arg::Ptr(0), 0.0),
    };
    let args = [
        x.into(),
        weight,
        Arg::F32(eps),
        Arg::I32(rounding.arg()),
        out.into(),
        Arg::I32(int(cols, "cols")?),
    ];
    // SAFETY: matches rows_to_f16(const float*, const float*, float, int, u16*,
    // int); one block per row reads `cols` values of x (and of the norm weight,
    // or none when null) and writes `cols` values of out, all checked above;
    // with rounding, rows are whole blocks (checked) and THREADS whole warps.
    unsafe {
        gpu.launch(
            "rows_to_f16",
            (int(rows, "rows")? as u32, 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// `x[r][i] += bias[i]` for `rows` rows of `bias.len()` values.
pub fn add_row_bias(gpu: &Gpu, x: Span<'_, f32>, bias: Span<'_, f32>, rows: usize) -> Result<()> {
    let width = bias.len();
    x.require(rows * width, "rows to add the bias to")?;
    let args = [
        x.into(),
        bias.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(width, "width")?),
    ];
    // SAFETY: matches add_row_bias(float*, const float*, int, int); indices
    // stay below rows·width (x, checked) and width (bias).
    unsafe {
        gpu.launch(
            "add_row_bias",
            (stride_blocks(gpu, rows * width), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// `out[r][i] = silu(gate_up[r][i]) · gate_up[r][width + i]`.
pub fn swiglu(
    gpu: &Gpu,
    gate_up: Span<'_, f32>,
    out: Span<'_, f32>,
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
    // SAFETY: matches swiglu(const float*, float*, int, int); indices stay
    // below rows·width (out) and rows·2·width (input), both checked.
    unsafe {
        gpu.launch(
            "swiglu",
            (stride_blocks(gpu, rows * width), 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// [`swiglu`] and then [`to_f16`] (without a norm) in one pass: `out[r][i] =
/// f16(silu(gate)·up)`, rounded first as `rounding` says, the same bits as
/// the two calls (the MLP down projection's GEMM input in a prefill batch).
pub fn swiglu_to_f16(
    gpu: &Gpu,
    gate_up: Span<'_, f32>,
    out: Span<'_, u16>,
    (rows, width): (usize, usize),
    rounding: Rounding,
    gelu_table: Option<Span<'_, u16>>,
) -> Result<()> {
    gate_up.require(rows * width * 2, "swiglu input")?;
    out.require(rows * width, "f16 GEMM input")?;
    rounding.check(width)?;
    if let Some(table) = gelu_table {
        table.require(GELU_TABLE_LEN, "GELU table")?;
    }
    let args = [
        gate_up.into(),
        out.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(width, "width")?),
        Arg::I32(rounding.arg()),
        gelu_table.map_or(Arg::Ptr(0), Arg::from),
    ];
    let grid = (stride_blocks(gpu, rows * width), 1);
    // SAFETY: matches swiglu_to_f16(const float*, u16*, int, int, int, const
    // u16*); indices stay below rows·width (out) and rows·2·width (input),
    // both checked, and a GELU table holds an entry for every f16 (checked).
    // With rounding, width is a multiple of the block (checked) and THREADS of
    // whole warps, so every warp runs its shuffles with all lanes.
    unsafe { gpu.launch("swiglu_to_f16", grid, THREADS, 0, &args) }
}

/// Entries of a GELU table: one per f16 bit pattern.
pub const GELU_TABLE_LEN: usize = 1 << 16;

/// `x[r] += rmsnorm(y[r])·weight` for `rows` rows of `weight.len()` values
/// (a norm of a branch's output before it joins the residual), with the CPU
/// backend's rounding.
pub fn post_norm_add(
    gpu: &Gpu,
    x: Span<'_, f32>,
    y: Span<'_, f32>,
    (weight, eps): (Span<'_, f32>, f32),
    rows: usize,
) -> Result<()> {
    let cols = weight.len();
    x.require(rows * cols, "residual")?;
    y.require(rows * cols, "branch output")?;
    let args = [
        x.into(),
        y.into(),
        weight.into(),
        Arg::F32(eps),
        Arg::I32(int(cols, "cols")?),
    ];
    // SAFETY: matches post_norm_add(float*, const float*, const float*, float,
    // int); one block per row reads `cols` values of y and the weight and
    // updates `cols` values of x, all checked above. The kernel waits for the
    // previous one before its first dependent access.
    unsafe {
        gpu.launch_dependent(
            "post_norm_add",
            (int(rows, "rows")? as u32, 1),
            THREADS,
            0,
            &args,
        )
    }
}

/// Dequantizes the whole matrix into `out` (rows × cols f16).
pub fn dequantize_f16(gpu: &Gpu, w: &DeviceMatrix, out: Span<'_, u16>) -> Result<()> {
    let n = w.rows() * w.cols();
    out.require(n, "dequantized matrix")?;
    let kernel = format!(
        "dequantize_f16_{}",
        crate::matrix::kernel_suffix(w.weight_type())
    );
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
    scale: f32,
) -> Result<()> {
    ids.require(n, "token ids")?;
    out.require(n * table.cols(), "embeddings")?;
    let kernel = format!(
        "embed_{}",
        crate::matrix::kernel_suffix(table.weight_type())
    );
    let args = [
        table.quants().into(),
        table.scales().into(),
        ids.into(),
        Arg::I32(int(table.rows(), "vocabulary")?),
        out.into(),
        Arg::I32(int(table.cols(), "cols")?),
        Arg::F32(scale),
    ];
    // SAFETY: matches embed_<type>(const u8*, const u8*, const u32*, int, float*, int, float);
    // one block per id; the kernel checks each id against the vocabulary.
    // The kernel waits for the previous one before its first dependent access.
    unsafe { gpu.launch_dependent(&kernel, (int(n, "tokens")? as u32, 1), THREADS, 0, &args) }
}

/// Values an argmax output buffer holds: the result, then the kernel's
/// scratch (a counter and one value and index per block).
pub fn argmax_output_len(gpu: &Gpu) -> usize {
    2 + 2 * argmax_max_blocks(gpu)
}

fn argmax_max_blocks(gpu: &Gpu) -> usize {
    gpu.info().multiprocessors.max(1)
}

/// Writes the index of the largest of the first `n` values of x into `out[0]`
/// (the lowest index among equals; NaN never wins). `out` holds
/// [`argmax_output_len`] values and must start zeroed (`Buffer::zeros`); the
/// kernel leaves its scratch ready for the next call.
pub fn argmax(gpu: &Gpu, x: Span<'_, f32>, n: usize, out: Span<'_, u32>) -> Result<()> {
    argmax_rows(gpu, x, n, 1, out)
}

/// [`argmax`] of `rows` consecutive rows of `n` values in one launch: row r's
/// index goes to `out[r · argmax_output_len]`, its scratch after it (all zeroed
/// at first, as for [`argmax`]).
pub fn argmax_rows(
    gpu: &Gpu,
    x: Span<'_, f32>,
    n: usize,
    rows: usize,
    out: Span<'_, u32>,
) -> Result<()> {
    if rows == 0 {
        return Ok(());
    }
    let stride = argmax_output_len(gpu);
    x.require(n * rows, "argmax input")?;
    out.require(stride * rows, "argmax output")?;
    // A few thousand values per block of 1024 threads.
    let blocks = n.div_ceil(4096).clamp(1, argmax_max_blocks(gpu));
    let args = [
        x.into(),
        Arg::I32(int(n, "n")?),
        out.into(),
        Arg::I32(int(stride, "argmax stride")?),
    ];
    let grid = (blocks as u32, int(rows, "argmax rows")? as u32);
    // SAFETY: matches argmax(const float*, int, u32*, int); each row reads n
    // values (n·rows checked above) and writes its index and 1 + 2·blocks
    // scratch values within its `stride` (= 2 + 2·max blocks, so they fit),
    // whose counter starts at 0 (the caller's zeroed buffer, reset by every
    // launch). The kernel waits for the previous one before its first
    // dependent access.
    unsafe { gpu.launch_dependent("argmax", grid, 1024, 0, &args) }
}
