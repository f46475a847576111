//! Evaluating expressions and blocks.

use tl_syntax::ast::{BinaryOp, Block, Expr, ExprKind, IndexArg};

use super::{Flow, Interpreter};
use crate::error::LangError;
use crate::indexing::{self, IndexValue};
use crate::ops;
use crate::ops::shapes::checked_list_len;
use crate::value::Value;

impl Interpreter {
    /// The value of an expression. The kinds a loop or a call runs most are
    /// here; the others are in [`Self::eval_other`], kept apart so that this
    /// function stays small (its stack frame is paid on every step).
    pub(crate) fn eval(&mut self, expr: &Expr) -> Flow<Value> {
        match &expr.kind {
            ExprKind::Int(i) => Ok(Value::Int(*i)),
            ExprKind::Float(x) => Ok(Value::Float(*x)),
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::Var(name, slot) => self.variable(name, *slot, expr.span),
            ExprKind::Binary { op, lhs, rhs } => self.eval_binary(*op, lhs, rhs, expr.span),
            ExprKind::Call {
                callee,
                args,
                function,
            } => self.call_named(callee, *function, args.as_slice(), expr.span),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                if self.eval_condition(cond)? {
                    self.eval_block(then_branch)
                } else if let Some(else_branch) = else_branch {
                    self.eval(else_branch)
                } else {
                    Ok(Value::None)
                }
            }
            ExprKind::Block(block) => self.eval_block(block),
            _ => self.eval_other(expr),
        }
    }

    #[inline(never)]
    fn eval_other(&mut self, expr: &Expr) -> Flow<Value> {
        let span = expr.span;
        Ok(match &expr.kind {
            ExprKind::Str(s) => Value::str(s),
            ExprKind::None => Value::None,
            ExprKind::List(items) => {
                let values = items
                    .iter()
                    .map(|item| self.eval(item))
                    .collect::<Flow<Vec<_>>>()?;
                Value::list(values)
            }
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand)?;
                ops::unary(*op, &value).map_err(|e| e.or_at(span))?
            }
            ExprKind::Range { start, end } => self.eval_range_list(start, end, span)?,
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => self.call_method(receiver, method, args, span)?,
            ExprKind::Field { base, field } => {
                let base = self.eval(base)?;
                self.field(&base, &field.name, field.span)?
            }
            ExprKind::Index { base, indices } => {
                let base = self.eval(base)?;
                let indices = self.eval_indices(indices)?;
                indexing::index(&base, &indices).map_err(|e| e.or_at(span))?
            }
            ExprKind::StructLit { name, fields } => self.construct(name, fields, span)?,
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::Var(..)
            | ExprKind::Binary { .. }
            | ExprKind::Call { .. }
            | ExprKind::If { .. }
            | ExprKind::Block(_) => return self.eval(expr),
            ExprKind::Query(atom) => match &self.logic {
                Some(logic) => logic.query(atom).map_err(|e| e.or_at(span))?,
                None => {
                    return Err(LangError::at(
                        format!("unknown relation `{}`", atom.relation.name),
                        atom.relation.span,
                    )
                    .into())
                }
            },
        })
    }

    /// Runs a block, whose locals end with it; its value is its tail's (or `none`).
    pub(crate) fn eval_block(&mut self, block: &Block) -> Flow<Value> {
        // Only a statement declares a local of the block (a nested block
        // ends its own): a block of a tail alone, as in `if c { a } else { b }`,
        // has none to end.
        if block.stmts.is_empty() {
            return self.eval_tail(block);
        }
        let result = self.eval_block_body(block);
        self.end_locals(block.locals);
        result
    }

    fn eval_block_body(&mut self, block: &Block) -> Flow<Value> {
        for stmt in &block.stmts {
            self.exec(stmt)?;
        }
        self.eval_tail(block)
    }

    #[inline]
    fn eval_tail(&mut self, block: &Block) -> Flow<Value> {
        match &block.tail {
            Some(tail) => self.eval(tail),
            None => Ok(Value::None),
        }
    }

    /// A condition, which must be a bool.
    pub(crate) fn eval_condition(&mut self, cond: &Expr) -> Flow<bool> {
        let value = self.eval(cond)?;
        condition(value, cond.span)
    }

    fn eval_binary(
        &mut self,
        op: BinaryOp,
        lhs: &Expr,
        rhs: &Expr,
        span: tl_syntax::Span,
    ) -> Flow<Value> {
        let left = self.eval(lhs)?;
        // `&&` and `||` on bools do not evaluate their right side when the left decides.
        match (op, &left) {
            (BinaryOp::And, Value::Bool(false)) => return Ok(Value::Bool(false)),
            (BinaryOp::Or, Value::Bool(true)) => return Ok(Value::Bool(true)),
            _ => {}
        }
        let right = self.eval(rhs)?;
        binary(op, &left, &right, span)
    }

    /// A range outside `for` and indexing: the list of its ints.
    fn eval_range_list(
        &mut self,
        start: &Option<Box<Expr>>,
        end: &Option<Box<Expr>>,
        span: tl_syntax::Span,
    ) -> Flow<Value> {
        let (Some(start), Some(end)) = (start, end) else {
            return Err(LangError::at("a range needs both ends here", span)
                .with_hint("open ranges like `a..` are only allowed inside `[...]`")
                .into());
        };
        let (start, end) = (self.eval_int(start)?, self.eval_int(end)?);
        let count = (end as i128 - start as i128).max(0);
        checked_list_len(count as u128).map_err(|e| e.or_at(span))?;
        Ok(Value::list((start..end).map(Value::Int).collect()))
    }

    /// An expression that must be an int.
    pub(crate) fn eval_int(&mut self, expr: &Expr) -> Flow<i64> {
        let value = self.eval(expr)?;
        int_of(value, expr.span)
    }

    pub(crate) fn eval_indices(&mut self, indices: &[IndexArg]) -> Flow<Vec<IndexValue>> {
        indices
            .iter()
            .map(|index| match index {
                IndexArg::Full(_) => Ok(IndexValue::Full),
                IndexArg::Expr(Expr {
                    kind: ExprKind::Range { start, end },
                    ..
                }) => {
                    let start = start.as_ref().map(|e| self.eval_int(e)).transpose()?;
                    let end = end.as_ref().map(|e| self.eval_int(e)).transpose()?;
                    Ok(IndexValue::Range(start, end))
                }
                IndexArg::Expr(e) => Ok(IndexValue::At(self.eval_int(e)?)),
            })
            .collect()
    }

    /// "unknown name" with the closest known name as a hint.
    pub(crate) fn unknown_name(&self, name: &str, span: tl_syntax::Span) -> LangError {
        let error = LangError::at(format!("unknown name `{name}`"), span);
        match crate::suggest::closest(name, self.names().iter().map(String::as_str)) {
            Some(close) => error.with_hint(format!("did you mean `{close}`?")),
            None => error,
        }
    }
}

