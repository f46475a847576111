//! Seeded mutations of a program's tokens, aimed at the interpreter rather than
//! the parser: numbers become edge values, names become builtins, list literals
//! become odd shapes, calls lose or repeat arguments, operators change, values
//! get indexed out of range or replaced by odd expressions.

use std::ops::Range;

use tl_syntax::{lex, FileId, Token, TokenKind};

use super::rng::XorShift;

/// Numbers at the edges: zero, negatives, sizes past every limit, the extremes
/// of int and float, infinities and NaN. Moderate sizes stay small: a program
/// whose every dimension is 100 is slow, not wrong.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "100",
    "0.0",
    "-0.0",
    "0.5",
    "-2.5",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "(-9223372036854775807 - 1)",
    "1e308",
    "-1e308",
    "5e-324",
    "(1e308 * 10.0)",
    "(1e308 * 10.0 - 1e308 * 10.0)",
    "sqrt(-1.0)",
];

/// List literals as odd shapes, index lists and data.
const LISTS: &[&str] = &[
    "[]",
    "[0]",
    "[-1]",
    "[1]",
    "[0, 0]",
    "[0, 3]",
    "[-1, -1]",
    "[1, -1]",
    "[2, -1, 3]",
    "[1000000000, 1000000000]",
    "[2147483648]",
    "[4294967296, 4294967296]",
    "[9223372036854775807, 2]",
    "[1, 1, 1, 1, 1, 1, 1, 1, 1]",
    "[[1], [2, 3]]",
    "[[]]",
    "[[1, 2], [3, 4]]",
    "[1.5, -0.0]",
    "[none]",
    "[\"a\", 1]",
    "[[[[1]]]]",
];

/// Index suffixes: past either end, too many, empty and reversed ranges.
const INDICES: &[&str] = &[
    "[0]",
    "[-1]",
    "[99]",
    "[-99]",
    "[9223372036854775807]",
    "[(-9223372036854775807 - 1)]",
    "[0, 0, 0, 0, 0]",
    "[1..0]",
    "[5..]",
    "[..-9]",
    "[:, 7]",
    "[:, :, :, :]",
    "[0..0]",
    "[2..2, 0]",
];

/// Values of surprising types in place of a name.
const ODD_EXPRESSIONS: &[&str] = &[
    "none",
    "\"\"",
    "\"{}\"",
    "\"{:.99999}\"",
    "[]",
    "[[]]",
    "0",
    "-1",
    "true",
    "zeros([0])",
    "zeros([0, 3])",
    "tensor(1.5)",
    "tensor(7)",
    "ones([2, 3], \"int64\")",
    "ones([2, 3], \"int32\")",
    "ones([2, 3], \"float16\")",
    "ones([3, 2], \"bfloat16\")",
    "ones([2], \"bool\")",
    "arange(6).reshape([1, 2, 3])",
    "full([2, 2], 1e308)",
    "tensor([9223372036854775807])",
    "permute(reshape(arange(256), [2, 2, 2, 2, 2, 2, 2, 2]), [7, 6, 5, 4, 3, 2, 1, 0])",
];

/// Strings: format specs, einsum specs, element types, method and file names.
const STRINGS: &[&str] = &[
    "\"\"",
    "\"{}\"",
    "\"{} {} {}\"",
    "\"{:.3}\"",
    "\"{:.100000}\"",
    "\"{x}\"",
    "\"}{\"",
    "\"float16\"",
    "\"bfloat16\"",
    "\"int32\"",
    "\"bool\"",
    "\"float64\"",
    "\"ij,jk->ik\"",
    "\"ii->\"",
    "\"i,j->ij\"",
    "\"abc,cd->abd\"",
    "\"->\"",
    "\"é😀\"",
];

/// Binary operators, each of which may replace another.
const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "@", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
];

/// A mutant of `text`: one to four mutations, each applied if it finds a place.
pub fn mutate(rng: &mut XorShift, text: &str, builtins: &[&str]) -> String {
    let mut text = text.to_string();
    for _ in 0..1 + rng.below(4) {
        if let Some(next) = mutate_once(rng, &text, builtins) {
            text = next;
        }
    }
    text
}

