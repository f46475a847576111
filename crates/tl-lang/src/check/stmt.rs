//! Blocks and statements: loops (and `break`/`continue` outside them),
//! `return` against the function's result type, conditions, and code that
//! can never run. `let` and assignment are in `bindings`.

use tl_syntax::ast::{Block, Expr, ExprKind, Ident, Stmt, StmtKind};
use tl_syntax::{Diagnostic, Span};

use super::assigned::each_assigned;
use super::body::{Binding, Body};
use super::coerce::{contradiction, DimBindings};
use super::ty::{StaticDim, Ty};
use crate::equation::EquationRef;

impl Body<'_, '_> {
    /// A block in a scope of its own; its type is its tail's.
    pub fn block(&mut self, block: &Block) -> Ty {
        self.push_scope();
        let ty = self.block_in_scope(block);
        self.pop_scope();
        ty
    }

    /// A block's statements and tail in the current scope. A block that ends in
    /// a jump has no value of its own, so its type is unknown.
    pub fn block_in_scope(&mut self, block: &Block) -> Ty {
        let mut jump: Option<&'static str> = None;
        let mut warned = false;
        for stmt in &block.stmts {
            if let (Some(kind), false) = (jump, warned) {
                self.warn_unreachable(kind, stmt.span.to(block_end(block)));
                warned = true;
            }
            self.stmt(stmt);
            jump = jump.or(match stmt.kind {
                StmtKind::Return(_) => Some("return"),
                StmtKind::Break => Some("break"),
                StmtKind::Continue => Some("continue"),
                _ => None,
            });
        }
        let tail = block.tail.as_deref().map(|tail| {
            if let (Some(kind), false) = (jump, warned) {
                self.warn_unreachable(kind, tail.span);
            }
            self.infer(tail)
        });
        match (jump, tail) {
            (None, Some(ty)) => ty,
            _ => Ty::Unknown,
        }
    }

