//! Golden tests through the public API: token dumps, rendered parse errors,
//! syntax tree dumps and REPL inputs. Run with `TL_BLESS=1` to rewrite the
//! expected files (see `tests/golden/README.md`).

mod common;

use std::fmt::Write;

use tl_syntax::{dump, dump_repl, lex, parse, parse_repl, ParseError, SourceMap, TokenKind};

/// The error as the user sees it, plus whether a REPL would ask for more input.
fn render_error(sources: &SourceMap, error: &ParseError) -> String {
    format!("{}at_eof: {}\n", error.render(sources), error.at_eof)
}

#[test]
fn lexer() {
    common::check_suite("lexer", "tokens", |name, text| {
        let mut sources = SourceMap::new();
        let file = sources.add(name, text);
        let tokens = match lex(file, text) {
            Ok(tokens) => tokens,
            Err(error) => return render_error(&sources, &error),
        };
        let mut out = String::new();
        for token in tokens {
            let (line, column) = sources.file(file).line_col(token.span.start as usize);
            let snippet = sources.snippet(token.span);
            let _ = write!(out, "{line}:{column} {} {snippet:?}", token.kind.name());
            let _ = match &token.kind {
                TokenKind::Int(value) => write!(out, " = {value}"),
                TokenKind::Float(value) => write!(out, " = {value:?}"),
                TokenKind::Str(value) => write!(out, " = {value:?}"),
                _ => Ok(()),
            };
            out.push('\n');
        }
        out
    });
}

#[test]
fn parse_errors() {
    common::check_suite("parse_errors", "err", |name, text| {
        let mut sources = SourceMap::new();
        let file = sources.add(name, text);
        match parse(file, text) {
            Ok(program) => format!("unexpectedly parsed:\n{}", dump(&program)),
            Err(error) => render_error(&sources, &error),
        }
    });
}

#[test]
fn parse_ok() {
    common::check_suite("parse_ok", "ast", |name, text| {
        let mut sources = SourceMap::new();
        let file = sources.add(name, text);
        match parse(file, text) {
            Ok(program) => dump(&program),
            Err(error) => format!("unexpected error:\n{}", render_error(&sources, &error)),
        }
    });
}

#[test]
fn repl() {
    common::check_suite("repl", "out", |name, text| {
        let mut sources = SourceMap::new();
        let file = sources.add(name, text);
        match parse_repl(file, text) {
            Ok(input) => dump_repl(&input),
            Err(error) => render_error(&sources, &error),
        }
    });
}
