//! Neural-network builtins on dense tensors: `matmul`, `softmax`,
//! `log_softmax`, `layer_norm`, `causal_mask` and `einsum`. (`linear`,
//! `rms_norm`, `rope`, `attention` and `embedding`, which also take quantized
//! weights, are in `engine_ops.rs`.)
//!
//! Half-precision inputs are normalized in f32 and converted back: exponentials
//! and variances in f16 lose too much to match a reference implementation.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};

use super::tensor_args::{at_arg, at_call, float_arg};
use super::{Args, Builtin, Context, Gradient};
use crate::error::Result;
use crate::ops::shapes::checked_numel;
use crate::ops::{einsum, matmul, type_of};
use crate::value::Value;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "matmul",
        signature: "matmul(a, b) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "Matrix product, the same as `a @ b` (batch dimensions broadcast; vectors as in NumPy).",
        call: matmul_builtin,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "softmax",
        signature: "softmax(x, dim = -1) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "exp(x) normalized to sum to 1 along `dim`, computed stably (max subtracted first).",
        call: softmax,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "log_softmax",
        signature: "log_softmax(x, dim = -1) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "log(softmax(x, dim)), computed without forming the softmax.",
        call: log_softmax,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "layer_norm",
        signature: "layer_norm(x, weight, bias = none, eps = 1e-5) -> tensor",
        min_args: 2,
        max_args: 4,
        summary: "Normalizes the last dimension to mean 0 and variance 1, then scales by `weight` and shifts by `bias`.",
        call: layer_norm,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "causal_mask",
        signature: "causal_mask(n, m = n, start = 0) -> tensor",
        min_args: 1,
        max_args: 3,
        summary: "float32[n, m] with 0 where key j <= start + i and -inf elsewhere, to add to attention scores.",
        call: causal_mask,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "einsum",
        signature: "einsum(spec, operands...) -> tensor",
        min_args: 2,
        max_args: usize::MAX,
        summary: "Einstein summation over any number of tensors of one element type, with an explicit output: \"ij,jk->ik\", \"bhqd,bhkd->bhqk\", \"ii->i\", \"ij,jk,kl->il\" (contracted pairwise, cheapest pair first). Ints sum exactly below 2^53; on bools it is a join: true where some term of the sum is true.",
        call: einsum_builtin,
        gradient: Gradient::Differentiable,
    },
];

fn matmul_builtin(_: &mut Context, args: &Args) -> Result<Value> {
    let (a, b) = (args.dense(0)?, args.dense(1)?);
    matmul(&a, &b).map(Value::tensor).map_err(at_call(args))
}

/// The last dimension of `x`, refusing 0-dimensional tensors.
fn last_dim(args: &Args, x: &CandleTensor) -> Result<usize> {
    x.rank().checked_sub(1).ok_or_else(|| {
        args.error(
            0,
            format!(
                "{} needs a tensor of at least one dimension, found {}",
                args.name,
                type_of(x)
            ),
        )
    })
}

/// Argument `i` as a dimension of `x`, by default the last.
fn dim_or_last(args: &Args, i: usize, x: &CandleTensor) -> Result<usize> {
    let last = last_dim(args, x)?;
    if args.has(i) {
        args.dim(i, x.rank())
    } else {
        Ok(last)
    }
}

fn in_f32(x: &CandleTensor) -> Result<CandleTensor> {
    Ok(x.to_dtype(CandleDType::F32)?)
}

fn softmax(_: &mut Context, args: &Args) -> Result<Value> {
    let x = float_arg(args, 0)?;
    let dim = dim_or_last(args, 1, &x)?;
    if x.elem_count() == 0 {
        return Ok(Value::tensor(x));
    }
    let work = in_f32(&x)?;
    // candle's fused kernel has no backward pass: on the gradient's graph
    // the softmax is written out in differentiable ops.
    let out = if dim == x.rank() - 1 && !crate::learning::tracks(&work) {
        candle_nn::ops::softmax_last_dim(&work.contiguous()?)?
    } else {
        let shifted = work.broadcast_sub(&work.max_keepdim(dim)?)?.exp()?;
        shifted.broadcast_div(&shifted.sum_keepdim(dim)?)?
    };
    Ok(Value::tensor(out.to_dtype(x.dtype())?))
}

