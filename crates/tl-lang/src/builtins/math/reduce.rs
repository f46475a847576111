//! Reductions: `sum`, `mean`, `max`, `min`, `argmax`, `argmin` over the whole
//! tensor (giving a number) or over chosen dimensions (giving a tensor), and the
//! two-operand forms `max(a, b)` and `min(a, b)`.
//!
//! Half-precision sums run in f32 (an f16 accumulator stops counting at 2048);
//! integer sums are checked for overflow; bool tensors sum to a count. Over a
//! tensor that tracks a gradient, a whole-tensor reduction is a 0-d tensor
//! rather than a number, so that it can be a loss.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::DType;

use crate::builtins::tensor_args::at_arg;
use crate::builtins::Args;
use crate::convert::scalar_of;
use crate::error::Result;
use crate::ops::dtype::literal_as;
use crate::ops::int_tensor;
use crate::ops::shapes::broadcast_shapes;
use crate::ops::type_of;
use crate::tensor::{candle_dtype, lang_dtype};
use crate::value::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

impl Reduction {
    fn is_arg(self) -> bool {
        matches!(self, Reduction::ArgMax | Reduction::ArgMin)
    }
}

/// `name(x, dim = none, keepdim = false)`.
pub fn reduce(args: &Args, how: Reduction) -> Result<Value> {
    let x = args.dense(0)?;
    let keepdim = if args.has(2) { args.bool(2)? } else { false };
    match reduced_dims(args, &x, how)? {
        None if !keepdim => reduce_all(args, &x, how),
        None => reduce_dims(args, &x, how, &(0..x.rank()).collect::<Vec<_>>(), true),
        Some(dims) => reduce_dims(args, &x, how, &dims, keepdim),
    }
}

/// `max`/`min`: two numbers or two tensors compare elementwise; otherwise a reduction.
pub fn extreme(args: &Args, how: Reduction) -> Result<Value> {
    let first = args.value(0)?;
    match (first, args.values.get(1)) {
        (Value::Int(_) | Value::Float(_), Some(Value::Int(_) | Value::Float(_)))
            if args.len() == 2 =>
        {
            Ok(larger_or_smaller(first, &args.values[1], how))
        }
        (_, Some(Value::Tensor(_))) => elementwise(args, how),
        (Value::Tensor(_), Some(Value::Float(_))) => Err(args
            .error(
                1,
                format!(
                    "argument 2 of {} must be a dimension (an int) or a tensor, found float",
                    args.name
                ),
            )
            .with_hint(format!(
                "`{}(x, tensor(0.5))` compares elementwise",
                args.name
            ))),
        _ => reduce(args, how),
    }
}

fn larger_or_smaller(a: &Value, b: &Value, how: Reduction) -> Value {
    let as_f64 = |v: &Value| match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        _ => f64::NAN,
    };
    let b_wins = match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            (how == Reduction::Max && y > x) || (how == Reduction::Min && y < x)
        }
        _ => {
            (how == Reduction::Max && as_f64(b) > as_f64(a))
                || (how == Reduction::Min && as_f64(b) < as_f64(a))
        }
    };
    if b_wins {
        b.clone()
    } else {
        a.clone()
    }
}

