//! `==` between any two values: structural for plain data (none, numbers, bools,
//! strings, lists), identity for structs and handles (they stand for mutable
//! objects), and for tensors nested in lists, same type and same elements.

use std::rc::Rc;

use crate::error::{LangError, Result};
use crate::tensor::Tensor;
use crate::value::Value;

/// Lists nested deeper than this are refused rather than risking the stack
/// (a list can contain itself).
const MAX_DEPTH: usize = 256;

/// Whether `a == b` (tensors compare as a whole here; the `==` operator on a
/// tensor is elementwise and does not come here).
pub fn values_equal(a: &Value, b: &Value) -> Result<bool> {
    equal_at(a, b, 0)
}

fn equal_at(a: &Value, b: &Value, depth: usize) -> Result<bool> {
    if depth > MAX_DEPTH {
        return Err(LangError::user(format!(
            "cannot compare lists nested more than {MAX_DEPTH} deep"
        )));
    }
    Ok(match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => *x as f64 == *y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            if Rc::ptr_eq(x, y) {
                return Ok(true);
            }
            let (x, y) = (x.borrow(), y.borrow());
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y.iter()) {
                if !equal_at(p, q, depth + 1)? {
                    return Ok(false);
                }
            }
            true
        }
        (Value::Tensor(x), Value::Tensor(y)) => tensors_equal(x, y)?,
        (Value::Struct(x), Value::Struct(y)) => Rc::ptr_eq(x, y),
        (Value::Handle(x), Value::Handle(y)) => x.same(y),
        _ => false,
    })
}

/// Same element type, same shape, same elements.
fn tensors_equal(a: &Tensor, b: &Tensor) -> Result<bool> {
    if a.dtype() != b.dtype() || a.dims() != b.dims() {
        return Ok(false);
    }
    let (x, y) = (a.to_dense()?, b.to_dense()?);
    if x.elem_count() == 0 {
        return Ok(true);
    }
    Ok(x.ne(&y)?.flatten_all()?.max(0)?.to_vec0::<u8>()? == 0)
}
