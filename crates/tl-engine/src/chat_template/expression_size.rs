//! Refuses template tags whose expressions are long enough to overflow the
//! stack before any render limit applies. minijinja parses a chain of unary
//! operators (`- - - x`, `not not x`) by recursion without its depth guard,
//! and every operator, attribute, filter, call or subscript in one
//! expression adds a level to the tree that its compiler (and our checks)
//! then walk by recursion: a few thousand of them in one tag, which a 1 MiB
//! template easily holds, abort the process. Real templates keep to a few
//! dozen a tag.

use minijinja::machinery::{tokenize, Token};
use minijinja::syntax::SyntaxConfig;

/// Operators and postfix steps one tag may hold.
pub(crate) const MAX_TAG_OPERATORS: usize = 256;

/// Whether a token can deepen an expression's tree.
fn deepens(token: &Token<'_>) -> bool {
    matches!(
        token,
        Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::FloorDiv
            | Token::Pow
            | Token::Mod
            | Token::Dot
            | Token::Tilde
            | Token::Pipe
            | Token::Eq
            | Token::Ne
            | Token::Gt
            | Token::Gte
            | Token::Lt
            | Token::Lte
            | Token::BracketOpen
            | Token::ParenOpen
            | Token::Ident("not" | "and" | "or" | "is" | "in" | "if" | "else")
    )
}

/// Errors naming the line of the first tag with more than
/// [`MAX_TAG_OPERATORS`] operators. Text that does not tokenize is left for
/// the parser to report.
pub(crate) fn check(source: &str, syntax: SyntaxConfig) -> Result<(), String> {
    let mut operators = 0;
    for token in tokenize(source, false, syntax) {
        let Ok((token, span)) = token else {
            return Ok(());
        };
        match token {
            Token::VariableStart | Token::BlockStart => operators = 0,
            token if deepens(&token) => {
                operators += 1;
                if operators > MAX_TAG_OPERATORS {
                    return Err(format!(
                        "line {}: a tag with more than {MAX_TAG_OPERATORS} operators",
                        span.start_line
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
