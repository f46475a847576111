//! The parser's view of the token stream: looking ahead, consuming, and building
//! errors that name the token found and put the caret where the fix belongs.

use crate::ast::Ident;
use crate::parse_error::ParseError;
use crate::span::{FileId, Span};
use crate::token::{Token, TokenKind};

/// Tokens longer than this are cut short when quoted in messages.
const MAX_QUOTED_CHARS: usize = 24;

/// The tokens of one input and the position of the next one to read.
pub(super) struct Parser<'a> {
    file: FileId,
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// Returned by lookahead past the end; the lexer always ends the tokens with
    /// `Eof`, so this only guards against indexing out of bounds.
    eof: Token,
    pub(super) nesting: super::nesting::Nesting,
}

impl<'a> Parser<'a> {
    /// Lexes `text`; lexer errors come back unchanged.
    pub(super) fn new(file: FileId, text: &'a str) -> Result<Self, ParseError> {
        let tokens = crate::lexer::lex(file, text)?;
        let end = Span::new(file, text.len(), text.len());
        Ok(Parser {
            file,
            text,
            tokens,
            pos: 0,
            eof: Token {
                kind: TokenKind::Eof,
                span: end,
            },
            nesting: Default::default(),
        })
    }

    /// The current token.
    pub(super) fn peek(&self) -> &Token {
        self.nth(0)
    }

    /// The token `n` places after the current one.
    pub(super) fn nth(&self, n: usize) -> &Token {
        self.tokens.get(self.pos + n).unwrap_or(&self.eof)
    }

    pub(super) fn peek_kind(&self) -> &TokenKind {
        &self.peek().kind
    }

    /// Whether the current token is of `kind` (literal values are ignored).
    pub(super) fn at(&self, kind: &TokenKind) -> bool {
        self.peek_kind().same_kind(kind)
    }

    /// Whether the current token is the identifier `word`.
    pub(super) fn at_word(&self, word: &str) -> bool {
        matches!(self.peek_kind(), TokenKind::Ident(name) if name == word)
    }

    /// Whether a line break separates the previous token from the current one.
    pub(super) fn newline_before_current(&self) -> bool {
        let start = self.prev_span().end as usize;
        let end = self.peek().span.start as usize;
        self.text
            .get(start..end)
            .is_some_and(|gap| gap.contains('\n'))
    }

    /// Consumes and returns the current token (the end of input stays current).
    pub(super) fn bump(&mut self) -> Token {
        let token = self.peek().clone();
        if token.kind != TokenKind::Eof {
            self.pos += 1;
        }
        token
    }

    /// Consumes the current token if it is of `kind`.
    pub(super) fn eat(&mut self, kind: &TokenKind) -> Option<Span> {
        self.at(kind).then(|| self.bump().span)
    }

    /// The kind of the last consumed token, if any.
    pub(super) fn prev_kind(&self) -> Option<&TokenKind> {
        let last = self.pos.checked_sub(1)?;
        self.tokens.get(last).map(|t| &t.kind)
    }

    /// The span of the last consumed token (the start of the input if none).
    pub(super) fn prev_span(&self) -> Span {
        match self.pos.checked_sub(1).and_then(|i| self.tokens.get(i)) {
            Some(token) => token.span,
            None => Span::new(self.file, 0, 0),
        }
    }

    /// Consumes a token of `kind` or fails with "expected `;` {context}, found …".
    pub(super) fn expect(&mut self, kind: TokenKind, context: &str) -> Result<Span, ParseError> {
        if let Some(span) = self.eat(&kind) {
            return Ok(span);
        }
        let wanted = kind.text().unwrap_or("?");
        Err(self.expected_token(&format!("`{wanted}`{context}")))
    }

    /// An identifier, or "expected {what}, found …".
    pub(super) fn ident(&mut self, what: &str) -> Result<Ident, ParseError> {
        if let TokenKind::Ident(name) = self.peek_kind() {
            let name = name.clone();
            let span = self.bump().span;
            return Ok(Ident { name, span });
        }
        let error = self.expected(what);
        Err(match self.peek_kind().text() {
            Some(keyword) if keyword.chars().all(char::is_alphabetic) => {
                error.with_hint(format!("`{keyword}` is a keyword and cannot be a name"))
            }
            _ => error,
        })
    }

    /// "expected {what}, found {current token}", pointing at the current token.
    pub(super) fn expected(&self, what: &str) -> ParseError {
        let found = self.peek();
        let message = format!("expected {what}, found {}", self.describe(found));
        if found.kind == TokenKind::Eof {
            ParseError::at_end(message, self.after_prev())
        } else {
            ParseError::new(message, found.span)
        }
    }

    /// Like [`Self::expected`] for a missing token. When the next token is on a
    /// later line, the error points right after the previous token instead,
    /// since that is where the missing `;` or `)` has to be typed.
    pub(super) fn expected_token(&self, what: &str) -> ParseError {
        let mut error = self.expected(what);
        if self.newline_before_current() {
            error.diagnostic.span = Some(self.after_prev());
        }
        error
    }

    /// An empty span just after the previous token.
    pub(super) fn after_prev(&self) -> Span {
        let end = self.prev_span().end as usize;
        Span::new(self.file, end, end)
    }

    /// "unclosed `(`" at the opening delimiter, when the input ended inside it.
    pub(super) fn unclosed(&self, open: Span, close: &TokenKind) -> ParseError {
        let open_text = self.snippet(open);
        ParseError::at_end(format!("unclosed `{open_text}`"), open).with_hint(format!(
            "the input ended before the matching `{}`",
            close.text().unwrap_or("?")
        ))
    }

    /// A token as messages quote it: `` `let` ``, or "end of file".
    pub(super) fn describe(&self, token: &Token) -> String {
        let text = self.snippet(token.span);
        match token.kind {
            TokenKind::Eof => "end of file".to_string(),
            TokenKind::Str(_) if text.contains('\n') || text.chars().count() > MAX_QUOTED_CHARS => {
                "a string literal".to_string()
            }
            _ if text.chars().count() > MAX_QUOTED_CHARS => {
                let start: String = text.chars().take(MAX_QUOTED_CHARS).collect();
                format!("`{start}…`")
            }
            _ => format!("`{text}`"),
        }
    }

    /// The source text of a span.
    pub(super) fn snippet(&self, span: Span) -> &'a str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or_default()
    }
}
