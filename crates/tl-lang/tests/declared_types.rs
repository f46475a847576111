//! Written types hold for the life of what they describe: a typed variable,
//! parameter, global tensor or struct field is checked on every assignment, not
//! only where it is declared, and named dimensions bind across a struct's
//! fields. These run without the checker, so the interpreter alone must refuse.

use std::path::Path;

use tl_lang::builtins::Context;
use tl_lang::interp::Interpreter;
use tl_lang::loader::load_source;

/// The runtime error of the program's `main`, or `None` when it runs.
fn run(text: &str) -> Option<String> {
    let program = load_source("types.tl", text, Path::new("."))
        .unwrap_or_else(|(sources, d)| panic!("{}", d.render(&sources)));
    let mut interp = Interpreter::new(Context::captured(".".into(), Box::new(std::io::sink())));
    let result = interp
        .define(program.items)
        .and_then(|()| interp.run_main());
    result.err().map(|e| e.message)
}

fn error(text: &str) -> String {
    run(text).unwrap_or_else(|| panic!("ran without an error:\n{text}"))
}

#[test]
fn a_struct_field_keeps_its_type() {
    let message = error("struct S { a: int }\nmain { let s = S { a: 1 }; s.a = \"x\"; }");
    assert!(
        message.contains("cannot assign to field `a` of `S`: expected int, found string"),
        "{message}"
    );
    assert_eq!(
        run("struct S { a: float }\nmain { let s = S { a: 1.0 }; s.a = 2; s.a += 1; }"),
        None
    );
}

#[test]
fn a_typed_variable_keeps_its_type_and_shape() {
    let message = error("main { let x: int = 1; x = \"two\"; }");
    assert!(
        message.contains("cannot assign to `x`: expected int"),
        "{message}"
    );
    let message = error("main { let t: float32[2] = zeros([2]); t = zeros([3]); }");
    assert!(message.contains("dimension 0 is 3, not 2"), "{message}");
    let message = error("main { let t: float32[n] = zeros([2]); t = zeros([3]); }");
    assert!(message.contains("`n` is 2 elsewhere"), "{message}");
    // `?` may change; an untyped variable may hold anything; a shadowing `let`
    // without a type drops the old one.
    assert_eq!(
        run("main { let t: float32[?] = zeros([2]); t = zeros([3]); let u = 1; u = \"s\"; }"),
        None
    );
    assert_eq!(
        run("main { let x: int = 1; let x = \"s\"; x = \"t\"; }"),
        None
    );
    assert_eq!(run("main { let x: float = 1.0; x = 2; x *= 3; }"), None);
}

#[test]
fn a_typed_parameter_keeps_its_type() {
    let message = error("fn f(x: float32[n]) { x = zeros([n + 1]); }\nmain { f(zeros([2])); }");
    assert!(message.contains("cannot assign to `x`"), "{message}");
    let message = error("fn f(k: int) { k = 1.5; }\nmain { f(1); }");
    assert!(message.contains("expected int, found float"), "{message}");
    assert_eq!(run("fn f(k: int) { k = k + 1; }\nmain { f(1); }"), None);
}

#[test]
fn a_global_tensor_keeps_its_type_and_shape() {
    let message = error("tensor w: float32[2, 2];\nmain { w = zeros([3, 3]); }");
    assert!(message.contains("cannot assign to `w`"), "{message}");
    let message = error("tensor w: float32[2] = [1.0, 2.0];\nmain { w = zeros([2], \"int64\"); }");
    assert!(
        message.contains("expected float32[2], found int64[2]"),
        "{message}"
    );
    assert_eq!(
        run("tensor w: float32[2];\nmain { w = w + 1.0; w[0] = 5.0; }"),
        None
    );
}

#[test]
fn named_dimensions_bind_across_a_structs_fields() {
    let decl = "struct Linear { w: float32[i, o], b: float32[o] }\n";
    let message = error(&format!(
        "{decl}main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([4]) }}; }}"
    ));
    assert!(message.contains("field `b` of `Linear`"), "{message}");
    assert!(message.contains("`o` is 3 elsewhere"), "{message}");
    let message = error(&format!(
        "{decl}main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([3]) }}; l.b = zeros([4]); }}"
    ));
    assert!(message.contains("`o` is 3 elsewhere"), "{message}");
    assert_eq!(
        run(&format!(
            "{decl}main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([3]) }}; l.b = ones([3]); l.w = zeros([5, 3]); }}"
        )),
        None
    );
}
