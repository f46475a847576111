//! What `tl run`, `tl check` and `tl repl` share: reading a program with its
//! imports, checking it, reporting diagnostics with their source lines, and
//! running the interpreter on a thread with room for deep recursion.

use std::path::{Path, PathBuf};

use anyhow::Result;
use tl_lang::builtins::Context;
use tl_lang::interp::Interpreter;
use tl_lang::loader::{load_file, LoadedProgram};
use tl_lang::LangError;
use tl_syntax::{Diagnostic, Severity, SourceMap};

use crate::catalogue;
use crate::cli::ProgramModelArgs;

/// A failure already reported to the user (diagnostics on stderr): `main` exits
/// with status 1 without printing it again.
#[derive(Debug)]
pub struct ReportedFailure;

impl std::fmt::Display for ReportedFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the program failed")
    }
}

impl std::error::Error for ReportedFailure {}

/// Stack for the interpreter thread: a tree-walking interpreter recurses per
/// nested expression and call.
const INTERPRETER_STACK_BYTES: usize = 512 << 20;

/// Prints diagnostics on stderr; true when any is an error.
pub fn report(sources: &SourceMap, diagnostics: &[Diagnostic]) -> bool {
    for diagnostic in diagnostics {
        eprint!("{}", diagnostic.render(sources));
    }
    diagnostics.iter().any(|d| d.severity == Severity::Error)
}

/// Prints a runtime error with its source line.
pub fn report_error(sources: &SourceMap, error: &LangError) {
    eprint!("{}", error.to_diagnostic().render(sources));
}

/// Reads `path` and its imports and checks them; diagnostics go to stderr.
pub fn load_checked(path: &Path) -> Result<LoadedProgram> {
    let program = match load_file(path) {
        Ok(program) => program,
        Err((sources, diagnostic)) => {
            report(&sources, &[diagnostic]);
            return Err(ReportedFailure.into());
        }
    };
    let diagnostics: Vec<Diagnostic> = tl_lang::check::check(&program.items);
    if report(&program.sources, &diagnostics) {
        return Err(ReportedFailure.into());
    }
    Ok(program)
}

/// A context on stdin/stdout that can fetch the default model, loading
/// models where `models` says.
pub fn context(base_dir: PathBuf, program_args: Vec<String>, models: &ProgramModelArgs) -> Context {
    let mut ctx = Context::stdio(base_dir, program_args);
    ctx.default_model = Some(Box::new(|| {
        catalogue::ensure(catalogue::default_entry()).map_err(|e| format!("{e:#}"))
    }));
    ctx.device = models.device;
    ctx.gpu_options = models.gpu.to_options();
    ctx.memory_limit = models.max_memory;
    ctx
}

/// An interpreter with the program's declarations in place.
pub fn interpreter(
    program: &LoadedProgram,
    program_args: Vec<String>,
    models: &ProgramModelArgs,
) -> Result<Interpreter> {
    let context = context(program.base_dir.clone(), program_args, models);
    let mut interp = Interpreter::new(context);
    if let Err(error) = interp.define(program.items.clone()) {
        report_error(&program.sources, &error);
        return Err(ReportedFailure.into());
    }
    Ok(interp)
}

/// Runs `f` on a thread with a large stack and returns its result.
pub fn on_interpreter_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let handle = std::thread::Builder::new()
        .name("interpreter".into())
        .stack_size(INTERPRETER_STACK_BYTES)
        .spawn(f)?;
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("internal error: the interpreter thread panicked"))
}
