//! Argument values that builtins must survive: empties, 0-d and integer and
//! half-precision tensors, negative and huge numbers, NaN, strings, none,
//! ragged and deep lists, and structs.

use candle_core::{DType, Device, Tensor as CandleTensor};
use tl_lang::Value;

fn tensor(t: candle_core::Result<CandleTensor>) -> Value {
    Value::tensor(t.expect("a test tensor"))
}

fn ints(items: &[i64]) -> Value {
    Value::list(items.iter().map(|&i| Value::Int(i)).collect())
}

/// The pool, each value with a short description for failure reports.
pub fn pool() -> Vec<(&'static str, Value)> {
    let cpu = &Device::Cpu;
    let matrix = || CandleTensor::arange(0f32, 6.0, cpu).and_then(|t| t.reshape((2, 3)));
    vec![
        ("none", Value::None),
        ("0", Value::Int(0)),
        ("1", Value::Int(1)),
        ("2", Value::Int(2)),
        ("-1", Value::Int(-1)),
        ("-7", Value::Int(-7)),
        ("3", Value::Int(3)),
        ("100000", Value::Int(100_000)),
        ("2^31", Value::Int(1 << 31)),
        ("i64::MAX", Value::Int(i64::MAX)),
        ("i64::MIN", Value::Int(i64::MIN)),
        ("0.0", Value::Float(0.0)),
        ("-1.5", Value::Float(-1.5)),
        ("1e308", Value::Float(1e308)),
        ("NaN", Value::Float(f64::NAN)),
        ("-inf", Value::Float(f64::NEG_INFINITY)),
        ("true", Value::Bool(true)),
        ("\"\"", Value::str("")),
        ("\"float16\"", Value::str("float16")),
        ("\"int64\"", Value::str("int64")),
        ("\"bool\"", Value::str("bool")),
        ("\"{}{:.3}\"", Value::str("{}{:.3}")),
        ("\"{:.999999}\"", Value::str("{:.999999}")),
        ("\"ij,jk->ik\"", Value::str("ij,jk->ik")),
        ("\"ii->i\"", Value::str("ii->i")),
        ("\"abc\"", Value::str("abc")),
        ("\"ii,i->\"", Value::str("ii,i->")),
        ("\"é\" * 1000", Value::str("é".repeat(1000))),
        ("[]", Value::list(Vec::new())),
        ("[0]", ints(&[0])),
        ("[-1]", ints(&[-1])),
        ("[2, 3]", ints(&[2, 3])),
        ("[3, -1]", ints(&[3, -1])),
        ("[1, 0]", ints(&[1, 0])),
        ("[1e9, 1e9]", ints(&[1_000_000_000, 1_000_000_000])),
        ("[i64::MAX, 2]", ints(&[i64::MAX, 2])),
        (
            "[[1], [2, 3]]",
            Value::list(vec![ints(&[1]), ints(&[2, 3])]),
        ),
        (
            "[[1, 2], [3, 4]]",
            Value::list(vec![ints(&[1, 2]), ints(&[3, 4])]),
        ),
        ("[[]]", Value::list(vec![Value::list(Vec::new())])),
        ("[none]", Value::list(vec![Value::None])),
        (
            "[\"a\", \"b\"]",
            Value::list(vec![Value::str("a"), Value::str("b")]),
        ),
        (
            "[1.5, NaN]",
            Value::list(vec![Value::Float(1.5), Value::Float(f64::NAN)]),
        ),
        (
            "zeros([0])",
            tensor(CandleTensor::zeros(0, DType::F32, cpu)),
        ),
        (
            "zeros([0, 3])",
            tensor(CandleTensor::zeros((0, 3), DType::F32, cpu)),
        ),
        (
            "zeros([2, 0])",
            tensor(CandleTensor::zeros((2, 0), DType::F32, cpu)),
        ),
        (
            "zeros([1, 1, 0])",
            tensor(CandleTensor::zeros((1, 1, 0), DType::F32, cpu)),
        ),
        (
            "zeros([2, 0, 4])",
            tensor(CandleTensor::zeros((2, 0, 4), DType::F32, cpu)),
        ),
        (
            "float32[2, 2, 2]",
            tensor(CandleTensor::ones((2, 2, 2), DType::F32, cpu)),
        ),
        (
            "float16[1, 3, 2]",
            tensor(CandleTensor::ones((1, 3, 2), DType::F16, cpu)),
        ),
        (
            "int64[1, 1, 1]",
            tensor(CandleTensor::zeros((1, 1, 1), DType::I64, cpu)),
        ),
        ("tensor(1.5)", tensor(CandleTensor::new(1.5f32, cpu))),
        ("tensor(7)", tensor(CandleTensor::new(7i64, cpu))),
        ("float32[2, 3]", tensor(matrix())),
        (
            "float32[3]",
            tensor(CandleTensor::new(&[1f32, -2.0, 0.5], cpu)),
        ),
        ("float32[1]", tensor(CandleTensor::new(&[3f32], cpu))),
        (
            "float32[2, 1, 3, 1]",
            tensor(matrix().and_then(|t| t.reshape((2, 1, 3, 1)))),
        ),
        (
            "float32[4, 2, 3, 2]",
            tensor(CandleTensor::ones((4, 2, 3, 2), DType::F32, cpu)),
        ),
        (
            "float32 NaN",
            tensor(CandleTensor::new(&[f32::NAN, f32::INFINITY], cpu)),
        ),
        (
            "int64[2, 3]",
            tensor(matrix().and_then(|t| t.to_dtype(DType::I64))),
        ),
        (
            "int64[3]",
            tensor(CandleTensor::new(&[i64::MAX, i64::MIN, -1], cpu)),
        ),
        (
            "int32[2, 3]",
            tensor(matrix().and_then(|t| t.to_dtype(DType::I32))),
        ),
        (
            "float16[2, 3]",
            tensor(matrix().and_then(|t| t.to_dtype(DType::F16))),
        ),
        (
            "bfloat16[3, 2]",
            tensor(matrix().and_then(|t| t.to_dtype(DType::BF16)?.t())),
        ),
        ("bool[2, 3]", tensor(matrix().and_then(|t| t.ge(2f64)))),
        (
            "float32[3, 2] (transposed view)",
            tensor(matrix().and_then(|t| t.t())),
        ),
        (
            "float32[2; 8] (reversed view)",
            tensor(
                CandleTensor::arange(0f32, 256.0, cpu)
                    .and_then(|t| t.reshape(vec![2usize; 8]))
                    .and_then(|t| t.permute(vec![7usize, 6, 5, 4, 3, 2, 1, 0])),
            ),
        ),
        (
            "struct P { a: 1, b: [2] }",
            Value::record(
                "P",
                vec![("a".into(), Value::Int(1)), ("b".into(), ints(&[2]))],
            ),
        ),
    ]
}