/// `max(a, b)` with at least one tensor: the elementwise larger, broadcast.
fn elementwise(args: &Args, how: Reduction) -> Result<Value> {
    let dense = |i: usize, other: usize| -> Result<CandleTensor> {
        match (&args.values[i], &args.values[other]) {
            (Value::Tensor(t), _) => t.to_dense(),
            (v, Value::Tensor(t)) => literal_as(v, t.dtype()).map_err(at_arg(args, i)),
            _ => args.dense(i),
        }
    };
    let (a, b) = (dense(0, 1)?, dense(1, 0)?);
    let what = format!(
        "take the {} of {} and {}",
        args.name,
        type_of(&a),
        type_of(&b)
    );
    if a.dtype() != b.dtype() {
        let hint = crate::ops::dtype::wider_dtype(lang_dtype(a.dtype()), lang_dtype(b.dtype()));
        return Err(args
            .error(1, format!("cannot {what}: element types differ"))
            .with_hint(format!(
                "convert one side with to_dtype(x, \"{}\")",
                hint.keyword()
            )));
    }
    if broadcast_shapes(a.dims(), b.dims()).is_none() {
        return Err(args.error(1, format!("cannot {what}: shapes do not broadcast")));
    }
    let out = match how {
        Reduction::Max => a.broadcast_maximum(&b)?,
        _ => a.broadcast_minimum(&b)?,
    };
    Ok(Value::tensor(out))
}

/// The dimensions argument 1 names, resolved; `None` for all of them.
fn reduced_dims(args: &Args, x: &CandleTensor, how: Reduction) -> Result<Option<Vec<usize>>> {
    match args.values.get(1) {
        None | Some(Value::None) => Ok(None),
        Some(Value::Int(_)) => Ok(Some(vec![args.dim(1, x.rank())?])),
        Some(_) if how.is_arg() => Err(args.error(
            1,
            format!("argument 2 of {} must be one dimension (an int)", args.name),
        )),
        Some(_) => {
            let mut dims = Vec::new();
            for d in args.ints(1)? {
                let resolved = crate::builtins::resolve_dim(d, x.rank()).ok_or_else(|| {
                    args.error(
                        1,
                        format!(
                            "dimension {d} is out of range for a tensor of rank {}",
                            x.rank()
                        ),
                    )
                })?;
                if dims.contains(&resolved) {
                    return Err(args.error(1, format!("dimension {d} is named twice")));
                }
                dims.push(resolved);
            }
            Ok(Some(dims))
        }
    }
}

/// The whole tensor reduced to one number.
fn reduce_all(args: &Args, x: &CandleTensor, how: Reduction) -> Result<Value> {
    let dtype = lang_dtype(x.dtype());
    let count = x.elem_count();
    if count == 0 {
        return match how {
            Reduction::Sum if dtype.is_float() => Ok(Value::Float(0.0)),
            Reduction::Sum => Ok(Value::Int(0)),
            _ => Err(args.error(
                0,
                format!(
                    "{} of an empty tensor ({}) has no value",
                    args.name,
                    type_of(x)
                ),
            )),
        };
    }
    let flat = x.flatten_all()?;
    if crate::learning::tracks(x) && !how.is_arg() {
        return reduce_tracked(&flat, how);
    }
    match how {
        Reduction::Sum if !dtype.is_float() => scalar_of(&int_tensor::sum(&flat, &[0], false)?),
        Reduction::Sum => Ok(Value::Float(
            flat.to_dtype(CandleDType::F64)?
                .sum_all()?
                .to_vec0::<f64>()?,
        )),
        Reduction::Mean => {
            let total = flat
                .to_dtype(CandleDType::F64)?
                .sum_all()?
                .to_vec0::<f64>()?;
            Ok(Value::Float(total / count as f64))
        }
        Reduction::Max => scalar_of(&flat.max(0)?),
        Reduction::Min => scalar_of(&flat.min(0)?),
        Reduction::ArgMax => scalar_of(&flat.argmax(0)?.to_dtype(CandleDType::I64)?),
        Reduction::ArgMin => scalar_of(&flat.argmin(0)?.to_dtype(CandleDType::I64)?),
    }
}

/// A whole-tensor reduction of a tensor on the gradient's graph: a 0-d
/// tensor, not a number, so the graph goes on to the loss (summed in f32 for
/// half precision, like the reductions over dimensions).
fn reduce_tracked(flat: &CandleTensor, how: Reduction) -> Result<Value> {
    let work = in_f32_if_half(flat)?;
    let out = match how {
        Reduction::Sum => work.sum(0)?,
        Reduction::Mean => work.mean(0)?,
        Reduction::Max => work.max(0)?,
        _ => work.min(0)?,
    };
    Ok(Value::tensor(out.to_dtype(flat.dtype())?))
}

