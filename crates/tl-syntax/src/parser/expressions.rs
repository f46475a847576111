//! Operator expressions: ranges, then binary operators by precedence climbing
//! (the Pratt loop), then prefix operators. Postfix operators and operands are in
//! `postfix.rs` and `primary.rs`.

use super::cursor::Parser;
use crate::ast::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

/// Whether a struct literal may start here: not in the head of `if`, `while` and
/// `for`, where `name {` opens the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StructLiterals {
    Allowed,
    Forbidden,
}

/// Binding levels of the binary operators, loosest first.
const OR: u8 = 1;
const AND: u8 = 2;
const COMPARISON: u8 = 3;
const ADDITIVE: u8 = 4;
const MULTIPLICATIVE: u8 = 5;

/// The binary operator a token is, with its level.
fn binary_op(kind: &TokenKind) -> Option<(BinaryOp, u8)> {
    use TokenKind as T;
    Some(match kind {
        T::OrOr => (BinaryOp::Or, OR),
        T::AndAnd => (BinaryOp::And, AND),
        T::EqEq => (BinaryOp::Eq, COMPARISON),
        T::Ne => (BinaryOp::Ne, COMPARISON),
        T::Lt => (BinaryOp::Lt, COMPARISON),
        T::Le => (BinaryOp::Le, COMPARISON),
        T::Gt => (BinaryOp::Gt, COMPARISON),
        T::Ge => (BinaryOp::Ge, COMPARISON),
        T::Plus => (BinaryOp::Add, ADDITIVE),
        T::Minus => (BinaryOp::Sub, ADDITIVE),
        T::Star => (BinaryOp::Mul, MULTIPLICATIVE),
        T::Slash => (BinaryOp::Div, MULTIPLICATIVE),
        T::Percent => (BinaryOp::Rem, MULTIPLICATIVE),
        T::At => (BinaryOp::MatMul, MULTIPLICATIVE),
        _ => return None,
    })
}

impl Parser<'_> {
    /// expr := range
    pub(super) fn expr(&mut self) -> Result<Expr, ParseError> {
        self.expr_in(StructLiterals::Allowed)
    }

    /// An expression in the head of `if`, `while` or `for`.
    pub(super) fn expr_no_struct(&mut self) -> Result<Expr, ParseError> {
        self.expr_in(StructLiterals::Forbidden)
    }

    fn expr_in(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        self.enter()?;
        let expr = self.range(structs)?;
        self.leave();
        Ok(expr)
    }

    /// range := ".." or_expr? | or_expr (".." or_expr?)?
    fn range(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        let chain = self.chain_start();
        let start = if self.at(&TokenKind::DotDot) {
            None
        } else {
            let start = self.or_expr(structs)?;
            if !self.at(&TokenKind::DotDot) {
                self.chain_end(chain);
                return Ok(start);
            }
            Some(start)
        };
        self.chain_link()?;
        let dots = self.bump().span;
        let end = if self.starts_operand(structs) {
            Some(self.or_expr(structs)?)
        } else {
            None
        };
        self.chain_end(chain);
        let first = start.as_ref().map_or(dots, |start| start.span);
        let span = first.to(end.as_ref().map_or(dots, |end| end.span));
        if self.at(&TokenKind::DotDot) {
            return Err(self.chained_range(span));
        }
        Ok(Expr {
            kind: ExprKind::Range {
                start: start.map(Box::new),
                end: end.map(Box::new),
            },
            span,
        })
    }

    /// Whether the current token can begin the operand after `..` (so `a..` ends
    /// before `]`, `)`, `;` or a loop body's `{`).
    fn starts_operand(&self, structs: StructLiterals) -> bool {
        use TokenKind as T;
        match self.peek_kind() {
            T::Int(_) | T::Float(_) | T::Str(_) | T::Ident(_) => true,
            T::True | T::False | T::None | T::If => true,
            T::LParen | T::LBracket | T::Minus | T::Bang => true,
            T::LBrace => structs == StructLiterals::Allowed,
            _ => false,
        }
    }

    /// The binary operator at the current token, or a juxtaposition: an
    /// indexed operand or a call followed, on the same line, by a name or `(`
    /// (`W[i, j] X[j]`, `R(x, y) E[x, i]`) multiplies at `*`'s level. In
    /// valid code without juxtaposition, `]` and `)` are never followed by a
    /// name; requiring the same line keeps "expected `;`" for a statement
    /// whose `;` was forgotten before the next line.
    /// The flag says whether the operator is a token (to be consumed).
    fn binary_op_here(&self) -> Option<(BinaryOp, u8, bool)> {
        if let Some((op, level)) = binary_op(self.peek_kind()) {
            return Some((op, level, true));
        }
        let after_operand = matches!(
            self.prev_kind(),
            Some(TokenKind::RBracket | TokenKind::RParen)
        );
        let starts_factor = match self.peek_kind() {
            TokenKind::Ident(_) => true,
            TokenKind::LParen => self.juxtaposed_paren(),
            _ => false,
        };
        (after_operand && starts_factor && !self.newline_before_current()).then_some((
            BinaryOp::Mul,
            MULTIPLICATIVE,
            false,
        ))
    }

    /// Whether the `(` here opens the second factor of a juxtaposed
    /// product: it follows an operand ending in `]` or `)` after a space
    /// (`W[i, j] (x[j] + b[j])`, `(p[n] - y[n]) (p[n] - y[n])`), where
    /// without the space it would be a call of that operand.
    pub(super) fn juxtaposed_paren(&self) -> bool {
        matches!(
            self.prev_kind(),
            Some(TokenKind::RBracket | TokenKind::RParen)
        ) && self.prev_span().end != self.peek().span.start
    }

    /// or_expr: all binary operators, `||` binding loosest.
    fn or_expr(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        self.binary(OR, structs)
    }

    /// The Pratt loop: operands joined by operators of level `min_level` or
    /// tighter; a tighter operator to the right is parsed by the recursive call.
    fn binary(&mut self, min_level: u8, structs: StructLiterals) -> Result<Expr, ParseError> {
        let chain = self.chain_start();
        let mut lhs = self.unary(structs)?;
        let mut after_comparison = false;
        while let Some((op, level, written)) = self.binary_op_here() {
            if level < min_level {
                break;
            }
            self.chain_link()?;
            if written {
                self.bump();
            }
            let rhs = self.binary(level + 1, structs)?;
            let span = lhs.span.to(rhs.span);
            if level == COMPARISON && after_comparison {
                return Err(chained_comparison(span));
            }
            after_comparison = level == COMPARISON;
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        self.chain_end(chain);
        Ok(lhs)
    }

    fn chained_range(&self, range: Span) -> ParseError {
        ParseError::new(
            "range operators cannot be chained",
            range.to(self.peek().span),
        )
        .with_hint("a range has one `..`, as in `a..b`")
    }

    /// unary := ("-" | "!") unary | postfix
    fn unary(&mut self, structs: StructLiterals) -> Result<Expr, ParseError> {
        let op = match self.peek_kind() {
            TokenKind::Minus => UnaryOp::Neg,
            TokenKind::Bang => UnaryOp::Not,
            _ => return self.postfix(structs),
        };
        let op_span = self.bump().span;
        self.enter()?;
        let operand = self.unary(structs)?;
        self.leave();
        Ok(Expr {
            span: op_span.to(operand.span),
            kind: ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
        })
    }
}

fn chained_comparison(span: Span) -> ParseError {
    ParseError::new("comparison operators cannot be chained", span)
        .with_hint("combine comparisons with `&&`, as in `a < b && b < c`")
}