fn mutate_once(rng: &mut XorShift, text: &str, builtins: &[&str]) -> Option<String> {
    let tokens = lex(FileId(0), text).ok()?;
    let (range, replacement) = match rng.below(11) {
        0 | 1 => replace_number(rng, &tokens)?,
        2 => swap_name(rng, &tokens, builtins)?,
        3 => replace_list(rng, &tokens)?,
        4 => edit_arguments(rng, text, &tokens)?,
        5 => swap_operator(rng, &tokens)?,
        6 => index_value(rng, &tokens)?,
        7 => wrap_in_builtin(rng, &tokens, builtins)?,
        8 => replace_string(rng, &tokens)?,
        _ => odd_expression(rng, &tokens)?,
    };
    let mut out = text.to_string();
    out.replace_range(range, &replacement);
    Some(out)
}

type Edit = (Range<usize>, String);

fn bytes(token: &Token) -> Range<usize> {
    token.span.start as usize..token.span.end as usize
}

/// A random token index among those `wanted` accepts.
fn pick_token(
    rng: &mut XorShift,
    tokens: &[Token],
    wanted: impl Fn(usize) -> bool,
) -> Option<usize> {
    let places: Vec<usize> = (0..tokens.len()).filter(|&i| wanted(i)).collect();
    (!places.is_empty()).then(|| *rng.pick(&places))
}

fn is_name(token: &Token) -> bool {
    matches!(&token.kind, TokenKind::Ident(name) if !matches!(name.as_str(), "main" | "test" | "bench" | "self"))
}

fn replace_number(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| {
        matches!(tokens[i].kind, TokenKind::Int(_) | TokenKind::Float(_))
    })?;
    Some((bytes(&tokens[i]), rng.pick(NUMBERS).to_string()))
}

/// A name becomes a builtin's name or another name of the program.
fn swap_name(rng: &mut XorShift, tokens: &[Token], builtins: &[&str]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| is_name(&tokens[i]))?;
    let replacement = if rng.below(2) == 0 {
        rng.pick(builtins).to_string()
    } else {
        let j = pick_token(rng, tokens, |j| is_name(&tokens[j]))?;
        match &tokens[j].kind {
            TokenKind::Ident(name) => name.clone(),
            _ => return None,
        }
    };
    Some((bytes(&tokens[i]), replacement))
}

