//! Tests of the nn builtins against hand-computed values.

use crate::builtins::test_util::{call, close, contents, error, int_tensor, ints, tensor};
use crate::error::LangError;
use crate::value::Value;

type TestResult = std::result::Result<(), LangError>;

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn half(v: Value) -> Value {
    call("to_dtype", vec![v, Value::str("float16")]).expect("to float16")
}

#[test]
fn matmul_matches_the_operator() -> TestResult {
    let a = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    assert_eq!(
        contents(&call("matmul", vec![a.clone(), b])?),
        (vec![2, 2], vec![4.0, 5.0, 10.0, 11.0])
    );
    assert_eq!(
        error("matmul", vec![a.clone(), a]),
        "cannot multiply float32[2, 3] @ float32[2, 3]: inner dimensions 3 and 2 differ"
    );
    Ok(())
}

#[test]
fn softmax_and_log_softmax() -> TestResult {
    let x = tensor(&[1.0, 2.0, 3.0], &[3]);
    let expected = [0.09003057, 0.24472847, 0.66524096];
    assert!(close(
        &contents(&call("softmax", vec![x.clone()])?).1,
        &expected,
        1e-6
    ));
    let logs = [-2.40760596, -1.40760596, -0.40760596];
    assert!(close(
        &contents(&call("log_softmax", vec![x.clone()])?).1,
        &logs,
        1e-6
    ));
    // Stable for large inputs: exp(1000) alone would overflow.
    let big = tensor(&[1000.0, 1001.0, 1002.0], &[3]);
    assert!(close(
        &contents(&call("softmax", vec![big.clone()])?).1,
        &expected,
        1e-6
    ));
    assert!(close(
        &contents(&call("log_softmax", vec![big])?).1,
        &logs,
        1e-5
    ));
    let m = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let cols = [0.11920292, 0.11920292, 0.88079708, 0.88079708];
    assert!(close(
        &contents(&call("softmax", vec![m.clone(), int(0)])?).1,
        &cols,
        1e-6
    ));
    let log_cols: Vec<f64> = cols.iter().map(|p: &f64| p.ln()).collect();
    assert!(close(
        &contents(&call("log_softmax", vec![m, int(0)])?).1,
        &log_cols,
        1e-5
    ));
    let h = call("softmax", vec![half(x)])?;
    assert_eq!(h.type_name(), "float16[3]");
    assert!(close(&contents(&h).1, &expected, 1e-3));
    assert_eq!(
        call("softmax", vec![int_tensor(&[0, 0], &[2])])?.type_name(),
        "float32[2]"
    );
    assert_eq!(
        error("softmax", vec![Value::Float(1.0)]),
        "softmax needs a tensor of at least one dimension, found float32[]"
    );
    assert!(error("softmax", vec![tensor(&[1.0], &[1]), int(1)]).contains("out of range"));
    Ok(())
}

#[test]
fn softmax_with_a_causal_mask() -> TestResult {
    let scores = call("zeros", vec![ints(&[2, 2])])?;
    let mask = call("causal_mask", vec![int(2)])?;
    let masked = crate::ops::binary(tl_syntax::ast::BinaryOp::Add, &scores, &mask)?;
    assert_eq!(
        contents(&call("softmax", vec![masked])?).1,
        vec![1.0, 0.0, 0.5, 0.5]
    );
    Ok(())
}

