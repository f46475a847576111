//! `lang`: a `.tl` program as `tl check` and the REPL see it: lexed, parsed
//! as a file and as REPL input, dumped, checked, and every diagnostic
//! rendered with its source line. An error must point inside the text; the
//! language's promise is that no input makes any of this panic or overflow
//! the stack. Programs are not run: `tl-lang`'s `no_panic_run` test does that,
//! with the interpreter's own time and size limits.

use std::path::Path;

use tl_syntax::{dump, dump_repl, lex, parse, parse_repl, FileId, ParseError, SourceMap};

use super::Runner;
use crate::mutate::text::harvest;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::{normalize, normalize_against};

/// Constructs worth inserting anywhere: nesting, tensor types and shapes,
/// logic programming, operators the parser chains.
const WORDS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "((((",
    "[[[[",
    "fn f(x: float32[?, 2]) -> float32[?, 2] { x }",
    "struct S { a: int }",
    "let",
    "mut",
    "return",
    "if",
    "else",
    "while",
    "loop",
    "for",
    "in",
    "break",
    "continue",
    "import \"x.tl\"",
    "relation",
    "rule",
    "query",
    ":-",
    "?-",
    "@",
    "..",
    "..=",
    "->",
    "=>",
    "::",
    "float16[?, 2048]",
    "float32[]",
    "int[3]",
    "bool",
    "str",
    "main",
    "test",
    "bench",
    "none",
    "true",
    "false",
    "1e999",
    "0x",
    "\"\\u{110000}\"",
    "\"\\q\"",
    "//",
    "/*",
    "*/",
    "#",
    "'",
    "\"",
    "$",
    "`",
];

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let folders = [
        "examples",
        "tests/lang",
        "crates/tl-syntax/tests/golden",
        "crates/tl-lang/tests/golden",
    ];
    let mut paths = Vec::new();
    for folder in folders {
        paths.extend(seeds::files_with_extension(&repo.join(folder), "tl")?);
    }
    seeds::read_all(&paths)
}

pub fn dictionary(seeds: &[Vec<u8>]) -> (Shape, Dictionary) {
    let mut words = harvest(seeds, 1500);
    words.extend(WORDS.iter().map(|w| w.as_bytes().to_vec()));
    (
        Shape::Text,
        Dictionary {
            words,
            ..Dictionary::default()
        },
    )
}

pub struct LangRunner;

impl Runner for LangRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let text = String::from_utf8_lossy(input);
        let mut sources = SourceMap::new();
        let file = sources.add("fuzz.tl", text.as_ref());
        let lexed = lex(file, &text).map(|tokens| tokens.len());
        match parse_repl(file, &text) {
            Ok(input) => {
                let _ = dump_repl(&input);
            }
            Err(error) => check_error(&text, file, &error, &sources),
        }
        let program = match parse(file, &text) {
            Ok(program) => program,
            Err(error) => {
                check_error(&text, file, &error, &sources);
                let lexer = if lexed.is_ok() { "lexed" } else { "lex error" };
                let message = normalize_against(&error.diagnostic.message, input);
                return format!("{lexer}; parse: {message}");
            }
        };
        let _ = dump(&program);
        let diagnostics = tl_lang::check::check(&program.items);
        // One raw message per normalised one: blanking words of the input
        // scans it, so it is done for a few messages, not for each of the
        // thousands of diagnostics a program can have.
        let mut messages = std::collections::BTreeMap::new();
        for diagnostic in &diagnostics {
            let _ = diagnostic.render(&sources);
            messages
                .entry(normalize(&diagnostic.message))
                .or_insert(&diagnostic.message);
        }
        let features: Vec<String> = messages
            .values()
            .take(16)
            .map(|message| format!("check: {}", normalize_against(message, input)))
            .collect();
        format!("parsed\n{}", features.join("\n"))
    }
}

/// A parse error must point inside the text, on character boundaries, and
/// render.
fn check_error(text: &str, file: FileId, error: &ParseError, sources: &SourceMap) {
    if let Some(span) = error.span() {
        let (start, end) = (span.start as usize, span.end as usize);
        assert_eq!(span.file, file, "error span in another file");
        assert!(
            start <= end && end <= text.len(),
            "error span {start}..{end} outside the text of {} bytes",
            text.len()
        );
        assert!(
            text.is_char_boundary(start) && text.is_char_boundary(end),
            "error span {start}..{end} splits a character"
        );
    }
    let _ = error.render(sources);
}
