//! Binary operators where at least one side is a tensor. A number or list written
//! next to a tensor takes the tensor's element type; two tensors must already
//! agree on it (mixing float16 and float32 silently is how precision bugs hide).
//! Shapes broadcast as in NumPy.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::ast::BinaryOp;
use tl_syntax::DType;

use super::dtype::literal_as;
use super::shapes::{broadcast_shapes, checked_numel};
use super::{dtype_mismatch, int_tensor, matmul, phrase};
use crate::error::{LangError, Result};
use crate::gpu::f32_gpu;
use crate::tensor::{lang_dtype, GpuValue};
use crate::value::Value;
use tl_engine::ops::Elementwise;

/// `lhs op rhs` where `lhs` or `rhs` is a tensor.
pub fn apply(op: BinaryOp, lhs: &Value, rhs: &Value) -> Result<Value> {
    if let Some(out) = on_gpu(op, lhs, rhs)? {
        return Ok(out);
    }
    let what = phrase(op, &lhs.type_name(), &rhs.type_name());
    let (a, b) = operands(lhs, rhs, &what)?;
    if op == BinaryOp::MatMul {
        return Ok(Value::tensor(matmul::matmul(&a, &b)?));
    }
    let (da, db) = (lang_dtype(a.dtype()), lang_dtype(b.dtype()));
    if a.dtype() != b.dtype() {
        return Err(dtype_mismatch(&what, da, db));
    }
    let shape = broadcast_shapes(a.dims(), b.dims())
        .ok_or_else(|| LangError::user(format!("cannot {what}: shapes do not broadcast")))?;
    // A result larger than both operands (an outer sum) may be too large to
    // allocate; one the size of an operand is not (whatever its size).
    if shape != a.dims() && shape != b.dims() {
        checked_numel(&shape).map_err(|e| LangError {
            message: format!("cannot {what}: the result's {}", e.message),
            ..e
        })?;
    }
    let out = match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
            arithmetic(op, &a, &b, da, &shape, &what)?
        }
        BinaryOp::Eq => a.broadcast_eq(&b)?,
        BinaryOp::Ne => a.broadcast_ne(&b)?,
        BinaryOp::Lt => a.broadcast_lt(&b)?,
        BinaryOp::Le => a.broadcast_le(&b)?,
        BinaryOp::Gt => a.broadcast_gt(&b)?,
        BinaryOp::Ge => a.broadcast_ge(&b)?,
        BinaryOp::And | BinaryOp::Or => logic(op, &a, &b, da, &what)?,
        BinaryOp::MatMul => matmul::matmul(&a, &b)?,
    };
    Ok(Value::tensor(out))
}

/// `+` and `*` of two float32 GPU tensors of one shape, on the GPU (with the
/// host's arithmetic: one rounding each); anything else runs on the host.
fn on_gpu(op: BinaryOp, lhs: &Value, rhs: &Value) -> Result<Option<Value>> {
    let kind = match op {
        BinaryOp::Add => Elementwise::Add,
        BinaryOp::Mul => Elementwise::Mul,
        _ => return Ok(None),
    };
    let (Value::Tensor(a), Value::Tensor(b)) = (lhs, rhs) else {
        return Ok(None);
    };
    let (Some(a), Some(b)) = (f32_gpu(a), f32_gpu(b)) else {
        return Ok(None);
    };
    if a.tensor.dims() != b.tensor.dims() {
        return Ok(None);
    }
    let out = a.ops.elementwise(kind, &a.tensor, &b.tensor)?;
    Ok(Some(Value::Tensor(GpuValue::tensor(&a.ops, out))))
}

/// Both sides as dense tensors of the tensor side's element type.
fn operands(lhs: &Value, rhs: &Value, what: &str) -> Result<(CandleTensor, CandleTensor)> {
    let literal = |value: &Value, tensor: &CandleTensor| {
        literal_as(value, lang_dtype(tensor.dtype())).map_err(|e| LangError {
            message: format!("cannot {what}: {}", e.message),
            ..e
        })
    };
    match (lhs, rhs) {
        (Value::Tensor(x), Value::Tensor(y)) => Ok((x.to_dense()?, y.to_dense()?)),
        (Value::Tensor(x), other) => {
            let a = x.to_dense()?;
            let b = literal(other, &a)?;
            Ok((a, b))
        }
        (other, Value::Tensor(y)) => {
            let b = y.to_dense()?;
            let a = literal(other, &b)?;
            Ok((a, b))
        }
        _ => Err(LangError::internal(format!(
            "tensor operator without a tensor: {what}"
        ))),
    }
}

fn arithmetic(
    op: BinaryOp,
    a: &CandleTensor,
    b: &CandleTensor,
    dtype: DType,
    shape: &[usize],
    what: &str,
) -> Result<CandleTensor> {
    if dtype == DType::Bool {
        return Err(LangError::user(format!(
            "cannot {what}: arithmetic needs numbers, not bools"
        ))
        .with_hint("convert with to_dtype(x, \"int64\")"));
    }
    if !dtype.is_float() {
        return int_tensor::arithmetic(op, a, b, shape, what);
    }
    Ok(match op {
        BinaryOp::Add => a.broadcast_add(b)?,
        BinaryOp::Sub => a.broadcast_sub(b)?,
        BinaryOp::Mul => a.broadcast_mul(b)?,
        BinaryOp::Div => a.broadcast_div(b)?,
        _ if crate::learning::tracks(a) || crate::learning::tracks(b) => tracked_remainder(a, b)?,
        _ => float_remainder(a, b, shape)?,
    })
}

/// `a % b` on the gradient's graph, as a − b·trunc(a / b) in candle's ops:
/// its gradient is 1 for `a` and −trunc(a / b) for `b`.
fn tracked_remainder(a: &CandleTensor, b: &CandleTensor) -> Result<CandleTensor> {
    let quotient = a.broadcast_div(b)?;
    let truncated = quotient.sign()?.mul(&quotient.abs()?.floor()?)?;
    Ok(a.broadcast_sub(&b.broadcast_mul(&truncated)?)?)
}

/// `a % b` for floats, with the sign of `a` like the scalar `%` (C's `fmod`).
/// Candle has no remainder kernel; computing it in f64 keeps it exact.
fn float_remainder(a: &CandleTensor, b: &CandleTensor, shape: &[usize]) -> Result<CandleTensor> {
    let values = |t: &CandleTensor| -> Result<Vec<f64>> {
        Ok(t.broadcast_as(shape)?
            .to_dtype(CandleDType::F64)?
            .flatten_all()?
            .to_vec1::<f64>()?)
    };
    let (x, y) = (values(a)?, values(b)?);
    let out: Vec<f64> = x.iter().zip(&y).map(|(x, y)| x % y).collect();
    Ok(CandleTensor::from_vec(out, shape, &Device::Cpu)?.to_dtype(a.dtype())?)
}

/// `&&` and `||` on bool tensors: 0/1 elements, so min and max are and and or.
fn logic(
    op: BinaryOp,
    a: &CandleTensor,
    b: &CandleTensor,
    dtype: DType,
    what: &str,
) -> Result<CandleTensor> {
    if dtype != DType::Bool {
        return Err(LangError::user(format!(
            "cannot {what}: `{}` needs bools or bool tensors",
            op.symbol()
        ))
        .with_hint("compare first, e.g. `x > 0.0`"));
    }
    Ok(match op {
        BinaryOp::And => a.broadcast_minimum(b)?,
        _ => a.broadcast_maximum(b)?,
    })
}
