//! Tests of the math builtins against hand-computed values.

use crate::builtins::test_util::{
    as_float, call, close, contents, error, int_tensor, ints, tensor,
};
use crate::error::LangError;
use crate::value::Value;

type TestResult = std::result::Result<(), LangError>;

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn float(x: f64) -> Value {
    Value::Float(x)
}

fn half(v: Value) -> Value {
    call("to_dtype", vec![v, Value::str("float16")]).expect("to float16")
}

/// float32[2, 3] [[1, 5, 3], [4, 2, 6]].
fn grid() -> Value {
    tensor(&[1.0, 5.0, 3.0, 4.0, 2.0, 6.0], &[2, 3])
}

#[test]
fn elementwise_on_tensors() -> TestResult {
    let x = tensor(&[0.0, 1.0, -1.0], &[3]);
    let e = std::f64::consts::E;
    assert!(close(
        &contents(&call("exp", vec![x.clone()])?).1,
        &[1.0, e, 1.0 / e],
        1e-6
    ));
    assert!(close(
        &contents(&call("log", vec![tensor(&[1.0, 4.0], &[2])])?).1,
        &[0.0, 4f64.ln()],
        1e-6
    ));
    assert_eq!(
        contents(&call("sqrt", vec![tensor(&[4.0, 9.0], &[2])])?).1,
        vec![2.0, 3.0]
    );
    assert_eq!(
        contents(&call("abs", vec![x.clone()])?).1,
        vec![0.0, 1.0, 1.0]
    );
    assert!(close(
        &contents(&call("sin", vec![x.clone()])?).1,
        &[0.0, 1f64.sin(), -(1f64.sin())],
        1e-6
    ));
    assert!(close(
        &contents(&call("cos", vec![x.clone()])?).1,
        &[1.0, 1f64.cos(), 1f64.cos()],
        1e-6
    ));
    assert!(close(
        &contents(&call("tanh", vec![x.clone()])?).1,
        &[0.0, 1f64.tanh(), -(1f64.tanh())],
        1e-6
    ));
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    assert!(close(
        &contents(&call("sigmoid", vec![x.clone()])?).1,
        &[0.5, sig(1.0), sig(-1.0)],
        1e-6
    ));
    assert_eq!(
        contents(&call("relu", vec![x.clone()])?).1,
        vec![0.0, 1.0, 0.0]
    );
    // Exact GELU: x·Φ(x); Φ(1) = 0.8413447460685429.
    assert!(close(
        &contents(&call("gelu", vec![x.clone()])?).1,
        &[0.0, 0.841344746, -0.158655254],
        1e-6
    ));
    assert!(close(
        &contents(&call("silu", vec![x.clone()])?).1,
        &[0.0, sig(1.0), -sig(-1.0)],
        1e-6
    ));
    Ok(())
}

#[test]
fn elementwise_types() -> TestResult {
    let ints = int_tensor(&[-2, 3], &[2]);
    assert_eq!(call("abs", vec![ints.clone()])?.type_name(), "int64[2]");
    assert_eq!(
        contents(&call("relu", vec![ints.clone()])?).1,
        vec![0.0, 3.0]
    );
    assert_eq!(call("exp", vec![ints])?.type_name(), "float32[2]");
    assert_eq!(
        call("tanh", vec![half(tensor(&[0.5], &[1]))])?.type_name(),
        "float16[1]"
    );
    let mask = call(
        "tensor",
        vec![Value::list(vec![int(1)]), Value::str("bool")],
    )?;
    assert_eq!(
        error("exp", vec![mask.clone()]),
        "exp needs numbers, found bool[1]"
    );
    assert_eq!(error("abs", vec![mask]), "abs needs numbers, found bool[1]");
    assert!(error("abs", vec![int_tensor(&[i64::MIN], &[1])]).contains("overflows int64"));
    assert!(error("sqrt", vec![Value::str("x")]).contains("must be a tensor"));
    Ok(())
}

#[test]
fn elementwise_on_numbers() -> TestResult {
    assert!((as_float(&call("exp", vec![int(1)])?) - std::f64::consts::E).abs() < 1e-12);
    assert!(matches!(call("sqrt", vec![float(2.25)])?, Value::Float(x) if x == 1.5));
    assert!(matches!(call("abs", vec![int(-3)])?, Value::Int(3)));
    assert!(matches!(call("abs", vec![float(-0.5)])?, Value::Float(x) if x == 0.5));
    assert!(matches!(call("relu", vec![int(-3)])?, Value::Int(0)));
    assert!((as_float(&call("gelu", vec![float(1.0)])?) - 0.8413447460685429).abs() < 1e-9);
    assert!(as_float(&call("log", vec![float(-1.0)])?).is_nan());
    assert!(error("abs", vec![int(i64::MIN)]).contains("overflows"));
    Ok(())
}

