//! Argument readers shared by the tensor builtins (creation, shape, math, nn):
//! element types given by name, shapes small enough to allocate, numbers that
//! keep their int-ness, and float inputs.

use candle_core::{DType as CandleDType, Tensor as CandleTensor};
use tl_syntax::{DType, Span};

use super::Args;
use crate::error::{LangError, Result};
use crate::ops::shapes::checked_numel;
use crate::tensor::{lang_dtype, parse_dtype};
use crate::value::Value;

/// Where argument `i` was written (the call, if it was not).
pub fn span(args: &Args, i: usize) -> Span {
    args.spans.get(i).copied().unwrap_or(args.call)
}

/// Optional argument `i` naming an element type (`"float16"`).
pub fn dtype_arg(args: &Args, i: usize, default: DType) -> Result<DType> {
    match args.opt_str(i)? {
        Some(name) => parse_dtype(name).map_err(|e| e.or_at(span(args, i))),
        None => Ok(default),
    }
}

/// Argument `i` as a shape whose element count is allocatable.
pub fn shape_arg(args: &Args, i: usize) -> Result<Vec<usize>> {
    let shape = args.shape(i)?;
    checked_numel(&shape).map_err(|e| e.or_at(span(args, i)))?;
    Ok(shape)
}

/// Argument `i` as a number value, int or float as written.
pub fn number_arg(args: &Args, i: usize) -> Result<Value> {
    match args.value(i)? {
        v @ (Value::Int(_) | Value::Float(_)) => Ok(v.clone()),
        _ => args.float(i).map(Value::Float),
    }
}

/// Argument `i` as a float tensor: integer tensors become float32 (the math of
/// `exp` or `softmax` has no integer answer); bool tensors are refused.
pub fn float_arg(args: &Args, i: usize) -> Result<CandleTensor> {
    let t = args.dense(i)?;
    let dtype = lang_dtype(t.dtype());
    if dtype.is_float() {
        return Ok(t);
    }
    if dtype == DType::Bool {
        return Err(args
            .error(
                i,
                format!(
                    "{} needs numbers, found {}",
                    args.name,
                    crate::ops::type_of(&t)
                ),
            )
            .with_hint("convert with to_dtype(x, \"float32\")"));
    }
    Ok(t.to_dtype(CandleDType::F32)?)
}

/// Points an error without a place at the call.
pub fn at_call(args: &Args) -> impl Fn(LangError) -> LangError {
    let call = args.call;
    move |e| e.or_at(call)
}

/// Points an error without a place at argument `i`.
pub fn at_arg(args: &Args, i: usize) -> impl Fn(LangError) -> LangError {
    let place = span(args, i);
    move |e| e.or_at(place)
}
