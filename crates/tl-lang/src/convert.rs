//! Conversions between language values and candle tensors: numbers and (nested)
//! lists of numbers become tensors where a tensor is expected, and tensors of one
//! element become numbers where a number is expected.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};

use crate::error::{LangError, Result};
use crate::ops::shapes::{checked_numel, MAX_RANK};
use crate::value::Value;

/// A value as a dense tensor: tensors as they are (dequantized if needed), ints as
/// 0-d int64, floats as 0-d float32, bools as 0-d bool, and rectangular nested
/// lists of numbers as tensors (int64 if every element is an int, else float32).
pub fn value_to_dense(value: &Value) -> Result<CandleTensor> {
    let device = &Device::Cpu;
    match value {
        Value::Tensor(t) => t.to_dense(),
        Value::Int(i) => Ok(CandleTensor::new(*i, device)?),
        Value::Float(x) => Ok(CandleTensor::new(*x as f32, device)?),
        Value::Bool(b) => Ok(CandleTensor::new(*b as u8, device)?),
        Value::List(_) => list_to_dense(value),
        other => Err(LangError::user(format!(
            "expected a tensor, found {}",
            other.type_name()
        ))),
    }
}

fn list_to_dense(value: &Value) -> Result<CandleTensor> {
    let mut shape = Vec::new();
    let mut probe = value.clone();
    while let Value::List(items) = probe {
        // A list can contain itself: its shape would never end.
        if shape.len() == MAX_RANK {
            return Err(LangError::user(format!(
                "a list nested more than {MAX_RANK} deep cannot become a tensor"
            )));
        }
        let items = items.borrow();
        shape.push(items.len());
        probe = match items.first() {
            Some(first) => first.clone(),
            None => break,
        };
    }
    // Before flattening: a list can repeat one big row many times over.
    checked_numel(&shape)?;
    let mut flat = Vec::new();
    flatten(value, 0, &shape, &mut flat)?;
    let device = &Device::Cpu;
    if flat.iter().all(|v| matches!(v, Value::Int(_))) && !flat.is_empty() {
        let ints: Vec<i64> = flat
            .iter()
            .map(|v| if let Value::Int(i) = v { *i } else { 0 })
            .collect();
        return Ok(CandleTensor::from_vec(ints, shape, device)?);
    }
    if flat.iter().all(|v| matches!(v, Value::Bool(_))) && !flat.is_empty() {
        let bools: Vec<u8> = flat
            .iter()
            .map(|v| u8::from(matches!(v, Value::Bool(true))))
            .collect();
        return Ok(CandleTensor::from_vec(bools, shape, device)?);
    }
    let floats = flat
        .iter()
        .map(|v| match v {
            Value::Int(i) => Ok(*i as f32),
            Value::Float(x) => Ok(*x as f32),
            Value::Bool(b) => Ok(*b as u8 as f32),
            other => Err(LangError::user(format!(
                "a tensor can hold only numbers, found {}",
                other.type_name()
            ))),
        })
        .collect::<Result<Vec<f32>>>()?;
    Ok(CandleTensor::from_vec(floats, shape, device)?)
}

fn flatten(value: &Value, depth: usize, shape: &[usize], out: &mut Vec<Value>) -> Result<()> {
    match value {
        Value::List(items) => {
            let items = items.borrow();
            if depth >= shape.len() || items.len() != shape[depth] {
                return Err(LangError::user(
                    "a nested list must be rectangular to become a tensor",
                ));
            }
            items
                .iter()
                .try_for_each(|item| flatten(item, depth + 1, shape, out))
        }
        scalar if depth == shape.len() => {
            out.push(scalar.clone());
            Ok(())
        }
        _ => Err(LangError::user(
            "a nested list must be rectangular to become a tensor",
        )),
    }
}

/// The single element of a tensor as a number value (int for integer tensors,
/// bool for bool tensors, float otherwise).
pub fn scalar_of(tensor: &CandleTensor) -> Result<Value> {
    if tensor.elem_count() != 1 {
        return Err(LangError::user(format!(
            "expected a tensor of one element, found shape {:?}",
            tensor.dims()
        )));
    }
    let flat = tensor.flatten_all()?;
    Ok(match tensor.dtype() {
        CandleDType::I64 | CandleDType::I32 | CandleDType::U32 | CandleDType::I16 => {
            Value::Int(flat.to_dtype(CandleDType::I64)?.to_vec1::<i64>()?[0])
        }
        CandleDType::U8 => Value::Bool(flat.to_vec1::<u8>()?[0] != 0),
        _ => Value::Float(flat.to_dtype(CandleDType::F64)?.to_vec1::<f64>()?[0]),
    })
}

/// A tensor's elements as f32, row-major and contiguous.
pub fn to_f32_vec(tensor: &CandleTensor) -> Result<Vec<f32>> {
    // Candle slices an empty view's storage at the view's offset, which can lie
    // past the end (`slice(zeros([0, 3]), 1, 1, 3)`), and panics.
    if tensor.elem_count() == 0 {
        return Ok(Vec::new());
    }
    Ok(tensor
        .to_dtype(CandleDType::F32)?
        .flatten_all()?
        .to_vec1::<f32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Value {
        Value::list(values.iter().map(|&i| Value::Int(i)).collect())
    }

    #[test]
    fn nested_lists_become_tensors() -> Result<()> {
        let t = value_to_dense(&Value::list(vec![ints(&[1, 2]), ints(&[3, 4])]))?;
        assert_eq!(t.dims(), &[2, 2]);
        assert!(value_to_dense(&Value::list(vec![ints(&[1]), ints(&[2, 3])])).is_err());
        Ok(())
    }

    #[test]
    fn a_list_that_contains_itself_is_not_a_tensor() {
        let list = ints(&[1]);
        if let Value::List(items) = &list {
            items.borrow_mut().insert(0, list.clone());
        }
        let error = value_to_dense(&list).err().map(|e| e.message);
        assert!(error.is_some_and(|m| m.contains("nested more than")));
    }

    #[test]
    fn a_list_repeating_one_row_cannot_make_a_huge_tensor() {
        let row = ints(&[1; 100_000]);
        let rows = Value::list(vec![row; 100_000]);
        let error = value_to_dense(&rows).err().map(|e| e.message);
        assert!(error.is_some_and(|m| m.contains("too large")));
    }
}
