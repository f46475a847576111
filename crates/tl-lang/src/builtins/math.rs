//! Math builtins: elementwise functions (on tensors, and on plain numbers too),
//! reductions (`sum`, `mean`, `max`, ...), and whole-tensor tests (`allclose`,
//! `all`, `any`).

mod reduce;
mod truth;

use candle_core::{Device, Tensor as CandleTensor};

use super::tensor_args::float_arg;
use super::{Args, Builtin, Context, Gradient};
use crate::error::Result;
use crate::ops::int_tensor;
use crate::ops::type_of;
use crate::tensor::lang_dtype;
use crate::value::Value;
use reduce::Reduction;

/// A candle elementwise function.
type Kernel = fn(&CandleTensor) -> candle_core::Result<CandleTensor>;

macro_rules! elementwise {
    ($name:literal, $summary:literal, $fn:ident) => {
        Builtin {
            name: $name,
            signature: concat!($name, "(x) -> tensor | float"),
            min_args: 1,
            max_args: 1,
            summary: $summary,
            call: $fn,
            gradient: Gradient::Differentiable,
        }
    };
}

macro_rules! reduction {
    ($name:literal, $signature:literal, $summary:literal, $fn:ident, $gradient:expr) => {
        Builtin {
            name: $name,
            signature: $signature,
            min_args: 1,
            max_args: 3,
            summary: $summary,
            call: $fn,
            gradient: $gradient,
        }
    };
}

pub const TABLE: &[Builtin] = &[
    elementwise!("exp", "e to the power x, elementwise.", exp),
    elementwise!("log", "Natural logarithm, elementwise (NaN below 0, -inf at 0).", log),
    elementwise!("sqrt", "Square root, elementwise (NaN below 0).", sqrt),
    Builtin {
        name: "abs",
        signature: "abs(x) -> tensor | int | float",
        min_args: 1,
        max_args: 1,
        summary: "Absolute value, elementwise; ints stay ints.",
        call: abs,
        gradient: Gradient::Differentiable,
    },
    elementwise!("sin", "Sine (radians), elementwise.", sin),
    elementwise!("cos", "Cosine (radians), elementwise.", cos),
    elementwise!("tanh", "Hyperbolic tangent, elementwise.", tanh),
    Builtin {
        name: "sigmoid",
        signature: "sigmoid(x, temperature = 1.0) -> tensor | float",
        min_args: 1,
        max_args: 2,
        summary: "1 / (1 + exp(-x / temperature)), elementwise; as the temperature goes to 0 it becomes `step`.",
        call: sigmoid,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "step",
        signature: "step(x) -> tensor | int | float",
        min_args: 1,
        max_args: 1,
        summary: "1 where x > 0, else 0, elementwise, in x's type (bools stay bools): the step of a tensor-logic rule.",
        call: step,
        gradient: Gradient::Zero("piecewise constant"),
    },
    Builtin {
        name: "relu",
        signature: "relu(x) -> tensor | int | float",
        min_args: 1,
        max_args: 1,
        summary: "max(x, 0), elementwise; ints stay ints.",
        call: relu,
        gradient: Gradient::Differentiable,
    },
    elementwise!("gelu", "GELU in its exact form, x·Φ(x) with the normal CDF Φ (as PyTorch's default).", gelu),
    elementwise!("silu", "x · sigmoid(x), elementwise (also called swish).", silu),
    Builtin {
        name: "pow",
        signature: "pow(x, p) -> tensor | int | float",
        min_args: 2,
        max_args: 2,
        summary: "x to the power p (a number), elementwise; an int to a non-negative int power stays an int.",
        call: pow,
        gradient: Gradient::Differentiable,
    },
    reduction!(
        "sum",
        "sum(x, dim = none, keepdim = false) -> tensor | int | float",
        "Sum of all elements as a number, or over `dim` (an int or a list) as a tensor; integer and bool tensors sum to int64.",
        sum,
        Gradient::Differentiable
    ),
    reduction!(
        "mean",
        "mean(x, dim = none, keepdim = false) -> tensor | float",
        "Mean of all elements as a number, or over `dim` (an int or a list) as a tensor.",
        mean,
        Gradient::Differentiable
    ),
    reduction!(
        "max",
        "max(x, dim = none, keepdim = false) -> tensor | number",
        "Largest element, or the largest over `dim`; `max(a, b)` of two numbers, or of two tensors elementwise, is the larger.",
        max,
        Gradient::Differentiable
    ),
    reduction!(
        "min",
        "min(x, dim = none, keepdim = false) -> tensor | number",
        "Smallest element, or the smallest over `dim`; `min(a, b)` of two numbers, or of two tensors elementwise, is the smaller.",
        min,
        Gradient::Differentiable
    ),
    reduction!(
        "argmax",
        "argmax(x, dim = none, keepdim = false) -> tensor | int",
        "Position of the largest element (in the flattened tensor), or int64 positions along `dim`.",
        argmax,
        Gradient::Zero("positions are integers")
    ),
    reduction!(
        "argmin",
        "argmin(x, dim = none, keepdim = false) -> tensor | int",
        "Position of the smallest element (in the flattened tensor), or int64 positions along `dim`.",
        argmin,
        Gradient::Zero("positions are integers")
    ),
    Builtin {
        name: "allclose",
        signature: "allclose(a, b, rtol = 1e-5, atol = 1e-8) -> bool",
        min_args: 2,
        max_args: 4,
        summary: "Whether |a - b| <= atol + rtol·|b| for every element (shapes broadcast; NaN is never close).",
        call: truth::allclose,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "all",
        signature: "all(x) -> bool",
        min_args: 1,
        max_args: 1,
        summary: "Whether every element is true (non-zero); true for an empty tensor.",
        call: truth::all,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "any",
        signature: "any(x) -> bool",
        min_args: 1,
        max_args: 1,
        summary: "Whether some element is true (non-zero); false for an empty tensor.",
        call: truth::any,
        gradient: Gradient::NotApplicable,
    },
];

