//! Operands: literals, names, calls, struct literals, parentheses, lists, `if`
//! and blocks.

use super::cursor::Parser;
use super::expressions::StructLiterals;
use crate::ast::{Atom, Expr, ExprKind, Ident, Resolved};
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

impl Parser<'_> {
    /// primary := literal | call | struct_literal | IDENT | "(" expr ")" | list
    ///          | block_like
    pub(super) fn primary(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        let token = self.peek().clone();
        let kind = match token.kind {
            TokenKind::Int(value) => ExprKind::Int(value),
            TokenKind::Float(value) => ExprKind::Float(value),
            TokenKind::Str(value) => ExprKind::Str(value),
            TokenKind::True => ExprKind::Bool(true),
            TokenKind::False => ExprKind::Bool(false),
            TokenKind::None => ExprKind::None,
            TokenKind::Ident(_) => return self.name_expr(structs),
            TokenKind::LParen => return self.paren_expr(),
            TokenKind::LBracket => return self.list_expr(),
            TokenKind::If => return self.if_expr(),
            TokenKind::LBrace => return self.block_expr(),
            _ => return Err(self.expected_expression()),
        };
        self.bump();
        Ok(Expr {
            kind,
            span: token.span,
        })
    }

    /// A name, a call `name(args)` or a struct literal `Name { field: value }`.
    fn name_expr(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        let name = self.ident("a name")?;
        if self.at(&TokenKind::LParen) {
            let (args, close) = self.call_args()?;
            if let Some(question) = self.eat(&TokenKind::Question) {
                let atom = Atom {
                    span: name.span.to(close),
                    relation: name,
                    args: super::logic::query_args(args)?,
                };
                return Ok(Expr {
                    span: atom.span.to(question),
                    kind: ExprKind::Query(atom),
                });
            }
            return Ok(Expr {
                span: name.span.to(close),
                kind: ExprKind::Call {
                    callee: name,
                    args,
                    function: Resolved::Unresolved,
                },
            });
        }
        if self.at(&TokenKind::LBrace) {
            let after_brace = &self.nth(1).kind;
            let after_name = &self.nth(2).kind;
            let has_fields =
                matches!(after_brace, TokenKind::Ident(_)) && *after_name == TokenKind::Colon;
            // The end of input counts as a possible continuation, so that a
            // literal cut short (`P {`, `P { x`) asks the REPL for more.
            let may_be_literal = has_fields
                || matches!(after_brace, TokenKind::RBrace | TokenKind::Eof)
                || matches!(after_brace, TokenKind::Ident(_)) && *after_name == TokenKind::Eof;
            match structs {
                StructLiterals::Allowed if may_be_literal => return self.struct_literal(name),
                // `if x {}` is a condition and an empty body, but `if x { a: 1 }`
                // can only have been meant as a struct literal.
                StructLiterals::Forbidden if has_fields => {
                    return Err(self.struct_literal_in_head(name.span))
                }
                _ => {}
            }
        }
        Ok(Expr {
            span: name.span,
            kind: ExprKind::Var(name.name, Resolved::Unresolved),
        })
    }

    fn struct_literal_in_head(&self, name: Span) -> ParseError {
        let span = name.to(self.peek().span);
        ParseError::new("a struct literal cannot appear here", span).with_hint(
            "in the head of `if`, `while` and `for`, wrap it in parentheses: `(Name { ... })`",
        )
    }

    /// struct_literal := IDENT "{" (IDENT ":" expr),* ","? "}"
    fn struct_literal(&mut self, name: Ident) -> Result<Expr, ParseError> {
        self.enter()?;
        let open = self.bump().span;
        let (fields, close) = self.comma_list(open, TokenKind::RBrace, "field", |p| {
            let field = p.ident("a field name")?;
            p.expect(TokenKind::Colon, " after the field name")?;
            Ok((field, p.expr()?))
        })?;
        self.leave();
        Ok(Expr {
            span: name.span.to(close),
            kind: ExprKind::StructLit { name, fields },
        })
    }

    /// "(" expr ")": no node of its own, but the span includes the parentheses.
    fn paren_expr(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let open = self.bump().span;
        if self.at(&TokenKind::RParen) {
            return Err(self
                .expected("an expression")
                .with_hint("there is no empty value `()`; use `none`"));
        }
        let inner = self.expr()?;
        let close = match self.eat(&TokenKind::RParen) {
            Some(close) => close,
            None if self.at(&TokenKind::Eof) => return Err(self.unclosed(open, &TokenKind::RParen)),
            None if self.at(&TokenKind::Comma) => {
                return Err(self
                    .expected_token("`)`")
                    .with_hint("there are no tuples; use a list `[a, b]`"))
            }
            None => return Err(self.expected_token("`)`")),
        };
        self.leave();
        Ok(Expr {
            span: open.to(close),
            kind: inner.kind,
        })
    }

    /// list := "[" (expr ("," expr)* ","?)? "]"
    fn list_expr(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let open = self.bump().span;
        let (elements, close) =
            self.comma_list(open, TokenKind::RBracket, "element", |p| p.expr())?;
        self.leave();
        Ok(Expr {
            span: open.to(close),
            kind: ExprKind::List(elements),
        })
    }

    /// if_expr := "if" expr_no_struct block ("else" (if_expr | block))?
    pub(super) fn if_expr(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let if_span = self.bump().span;
        let cond = self.condition("if")?;
        let then_branch = self.block(" after the `if` condition")?;
        let else_branch = if self.eat(&TokenKind::Else).is_some() {
            Some(Box::new(match self.peek_kind() {
                TokenKind::If => self.if_expr()?,
                TokenKind::LBrace => self.block_expr()?,
                _ => return Err(self.expected("`{` or `if` after `else`")),
            }))
        } else {
            None
        };
        self.leave();
        let end = else_branch.as_ref().map_or(then_branch.span, |e| e.span);
        Ok(Expr {
            span: if_span.to(end),
            kind: ExprKind::If {
                cond: Box::new(cond),
                then_branch,
                else_branch,
            },
        })
    }

    /// The condition of `if` or `while`; a `=` after it was meant as `==`.
    pub(super) fn condition(&mut self, keyword: &str) -> Result<Expr, ParseError> {
        let cond = self.expr_no_struct()?;
        if self.at(&TokenKind::Eq) {
            return Err(self
                .expected(&format!("`{{` after the `{keyword}` condition"))
                .with_hint("did you mean `==`?"));
        }
        Ok(cond)
    }

    /// A block used as an expression.
    pub(super) fn block_expr(&mut self) -> Result<Expr, ParseError> {
        let block = self.block("")?;
        Ok(Expr {
            span: block.span,
            kind: ExprKind::Block(block),
        })
    }

    /// "expected an expression", with a hint for the usual slips.
    fn expected_expression(&self) -> ParseError {
        let error = self.expected("an expression");
        match self.peek_kind() {
            TokenKind::Dot if matches!(self.nth(1).kind, TokenKind::Int(_)) => {
                error.with_hint("write a leading zero, as in `0.5`")
            }
            TokenKind::Fn | TokenKind::Struct | TokenKind::Impl | TokenKind::Import => {
                error.with_hint("items cannot appear inside a block; is a `}` missing before this?")
            }
            TokenKind::Let => error.with_hint("`let` starts a statement; it has no value"),
            _ => error,
        }
    }
}
