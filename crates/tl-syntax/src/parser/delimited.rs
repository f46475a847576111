//! Comma-separated lists between delimiters: arguments, parameters, fields,
//! list elements, indices and dimensions all share one loop and one set of
//! messages.

use super::cursor::Parser;
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

impl Parser<'_> {
    /// `item ("," item)* ","?` up to and including `close`; the opening delimiter
    /// (at `open`) has been consumed. `what` names one item in messages
    /// ("argument"). Returns the items and the span of `close`.
    pub(super) fn comma_list<T>(
        &mut self,
        open: Span,
        close: TokenKind,
        what: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, ParseError>,
    ) -> Result<(Vec<T>, Span), ParseError> {
        let mut items = Vec::new();
        loop {
            if let Some(close_span) = self.eat(&close) {
                return Ok((items, close_span));
            }
            if self.at(&TokenKind::Eof) {
                return Err(self.unclosed(open, &close));
            }
            items.push(item(self)?);
            if self.eat(&TokenKind::Comma).is_some() || self.at(&close) {
                continue;
            }
            if self.at(&TokenKind::Eof) {
                return Err(self.unclosed(open, &close));
            }
            let close_text = close.text().unwrap_or("?");
            return Err(self.expected_token(&format!("`,` or `{close_text}` after the {what}")));
        }
    }
}