fn log_softmax(_: &mut Context, args: &Args) -> Result<Value> {
    let x = float_arg(args, 0)?;
    let dim = dim_or_last(args, 1, &x)?;
    if x.elem_count() == 0 {
        return Ok(Value::tensor(x));
    }
    let work = in_f32(&x)?;
    let shifted = work.broadcast_sub(&work.max_keepdim(dim)?)?;
    let log_total = shifted.exp()?.sum_keepdim(dim)?.log()?;
    Ok(Value::tensor(
        shifted.broadcast_sub(&log_total)?.to_dtype(x.dtype())?,
    ))
}

fn layer_norm(_: &mut Context, args: &Args) -> Result<Value> {
    let x = float_arg(args, 0)?;
    let last = last_dim(args, &x)?;
    let size = x.dims()[last];
    let vector = |i: usize, what: &str| -> Result<CandleTensor> {
        let t = float_arg(args, i)?;
        if t.dims() != [size] {
            return Err(args.error(
                i,
                format!(
                    "the {what} of layer_norm must have shape [{size}] to match the last dimension of {}, found {}",
                    type_of(&x),
                    type_of(&t)
                ),
            ));
        }
        in_f32(&t)
    };
    let weight = vector(1, "weight")?;
    let bias = if args.has(2) {
        Some(vector(2, "bias")?)
    } else {
        None
    };
    let eps = args.opt_float(3)?.unwrap_or(1e-5);
    if x.elem_count() == 0 {
        return Ok(Value::tensor(x));
    }
    let work = in_f32(&x)?;
    let centered = work.broadcast_sub(&work.mean_keepdim(last)?)?;
    let variance = centered.sqr()?.mean_keepdim(last)?;
    let normed = centered.broadcast_div(&variance.affine(1.0, eps)?.sqrt()?)?;
    let mut out = normed.broadcast_mul(&weight)?;
    if let Some(bias) = bias {
        out = out.broadcast_add(&bias)?;
    }
    Ok(Value::tensor(out.to_dtype(x.dtype())?))
}

fn causal_mask(_: &mut Context, args: &Args) -> Result<Value> {
    let n = args.usize(0)?;
    let m = if args.has(1) { args.usize(1)? } else { n };
    let start = if args.has(2) { args.usize(2)? } else { 0 };
    checked_numel(&[n, m]).map_err(at_arg(args, 0))?;
    Ok(Value::tensor(causal_mask_tensor(n, m, start)?))
}

/// float32[n, m]: 0 where key j <= start + i, -inf elsewhere (the caller
/// has checked that n·m elements can be allocated).
pub(crate) fn causal_mask_tensor(n: usize, m: usize, start: usize) -> Result<CandleTensor> {
    let mut values = Vec::with_capacity(n * m);
    for query in 0..n {
        // Query i sits at position start + i and may see every key up to it.
        let visible = start.saturating_add(query);
        values.extend((0..m).map(|key| {
            if key <= visible {
                0.0f32
            } else {
                f32::NEG_INFINITY
            }
        }));
    }
    Ok(CandleTensor::from_vec(values, (n, m), &Device::Cpu)?)
}

fn einsum_builtin(_: &mut Context, args: &Args) -> Result<Value> {
    let spec = args.str(0)?;
    let operands = (1..args.len())
        .map(|i| args.dense(i))
        .collect::<Result<Vec<_>>>()?;
    einsum::check_spec(spec, operands.len()).map_err(at_arg(args, 0))?;
    einsum::einsum(spec, &operands)
        .map(Value::tensor)
        .map_err(at_call(args))
}

#[cfg(test)]
mod tests;
