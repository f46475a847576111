//! The lexer: source text to [`Token`]s, skipping whitespace and comments.
//!
//! It works on the whole input at once (sources are small) and stops at the first
//! error, which points at the offending characters. Identifiers are approximated
//! with the standard library's Unicode tables: they start with `_` or an
//! alphabetic character and continue with `_` or alphanumeric characters (the
//! crate has no dependencies, so there is no exact `XID_Start`/`XID_Continue`).

mod literals;
mod punctuation;
#[cfg(test)]
mod tests;

use crate::parse_error::ParseError;
use crate::span::{FileId, Span};
use crate::token::{Token, TokenKind};

/// Splits `text` into tokens. The last token is always [`TokenKind::Eof`], an
/// empty span at the end of the text.
pub fn lex(file: FileId, text: &str) -> Result<Vec<Token>, ParseError> {
    Lexer { file, text, pos: 0 }.tokens()
}

/// The input and how far it has been read (a byte offset, always on a char
/// boundary).
struct Lexer<'a> {
    file: FileId,
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn tokens(mut self) -> Result<Vec<Token>, ParseError> {
        let mut tokens = Vec::new();
        loop {
            self.skip_trivia()?;
            let start = self.pos;
            let Some(c) = self.peek() else {
                tokens.push(Token {
                    kind: TokenKind::Eof,
                    span: self.span_from(start),
                });
                return Ok(tokens);
            };
            let kind = if c.is_ascii_digit() {
                self.number()?
            } else if is_ident_start(c) {
                self.word()
            } else if c == '"' {
                self.string()?
            } else {
                self.punctuation(c)?
            };
            tokens.push(Token {
                kind,
                span: self.span_from(start),
            });
        }
    }

    /// The unread text.
    fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or_default()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// The character `n` characters after the current one.
    fn peek_nth(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// Consumes characters while `keep` holds.
    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn span_from(&self, start: usize) -> Span {
        self.span(start, self.pos)
    }

    fn slice(&self, start: usize, end: usize) -> &'a str {
        self.text.get(start..end).unwrap_or_default()
    }

    /// Skips whitespace, `// line` comments and `/* block */` comments.
    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            let rest = self.rest();
            if rest.starts_with("//") {
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else if rest.starts_with("/*") {
                self.block_comment()?;
            } else if self.peek().is_some_and(char::is_whitespace) {
                self.bump();
            } else {
                return Ok(());
            }
        }
    }

    /// Block comments nest, so commenting out code that has comments works.
    fn block_comment(&mut self) -> Result<(), ParseError> {
        let open = self.pos;
        self.pos += 2;
        let mut depth = 1usize;
        while depth > 0 {
            let rest = self.rest();
            if rest.starts_with("*/") {
                depth -= 1;
                self.pos += 2;
            } else if rest.starts_with("/*") {
                depth += 1;
                self.pos += 2;
            } else if self.bump().is_none() {
                return Err(ParseError::at_end(
                    "unterminated block comment",
                    self.span(open, open + 2),
                )
                .with_hint("close it with `*/`"));
            }
        }
        Ok(())
    }

    /// An identifier or a keyword.
    fn word(&mut self) -> TokenKind {
        let start = self.pos;
        self.bump_while(is_ident_continue);
        let word = self.slice(start, self.pos);
        TokenKind::keyword(word).unwrap_or_else(|| TokenKind::Ident(word.to_string()))
    }
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}
