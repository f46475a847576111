//! Checking values against written types at run time: `let` annotations,
//! parameter and result types, struct fields and global tensors, when they are
//! declared and on every later assignment. Named dimensions (`float32[n, d]`)
//! bind on first use and must agree afterwards: across one call's parameters and
//! result, across one struct's fields, and across a variable's assignments.
//! Numbers and lists become tensors where a tensor type is written.

use std::collections::HashMap;

use candle_core::{Device, Tensor as CandleTensor};
use tl_syntax::ast::{Dim, TypeExpr, TypeKind};
use tl_syntax::dump::type_to_string;

use crate::convert::value_to_dense;
use crate::error::{LangError, Result};
use crate::ops::shapes::checked_numel;
use crate::tensor::candle_dtype;
use crate::value::Value;

/// The value, converted where the type allows (int → float, list → tensor), or
/// an error saying what was expected and what was found.
pub(crate) fn coerce(
    value: Value,
    ty: &TypeExpr,
    dims: &mut HashMap<String, usize>,
) -> Result<Value> {
    let mismatch = |value: &Value| {
        LangError::at(
            format!(
                "expected {}, found {}",
                type_to_string(ty),
                value.type_name()
            ),
            ty.span,
        )
    };
    match &ty.kind {
        TypeKind::Int => match value {
            Value::Int(_) => Ok(value),
            _ => Err(mismatch(&value)),
        },
        TypeKind::Float => match value {
            Value::Float(_) => Ok(value),
            Value::Int(i) => Ok(Value::Float(i as f64)),
            _ => Err(mismatch(&value)),
        },
        TypeKind::Bool => match value {
            Value::Bool(_) => Ok(value),
            _ => Err(mismatch(&value)),
        },
        TypeKind::Str => match value {
            Value::Str(_) => Ok(value),
            _ => Err(mismatch(&value)),
        },
        TypeKind::List(element) => {
            let Value::List(items) = &value else {
                return Err(mismatch(&value));
            };
            if let Some(element) = element {
                for item in items.borrow().iter() {
                    coerce(item.clone(), element, dims)?;
                }
            }
            Ok(value)
        }
        TypeKind::Named(name) => {
            let matches = match &value {
                Value::Struct(s) => s.borrow().name == *name,
                Value::Handle(h) => h.type_name() == name,
                Value::Tensor(_) => name == "tensor",
                _ => false,
            };
            if matches {
                Ok(value)
            } else {
                Err(mismatch(&value))
            }
        }
        TypeKind::Tensor {
            dtype,
            dims: written,
        } => {
            let value = match value {
                Value::Tensor(_) => value,
                Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::List(_) => {
                    let dense = value_to_dense(&value).map_err(|_| mismatch(&value))?;
                    Value::tensor(dense.to_dtype(candle_dtype(*dtype))?)
                }
                _ => return Err(mismatch(&value)),
            };
            let Value::Tensor(tensor) = &value else {
                return Err(mismatch(&value));
            };
            if tensor.dtype() != *dtype {
                return Err(mismatch(&value).with_hint(format!(
                    "convert it with `to_dtype(x, \"{}\")`",
                    dtype.keyword()
                )));
            }
            if let Some(written) = written {
                check_dims(&tensor.dims(), written, dims).map_err(|why| {
                    let e = mismatch(&value);
                    LangError {
                        message: format!("{}: {why}", e.message),
                        ..e
                    }
                })?;
            }
            Ok(value)
        }
    }
}

/// Whether `value` is of the scalar type `ty` as it stands, so that checking
/// it converts nothing: the common case of a typed parameter or variable,
/// checked on every call and assignment.
pub(crate) fn is_exactly(value: &Value, ty: &TypeExpr) -> bool {
    matches!(
        (&ty.kind, value),
        (TypeKind::Int, Value::Int(_))
            | (TypeKind::Float, Value::Float(_))
            | (TypeKind::Bool, Value::Bool(_))
            | (TypeKind::Str, Value::Str(_))
    )
}

/// `new`, to replace `old` in a place (of type `ty`, where one is written):
/// checked and converted as [`reassign`] does, and learnable if `old` was
/// (learnability belongs to the place).
pub(crate) fn replacement(old: &Value, new: Value, ty: Option<&TypeExpr>) -> Result<Value> {
    let new = match ty {
        Some(ty) if !is_exactly(&new, ty) => reassign(old, new, ty)?,
        _ => new,
    };
    crate::learning::carry_over(old, new)
}

/// `new`, to replace `old` in a place of type `ty`: converted and checked as at
/// the declaration, with `ty`'s named dimensions keeping the sizes `old` gave
/// them.
pub(crate) fn reassign(old: &Value, new: Value, ty: &TypeExpr) -> Result<Value> {
    let mut dims = HashMap::new();
    bind_dims(old, ty, &mut dims);
    coerce(new, ty, &mut dims)
}

/// Binds the named dimensions of a tensor type to the sizes of `value`, a
/// value already of that type (one that does not fit binds nothing).
pub(crate) fn bind_dims(value: &Value, ty: &TypeExpr, dims: &mut HashMap<String, usize>) {
    let (
        Value::Tensor(tensor),
        TypeKind::Tensor {
            dims: Some(written),
            ..
        },
    ) = (value, &ty.kind)
    else {
        return;
    };
    let mut bound = dims.clone();
    if check_dims(&tensor.dims(), written, &mut bound).is_ok() {
        *dims = bound;
    }
}

fn check_dims(
    actual: &[usize],
    written: &[Dim],
    bound: &mut HashMap<String, usize>,
) -> std::result::Result<(), String> {
    if actual.len() != written.len() {
        return Err(format!(
            "{} dimensions instead of {}",
            actual.len(),
            written.len()
        ));
    }
    for (axis, (&size, dim)) in actual.iter().zip(written).enumerate() {
        match dim {
            Dim::Unknown => {}
            Dim::Known(expected) if size != *expected => {
                return Err(format!("dimension {axis} is {size}, not {expected}"));
            }
            Dim::Known(_) => {}
            Dim::Named(name) => match bound.get(name) {
                Some(&earlier) if earlier != size => {
                    return Err(format!(
                        "dimension {axis} is {size}, but `{name}` is {earlier} elsewhere"
                    ));
                }
                Some(_) => {}
                None => {
                    bound.insert(name.clone(), size);
                }
            },
        }
    }
    Ok(())
}

/// The zero value of a fully known tensor type (a global `tensor x: float32[2, 3];`).
pub(crate) fn zeros_of(ty: &TypeExpr) -> Result<Value> {
    let TypeKind::Tensor {
        dtype,
        dims: Some(dims),
    } = &ty.kind
    else {
        return Err(LangError::at(
            "a tensor declared without a value needs a tensor type with a shape",
            ty.span,
        ));
    };
    let shape = dims
        .iter()
        .map(|d| match d {
            Dim::Known(n) => Ok(*n),
            _ => Err(LangError::at(
                "a tensor declared without a value needs every dimension's size",
                ty.span,
            )
            .with_hint("write the sizes, or give it a value with `= ...`")),
        })
        .collect::<Result<Vec<_>>>()?;
    checked_numel(&shape).map_err(|e| e.or_at(ty.span))?;
    Ok(Value::tensor(CandleTensor::zeros(
        shape,
        candle_dtype(*dtype),
        &Device::Cpu,
    )?))
}