/// The tensor reduced over `dims`.
fn reduce_dims(
    args: &Args,
    x: &CandleTensor,
    how: Reduction,
    dims: &[usize],
    keepdim: bool,
) -> Result<Value> {
    let dtype = lang_dtype(x.dtype());
    if how.is_arg() && dims.len() != 1 {
        return Err(args.error(1, format!("{} needs one dimension", args.name)));
    }
    if x.elem_count() == 0 {
        return empty_result(args, x, how, dims, keepdim);
    }
    let out = match how {
        Reduction::Sum if !dtype.is_float() => int_tensor::sum(x, dims, keepdim)?,
        Reduction::Sum | Reduction::Mean => {
            let work = in_f32_if_half(x)?;
            let reduced = match how {
                Reduction::Sum => work.sum_keepdim(dims)?,
                _ => work.mean_keepdim(dims)?,
            };
            let reduced = squeeze_unless(reduced, dims, keepdim)?;
            let result_dtype = if dtype.is_float() {
                x.dtype()
            } else {
                CandleDType::F32
            };
            reduced.to_dtype(result_dtype)?
        }
        Reduction::Max | Reduction::Min => {
            let mut t = x.clone();
            for &d in dims {
                t = if how == Reduction::Max {
                    t.max_keepdim(d)?
                } else {
                    t.min_keepdim(d)?
                };
            }
            squeeze_unless(t, dims, keepdim)?
        }
        Reduction::ArgMax | Reduction::ArgMin => {
            let d = dims[0];
            let t = if how == Reduction::ArgMax {
                x.argmax_keepdim(d)?
            } else {
                x.argmin_keepdim(d)?
            };
            squeeze_unless(t.to_dtype(CandleDType::I64)?, dims, keepdim)?
        }
    };
    Ok(Value::tensor(out))
}

/// A reduction of a tensor without elements: sums are zeros, the rest need at
/// least one element per result.
fn empty_result(
    args: &Args,
    x: &CandleTensor,
    how: Reduction,
    dims: &[usize],
    keepdim: bool,
) -> Result<Value> {
    let dtype = lang_dtype(x.dtype());
    if let Some(&d) = dims.iter().find(|&&d| x.dims()[d] == 0) {
        if how != Reduction::Sum {
            return Err(args.error(
                1,
                format!(
                    "cannot take {} over dimension {d} of {}: it is empty",
                    args.name,
                    type_of(x)
                ),
            ));
        }
    }
    let shape: Vec<usize> = (0..x.rank())
        .filter_map(|d| match (dims.contains(&d), keepdim) {
            (false, _) => Some(x.dims()[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    let out_dtype = match how {
        Reduction::Sum if !dtype.is_float() => DType::I64,
        Reduction::Mean if !dtype.is_float() => DType::F32,
        Reduction::ArgMax | Reduction::ArgMin => DType::I64,
        _ => dtype,
    };
    Ok(Value::tensor(CandleTensor::zeros(
        shape,
        candle_dtype(out_dtype),
        &Device::Cpu,
    )?))
}

fn in_f32_if_half(x: &CandleTensor) -> Result<CandleTensor> {
    Ok(match x.dtype() {
        CandleDType::F32 | CandleDType::F64 => x.clone(),
        _ => x.to_dtype(CandleDType::F32)?,
    })
}

/// Drops the reduced (now size-1) dimensions unless `keepdim`.
fn squeeze_unless(mut t: CandleTensor, dims: &[usize], keepdim: bool) -> Result<CandleTensor> {
    if keepdim {
        return Ok(t);
    }
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    for &d in sorted.iter().rev() {
        t = t.squeeze(d)?;
    }
    Ok(t)
}
