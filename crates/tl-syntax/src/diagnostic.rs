//! Errors and warnings about a program, rendered the way a good compiler does:
//! `file:line:col`, the source line, a caret under the offending span, and a hint
//! when one is obvious.
//!
//! ```text
//! error: cannot multiply float16[?, 2048] @ float16[1024, ?]: inner dimensions 2048 and 1024 differ
//!  --> model.tl:3:13
//!   |
//! 3 |     let y = a @ b;
//!   |             ^^^^^
//!   = hint: transpose one side, or check the weight's shape
//! ```

use std::fmt::Write;

use crate::source_map::SourceMap;
use crate::span::Span;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One message about the program, pointing at the code it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Option<Span>,
    pub hint: Option<String>,
    /// Further lines, each optionally pointing somewhere (`called from a.tl:3:5`).
    pub notes: Vec<Note>,
}

/// A line under a diagnostic: a message, and where it points (as `file:line:col`).
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub message: String,
    pub span: Option<Span>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: Some(span),
            hint: None,
            notes: Vec::new(),
        }
    }

    /// An error that points at no code (a missing file, say).
    pub fn error_without_span(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: None,
            hint: None,
            notes: Vec::new(),
        }
    }

    /// A warning at `span`.
    pub fn warning(message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::error(message, span)
        }
    }

    /// The same diagnostic with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The diagnostic as text: header, location, source line with carets, hint.
    pub fn render(&self, sources: &SourceMap) -> String {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = format!("{label}: {}\n", self.message);
        if let Some(span) = self.span {
            if let Some(file) = sources.get(span.file) {
                render_location(&mut out, file, span);
            }
        }
        if let Some(hint) = &self.hint {
            let _ = writeln!(out, "  = hint: {hint}");
        }
        for note in &self.notes {
            let location = note
                .span
                .and_then(|span| Some((sources.get(span.file)?, span)))
                .map(|(file, span)| {
                    let (line, column) = file.line_col(span.start as usize);
                    format!(" at {}:{line}:{column}", file.name)
                })
                .unwrap_or_default();
            let _ = writeln!(out, "  = note: {}{location}", note.message);
        }
        out
    }
}

fn render_location(out: &mut String, file: &crate::source_map::SourceFile, span: Span) {
    let (line, column) = file.line_col(span.start as usize);
    let (end_line, end_column) = file.line_col(span.end as usize);
    let text = file.line_text(line);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "{pad}--> {}:{line}:{column}", file.name);
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {}", text.replace('\t', " "));
    let line_chars = text.chars().count();
    let carets = if end_line == line {
        end_column.saturating_sub(column).max(1)
    } else {
        line_chars.saturating_sub(column - 1).max(1)
    };
    let _ = writeln!(
        out,
        "{pad} | {}{}",
        " ".repeat(column - 1),
        "^".repeat(carets)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_line_and_carets() {
        let mut sources = SourceMap::new();
        let file = sources.add("m.tl", "let a = 1;\nlet y = a @ b;\n");
        let diagnostic = Diagnostic::error("bad matmul", Span::new(file, 19, 24)).with_hint("look");
        assert_eq!(
            diagnostic.render(&sources),
            "error: bad matmul\n --> m.tl:2:9\n  |\n2 | let y = a @ b;\n  |         ^^^^^\n  = hint: look\n"
        );
    }

    #[test]
    fn notes_name_their_location() {
        let mut sources = SourceMap::new();
        let file = sources.add("m.tl", "f(1)\ng(2)\n");
        let mut diagnostic = Diagnostic::error("bad", Span::new(file, 0, 4));
        diagnostic.notes.push(Note {
            message: "in `g`, called".into(),
            span: Some(Span::new(file, 5, 9)),
        });
        assert!(diagnostic
            .render(&sources)
            .ends_with("  = note: in `g`, called at m.tl:2:1\n"));
    }

    #[test]
    fn empty_span_at_end_of_file_gets_one_caret() {
        let mut sources = SourceMap::new();
        let file = sources.add("m.tl", "fn f(");
        let rendered = Diagnostic::error("eof", Span::new(file, 5, 5)).render(&sources);
        assert!(rendered.contains("1 | fn f(\n  |      ^\n"), "{rendered}");
    }
}