#[test]
fn layer_norm_normalizes_the_last_dim() -> TestResult {
    let x = tensor(&[1.0, 2.0, 3.0, 10.0, 20.0, 30.0], &[2, 3]);
    let ones = tensor(&[1.0; 3], &[3]);
    let std = (2.0f64 / 3.0 + 1e-5).sqrt();
    let unit = [-1.0 / std, 0.0, 1.0 / std];
    let out = contents(&call("layer_norm", vec![x.clone(), ones.clone()])?);
    assert_eq!(out.0, vec![2, 3]);
    assert!(close(&out.1[..3], &unit, 1e-5));
    assert!(close(&out.1[3..], &unit, 1e-4));
    let w = tensor(&[2.0; 3], &[3]);
    let b = tensor(&[1.0; 3], &[3]);
    let scaled = contents(&call(
        "layer_norm",
        vec![x.clone(), w, b, Value::Float(1e-5)],
    )?)
    .1;
    assert!(close(
        &scaled[..3],
        &[1.0 - 2.0 / std, 1.0, 1.0 + 2.0 / std],
        1e-5
    ));
    assert_eq!(
        call("layer_norm", vec![half(x.clone()), ones])?.type_name(),
        "float16[2, 3]"
    );
    assert_eq!(
        error("layer_norm", vec![x.clone(), tensor(&[1.0; 4], &[4])]),
        "the weight of layer_norm must have shape [3] to match the last dimension of float32[2, 3], found float32[4]"
    );
    assert!(error(
        "layer_norm",
        vec![x, tensor(&[1.0; 3], &[3]), tensor(&[0.0; 2], &[2])]
    )
    .starts_with("the bias"));
    Ok(())
}

#[test]
fn causal_masks() -> TestResult {
    let inf = f64::NEG_INFINITY;
    let m = call("causal_mask", vec![int(3)])?;
    assert_eq!(m.type_name(), "float32[3, 3]");
    assert_eq!(
        contents(&m).1,
        vec![0.0, inf, inf, 0.0, 0.0, inf, 0.0, 0.0, 0.0]
    );
    // Two new queries at positions 1 and 2 over three keys.
    let m = call("causal_mask", vec![int(2), int(3), int(1)])?;
    assert_eq!(
        contents(&m),
        (vec![2, 3], vec![0.0, 0.0, inf, 0.0, 0.0, 0.0])
    );
    assert!(error("causal_mask", vec![int(-1)]).contains("must not be negative"));
    Ok(())
}

#[test]
fn einsum_builtin() -> TestResult {
    let a = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = tensor(&[5.0, 6.0, 7.0, 8.0], &[2, 2]);
    let out = call(
        "einsum",
        vec![Value::str("ij,jk->ik"), a.clone(), b.clone()],
    )?;
    assert_eq!(contents(&out).1, vec![19.0, 22.0, 43.0, 50.0]);
    let trace = call("einsum", vec![Value::str("ii->"), a.clone()])?;
    assert_eq!(contents(&trace), (vec![], vec![5.0]));
    assert!(error("einsum", vec![Value::str("ij,jk->ik"), a.clone()]).contains("names 2 operands"));
    assert!(error(
        "einsum",
        vec![
            Value::str("ij,jk->ik"),
            int_tensor(&[1], &[1, 1]),
            a.clone()
        ]
    )
    .contains("different element types"));
    let chain = call(
        "einsum",
        vec![Value::str("ij,jk,kl->il"), a.clone(), b.clone(), a.clone()],
    )?;
    assert_eq!(contents(&chain).1, vec![85.0, 126.0, 193.0, 286.0]);
    assert!(error("einsum", vec![Value::str("ijk->i"), a]).contains("has 3 letters"));
    Ok(())
}

#[test]
fn empty_inputs() -> TestResult {
    let empty = tensor(&[], &[2, 0]);
    assert_eq!(
        call("softmax", vec![empty.clone()])?.type_name(),
        "float32[2, 0]"
    );
    assert_eq!(
        call("log_softmax", vec![empty.clone()])?.type_name(),
        "float32[2, 0]"
    );
    let no_weight = tensor(&[], &[0]);
    assert_eq!(
        call("layer_norm", vec![empty, no_weight])?.type_name(),
        "float32[2, 0]"
    );
    assert_eq!(
        call("causal_mask", vec![int(0)])?.type_name(),
        "float32[0, 0]"
    );
    Ok(())
}