/// Applies a float kernel to a tensor (integers become float32) or to a plain
/// number (computed in f64, returned as a float).
fn float_elementwise(args: &Args, kernel: Kernel) -> Result<Value> {
    match args.value(0)? {
        Value::Int(_) | Value::Float(_) => {
            let x = CandleTensor::new(args.float(0)?, &Device::Cpu)?;
            Ok(Value::Float(kernel(&x)?.to_vec0::<f64>()?))
        }
        _ => Ok(Value::tensor(kernel(&float_arg(args, 0)?)?)),
    }
}

fn exp(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::exp)
}

fn log(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::log)
}

fn sqrt(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::sqrt)
}

fn sin(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::sin)
}

fn cos(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::cos)
}

fn tanh(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::tanh)
}

fn sigmoid(_: &mut Context, args: &Args) -> Result<Value> {
    if !args.has(1) {
        return float_elementwise(args, candle_nn::ops::sigmoid);
    }
    let temperature = args.float(1)?;
    if temperature <= 0.0 {
        return Err(args.error(
            1,
            format!("the temperature must be above 0, found {temperature}"),
        ));
    }
    match args.value(0)? {
        Value::Int(_) | Value::Float(_) => Ok(Value::Float(
            1.0 / (1.0 + (-args.float(0)? / temperature).exp()),
        )),
        _ => Ok(Value::tensor(candle_nn::ops::sigmoid(
            &(float_arg(args, 0)? / temperature)?,
        )?)),
    }
}

fn step(_: &mut Context, args: &Args) -> Result<Value> {
    match args.value(0)? {
        Value::Int(i) => Ok(Value::Int(i64::from(*i > 0))),
        Value::Float(x) => Ok(Value::Float(if *x > 0.0 { 1.0 } else { 0.0 })),
        _ => {
            let t = args.dense(0)?;
            Ok(Value::tensor(t.gt(0.0)?.to_dtype(t.dtype())?))
        }
    }
}

