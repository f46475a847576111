//! Robustness: no input makes the lexer or parser panic or overflow the stack,
//! and every error points inside the text. Inputs are the golden files, all
//! their prefixes, seeded random mutations of them, and pathological nesting.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use tl_syntax::{dump, dump_repl, parse, parse_repl, FileId, ParseError, SourceMap};

const FILE: FileId = FileId(0);
const MUTATIONS: usize = 20_000;

/// Parses `text` as a file and as REPL input; describes any problem.
fn check(text: &str) -> Result<(), String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let file_result = parse(FILE, text).map(|program| dump(&program));
        let repl_result = parse_repl(FILE, text).map(|input| dump_repl(&input));
        [file_result.err(), repl_result.err()]
            .into_iter()
            .flatten()
            .try_for_each(|error| check_error(text, &error))
    }));
    match outcome {
        Ok(result) => result,
        Err(_) => Err("panicked".to_string()),
    }
}

/// The error's span must lie within the text, on character boundaries, and
/// render without trouble.
fn check_error(text: &str, error: &ParseError) -> Result<(), String> {
    let span = error.span().ok_or("error without a span")?;
    let (start, end) = (span.start as usize, span.end as usize);
    if span.file != FILE || start > end || end > text.len() {
        return Err(format!("span {start}..{end} outside 0..{}", text.len()));
    }
    if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return Err(format!("span {start}..{end} splits a character"));
    }
    let mut sources = SourceMap::new();
    sources.add("fuzz.tl", text);
    let rendered = error.render(&sources);
    if !rendered.starts_with("error: ") {
        return Err(format!("odd rendering: {rendered}"));
    }
    Ok(())
}

fn assert_all_ok(what: &str, texts: impl IntoIterator<Item = String>) {
    let mut count = 0;
    for text in texts {
        count += 1;
        if let Err(problem) = check(&text) {
            panic!("{what}: {problem} on input {text:?}");
        }
    }
    assert!(count > 0, "{what}: no inputs");
}

fn golden_texts() -> Vec<String> {
    common::all_inputs()
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("readable golden input"))
        .collect()
}

#[test]
fn every_prefix_of_every_golden_input() {
    let prefixes = golden_texts().into_iter().flat_map(|text| {
        let ends: Vec<usize> = (0..=text.len())
            .filter(|&end| text.is_char_boundary(end))
            .collect();
        ends.into_iter()
            .map(move |end| text[..end].to_string())
            .collect::<Vec<_>>()
    });
    assert_all_ok("prefix", prefixes);
}

/// A valid file cut short at a token boundary can always be completed, so the
/// error (if any) must say the input ended early: that is what lets the REPL
/// ask for another line.
#[test]
fn cut_valid_files_ask_for_more_input() {
    for path in common::inputs("parse_ok") {
        let text = std::fs::read_to_string(&path).expect("readable golden input");
        let cuts = text.char_indices().filter(|(_, c)| c.is_whitespace());
        for (end, _) in cuts {
            let prefix = &text[..end];
            if in_comment_or_string(prefix) {
                continue;
            }
            if let Err(error) = parse(FILE, prefix) {
                assert!(
                    error.at_eof,
                    "{}: cut at byte {end} gives an error that does not ask for more: {}\n{prefix}",
                    path.display(),
                    error
                );
            }
        }
    }
}

/// Whether the end of `prefix` is inside a comment or a string (where a cut
/// does not fall between tokens). Good enough for the golden files, whose
/// strings hold no `//`.
fn in_comment_or_string(prefix: &str) -> bool {
    let last_line = prefix.rsplit('\n').next().unwrap_or_default();
    last_line.contains("//")
        || prefix.matches("/*").count() > prefix.matches("*/").count()
        || prefix.replace("\\\"", "").matches('"').count() % 2 == 1
}

/// A tiny xorshift generator, so the mutations are the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Fragments that make mutations likely to hit interesting parser paths.
const FRAGMENTS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ":",
    ".",
    "..",
    "->",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "@",
    "!",
    "&&",
    "||",
    "+=",
    "-=",
    "*=",
    "/=",
    "?",
    "&",
    "|",
    "\"",
    "\\",
    "'",
    "/*",
    "*/",
    "//",
    "\n",
    " ",
    "0",
    "1e",
    "1.5",
    "9999999999999999999",
    "x",
    "fn",
    "struct",
    "impl",
    "import",
    "let",
    "if",
    "else",
    "while",
    "for",
    "in",
    "loop",
    "break",
    "continue",
    "return",
    "true",
    "false",
    "none",
    "main",
    "test",
    "bench",
    "tensor",
    "float32",
    "int",
    "bool",
    "list",
    "self",
    "\\u{",
    "é",
    "😀",
    "\u{200b}",
];

fn random_fragment(rng: &mut XorShift) -> String {
    if rng.below(8) == 0 {
        // Any Unicode scalar value, biased towards the small ones.
        let limit = [0x80, 0x800, 0x1_0000, 0x11_0000][rng.below(4)];
        let code = rng.below(limit) as u32;
        return char::from_u32(code).unwrap_or('?').to_string();
    }
    FRAGMENTS[rng.below(FRAGMENTS.len())].to_string()
}

/// A random character boundary of `text`.
fn random_boundary(rng: &mut XorShift, text: &str) -> usize {
    let mut at = rng.below(text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(rng: &mut XorShift, text: &str) -> String {
    let mut text = text.to_string();
    for _ in 0..1 + rng.below(4) {
        let at = random_boundary(rng, &text);
        let end = text[at..]
            .char_indices()
            .nth(1 + rng.below(3))
            .map_or(text.len(), |(offset, _)| at + offset);
        match rng.below(3) {
            0 => text.insert_str(at, &random_fragment(rng)),
            1 => text.replace_range(at..end, ""),
            _ => text.replace_range(at..end, &random_fragment(rng)),
        }
    }
    text
}

#[test]
fn random_mutations_of_golden_inputs() {
    let inputs = golden_texts();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mutants = (0..MUTATIONS).map(|_| {
        let base = &inputs[rng.below(inputs.len())];
        mutate(&mut rng, base)
    });
    assert_all_ok("mutation", mutants.collect::<Vec<_>>());
}

#[test]
fn pathological_nesting() {
    let n = 100_000;
    let deep = vec![
        "(".repeat(n),
        "[".repeat(n),
        "-".repeat(n),
        "!".repeat(n),
        "{".repeat(n),
        "..".repeat(n),
        format!("main {{ {} }}", "{".repeat(n)),
        format!("fn f() {{ {}", "if a {".repeat(n)),
        format!("main {{ {} }}", "while a {".repeat(n)),
        format!("x{}", ".y".repeat(n)),
        format!("x{}", ".f()".repeat(n)),
        format!("x{}", "[0]".repeat(n)),
        format!("1{}", " + 1".repeat(n)),
        format!("1{}", " < 1".repeat(n)),
        "f(".repeat(n),
        "P { a: ".repeat(n),
        format!("fn f(x: {}", "list[".repeat(n)),
        "/*".repeat(n),
        "\"".repeat(n),
        format!("[{}]", "1, ".repeat(n)),
        format!("main {{ {} }}", "let x = 1; ".repeat(n)),
    ];
    // A thread with a modest stack, so a regression shows up as a crash here
    // rather than only on a small-stack thread in production.
    let worker = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || assert_all_ok("deep", deep))
        .expect("spawn a thread");
    if let Err(panic) = worker.join() {
        std::panic::resume_unwind(panic);
    }
}
