//! Combining the evaluated parts of an equation: terms added with their
//! labels lined up, numbers and functions applied. Bools meet numbers as 0
//! and 1; numbers of different element types do not mix. A tensor stays
//! where it is (a GPU contraction's result on the GPU) until an operation
//! here needs its values on the host.

use candle_core::Tensor as CandleTensor;
use tl_syntax::ast::BinaryOp;
use tl_syntax::DType;

use super::plan::Label;
use crate::error::{LangError, Result};
use crate::ops;
use crate::tensor::{candle_dtype, Tensor};
use crate::value::Value;

/// A part of an equation's right side, evaluated.
pub(super) enum Indexed<'p> {
    /// A number, or a tensor without indices.
    Scalar(Value),
    /// A tensor whose dimensions are named by labels.
    Tensor(Tensor, &'p [Label]),
}

/// The type factors or terms are combined in: bools count as 0/1 next to
/// numbers; numbers of different types do not mix.
pub(super) fn common_dtype<'a>(tensors: impl Iterator<Item = &'a Tensor>) -> Result<DType> {
    let mut found: Option<&Tensor> = None;
    for t in tensors {
        match found {
            _ if t.dtype() == DType::Bool => {}
            Some(f) if f.dtype() != t.dtype() => {
                return Err(LangError::user(format!(
                    "cannot combine {} and {} in an equation",
                    f.type_string(),
                    t.type_string()
                ))
                .with_hint("convert one with to_dtype(x, \"float32\")"))
            }
            _ => found = Some(t),
        }
    }
    Ok(found.map_or(DType::Bool, |t| t.dtype()))
}

/// `t` on the host in element type `dtype`.
pub(super) fn dense_as(t: &Tensor, dtype: DType) -> Result<CandleTensor> {
    Ok(t.to_dense()?.to_dtype(candle_dtype(dtype))?)
}

/// `1 / t` for a divisor with indices (ints and bools become float32).
pub(super) fn reciprocal(t: &Tensor) -> Result<Tensor> {
    let dtype = if t.dtype().is_float() {
        t.dtype()
    } else {
        DType::F32
    };
    Ok(Tensor::Dense(dense_as(t, dtype)?.recip()?))
}

/// `result * number` or `result / number`.
pub(super) fn scale<'p>(op: BinaryOp, result: Indexed<'p>, number: &Value) -> Result<Indexed<'p>> {
    match result {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(ops::binary(op, &v, number)?)),
        Indexed::Tensor(t, labels) => {
            let t = match t.dtype() {
                DType::Bool => Tensor::Dense(dense_as(&t, DType::F32)?),
                _ => t,
            };
            let out = ops::binary(op, &Value::Tensor(t), number)?;
            Ok(Indexed::Tensor(tensor_of(out)?, labels))
        }
    }
}

/// A function applied to the value, keeping the labels.
pub(super) fn map<'p>(x: Indexed<'p>, f: impl Fn(&Value) -> Result<Value>) -> Result<Indexed<'p>> {
    match x {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(f(&v)?)),
        Indexed::Tensor(t, labels) => {
            Ok(Indexed::Tensor(tensor_of(f(&Value::Tensor(t))?)?, labels))
        }
    }
}

/// The tensor a tensor operation gave.
pub(super) fn tensor_of(value: Value) -> Result<Tensor> {
    match value {
        Value::Tensor(t) => Ok(t),
        other => Err(LangError::internal(format!(
            "an equation's tensor became {}",
            other.type_name()
        ))),
    }
}

/// `l + r` or `l - r`, lined up into `labels` (a label one side lacks
/// broadcasts).
pub(super) fn add<'p>(
    op: BinaryOp,
    l: Indexed<'p>,
    r: Indexed<'p>,
    labels: &'p [Label],
) -> Result<Indexed<'p>> {
    let ((lt, ll), (rt, rl)) = match (l, r) {
        (Indexed::Scalar(a), Indexed::Scalar(b)) => {
            return Ok(Indexed::Scalar(ops::binary(op, &a, &b)?))
        }
        (Indexed::Tensor(t, labels), Indexed::Scalar(s)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                tensor_of(ops::binary(op, &Value::Tensor(t), &s)?)?,
                labels,
            ));
        }
        (Indexed::Scalar(s), Indexed::Tensor(t, labels)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                tensor_of(ops::binary(op, &s, &Value::Tensor(t))?)?,
                labels,
            ));
        }
        (Indexed::Tensor(a, la), Indexed::Tensor(b, lb)) => ((a, la), (b, lb)),
    };
    let both_bool = lt.dtype() == DType::Bool && rt.dtype() == DType::Bool;
    let out = match (both_bool, op) {
        // On relations, `+` is "or".
        (true, BinaryOp::Add) => {
            let (a, b) = (aligned(&lt, ll, labels)?, aligned(&rt, rl, labels)?);
            Tensor::Dense(a.broadcast_maximum(&b)?)
        }
        (true, _) => {
            return Err(
                LangError::user("cannot subtract bool tensors in an equation")
                    .with_hint("use a rule with a negated atom, or convert to numbers"),
            )
        }
        _ => {
            let dtype = common_dtype([&lt, &rt].into_iter())?;
            let a = aligned(&Tensor::Dense(dense_as(&lt, dtype)?), ll, labels)?;
            let b = aligned(&Tensor::Dense(dense_as(&rt, dtype)?), rl, labels)?;
            tensor_of(ops::binary(op, &Value::tensor(a), &Value::tensor(b))?)?
        }
    };
    Ok(Indexed::Tensor(out, labels))
}

/// A bool tensor as float32 when it meets a number.
fn numeric(t: Tensor, other: &Value) -> Result<Tensor> {
    let is_number = matches!(other, Value::Int(_) | Value::Float(_));
    Ok(match (t.dtype(), is_number) {
        (DType::Bool, true) => Tensor::Dense(dense_as(&t, DType::F32)?),
        _ => t,
    })
}

/// `t` (dimensions labelled `from`) permuted into the order of `to`, with a
/// size-1 dimension for each label of `to` it lacks.
pub(super) fn aligned(t: &Tensor, from: &[Label], to: &[Label]) -> Result<CandleTensor> {
    let t = t.to_dense()?;
    let order: Vec<usize> = (to.iter())
        .filter_map(|l| from.iter().position(|f| f == l))
        .collect();
    let permuted = t.permute(order)?;
    let shape: Vec<usize> = (to.iter())
        .map(|l| from.iter().position(|f| f == l).map_or(1, |i| t.dims()[i]))
        .collect();
    Ok(permuted.reshape(shape)?)
}
