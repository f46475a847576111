//! Format strings written as literals in `print`, `write` and `format`: every
//! `{name}` must name a variable in scope, braces must pair up, and there must
//! be an argument for every `{}` (extra arguments are fine: they are appended).
//! The placeholder grammar is the interpreter's (`interp/format.rs`).

use tl_syntax::ast::{Expr, ExprKind};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;

/// One placeholder of a template: its name (empty for `{}`) and byte range.
#[derive(Debug, PartialEq)]
struct Placeholder<'a> {
    name: &'a str,
    start: usize,
    end: usize,
}

/// A template's placeholders, or a brace problem: (message, hint, byte offset).
fn placeholders(
    template: &str,
) -> Result<Vec<Placeholder<'_>>, (&'static str, &'static str, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = template[at..].find(['{', '}']).map(|i| i + at) {
        let brace = &template[i..i + 1];
        if template[i + 1..].starts_with(brace) {
            at = i + 2;
            continue;
        }
        if brace == "}" {
            return Err((
                "unmatched `}` in format string",
                "write `}}` for a literal brace",
                i,
            ));
        }
        let Some(close) = template[i..].find('}').map(|c| c + i) else {
            return Err((
                "unclosed `{` in format string",
                "write `{{` for a literal brace",
                i,
            ));
        };
        let inner = &template[i + 1..close];
        let name = inner.split_once(':').map_or(inner, |(name, _)| name).trim();
        out.push(Placeholder {
            name,
            start: i,
            end: close + 1,
        });
        at = close + 1;
    }
    Ok(out)
}

/// The span of bytes `start..end` of a string literal's value, when the
/// literal has no escapes (its source is its value between quotes); otherwise
/// the whole literal.
fn inside(literal: Span, value: &str, start: usize, end: usize) -> Span {
    if literal.len() != value.len() + 2 {
        return literal;
    }
    let base = literal.start as usize + 1;
    Span::new(literal.file, base + start, base + end)
}

impl Body<'_, '_> {
    /// Checks a `print`/`write`/`format` call whose first argument is a literal.
    pub fn check_format_call(&mut self, args: &[&Expr]) {
        let Some(Expr {
            kind: ExprKind::Str(template),
            span,
        }) = args.first().copied()
        else {
            return;
        };
        let found = match placeholders(template) {
            Ok(found) => found,
            Err((message, hint, offset)) => {
                let at = inside(*span, template, offset, offset + 1);
                self.report(Diagnostic::error(message, at).with_hint(hint));
                return;
            }
        };
        let mut positional = 0;
        for p in &found {
            if p.name.is_empty() {
                positional += 1;
            } else if self.lookup(p.name).is_none() {
                let at = inside(*span, template, p.start, p.end);
                let error =
                    Diagnostic::error(format!("unknown name `{}` in format string", p.name), at);
                let names = self.variable_names();
                self.report(match crate::suggest::closest(p.name, names.into_iter()) {
                    Some(close) => error.with_hint(format!("did you mean `{close}`?")),
                    None => error,
                });
            }
        }
        let given = args.len().saturating_sub(1);
        if positional > given {
            let were = if given == 1 {
                "argument follows"
            } else {
                "arguments follow"
            };
            self.report(
                Diagnostic::error(
                    format!(
                        "the format string has {positional} `{{}}` placeholder{}, but {given} {were} it",
                        if positional == 1 { "" } else { "s" }
                    ),
                    *span,
                )
                .with_hint("pass one argument for each `{}`"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_named_and_positional_placeholders() {
        let found = placeholders("a={a} b={} {{x}} c={c:.3}").unwrap();
        let names: Vec<&str> = found.iter().map(|p| p.name).collect();
        assert_eq!(names, ["a", "", "c"]);
        assert_eq!((found[0].start, found[0].end), (2, 5));
    }

    #[test]
    fn reports_unpaired_braces() {
        assert_eq!(placeholders("oops }").unwrap_err().2, 5);
        assert!(placeholders("open {").unwrap_err().0.contains("unclosed"));
    }

    #[test]
    fn spans_point_inside_plain_literals() {
        let literal = Span::new(tl_syntax::FileId(0), 10, 17);
        assert_eq!(
            inside(literal, "a {x}", 2, 5),
            Span::new(tl_syntax::FileId(0), 13, 16)
        );
        // With an escape the source is longer than the value: the whole literal.
        assert_eq!(inside(literal, "ab\n{x}", 3, 6), literal);
    }
}
