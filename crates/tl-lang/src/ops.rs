//! The operators of the language (`+ - * / % @ == != < <= > >= && || - !`) on
//! every kind of value. The interpreter calls [`binary`] and [`unary`] for each
//! operator it evaluates; errors carry no span (the interpreter points them at
//! the expression).
//!
//! Numbers: int ⊕ int stays int (overflow and division by zero are errors, `/`
//! truncates), anything with a float is float. Tensors: a number next to a
//! tensor takes its element type, two tensors must share theirs, and shapes
//! broadcast as in NumPy.

pub mod dtype;
pub mod einsum;
mod equality;
pub(crate) mod int_tensor;
pub mod matmul;
mod scalar;
pub mod shapes;
mod tensor_binary;

#[cfg(test)]
mod tests;

use candle_core::Tensor as CandleTensor;
use tl_syntax::ast::{BinaryOp, UnaryOp};
use tl_syntax::DType;

use crate::error::{LangError, Result};
use crate::tensor::{lang_dtype, Tensor};
use crate::value::Value;

pub use equality::values_equal;
pub use matmul::matmul;

/// `lhs op rhs`.
pub fn binary(op: BinaryOp, lhs: &Value, rhs: &Value) -> Result<Value> {
    let tensor_side = matches!(lhs, Value::Tensor(_)) || matches!(rhs, Value::Tensor(_));
    if tensor_side {
        // `x == none` asks "is this the tensor?", not an elementwise question.
        if matches!(op, BinaryOp::Eq | BinaryOp::Ne) && !(tensor_like(lhs) && tensor_like(rhs)) {
            return Ok(Value::Bool(op == BinaryOp::Ne));
        }
        return tensor_binary::apply(op, lhs, rhs);
    }
    match op {
        BinaryOp::Eq => Ok(Value::Bool(values_equal(lhs, rhs)?)),
        BinaryOp::Ne => Ok(Value::Bool(!values_equal(lhs, rhs)?)),
        _ => scalar::apply(op, lhs, rhs),
    }
}

/// `op v`.
pub fn unary(op: UnaryOp, v: &Value) -> Result<Value> {
    match (op, v) {
        (UnaryOp::Neg, Value::Int(i)) => i.checked_neg().map(Value::Int).ok_or_else(|| {
            LangError::user(format!(
                "cannot negate {i}: the result overflows int (64 bits)"
            ))
        }),
        (UnaryOp::Neg, Value::Float(x)) => Ok(Value::Float(-x)),
        (UnaryOp::Neg, Value::Tensor(t)) => Ok(Value::tensor(negate(&t.to_dense()?)?)),
        (UnaryOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnaryOp::Not, Value::Tensor(t)) if t.dtype() == DType::Bool => {
            Ok(Value::tensor(t.to_dense()?.eq(0u8)?))
        }
        (UnaryOp::Neg, other) => Err(LangError::user(format!(
            "cannot negate {}",
            other.type_name()
        ))),
        (UnaryOp::Not, other) => Err(LangError::user(format!(
            "`!` needs a bool or a bool tensor, found {}",
            other.type_name()
        ))),
    }
}

/// `-t` for a dense tensor of numbers.
pub fn negate(t: &CandleTensor) -> Result<CandleTensor> {
    let dtype = lang_dtype(t.dtype());
    if dtype.is_float() {
        return Ok(t.neg()?);
    }
    if dtype == DType::Bool {
        return Err(LangError::user(format!("cannot negate {}", type_of(t)))
            .with_hint("use `!` to invert a bool tensor"));
    }
    int_tensor::map(t, i64::checked_neg, &format!("negate {}", type_of(t)))
}

/// Values that may stand next to a tensor in an elementwise operator.
fn tensor_like(v: &Value) -> bool {
    matches!(
        v,
        Value::Tensor(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::List(_)
    )
}

/// What `lhs op rhs` attempts, for "cannot ..." messages.
pub(crate) fn phrase(op: BinaryOp, lhs: &str, rhs: &str) -> String {
    match op {
        BinaryOp::Add => format!("add {lhs} and {rhs}"),
        BinaryOp::Sub => format!("subtract {rhs} from {lhs}"),
        BinaryOp::Mul => format!("multiply {lhs} and {rhs}"),
        BinaryOp::Div => format!("divide {lhs} by {rhs}"),
        BinaryOp::Rem => format!("take the remainder of {lhs} % {rhs}"),
        BinaryOp::MatMul => format!("multiply {lhs} @ {rhs}"),
        BinaryOp::And | BinaryOp::Or => format!("combine {lhs} {} {rhs}", op.symbol()),
        _ => format!("compare {lhs} {} {rhs}", op.symbol()),
    }
}

/// The error for two tensors of different element types.
pub(crate) fn dtype_mismatch(what: &str, a: DType, b: DType) -> LangError {
    let target = dtype::wider_dtype(a, b).keyword();
    LangError::user(format!("cannot {what}: element types differ"))
        .with_hint(format!("convert one side with to_dtype(x, \"{target}\")"))
}

/// A dense tensor's type as the language writes it: `float32[2, 3]`.
pub(crate) fn type_of(t: &CandleTensor) -> String {
    Tensor::Dense(t.clone()).type_string()
}
