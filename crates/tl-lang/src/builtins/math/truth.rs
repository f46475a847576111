//! Whole-tensor tests that answer with one bool: `allclose`, `all`, `any`.

use candle_core::DType as CandleDType;

use crate::builtins::{Args, Context};
use crate::error::Result;
use crate::ops::shapes::broadcast_shapes;
use crate::ops::type_of;
use crate::value::Value;

/// `allclose(a, b, rtol = 1e-5, atol = 1e-8)`, NumPy's test: |a - b| <= atol +
/// rtol·|b|, infinities close only to themselves, NaN close to nothing.
pub fn allclose(_: &mut Context, args: &Args) -> Result<Value> {
    let (a, b) = (args.dense(0)?, args.dense(1)?);
    let rtol = args.opt_float(2)?.unwrap_or(1e-5);
    let atol = args.opt_float(3)?.unwrap_or(1e-8);
    let shape = broadcast_shapes(a.dims(), b.dims()).ok_or_else(|| {
        args.error(
            1,
            format!(
                "cannot compare {} and {}: shapes do not broadcast",
                type_of(&a),
                type_of(&b)
            ),
        )
    })?;
    let values = |t: &candle_core::Tensor| -> Result<Vec<f64>> {
        Ok(t.broadcast_as(shape.as_slice())?
            .to_dtype(CandleDType::F64)?
            .flatten_all()?
            .to_vec1::<f64>()?)
    };
    let (x, y) = (values(&a)?, values(&b)?);
    let close = x.iter().zip(&y).all(|(&x, &y)| {
        x == y || (x.is_finite() && y.is_finite() && (x - y).abs() <= atol + rtol * y.abs())
    });
    Ok(Value::Bool(close))
}

/// `all(x)`: every element non-zero.
pub fn all(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    if x.elem_count() == 0 {
        return Ok(Value::Bool(true));
    }
    Ok(Value::Bool(
        x.ne(0f64)?.flatten_all()?.min(0)?.to_vec0::<u8>()? == 1,
    ))
}

/// `any(x)`: some element non-zero.
pub fn any(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.dense(0)?;
    if x.elem_count() == 0 {
        return Ok(Value::Bool(false));
    }
    Ok(Value::Bool(
        x.ne(0f64)?.flatten_all()?.max(0)?.to_vec0::<u8>()? == 1,
    ))
}
