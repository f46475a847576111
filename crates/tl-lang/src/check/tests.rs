//! Inference rules on whole small programs: the type the checker gives the tail
//! of `main`, and the messages it reports. The golden files in
//! `tests/golden/check` show the rendered diagnostics.

use tl_syntax::ast::{Expr, ExprKind, Item};
use tl_syntax::{DType, FileId};

use super::body::Body;
use super::decls::Declarations;
use super::items::run_pass;
use super::reassigned::Reassigned;
use super::ty::{StaticDim, Ty};
use crate::builtins::Builtin;

fn parse(src: &str) -> Vec<Item> {
    match tl_syntax::parse(FileId(0), src) {
        Ok(program) => program.items,
        Err(e) => panic!("test program does not parse: {}", e.diagnostic.message),
    }
}

/// The static type of the tail of the program's `main` block.
fn main_type(src: &str) -> Ty {
    let items = parse(src);
    let mut out = Vec::new();
    let decls = Declarations::collect(&items, &mut out);
    let mut unknown = Reassigned::default();
    let mut pass = super::settled_pass(&decls, &items, &mut unknown);
    let main = items.iter().find_map(|item| match item {
        Item::Main(block) => Some(block),
        _ => None,
    });
    let Some(main) = main else {
        panic!("test program has no main");
    };
    Body::new(&mut pass, usize::MAX).block(main)
}

fn messages(src: &str) -> Vec<String> {
    super::check(&parse(src))
        .into_iter()
        .map(|d| d.message)
        .collect()
}

fn tensor(dtype: DType, dims: &[StaticDim]) -> Ty {
    Ty::tensor(Some(dtype), Some(dims.to_vec()))
}

use StaticDim::{Known, Unknown};

/// The type `builtin_result` gives the call at the tail of `main` in `src`,
/// for a builtin of this name and signature, whether or not the table has it.
fn builtin_in(name: &'static str, signature: &'static str, src: &str) -> Ty {
    let items = parse(src);
    let Some(block) = items.iter().find_map(|i| match i {
        Item::Main(b) => Some(b),
        _ => None,
    }) else {
        panic!("no main");
    };
    let Some(ExprKind::Call { args, .. }) = block.tail.as_deref().map(|e| &e.kind) else {
        panic!("main's tail is not a call");
    };
    let builtin = Builtin {
        name,
        signature,
        min_args: 0,
        max_args: usize::MAX,
        summary: "",
        call: |_, _| Ok(crate::value::Value::None),
        gradient: crate::builtins::Gradient::NotApplicable,
    };
    let mut out = Vec::new();
    let decls = Declarations::collect(&items, &mut out);
    let unknown = Reassigned::default();
    let mut pass = run_pass(&decls, &items, &unknown);
    let mut body = Body::new(&mut pass, usize::MAX);
    let tys: Vec<Ty> = args.iter().map(|a| body.infer(a)).collect();
    let args: Vec<&Expr> = args.iter().collect();
    body.builtin_result(&builtin, &args, &tys, block.span)
}

fn builtin_type(name: &'static str, signature: &'static str, call: &str) -> Ty {
    builtin_in(name, signature, &format!("main {{ {call} }}"))
}

const ZEROS: &str = "zeros(shape, dtype = \"float32\") -> tensor";