/// A value that must be an int.
pub(crate) fn int_of(value: Value, span: tl_syntax::Span) -> Flow<i64> {
    match value {
        Value::Int(i) => Ok(i),
        other => Err(LangError::at(
            format!("expected an int, found {}", other.type_name()),
            span,
        )
        .into()),
    }
}

/// A condition's value, which must be a bool (or a bool tensor of one element).
#[inline]
pub(crate) fn condition(value: Value, span: tl_syntax::Span) -> Flow<bool> {
    if let Value::Bool(b) = value {
        return Ok(b);
    }
    value.truthy().ok_or_else(|| {
        LangError::at(
            format!("a condition must be a bool, found {}", value.type_name()),
            span,
        )
        .with_hint("compare it with something, e.g. `x > 0`, or reduce a tensor with `all(...)`")
        .into()
    })
}

/// `lhs op rhs`, with ints and floats computed here: a loop's arithmetic and
/// comparisons take no detour through the general operators, which only see
/// the other values (and the ints that overflow, for their message).
#[inline]
pub(crate) fn binary(op: BinaryOp, lhs: &Value, rhs: &Value, span: tl_syntax::Span) -> Flow<Value> {
    let fast = match (lhs, rhs) {
        (Value::Int(a), Value::Int(b)) => int_binary(op, *a, *b),
        (Value::Float(a), Value::Float(b)) => float_binary(op, *a, *b),
        _ => None,
    };
    match fast {
        Some(value) => Ok(value),
        None => Ok(ops::binary(op, lhs, rhs).map_err(|e| e.or_at(span))?),
    }
}

pub(crate) fn int_binary(op: BinaryOp, a: i64, b: i64) -> Option<Value> {
    Some(match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => Value::Int(int_arith(op, a, b)?),
        _ => Value::Bool(comparison(op, a, b)?),
    })
}

/// `a op b` for the comparison operators; `None` for the others.
#[inline]
fn comparison<T: PartialOrd>(op: BinaryOp, a: T, b: T) -> Option<bool> {
    Some(match op {
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        BinaryOp::Ge => a >= b,
        BinaryOp::Eq => a == b,
        BinaryOp::Ne => a != b,
        _ => return None,
    })
}

/// `a op b` for `+ - *` on ints; `None` for other operators and on overflow.
#[inline]
pub(crate) fn int_arith(op: BinaryOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinaryOp::Add => a.checked_add(b),
        BinaryOp::Sub => a.checked_sub(b),
        BinaryOp::Mul => a.checked_mul(b),
        _ => None,
    }
}

fn float_binary(op: BinaryOp, a: f64, b: f64) -> Option<Value> {
    Some(match op {
        BinaryOp::Add => Value::Float(a + b),
        BinaryOp::Sub => Value::Float(a - b),
        BinaryOp::Mul => Value::Float(a * b),
        _ => Value::Bool(comparison(op, a, b)?),
    })
}