    fn warn_unreachable(&mut self, jump: &str, span: Span) {
        self.report(
            Diagnostic::warning("unreachable code", span)
                .with_hint(format!("it comes after a `{jump}` in the same block")),
        );
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Let {
                name, ty, value, ..
            } => self.let_stmt(name, ty.as_ref(), value),
            StmtKind::Assign {
                target, op, value, ..
            } => {
                if op.is_some() || !self.equation_stmt(target, value, stmt.span) {
                    self.assign_stmt(target, *op, value, stmt.span)
                }
            }
            StmtKind::While { cond, body } => {
                self.forget_assigned_in(body);
                self.condition(cond);
                self.loop_body(body);
            }
            StmtKind::For {
                var,
                iterable,
                body,
                ..
            } => self.for_stmt(var, iterable, body),
            StmtKind::Loop(body) => {
                self.forget_assigned_in(body);
                self.loop_body(body);
            }
            StmtKind::Break | StmtKind::Continue if self.loop_depth == 0 => {
                let word = if matches!(stmt.kind, StmtKind::Break) {
                    "break"
                } else {
                    "continue"
                };
                self.report(Diagnostic::error(
                    format!("`{word}` outside of a loop"),
                    stmt.span,
                ));
            }
            StmtKind::Break | StmtKind::Continue => {}
            StmtKind::Return(value) => self.return_stmt(value.as_ref(), stmt.span),
            StmtKind::Expr(e) => {
                self.infer(e);
            }
        }
    }

    /// Checks `target = value` as an equation if it is one (it names an
    /// index variable); false for a plain assignment.
    fn equation_stmt(&mut self, target: &Expr, value: &Expr, span: Span) -> bool {
        let is_bound = |n: &str| self.lookup(n).is_some();
        match EquationRef::of_assignment(target, value, span, &is_bound) {
            None => false,
            Some(Err(error)) => {
                self.report(error);
                true
            }
            Some(Ok(eq)) => {
                let binding = Binding::of(self.equation(&eq));
                // As in the interpreter: an existing variable is set, else declared.
                if !self.assign(eq.name, binding.clone()) {
                    self.declare(eq.name, binding);
                }
                true
            }
        }
    }

    fn for_stmt(&mut self, var: &Ident, iterable: &Expr, body: &Block) {
        let element = match &iterable.kind {
            ExprKind::Range {
                start: Some(start),
                end: Some(end),
            } => {
                self.int_operand(start);
                self.int_operand(end);
                Ty::Int
            }
            _ => {
                let ty = self.infer(iterable);
                self.element_of(&ty, iterable.span)
            }
        };
        self.forget_assigned_in(body);
        self.push_scope();
        self.declare(&var.name, Binding::of(element));
        self.loop_body(body);
        self.pop_scope();
    }

    /// What a `for` loop binds for each item of a value of type `ty`.
    fn element_of(&mut self, ty: &Ty, span: Span) -> Ty {
        match ty {
            Ty::List(Some(element)) => (**element).clone(),
            Ty::Str => Ty::Str,
            Ty::Tensor(t) => Ty::tensor(
                t.dtype,
                t.dims
                    .as_ref()
                    .filter(|d| !d.is_empty())
                    .map(|d| d[1..].to_vec()),
            ),
            Ty::Int | Ty::Float | Ty::Bool | Ty::None | Ty::Struct(_) | Ty::Handle(_) => {
                self.report(
                    Diagnostic::error(format!("cannot iterate over {ty}"), span)
                        .with_hint("iterate over a range `0..n`, a list, a string or a tensor"),
                );
                Ty::Unknown
            }
            Ty::List(None) | Ty::Unknown => Ty::Unknown,
        }
    }

    fn loop_body(&mut self, body: &Block) {
        self.loop_depth += 1;
        self.block(body);
        self.loop_depth -= 1;
    }

    /// Variables a loop body rebinds may differ at the top of a later iteration.
    fn forget_assigned_in(&mut self, body: &Block) {
        let mut names = Vec::new();
        each_assigned(body, &mut |name| names.push(name.to_string()));
        for name in names {
            self.forget(&name);
        }
    }

    fn return_stmt(&mut self, value: Option<&Expr>, span: Span) {
        let found = value.map(|v| (self.infer(v), v.span));
        let Some(function) = self.function else {
            return;
        };
        let Some(written) = &function.return_type else {
            return;
        };
        match found {
            Some((ty, value_span)) => self.check_result(&ty, value_span),
            None => self.report(Diagnostic::error(
                format!(
                    "`{}` must return {}, but this `return` has no value",
                    function.name.name,
                    super::written::written_string(written)
                ),
                span,
            )),
        }
    }

    /// Checks a value the function returns against its result type.
    pub fn check_result(&mut self, found: &Ty, span: Span) {
        let Some(function) = self.function else {
            return;
        };
        let Some(written) = &function.return_type else {
            return;
        };
        let mut bound: DimBindings = self
            .symbols
            .iter()
            .map(|s| (s.clone(), StaticDim::Symbol(s.clone())))
            .collect();
        if let Some(m) = contradiction(found, written, &mut bound) {
            let context = format!("the result of `{}`", function.name.name);
            self.report_mismatch(m, span, Some(&context));
        }
    }

    /// A condition, which must be a bool.
    pub fn condition(&mut self, cond: &Expr) {
        let ty = self.infer(cond);
        if ty.is_known() && ty != Ty::Bool {
            let hint = match ty {
                Ty::Tensor(_) => {
                    "comparing tensors gives a tensor of bools; reduce it to one bool first"
                }
                _ => "compare it, e.g. `x > 0`",
            };
            self.report(
                Diagnostic::error(format!("a condition must be a bool, found {ty}"), cond.span)
                    .with_hint(hint),
            );
        }
    }
}

/// The span from a block's first statement to its end, for "unreachable".
fn block_end(block: &Block) -> Span {
    match (&block.tail, block.stmts.last()) {
        (Some(tail), _) => tail.span,
        (None, Some(last)) => last.span,
        (None, None) => block.span,
    }
}
