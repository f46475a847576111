//! Combining the evaluated parts of an equation: a term's factors
//! contracted by `einsum`, terms added with their indices lined up, numbers
//! applied. Bools meet numbers as 0 and 1; numbers of different element
//! types do not mix.

use candle_core::{DType as CandleDType, Tensor as CandleTensor};
use tl_syntax::ast::BinaryOp;

use crate::error::{LangError, Result};
use crate::ops::{self, einsum, type_of};
use crate::value::Value;

/// A part of an equation's right side, evaluated.
pub(super) enum Indexed {
    /// A number, or a tensor without indices.
    Scalar(Value),
    /// A tensor whose dimensions are named by index variables.
    Tensor(CandleTensor, Vec<String>),
}

/// `1 / t` for a divisor with indices (ints and bools become float32).
pub(super) fn reciprocal(t: &CandleTensor) -> Result<CandleTensor> {
    let t = match t.dtype() {
        CandleDType::F16 | CandleDType::BF16 | CandleDType::F32 | CandleDType::F64 => t.clone(),
        _ => t.to_dtype(CandleDType::F32)?,
    };
    Ok(t.recip()?)
}

/// The factors' product, summed over the indices not in `keep`.
pub(super) fn contract(
    tensors: Vec<(CandleTensor, Vec<String>)>,
    keep: &[String],
) -> Result<Indexed> {
    if tensors.is_empty() {
        return Ok(Indexed::Scalar(Value::Int(1)));
    }
    let dtype = common_dtype(tensors.iter().map(|(t, _)| t))?;
    let mut letters: Vec<&str> = Vec::new();
    let mut output = Vec::new();
    let mut specs = Vec::new();
    for (_, labels) in &tensors {
        let mut spec = String::new();
        for label in labels {
            let i = match letters.iter().position(|l| l == label) {
                Some(i) => i,
                None => {
                    letters.push(label);
                    if keep.contains(label) {
                        output.push(letters.len() - 1);
                    }
                    letters.len() - 1
                }
            };
            spec.push(letter(i)?);
        }
        specs.push(spec);
    }
    let out_spec: String = output.iter().map(|&i| letter(i)).collect::<Result<_>>()?;
    let spec = format!("{}->{out_spec}", specs.join(","));
    let operands = (tensors.iter())
        .map(|(t, _)| Ok(t.to_dtype(dtype)?))
        .collect::<Result<Vec<_>>>()?;
    let t = einsum::einsum(&spec, &operands)?;
    let labels = output.iter().map(|&i| letters[i].to_string()).collect();
    Ok(Indexed::Tensor(t, labels))
}

/// The `i`-th einsum letter.
fn letter(i: usize) -> Result<char> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    LETTERS
        .get(i)
        .map(|&b| b as char)
        .ok_or_else(|| LangError::user("an equation's term has more than 52 different indices"))
}

/// The type factors or terms are combined in: bools count as 0/1 next to
/// numbers; numbers of different types do not mix.
fn common_dtype<'a>(tensors: impl Iterator<Item = &'a CandleTensor>) -> Result<CandleDType> {
    let mut found: Option<&CandleTensor> = None;
    for t in tensors {
        match found {
            _ if t.dtype() == CandleDType::U8 => {}
            Some(f) if f.dtype() != t.dtype() => {
                return Err(LangError::user(format!(
                    "cannot combine {} and {} in an equation",
                    type_of(f),
                    type_of(t)
                ))
                .with_hint("convert one with to_dtype(x, \"float32\")"))
            }
            _ => found = Some(t),
        }
    }
    Ok(found.map_or(CandleDType::U8, |t| t.dtype()))
}

/// `result * number` or `result / number`.
pub(super) fn scale(op: BinaryOp, result: Indexed, number: &Value) -> Result<Indexed> {
    match result {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(ops::binary(op, &v, number)?)),
        Indexed::Tensor(t, labels) => {
            let t = if t.dtype() == CandleDType::U8 {
                t.to_dtype(CandleDType::F32)?
            } else {
                t
            };
            let out = ops::binary(op, &Value::tensor(t), number)?;
            Ok(Indexed::Tensor(dense(out)?, labels))
        }
    }
}

/// A function applied to the value, keeping the indices.
pub(super) fn map(x: Indexed, f: impl Fn(&Value) -> Result<Value>) -> Result<Indexed> {
    match x {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(f(&v)?)),
        Indexed::Tensor(t, labels) => Ok(Indexed::Tensor(dense(f(&Value::tensor(t))?)?, labels)),
    }
}

fn dense(value: Value) -> Result<CandleTensor> {
    match value {
        Value::Tensor(t) => t.to_dense(),
        other => Err(LangError::internal(format!(
            "an equation's tensor became {}",
            other.type_name()
        ))),
    }
}

/// `l + r` or `l - r`, the indices lined up (a missing one broadcasts).
pub(super) fn add(op: BinaryOp, l: Indexed, r: Indexed) -> Result<Indexed> {
    let ((lt, ll), (rt, rl)) = match (l, r) {
        (Indexed::Scalar(a), Indexed::Scalar(b)) => {
            return Ok(Indexed::Scalar(ops::binary(op, &a, &b)?))
        }
        (Indexed::Tensor(t, labels), Indexed::Scalar(s)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                dense(ops::binary(op, &Value::tensor(t), &s)?)?,
                labels,
            ));
        }
        (Indexed::Scalar(s), Indexed::Tensor(t, labels)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                dense(ops::binary(op, &s, &Value::tensor(t))?)?,
                labels,
            ));
        }
        (Indexed::Tensor(a, la), Indexed::Tensor(b, lb)) => ((a, la), (b, lb)),
    };
    let mut labels = ll.clone();
    labels.extend(rl.iter().filter(|l| !ll.contains(l)).cloned());
    let (a, b) = (aligned(&lt, &ll, &labels)?, aligned(&rt, &rl, &labels)?);
    let both_bool = a.dtype() == CandleDType::U8 && b.dtype() == CandleDType::U8;
    let out = match (both_bool, op) {
        // On relations, `+` is "or".
        (true, BinaryOp::Add) => a.broadcast_maximum(&b)?,
        (true, _) => {
            return Err(
                LangError::user("cannot subtract bool tensors in an equation")
                    .with_hint("use a rule with a negated atom, or convert to numbers"),
            )
        }
        _ => {
            let dtype = common_dtype([&a, &b].into_iter())?;
            let (a, b) = (a.to_dtype(dtype)?, b.to_dtype(dtype)?);
            dense(ops::binary(op, &Value::tensor(a), &Value::tensor(b))?)?
        }
    };
    Ok(Indexed::Tensor(out, labels))
}

/// A bool tensor as float32 when it meets a number.
fn numeric(t: CandleTensor, other: &Value) -> Result<CandleTensor> {
    let is_number = matches!(other, Value::Int(_) | Value::Float(_));
    Ok(match (t.dtype(), is_number) {
        (CandleDType::U8, true) => t.to_dtype(CandleDType::F32)?,
        _ => t,
    })
}

/// `t` (dimensions named `from`) permuted into the order of `to`, with a
/// size-1 dimension for each name of `to` it lacks.
fn aligned(t: &CandleTensor, from: &[String], to: &[String]) -> Result<CandleTensor> {
    let order: Vec<usize> = (to.iter())
        .filter_map(|l| from.iter().position(|f| f == l))
        .collect();
    let permuted = t.permute(order)?;
    let shape: Vec<usize> = (to.iter())
        .map(|l| from.iter().position(|f| f == l).map_or(1, |i| t.dims()[i]))
        .collect();
    Ok(permuted.reshape(shape)?)
}
