//! The harness shared by the language's integration tests: a program checked
//! and defined in an interpreter whose output is captured, its `test` blocks
//! run, and the errors it gives rendered as a user sees them.

// Each test file uses its own part of the harness.
#![allow(dead_code)]

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use tl_lang::builtins::Context;
use tl_lang::check::check;
use tl_lang::interp::Interpreter;
use tl_lang::loader::load_source;
use tl_syntax::Severity;

/// Output written by a program, shared with the test.
#[derive(Clone, Default)]
pub struct Captured(pub Rc<RefCell<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A program checked (errors fail the test) and defined, ready to run.
pub fn interpreter(name: &str, text: &str) -> (Interpreter, Captured) {
    let program = load_source(name, text, &workspace())
        .unwrap_or_else(|(sources, d)| panic!("{}", d.render(&sources)));
    let errors: Vec<String> = check(&program.items)
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.render(&program.sources))
        .collect();
    assert!(errors.is_empty(), "{name}:\n{}", errors.join("\n"));
    let out = Captured::default();
    let mut interp = Interpreter::new(Context::captured(".".into(), Box::new(out.clone())));
    if let Err(e) = interp.define(program.items) {
        panic!("{name}: {}", e.to_diagnostic().render(&program.sources));
    }
    (interp, out)
}

/// Runs every `test` block of a program; a failing one fails with its error.
pub fn run_tests(name: &str, text: &str) -> usize {
    let (mut interp, _) = interpreter(name, text);
    let program = load_source(name, text, &workspace()).expect("parsed once already");
    let tests = interp.tests().to_vec();
    assert!(!tests.is_empty(), "{name} has no tests");
    for test in &tests {
        if let Err(e) = interp.run_block(&test.body) {
            panic!(
                "{name}: test {} failed: {}",
                test.name.name,
                e.to_diagnostic().render(&program.sources)
            );
        }
    }
    tests.len()
}

/// The error running `main` gives, rendered.
pub fn runtime_error(text: &str) -> String {
    let program = load_source("bad.tl", text, &workspace()).expect("parses");
    let mut interp = Interpreter::new(Context::captured(".".into(), Box::new(std::io::sink())));
    let result = interp.define(program.items).and_then(|_| interp.run_main());
    let error = result.expect_err("the program fails");
    error.to_diagnostic().render(&program.sources)
}

/// The checker's errors for a program, rendered (empty when it is clean).
pub fn check_errors(text: &str) -> String {
    let program = load_source("bad.tl", text, &workspace()).expect("parses");
    check(&program.items)
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.render(&program.sources))
        .collect::<Vec<_>>()
        .join("\n")
}
