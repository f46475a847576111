//! Builtins about a tensor's shape: reading it (`shape`, `rank`, `numel`),
//! changing it without touching the elements (`reshape`, `transpose`, `permute`,
//! `squeeze`, `unsqueeze`, `flatten`, `broadcast_to`), cutting and joining
//! (`slice`, `split`, `concat`, `stack`), and element-type conversion and
//! reading one element (`to_dtype`, `item`).

mod join;

use join::{concat, slice, split, stack};

use super::tensor_args::{at_arg, dtype_arg, shape_arg};
use super::{resolve_dim, Args, Builtin, Context, Gradient};
use crate::convert::scalar_of;
use crate::error::Result;
use crate::ops::dtype::cast;
use crate::ops::shapes::{broadcasts_to, checked_numel, format_shape, MAX_RANK};
use crate::ops::type_of;
use crate::tensor::{GpuValue, Tensor};
use crate::value::Value;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "shape",
        signature: "shape(x) -> list[int]",
        min_args: 1,
        max_args: 1,
        summary: "The sizes of the tensor's dimensions.",
        call: shape,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "rank",
        signature: "rank(x) -> int",
        min_args: 1,
        max_args: 1,
        summary: "The number of dimensions.",
        call: rank,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "numel",
        signature: "numel(x) -> int",
        min_args: 1,
        max_args: 1,
        summary: "The number of elements.",
        call: numel,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "reshape",
        signature: "reshape(x, shape) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "The same elements in a new shape; one size may be -1, inferred from the rest.",
        call: reshape,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "transpose",
        signature: "transpose(x, dim0 = -2, dim1 = -1) -> tensor",
        min_args: 1,
        max_args: 3,
        summary: "Swaps two dimensions (by default the last two).",
        call: transpose,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "permute",
        signature: "permute(x, dims) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "Reorders the dimensions: dimension i of the result is dimension dims[i] of x.",
        call: permute,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "squeeze",
        signature: "squeeze(x, dim = none) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "Removes dimension `dim`, which must have size 1, or every size-1 dimension.",
        call: squeeze,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "unsqueeze",
        signature: "unsqueeze(x, dim) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "Inserts a dimension of size 1 at position `dim`.",
        call: unsqueeze,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "concat",
        signature: "concat(tensors, dim = 0) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "Joins a list of tensors along an existing dimension.",
        call: concat,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "stack",
        signature: "stack(tensors, dim = 0) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "Joins a list of same-shaped tensors along a new dimension.",
        call: stack,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "split",
        signature: "split(x, sizes_or_count, dim = 0) -> list[tensor]",
        min_args: 2,
        max_args: 3,
        summary:
            "Cuts a tensor along `dim` into `count` equal parts, or into parts of the listed sizes.",
        call: split,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "slice",
        signature: "slice(x, dim, start, end = none) -> tensor",
        min_args: 3,
        max_args: 4,
        summary:
            "Positions start up to (not including) end of dimension `dim`, like x[..., start:end].",
        call: slice,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "broadcast_to",
        signature: "broadcast_to(x, shape) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "The tensor repeated along size-1 (or missing leading) dimensions to `shape`.",
        call: broadcast_to,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "flatten",
        signature: "flatten(x) -> tensor",
        min_args: 1,
        max_args: 1,
        summary: "The elements as one dimension, in row-major order.",
        call: flatten,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "to_dtype",
        signature: "to_dtype(x, dtype) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "The tensor converted to another element type; to \"bool\" means non-zero.",
        call: to_dtype,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "item",
        signature: "item(x) -> int | float | bool",
        min_args: 1,
        max_args: 1,
        summary:
            "The single element of a one-element tensor as a number (int for integer tensors).",
        call: item,
        gradient: Gradient::NotApplicable,
    },
];

fn shape(_: &mut Context, args: &Args) -> Result<Value> {
    let dims = args.tensor(0)?.dims();
    Ok(Value::list(
        dims.into_iter().map(|d| Value::Int(d as i64)).collect(),
    ))
}

fn rank(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::Int(args.tensor(0)?.dims().len() as i64))
}

fn numel(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::Int(
        args.tensor(0)?.dims().iter().product::<usize>() as i64
    ))
}

