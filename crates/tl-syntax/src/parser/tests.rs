//! Parser unit tests for what golden dumps do not show: spans, caret
//! positions, `at_eof`, and the nesting limit.

use super::{parse, parse_repl, ParseError};
use crate::ast::{ExprKind, Item, StmtKind};
use crate::dump::dump_expr;
use crate::span::{FileId, Span};

const FILE: FileId = FileId(7);

/// The REPL tail of `text`, dumped.
fn expr(text: &str) -> String {
    let input = parse_repl(FILE, text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    dump_expr(&input.tail.expect("a tail expression"))
}

fn error(text: &str) -> ParseError {
    match parse(FILE, text) {
        Ok(program) => panic!("{text:?} parsed: {program:?}"),
        Err(error) => error,
    }
}

fn repl_error(text: &str) -> ParseError {
    match parse_repl(FILE, text) {
        Ok(input) => panic!("{text:?} parsed: {input:?}"),
        Err(error) => error,
    }
}

/// The text a span covers.
fn text_of(text: &str, span: Span) -> &str {
    assert_eq!(span.file, FILE);
    &text[span.start as usize..span.end as usize]
}

#[test]
fn precedence_climbs_from_ranges_to_postfix() {
    assert_eq!(expr("a..b || c"), "(.. a (|| b c))");
    assert_eq!(
        expr("a || b && c == d + e * f"),
        "(|| a (&& b (== c (+ d (* e f)))))"
    );
    assert_eq!(expr("x @ w * 2"), "(* (@ x w) 2)");
    assert_eq!(expr("-x[0].y"), "(neg (field (index x 0) y))");
    assert_eq!(expr("!a && b"), "(&& (not a) b)");
    assert_eq!(expr("a - -b"), "(- a (neg b))");
}

#[test]
fn spans_cover_whole_constructs() {
    let text = "main {\n    let y = (a + b) @ m.w.t()[0, 1..n];\n    if y { 1 } else { 2 }\n}";
    let program = parse(FILE, text).unwrap();
    let Item::Main(body) = &program.items[0] else {
        panic!("not main")
    };
    // `main`'s block is the braces; the keyword is not part of it.
    assert_eq!(text_of(text, body.span), &text[5..]);
    let stmt = &body.stmts[0];
    assert_eq!(
        text_of(text, stmt.span),
        "let y = (a + b) @ m.w.t()[0, 1..n];"
    );
    let StmtKind::Let { value, .. } = &stmt.kind else {
        panic!("not let")
    };
    assert_eq!(text_of(text, value.span), "(a + b) @ m.w.t()[0, 1..n]");
    let ExprKind::Binary { lhs, rhs, .. } = &value.kind else {
        panic!("not binary")
    };
    assert_eq!(text_of(text, lhs.span), "(a + b)");
    assert_eq!(text_of(text, rhs.span), "m.w.t()[0, 1..n]");
    let tail = body.tail.as_ref().expect("if is the tail");
    assert_eq!(text_of(text, tail.span), "if y { 1 } else { 2 }");
}

#[test]
fn item_spans_run_from_keyword_to_end() {
    let text = "fn f(x) -> int { x }\ntensor w: float32[2] = z;\ntest \"t\" {}\nimport \"a.tl\"";
    let program = parse(FILE, text).unwrap();
    let spans: Vec<&str> = program
        .items
        .iter()
        .map(|item| match item {
            Item::Function(f) => text_of(text, f.span),
            Item::Tensor(t) => text_of(text, t.span),
            Item::Test(t) => text_of(text, t.span),
            Item::Import { span, .. } => text_of(text, *span),
            _ => panic!("unexpected item"),
        })
        .collect();
    assert_eq!(
        spans,
        [
            "fn f(x) -> int { x }",
            "tensor w: float32[2] = z;",
            "test \"t\" {}",
            "import \"a.tl\""
        ]
    );
}

#[test]
fn missing_semicolon_caret_sits_after_the_previous_token() {
    let text = "main {\n    let x = 1\n    let y = 2;\n}";
    let error = error(text);
    let span = error.span().unwrap();
    assert_eq!((span.start, span.end), (20, 20));
    assert_eq!(&text[..20], "main {\n    let x = 1");
    assert!(!error.at_eof);
}

#[test]
fn repl_asks_for_more_only_when_the_input_stopped_early() {
    for text in [
        "fn f() {",
        "fn f() {\n  x + 1",
        "print(1,",
        "[1, 2",
        "1 +",
        "let x =",
        "if a { 1 } else",
        "\"abc",
        "/* abc",
        "x.",
        "struct P { a: int,",
        "impl P {",
        "for i in 0..",
        "let x = 1",
        "x += 2",
        "return",
    ] {
        assert!(repl_error(text).at_eof, "{text:?} should ask for more");
    }
    for text in ["let = 1", "1 2", "(f)(x)", "a < b < c", "}"] {
        assert!(!repl_error(text).at_eof, "{text:?} is simply wrong");
    }
}

#[test]
fn repl_separates_items_statements_and_tail() {
    let input = parse_repl(FILE, "let a = 1; fn f() {} a + 1").unwrap();
    assert_eq!(input.items.len(), 1);
    assert_eq!(input.stmts.len(), 1);
    assert_eq!(dump_expr(&input.tail.unwrap()), "(+ a 1)");
    let input = parse_repl(FILE, "x = 2;").unwrap();
    assert!(matches!(input.stmts[0].kind, StmtKind::Assign { .. }));
    assert!(input.tail.is_none());
    let input = parse_repl(FILE, "main").unwrap();
    assert_eq!(dump_expr(&input.tail.unwrap()), "main");
}

#[test]
fn struct_literals_are_refused_in_loop_heads_only() {
    assert_eq!(expr("P { a: 1 }"), "(new P (a 1))");
    assert_eq!(expr("P {}"), "(new P)");
    assert!(parse(FILE, "main { for x in xs { y: 1 } }").is_err());
    assert!(parse(FILE, "main { for x in (P { a: [1] }).a {} }").is_ok());
    assert!(parse(FILE, "main { while f(P { a: 1 }) {} }").is_ok());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for text in [
        "(".repeat(100_000),
        "-".repeat(100_000),
        "[".repeat(100_000),
        "{".repeat(100_000),
        "if a {".repeat(100_000),
    ] {
        let error = repl_error(&text);
        assert_eq!(
            error.diagnostic.message,
            "expression nested too deeply",
            "{}",
            &text[..20]
        );
    }
    for text in [
        format!("x{}", ".y".repeat(100_000)),
        format!("1{}", "+1".repeat(100_000)),
        format!("x{}", "[0]".repeat(100_000)),
    ] {
        assert_eq!(repl_error(&text).diagnostic.message, "expression too long");
    }
    let text = format!("fn f(x: {}int", "list[".repeat(100_000));
    assert_eq!(
        error(&text).diagnostic.message,
        "expression nested too deeply"
    );
}

#[test]
fn nesting_below_the_limit_is_fine() {
    let depth = 60;
    let text = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(expr(&text), "1");
    // A flat chain is one level of nesting however long it is (up to the
    // height bound), and so is each parenthesized link in it.
    for chain in [
        format!("1{}", " + 1".repeat(1000)),
        format!("x{}", ".y".repeat(1000)),
        format!("(1){}", " * (2 - 1)".repeat(1000)),
        format!("f(){}", "[0]".repeat(1000)),
    ] {
        assert!(parse_repl(FILE, &chain).is_ok(), "{}", &chain[..20]);
    }
}

/// The whole program, dumped.
fn program(text: &str) -> String {
    let program = parse(FILE, text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    crate::dump::dump(&program)
}

#[test]
fn juxtaposition_multiplies_at_the_level_of_star() {
    assert_eq!(expr("W[i, j] X[j]"), "(* (index W i j) (index X j))");
    assert_eq!(
        expr("A[i, j] B[j] / 2.0 + c[i]"),
        "(+ (/ (* (index A i j) (index B j)) 2.0) (index c i))"
    );
    assert_eq!(
        expr("relu(W[i, j] X[j] + b[i])"),
        "(call relu (+ (* (index W i j) (index X j)) (index b i)))"
    );
    assert_eq!(
        expr("W[i, j] (X[j] + b[j])"),
        "(* (index W i j) (+ (index X j) (index b j)))"
    );
    assert_eq!(
        expr("R(x, y) E[x, i] E[y, j]"),
        "(* (* (call R x y) (index E x i)) (index E y j))"
    );
    // After `)` as after `]`: a squared error, a call times a sum.
    assert_eq!(
        expr("(p[n] - y[n]) (p[n] - y[n]) / 2.0"),
        "(/ (* (- (index p n) (index y n)) (- (index p n) (index y n))) 2.0)"
    );
    assert_eq!(
        expr("relu(h[i]) (x[i] + 1)"),
        "(* (call relu (index h i)) (+ (index x i) 1))"
    );
}

#[test]
fn juxtaposition_stops_at_a_line_break_and_calls_stay_calls() {
    let missing_semi = error("main {\n    print(a)\n    print(b);\n}");
    assert_eq!(
        missing_semi.to_string(),
        "expected `;` after this statement, found `print`"
    );
    let call_of_call = error("main { f(x)(y); }");
    assert!(call_of_call
        .to_string()
        .starts_with("only a named function can be called"));
    let call_of_parens = error("main { (f)(y); }");
    assert!(call_of_parens
        .to_string()
        .starts_with("only a named function can be called"));
}

#[test]
fn equations_domains_relations_facts_and_rules_are_items() {
    let text = "Y[i, k] = W[i, j] X[j, k];\nT = W[i, i];\n\
                domain Person = {alice, bob,};\n\
                relation Parent(x: Person, y: Person);\n\
                Parent(alice, bob).\n\
                Anc(x, z) <- Anc(x, y), Parent(y, z), !Parent(z, x).\n";
    assert_eq!(
        program(text),
        "(equation Y[i, k] (* (index W i j) (index X j k)))\n\
         (equation T[] (index W i i))\n\
         (domain Person {alice, bob})\n\
         (relation Parent(x: Person, y: Person))\n\
         (fact Parent(alice, bob))\n\
         (rule Anc(x, z) <- Anc(x, y), Parent(y, z), !Parent(z, x))\n"
    );
}

#[test]
fn queries_are_postfix_and_bind_tighter_than_operators() {
    assert_eq!(expr("!Parent(alice, x)?"), "(not (query Parent(alice, x)))");
    assert_eq!(
        expr("len(R(x, y)?) + 1"),
        "(+ (call len (query R(x, y))) 1)"
    );
    let error = repl_error("R(1, x)?");
    assert!(error
        .to_string()
        .starts_with("a query's arguments are domain elements or variables"));
}

#[test]
fn a_rule_needs_its_arrow_and_final_dot() {
    let spaced = error("R(x) < - S(x).");
    assert!(
        spaced
            .to_string()
            .contains("expected `.` after a fact or `<-`"),
        "{spaced}"
    );
    let no_dot = error("R(x) <- S(x)");
    assert!(
        no_dot.to_string().contains("`.` at the end of the rule"),
        "{no_dot}"
    );
}

#[test]
fn the_repl_reads_facts_and_rules_as_items_and_equations_as_statements() {
    let input = parse_repl(
        FILE,
        "R(a, b).\nS(x) <- R(x, y).\nY[i] = W[i, j] v[j];\nR(a, x)?",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(input.items.len(), 2);
    assert!(matches!(input.items[1], Item::Rule(_)));
    assert!(matches!(input.stmts[0].kind, StmtKind::Assign { .. }));
    assert!(matches!(
        input.tail.map(|t| t.kind),
        Some(ExprKind::Query(_))
    ));
}
