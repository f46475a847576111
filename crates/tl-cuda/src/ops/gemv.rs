//! Matrix × vector for one token, with the step before or after it folded in.

use crate::buffer::Span;
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu, DEFAULT_SHARED_LIMIT};
use crate::matrix::{is_k_quant, DeviceMatrix, GgmlType, SummationOrder};
use crate::ops::attention::{Heads, LayerCache};
use crate::ops::gemv_mma::{self, MmaEpilogue, MmaLaunch};
use crate::ops::gemv_tile::{TileKind, TileShape};
use crate::ops::{blocks_for, int, l2_prefetch_level};

/// Static shared memory of the kernels: the norm's scratch and (float
/// kernels) the RoPE rows, with room for what the compiler lays out beside
/// them (known only once a kernel is loaded).
pub(crate) const STATIC_SHARED: usize = 1024;

/// Bytes of shared memory x takes when staged: Q8_K super-blocks (values,
/// then the scale per 256 and the sum per 16) for K-quant weights, Q8 blocks
/// (values, then scale, scaled sum and integer sum per block) for the other
/// quantized types, f32 for float weights.
pub(crate) fn staged_bytes(weight_type: GgmlType, cols: usize) -> usize {
    if is_k_quant(weight_type) {
        cols + cols / 256 * 4 + cols / 16 * 4
    } else if weight_type.is_quantized() {
        cols + cols / 32 * 12
    } else {
        cols * 4
    }
}

/// How one GEMV is launched.
struct Launch {
    /// The kernel's name after `gemv_<mode>`.
    kernel_suffix: String,
    /// Blocks along the grid's x (one sequence).
    blocks: u32,
    threads: u32,
    shared_bytes: usize,
    /// Rows per tile (quantized kernels; 0 for float ones).
    tile_rows: usize,
}

/// The launch of a product of `w` giving `out_rows` rows for each of
/// `sequences` vectors. Quantized matrices take tiles of rows (see
/// `ops::gemv_tile`); float matrices a warp per row, each block staging x
/// once for many rows, one block per multiprocessor (by default) with every
/// row in flight (the options' `gemv_warps` and `gemv_blocks_per_sm`).
fn launch_shape(
    gpu: &Gpu,
    (w, order): (&DeviceMatrix, SummationOrder),
    out_rows: usize,
    sequences: usize,
    pairs: bool,
) -> Result<Launch> {
    let cols = w.cols();
    let staged = staged_bytes(w.weight_type(), cols);
    let multiprocessors = gpu.info().multiprocessors;
    if w.weight_type().is_quantized() {
        let kind = TileKind {
            weight_type: w.weight_type(),
            order,
            pairs,
        };
        let limit = gpu.info().shared_per_block_optin.max(DEFAULT_SHARED_LIMIT) - STATIC_SHARED;
        let shape = TileShape::new(
            kind,
            out_rows,
            sequences,
            cols,
            staged,
            limit,
            multiprocessors,
            gpu.options(),
        )?;
        return Ok(Launch {
            kernel_suffix: w.gemv_suffix(order),
            blocks: int(out_rows.div_ceil(shape.rows), "tiles")? as u32,
            threads: shape.threads as u32,
            shared_bytes: shape.shared_bytes,
            tile_rows: shape.rows,
        });
    }
    if staged + STATIC_SHARED > DEFAULT_SHARED_LIMIT {
        return Err(CudaError::Unsupported(format!(
            "a {:?} matrix with rows of {cols} values needs {} bytes of shared memory, more than the kernels' {DEFAULT_SHARED_LIMIT}",
            w.weight_type(),
            staged + STATIC_SHARED
        )));
    }
    let warps = gpu.options().gemv_warps;
    let cap = multiprocessors * gpu.options().gemv_blocks_per_sm;
    Ok(Launch {
        kernel_suffix: format!("{}_l32", w.gemv_suffix(order)),
        blocks: blocks_for(out_rows, warps).min(cap.max(1) as u32),
        threads: (warps * 32) as u32,
        shared_bytes: staged,
        tile_rows: 0,
    })
}

