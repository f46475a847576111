//! Executing statements: bindings, assignments (to variables, struct fields and
//! indexed regions), loops and jumps.

use std::collections::HashMap;
use std::rc::Rc;

use tl_syntax::ast::{
    BinaryOp, Block, Expr, ExprKind, Ident, Locals, Resolved, Stmt, StmtKind, TypeExpr,
};

use super::equation::Binding;
use super::{types, Flow, Interpreter, Jump, Unwind};

/// One run of a loop's body: its block, walked or compiled.
pub(crate) type LoopBody<'a> = dyn Fn(&mut Interpreter) -> Flow<Value> + 'a;
use crate::equation::EquationRef;
use crate::error::LangError;
use crate::indexing;
use crate::tensor::Tensor;
use crate::value::{StructValue, Value};

impl Interpreter {
    /// Runs one statement. Assignments and expressions, which a loop body
    /// runs most, are here; the others are in [`Self::exec_other`], kept
    /// apart so that this function stays small.
    pub(crate) fn exec(&mut self, stmt: &Stmt) -> Flow<()> {
        match &stmt.kind {
            StmtKind::Assign {
                target,
                op,
                value,
                equation: None,
            } => {
                let value = self.eval(value)?;
                match op {
                    Some(op) => self.compound_assign(*op, target, value, stmt.span),
                    None => self.assign(target, value),
                }
            }
            StmtKind::Expr(e) => self.eval(e).map(drop),
            _ => self.exec_other(stmt),
        }
    }

    #[inline(never)]
    fn exec_other(&mut self, stmt: &Stmt) -> Flow<()> {
        match &stmt.kind {
            StmtKind::Let {
                ty, value, slot, ..
            } => {
                let value = self.eval(value)?;
                self.bind_let(ty.as_ref(), *slot, value, stmt.span)?;
            }
            StmtKind::Assign {
                target,
                op: None,
                value,
                equation: Some(declares),
            } => self.exec_equation(target, value, *declares, stmt.span)?,
            StmtKind::Assign { .. } | StmtKind::Expr(_) => return self.exec(stmt),
            StmtKind::While { cond, body } => {
                let run = |interp: &mut Self| interp.eval_block(body);
                while self.eval_condition(cond)? {
                    if self.loop_body(body.span, &run)? {
                        break;
                    }
                }
            }
            StmtKind::For {
                iterable,
                body,
                slot,
                ..
            } => {
                let result = self.exec_for(*slot, iterable, body);
                self.end_loop_variable(*slot);
                result?
            }
            StmtKind::Loop(body) => {
                let run = |interp: &mut Self| interp.eval_block(body);
                while !self.loop_body(body.span, &run)? {}
            }
            StmtKind::Break => return Err(self.jump(Jump::Break(stmt.span))),
            StmtKind::Continue => return Err(self.jump(Jump::Continue(stmt.span))),
            StmtKind::Return(value) => {
                let value = match value {
                    Some(e) => self.eval(e)?,
                    None => Value::None,
                };
                return Err(self.jump(Jump::Return(value)));
            }
        }
        Ok(())
    }

    /// Runs an assignment that is an equation, which declares the local in
    /// `declares` when its name is no variable yet.
    fn exec_equation(
        &mut self,
        target: &Expr,
        value: &Expr,
        declares: Resolved,
        span: tl_syntax::Span,
    ) -> Flow<()> {
        match self.equation_of(target, value, span) {
            Some(Ok(eq)) => self.run_equation(&eq, Binding::Body { declares }),
            Some(Err(error)) => Err(error.into()),
            // Seen as an equation where it was resolved, as a plain
            // assignment where it runs: the assignment it is.
            None => {
                let value = self.eval(value)?;
                self.assign(target, value)
            }
        }
    }

    /// `target op= value`. A variable is updated where it lives, without
    /// a copy of its value.
    pub(crate) fn compound_assign(
        &mut self,
        op: BinaryOp,
        target: &Expr,
        value: Value,
        span: tl_syntax::Span,
    ) -> Flow<()> {
        if let ExprKind::Var(name, Resolved::At(slot)) = &target.kind {
            if let Some(old) = self.slot(*slot) {
                let new = super::expr::binary(op, old, &value, span)?;
                // No written type to check, no learnable tensor to keep.
                if !self.is_typed(*slot) && !matches!(old, Value::Tensor(_)) {
                    self.put_slot(*slot, new);
                    return Ok(());
                }
                return self.set_slot(*slot, name, new, target.span);
            }
        }
        let old = self.eval(target)?;
        let new = super::expr::binary(op, &old, &value, span)?;
        self.assign(target, new)
    }

