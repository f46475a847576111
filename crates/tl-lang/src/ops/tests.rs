//! Every operator path, checked against hand-computed values.

use crate::builtins::test_util::contents;
use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::ast::{BinaryOp, UnaryOp};

use super::shapes::{MAX_LIST_ITEMS, MAX_STRING_BYTES};
use super::{binary, unary, values_equal};
use crate::error::LangError;
use crate::value::Value;

type TestResult = std::result::Result<(), LangError>;

fn tensor(values: &[f32], shape: &[usize]) -> Value {
    Value::tensor(
        CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor"),
    )
}

fn int_tensor(values: &[i64], shape: &[usize]) -> Value {
    Value::tensor(
        CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor"),
    )
}

fn bool_tensor(values: &[u8]) -> Value {
    Value::tensor(CandleTensor::new(values, &Device::Cpu).expect("test tensor"))
}

fn with_dtype(v: Value, dtype: CandleDType) -> Value {
    match v {
        Value::Tensor(t) => Value::tensor(
            t.to_dense()
                .and_then(|t| Ok(t.to_dtype(dtype)?))
                .expect("cast"),
        ),
        other => other,
    }
}

fn message(result: crate::error::Result<Value>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.message,
    }
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn float(x: f64) -> Value {
    Value::Float(x)
}

fn truth(v: crate::error::Result<Value>) -> bool {
    matches!(v, Ok(Value::Bool(true)))
}

#[test]
fn int_arithmetic_stays_int() -> TestResult {
    assert!(matches!(
        binary(BinaryOp::Add, &int(2), &int(3))?,
        Value::Int(5)
    ));
    assert!(matches!(
        binary(BinaryOp::Sub, &int(2), &int(3))?,
        Value::Int(-1)
    ));
    assert!(matches!(
        binary(BinaryOp::Mul, &int(4), &int(3))?,
        Value::Int(12)
    ));
    assert!(matches!(
        binary(BinaryOp::Div, &int(-7), &int(2))?,
        Value::Int(-3)
    ));
    assert!(matches!(
        binary(BinaryOp::Rem, &int(-7), &int(2))?,
        Value::Int(-1)
    ));
    Ok(())
}

#[test]
fn int_errors_are_not_panics() {
    assert_eq!(
        message(binary(BinaryOp::Div, &int(1), &int(0))),
        "cannot divide 1 by 0: division by zero"
    );
    assert!(message(binary(BinaryOp::Rem, &int(1), &int(0))).contains("division by zero"));
    assert!(message(binary(BinaryOp::Add, &int(i64::MAX), &int(1))).contains("overflows"));
    assert!(message(binary(BinaryOp::Div, &int(i64::MIN), &int(-1))).contains("overflows"));
    assert!(message(unary(UnaryOp::Neg, &int(i64::MIN))).contains("overflows"));
}

#[test]
fn mixed_numbers_are_float() -> TestResult {
    assert!(matches!(binary(BinaryOp::Add, &int(1), &float(0.5))?, Value::Float(x) if x == 1.5));
    assert!(matches!(binary(BinaryOp::Div, &float(1.0), &int(4))?, Value::Float(x) if x == 0.25));
    assert!(matches!(binary(BinaryOp::Rem, &float(7.5), &int(2))?, Value::Float(x) if x == 1.5));
    assert!(message(binary(BinaryOp::Div, &float(1.0), &float(0.0))).contains("division by zero"));
    Ok(())
}

#[test]
fn comparisons_give_bools() {
    assert!(truth(binary(BinaryOp::Lt, &int(1), &float(1.5))));
    assert!(truth(binary(BinaryOp::Ge, &int(2), &int(2))));
    assert!(!truth(binary(BinaryOp::Gt, &float(f64::NAN), &int(0))));
    assert!(truth(binary(BinaryOp::Eq, &int(1), &float(1.0))));
    assert!(truth(binary(
        BinaryOp::Lt,
        &Value::str("abc"),
        &Value::str("abd")
    )));
    assert!(truth(binary(BinaryOp::Ne, &Value::str("a"), &int(1))));
    assert!(truth(binary(BinaryOp::Eq, &Value::None, &Value::None)));
    assert!(message(binary(BinaryOp::Lt, &Value::str("a"), &int(1)))
        .starts_with("cannot compare string < int"));
}