/// What the product is combined with.
#[derive(Debug, Clone, Copy)]
pub enum Epilogue<'a> {
    /// `y = W·x`
    Plain,
    /// `y += W·x`
    Residual,
    /// `y = W·rmsnorm(x)·weight`
    Norm { weight: Span<'a, f32>, eps: f32 },
    /// `y = act(W_top·n) · (W_bottom·n)` with `n = rmsnorm(x)·weight`; W stacks
    /// the gate rows over the up rows and y has half as many rows as W. `act`
    /// is silu (SwiGLU), or GELU from `gelu_table` (GeGLU; see
    /// [`crate::ops::rows::GELU_TABLE_LEN`]).
    NormGated {
        weight: Span<'a, f32>,
        eps: f32,
        gelu_table: Option<Span<'a, u16>>,
    },
    /// The fused QKV projection of one token: `y = W·rmsnorm(x)·weight`, then
    /// RoPE at `*position` on the query rows (left in y) and the key rows, and
    /// the keys and values written to the cache at `*position` (their rows of
    /// y are left unwritten). As `rope_store_kv` for one row. W holds the
    /// QKV rows from `first_row` on (queries, then keys, then values): all of
    /// them from 0, or, for a projection split where the weight type changes,
    /// the queries and keys from 0, the keys from the query width or the
    /// values from there on (see [`qkv_part_widths`]).
    NormRope {
        weight: Span<'a, f32>,
        eps: f32,
        heads: Heads,
        cos_sin: Span<'a, f32>,
        position: Span<'a, i32>,
        cache: LayerCache<'a>,
        first_row: usize,
    },
}

/// Runs `y (op)= W·x` for one vector `x` of `W.cols()` values.
pub fn gemv(
    gpu: &Gpu,
    w: &DeviceMatrix,
    x: Span<'_, f32>,
    y: Span<'_, f32>,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    gemv_batched(gpu, w, x, y, epilogue, (1, Batching::Alone), None)
}

/// How llama.cpp would batch the vectors of a product, which decides how a
/// K-quant row is rounded (`SummationOrder::alone` and `together`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batching {
    /// Each vector on its own: decode steps, whatever else runs beside them.
    Alone,
    /// The vectors as one batch: a short prompt's rows, or a language
    /// `linear` of several rows.
    Together,
}

/// The kernels' `next_*` arguments: where the next matrix's weights are and
/// how many of their bytes (its first rows; their scales in proportion) to
/// ask L2 for while `w` is multiplied. Nothing without a next matrix, below
/// prefetch level 2, for float `w` (those GEMVs are busy streaming their own
/// weights and start no dependent early, so a prefetch only competes with
/// them: a 1.1B model's F16 decode measured 6% slower with it), and at most a third
/// of L2 or what fits beside `w` (more would be evicted before its use; half
/// of L2 beside `w` measured 1% slower on a 1.1B model's Q8_0, whose gate/up
/// matrix leaves little room in half).
fn next_matrix_args(gpu: &Gpu, w: &DeviceMatrix, next: Option<&DeviceMatrix>) -> Result<[Arg; 4]> {
    let l2 = gpu.info().l2_bytes;
    let room = (l2 / 3).min(l2.saturating_sub(w.bytes()));
    let next = next.filter(|_| l2_prefetch_level(gpu) >= 2 && w.weight_type().is_quantized());
    let Some(next) = next.filter(|_| room > 0) else {
        return Ok([Arg::Ptr(0), Arg::I32(0), Arg::Ptr(0), Arg::I32(0)]);
    };
    let (quants, scales) = (next.quants(), next.scales());
    let quant_bytes = quants.len().min(room);
    let scale_bytes = if quants.is_empty() {
        0
    } else {
        // The same share of rows: scales lie in row order like the quants.
        (scales.len() as u128 * quant_bytes as u128 / quants.len() as u128) as usize
    };
    Ok([
        quants.into(),
        Arg::I32(int(quant_bytes, "prefetch bytes")?),
        scales.into(),
        Arg::I32(int(scale_bytes, "prefetch bytes")?),
    ])
}

/// [`gemv`] for `sequences` vectors at once (decode of several sequences):
/// x and y hold one vector per sequence, one after another; with RoPE,
/// sequence s is at `position[s]` and its caches are in the layer cache's
/// tables. Each sequence's numbers equal those of a [`gemv`] for it alone.
///
/// `next`, the matrix the step multiplies by next (after an attention call,
/// say), is only a hint: its first weights are requested into L2 while this
/// product runs, so the next GEMV's loads do not wait on device memory.
pub fn gemv_batched(
    gpu: &Gpu,
    w: &DeviceMatrix,
    x: Span<'_, f32>,
    y: Span<'_, f32>,
    epilogue: Epilogue<'_>,
    sequences: (usize, Batching),
    next: Option<&DeviceMatrix>,
) -> Result<()> {
    let out_rows = output_rows(w, epilogue);
    let y = Output {
        y,
        stride: out_rows,
    };
    gemv_batched_into(gpu, w, x, y, epilogue, sequences, next, None)
}

