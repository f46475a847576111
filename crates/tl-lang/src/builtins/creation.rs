//! Builtins that make tensors: filled (`zeros`, `ones`, `full`, `eye`), counted
//! (`arange`), random (`rand`, `randn`) and from values (`tensor`).
//!
//! Random tensors come from the engine's xoshiro256** generator, not candle's:
//! a seed must give the same numbers on every machine and every release.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_engine::sampler::rng::Xoshiro256StarStar;
use tl_syntax::DType;

use super::tensor_args::{at_arg, dtype_arg, number_arg, shape_arg, span};
use super::{Args, Builtin, Context, Gradient};
use crate::convert::value_to_dense;
use crate::error::{LangError, Result};
use crate::ops::dtype::{cast, literal_as};
use crate::ops::shapes::{checked_numel, MAX_ELEMENTS};
use crate::tensor::candle_dtype;
use crate::value::Value;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "zeros",
        signature: "zeros(shape, dtype = \"float32\") -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "A tensor of zeros.",
        call: zeros,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "ones",
        signature: "ones(shape, dtype = \"float32\") -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "A tensor of ones.",
        call: ones,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "full",
        signature: "full(shape, value, dtype = \"float32\") -> tensor",
        min_args: 2,
        max_args: 3,
        summary: "A tensor with every element set to `value`.",
        call: full,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "arange",
        signature: "arange(start_or_end, end = none, step = 1, dtype = none) -> tensor",
        min_args: 1,
        max_args: 4,
        summary: "`arange(n)` counts 0..n; `arange(a, b, step)` counts from a up to (not including) b; int64 if all are ints, else float32.",
        call: arange,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "rand",
        signature: "rand(shape, seed = 0) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "Uniform random float32 numbers in [0, 1), the same for the same seed.",
        call: rand,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "randn",
        signature: "randn(shape, seed = 0, std = 1.0) -> tensor",
        min_args: 1,
        max_args: 3,
        summary: "Normally distributed float32 numbers with mean 0, the same for the same seed.",
        call: randn,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "tensor",
        signature: "tensor(data, dtype = none) -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "A tensor from a number or a nested list of numbers (int64 if all ints, bool if all bools, else float32), optionally converted to `dtype`.",
        call: tensor,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "eye",
        signature: "eye(n, dtype = \"float32\") -> tensor",
        min_args: 1,
        max_args: 2,
        summary: "The n×n identity matrix.",
        call: eye,
        gradient: Gradient::NotApplicable,
    },
];

fn zeros(ctx: &mut Context, args: &Args) -> Result<Value> {
    let shape = shape_arg(args, 0)?;
    let dtype = dtype_arg(args, 1, DType::F32)?;
    check_memory(ctx, checked_numel(&shape)?, dtype)?;
    Ok(Value::tensor(CandleTensor::zeros(
        shape,
        candle_dtype(dtype),
        &Device::Cpu,
    )?))
}

fn ones(ctx: &mut Context, args: &Args) -> Result<Value> {
    let shape = shape_arg(args, 0)?;
    let dtype = dtype_arg(args, 1, DType::F32)?;
    check_memory(ctx, checked_numel(&shape)?, dtype)?;
    Ok(Value::tensor(CandleTensor::ones(
        shape,
        candle_dtype(dtype),
        &Device::Cpu,
    )?))
}

fn full(ctx: &mut Context, args: &Args) -> Result<Value> {
    let shape = shape_arg(args, 0)?;
    let dtype = dtype_arg(args, 2, DType::F32)?;
    check_memory(ctx, checked_numel(&shape)?, dtype)?;
    let value = literal_as(args.value(1)?, dtype).map_err(|e| LangError {
        message: format!("cannot fill a {} tensor: {}", dtype.keyword(), e.message),
        span: Some(span(args, 1)),
        ..e
    })?;
    Ok(Value::tensor(value.broadcast_as(shape)?.contiguous()?))
}

fn arange(ctx: &mut Context, args: &Args) -> Result<Value> {
    // `arange(n, "float32")`: a string second argument is the dtype.
    let dtype_second = matches!(args.values.get(1), Some(Value::Str(_)));
    let (start, end, step, dtype_at) = match args.len() {
        1 => (Value::Int(0), number_arg(args, 0)?, Value::Int(1), None),
        2 if dtype_second => (Value::Int(0), number_arg(args, 0)?, Value::Int(1), Some(1)),
        n => {
            let step = if args.has(2) {
                number_arg(args, 2)?
            } else {
                Value::Int(1)
            };
            (
                number_arg(args, 0)?,
                number_arg(args, 1)?,
                step,
                (n > 3).then_some(3),
            )
        }
    };
    let step_at = if args.len() > 2 { 2 } else { 0 };
    let counted = match (start, end, step) {
        (Value::Int(a), Value::Int(b), Value::Int(s)) => int_range(ctx, a, b, s),
        (a, b, s) => float_range(ctx, as_f64(&a), as_f64(&b), as_f64(&s)),
    }
    .map_err(at_arg(args, step_at))?;
    match dtype_at {
        Some(i) if args.has(i) => Ok(Value::tensor(cast(
            &counted,
            dtype_arg(args, i, DType::F32)?,
        )?)),
        _ => Ok(Value::tensor(counted)),
    }
}

