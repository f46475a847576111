//! Checks and runs one program, turning a panic into its message and place.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Once;

use tl_lang::builtins::Context;
use tl_lang::check::check;
use tl_lang::interp::Interpreter;
use tl_lang::loader::load_source;
use tl_lang::{ErrorKind, LangError};
use tl_syntax::SourceMap;

/// What became of one program.
pub enum Outcome {
    /// The text does not parse (the parser's own test covers that).
    NotParsed,
    /// It was checked and its blocks ran, each to a value or an error.
    Ran {
        blocks: usize,
        errors: usize,
        /// Errors of the internal kind: bugs, though not crashes.
        internal: Vec<String>,
    },
    /// The checker or the interpreter panicked: message and place.
    Panicked(String),
    /// The process died (an abort, a stack overflow): the end of its stderr.
    Crashed(String),
    /// Still running at the time limit, and stopped.
    TimedOut,
}

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Panics on a thread inside [`catch`] are recorded, not printed; any other
/// panic (a failing assertion of the test itself) goes to the default hook.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                LAST_PANIC.with(|last| *last.borrow_mut() = Some(info.to_string()));
            } else {
                default(info);
            }
        }));
    });
}

/// Runs `f`; a panic becomes its message and place.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_panic_hook();
    CATCHING.with(|c| c.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(false));
    result.map_err(|_| {
        LAST_PANIC
            .with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// Parses, checks and runs `text` (imports resolve in `dir`): `main`, then
/// every `test` and `bench` block once.
pub fn check_and_run(text: &str, dir: PathBuf) -> Outcome {
    let Ok(program) = load_source("fuzz.tl", text, &dir) else {
        return Outcome::NotParsed;
    };
    for diagnostic in check(&program.items) {
        diagnostic.render(&program.sources);
    }
    let mut interp = Interpreter::new(Context::captured(dir, Box::new(std::io::sink())));
    let mut tally = Tally::default();
    match interp.define(program.items.clone()) {
        Ok(()) => {
            if interp.has_main() {
                tally.record(interp.run_main(), &program.sources);
            }
            let blocks: Vec<_> = (interp.tests().iter())
                .chain(interp.benches())
                .map(|b| b.body.clone())
                .collect();
            for block in blocks {
                tally.record(interp.run_block(&block), &program.sources);
            }
        }
        Err(error) => tally.record(Err(error), &program.sources),
    }
    Outcome::Ran {
        blocks: tally.blocks,
        errors: tally.errors,
        internal: tally.internal,
    }
}

#[derive(Default)]
struct Tally {
    blocks: usize,
    errors: usize,
    internal: Vec<String>,
}

impl Tally {
    /// Counts a block's result; values are printed and errors rendered, since
    /// both are paths a user reaches.
    fn record(&mut self, result: Result<tl_lang::Value, LangError>, sources: &SourceMap) {
        self.blocks += 1;
        match result {
            Ok(value) => drop(value.to_string()),
            Err(error) => {
                self.errors += 1;
                let rendered = error.to_diagnostic().render(sources);
                if error.kind == ErrorKind::Internal {
                    self.internal.push(rendered);
                }
            }
        }
    }
}

/// [`check_and_run`], with a panic as its outcome.
pub fn run_caught(text: &str, dir: PathBuf) -> Outcome {
    catch(|| check_and_run(text, dir)).unwrap_or_else(Outcome::Panicked)
}