/// Where a batched product's rows go: sequence s's at `y[s·stride..]`.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    pub y: Span<'a, f32>,
    /// Values from one sequence's rows to the next's, at least the product's
    /// rows (more when it writes a part of wider rows: the keys of a QKV
    /// output, say).
    pub stride: usize,
}

/// Rows of the product's output (half the matrix's for SwiGLU).
fn output_rows(w: &DeviceMatrix, epilogue: Epilogue<'_>) -> usize {
    match epilogue {
        Epilogue::NormGated { .. } => w.rows() / 2,
        _ => w.rows(),
    }
}

/// A post-norm branch added to x before a product (see gemv.cu's `PreAdd`):
/// `out = x + rmsnorm(branch)·weight` (each sequence's `cols` values), and
/// the product reads `out`. `out` must not overlap x or the branch.
#[derive(Debug, Clone, Copy)]
pub struct PreAdd<'a> {
    pub branch: Span<'a, f32>,
    pub weight: Span<'a, f32>,
    pub out: Span<'a, f32>,
}

/// [`gemv_batched`] writing each sequence's rows where `output` says, so that
/// products of matrices of different types can fill one output side by side
/// (each sequence's numbers are still those of a lone [`gemv`]); with
/// `pre_add`, after adding a post-norm branch to x, which saves the launch
/// that would add it.
///
/// `sequences` is the number of vectors and how llama.cpp would batch them:
/// the K-quant rows of a batch may take two orders (and launches).
#[allow(clippy::too_many_arguments)]
pub fn gemv_batched_into(
    gpu: &Gpu,
    w: &DeviceMatrix,
    x: Span<'_, f32>,
    output: Output<'_>,
    epilogue: Epilogue<'_>,
    (sequences, batching): (usize, Batching),
    next: Option<&DeviceMatrix>,
    pre_add: Option<PreAdd<'_>>,
) -> Result<()> {
    let order = w.summation();
    let runs = match batching {
        Batching::Alone => [(sequences, order.alone()), (0, order)],
        Batching::Together => order.together(sequences),
    };
    let runs: Vec<_> = runs.into_iter().filter(|&(count, _)| count > 0).collect();
    if let [(_, order)] = runs[..] {
        return launch_gemv(
            gpu,
            w,
            (order, sequences),
            x,
            output,
            epilogue,
            next,
            pre_add,
        );
    }
    if runs.is_empty() {
        return Ok(());
    }
    if matches!(epilogue, Epilogue::NormRope { .. }) {
        return Err(CudaError::Unsupported(
            "a fused RoPE product over rows of two summation orders".into(),
        ));
    }
    let (cols, out_rows) = (w.cols(), output_rows(w, epilogue));
    let mut first = 0;
    for (count, order) in runs {
        let x = x.sub(first * cols, count * cols)?;
        let y_len = (count - 1) * output.stride + out_rows;
        let y = Output {
            y: output.y.sub(first * output.stride, y_len)?,
            ..output
        };
        let pre_add = match pre_add {
            Some(p) => Some(PreAdd {
                branch: p.branch.sub(first * cols, count * cols)?,
                out: p.out.sub(first * cols, count * cols)?,
                ..p
            }),
            None => None,
        };
        launch_gemv(gpu, w, (order, count), x, y, epilogue, next, pre_add)?;
        first += count;
    }
    Ok(())
}

