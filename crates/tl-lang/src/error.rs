//! Errors of checking and running a program. A user's mistake (a wrong shape, an
//! unknown name) is a different kind from a bug in the interpreter, and both point
//! at the code they are about when they can.

use tl_syntax::{Diagnostic, Note, Span};

/// Whose fault an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The program is wrong or its input is bad.
    User,
    /// The interpreter broke an invariant of its own: a bug to report.
    Internal,
}

/// An error raised while checking or running a program.
#[derive(Debug, Clone, PartialEq)]
pub struct LangError {
    pub kind: ErrorKind,
    pub message: String,
    pub span: Option<Span>,
    pub hint: Option<String>,
    /// The user functions the error passed through, innermost first: each
    /// function's name and the call that entered it.
    pub trace: Vec<(String, Span)>,
}

/// Calls listed under a runtime error; deeper stacks (recursion) are summarised.
const MAX_TRACE: usize = 8;

/// Result alias for the language.
pub type Result<T> = std::result::Result<T, LangError>;

impl LangError {
    /// A user error not yet tied to code (the caller adds the span).
    pub fn user(message: impl Into<String>) -> Self {
        LangError {
            kind: ErrorKind::User,
            message: message.into(),
            span: None,
            hint: None,
            trace: Vec::new(),
        }
    }

    /// A user error at `span`.
    pub fn at(message: impl Into<String>, span: Span) -> Self {
        LangError {
            span: Some(span),
            ..Self::user(message)
        }
    }

    /// A bug in the interpreter.
    pub fn internal(message: impl Into<String>) -> Self {
        LangError {
            kind: ErrorKind::Internal,
            ..Self::user(message)
        }
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Points the error at `span` unless it already points somewhere.
    pub fn or_at(mut self, span: Span) -> Self {
        self.span.get_or_insert(span);
        self
    }

    /// A checker diagnostic as an error (the interpreter refuses to run
    /// what the checker would report).
    pub fn from_diagnostic(d: Diagnostic) -> Self {
        LangError {
            span: d.span,
            hint: d.hint,
            ..Self::user(d.message)
        }
    }

    /// The error as a diagnostic to render.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let message = match self.kind {
            ErrorKind::User => self.message.clone(),
            ErrorKind::Internal => format!(
                "internal error (a bug in tl, please report it): {}",
                self.message
            ),
        };
        let mut diagnostic = match self.span {
            Some(span) => Diagnostic::error(message, span),
            None => Diagnostic::error_without_span(message),
        };
        diagnostic.hint = self.hint.clone();
        // Recursion repeats one frame many times: show each run of equal
        // frames once, with its count.
        let mut runs: Vec<(&(String, Span), usize)> = Vec::new();
        for frame in &self.trace {
            match runs.last_mut() {
                Some((last, count)) if *last == frame => *count += 1,
                _ => runs.push((frame, 1)),
            }
        }
        diagnostic.notes = runs
            .iter()
            .take(MAX_TRACE)
            .map(|((function, call), count)| Note {
                message: match count {
                    1 => format!("in `{function}`, called"),
                    n => format!("in `{function}`, called {n} times"),
                },
                span: Some(*call),
            })
            .collect();
        if runs.len() > MAX_TRACE {
            let rest: usize = runs[MAX_TRACE..].iter().map(|(_, n)| n).sum();
            diagnostic.notes.push(Note {
                message: format!("... and {rest} more calls"),
                span: None,
            });
        }
        diagnostic
    }
}

impl std::fmt::Display for LangError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LangError {}

impl From<candle_core::Error> for LangError {
    fn from(error: candle_core::Error) -> Self {
        LangError::user(format!(
            "tensor operation failed: {}",
            first_line(&error.to_string())
        ))
    }
}

impl From<tl_engine::Error> for LangError {
    fn from(error: tl_engine::Error) -> Self {
        LangError::user(error.to_string())
    }
}

/// Candle appends a backtrace to some messages; users need only the first line.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

impl From<tl_tokenizer::Error> for LangError {
    fn from(error: tl_tokenizer::Error) -> Self {
        LangError::user(error.to_string())
    }
}

/// "`f` takes 2 arguments, but 3 were given", as the checker and the interpreter say it.
pub fn arity_message(name: &str, min: usize, max: usize, given: usize) -> String {
    let expected = if min == max {
        format!("{min}")
    } else if max == usize::MAX {
        format!("at least {min}")
    } else {
        format!("{min} to {max}")
    };
    let plural = if expected == "1" || expected == "at least 1" {
        "argument"
    } else {
        "arguments"
    };
    let were = if given == 1 { "was" } else { "were" };
    format!("`{name}` takes {expected} {plural}, but {given} {were} given")
}