    /// The assignment as an equation, when it names an index variable.
    pub(crate) fn equation_of<'a>(
        &self,
        target: &'a Expr,
        value: &'a Expr,
        span: tl_syntax::Span,
    ) -> Option<Result<EquationRef<'a>, LangError>> {
        let found = EquationRef::of_assignment(target, value, span, &|n| self.is_variable(n))?;
        Some(found.map_err(LangError::from_diagnostic))
    }

    /// `let` with its value evaluated: converted to the written type, if
    /// any, into the new variable's slot.
    pub(crate) fn bind_let(
        &mut self,
        ty: Option<&TypeExpr>,
        slot: Resolved,
        mut value: Value,
        span: tl_syntax::Span,
    ) -> Flow<()> {
        if let Some(ty) = ty {
            value = types::coerce(value, ty, &mut HashMap::new()).map_err(|e| e.or_at(span))?;
        }
        self.declare(slot, value)
    }

    /// Empties a `for` loop's variable when the loop ends.
    pub(crate) fn end_loop_variable(&mut self, var: Resolved) {
        if let Resolved::At(k) = var {
            self.end_locals(Locals {
                start: k,
                end: k + 1,
            });
        }
    }

    /// Runs a loop body once; true when the loop must stop (`break`).
    #[inline]
    pub(crate) fn loop_body(&mut self, span: tl_syntax::Span, body: &LoopBody<'_>) -> Flow<bool> {
        self.check_interrupt(span)?;
        match body(self) {
            Ok(_) => Ok(false),
            Err(Unwind::Jump) => match self.jump {
                Jump::Continue(_) => Ok(false),
                Jump::Break(_) => Ok(true),
                Jump::Return(_) => Err(Unwind::Jump),
            },
            Err(error) => Err(error),
        }
    }

    fn exec_for(&mut self, var: Resolved, iterable: &Expr, body: &Block) -> Flow<()> {
        let run = |interp: &mut Self| interp.eval_block(body);
        if let ExprKind::Range {
            start: Some(start),
            end: Some(end),
        } = &iterable.kind
        {
            let range = self.eval_int(start)?..self.eval_int(end)?;
            return self.for_range(var, range, body.span, &run);
        }
        let items = self.eval(iterable)?;
        self.for_items(var, items, iterable.span, body.span, &run)
    }

    /// A `for` loop over a range: the int is written over the last one,
    /// with nothing to drop.
    pub(crate) fn for_range(
        &mut self,
        var: Resolved,
        range: std::ops::Range<i64>,
        span: tl_syntax::Span,
        body: &LoopBody<'_>,
    ) -> Flow<()> {
        for i in range {
            match var {
                Resolved::At(k) => match self.stack.get_mut(self.frame.base + k as usize) {
                    Some(Some(Value::Int(held))) => *held = i,
                    _ => self.declare(var, Value::Int(i))?,
                },
                Resolved::Unresolved => self.declare(var, Value::Int(i))?,
            }
            if self.loop_body(span, body)? {
                break;
            }
        }
        Ok(())
    }

    /// A `for` loop over the items of a list, string or tensor. Items are
    /// made one at a time: a tensor of a billion rows, or a long string,
    /// must not become a list of them first.
    pub(crate) fn for_items(
        &mut self,
        var: Resolved,
        iterable: Value,
        iterable_span: tl_syntax::Span,
        span: tl_syntax::Span,
        body: &LoopBody<'_>,
    ) -> Flow<()> {
        match iterable {
            Value::List(items) => {
                let items = items.borrow().clone();
                self.iterate(var, span, body, items.into_iter().map(Ok))
            }
            Value::Str(s) => {
                let chars = s.chars().map(|c| Ok(Value::str(c.to_string())));
                self.iterate(var, span, body, chars)
            }
            Value::Tensor(t) => {
                let dense = t.to_dense().map_err(|e| e.or_at(iterable_span))?;
                let rows = dense.dims().first().copied().ok_or_else(|| {
                    LangError::at("cannot iterate over a 0-dimensional tensor", iterable_span)
                })?;
                let row = |i| {
                    dense
                        .get(i)
                        .map(Value::tensor)
                        .map_err(|e| LangError::from(e).or_at(iterable_span).into())
                };
                self.iterate(var, span, body, (0..rows).map(row))
            }
            other => Err(LangError::at(
                format!("cannot iterate over {}", other.type_name()),
                iterable_span,
            )
            .with_hint("iterate over a range `0..n`, a list, a string or a tensor")
            .into()),
        }
    }

    /// Runs the body for each item until the items end or the body breaks.
    fn iterate(
        &mut self,
        var: Resolved,
        span: tl_syntax::Span,
        body: &LoopBody<'_>,
        items: impl Iterator<Item = Flow<Value>>,
    ) -> Flow<()> {
        for item in items {
            self.declare(var, item?)?;
            if self.loop_body(span, body)? {
                break;
            }
        }
        Ok(())
    }

    /// `name[i, j] = value` written into the variable's tensor in place, when
    /// the variable alone holds a tensor with storage of its own; false when
    /// the store must make a new tensor.
    fn store_in_place(
        &self,
        (name, slot): (&str, Resolved),
        indices: &[indexing::IndexValue],
        value: &Value,
    ) -> crate::error::Result<bool> {
        match self.held(name, slot) {
            Some(Value::Tensor(Tensor::Owned(owned))) if Rc::strong_count(owned) == 1 => {
                indexing::store_element_in_place(owned, indices, value)
            }
            _ => Ok(false),
        }
    }

    /// `value` checked against the declared type of the struct's field, with
    /// the named dimensions the struct's other fields bind.
    fn typed_field(
        &self,
        target: &StructValue,
        field: &Ident,
        value: Value,
        span: tl_syntax::Span,
    ) -> Flow<Value> {
        let Some(decl) = self.structs.get(&target.name) else {
            return Ok(value);
        };
        let Some(declared) = decl.fields.iter().find(|f| f.name.name == field.name) else {
            return Ok(value);
        };
        let mut dims = HashMap::new();
        for (name, other) in &target.fields {
            if let Some(other_decl) = decl.fields.iter().find(|f| f.name.name == *name) {
                if *name != field.name {
                    types::bind_dims(other, &other_decl.ty, &mut dims);
                }
            }
        }
        Ok(
            types::coerce(value, &declared.ty, &mut dims).map_err(|e| LangError {
                message: format!(
                    "cannot assign to field `{}` of `{}`: {}",
                    field.name, target.name, e.message
                ),
                span: Some(span),
                ..e
            })?,
        )
    }

    /// Stores `value` into a place: a variable, a struct field, or an indexed
    /// region (a tensor region makes a new tensor, stored back into its place).
    pub(crate) fn assign(&mut self, target: &Expr, value: Value) -> Flow<()> {
        match &target.kind {
            ExprKind::Var(name, slot) => self.set_variable(name, *slot, value, target.span),
            ExprKind::Field { base, field } => match self.eval(base)? {
                Value::Struct(s) => {
                    let value = self.typed_field(&s.borrow(), field, value, target.span)?;
                    let value = match s.borrow().get(&field.name) {
                        Some(old) => crate::learning::carry_over(old, value)
                            .map_err(|e| e.or_at(target.span))?,
                        None => value,
                    };
                    if s.borrow_mut().set(&field.name, value) {
                        Ok(())
                    } else {
                        let name = s.borrow().name.clone();
                        Err(LangError::at(
                            format!("struct `{name}` has no field `{}`", field.name),
                            field.span,
                        )
                        .into())
                    }
                }
                other => Err(LangError::at(
                    format!("cannot set a field of {}", other.type_name()),
                    target.span,
                )
                .into()),
            },
            ExprKind::Index { base, indices } => {
                let (old, indices) = match &base.kind {
                    // A variable reads without side effects, so its indices
                    // may go first, to try the store in place.
                    ExprKind::Var(name, slot) => {
                        let indices = self.eval_indices(indices)?;
                        if self
                            .store_in_place((name, *slot), &indices, &value)
                            .map_err(|e| e.or_at(target.span))?
                        {
                            return Ok(());
                        }
                        (self.eval(base)?, indices)
                    }
                    _ => (self.eval(base)?, self.eval_indices(indices)?),
                };
                let new = indexing::assign_index(&old, &indices, &value)
                    .map_err(|e| e.or_at(target.span))?;
                self.assign(base, new)
            }
            _ => Err(LangError::at("cannot assign to this expression", target.span).into()),
        }
    }
}