/// One launch of [`gemv_batched_into`], for `sequences` vectors in `order`.
#[allow(clippy::too_many_arguments)]
fn launch_gemv(
    gpu: &Gpu,
    w: &DeviceMatrix,
    (order, sequences): (SummationOrder, usize),
    x: Span<'_, f32>,
    output: Output<'_>,
    epilogue: Epilogue<'_>,
    next: Option<&DeviceMatrix>,
    pre_add: Option<PreAdd<'_>>,
) -> Result<()> {
    if sequences == 0 {
        return Ok(());
    }
    let (rows, cols) = (w.rows(), w.cols());
    x.require(cols * sequences, "gemv input")?;
    let out_rows = output_rows(w, epilogue);
    let Output { y, stride } = output;
    if stride < out_rows {
        return Err(CudaError::Unsupported(format!(
            "a gemv output stride of {stride} is less than its {out_rows} rows"
        )));
    }
    y.require((sequences - 1) * stride + out_rows, "gemv output")?;
    let pairs = matches!(epilogue, Epilogue::NormGated { .. });
    let (mode, norm) = match epilogue {
        Epilogue::Plain => ("", None),
        Epilogue::Residual => ("residual_", None),
        Epilogue::Norm { weight, eps } => ("norm_", Some((weight, eps))),
        Epilogue::NormGated { weight, eps, .. } => ("norm_gated_", Some((weight, eps))),
        Epilogue::NormRope { weight, eps, .. } => ("norm_rope_", Some((weight, eps))),
    };
    // A lone vector takes the lean kernel; batches (or a cache table) the
    // batched one, which also reads per-sequence positions and caches.
    let tables = match epilogue {
        Epilogue::NormRope { cache, .. } => cache.tables.is_some(),
        _ => false,
    };
    let batched = sequences > 1 || tables;
    // Every variant takes the same parameters; those it does not use are 0.
    let input = input_args(x, norm, cols)?;
    let epilogue_args = epilogue_args(epilogue, (sequences, batched), rows)?;
    let pre_add_args = pre_add_args(pre_add, cols, sequences)?;
    let kind = match epilogue {
        Epilogue::Plain | Epilogue::Norm { .. } => MmaEpilogue::Plain,
        Epilogue::Residual => MmaEpilogue::Residual,
        Epilogue::NormGated { .. } => MmaEpilogue::Gated,
        Epilogue::NormRope { .. } => MmaEpilogue::Rope,
    };
    let tensor_cores = batched
        .then(|| gemv_mma::plan(gpu, w, order, sequences, kind))
        .flatten();
    if let Some(plan) = tensor_cores {
        let launch = MmaLaunch {
            w,
            order,
            plan,
            input,
            pre_add: pre_add_args,
            y: y.into(),
            out_rows,
            y_stride: stride,
            epilogue_args: &epilogue_args,
        };
        // SAFETY: the spans, the norm weight, the branch and the RoPE or
        // GELU tables were checked above for `sequences` vectors of `cols`
        // values and `out_rows` rows at `stride`, and the caller keeps every
        // position below the caches' capacity (the host checks room before
        // every step).
        return unsafe { launch.run(gpu) };
    }
    let launch = launch_shape(gpu, (w, order), out_rows, sequences, pairs)?;
    let family = if batched { "gemv_batched" } else { "gemv" };
    let kernel = format!("{family}_{mode}{}", launch.kernel_suffix);
    let mut args = vec![w.quants().into(), w.scales().into()];
    args.extend(input);
    args.extend([
        y.into(),
        Arg::I32(int(out_rows, "rows")?),
        Arg::I32(int(cols, "cols")?),
    ]);
    args.extend(epilogue_args);
    args.push(Arg::I32(l2_prefetch_level(gpu)));
    args.extend(next_matrix_args(gpu, w, next)?);
    args.push(Arg::I32(int(launch.tile_rows, "tile rows")?));
    args.push(Arg::I32(int(stride, "output stride")?));
    args.extend(pre_add_args);
    let sequences = int(sequences, "sequences")? as u32;
    let (grid, threads, shared) = (
        (launch.blocks, sequences),
        launch.threads,
        launch.shared_bytes,
    );
    // Only quantized GEMVs start early (see gemv.cu).
    // SAFETY: the argument list matches gemv.cu's signatures for this variant;
    // x (and a pre-add's branch and output) holds cols values per sequence, y
    // out_rows at each multiple of the stride (checked above) per sequence, the norm
    // weight cols, the positions and cache tables one per sequence, and the matrix's
    // buffers hold rows × cols values in its type's split layout (checked on
    // upload), so every access is inside the spans; the dynamic shared memory
    // holds the staged x and a tile's planes (launch_shape). With RoPE the table and
    // caches hold `capacity` positions and the caller keeps *position below it
    // (the host checks room before every step).
    // The kernel waits for the previous one before its first dependent access.
    unsafe {
        if w.weight_type().is_quantized() {
            gpu.launch_dependent(&kernel, grid, threads, shared as u32, &args)
        } else {
            gpu.launch(&kernel, grid, threads, shared as u32, &args)
        }
    }
}