#[test]
fn bools_combine() {
    assert!(truth(binary(
        BinaryOp::And,
        &Value::Bool(true),
        &Value::Bool(true)
    )));
    assert!(!truth(binary(
        BinaryOp::And,
        &Value::Bool(true),
        &Value::Bool(false)
    )));
    assert!(truth(binary(
        BinaryOp::Or,
        &Value::Bool(false),
        &Value::Bool(true)
    )));
    assert!(truth(unary(UnaryOp::Not, &Value::Bool(false))));
    assert!(message(binary(BinaryOp::And, &int(1), &int(1))).contains("&&"));
    assert_eq!(
        message(unary(UnaryOp::Not, &int(1))),
        "`!` needs a bool or a bool tensor, found int"
    );
}

#[test]
fn strings_and_lists() -> TestResult {
    let s = binary(BinaryOp::Add, &Value::str("ab"), &Value::str("cd"))?;
    assert_eq!(s.to_string(), "abcd");
    assert_eq!(
        binary(BinaryOp::Mul, &Value::str("ab"), &int(2))?.to_string(),
        "abab"
    );
    let xs = Value::list(vec![int(1), int(2)]);
    let ys = Value::list(vec![int(3)]);
    assert_eq!(binary(BinaryOp::Add, &xs, &ys)?.to_string(), "[1, 2, 3]");
    assert_eq!(
        binary(BinaryOp::Mul, &xs, &int(2))?.to_string(),
        "[1, 2, 1, 2]"
    );
    assert_eq!(binary(BinaryOp::Mul, &int(0), &xs)?.to_string(), "[]");
    assert!(message(binary(BinaryOp::Mul, &xs, &int(-1))).contains("-1 times"));
    assert_eq!(
        message(binary(BinaryOp::Add, &Value::str("a"), &int(1))),
        "cannot add string and int"
    );
    Ok(())
}

#[test]
fn repetition_and_concatenation_stop_at_the_size_limits() -> TestResult {
    let xs = Value::list(vec![int(1), int(2)]);
    assert!(message(binary(BinaryOp::Mul, &xs, &int(i64::MAX))).contains("too long"));
    let half_list = (MAX_LIST_ITEMS / 2) as i64;
    assert!(message(binary(BinaryOp::Mul, &int(half_list + 1), &xs)).contains("too long"));
    let empty = Value::list(Vec::new());
    assert_eq!(
        binary(BinaryOp::Mul, &empty, &int(i64::MAX))?.to_string(),
        "[]"
    );
    let s = Value::str("ab");
    let half = (MAX_STRING_BYTES / 2) as i64;
    assert!(message(binary(BinaryOp::Mul, &s, &int(half + 1))).contains("too long"));
    // Doubling stops at the limit instead of exhausting memory.
    let mut big = binary(BinaryOp::Mul, &Value::str("x"), &int(half))?;
    big = binary(BinaryOp::Add, &big, &big)?;
    assert!(message(binary(BinaryOp::Add, &big, &s)).contains("too long"));
    let long = binary(BinaryOp::Mul, &xs, &int(half_list / 2))?;
    let longer = binary(BinaryOp::Add, &long, &long)?;
    assert!(message(binary(BinaryOp::Add, &longer, &xs)).contains("too long"));
    Ok(())
}

#[test]
fn broadcasting_that_would_make_a_huge_tensor_is_an_error() -> TestResult {
    let column = Value::tensor(CandleTensor::zeros(
        (100_000, 1),
        CandleDType::F32,
        &Device::Cpu,
    )?);
    let row = Value::tensor(CandleTensor::zeros(
        (1, 100_000),
        CandleDType::F32,
        &Device::Cpu,
    )?);
    for op in [BinaryOp::Add, BinaryOp::Rem, BinaryOp::Lt, BinaryOp::MatMul] {
        assert!(
            message(binary(op, &column, &row)).contains("too large"),
            "{op:?}"
        );
    }
    let int_column = with_dtype(column.clone(), CandleDType::I64);
    let int_row = with_dtype(row.clone(), CandleDType::I64);
    assert!(message(binary(BinaryOp::Mul, &int_column, &int_row)).contains("too large"));
    // An operand as large as the result is fine, whatever its size.
    let (shape, _) = contents(&binary(BinaryOp::Add, &column, &float(1.0))?);
    assert_eq!(shape, vec![100_000, 1]);
    Ok(())
}