#[test]
fn pow_keeps_ints_when_it_can() -> TestResult {
    assert!(matches!(
        call("pow", vec![int(2), int(10)])?,
        Value::Int(1024)
    ));
    assert!(matches!(call("pow", vec![int(2), int(-1)])?, Value::Float(x) if x == 0.5));
    assert!(matches!(call("pow", vec![float(9.0), float(0.5)])?, Value::Float(x) if x == 3.0));
    let p = call("pow", vec![tensor(&[-2.0, 3.0], &[2]), int(2)])?;
    assert_eq!(contents(&p).1, vec![4.0, 9.0]);
    assert!(error("pow", vec![int(10), int(30)]).contains("overflows"));
    assert!(
        error("pow", vec![tensor(&[1.0], &[1]), tensor(&[1.0, 2.0], &[2])])
            .contains("must be a number")
    );
    Ok(())
}

#[test]
fn reductions_over_everything() -> TestResult {
    assert!(matches!(call("sum", vec![grid()])?, Value::Float(x) if x == 21.0));
    assert!(matches!(call("mean", vec![grid()])?, Value::Float(x) if x == 3.5));
    assert!(matches!(call("max", vec![grid()])?, Value::Float(x) if x == 6.0));
    assert!(matches!(call("min", vec![grid()])?, Value::Float(x) if x == 1.0));
    assert!(matches!(call("argmax", vec![grid()])?, Value::Int(5)));
    assert!(matches!(call("argmin", vec![grid()])?, Value::Int(0)));
    assert!(matches!(
        call("sum", vec![int_tensor(&[1, 2, 3], &[3])])?,
        Value::Int(6)
    ));
    assert!(matches!(
        call("max", vec![int_tensor(&[1, 7, 3], &[3])])?,
        Value::Int(7)
    ));
    assert!(matches!(call("sum", vec![ints(&[1, 2])])?, Value::Int(3)));
    let mask = call("tensor", vec![ints(&[1, 0, 1]), Value::str("bool")])?;
    assert!(matches!(call("sum", vec![mask])?, Value::Int(2)));
    // 4096 ones in float16: an f16 accumulator would stop at 2048.
    let ones = call("ones", vec![int(4096), Value::str("float16")])?;
    assert!(matches!(call("sum", vec![ones])?, Value::Float(x) if x == 4096.0));
    let empty = call("zeros", vec![ints(&[0])])?;
    assert!(matches!(call("sum", vec![empty.clone()])?, Value::Float(x) if x == 0.0));
    assert_eq!(
        error("max", vec![empty]),
        "max of an empty tensor (float32[0]) has no value"
    );
    assert!(error("sum", vec![int_tensor(&[i64::MAX, 1], &[2])]).contains("overflows"));
    Ok(())
}

#[test]
fn reductions_over_dims() -> TestResult {
    assert_eq!(
        contents(&call("sum", vec![grid(), int(0)])?),
        (vec![3], vec![5.0, 7.0, 9.0])
    );
    assert_eq!(
        contents(&call("sum", vec![grid(), int(-1), Value::Bool(true)])?),
        (vec![2, 1], vec![9.0, 12.0])
    );
    assert_eq!(
        contents(&call("sum", vec![grid(), ints(&[0, 1])])?),
        (vec![], vec![21.0])
    );
    assert_eq!(
        contents(&call("mean", vec![grid(), int(1)])?),
        (vec![2], vec![3.0, 4.0])
    );
    assert_eq!(
        contents(&call("max", vec![grid(), int(1)])?),
        (vec![2], vec![5.0, 6.0])
    );
    assert_eq!(
        contents(&call("min", vec![grid(), int(0)])?),
        (vec![3], vec![1.0, 2.0, 3.0])
    );
    assert_eq!(
        contents(&call(
            "max",
            vec![grid(), ints(&[0, 1]), Value::Bool(true)]
        )?),
        (vec![1, 1], vec![6.0])
    );
    let am = call("argmax", vec![grid(), int(1)])?;
    assert_eq!(am.type_name(), "int64[2]");
    assert_eq!(contents(&am).1, vec![1.0, 2.0]);
    assert_eq!(
        contents(&call("argmin", vec![grid(), int(0), Value::Bool(true)])?),
        (vec![1, 3], vec![0.0, 1.0, 0.0])
    );
    assert_eq!(
        call("sum", vec![grid(), Value::None, Value::Bool(true)])?.type_name(),
        "float32[1, 1]"
    );
    let ints_sum = call("sum", vec![int_tensor(&[1, 2, 3, 4], &[2, 2]), int(0)])?;
    assert_eq!(contents(&ints_sum), (vec![2], vec![4.0, 6.0]));
    assert_eq!(
        call("mean", vec![int_tensor(&[1, 2], &[2]), int(0)])?.type_name(),
        "float32[]"
    );
    let h = call("sum", vec![half(grid()), int(1)])?;
    assert_eq!(h.type_name(), "float16[2]");
    assert_eq!(contents(&h).1, vec![9.0, 12.0]);
    Ok(())
}