fn gelu(_: &mut Context, args: &Args) -> Result<Value> {
    float_elementwise(args, CandleTensor::gelu_erf)
}

fn silu(_: &mut Context, args: &Args) -> Result<Value> {
    if let Value::Tensor(t) = args.value(0)? {
        if let Some(g) = crate::gpu::f32_gpu(t) {
            let out = g.ops.silu(&g.tensor)?;
            return Ok(Value::Tensor(crate::tensor::GpuValue::tensor(&g.ops, out)));
        }
    }
    float_elementwise(args, engine_silu)
}

/// float32 silu with the engine's arithmetic (its SwiGLU's `exp`), so an MLP
/// written in the language computes the engine's numbers; other types, and
/// tensors on the gradient's graph (the engine has no backward pass), on candle's.
fn engine_silu(x: &CandleTensor) -> candle_core::Result<CandleTensor> {
    if x.dtype() != candle_core::DType::F32 || crate::learning::tracks(x) {
        return x.silu();
    }
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    tl_engine::ops::silu_in_place(&mut values);
    CandleTensor::from_vec(values, x.dims(), x.device())
}

/// An integer-preserving elementwise function: `on_int` for ints and integer
/// tensors, `on_float` for floats.
fn int_preserving(args: &Args, on_int: fn(i64) -> Option<i64>, on_float: Kernel) -> Result<Value> {
    let overflow = || args.error(0, format!("{} overflows int (64 bits)", args.name));
    match args.value(0)? {
        Value::Int(i) => on_int(*i).map(Value::Int).ok_or_else(overflow),
        Value::Float(_) => float_elementwise(args, on_float),
        _ => {
            let t = args.dense(0)?;
            let dtype = lang_dtype(t.dtype());
            if dtype.is_float() {
                Ok(Value::tensor(on_float(&t)?))
            } else if dtype == tl_syntax::DType::Bool {
                Err(args.error(
                    0,
                    format!("{} needs numbers, found {}", args.name, type_of(&t)),
                ))
            } else {
                let what = format!("take {} of {}", args.name, type_of(&t));
                int_tensor::map(&t, on_int, &what).map(Value::tensor)
            }
        }
    }
}

fn abs(_: &mut Context, args: &Args) -> Result<Value> {
    int_preserving(args, i64::checked_abs, CandleTensor::abs)
}

fn relu(_: &mut Context, args: &Args) -> Result<Value> {
    int_preserving(args, |i| Some(i.max(0)), CandleTensor::relu)
}

fn pow(_: &mut Context, args: &Args) -> Result<Value> {
    let exponent = args.float(1)?;
    match (args.value(0)?, args.value(1)?) {
        (Value::Int(base), Value::Int(e)) if *e >= 0 => u32::try_from(*e)
            .ok()
            .and_then(|e| base.checked_pow(e))
            .map(Value::Int)
            .ok_or_else(|| {
                args.error(
                    1,
                    format!("{base} to the power {e} overflows int (64 bits)"),
                )
            }),
        (Value::Int(_) | Value::Float(_), _) => Ok(Value::Float(args.float(0)?.powf(exponent))),
        _ => Ok(Value::tensor(float_arg(args, 0)?.powf(exponent)?)),
    }
}

fn sum(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::reduce(args, Reduction::Sum)
}

fn mean(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::reduce(args, Reduction::Mean)
}

fn max(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::extreme(args, Reduction::Max)
}

fn min(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::extreme(args, Reduction::Min)
}

fn argmax(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::reduce(args, Reduction::ArgMax)
}

fn argmin(_: &mut Context, args: &Args) -> Result<Value> {
    reduce::reduce(args, Reduction::ArgMin)
}

#[cfg(test)]
mod tests;
