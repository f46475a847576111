//! Number and string literals.

use super::{is_ident_continue, Lexer};
use crate::parse_error::ParseError;
use crate::token::TokenKind;

const ESCAPES_HINT: &str = r#"the escapes are \n \t \r \\ \" \0 and \u{1F600}"#;

impl Lexer<'_> {
    /// `123`, `1_000`, `1.5`, `1e-5`, `2.5E+3`. A `.` only starts a fraction when
    /// a digit follows, so `0..n` is `0`, `..`, `n`.
    pub(super) fn number(&mut self) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        self.bump_while(is_digit_or_underscore);
        let mut is_float = false;
        if self.peek() == Some('.') && self.peek_nth(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            self.bump_while(is_digit_or_underscore);
            is_float = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let digits_at = if matches!(self.peek_nth(1), Some('+' | '-')) {
                2
            } else {
                1
            };
            if self.peek_nth(digits_at).is_some_and(|c| c.is_ascii_digit()) {
                self.pos += digits_at;
                self.bump_while(is_digit_or_underscore);
                is_float = true;
            }
        }
        self.reject_suffix()?;
        let digits: String = self
            .slice(start, self.pos)
            .chars()
            .filter(|&c| c != '_')
            .collect();
        let span = self.span_from(start);
        if is_float {
            match digits.parse::<f64>() {
                Ok(value) if value.is_finite() => Ok(TokenKind::Float(value)),
                _ => Err(ParseError::new("float literal is out of range", span)),
            }
        } else {
            digits.parse::<i64>().map(TokenKind::Int).map_err(|_| {
                ParseError::new("integer literal is too large", span)
                    .with_hint(format!("integers are 64-bit; the largest is {}", i64::MAX))
            })
        }
    }

    /// `3x` or `1e` is a typo, not a number followed by a name.
    fn reject_suffix(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        self.bump_while(is_ident_continue);
        if start == self.pos {
            return Ok(());
        }
        let suffix = self.slice(start, self.pos);
        let error = ParseError::new(
            format!("invalid suffix `{suffix}` on number literal"),
            self.span_from(start),
        );
        Err(if suffix.starts_with(['e', 'E']) {
            error.with_hint("an exponent needs digits, as in `1e-3`")
        } else {
            error.with_hint("put an operator or a space between a number and a name")
        })
    }

    /// `"..."`, possibly over several lines, with escapes decoded.
    pub(super) fn string(&mut self) -> Result<TokenKind, ParseError> {
        let open = self.pos;
        self.bump();
        let mut value = String::new();
        loop {
            match self.bump() {
                None => return Err(self.unterminated_string(open)),
                Some('"') => return Ok(TokenKind::Str(value)),
                Some('\\') => value.push(self.escape(open)?),
                Some(c) => value.push(c),
            }
        }
    }

    fn unterminated_string(&self, open: usize) -> ParseError {
        ParseError::at_end("unterminated string", self.span(open, open + 1))
            .with_hint("add a closing `\"`")
    }

    /// The character an escape stands for; the `\` has just been read.
    fn escape(&mut self, open: usize) -> Result<char, ParseError> {
        let backslash = self.pos - 1;
        let Some(c) = self.bump() else {
            return Err(self.unterminated_string(open));
        };
        Ok(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' => '\\',
            '"' => '"',
            '0' => '\0',
            'u' => self.unicode_escape(open, backslash)?,
            other => {
                return Err(ParseError::new(
                    format!("unknown escape `\\{}`", other.escape_debug()),
                    self.span_from(backslash),
                )
                .with_hint(ESCAPES_HINT))
            }
        })
    }

    /// `\u{1F600}`: one to six hex digits naming a Unicode scalar value.
    fn unicode_escape(&mut self, open: usize, backslash: usize) -> Result<char, ParseError> {
        let invalid = |lexer: &Self, message: &str| {
            ParseError::new(message, lexer.span_from(backslash))
                .with_hint("write unicode escapes as `\\u{1F600}`")
        };
        match self.peek() {
            None => return Err(self.unterminated_string(open)),
            Some('{') => self.bump(),
            Some(_) => return Err(invalid(self, "expected `{` after `\\u`")),
        };
        let digits_start = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.unterminated_string(open)),
                Some('}') => break,
                Some(c) if c.is_ascii_hexdigit() => {
                    self.bump();
                }
                Some(_) => {
                    self.bump();
                    return Err(invalid(self, "invalid character in unicode escape"));
                }
            }
        }
        let digits = self.slice(digits_start, self.pos);
        self.bump();
        if digits.is_empty() || digits.len() > 6 {
            return Err(invalid(self, "a unicode escape has 1 to 6 hex digits"));
        }
        u32::from_str_radix(digits, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| {
                invalid(
                    self,
                    &format!("`\\u{{{digits}}}` is not a unicode scalar value"),
                )
            })
    }
}

fn is_digit_or_underscore(c: char) -> bool {
    c.is_ascii_digit() || c == '_'
}