#[test]
fn reduction_errors() -> TestResult {
    assert_eq!(
        error("sum", vec![grid(), int(2)]),
        "dimension 2 is out of range for a tensor of rank 2"
    );
    assert!(error("sum", vec![grid(), ints(&[0, 0])]).contains("named twice"));
    assert!(error("argmax", vec![grid(), ints(&[0, 1])]).contains("must be one dimension"));
    let empty = call("zeros", vec![ints(&[2, 0])])?;
    assert_eq!(
        contents(&call("sum", vec![empty.clone(), int(1)])?),
        (vec![2], vec![0.0, 0.0])
    );
    assert_eq!(
        contents(&call("max", vec![empty.clone(), int(0)])?).0,
        vec![0]
    );
    assert!(error("max", vec![empty, int(1)]).contains("it is empty"));
    Ok(())
}

#[test]
fn max_and_min_of_two() -> TestResult {
    assert!(matches!(call("max", vec![int(2), int(5)])?, Value::Int(5)));
    assert!(matches!(call("min", vec![int(2), float(1.5)])?, Value::Float(x) if x == 1.5));
    assert!(matches!(call("max", vec![float(2.5), int(1)])?, Value::Float(x) if x == 2.5));
    let a = tensor(&[1.0, 5.0], &[2]);
    let b = tensor(&[3.0, 2.0], &[2]);
    assert_eq!(
        contents(&call("max", vec![a.clone(), b.clone()])?).1,
        vec![3.0, 5.0]
    );
    assert_eq!(
        contents(&call("min", vec![a.clone(), b.clone()])?).1,
        vec![1.0, 2.0]
    );
    let zero = call("tensor", vec![float(2.0)])?;
    assert_eq!(
        contents(&call("max", vec![a.clone(), zero])?).1,
        vec![2.0, 5.0]
    );
    assert_eq!(
        contents(&call("min", vec![float(2.0), a.clone()])?).1,
        vec![1.0, 2.0]
    );
    assert!(error("max", vec![a.clone(), float(0.5)])
        .contains("must be a dimension (an int) or a tensor"));
    assert!(error("max", vec![a.clone(), half(b)]).contains("element types differ"));
    assert!(error("max", vec![a, tensor(&[1.0; 3], &[3])]).contains("shapes do not broadcast"));
    Ok(())
}

#[test]
fn allclose_all_any() -> TestResult {
    let a = tensor(&[1.0, 2.0], &[2]);
    let b = tensor(&[1.0, 2.000001], &[2]);
    assert!(matches!(
        call("allclose", vec![a.clone(), b.clone()])?,
        Value::Bool(true)
    ));
    assert!(matches!(
        call("allclose", vec![a.clone(), tensor(&[1.0, 2.1], &[2])])?,
        Value::Bool(false)
    ));
    assert!(matches!(
        call(
            "allclose",
            vec![a.clone(), tensor(&[1.0, 2.1], &[2]), float(0.1)]
        )?,
        Value::Bool(true)
    ));
    assert!(matches!(
        call("allclose", vec![tensor(&[1.0, 1.0], &[2]), float(1.0)])?,
        Value::Bool(true)
    ));
    let nan = tensor(&[f32::NAN], &[1]);
    assert!(matches!(
        call("allclose", vec![nan.clone(), nan])?,
        Value::Bool(false)
    ));
    let inf = tensor(&[f32::INFINITY], &[1]);
    assert!(matches!(
        call("allclose", vec![inf.clone(), inf])?,
        Value::Bool(true)
    ));
    assert!(error("allclose", vec![a.clone(), tensor(&[1.0; 3], &[3])])
        .contains("shapes do not broadcast"));

    let mask = call("tensor", vec![ints(&[1, 0]), Value::str("bool")])?;
    assert!(matches!(
        call("all", vec![mask.clone()])?,
        Value::Bool(false)
    ));
    assert!(matches!(call("any", vec![mask])?, Value::Bool(true)));
    assert!(matches!(call("all", vec![a])?, Value::Bool(true)));
    let empty = call("zeros", vec![ints(&[0])])?;
    assert!(matches!(
        call("all", vec![empty.clone()])?,
        Value::Bool(true)
    ));
    assert!(matches!(call("any", vec![empty])?, Value::Bool(false)));
    Ok(())
}