#[test]
fn equality_is_structural_for_data_and_identity_for_structs() {
    let a = Value::list(vec![int(1), Value::str("x"), Value::list(vec![float(2.0)])]);
    let b = Value::list(vec![int(1), Value::str("x"), Value::list(vec![int(2)])]);
    assert!(matches!(values_equal(&a, &b), Ok(true)));
    let c = Value::list(vec![int(1)]);
    assert!(matches!(values_equal(&a, &c), Ok(false)));
    let s1 = Value::record("P", vec![("x".into(), int(1))]);
    let s2 = Value::record("P", vec![("x".into(), int(1))]);
    assert!(matches!(values_equal(&s1, &s1.clone()), Ok(true)));
    assert!(matches!(values_equal(&s1, &s2), Ok(false)));
    assert!(matches!(
        values_equal(&Value::Bool(true), &int(1)),
        Ok(false)
    ));
    let t = Value::list(vec![tensor(&[1.0, 2.0], &[2])]);
    let u = Value::list(vec![tensor(&[1.0, 2.0], &[2])]);
    assert!(matches!(values_equal(&t, &u), Ok(true)));
}

#[test]
fn tensor_arithmetic_broadcasts() -> TestResult {
    let a = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor(&[10.0, 20.0, 30.0], &[3]);
    assert_eq!(
        contents(&binary(BinaryOp::Add, &a, &b)?),
        (vec![2, 3], vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0])
    );
    assert_eq!(
        contents(&binary(BinaryOp::Sub, &b, &a)?).1,
        vec![9.0, 18.0, 27.0, 6.0, 15.0, 24.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Mul, &a, &b)?).1,
        vec![10.0, 40.0, 90.0, 40.0, 100.0, 180.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Div, &b, &a)?).1,
        vec![10.0, 10.0, 10.0, 2.5, 4.0, 5.0]
    );
    let col = tensor(&[1.0, 2.0], &[2, 1]);
    assert_eq!(contents(&binary(BinaryOp::Add, &col, &b)?).0, vec![2, 3]);
    Ok(())
}

#[test]
fn scalars_take_the_tensor_type() -> TestResult {
    let half = with_dtype(tensor(&[1.0, 2.0], &[2]), CandleDType::F16);
    let out = binary(BinaryOp::Mul, &half, &float(0.5))?;
    assert_eq!(out.type_name(), "float16[2]");
    assert_eq!(contents(&out).1, vec![0.5, 1.0]);
    let out = binary(BinaryOp::Sub, &int(1), &tensor(&[1.0, 2.0], &[2]))?;
    assert_eq!(contents(&out).1, vec![0.0, -1.0]);
    let ints = int_tensor(&[1, 2], &[2]);
    assert_eq!(
        binary(BinaryOp::Add, &ints, &float(1.0))?.type_name(),
        "int64[2]"
    );
    let err = message(binary(BinaryOp::Mul, &ints, &float(0.5)));
    assert!(
        err.starts_with("cannot multiply int64[2] and float: the float 0.5 is not a whole number"),
        "{err}"
    );
    let list = Value::list(vec![int(1), int(2)]);
    assert_eq!(
        contents(&binary(BinaryOp::Add, &tensor(&[1.0, 1.0], &[2]), &list)?).1,
        vec![2.0, 3.0]
    );
    Ok(())
}

