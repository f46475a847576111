//! `tl repl`: the language's interactive loop. Input may span several lines (an
//! unfinished construct asks for more with `...`); declarations and statements
//! run in one persistent scope and an expression's value is printed. Commands:
//! `:type EXPR`, `:vars`, `:load FILE`, `:help`, `:quit`. Tab completes names;
//! Ctrl-C stops a running computation.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use anyhow::Result;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::Validator;
use rustyline::{Context as LineContext, Editor, Helper};
use tl_lang::interp::Interpreter;
use tl_lang::loader::load_file_into;
use tl_lang::Value;
use tl_syntax::{parse_repl, Diagnostic, SourceMap};

use super::program::{context, on_interpreter_thread, report, report_error};
use crate::cli::{ProgramModelArgs, ReplArgs};

const PROMPT: &str = "tl> ";
const CONTINUATION: &str = "... ";
const COMMANDS: &[&str] = &[":type", ":vars", ":load", ":help", ":quit"];
const HELP: &str = "\
Enter declarations (fn, struct, impl, tensor), statements (let x = ...;) or an
expression to print its value. Unfinished input continues on the next line.
  :type EXPR   show the type of an expression's value
  :vars        list the variables and their types
  :load FILE   load a program's declarations (fn, struct, tensor, ...)
  :help        this text
  :quit        leave (or Ctrl-D)
Tab completes names; history is kept between sessions.";

pub fn run(args: &ReplArgs) -> Result<()> {
    let file = args.file.clone();
    let models = args.models.clone();
    on_interpreter_thread(move || repl_loop(file, &models))?
}

/// The REPL's state: the interpreter, every source read so far (so errors can
/// show their lines), and the names tab completion offers.
struct Repl {
    interp: Interpreter,
    sources: SourceMap,
    names: Rc<RefCell<Vec<String>>>,
}

fn repl_loop(file: Option<PathBuf>, models: &ProgramModelArgs) -> Result<()> {
    let names = Rc::new(RefCell::new(Vec::new()));
    let mut editor: Editor<NameCompleter, FileHistory> = Editor::new()?;
    editor.set_helper(Some(NameCompleter {
        names: names.clone(),
    }));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    let ctx = context(PathBuf::from("."), Vec::new(), models);
    // Ctrl-C while input runs stops it at its next loop iteration or call; at
    // the prompt, the line editor handles Ctrl-C itself.
    let interrupt = ctx.interrupt.clone();
    if let Err(e) = ctrlc::set_handler(move || interrupt.store(true, Ordering::Relaxed)) {
        eprintln!("warning: Ctrl-C will end the REPL instead of stopping a computation: {e}");
    }
    let mut repl = Repl {
        interp: Interpreter::new(ctx),
        sources: SourceMap::new(),
        names,
    };
    if let Some(file) = file {
        repl.load(&file);
    }
    repl.refresh_names();
    println!(
        "TensorLogic {} — :help for help, Ctrl-D to leave",
        env!("CARGO_PKG_VERSION")
    );
    while let Some(input) = read_input(&mut editor)? {
        let _ = editor.add_history_entry(input.trim_end());
        if !repl.handle(&input) {
            break;
        }
        repl.refresh_names();
    }
    if let Some(path) = &history {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(path);
    }
    Ok(())
}

/// Reads one complete input: more lines are asked for while the parser says the
/// input ended too early. `None` at Ctrl-D / end of input.
fn read_input(editor: &mut Editor<NameCompleter, FileHistory>) -> Result<Option<String>> {
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            PROMPT
        } else {
            CONTINUATION
        };
        match editor.readline(prompt) {
            Ok(line) => {
                buffer.push_str(&line);
                buffer.push('\n');
            }
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) if buffer.is_empty() => return Ok(None),
            Err(ReadlineError::Eof) => return Ok(Some(buffer)),
            Err(e) => return Err(e.into()),
        }
        let complete = buffer.trim_start().starts_with(':')
            || buffer.trim().is_empty()
            || !matches!(parse_repl(tl_syntax::FileId(u32::MAX), &buffer), Err(e) if e.at_eof);
        if complete {
            return Ok(Some(buffer));
        }
    }
}

