//! Indexing and index assignment on tensors, lists and strings.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};

use super::{assign_index, index, IndexValue};
use crate::error::{LangError, Result};
use crate::value::Value;

use IndexValue::{At, Full, Range};

type TestResult = std::result::Result<(), LangError>;

/// float32[2, 3] [[0, 1, 2], [3, 4, 5]].
fn grid() -> Value {
    let values: Vec<f32> = (0..6).map(|i| i as f32).collect();
    Value::tensor(CandleTensor::from_vec(values, (2, 3), &Device::Cpu).expect("test tensor"))
}

fn contents(v: &Value) -> (Vec<usize>, Vec<f32>) {
    let Value::Tensor(t) = v else {
        panic!("expected a tensor, found {}", v.type_name());
    };
    let dense = t.to_dense().expect("dense");
    let values = dense
        .to_dtype(CandleDType::F32)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .expect("values");
    (dense.dims().to_vec(), values)
}

fn message(result: Result<Value>) -> String {
    result.err().map(|e| e.message).unwrap_or_default()
}

#[test]
fn tensor_indices_remove_or_narrow_dims() -> TestResult {
    let x = grid();
    assert_eq!(
        contents(&index(&x, &[At(1)])?),
        (vec![3], vec![3.0, 4.0, 5.0])
    );
    assert_eq!(
        contents(&index(&x, &[At(-1), At(-1)])?),
        (vec![], vec![5.0])
    );
    assert_eq!(
        contents(&index(&x, &[Full, At(1)])?),
        (vec![2], vec![1.0, 4.0])
    );
    assert_eq!(
        contents(&index(&x, &[Full, Range(Some(1), None)])?),
        (vec![2, 2], vec![1.0, 2.0, 4.0, 5.0])
    );
    assert_eq!(
        contents(&index(&x, &[Range(None, Some(-1))])?),
        (vec![1, 3], vec![0.0, 1.0, 2.0])
    );
    assert_eq!(
        contents(&index(&x, &[Range(Some(1), Some(1))])?).0,
        vec![0, 3]
    );
    Ok(())
}

#[test]
fn tensor_index_errors() {
    let x = grid();
    assert_eq!(
        message(index(&x, &[At(5)])),
        "index 5 is out of range for dimension 0 of size 2"
    );
    assert_eq!(
        message(index(&x, &[Full, At(-4)])),
        "index -4 is out of range for dimension 1 of size 3"
    );
    assert_eq!(
        message(index(&x, &[Full, Range(Some(0), Some(4))])),
        "range end 4 is out of range for dimension 1 of size 3"
    );
    assert_eq!(
        message(index(&x, &[Range(Some(2), Some(1))])),
        "range 2:1 starts after it ends, for dimension 0 of size 2"
    );
    assert_eq!(
        message(index(&x, &[At(0), At(0), At(0)])),
        "too many indices: float32[2, 3] has 2 dimensions, found 3 indices"
    );
    assert_eq!(message(index(&Value::Int(1), &[At(0)])), "cannot index int");
}

#[test]
fn tensor_assignment_makes_a_new_tensor() -> TestResult {
    let x = grid();
    let row = assign_index(&x, &[At(0)], &Value::Float(9.0))?;
    assert_eq!(contents(&row).1, vec![9.0, 9.0, 9.0, 3.0, 4.0, 5.0]);
    assert_eq!(contents(&x).1[0], 0.0, "the original is unchanged");
    let col = Value::list(vec![Value::Int(7), Value::Int(8)]);
    let out = assign_index(&x, &[Full, At(2)], &col)?;
    assert_eq!(contents(&out).1, vec![0.0, 1.0, 7.0, 3.0, 4.0, 8.0]);
    // A float16 value is converted to the tensor's float32.
    let patch = CandleTensor::new(&[[1.5f32], [2.5]], &Device::Cpu)?.to_dtype(CandleDType::F16)?;
    let out = assign_index(&x, &[Full, Range(Some(0), Some(1))], &Value::tensor(patch))?;
    assert_eq!(out.type_name(), "float32[2, 3]");
    assert_eq!(contents(&out).1, vec![1.5, 1.0, 2.0, 2.5, 4.0, 5.0]);
    let same = assign_index(&x, &[Range(Some(1), Some(1))], &Value::Float(1.0))?;
    assert_eq!(contents(&same).1, contents(&x).1);
    Ok(())
}

#[test]
fn tensor_assignment_errors() {
    let x = grid();
    let wide =
        Value::tensor(CandleTensor::zeros(4, CandleDType::F32, &Device::Cpu).expect("zeros"));
    assert_eq!(
        message(assign_index(&x, &[At(0)], &wide)),
        "cannot assign float32[4] to a region of shape [3]: shapes do not broadcast"
    );
    assert!(message(assign_index(&x, &[At(2)], &Value::Float(1.0))).contains("out of range"));
    assert!(message(assign_index(&x, &[At(0)], &Value::str("a")))
        .starts_with("cannot assign string into float32[2, 3]"));
}

#[test]
fn lists_index_and_slice() -> TestResult {
    let xs = Value::list((1..=4).map(Value::Int).collect());
    assert!(matches!(index(&xs, &[At(-1)])?, Value::Int(4)));
    assert_eq!(
        index(&xs, &[Range(Some(1), Some(3))])?.to_string(),
        "[2, 3]"
    );
    assert_eq!(index(&xs, &[Full])?.to_string(), "[1, 2, 3, 4]");
    assert_eq!(
        message(index(&xs, &[At(4)])),
        "index 4 is out of range for a list of length 4"
    );
    assert_eq!(
        message(index(&xs, &[At(0), At(0)])),
        "a list takes one index, found 2"
    );
    Ok(())
}

#[test]
fn lists_assign_in_place() -> TestResult {
    let xs = Value::list((1..=4).map(Value::Int).collect());
    let out = assign_index(&xs, &[At(0)], &Value::str("a"))?;
    assert_eq!(xs.to_string(), "[\"a\", 2, 3, 4]");
    assert!(matches!((&out, &xs), (Value::List(a), Value::List(b)) if std::rc::Rc::ptr_eq(a, b)));
    assign_index(
        &xs,
        &[Range(Some(1), Some(3))],
        &Value::list(vec![Value::Int(0)]),
    )?;
    assert_eq!(xs.to_string(), "[\"a\", 0, 4]");
    // Assigning a list into itself reads it before writing.
    assign_index(&xs, &[Range(Some(0), Some(1))], &xs.clone())?;
    assert_eq!(xs.to_string(), "[\"a\", 0, 4, 0, 4]");
    assert!(message(assign_index(&xs, &[Full], &Value::Int(1))).contains("needs a list"));
    Ok(())
}

#[test]
fn strings_index_by_character() -> TestResult {
    let s = Value::str("héllo");
    assert_eq!(index(&s, &[At(1)])?.to_string(), "é");
    assert_eq!(index(&s, &[Range(Some(1), Some(3))])?.to_string(), "él");
    assert_eq!(index(&s, &[Range(Some(-2), None)])?.to_string(), "lo");
    assert_eq!(
        message(index(&s, &[At(5)])),
        "index 5 is out of range for a string of length 5"
    );
    assert!(message(assign_index(&s, &[At(0)], &Value::str("x"))).contains("immutable"));
    Ok(())
}
