//! Operators and delimiters, including the hints for characters that look like
//! operators from other languages (`&`, `|`, `'`).

use super::Lexer;
use crate::parse_error::ParseError;
use crate::token::TokenKind;

impl Lexer<'_> {
    /// The operator or delimiter starting with `c` (the current character).
    pub(super) fn punctuation(&mut self, c: char) -> Result<TokenKind, ParseError> {
        use TokenKind::*;
        let start = self.pos;
        self.bump();
        let kind = match c {
            '(' => LParen,
            ')' => RParen,
            '[' => LBracket,
            ']' => RBracket,
            '{' => LBrace,
            '}' => RBrace,
            ',' => Comma,
            ';' => Semi,
            ':' => Colon,
            '%' => Percent,
            '@' => At,
            '?' => Question,
            '.' => self.either('.', DotDot, Dot),
            '=' => self.either('=', EqEq, Eq),
            '!' => self.either('=', Ne, Bang),
            '<' => self.either('=', Le, Lt),
            '>' => self.either('=', Ge, Gt),
            '+' => self.either('=', PlusEq, Plus),
            '*' => self.either('=', StarEq, Star),
            '/' => self.either('=', SlashEq, Slash),
            '-' if self.peek() == Some('>') => {
                self.bump();
                Arrow
            }
            '-' => self.either('=', MinusEq, Minus),
            '&' if self.peek() == Some('&') => {
                self.bump();
                AndAnd
            }
            '|' if self.peek() == Some('|') => {
                self.bump();
                OrOr
            }
            _ => return Err(self.unexpected_character(c, start)),
        };
        Ok(kind)
    }

    /// `two` if the next character is `next` (consuming it), else `one`.
    fn either(&mut self, next: char, two: TokenKind, one: TokenKind) -> TokenKind {
        if self.peek() == Some(next) {
            self.bump();
            two
        } else {
            one
        }
    }

    fn unexpected_character(&self, c: char, start: usize) -> ParseError {
        // Quotes and backslashes read better unescaped; invisible characters
        // (zero-width spaces, controls) are shown as `\u{200b}`.
        let shown = match c {
            '\'' | '"' | '\\' => c.to_string(),
            _ => c.escape_debug().to_string(),
        };
        let error = ParseError::new(
            format!("unexpected character `{shown}`"),
            self.span_from(start),
        );
        match c {
            '&' => error.with_hint("use `&&` for logical and"),
            '|' => error.with_hint("use `||` for logical or"),
            '\'' => error.with_hint("strings are written in double quotes: \"text\""),
            '^' => error.with_hint("there is no `^` operator; use `pow(x, y)`"),
            _ => error,
        }
    }
}
