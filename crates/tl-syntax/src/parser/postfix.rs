//! Postfix operators: `.field`, `.method(args)` and `[indices]`, plus the
//! argument list shared with calls.

use super::cursor::Parser;
use super::expressions::StructLiterals;
use crate::ast::{Expr, ExprKind, IndexArg};
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

impl Parser<'_> {
    /// postfix := primary ("." IDENT call_args? | "[" index_args "]")*
    pub(super) fn postfix(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        let chain = self.chain_start();
        let mut expr = self.primary(structs)?;
        loop {
            expr = match self.peek_kind() {
                TokenKind::Dot => {
                    self.chain_link()?;
                    self.member(expr)?
                }
                TokenKind::LBracket => {
                    self.chain_link()?;
                    self.index(expr)?
                }
                // `W[i, j] (X[j] + b[j])` and `(a[i] - b[i]) (a[i] - b[i])` are
                // juxtaposed products; `fs[0](x)`, without the space, was
                // meant as a call.
                TokenKind::LParen if self.juxtaposed_paren() => break,
                TokenKind::LParen => return Err(self.call_of_non_name(&expr)),
                _ => break,
            };
        }
        self.chain_end(chain);
        Ok(expr)
    }

    /// `.name` or `.name(args)` after `base`.
    fn member(&mut self, base: Expr) -> Result<Expr, ParseError> {
        self.bump();
        if matches!(self.peek_kind(), TokenKind::Int(_) | TokenKind::Float(_)) {
            return Err(self
                .expected("a field or method name after `.`")
                .with_hint("there are no tuple fields; index with `x[0]`"));
        }
        let name = self.ident("a field or method name after `.`")?;
        if !self.at(&TokenKind::LParen) {
            return Ok(Expr {
                span: base.span.to(name.span),
                kind: ExprKind::Field {
                    base: Box::new(base),
                    field: name,
                },
            });
        }
        let (args, close) = self.call_args()?;
        Ok(Expr {
            span: base.span.to(close),
            kind: ExprKind::MethodCall {
                receiver: Box::new(base),
                method: name,
                args,
            },
        })
    }

    /// `[index_args]` after `base`.
    fn index(&mut self, base: Expr) -> Result<Expr, ParseError> {
        let open = self.bump().span;
        if self.at(&TokenKind::RBracket) {
            return Err(self
                .expected("an index")
                .with_hint("write `a[i]`, `a[i..j]` or `a[:, j]`"));
        }
        let (indices, close) =
            match self.comma_list(open, TokenKind::RBracket, "index", |p| p.index_arg()) {
                Err(error) if self.at(&TokenKind::Colon) => {
                    return Err(error.with_hint("slices are ranges: write `a[1..3]`, not `a[1:3]`"))
                }
                result => result?,
            };
        Ok(Expr {
            span: base.span.to(close),
            kind: ExprKind::Index {
                base: Box::new(base),
                indices,
            },
        })
    }

    /// index_arg := ":" | expr
    fn index_arg(&mut self) -> Result<IndexArg, ParseError> {
        if let Some(colon) = self.eat(&TokenKind::Colon) {
            return Ok(IndexArg::Full(colon));
        }
        Ok(IndexArg::Expr(self.expr()?))
    }

    /// call_args := "(" (expr ("," expr)* ","?)? ")"; returns the arguments and
    /// the span of `)`.
    pub(super) fn call_args(&mut self) -> Result<(Vec<Expr>, Span), ParseError> {
        let open = self.expect(TokenKind::LParen, "")?;
        self.enter()?;
        let args = self.comma_list(open, TokenKind::RParen, "argument", |p| p.expr())?;
        self.leave();
        Ok(args)
    }

    /// `(f)(x)`, `a[0](x)`: only a name can be called.
    fn call_of_non_name(&self, callee: &Expr) -> ParseError {
        let span = callee.span.to(self.peek().span);
        let error = ParseError::new("only a named function can be called", span);
        match &callee.kind {
            ExprKind::Field { field, .. } => error.with_hint(format!(
                "to call the method `{0}`, write `x.{0}(...)` directly",
                field.name
            )),
            _ => {
                error.with_hint("call a function by its name, as in `f(x)`, or a method as `x.f()`")
            }
        }
    }
}