impl Repl {
    /// Handles one input; false when the user asked to leave.
    fn handle(&mut self, input: &str) -> bool {
        let trimmed = input.trim();
        if let Some(command) = trimmed.strip_prefix(':') {
            let (name, rest) = command
                .split_once(char::is_whitespace)
                .unwrap_or((command, ""));
            match name {
                "quit" | "q" | "exit" => return false,
                "help" | "h" => println!("{HELP}"),
                "vars" => self.print_variables(),
                "load" => self.load(Path::new(rest.trim())),
                "type" | "t" => self.evaluate(rest, true),
                _ => eprintln!("unknown command `:{name}` (:help lists them)"),
            }
            return true;
        }
        if !trimmed.is_empty() {
            self.evaluate(input, false);
        }
        true
    }

    fn evaluate(&mut self, text: &str, show_type: bool) {
        // A Ctrl-C pressed before this input is not meant for it.
        self.interp.ctx.interrupt.store(false, Ordering::Relaxed);
        let file = self
            .sources
            .add(format!("<repl {}>", self.sources.next_id().0 + 1), text);
        let input = match parse_repl(file, text) {
            Ok(input) => input,
            Err(error) => {
                report(&self.sources, &[error.diagnostic]);
                return;
            }
        };
        if let Err(error) = self.interp.define(input.items) {
            report_error(&self.sources, &error);
            return;
        }
        match self.interp.run_repl(&input.stmts, input.tail.as_ref()) {
            Ok(Value::None) if !show_type => {}
            Ok(value) if show_type => println!("{}", value.type_name()),
            Ok(value) => println!("{value}"),
            Err(error) => report_error(&self.sources, &error),
        }
    }

    fn print_variables(&self) {
        let variables = self.interp.variables();
        if variables.is_empty() {
            println!("(no variables)");
        }
        for (name, ty) in variables {
            println!("{name}: {ty}");
        }
    }

    fn load(&mut self, path: &Path) {
        if path.as_os_str().is_empty() {
            eprintln!("usage: :load FILE");
            return;
        }
        let sources = std::mem::take(&mut self.sources);
        match load_file_into(sources, path) {
            Ok(program) => {
                self.sources = program.sources;
                let diagnostics: Vec<Diagnostic> = tl_lang::check::check(&program.items);
                if report(&self.sources, &diagnostics) {
                    return;
                }
                match self.interp.define(program.items) {
                    Ok(()) => println!("loaded {}", path.display()),
                    Err(error) => report_error(&self.sources, &error),
                }
            }
            Err((sources, diagnostic)) => {
                self.sources = sources;
                report(&self.sources, &[diagnostic]);
            }
        }
    }

    fn refresh_names(&self) {
        *self.names.borrow_mut() = self.interp.names();
    }
}

fn history_path() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("tensorlogic").join("repl_history.txt"))
}

/// Completes the name (or `:command`) under the cursor.
struct NameCompleter {
    names: Rc<RefCell<Vec<String>>>,
}

impl Completer for NameCompleter {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &LineContext<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| {
                i + before[i..].chars().next().map_or(1, char::len_utf8)
            });
        let prefix = &before[start..];
        if prefix.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let names = self.names.borrow();
        let pool: Box<dyn Iterator<Item = &str>> = if prefix.starts_with(':') {
            Box::new(COMMANDS.iter().copied())
        } else {
            Box::new(names.iter().map(String::as_str))
        };
        Ok((
            start,
            pool.filter(|n| n.starts_with(prefix))
                .map(String::from)
                .collect(),
        ))
    }
}

impl Hinter for NameCompleter {
    type Hint = String;
}
impl Highlighter for NameCompleter {}
impl Validator for NameCompleter {}
impl Helper for NameCompleter {}

#[cfg(test)]
mod tests {
    use super::*;
    use rustyline::history::MemHistory;

    fn complete(line: &str, names: &[&str]) -> (usize, Vec<String>) {
        let completer = NameCompleter {
            names: Rc::new(RefCell::new(names.iter().map(|n| n.to_string()).collect())),
        };
        let history = MemHistory::new();
        completer
            .complete(line, line.len(), &LineContext::new(&history))
            .expect("completion")
    }

    #[test]
    fn completes_the_name_under_the_cursor() {
        let names = ["softmax", "sorted", "sum", "x_total"];
        assert_eq!(
            complete("let y = so", &names),
            (8, vec!["softmax".to_string(), "sorted".to_string()])
        );
        assert_eq!(complete("f(x_", &names), (2, vec!["x_total".to_string()]));
        assert_eq!(complete("1 + ", &names), (4, vec![]));
    }

    #[test]
    fn completes_commands() {
        assert_eq!(complete(":ty", &[]), (0, vec![":type".to_string()]));
    }
}
