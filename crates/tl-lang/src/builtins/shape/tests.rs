//! Tests of the shape builtins, including their error messages.

use crate::builtins::test_util::{call, contents, error, ints, tensor};
use crate::error::LangError;
use crate::value::Value;

type TestResult = std::result::Result<(), LangError>;

/// float32[2, 3] [[0, 1, 2], [3, 4, 5]].
fn grid() -> Value {
    tensor(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3])
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

#[test]
fn shape_rank_numel() -> TestResult {
    assert_eq!(call("shape", vec![grid()])?.to_string(), "[2, 3]");
    assert!(matches!(call("rank", vec![grid()])?, Value::Int(2)));
    assert!(matches!(call("numel", vec![grid()])?, Value::Int(6)));
    assert!(matches!(
        call("rank", vec![Value::Float(1.0)])?,
        Value::Int(0)
    ));
    assert!(error("shape", vec![Value::str("x")]).contains("must be a tensor"));
    Ok(())
}

#[test]
fn reshape_infers_one_size() -> TestResult {
    let r = call("reshape", vec![grid(), ints(&[3, -1])])?;
    assert_eq!(
        contents(&r),
        (vec![3, 2], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    );
    assert_eq!(
        call("reshape", vec![grid(), int(6)])?.type_name(),
        "float32[6]"
    );
    assert_eq!(
        error("reshape", vec![grid(), ints(&[4, 2])]),
        "cannot reshape float32[2, 3] to [4, 2]: 6 elements do not fit a shape of 8"
    );
    assert_eq!(
        error("reshape", vec![grid(), ints(&[4, -1])]),
        "cannot reshape float32[2, 3] to [4, -1]: 6 elements do not divide into parts of 4"
    );
    assert!(error("reshape", vec![grid(), ints(&[-1, -1])]).contains("only one size may be -1"));
    assert!(error("reshape", vec![grid(), ints(&[-2, 3])]).contains("-2 is not a size"));
    assert!(error("reshape", vec![grid(), ints(&[i64::MAX, 4])]).contains("too large"));
    Ok(())
}

#[test]
fn transpose_and_permute() -> TestResult {
    let t = call("transpose", vec![grid()])?;
    assert_eq!(
        contents(&t),
        (vec![3, 2], vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0])
    );
    let cube = tensor(&(0..24).map(|i| i as f32).collect::<Vec<_>>(), &[2, 3, 4]);
    assert_eq!(
        contents(&call("transpose", vec![cube.clone(), int(0), int(2)])?).0,
        vec![4, 3, 2]
    );
    let p = call("permute", vec![cube.clone(), ints(&[2, 0, 1])])?;
    let (dims, values) = contents(&p);
    assert_eq!(dims, vec![4, 2, 3]);
    assert_eq!(values[..3], [0.0, 4.0, 8.0]);
    assert_eq!(
        contents(&call("permute", vec![cube.clone(), ints(&[-1, 0, 1])])?).0,
        vec![4, 2, 3]
    );
    assert!(error("permute", vec![cube.clone(), ints(&[0, 0, 1])])
        .contains("is not a permutation of the 3 dimensions"));
    assert_eq!(
        error("transpose", vec![tensor(&[1.0], &[1])]),
        "transpose needs a tensor of rank 2 or more, found float32[1]"
    );
    assert_eq!(
        error("transpose", vec![grid(), int(0), int(5)]),
        "dimension 5 is out of range for a tensor of rank 2"
    );
    Ok(())
}

#[test]
fn squeeze_and_unsqueeze() -> TestResult {
    let x = tensor(&[1.0, 2.0], &[1, 2, 1]);
    assert_eq!(call("squeeze", vec![x.clone()])?.type_name(), "float32[2]");
    assert_eq!(
        call("squeeze", vec![x.clone(), int(-1)])?.type_name(),
        "float32[1, 2]"
    );
    assert_eq!(
        error("squeeze", vec![x.clone(), int(1)]),
        "cannot squeeze dimension 1 of float32[1, 2, 1]: its size is 2, not 1"
    );
    assert_eq!(
        call("unsqueeze", vec![grid(), int(0)])?.type_name(),
        "float32[1, 2, 3]"
    );
    assert_eq!(
        call("unsqueeze", vec![grid(), int(-1)])?.type_name(),
        "float32[2, 3, 1]"
    );
    assert!(error("unsqueeze", vec![grid(), int(4)])
        .contains("out of range for unsqueezing float32[2, 3] (from -3 to 2)"));
    Ok(())
}

