//! Evaluating expressions and blocks.

use tl_syntax::ast::{BinaryOp, Block, Expr, ExprKind, IndexArg, TypeExpr};

use super::{types, DeclaredType, Flow, Interpreter, Scope};
use crate::error::LangError;
use crate::indexing::{self, IndexValue};
use crate::ops;
use crate::ops::shapes::checked_list_len;
use crate::value::Value;

impl Interpreter {
    /// The value of an expression.
    pub(crate) fn eval(&mut self, expr: &Expr) -> Flow<Value> {
        let span = expr.span;
        Ok(match &expr.kind {
            ExprKind::Int(i) => Value::Int(*i),
            ExprKind::Float(x) => Value::Float(*x),
            ExprKind::Str(s) => Value::str(s),
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::None => Value::None,
            ExprKind::Var(name) => self.lookup(name, span)?,
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
            ExprKind::Binary { op, lhs, rhs } => self.eval_binary(*op, lhs, rhs, span)?,
            ExprKind::Range { start, end } => self.eval_range_list(start, end, span)?,
            ExprKind::Call { callee, args } => self.call_named(callee, args, span)?,
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
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                if self.eval_condition(cond)? {
                    self.eval_block(then_branch)?
                } else if let Some(else_branch) = else_branch {
                    self.eval(else_branch)?
                } else {
                    Value::None
                }
            }
            ExprKind::Block(block) => self.eval_block(block)?,
            ExprKind::StructLit { name, fields } => self.construct(name, fields, span)?,
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

    /// Runs a block in a new scope; its value is its tail's (or `none`).
    pub(crate) fn eval_block(&mut self, block: &Block) -> Flow<Value> {
        self.scopes.push(Scope::default());
        let result = self.eval_block_body(block);
        self.scopes.pop();
        result
    }

    fn eval_block_body(&mut self, block: &Block) -> Flow<Value> {
        for stmt in &block.stmts {
            self.exec(stmt)?;
        }
        match &block.tail {
            Some(tail) => self.eval(tail),
            None => Ok(Value::None),
        }
    }

    /// A condition, which must be a bool.
    pub(crate) fn eval_condition(&mut self, cond: &Expr) -> Flow<bool> {
        let value = self.eval(cond)?;
        value.truthy().ok_or_else(|| {
            LangError::at(
                format!("a condition must be a bool, found {}", value.type_name()),
                cond.span,
            )
            .with_hint(
                "compare it with something, e.g. `x > 0`, or reduce a tensor with `all(...)`",
            )
            .into()
        })
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
        Ok(ops::binary(op, &left, &right).map_err(|e| e.or_at(span))?)
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
        match self.eval(expr)? {
            Value::Int(i) => Ok(i),
            other => Err(LangError::at(
                format!("expected an int, found {}", other.type_name()),
                expr.span,
            )
            .into()),
        }
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

    /// The value of a variable: the running frame's scopes, then the globals.
    pub(crate) fn lookup(&self, name: &str, span: tl_syntax::Span) -> Flow<Value> {
        if let Some(value) = self.scopes.iter().rev().find_map(|s| s.vars.get(name)) {
            return Ok(value.clone());
        }
        if let Some(value) = self.globals.get(name) {
            return Ok(value.clone());
        }
        // A relation's name is its 0/1 tensor.
        if let Some(tensor) = self.logic.as_ref().and_then(|l| l.tensor(name)) {
            return Ok(tensor.map_err(|e| e.or_at(span))?);
        }
        Err(self.unknown_name(name, span).into())
    }

    /// "unknown name" with the closest known name as a hint.
    pub(crate) fn unknown_name(&self, name: &str, span: tl_syntax::Span) -> LangError {
        let error = LangError::at(format!("unknown name `{name}`"), span);
        match crate::suggest::closest(name, self.names().iter().map(String::as_str)) {
            Some(close) => error.with_hint(format!("did you mean `{close}`?")),
            None => error,
        }
    }

    /// Sets an existing variable (innermost first) or reports it undeclared.
    pub(crate) fn set_variable(
        &mut self,
        name: &str,
        value: Value,
        span: tl_syntax::Span,
    ) -> Flow<()> {
        let at_assignment = |e: LangError| LangError {
            message: format!("cannot assign to `{name}`: {}", e.message),
            span: Some(span),
            ..e
        };
        if let Some(scope) = self
            .scopes
            .iter_mut()
            .rev()
            .find(|s| s.vars.contains_key(name))
        {
            let Some(slot) = scope.vars.get_mut(name) else {
                return Err(LangError::internal("a variable left its scope").into());
            };
            let ty = scope.types.get(name).and_then(DeclaredType::get);
            *slot = types::replacement(slot, value, ty).map_err(at_assignment)?;
            return Ok(());
        }
        if let Some(slot) = self.globals.get_mut(name) {
            let ty = self.global_types.get(name);
            *slot = types::replacement(slot, value, ty).map_err(at_assignment)?;
            return Ok(());
        }
        Err(
            LangError::at(format!("assignment to undeclared variable `{name}`"), span)
                .with_hint(format!("declare it first with `let {name} = ...;`"))
                .into(),
        )
    }

    /// Declares a variable in the innermost scope (shadowing any outer one),
    /// with the type every later assignment to it must match, if one is written.
    pub(crate) fn declare(&mut self, name: &str, value: Value, ty: Option<&TypeExpr>) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.vars.insert(name.to_string(), value);
            match ty {
                Some(ty) => scope
                    .types
                    .insert(name.to_string(), DeclaredType::Written(ty.clone())),
                None => scope.types.remove(name),
            };
        }
    }
}
