//! Written types hold for what they describe: named dimensions bind across a
//! struct's fields. These run without the checker, so the interpreter alone
//! must refuse.

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
fn named_dimensions_bind_across_a_structs_fields() {
    let decl = "struct Linear { w: float32[i, o], b: float32[o] }\n";
    let message = error(&format!(
        "{decl}main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([4]) }}; }}"
    ));
    assert!(message.contains("field `b` of `Linear`"), "{message}");
    assert!(message.contains("`o` is 3 elsewhere"), "{message}");
    assert_eq!(
        run(&format!(
            "{decl}main {{ let l = Linear {{ w: zeros([2, 3]), b: zeros([3]) }}; }}"
        )),
        None
    );
}
