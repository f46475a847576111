//! Tests of the creation builtins against hand-computed tensors.

use crate::builtins::test_util::{call, contents, error, ints};
use crate::error::LangError;
use crate::value::Value;

type TestResult = std::result::Result<(), LangError>;

fn s(text: &str) -> Value {
    Value::str(text)
}

#[test]
fn zeros_ones_full() -> TestResult {
    let z = call("zeros", vec![ints(&[2, 3])])?;
    assert_eq!(z.type_name(), "float32[2, 3]");
    assert_eq!(contents(&z).1, vec![0.0; 6]);
    let o = call("ones", vec![Value::Int(3), s("int64")])?;
    assert_eq!(o.type_name(), "int64[3]");
    assert_eq!(contents(&o).1, vec![1.0; 3]);
    let f = call("full", vec![ints(&[2]), Value::Float(2.5)])?;
    assert_eq!(contents(&f), (vec![2], vec![2.5, 2.5]));
    let f = call("full", vec![ints(&[2]), Value::Int(7), s("int32")])?;
    assert_eq!(f.type_name(), "int32[2]");
    let b = call("full", vec![ints(&[1]), Value::Bool(true), s("bool")])?;
    assert_eq!(contents(&b).1, vec![1.0]);
    Ok(())
}

#[test]
fn creation_errors() {
    assert_eq!(
        error("zeros", vec![ints(&[2]), s("float8")]),
        "unknown element type \"float8\""
    );
    assert!(error("zeros", vec![ints(&[-1])]).contains("must be a shape"));
    assert!(error("ones", vec![ints(&[1 << 20, 1 << 20])]).contains("too large"));
    assert!(
        error("full", vec![ints(&[2]), Value::Float(0.5), s("int64")])
            .starts_with("cannot fill a int64 tensor")
    );
}

#[test]
fn arange_counts() -> TestResult {
    let a = call("arange", vec![Value::Int(4)])?;
    assert_eq!(a.type_name(), "int64[4]");
    assert_eq!(contents(&a).1, vec![0.0, 1.0, 2.0, 3.0]);
    let a = call("arange", vec![Value::Int(5), Value::Int(0), Value::Int(-2)])?;
    assert_eq!(contents(&a).1, vec![5.0, 3.0, 1.0]);
    let a = call(
        "arange",
        vec![Value::Int(0), Value::Float(1.0), Value::Float(0.25)],
    )?;
    assert_eq!(a.type_name(), "float32[4]");
    assert_eq!(contents(&a).1, vec![0.0, 0.25, 0.5, 0.75]);
    let a = call("arange", vec![Value::Int(3), s("float32")])?;
    assert_eq!(a.type_name(), "float32[3]");
    let a = call(
        "arange",
        vec![Value::Int(1), Value::Int(3), Value::None, s("float16")],
    )?;
    assert_eq!(contents(&a), (vec![2], vec![1.0, 2.0]));
    assert_eq!(
        call("arange", vec![Value::Int(3), Value::Int(1)])?.type_name(),
        "int64[0]"
    );
    assert_eq!(
        error("arange", vec![Value::Int(0), Value::Int(3), Value::Int(0)]),
        "the step of arange must not be 0"
    );
    assert!(error("arange", vec![Value::Float(1e12)]).contains("more than"));
    assert!(error("arange", vec![s("x")]).contains("must be a number"));
    Ok(())
}

#[test]
fn random_tensors_are_seeded() -> TestResult {
    let a = call("rand", vec![ints(&[1000])])?;
    let b = call("rand", vec![ints(&[1000]), Value::Int(0)])?;
    let c = call("rand", vec![ints(&[1000]), Value::Int(1)])?;
    assert_eq!(a.type_name(), "float32[1000]");
    let (av, bv, cv) = (contents(&a).1, contents(&b).1, contents(&c).1);
    assert_eq!(av, bv);
    assert_ne!(av, cv);
    assert!(av.iter().all(|x| (0.0..1.0).contains(x)));
    let mean = av.iter().sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");

    let n = contents(&call(
        "randn",
        vec![ints(&[4001]), Value::Int(7), Value::Float(2.0)],
    )?)
    .1;
    assert_eq!(n.len(), 4001);
    let mean = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n.len() as f64;
    assert!(mean.abs() < 0.15, "mean {mean}");
    assert!((var.sqrt() - 2.0).abs() < 0.15, "std {}", var.sqrt());
    let again = contents(&call(
        "randn",
        vec![ints(&[4001]), Value::Int(7), Value::Float(2.0)],
    )?)
    .1;
    assert_eq!(n, again);
    Ok(())
}

#[test]
fn tensor_from_values() -> TestResult {
    let nested = Value::list(vec![ints(&[1, 2]), ints(&[3, 4])]);
    let t = call("tensor", vec![nested.clone()])?;
    assert_eq!(t.type_name(), "int64[2, 2]");
    assert_eq!(contents(&t).1, vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        call("tensor", vec![nested, s("float16")])?.type_name(),
        "float16[2, 2]"
    );
    assert_eq!(
        call("tensor", vec![Value::Float(1.5)])?.type_name(),
        "float32[]"
    );
    let mixed = Value::list(vec![Value::Int(1), Value::Float(0.5)]);
    assert_eq!(contents(&call("tensor", vec![mixed])?).1, vec![1.0, 0.5]);
    let ragged = Value::list(vec![ints(&[1, 2]), ints(&[3])]);
    assert!(error("tensor", vec![ragged]).contains("rectangular"));
    assert!(error("tensor", vec![s("x")]).contains("must be a number or a (nested) list"));
    Ok(())
}

#[test]
fn eye_is_the_identity() -> TestResult {
    let e = call("eye", vec![Value::Int(3)])?;
    assert_eq!(
        contents(&e),
        (
            vec![3, 3],
            vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        )
    );
    assert_eq!(
        call("eye", vec![Value::Int(2), s("int32")])?.type_name(),
        "int32[2, 2]"
    );
    assert!(error("eye", vec![Value::Int(-1)]).contains("must not be negative"));
    Ok(())
}