fn reshape(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.tensor(0)?;
    let wanted = args.ints(1)?;
    let written = format!(
        "[{}]",
        wanted
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let fail = |why: String| {
        args.error(
            1,
            format!("cannot reshape {} to {written}: {why}", x.type_string()),
        )
    };
    if let Some(bad) = wanted.iter().find(|&&d| d < -1) {
        return Err(fail(format!("{bad} is not a size")));
    }
    let holes = wanted.iter().filter(|&&d| d == -1).count();
    if holes > 1 {
        return Err(fail("only one size may be -1".into()));
    }
    let known = wanted
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .ok_or_else(|| fail("the shape is too large".into()))?;
    let total: usize = x.dims().iter().product();
    let inferred = match (holes, known) {
        (0, _) => None,
        (_, 0) => return Err(fail("-1 cannot be inferred next to a size 0".into())),
        _ if !total.is_multiple_of(known) => {
            return Err(fail(format!(
                "{total} elements do not divide into parts of {known}"
            )))
        }
        _ => Some(total / known),
    };
    let dims: Vec<usize> = wanted
        .iter()
        .map(|&d| {
            if d == -1 {
                inferred.unwrap_or(0)
            } else {
                d as usize
            }
        })
        .collect();
    let fitted = checked_numel(&dims).map_err(|e| fail(e.message))?;
    if fitted != total {
        return Err(fail(format!(
            "{total} elements do not fit a shape of {fitted}"
        )));
    }
    if let Tensor::Gpu(g) = &x {
        return Ok(Value::Tensor(GpuValue::tensor(
            &g.ops,
            g.tensor.reshape(dims)?,
        )));
    }
    Ok(Value::tensor(x.to_dense()?.reshape(dims)?))
}

fn transpose(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.tensor(0)?;
    let rank = x.dims().len();
    if rank < 2 && !(args.has(1) && args.has(2)) {
        return Err(args.error(
            0,
            format!(
                "transpose needs a tensor of rank 2 or more, found {}",
                x.type_string()
            ),
        ));
    }
    let d0 = if args.has(1) {
        args.dim(1, rank)?
    } else {
        rank - 2
    };
    let d1 = if args.has(2) {
        args.dim(2, rank)?
    } else {
        rank - 1
    };
    if let Tensor::Gpu(g) = &x {
        return Ok(Value::Tensor(GpuValue::tensor(
            &g.ops,
            g.ops.transpose(&g.tensor, d0, d1)?,
        )));
    }
    Ok(Value::tensor(x.to_dense()?.transpose(d0, d1)?))
}

fn permute(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    let rank = x.rank();
    let wanted = args.ints(1)?;
    let dims: Option<Vec<usize>> = wanted.iter().map(|&d| resolve_dim(d, rank)).collect();
    let is_permutation =
        |dims: &[usize]| dims.len() == rank && (0..rank).all(|d| dims.contains(&d));
    match dims {
        Some(dims) if is_permutation(&dims) => Ok(Value::tensor(x.permute(dims)?)),
        _ => Err(args.error(
            1,
            format!(
                "{wanted:?} is not a permutation of the {rank} dimensions of {}",
                type_of(&x)
            ),
        )),
    }
}

fn squeeze(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    if !args.has(1) {
        let dims: Vec<usize> = x.dims().iter().copied().filter(|&d| d != 1).collect();
        return Ok(Value::tensor(x.reshape(dims)?));
    }
    let d = args.dim(1, x.rank())?;
    let size = x.dims()[d];
    if size != 1 {
        return Err(args.error(
            1,
            format!(
                "cannot squeeze dimension {d} of {}: its size is {size}, not 1",
                type_of(&x)
            ),
        ));
    }
    Ok(Value::tensor(x.squeeze(d)?))
}

fn unsqueeze(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    let d = args.int(1)?;
    if x.rank() == MAX_RANK {
        return Err(args.error(
            0,
            format!(
                "cannot unsqueeze {}: a tensor has at most {MAX_RANK} dimensions",
                type_of(&x)
            ),
        ));
    }
    // The new dimension may go anywhere from before the first to after the last.
    let at = resolve_dim(d, x.rank() + 1).ok_or_else(|| {
        args.error(
            1,
            format!(
                "dimension {d} is out of range for unsqueezing {} (from {} to {})",
                type_of(&x),
                -(x.rank() as i64) - 1,
                x.rank()
            ),
        )
    })?;
    Ok(Value::tensor(x.unsqueeze(at)?))
}

fn broadcast_to(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    let shape = shape_arg(args, 1)?;
    if !broadcasts_to(x.dims(), &shape) {
        return Err(args.error(
            1,
            format!(
                "cannot broadcast {} to {}",
                type_of(&x),
                format_shape(&shape)
            ),
        ));
    }
    // Materialized: a stride-0 view would surprise code that writes through it.
    Ok(Value::tensor(x.broadcast_as(shape)?.contiguous()?))
}

fn flatten(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::tensor(args.dense(0)?.flatten_all()?))
}

fn to_dtype(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    if !args.has(1) {
        return Err(args.error(1, "to_dtype needs an element type, like \"float32\""));
    }
    let dtype = dtype_arg(args, 1, tl_syntax::DType::F32)?;
    Ok(Value::tensor(cast(&x, dtype)?))
}

fn item(_: &mut Context, args: &Args) -> Result<Value> {
    match args.value(0)? {
        v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_)) => Ok(v.clone()),
        _ => {
            let x = args.dense(0)?;
            if x.elem_count() != 1 {
                return Err(args.error(
                    0,
                    format!("item needs a tensor of one element, found {}", type_of(&x)),
                ));
            }
            scalar_of(&x).map_err(at_arg(args, 0))
        }
    }
}

#[cfg(test)]
mod tests;
