//! Storing one element into a tensor that one variable holds alone writes it in
//! place (copy-on-write), so a loop of stores costs per element, not per
//! element times the tensor's size; and a tensor shared with another variable,
//! a list or a view is never changed behind its back.

use std::path::Path;
use std::time::{Duration, Instant};

use tl_lang::builtins::Context;
use tl_lang::interp::Interpreter;
use tl_lang::loader::load_source;

fn run(text: &str) {
    let program = load_source("stores.tl", text, Path::new("."))
        .unwrap_or_else(|(sources, d)| panic!("{}", d.render(&sources)));
    let mut interp = Interpreter::new(Context::captured(".".into(), Box::new(std::io::sink())));
    let result = interp
        .define(program.items)
        .and_then(|()| interp.run_main());
    if let Err(e) = result {
        panic!("{}", e.to_diagnostic().render(&program.sources));
    }
}

#[test]
fn element_stores_into_a_large_tensor_do_not_copy_it() {
    // Copying 4 MB per store took 0.5 ms or more: 4000 stores, 2 s at least.
    let started = Instant::now();
    run("main {\n    let x = zeros([1048576]);\n    for i in 0..4000 {\n        x[i * 7] = i;\n    }\n    assert_eq(x[7 * 3999], tensor(3999.0));\n    assert_eq(sum(x), tensor(7998000.0));\n}\n");
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1000),
        "4000 stores took {took:?}"
    );
}

#[test]
fn a_shared_tensor_is_copied_before_a_store() {
    run(r#"main {
    let x = zeros([3]);
    x[0] = 1.0;
    let y = x;
    x[1] = 2.0;
    assert_eq(y, tensor([1.0, 0.0, 0.0]));
    assert_eq(x, tensor([1.0, 2.0, 0.0]));
    let m = zeros([2, 2]);
    m[0, 0] = 1.0;
    let row = m[0];
    m[0, 1] = 5.0;
    assert_eq(row, tensor([1.0, 0.0]));
    let kept = [m];
    m[1, 1] = 7.0;
    assert_eq(kept[0], tensor([[1.0, 5.0], [0.0, 0.0]]));
    assert_eq(m, tensor([[1.0, 5.0], [0.0, 7.0]]));
    let t = zeros([2], "int64");
    t[0] = 3;
    t[1] = 4;
    assert_eq(t, tensor([3, 4]));
}
"#);
}