#[test]
fn tensor_type_and_shape_errors() {
    let a = with_dtype(tensor(&[0.0; 6], &[2, 3]), CandleDType::F16);
    let b = tensor(&[0.0; 6], &[2, 3]);
    let err = binary(BinaryOp::Add, &a, &b).expect_err("dtype error");
    assert_eq!(
        err.message,
        "cannot add float16[2, 3] and float32[2, 3]: element types differ"
    );
    assert_eq!(
        err.hint.as_deref(),
        Some("convert one side with to_dtype(x, \"float32\")")
    );
    let c = tensor(&[0.0; 4], &[4]);
    assert_eq!(
        message(binary(BinaryOp::Add, &b, &c)),
        "cannot add float32[2, 3] and float32[4]: shapes do not broadcast"
    );
    assert_eq!(
        message(binary(BinaryOp::Sub, &b, &c)),
        "cannot subtract float32[4] from float32[2, 3]: shapes do not broadcast"
    );
    assert!(message(binary(BinaryOp::Add, &b, &Value::str("x")))
        .starts_with("cannot add float32[2, 3] and string"));
    let bools = bool_tensor(&[1, 0]);
    assert!(message(binary(BinaryOp::Add, &bools, &bools)).contains("arithmetic needs numbers"));
}

#[test]
fn int_tensor_arithmetic_is_checked() -> TestResult {
    let a = int_tensor(&[7, -7], &[2]);
    assert_eq!(
        contents(&binary(BinaryOp::Div, &a, &int(2))?).1,
        vec![3.0, -3.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Rem, &a, &int(2))?).1,
        vec![1.0, -1.0]
    );
    assert!(message(binary(BinaryOp::Div, &a, &int(0))).ends_with("division by zero"));
    let big = int_tensor(&[i64::MAX], &[1]);
    assert!(message(binary(BinaryOp::Mul, &big, &int(2))).contains("overflows int64"));
    assert_eq!(contents(&unary(UnaryOp::Neg, &a)?).1, vec![-7.0, 7.0]);
    Ok(())
}

#[test]
fn float_tensor_remainder_follows_the_dividend() -> TestResult {
    let a = tensor(&[7.5, -7.5], &[2]);
    assert_eq!(
        contents(&binary(BinaryOp::Rem, &a, &float(2.0))?).1,
        vec![1.5, -1.5]
    );
    Ok(())
}

#[test]
fn tensor_comparisons_give_bool_tensors() -> TestResult {
    let a = tensor(&[1.0, 2.0, 3.0], &[3]);
    let lt = binary(BinaryOp::Lt, &a, &float(2.0))?;
    assert_eq!(lt.type_name(), "bool[3]");
    assert_eq!(contents(&lt).1, vec![1.0, 0.0, 0.0]);
    assert_eq!(
        contents(&binary(BinaryOp::Ge, &int(2), &a)?).1,
        vec![1.0, 1.0, 0.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Eq, &a, &a)?).1,
        vec![1.0, 1.0, 1.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Ne, &a, &float(2.0))?).1,
        vec![1.0, 0.0, 1.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Le, &a, &float(2.0))?).1,
        vec![1.0, 1.0, 0.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Gt, &a, &float(2.0))?).1,
        vec![0.0, 0.0, 1.0]
    );
    // A tensor is never equal to something that is not tensor-like.
    assert!(matches!(
        binary(BinaryOp::Eq, &a, &Value::None)?,
        Value::Bool(false)
    ));
    assert!(matches!(
        binary(BinaryOp::Ne, &Value::str("a"), &a)?,
        Value::Bool(true)
    ));
    Ok(())
}

#[test]
fn bool_tensors_combine_and_invert() -> TestResult {
    let p = bool_tensor(&[1, 1, 0, 0]);
    let q = bool_tensor(&[1, 0, 1, 0]);
    assert_eq!(
        contents(&binary(BinaryOp::And, &p, &q)?).1,
        vec![1.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::Or, &p, &q)?).1,
        vec![1.0, 1.0, 1.0, 0.0]
    );
    assert_eq!(
        contents(&binary(BinaryOp::And, &p, &Value::Bool(false))?).1,
        vec![0.0; 4]
    );
    assert_eq!(
        contents(&unary(UnaryOp::Not, &p)?).1,
        vec![0.0, 0.0, 1.0, 1.0]
    );
    let f = tensor(&[1.0], &[1]);
    assert!(message(binary(BinaryOp::And, &f, &f)).contains("needs bools"));
    assert!(message(unary(UnaryOp::Not, &f)).contains("found float32[1]"));
    assert!(message(unary(UnaryOp::Neg, &p)).contains("cannot negate bool[4]"));
    Ok(())
}

