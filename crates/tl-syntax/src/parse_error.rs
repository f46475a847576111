//! The one error the lexer and the parser return: a diagnostic, plus whether the
//! input merely stopped too early, so an interactive prompt can ask for another
//! line instead of reporting it.

use std::fmt;

use crate::diagnostic::Diagnostic;
use crate::source_map::SourceMap;
use crate::span::Span;

/// A syntax error.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub diagnostic: Diagnostic,
    /// True when the input ended before the construct was complete (an open
    /// brace, parenthesis, string or comment, or a missing operand at the end);
    /// more input could make it valid.
    pub at_eof: bool,
}

impl ParseError {
    /// An error about the code at `span`.
    pub fn new(message: impl Into<String>, span: Span) -> Self {
        ParseError {
            diagnostic: Diagnostic::error(message, span),
            at_eof: false,
        }
    }

    /// An error raised because the input ended too early.
    pub fn at_end(message: impl Into<String>, span: Span) -> Self {
        ParseError {
            at_eof: true,
            ..Self::new(message, span)
        }
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.diagnostic = self.diagnostic.with_hint(hint);
        self
    }

    /// Where the error points.
    pub fn span(&self) -> Option<Span> {
        self.diagnostic.span
    }

    /// The error with its source line and caret (see [`Diagnostic::render`]).
    pub fn render(&self, sources: &SourceMap) -> String {
        self.diagnostic.render(sources)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)?;
        if let Some(hint) = &self.diagnostic.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for Diagnostic {
    fn from(error: ParseError) -> Diagnostic {
        error.diagnostic
    }
}