#[test]
fn constructors_with_literal_shapes() {
    let t = builtin_type("zeros", ZEROS, r#"zeros([2, 3], "float16")"#);
    assert_eq!(t, tensor(DType::F16, &[Known(2), Known(3)]));
    // The default element type comes from the documented signature.
    let t = builtin_type("zeros", ZEROS, "zeros([2, -1])");
    assert_eq!(t, tensor(DType::F32, &[Known(2), Unknown]));
    let t = builtin_type("eye", "eye(n) -> tensor", "eye(4)");
    assert_eq!(t, Ty::tensor(None, Some(vec![Known(4), Known(4)])));
    // A dtype given by a variable could be anything.
    let t = builtin_type("zeros", ZEROS, r#"zeros([2], dtype_from_somewhere())"#);
    assert_eq!(t, Ty::tensor(None, Some(vec![Known(2)])));
    let t = builtin_type("zeros", ZEROS, "zeros(shape_from_somewhere())");
    assert_eq!(t, Ty::tensor(Some(DType::F32), None));
}

#[test]
fn reshape_transpose_and_conversions_keep_what_they_can() {
    let typed = |name: &'static str, call: &str| {
        let src = format!("tensor x: float16[6, 4]; main {{ {call} }}");
        builtin_in(name, "f(x) -> tensor", &src)
    };
    assert_eq!(
        typed("reshape", "reshape(x, [3, 8])"),
        tensor(DType::F16, &[Known(3), Known(8)])
    );
    assert_eq!(
        typed("transpose", "transpose(x)"),
        tensor(DType::F16, &[Known(4), Known(6)])
    );
    assert_eq!(
        typed("to_dtype", r#"to_dtype(x, "float32")"#),
        tensor(DType::F32, &[Known(6), Known(4)])
    );
    assert_eq!(
        typed("softmax", "softmax(x, -1)"),
        tensor(DType::F16, &[Known(6), Known(4)])
    );
    assert_eq!(typed("sum", "sum(x)"), Ty::any_tensor());
}

#[test]
fn annotations_fill_in_unknown_dimensions() {
    let src = "fn mk() -> float32[5, 8] { mk() } main { let x: float32[?, 8] = mk(); x }";
    assert_eq!(main_type(src), tensor(DType::F32, &[Known(5), Known(8)]));
    let t = main_type("main { let x: float32[2, 8] = undefined_thing(); x }");
    assert_eq!(t, tensor(DType::F32, &[Known(2), Known(8)]));
}

#[test]
fn calls_bind_dimension_names_from_arguments() {
    let src = r#"
        fn f(a: float32[n, d], b: float32[d, m]) -> float32[n, m] { a @ b }
        tensor a: float32[3, 4];
        tensor b: float32[4, 7];
        main { f(a, b) }"#;
    assert_eq!(main_type(src), tensor(DType::F32, &[Known(3), Known(7)]));
}

#[test]
fn matmul_transpose_and_indexing_shapes() {
    let src = r#"
        tensor w: float32[8, 4];
        tensor x: float32[2, 8];
        main { (x @ w)[0] }"#;
    assert_eq!(main_type(src), tensor(DType::F32, &[Known(4)]));
    let src = "tensor w: float16[8, 4]; main { w[1..3, :] }";
    assert_eq!(main_type(src), tensor(DType::F16, &[Unknown, Known(4)]));
}

#[test]
fn scalars_and_branches() {
    assert_eq!(main_type("main { 1 + 2 }"), Ty::Int);
    assert_eq!(main_type("main { 1 + 2.0 }"), Ty::Float);
    assert_eq!(main_type("main { \"ab\" * 3 }"), Ty::Str);
    assert_eq!(main_type("main { if true { 1 } else { 2 } }"), Ty::Int);
    assert_eq!(
        main_type("main { if true { 1 } else { \"a\" } }"),
        Ty::Unknown
    );
    assert_eq!(main_type("main { [1, 2][0] }"), Ty::Int);
}

#[test]
fn loops_forget_what_they_rebind() {
    // After the first iteration `x` is a string: it must not count as an int.
    let src = "main { let x = 1; for i in 0..3 { let y = x + 1; x = \"s\"; } }";
    assert!(messages(src).is_empty(), "{:?}", messages(src));
    let src = "main { let x = 1; x = \"s\"; x }";
    assert_eq!(main_type(src), Ty::Unknown);
}

#[test]
fn globals_reassigned_to_another_type_become_unknown() {
    let src = r#"
        tensor w: float32[2, 2] = zeros([2, 2], "float32");
        fn grow() { w = zeros([3, 3], "float32"); }
        main { w }"#;
    assert_eq!(main_type(src), Ty::Unknown);
    let src = r#"
        tensor w: float32[2, 2] = zeros([2, 2], "float32");
        fn scale() { w = w * 2.0; }
        main { w }"#;
    assert_eq!(main_type(src), tensor(DType::F32, &[Known(2), Known(2)]));
}

#[test]
fn struct_fields_and_methods() {
    let src = r#"
        struct P { x: int, y: float32[d] }
        impl P { fn norm(self) -> float { 1.0 } }
        main { let p = P { x: 1, y: zeros([3], "float32") }; p.norm() }"#;
    assert_eq!(main_type(src), Ty::Float);
    let src = "struct P { x: int } main { let p = P { x: 1 }; p.x }";
    assert_eq!(main_type(src), Ty::Int);
}

#[test]
fn dimension_names_are_ints_in_the_body() {
    let src = "fn f(a: float32[n, d]) -> int { let k = n * d; k } main { 0 }";
    assert!(messages(src).is_empty(), "{:?}", messages(src));
}

#[test]
fn reports_the_documented_matmul_message() {
    let src = r#"fn f(a: float16[?, 2048], b: float16[1024, ?]) { a @ b } main { 0 }"#;
    assert_eq!(
        messages(src),
        ["cannot multiply float16[?, 2048] @ float16[1024, ?]: inner dimensions 2048 and 1024 differ"]
    );
}

/// `open` repeated as often as the parser accepts, then `1`, then `close`
/// as often: the deepest tree of that shape a program can have.
fn deepest(open: &str, close: &str) -> String {
    let program =
        |depth: usize| format!("main {{ {}1{} }}", open.repeat(depth), close.repeat(depth));
    let parses = |depth: usize| tl_syntax::parse(FileId(0), &program(depth)).is_ok();
    match (1..=400).rev().find(|&d| parses(d)) {
        Some(depth) => program(depth),
        None => panic!("no nesting of {open} parses"),
    }
}

#[test]
fn deep_nesting_does_not_overflow() {
    assert!(matches!(main_type(&deepest("[", "]")), Ty::List(_)));
    assert_eq!(main_type(&deepest("{ ", " }")), Ty::Int);
    assert_eq!(main_type(&deepest("-", "")), Ty::Int);
    assert_eq!(main_type(&deepest("if true { ", " } else { 2 }")), Ty::Int);
    assert_eq!(main_type(&deepest("f(", ")")), Ty::Unknown);
}

#[test]
fn fields_assigned_another_type_become_unknown() {
    let src = r#"struct P { x: float } main { let p = P { x: 1.0 }; p.x = "s"; p.x }"#;
    assert_eq!(main_type(src), Ty::Unknown);
    let src = r#"struct P { x: float } main { let p = P { x: 1.0 }; p.x = 2.0; p.x }"#;
    assert_eq!(main_type(src), Ty::Float);
    // The assignment itself is the error, reported once, not again at each use.
    let src = r#"struct P { x: float } fn f(p: P) { p.x = "s"; } main { let p = P { x: 1.0 }; f(p); print(p.x + "!"); }"#;
    assert_eq!(
        messages(src),
        ["field `x` of `P`: expected float, found string"]
    );
}

#[test]
fn a_field_assignment_must_fit_the_declared_type() {
    let found = messages("struct S { a: int } main { let s = S { a: 1 }; s.a = \"x\"; }");
    assert!(
        found.iter().any(|m| m.contains("field `a` of `S`")),
        "{found:?}"
    );
    let fine = messages("struct S { a: float } main { let s = S { a: 1.0 }; s.a = 2; }");
    assert!(fine.is_empty(), "{fine:?}");
}

#[test]
fn named_dimensions_bind_across_a_struct_literals_fields() {
    let decl = "struct Linear { w: float32[i, o], b: float32[o] }";
    let found = messages(&format!(
        "{decl} main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([4]) }}; }}"
    ));
    assert!(
        found.iter().any(|m| m.contains("field `b` of `Linear`")),
        "{found:?}"
    );
    let fine = messages(&format!(
        "{decl} main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([3]) }}; }}"
    ));
    assert!(fine.is_empty(), "{fine:?}");
}
