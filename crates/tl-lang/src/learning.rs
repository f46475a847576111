//! Learning: learnable tensors, reverse-mode gradients and optimizers.
//!
//! A learnable tensor is a candle variable. Every candle operation on a
//! variable, or on a tensor computed from one, records the operation and its
//! operands in its result, so the results form a graph back to the
//! variables: the tape (a Wengert list kept as a DAG), recorded only where an
//! operand is learnable. A program without learnable tensors records nothing
//! and runs as before. `grad` walks the graph backwards from the loss once
//! (candle's `backward`: one topological order, each operation's adjoint),
//! summing in the parameters' element type.
//!
//! What the language computes with candle's operations is differentiable
//! as it stands. The few builtins that leave candle — the engine's kernels
//! (`rms_norm`, `rope`, `attention`, float32 `silu`), f64 remainders, sums
//! returned as numbers — take a path of candle operations when an operand
//! [`tracks`] a gradient, and the interpreter refuses a builtin marked
//! differentiable that loses the gradient anyway (see `interp/call.rs`).

mod optimizer;

use candle_core::{Tensor as CandleTensor, Var};

use crate::error::{LangError, Result};
use crate::tensor::{lang_dtype, Tensor};
use crate::value::Value;

pub use optimizer::{Adam, Optimizer, Rule};

/// Whether operations on `t` record the graph `grad` walks: `t` is a float
/// tensor that is learnable or was computed from a learnable tensor.
pub fn tracks(t: &CandleTensor) -> bool {
    t.track_op() && lang_dtype(t.dtype()).is_float()
}

/// Whether the value is a tensor that [`tracks`] a gradient.
pub fn value_tracks(value: &Value) -> bool {
    matches!(value, Value::Tensor(t) if t.tracks_gradient())
}

/// Whether the value is a learnable tensor.
pub fn is_learnable(value: &Value) -> bool {
    matches!(value, Value::Tensor(t) if t.is_learnable())
}

/// A learnable copy of `t`: storage of its own (an optimizer's step writes
/// it in place), no history (it is where gradients stop).
pub fn learnable(t: &CandleTensor) -> Result<CandleTensor> {
    if !lang_dtype(t.dtype()).is_float() {
        return Err(LangError::user(format!(
            "only float tensors can be learnable, found {}",
            crate::ops::type_of(t)
        ))
        .with_hint("convert it with to_dtype(x, \"float32\")"));
    }
    Ok(Var::from_tensor(&t.detach())?.into_inner())
}

/// The value to store in a place that held `old`: learnability belongs to
/// the place, so a new value for a learnable variable or field becomes a
/// new learnable tensor (`w = w - lr * g` keeps `w` a parameter).
pub fn carry_over(old: &Value, new: Value) -> Result<Value> {
    if !is_learnable(old) {
        return Ok(new);
    }
    match &new {
        Value::Tensor(t) if t.is_learnable() => Ok(new),
        Value::Tensor(t) => Ok(Value::tensor(learnable(&t.to_dense()?)?)),
        other => Err(LangError::user(format!(
            "a learnable tensor cannot be replaced by {}",
            other.type_name()
        ))
        .with_hint("assign a float tensor")),
    }
}

/// The gradients of `loss` with respect to each of `params` (learnable
/// tensors, which the caller has checked), zeros where it does not depend
/// on one.
pub fn gradients(loss: &Value, params: &[CandleTensor]) -> Result<Vec<CandleTensor>> {
    let zeros = || params.iter().map(|p| Ok(p.zeros_like()?)).collect();
    let loss = match loss {
        // A number depends on no tensor.
        Value::Int(_) | Value::Float(_) => return zeros(),
        Value::Tensor(t) => t.to_dense()?,
        other => {
            return Err(LangError::user(format!(
                "a loss must be a float tensor of one element, found {}",
                other.type_name()
            )))
        }
    };
    if loss.elem_count() != 1 || !lang_dtype(loss.dtype()).is_float() {
        return Err(LangError::user(format!(
            "a loss must be a float tensor of one element, found {}",
            crate::ops::type_of(&loss)
        ))
        .with_hint("reduce it to one number first, e.g. `sum(x)` or `mean(x)`"));
    }
    if !loss.track_op() {
        return zeros();
    }
    let store = loss.backward()?;
    params
        .iter()
        .map(|p| match store.get(p) {
            // candle's adjoints multiply by operands that may themselves be
            // on the graph; a gradient is a constant (no second derivatives).
            Some(g) => Ok(g.detach()),
            None => Ok(p.zeros_like()?),
        })
        .collect()
}

/// The learnable tensor a value holds, or an error naming what it is.
pub fn parameter(value: &Value) -> Result<CandleTensor> {
    match value {
        Value::Tensor(Tensor::Dense(t)) if t.is_variable() => Ok(t.clone()),
        Value::Tensor(t) => Err(LangError::user(format!(
            "{} is not learnable",
            t.type_string()
        ))
        .with_hint(
            "make it a parameter with `learnable(x)`, or declare `tensor w: ... learnable = ...;`",
        )),
        other => Err(LangError::user(format!(
            "expected a learnable tensor, found {}",
            other.type_name()
        ))),
    }
}