/// Errors unless `count` values of `dtype` fit in the memory available, for
/// tensors large enough to matter (see `tl_engine::memory`): candle's
/// allocation would abort the process, or the OOM killer end it, instead.
fn check_memory(ctx: &Context, count: usize, dtype: DType) -> Result<()> {
    // `count` is at most MAX_ELEMENTS and a value at most 8 bytes: no overflow.
    let bytes = count as u64 * candle_dtype(dtype).size_in_bytes() as u64;
    ctx.check_memory("the tensor's values", bytes)
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        _ => f64::NAN,
    }
}

fn int_range(ctx: &Context, start: i64, end: i64, step: i64) -> Result<CandleTensor> {
    if step == 0 {
        return Err(LangError::user("the step of arange must not be 0"));
    }
    // i128 so that `end - start` cannot overflow.
    let span = end as i128 - start as i128;
    let count = if (span > 0) == (step > 0) && span != 0 {
        (span.abs() + step.unsigned_abs() as i128 - 1) / step.unsigned_abs() as i128
    } else {
        0
    };
    let count = element_count(count as f64)?;
    check_memory(ctx, count, DType::I64)?;
    let values: Vec<i64> = (0..count as i128)
        .map(|k| (start as i128 + k * step as i128) as i64)
        .collect();
    Ok(CandleTensor::from_vec(values, count, &Device::Cpu)?)
}

fn float_range(ctx: &Context, start: f64, end: f64, step: f64) -> Result<CandleTensor> {
    if step == 0.0 {
        return Err(LangError::user("the step of arange must not be 0"));
    }
    let count = ((end - start) / step).ceil();
    let count = element_count(if count.is_nan() { 0.0 } else { count.max(0.0) })?;
    check_memory(ctx, count, DType::F32)?;
    let values: Vec<f32> = (0..count)
        .map(|k| (start + k as f64 * step) as f32)
        .collect();
    Ok(CandleTensor::from_vec(values, count, &Device::Cpu)?)
}

fn element_count(count: f64) -> Result<usize> {
    if count > MAX_ELEMENTS as f64 {
        return Err(LangError::user(format!(
            "arange would make more than {MAX_ELEMENTS} elements"
        )));
    }
    Ok(count as usize)
}

fn rand(ctx: &mut Context, args: &Args) -> Result<Value> {
    let shape = shape_arg(args, 0)?;
    let mut rng = seeded(args, 1)?;
    let count = checked_numel(&shape)?;
    check_memory(ctx, count, DType::F32)?;
    // The largest f32 below 1: an f64 just under 1 would round up to 1.0.
    let below_one = 1.0 - f32::EPSILON / 2.0;
    let values: Vec<f32> = (0..count)
        .map(|_| (rng.next_f64() as f32).min(below_one))
        .collect();
    Ok(Value::tensor(CandleTensor::from_vec(
        values,
        shape,
        &Device::Cpu,
    )?))
}

fn randn(ctx: &mut Context, args: &Args) -> Result<Value> {
    let shape = shape_arg(args, 0)?;
    let mut rng = seeded(args, 1)?;
    let std = args.opt_float(2)?.unwrap_or(1.0);
    let count = checked_numel(&shape)?;
    check_memory(ctx, count, DType::F32)?;
    let mut values = Vec::with_capacity(count + 1);
    // Box–Muller: two uniforms give two independent normals.
    while values.len() < count {
        let u1 = 1.0 - rng.next_f64(); // in (0, 1], so the log is finite
        let u2 = rng.next_f64();
        let radius = (-2.0 * u1.ln()).sqrt() * std;
        let angle = 2.0 * std::f64::consts::PI * u2;
        values.push((radius * angle.cos()) as f32);
        values.push((radius * angle.sin()) as f32);
    }
    values.truncate(count);
    Ok(Value::tensor(CandleTensor::from_vec(
        values,
        shape,
        &Device::Cpu,
    )?))
}

fn seeded(args: &Args, i: usize) -> Result<Xoshiro256StarStar> {
    // A negative seed is as good a seed as any: reinterpret its bits.
    let seed = args.opt_int(i)?.unwrap_or(0);
    Ok(Xoshiro256StarStar::from_seed(seed as u64))
}

fn tensor(_: &mut Context, args: &Args) -> Result<Value> {
    let value = args.value(0)?;
    let dense = match value {
        Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::List(_) | Value::Tensor(_) => {
            value_to_dense(value).map_err(at_arg(args, 0))?
        }
        other => {
            return Err(args.error(
                0,
                format!(
                    "argument 1 of tensor must be a number or a (nested) list of numbers, found {}",
                    other.type_name()
                ),
            ))
        }
    };
    if args.has(1) {
        return Ok(Value::tensor(cast(
            &dense,
            dtype_arg(args, 1, DType::F32)?,
        )?));
    }
    Ok(Value::tensor(dense))
}

fn eye(ctx: &mut Context, args: &Args) -> Result<Value> {
    let n = args.usize(0)?;
    let count = checked_numel(&[n, n]).map_err(at_arg(args, 0))?;
    let dtype = dtype_arg(args, 1, DType::F32)?;
    check_memory(ctx, count, dtype)?;
    let identity = CandleTensor::eye(n, CandleDType::U8, &Device::Cpu)?;
    Ok(Value::tensor(cast(&identity, dtype)?))
}

#[cfg(test)]
mod tests;