/// The kernels' x, norm weight and eps arguments (0s without a norm), the
/// weight checked for `cols` values.
fn input_args(
    x: Span<'_, f32>,
    norm: Option<(Span<'_, f32>, f32)>,
    cols: usize,
) -> Result<[Arg; 3]> {
    Ok(match norm {
        Some((weight, eps)) => {
            weight.require(cols, "norm weight")?;
            [x.into(), weight.into(), Arg::F32(eps)]
        }
        None => [x.into(), Arg::Ptr(0), Arg::F32(0.0)],
    })
}

/// The kernels' eight RoPE/cache arguments: the rotation's for
/// `Epilogue::NormRope` (with the per-sequence cache tables when `batched`),
/// else 0s but for GeGLU's table, which the gated variant reads in RoPE's
/// place. Checked for `sequences` positions and a matrix of `rows` rows.
fn epilogue_args(
    epilogue: Epilogue<'_>,
    (sequences, batched): (usize, bool),
    rows: usize,
) -> Result<Vec<Arg>> {
    if let Epilogue::NormRope {
        heads,
        cos_sin,
        position,
        cache,
        first_row,
        ..
    } = epilogue
    {
        position.require(sequences, "positions")?;
        let mut rope = rope_args(heads, cos_sin, position, cache, (first_row, rows))?;
        if batched {
            // The batched kernels take the tables in the caches' places.
            let [keys, values] = cache.table_args(sequences)?;
            let n = rope.len();
            rope[n - 2] = keys;
            rope[n - 1] = values;
        }
        return Ok(rope);
    }
    let table = match epilogue {
        Epilogue::NormGated {
            gelu_table: Some(table),
            ..
        } => {
            table.require(crate::ops::rows::GELU_TABLE_LEN, "GELU table")?;
            table.into()
        }
        _ => Arg::Ptr(0),
    };
    Ok(vec![
        table,
        Arg::Ptr(0),
        Arg::I32(0),
        Arg::I32(0),
        Arg::I32(0),
        Arg::I32(0),
        Arg::Ptr(0),
        Arg::Ptr(0),
    ])
}

/// The kernels' post-norm branch, its weight and x's output (0s without
/// one), checked for `sequences` vectors of `cols` values.
fn pre_add_args(pre_add: Option<PreAdd<'_>>, cols: usize, sequences: usize) -> Result<[Arg; 3]> {
    Ok(match pre_add {
        Some(PreAdd {
            branch,
            weight,
            out,
        }) => {
            branch.require(cols * sequences, "post-norm branch")?;
            weight.require(cols, "post-norm weight")?;
            out.require(cols * sequences, "residual after the branch")?;
            [branch.into(), weight.into(), out.into()]
        }
        None => [Arg::Ptr(0), Arg::Ptr(0), Arg::Ptr(0)],
    })
}

/// The query and key widths `gemv_norm_rope_*` takes for a matrix holding
/// the QKV rows [first_row, first_row + rows): its row r is a query below the
/// first, a key below their sum, else a value (r less both). `None` when the
/// rows do not start at the queries, the keys or the values, or run past the
/// values.
pub fn qkv_part_widths(heads: &Heads, first_row: usize, rows: usize) -> Option<(usize, usize)> {
    let (q, kv) = (heads.q_width(), heads.kv_width());
    if rows == 0 || first_row + rows > q + 2 * kv {
        return None;
    }
    match first_row {
        0 => Some((q, kv)),
        f if f == q => Some((0, kv)),
        f if f == q + kv => Some((0, 0)),
        _ => None,
    }
}

/// The RoPE/cache arguments of `gemv_norm_rope_*`, after checking that the
/// matrix holds `rows` rows of these heads' QKV projection from `first_row`
/// (a whole projection: all its rows from 0).
fn rope_args(
    heads: Heads,
    cos_sin: Span<'_, f32>,
    position: Span<'_, i32>,
    cache: LayerCache<'_>,
    (first_row, rows): (usize, usize),
) -> Result<Vec<Arg>> {
    heads.check()?;
    cache.check(&heads)?;
    let Some((q_width, kv_width)) = qkv_part_widths(&heads, first_row, rows) else {
        return Err(CudaError::Unsupported(format!(
            "a QKV projection with RoPE takes rows from the queries, the keys or the values \
             on, up to {}; this matrix has rows {first_row}..{}",
            heads.q_width() + 2 * heads.kv_width(),
            first_row + rows
        )));
    };
    cos_sin.require(cache.capacity * heads.head_dim, "rope table")?;
    position.require(1, "position")?;
    Ok(vec![
        cos_sin.into(),
        position.into(),
        Arg::I32(int(q_width, "query width")?),
        Arg::I32(int(kv_width, "key/value width")?),
        Arg::I32(int(heads.head_dim, "head dim")?),
        Arg::I32(int(cache.capacity, "capacity")?),
        cache.keys.into(),
        cache.values.into(),
    ])
}