/// The token index of the bracket closing the one at `open`.
fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token.kind {
            TokenKind::LBracket | TokenKind::LParen | TokenKind::LBrace => depth += 1,
            TokenKind::RBracket | TokenKind::RParen | TokenKind::RBrace => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A list literal (a `[` where a value starts) becomes an odd list.
fn replace_list(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    let open = pick_token(rng, tokens, |i| {
        tokens[i].kind == TokenKind::LBracket
            && i > 0
            && matches!(
                tokens[i - 1].kind,
                TokenKind::LParen
                    | TokenKind::Comma
                    | TokenKind::Eq
                    | TokenKind::LBracket
                    | TokenKind::Return
                    | TokenKind::In
            )
    })?;
    let close = matching(tokens, open)?;
    let range = tokens[open].span.start as usize..tokens[close].span.end as usize;
    Some((range, rng.pick(LISTS).to_string()))
}

/// A call's arguments: one dropped, repeated, swapped with another, or an odd
/// value appended.
fn edit_arguments(rng: &mut XorShift, text: &str, tokens: &[Token]) -> Option<Edit> {
    let open = pick_token(rng, tokens, |i| {
        tokens[i].kind == TokenKind::LParen && i > 0 && is_name(&tokens[i - 1])
    })?;
    let close = matching(tokens, open)?;
    let inner = tokens[open].span.end as usize..tokens[close].span.start as usize;
    let mut args = top_level_arguments(text, tokens, open, close);
    match rng.below(4) {
        0 if !args.is_empty() => {
            args.remove(rng.below(args.len()));
        }
        1 if !args.is_empty() => {
            let copy = args[rng.below(args.len())].clone();
            args.insert(rng.below(args.len() + 1), copy);
        }
        2 if args.len() >= 2 => {
            let (a, b) = (rng.below(args.len()), rng.below(args.len()));
            args.swap(a, b);
        }
        _ => args.push(rng.pick(ODD_EXPRESSIONS).to_string()),
    }
    Some((inner, args.join(", ")))
}

/// The texts of the comma-separated arguments between tokens `open` and `close`.
fn top_level_arguments(text: &str, tokens: &[Token], open: usize, close: usize) -> Vec<String> {
    let mut args = Vec::new();
    let mut start = tokens[open].span.end as usize;
    let mut depth = 0usize;
    for token in &tokens[open + 1..close] {
        match token.kind {
            TokenKind::LBracket | TokenKind::LParen | TokenKind::LBrace => depth += 1,
            TokenKind::RBracket | TokenKind::RParen | TokenKind::RBrace => {
                depth = depth.saturating_sub(1)
            }
            TokenKind::Comma if depth == 0 => {
                args.push(text[start..token.span.start as usize].trim().to_string());
                start = token.span.end as usize;
            }
            _ => {}
        }
    }
    let last = text[start..tokens[close].span.start as usize].trim();
    if !last.is_empty() {
        args.push(last.to_string());
    }
    args
}

fn swap_operator(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    use TokenKind::*;
    let i = pick_token(rng, tokens, |i| {
        matches!(
            tokens[i].kind,
            Plus | Minus
                | Star
                | Slash
                | Percent
                | At
                | EqEq
                | Ne
                | Lt
                | Le
                | Gt
                | Ge
                | AndAnd
                | OrOr
        )
    })?;
    Some((bytes(&tokens[i]), rng.pick(OPERATORS).to_string()))
}

/// A name used as a value gets an index suffix.
fn index_value(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| {
        is_name(&tokens[i])
            && tokens
                .get(i + 1)
                .is_some_and(|next| !matches!(next.kind, TokenKind::LParen | TokenKind::Colon))
    })?;
    let end = tokens[i].span.end as usize;
    Some((end..end, rng.pick(INDICES).to_string()))
}

/// A name used as a value becomes a value of a surprising type.
fn odd_expression(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| is_value_name(tokens, i))?;
    Some((bytes(&tokens[i]), rng.pick(ODD_EXPRESSIONS).to_string()))
}

/// Whether token `i` is a name used as a value (not called, declared or typed).
fn is_value_name(tokens: &[Token], i: usize) -> bool {
    is_name(&tokens[i])
        && i > 0
        && !matches!(
            tokens[i - 1].kind,
            TokenKind::Let | TokenKind::Fn | TokenKind::Dot
        )
        && tokens
            .get(i + 1)
            .is_some_and(|next| !matches!(next.kind, TokenKind::LParen | TokenKind::Colon))
}

/// A name used as a value becomes the argument of a builtin (as a call or a
/// method), maybe with an odd second argument.
fn wrap_in_builtin(rng: &mut XorShift, tokens: &[Token], builtins: &[&str]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| is_value_name(tokens, i))?;
    let TokenKind::Ident(name) = &tokens[i].kind else {
        return None;
    };
    let builtin = rng.pick(builtins);
    let extra = match rng.below(3) {
        0 => String::new(),
        1 => rng.pick(NUMBERS).to_string(),
        _ => rng.pick(ODD_EXPRESSIONS).to_string(),
    };
    let wrapped = match (rng.below(2), extra.is_empty()) {
        (0, true) => format!("{builtin}({name})"),
        (0, false) => format!("{builtin}({name}, {extra})"),
        (_, _) => format!("{name}.{builtin}({extra})"),
    };
    Some((bytes(&tokens[i]), wrapped))
}

fn replace_string(rng: &mut XorShift, tokens: &[Token]) -> Option<Edit> {
    let i = pick_token(rng, tokens, |i| matches!(tokens[i].kind, TokenKind::Str(_)))?;
    Some((bytes(&tokens[i]), rng.pick(STRINGS).to_string()))
}