#[test]
fn negation() -> TestResult {
    assert!(matches!(unary(UnaryOp::Neg, &int(3))?, Value::Int(-3)));
    assert!(matches!(unary(UnaryOp::Neg, &float(1.5))?, Value::Float(x) if x == -1.5));
    assert_eq!(
        contents(&unary(UnaryOp::Neg, &tensor(&[1.0, -2.0], &[2]))?).1,
        vec![-1.0, 2.0]
    );
    assert_eq!(
        message(unary(UnaryOp::Neg, &Value::str("a"))),
        "cannot negate string"
    );
    Ok(())
}

#[test]
fn matmul_shapes_follow_numpy() -> TestResult {
    let a = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &a, &b)?),
        (vec![2, 2], vec![4.0, 5.0, 10.0, 11.0])
    );
    let v3 = tensor(&[1.0, 1.0, 1.0], &[3]);
    let v2 = tensor(&[1.0, -1.0], &[2]);
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &a, &v3)?),
        (vec![2], vec![6.0, 15.0])
    );
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &v2, &a)?),
        (vec![3], vec![-3.0, -3.0, -3.0])
    );
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &v3, &v3)?),
        (vec![], vec![3.0])
    );
    // A batch of two matrices times one matrix: the batch dimension broadcasts.
    let batch = tensor(&[1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0], &[2, 2, 2]);
    let m = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let out = binary(BinaryOp::MatMul, &batch, &m)?;
    assert_eq!(
        contents(&out),
        (vec![2, 2, 2], vec![1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 6.0, 8.0])
    );
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &v2, &batch)?).0,
        vec![2, 2]
    );
    Ok(())
}

#[test]
fn matmul_errors() {
    let a = tensor(&[0.0; 6], &[2, 3]);
    let b = tensor(&[0.0; 20], &[4, 5]);
    assert_eq!(
        message(binary(BinaryOp::MatMul, &a, &b)),
        "cannot multiply float32[2, 3] @ float32[4, 5]: inner dimensions 3 and 4 differ"
    );
    let ints = int_tensor(&[1, 2, 3, 4], &[2, 2]);
    let err = binary(BinaryOp::MatMul, &ints, &ints).expect_err("int matmul");
    assert!(err.message.contains("needs float tensors"));
    assert!(err.hint.is_some_and(|h| h.contains("to_dtype")));
    let half = with_dtype(tensor(&[0.0; 9], &[3, 3]), CandleDType::F16);
    assert!(message(binary(BinaryOp::MatMul, &a, &half)).ends_with("element types differ"));
    assert!(message(binary(BinaryOp::MatMul, &a, &float(2.0))).contains("at least one dimension"));
    assert!(message(binary(BinaryOp::MatMul, &int(1), &int(2)))
        .starts_with("cannot multiply int @ int"));
    let b3 = tensor(&[0.0; 18], &[2, 3, 3]);
    let c3 = tensor(&[0.0; 27], &[3, 3, 3]);
    assert!(message(binary(BinaryOp::MatMul, &b3, &c3))
        .contains("batch dimensions [2] and [3] do not broadcast"));
}

#[test]
fn empty_tensors_pass_through() -> TestResult {
    let empty = tensor(&[], &[0, 3]);
    assert_eq!(
        binary(BinaryOp::Add, &empty, &float(1.0))?.type_name(),
        "float32[0, 3]"
    );
    assert_eq!(
        binary(BinaryOp::Lt, &empty, &empty)?.type_name(),
        "bool[0, 3]"
    );
    assert_eq!(
        binary(BinaryOp::Rem, &empty, &float(2.0))?.type_name(),
        "float32[0, 3]"
    );
    let ints = int_tensor(&[], &[0]);
    assert_eq!(
        binary(BinaryOp::Div, &ints, &int(0))?.type_name(),
        "int64[0]"
    );
    let a = tensor(&[], &[2, 0]);
    let b = tensor(&[], &[0, 3]);
    assert_eq!(
        contents(&binary(BinaryOp::MatMul, &a, &b)?),
        (vec![2, 3], vec![0.0; 6])
    );
    assert!(matches!(
        values_equal(&empty, &tensor(&[], &[0, 3])),
        Ok(true)
    ));
    Ok(())
}
