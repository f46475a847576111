//! Cutting and joining tensors: `concat`, `stack`, `split`, `slice`.

use candle_core::Tensor as CandleTensor;

use crate::builtins::tensor_args::at_arg;
use crate::builtins::{resolve_dim, Args, Context};
use crate::convert::value_to_dense;
use crate::error::Result;
use crate::indexing::resolve_range;
use crate::ops::shapes::{checked_numel, format_shape, MAX_LIST_ITEMS};
use crate::ops::type_of;
use crate::value::Value;

/// The list argument's items as tensors of one element type.
fn tensor_list(args: &Args) -> Result<Vec<CandleTensor>> {
    let items = args.list(0)?;
    if items.is_empty() {
        return Err(args.error(
            0,
            format!(
                "{} needs at least one tensor, found an empty list",
                args.name
            ),
        ));
    }
    let tensors = items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            value_to_dense(item).map_err(|_| {
                args.error(
                    0,
                    format!(
                        "item {k} of the list is a {}, not a tensor",
                        item.type_name()
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(other) = tensors.iter().find(|t| t.dtype() != tensors[0].dtype()) {
        return Err(args
            .error(
                0,
                format!(
                    "cannot {} {} and {}: element types differ",
                    args.name,
                    type_of(&tensors[0]),
                    type_of(other)
                ),
            )
            .with_hint("convert them with to_dtype(x, \"float32\")"));
    }
    Ok(tensors)
}

pub(super) fn concat(_: &mut Context, args: &Args) -> Result<Value> {
    let tensors = tensor_list(args)?;
    let first = &tensors[0];
    let dim = if args.has(1) {
        args.dim(1, first.rank())?
    } else {
        0
    };
    if first.rank() == 0 {
        return Err(args.error(0, "cannot concat 0-dimensional tensors; use stack"));
    }
    for t in &tensors[1..] {
        let agree = t.rank() == first.rank()
            && (0..t.rank()).all(|d| d == dim || t.dims()[d] == first.dims()[d]);
        if !agree {
            return Err(args.error(
                0,
                format!(
                    "cannot concat {} and {} along dimension {dim}: the other dimensions differ",
                    type_of(first),
                    type_of(t)
                ),
            ));
        }
    }
    let mut joined = first.dims().to_vec();
    joined[dim] = (tensors.iter()).fold(0usize, |sum, t| sum.saturating_add(t.dims()[dim]));
    checked_numel(&joined).map_err(at_arg(args, 0))?;
    Ok(Value::tensor(CandleTensor::cat(&tensors, dim)?))
}

pub(super) fn stack(_: &mut Context, args: &Args) -> Result<Value> {
    let tensors = tensor_list(args)?;
    let first = &tensors[0];
    let dim = match args.opt_int(1)? {
        Some(d) => resolve_dim(d, first.rank() + 1).ok_or_else(|| {
            args.error(
                1,
                format!(
                    "dimension {d} is out of range for stacking {}",
                    type_of(first)
                ),
            )
        })?,
        None => 0,
    };
    if let Some(t) = tensors.iter().find(|t| t.dims() != first.dims()) {
        return Err(args.error(
            0,
            format!(
                "cannot stack {} and {}: shapes differ",
                type_of(first),
                type_of(t)
            ),
        ));
    }
    let mut stacked = first.dims().to_vec();
    stacked.insert(dim, tensors.len());
    checked_numel(&stacked).map_err(at_arg(args, 0))?;
    Ok(Value::tensor(CandleTensor::stack(&tensors, dim)?))
}

pub(super) fn split(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    let dim = if args.has(2) {
        args.dim(2, x.rank())?
    } else {
        0
    };
    if x.rank() == 0 {
        return Err(args.error(0, "cannot split a 0-dimensional tensor"));
    }
    let size = x.dims()[dim];
    let sizes = match args.value(1)? {
        Value::Int(count) => {
            let count = *count;
            // `count <= size` also keeps a zero-size dimension from asking for
            // a list of a billion empty parts.
            let parts = usize::try_from(count)
                .ok()
                .filter(|&c| c > 0 && c <= size.max(1));
            let Some(parts) = parts.filter(|&c| size % c == 0 && c <= MAX_LIST_ITEMS) else {
                return Err(args.error(
                    1,
                    format!("cannot split dimension {dim} of size {size} into {count} equal parts"),
                ));
            };
            vec![size / parts; parts]
        }
        _ => {
            let sizes = args.shape(1)?;
            let total = sizes.iter().try_fold(0usize, |sum, &s| sum.checked_add(s));
            if total != Some(size) {
                return Err(args.error(
                    1,
                    format!(
                        "sizes {} do not add up to {size}, the size of dimension {dim}",
                        format_shape(&sizes)
                    ),
                ));
            }
            sizes
        }
    };
    let mut start = 0;
    let mut parts = Vec::with_capacity(sizes.len());
    for len in sizes {
        parts.push(Value::tensor(x.narrow(dim, start, len)?));
        start += len;
    }
    Ok(Value::list(parts))
}

pub(super) fn slice(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    let dim = args.dim(1, x.rank())?;
    let size = x.dims()[dim];
    let axis = format!("dimension {dim} of size {size}");
    let range = resolve_range(Some(args.int(2)?), args.opt_int(3)?, size, &axis)
        .map_err(at_arg(args, 2))?;
    Ok(Value::tensor(x.narrow(dim, range.start, range.len())?))
}
