//! The lexer's tricky cases: ranges against floats, exponents, escapes,
//! comments and spans.

use super::lex;
use crate::span::FileId;
use crate::token::TokenKind::{self, *};

fn kinds(text: &str) -> Vec<TokenKind> {
    let tokens = lex(FileId(0), text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    tokens.into_iter().map(|t| t.kind).collect()
}

fn error(text: &str) -> (String, usize, usize, bool) {
    match lex(FileId(0), text) {
        Ok(tokens) => panic!("{text:?} lexed: {tokens:?}"),
        Err(e) => {
            let span = e.span().expect("lexer errors have spans");
            (
                e.diagnostic.message,
                span.start as usize,
                span.end as usize,
                e.at_eof,
            )
        }
    }
}

fn ident(name: &str) -> TokenKind {
    Ident(name.to_string())
}

#[test]
fn range_after_integer_is_not_a_float() {
    assert_eq!(kinds("0..n"), vec![Int(0), DotDot, ident("n"), Eof]);
    assert_eq!(kinds("1..2"), vec![Int(1), DotDot, Int(2), Eof]);
    assert_eq!(kinds("1.max(2)")[..3], [Int(1), Dot, ident("max")]);
}

#[test]
fn floats_need_digits_after_the_dot_or_exponent() {
    assert_eq!(kinds("1.5"), vec![Float(1.5), Eof]);
    assert_eq!(kinds("1e-5"), vec![Float(1e-5), Eof]);
    assert_eq!(kinds("2.5E+3"), vec![Float(2500.0), Eof]);
    assert_eq!(kinds("3e2"), vec![Float(300.0), Eof]);
    assert_eq!(kinds("1_000"), vec![Int(1000), Eof]);
    assert_eq!(kinds("1_0.2_5"), vec![Float(10.25), Eof]);
    assert_eq!(kinds("1."), vec![Int(1), Dot, Eof]);
}

#[test]
fn number_suffixes_and_overflow_are_errors() {
    assert_eq!(error("3x").0, "invalid suffix `x` on number literal");
    assert_eq!(error("1e").0, "invalid suffix `e` on number literal");
    assert_eq!(error("1e+").1, 1);
    assert_eq!(kinds("9223372036854775807"), vec![Int(i64::MAX), Eof]);
    assert_eq!(
        error("9223372036854775808").0,
        "integer literal is too large"
    );
    assert_eq!(error("1e999").0, "float literal is out of range");
}

#[test]
fn string_escapes_decode() {
    assert_eq!(
        kinds(r#""a\n\t\r\\\"\0\u{1F600}""#),
        vec![Str("a\n\t\r\\\"\0\u{1F600}".to_string()), Eof]
    );
    assert_eq!(kinds("\"two\nlines\""), vec![Str("two\nlines".into()), Eof]);
}

#[test]
fn bad_escapes_point_at_the_escape() {
    assert_eq!(
        error(r#"x = "ab\q""#),
        ("unknown escape `\\q`".to_string(), 7, 9, false)
    );
    assert_eq!(error(r#""\u{D800}""#).1..error(r#""\u{D800}""#).2, 1..9);
    assert_eq!(
        error(r#""\u{1234567}""#).0,
        "a unicode escape has 1 to 6 hex digits"
    );
    assert_eq!(error(r#""\u12""#).0, "expected `{` after `\\u`");
    assert_eq!(
        error(r#""\u{12x}""#).0,
        "invalid character in unicode escape"
    );
}

#[test]
fn unterminated_strings_and_comments_ask_for_more_input() {
    assert_eq!(error("x \"abc"), ("unterminated string".into(), 2, 3, true));
    assert!(error("\"abc\\").3);
    assert!(error("\"\\u{12").3);
    assert_eq!(
        error("1 /* a /* b */"),
        ("unterminated block comment".into(), 2, 4, true)
    );
}

#[test]
fn comments_are_skipped_and_nest() {
    assert_eq!(kinds("1 // two\n3"), vec![Int(1), Int(3), Eof]);
    assert_eq!(kinds("1 /* a /* b */ c */ 2"), vec![Int(1), Int(2), Eof]);
    assert_eq!(kinds("a/b"), vec![ident("a"), Slash, ident("b"), Eof]);
    assert_eq!(kinds("// only a comment"), vec![Eof]);
}

#[test]
fn operators_take_the_longest_match() {
    assert_eq!(
        kinds("-> -= - == = != ! <= < >= > += *= /= && || .. ."),
        vec![
            Arrow, MinusEq, Minus, EqEq, Eq, Ne, Bang, Le, Lt, Ge, Gt, PlusEq, StarEq, SlashEq,
            AndAnd, OrOr, DotDot, Dot, Eof
        ]
    );
}

#[test]
fn keywords_are_few_and_other_words_are_identifiers() {
    assert_eq!(
        kinds("fn main tensor self none"),
        vec![Fn, ident("main"), ident("tensor"), ident("self"), None, Eof]
    );
    assert_eq!(kinds("größe _x1"), vec![ident("größe"), ident("_x1"), Eof]);
}

#[test]
fn unexpected_characters_have_spans_and_hints() {
    assert_eq!(
        error("a $ b"),
        ("unexpected character `$`".into(), 2, 3, false)
    );
    let e = lex(FileId(0), "a & b").unwrap_err();
    assert_eq!(
        e.diagnostic.hint.as_deref(),
        Some("use `&&` for logical and")
    );
    assert_eq!(error("x = €").1..error("x = €").2, 4..7);
}

#[test]
fn spans_are_byte_ranges_and_eof_is_empty() {
    let tokens = lex(FileId(3), "let é = \"s\";").unwrap();
    let spans: Vec<(u32, u32)> = tokens.iter().map(|t| (t.span.start, t.span.end)).collect();
    assert_eq!(
        spans,
        vec![(0, 3), (4, 6), (7, 8), (9, 12), (12, 13), (13, 13)]
    );
    assert!(tokens.iter().all(|t| t.span.file == FileId(3)));
}
