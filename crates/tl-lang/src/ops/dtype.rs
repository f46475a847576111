//! Element-type conversions: casting a tensor to another element type, and turning
//! a number (or list of numbers) written next to a tensor into a tensor of that
//! tensor's element type, refusing conversions that would silently lose meaning.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::DType;

use crate::convert::value_to_dense;
use crate::error::{LangError, Result};
use crate::tensor::{candle_dtype, lang_dtype};
use crate::value::Value;

/// `t` converted to `dtype`. Conversion to bool means "is non-zero", as in NumPy;
/// a plain numeric cast would turn 0.5 into false and 256 into false.
pub fn cast(t: &CandleTensor, dtype: DType) -> Result<CandleTensor> {
    let target = candle_dtype(dtype);
    if t.dtype() == target {
        return Ok(t.clone());
    }
    if dtype == DType::Bool {
        return Ok(t.ne(0f64)?);
    }
    Ok(t.to_dtype(target)?)
}

/// The element type to suggest converting to when two element types meet: the
/// one that loses least.
pub fn wider_dtype(a: DType, b: DType) -> DType {
    let rank = |d: DType| match d {
        DType::F32 => 5,
        DType::BF16 => 4,
        DType::F16 => 3,
        DType::I64 => 2,
        DType::I32 => 1,
        DType::Bool => 0,
    };
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// A number, bool or nested list written next to a tensor of element type
/// `dtype`, as a tensor of that type. The error says why it does not fit (the
/// caller says in which operation).
pub fn literal_as(value: &Value, dtype: DType) -> Result<CandleTensor> {
    let device = &Device::Cpu;
    match value {
        Value::Int(i) => match dtype {
            DType::Bool => Err(bool_mismatch("the int", dtype)),
            DType::I32 => {
                let narrow = i32::try_from(*i)
                    .map_err(|_| LangError::user(format!("the int {i} does not fit in int32")))?;
                Ok(CandleTensor::new(narrow, device)?)
            }
            DType::I64 => Ok(CandleTensor::new(*i, device)?),
            _ => Ok(CandleTensor::new(*i as f64, device)?.to_dtype(candle_dtype(dtype))?),
        },
        Value::Float(x) => {
            if !dtype.is_float() && dtype != DType::Bool {
                check_whole(*x, dtype)?;
            }
            match dtype {
                DType::Bool => Err(bool_mismatch("the float", dtype)),
                _ => Ok(CandleTensor::new(*x, device)?.to_dtype(candle_dtype(dtype))?),
            }
        }
        Value::Bool(b) => match dtype {
            DType::Bool => Ok(CandleTensor::new(u8::from(*b), device)?),
            _ => Err(LangError::user(format!(
                "a bool cannot be an element of a {} tensor",
                dtype.keyword()
            ))),
        },
        Value::List(_) => list_as(value, dtype),
        other => Err(LangError::user(format!(
            "a {} cannot be used as a tensor",
            other.type_name()
        ))),
    }
}

fn list_as(value: &Value, dtype: DType) -> Result<CandleTensor> {
    let dense = value_to_dense(value)?;
    let source = lang_dtype(dense.dtype());
    if dtype == DType::Bool {
        return Err(bool_mismatch("a list of numbers", dtype));
    }
    if source.is_float() && !dtype.is_float() {
        let values = dense
            .to_dtype(CandleDType::F64)?
            .flatten_all()?
            .to_vec1::<f64>()?;
        values.iter().try_for_each(|x| check_whole(*x, dtype))?;
    }
    if dtype == DType::I32 && source == DType::I64 {
        let values = dense.flatten_all()?.to_vec1::<i64>()?;
        if let Some(i) = values.iter().find(|i| i32::try_from(**i).is_err()) {
            return Err(LangError::user(format!(
                "the int {i} does not fit in int32"
            )));
        }
    }
    Ok(dense.to_dtype(candle_dtype(dtype))?)
}

/// A float may join an integer tensor only if it is a whole number in range:
/// `x_int * 0.5` silently computing `x_int * 0` would be a trap.
fn check_whole(x: f64, dtype: DType) -> Result<()> {
    let (low, high) = match dtype {
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        _ => (i64::MIN as f64, i64::MAX as f64),
    };
    if x.fract() == 0.0 && x >= low && x <= high {
        return Ok(());
    }
    Err(LangError::user(format!(
        "the float {x} is not a whole number a {} tensor can hold",
        dtype.keyword()
    ))
    .with_hint("convert the tensor with to_dtype(x, \"float32\")"))
}

fn bool_mismatch(what: &str, dtype: DType) -> LangError {
    LangError::user(format!(
        "{what} cannot be an element of a {} tensor",
        dtype.keyword()
    ))
    .with_hint("compare with `true`/`false`, or convert with to_dtype(x, \"int64\")")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vec_f64(t: &CandleTensor) -> Vec<f64> {
        t.to_dtype(CandleDType::F64)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f64>())
            .unwrap_or_default()
    }

    #[test]
    fn cast_to_bool_means_nonzero() -> Result<()> {
        let t = CandleTensor::new(&[0.0f32, 0.5, 256.0], &Device::Cpu)?;
        let b = cast(&t, DType::Bool)?;
        assert_eq!(b.dtype(), CandleDType::U8);
        assert_eq!(vec_f64(&b), vec![0.0, 1.0, 1.0]);
        Ok(())
    }

    #[test]
    fn literals_take_the_tensor_type() -> Result<()> {
        assert_eq!(
            literal_as(&Value::Int(3), DType::F16)?.dtype(),
            CandleDType::F16
        );
        assert_eq!(
            literal_as(&Value::Float(2.0), DType::I64)?.to_vec0::<i64>()?,
            2
        );
        assert_eq!(
            literal_as(&Value::Bool(true), DType::Bool)?.to_vec0::<u8>()?,
            1
        );
        let list = Value::list(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(literal_as(&list, DType::F32)?.dtype(), CandleDType::F32);
        Ok(())
    }

    #[test]
    fn lossy_literals_are_refused() {
        let err = literal_as(&Value::Float(0.5), DType::I64).err();
        assert!(err.is_some_and(|e| e.message.contains("not a whole number")));
        assert!(literal_as(&Value::Int(1 << 40), DType::I32).is_err());
        assert!(literal_as(&Value::Bool(true), DType::F32).is_err());
        assert!(literal_as(&Value::Int(1), DType::Bool).is_err());
        assert!(literal_as(&Value::str("x"), DType::F32).is_err());
        let list = Value::list(vec![Value::Float(1.5)]);
        assert!(literal_as(&list, DType::I32).is_err());
    }

    #[test]
    fn wider_prefers_float32() {
        assert_eq!(wider_dtype(DType::F16, DType::F32), DType::F32);
        assert_eq!(wider_dtype(DType::I64, DType::BF16), DType::BF16);
    }
}
