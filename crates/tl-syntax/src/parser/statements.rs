//! Blocks and statements. A block's last expression without `;` is its value;
//! an `if` or a block at the start of a statement needs no `;`, as in Rust.

use super::cursor::Parser;
use crate::ast::{BinaryOp, Block, Expr, ExprKind, Locals, Resolved, Stmt, StmtKind};
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

/// What closes a run of statements: a block's `}`, or the end of REPL input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Brace,
    Input,
}

/// One parsed statement, or the value expression that ends the run.
pub(super) enum Parsed {
    Stmt(Stmt),
    Tail(Expr),
}

impl Parser<'_> {
    /// block := "{" stmt* expr? "}"; `context` completes "expected `{`…".
    pub(super) fn block(&mut self, context: &str) -> Result<Block, ParseError> {
        self.enter()?;
        let open = self.expect(TokenKind::LBrace, context)?;
        let mut stmts = Vec::new();
        let mut tail = None;
        let close = loop {
            if let Some(close) = self.eat(&TokenKind::RBrace) {
                break close;
            }
            if self.eat(&TokenKind::Semi).is_some() {
                continue;
            }
            if self.at(&TokenKind::Eof) {
                return Err(self.unclosed(open, &TokenKind::RBrace));
            }
            match self.stmt(End::Brace)? {
                Parsed::Stmt(stmt) => stmts.push(stmt),
                // `stmt` only returns a tail when `}` follows.
                Parsed::Tail(expr) => tail = Some(Box::new(expr)),
            }
        };
        self.leave();
        Ok(Block {
            stmts,
            tail,
            span: open.to(close),
            locals: Locals::default(),
        })
    }

    /// Whether the current token closes the statements. The end of input counts
    /// inside a block too, so the block reports "unclosed `{`" at its opening
    /// rather than a missing `;` at the end.
    pub(super) fn at_close(&self, end: End) -> bool {
        match end {
            End::Brace => self.at(&TokenKind::RBrace) || self.at(&TokenKind::Eof),
            End::Input => self.at(&TokenKind::Eof),
        }
    }

    /// stmt: see the grammar in `mod.rs`. Every arm is a tail call: this sits on
    /// the recursion path of nested blocks, and a small frame here keeps deep
    /// nesting cheap in unoptimized builds.
    pub(super) fn stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        match self.peek_kind() {
            TokenKind::Let => self.let_stmt(end),
            TokenKind::While => self.while_stmt(),
            TokenKind::For => self.for_stmt(),
            TokenKind::Loop => self.loop_stmt(),
            TokenKind::Break | TokenKind::Continue => self.jump_stmt(end),
            TokenKind::Return => self.return_stmt(end),
            TokenKind::If | TokenKind::LBrace => self.block_like_stmt(end),
            _ => self.expr_stmt(end),
        }
    }

    /// The statement from `start` to the last token consumed.
    fn finished(&self, start: Span, kind: StmtKind) -> Result<Parsed, ParseError> {
        Ok(Parsed::Stmt(Stmt {
            kind,
            span: start.to(self.prev_span()),
        }))
    }

    /// end := ";", optional right before a block's `}`. REPL input needs it, so
    /// that `let x = f(a)` followed by Enter waits for more (`at_eof`) rather
    /// than running a statement the user may not have finished.
    fn stmt_end(&mut self, end: End) -> Result<(), ParseError> {
        if self.eat(&TokenKind::Semi).is_some() || (end == End::Brace && self.at_close(end)) {
            return Ok(());
        }
        Err(self.expected_token("`;` after this statement"))
    }

    /// "let" IDENT (":" type)? "=" expr end
    fn let_stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a variable name after `let`")?;
        let ty = match self.eat(&TokenKind::Colon) {
            Some(_) => Some(self.type_expr()?),
            None => None,
        };
        if self.eat(&TokenKind::Eq).is_none() {
            return Err(self.missing_let_value(&name.name));
        }
        let value = self.expr()?;
        self.stmt_end(end)?;
        self.finished(
            start,
            StmtKind::Let {
                name,
                ty,
                value,
                slot: Resolved::Unresolved,
            },
        )
    }

    fn missing_let_value(&self, name: &str) -> ParseError {
        let error = self.expected_token(&format!("`=` after `let {name}`"));
        match self.peek_kind() {
            TokenKind::Semi => error.with_hint("a variable needs a value: `let x = ...;`"),
            TokenKind::EqEq => error.with_hint("use `=` to give a variable its value"),
            _ => error,
        }
    }

    /// "while" expr_no_struct block
    fn while_stmt(&mut self) -> Result<Parsed, ParseError> {
        let start = self.bump().span;
        let cond = self.condition("while")?;
        let body = self.block(" after the `while` condition")?;
        self.finished(start, StmtKind::While { cond, body })
    }

    /// "for" IDENT "in" expr_no_struct block
    fn for_stmt(&mut self) -> Result<Parsed, ParseError> {
        let start = self.bump().span;
        let var = self.ident("a loop variable after `for`")?;
        self.expect(TokenKind::In, " after the loop variable")?;
        let iterable = self.expr_no_struct()?;
        let body = self.block(" after the `for` iterable")?;
        let kind = StmtKind::For {
            var,
            iterable,
            body,
            slot: Resolved::Unresolved,
        };
        self.finished(start, kind)
    }

    /// "loop" block
    fn loop_stmt(&mut self) -> Result<Parsed, ParseError> {
        let start = self.bump().span;
        let body = self.block(" after `loop`")?;
        self.finished(start, StmtKind::Loop(body))
    }

    /// "break" end | "continue" end
    fn jump_stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        let token = self.bump();
        self.stmt_end(end)?;
        let kind = match token.kind {
            TokenKind::Break => StmtKind::Break,
            _ => StmtKind::Continue,
        };
        self.finished(token.span, kind)
    }

    /// "return" expr? end
    fn return_stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        let start = self.bump().span;
        let value = if self.at(&TokenKind::Semi) || self.at_close(end) {
            None
        } else {
            Some(self.expr()?)
        };
        self.stmt_end(end)?;
        self.finished(start, StmtKind::Return(value))
    }

    /// An `if` or a block in statement position: it ends the statement, so
    /// `if c { a } else { b } - 1` is two statements, as in Rust.
    fn block_like_stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        let expr = if self.at(&TokenKind::If) {
            self.if_expr()?
        } else {
            self.block_expr()?
        };
        if self.at(&TokenKind::Semi) {
            let start = expr.span;
            self.bump();
            return self.finished(start, StmtKind::Expr(expr));
        }
        if self.at_close(end) {
            return Ok(Parsed::Tail(expr));
        }
        if continues_expression(self.peek_kind()) {
            return Err(self.operator_after_block_like());
        }
        self.finished(expr.span, StmtKind::Expr(expr))
    }

    fn operator_after_block_like(&self) -> ParseError {
        let found = self.describe(self.peek());
        ParseError::new(
            format!("expected a statement, found {found}"),
            self.peek().span,
        )
        .with_hint(
            "an `if` or a block at the start of a statement ends it; \
             wrap it in parentheses to use its value",
        )
    }

    /// expr assign_op expr end | expr ";" | expr (the tail)
    fn expr_stmt(&mut self, end: End) -> Result<Parsed, ParseError> {
        let expr = self.expr()?;
        if let Some(op) = assign_op(self.peek_kind()) {
            return self.assign_stmt(expr, op, end);
        }
        if self.at(&TokenKind::Semi) {
            let start = expr.span;
            self.bump();
            return self.finished(start, StmtKind::Expr(expr));
        }
        if self.at_close(end) {
            return Ok(Parsed::Tail(expr));
        }
        Err(self.expected_token("`;` after this statement"))
    }

    /// The rest of `target op= value end`; the operator is current.
    fn assign_stmt(
        &mut self,
        target: Expr,
        op: Option<BinaryOp>,
        end: End,
    ) -> Result<Parsed, ParseError> {
        if !matches!(
            target.kind,
            ExprKind::Var(..) | ExprKind::Field { .. } | ExprKind::Index { .. }
        ) {
            return Err(
                ParseError::new("cannot assign to this expression", target.span).with_hint(
                    "only variables, fields (`a.b`) and elements (`a[i]`) can be assigned",
                ),
            );
        }
        self.bump();
        let value = self.expr()?;
        self.stmt_end(end)?;
        let start = target.span;
        self.finished(
            start,
            StmtKind::Assign {
                target,
                op,
                value,
                equation: None,
            },
        )
    }
}

/// The operator of `=` (`None`) and the compound assignments.
fn assign_op(kind: &TokenKind) -> Option<Option<BinaryOp>> {
    Some(match kind {
        TokenKind::Eq => None,
        TokenKind::PlusEq => Some(BinaryOp::Add),
        TokenKind::MinusEq => Some(BinaryOp::Sub),
        TokenKind::StarEq => Some(BinaryOp::Mul),
        TokenKind::SlashEq => Some(BinaryOp::Div),
        _ => return None,
    })
}

/// Tokens that can only continue an expression, never start a statement.
fn continues_expression(kind: &TokenKind) -> bool {
    use TokenKind as T;
    matches!(
        kind,
        T::Dot
            | T::Plus
            | T::Star
            | T::Slash
            | T::Percent
            | T::At
            | T::EqEq
            | T::Ne
            | T::Lt
            | T::Le
            | T::Gt
            | T::Ge
            | T::AndAnd
            | T::OrOr
            | T::Eq
            | T::PlusEq
            | T::MinusEq
            | T::StarEq
            | T::SlashEq
    )
}