#[test]
fn concat_stack_split() -> TestResult {
    let a = grid();
    let b = tensor(&[6.0, 7.0, 8.0], &[1, 3]);
    let c = call("concat", vec![Value::list(vec![a.clone(), b.clone()])])?;
    assert_eq!(contents(&c).0, vec![3, 3]);
    assert_eq!(contents(&c).1[6..], [6.0, 7.0, 8.0]);
    let wide = call(
        "concat",
        vec![Value::list(vec![a.clone(), a.clone()]), int(-1)],
    )?;
    assert_eq!(contents(&wide).0, vec![2, 6]);
    assert_eq!(
        error("concat", vec![Value::list(vec![a.clone(), b.clone()]), int(1)]),
        "cannot concat float32[2, 3] and float32[1, 3] along dimension 1: the other dimensions differ"
    );
    assert!(error("concat", vec![Value::list(vec![])]).contains("empty list"));
    assert!(error(
        "concat",
        vec![Value::list(vec![a.clone(), Value::str("x")])]
    )
    .contains("item 1 of the list is a string"));
    let ints64 = call("to_dtype", vec![b.clone(), Value::str("int64")])?;
    assert!(error("concat", vec![Value::list(vec![b.clone(), ints64])])
        .contains("element types differ"));

    let s = call(
        "stack",
        vec![Value::list(vec![b.clone(), b.clone()]), int(1)],
    )?;
    assert_eq!(contents(&s).0, vec![1, 2, 3]);
    assert!(
        error("stack", vec![Value::list(vec![a.clone(), b.clone()])]).contains("shapes differ")
    );

    let parts = call("split", vec![grid(), int(3), int(1)])?;
    let Value::List(parts) = parts else {
        panic!("split returns a list")
    };
    assert_eq!(parts.borrow().len(), 3);
    assert_eq!(contents(&parts.borrow()[2]), (vec![2, 1], vec![2.0, 5.0]));
    let parts = call("split", vec![grid(), ints(&[1, 2]), int(-1)])?;
    assert_eq!(parts.to_string().matches("float32[2, 2]").count(), 1);
    assert_eq!(
        error("split", vec![grid(), int(2), int(1)]),
        "cannot split dimension 1 of size 3 into 2 equal parts"
    );
    assert!(error("split", vec![grid(), ints(&[1, 1]), int(1)]).contains("do not add up to 3"));
    Ok(())
}

#[test]
fn slice_and_broadcast() -> TestResult {
    let s = call("slice", vec![grid(), int(1), int(1), int(3)])?;
    assert_eq!(contents(&s), (vec![2, 2], vec![1.0, 2.0, 4.0, 5.0]));
    let s = call("slice", vec![grid(), int(-1), int(-1)])?;
    assert_eq!(contents(&s), (vec![2, 1], vec![2.0, 5.0]));
    assert_eq!(
        error("slice", vec![grid(), int(1), int(0), int(4)]),
        "range end 4 is out of range for dimension 1 of size 3"
    );
    let b = call(
        "broadcast_to",
        vec![tensor(&[1.0, 2.0, 3.0], &[3]), ints(&[2, 3])],
    )?;
    assert_eq!(
        contents(&b),
        (vec![2, 3], vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    );
    assert_eq!(
        error("broadcast_to", vec![grid(), ints(&[4, 3])]),
        "cannot broadcast float32[2, 3] to [4, 3]"
    );
    assert_eq!(contents(&call("flatten", vec![grid()])?).0, vec![6]);
    Ok(())
}

#[test]
fn dtype_and_item() -> TestResult {
    let x = tensor(&[0.0, 1.5, -2.7], &[3]);
    let i = call("to_dtype", vec![x.clone(), Value::str("int32")])?;
    assert_eq!(i.type_name(), "int32[3]");
    assert_eq!(contents(&i).1, vec![0.0, 1.0, -2.0]);
    let b = call("to_dtype", vec![x.clone(), Value::str("bool")])?;
    assert_eq!(contents(&b).1, vec![0.0, 1.0, 1.0]);
    assert_eq!(
        call("to_dtype", vec![x.clone(), Value::str("bfloat16")])?.type_name(),
        "bfloat16[3]"
    );
    assert!(
        error("to_dtype", vec![x.clone(), Value::str("float64")]).contains("unknown element type")
    );
    assert!(matches!(call("item", vec![tensor(&[2.5], &[1, 1])])?, Value::Float(v) if v == 2.5));
    assert!(matches!(call("item", vec![Value::Int(3)])?, Value::Int(3)));
    let seven = call("tensor", vec![int(7)])?;
    assert!(matches!(call("item", vec![seven])?, Value::Int(7)));
    assert_eq!(
        error("item", vec![grid()]),
        "item needs a tensor of one element, found float32[2, 3]"
    );
    Ok(())
}

#[test]
fn joins_and_reshapes_too_large_to_allocate_are_errors() -> TestResult {
    let empty = tensor(&[], &[0]);
    for shape in [
        ints(&[i64::MAX, i64::MAX, 0]),
        ints(&[0, 1 << 40, 1 << 40]),
        ints(&[1 << 32, 1 << 32, 0, -1]),
    ] {
        assert!(error("reshape", vec![empty.clone(), shape]).contains("too large"));
    }
    let row = tensor(&[1.0; 1000], &[1, 1000]);
    let rows = Value::list(vec![row; 2_000_000]);
    assert!(error("concat", vec![rows.clone()]).contains("too large"));
    assert!(error("stack", vec![rows]).contains("too large"));
    Ok(())
}

#[test]
fn splits_refuse_sizes_that_overflow_or_too_many_parts() -> TestResult {
    let x = tensor(&[1.0, 2.0], &[2]);
    let huge = ints(&[i64::MAX, i64::MAX, 4]);
    assert!(error("split", vec![x.clone(), huge]).contains("do not add up"));
    assert!(error("split", vec![x.clone(), Value::Int(i64::MIN)]).contains("equal parts"));
    assert!(error("split", vec![x, Value::Int(i64::MAX)]).contains("equal parts"));
    Ok(())
}

#[test]
fn no_tensor_has_more_dimensions_than_the_kernels_walk() -> TestResult {
    let eight = call("reshape", vec![tensor(&[1.0; 256], &[256]), ints(&[2; 8])])?;
    assert!(error(
        "reshape",
        vec![eight.clone(), ints(&[2, 2, 2, 2, 2, 2, 2, 2, 1])]
    )
    .contains("at most 8"));
    assert!(error("unsqueeze", vec![eight.clone(), Value::Int(0)]).contains("at most 8"));
    assert!(error("stack", vec![Value::list(vec![eight])]).contains("at most 8"));
    assert!(error("zeros", vec![ints(&[1; 9])]).contains("at most 8"));
    Ok(())
}
