//! Calling builtins by name in tests, and reading tensors back.

use std::path::PathBuf;

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::Span;

use super::{find, Args, Context};
use crate::error::{LangError, Result};
use crate::value::Value;

/// Calls the builtin `name` with `values`, checking its declared arity.
pub fn call(name: &str, values: Vec<Value>) -> Result<Value> {
    let builtin = find(name).ok_or_else(|| LangError::internal(format!("no builtin {name}")))?;
    assert!(
        (builtin.min_args..=builtin.max_args).contains(&values.len()),
        "{name} called with {} arguments, outside its declared arity",
        values.len()
    );
    let spans = vec![Span::default(); values.len()];
    let args = Args {
        name,
        values: &values,
        spans: &spans,
        call: Span::default(),
    };
    let mut context = Context::captured(PathBuf::from("."), Box::new(std::io::sink()));
    (builtin.call)(&mut context, &args)
}

/// The message of the error `call` returns.
pub fn error(name: &str, values: Vec<Value>) -> String {
    match call(name, values) {
        Ok(v) => panic!("{name} should have failed, returned {v}"),
        Err(e) => e.message,
    }
}

/// A float32 tensor value.
pub fn tensor(values: &[f32], shape: &[usize]) -> Value {
    Value::tensor(
        CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor"),
    )
}

/// An int64 tensor value.
pub fn int_tensor(values: &[i64], shape: &[usize]) -> Value {
    Value::tensor(
        CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor"),
    )
}

/// A list of ints.
pub fn ints(values: &[i64]) -> Value {
    Value::list(values.iter().map(|&i| Value::Int(i)).collect())
}

/// A tensor value's shape and elements (as f64).
pub fn contents(v: &Value) -> (Vec<usize>, Vec<f64>) {
    let Value::Tensor(t) = v else {
        panic!("expected a tensor, found {}", v.type_name());
    };
    let dense = t.to_dense().expect("dense");
    let values = dense
        .to_dtype(CandleDType::F64)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f64>())
        .expect("values");
    (dense.dims().to_vec(), values)
}

/// Whether two slices agree to within `tolerance`.
pub fn close(a: &[f64], b: &[f64], tolerance: f64) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tolerance || x == y)
}

/// A float value's number, or NaN.
pub fn as_float(v: &Value) -> f64 {
    match v {
        Value::Float(x) => *x,
        Value::Int(i) => *i as f64,
        _ => f64::NAN,
    }
}
