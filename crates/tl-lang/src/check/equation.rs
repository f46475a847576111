//! Index equations, checked: every index of the left side must appear on the
//! right, each operand must have as many indices as dimensions, and an index
//! must have one size wherever the shapes are known. The result's type has
//! the sizes the operands give its indices. What an equation is, and which
//! names are indices, is decided in `crate::equation`, as the interpreter
//! decides it.

use std::collections::HashMap;

use tl_syntax::ast::{BinaryOp, Expr, ExprKind, IndexArg};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;
use super::ty::{StaticDim, Ty};
use crate::equation::{index_span, EquationRef, ELEMENTWISE};

/// What the walk over one equation's right side has learnt.
struct Indices<'e> {
    /// The tensor being defined, when the equation is recursive: its operand
    /// has the shape of the result, not a type of its own yet.
    defining: Option<&'e str>,
    /// Each index's size, with where it was first seen.
    sizes: HashMap<String, (StaticDim, Span)>,
}

/// One position of an indexed operand.
enum Position<'e> {
    Index(&'e str),
    Element,
    At,
}

impl Body<'_, '_> {
    /// Checks an equation; its value's type.
    pub fn equation(&mut self, eq: &EquationRef) -> Ty {
        let left = eq.indices();
        for (i, (name, span)) in left.iter().enumerate() {
            if left[..i].iter().any(|(n, _)| n == name) {
                self.report(
                    Diagnostic::error(
                        format!("index `{name}` appears twice on the left side"),
                        *span,
                    )
                    .with_hint("a diagonal is read on the right side, as in `D[i] = W[i, i]`"),
                );
            }
        }
        let mut indices = Indices {
            defining: eq.is_recursive().then_some(eq.name),
            sizes: HashMap::new(),
        };
        self.equation_part(eq.value, &mut indices);
        if left.is_empty() && indices.sizes.is_empty() {
            // No index at all (`T = 2.0;`, `T = W[0, 0];`): the value as it
            // is, a number or a tensor, which this walk did not type.
            return Ty::Unknown;
        }
        let mut dims = Vec::new();
        for (name, span) in &left {
            match indices.sizes.get(*name) {
                Some((dim, _)) => dims.push(dim.clone()),
                None => {
                    self.report(
                        Diagnostic::error(
                            format!("index `{name}` is only on the left side"),
                            *span,
                        )
                        .with_hint("every index of the left side must appear on the right side"),
                    );
                    dims.push(StaticDim::Unknown);
                }
            }
        }
        Ty::tensor(None, Some(dims))
    }

    fn equation_part<'e>(&mut self, expr: &'e Expr, indices: &mut Indices<'e>) {
        match &expr.kind {
            ExprKind::Binary {
                op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div,
                lhs,
                rhs,
            } => {
                self.equation_part(lhs, indices);
                self.equation_part(rhs, indices);
            }
            ExprKind::Unary { operand, .. } => self.equation_part(operand, indices),
            ExprKind::Index {
                base,
                indices: args,
            } => {
                let written: Vec<&Expr> = args
                    .iter()
                    .filter_map(|a| match a {
                        IndexArg::Expr(e) => Some(e),
                        IndexArg::Full(_) => {
                            self.report(
                                Diagnostic::error("an equation names each index", index_span(a))
                                    .with_hint("write an index variable, as in `X[i, j]`"),
                            );
                            None
                        }
                    })
                    .collect();
                self.operand(base, &written, expr.span, indices);
            }
            ExprKind::Call { callee, args, .. } if self.is_relation_atom(&callee.name) => {
                let written: Vec<&Expr> = args.iter().collect();
                self.operand(expr, &written, expr.span, indices);
            }
            ExprKind::Call { callee, args, .. }
                if ELEMENTWISE.contains(&callee.name.as_str())
                    && !self.decls().functions.contains_key(callee.name.as_str())
                    && !args.is_empty() =>
            {
                self.equation_part(&args[0], indices);
                args[1..].iter().for_each(|a| {
                    self.infer(a);
                });
            }
            _ if self.has_index_variable(expr) => {
                self.report(
                    Diagnostic::error("this cannot take indexed operands in an equation", expr.span)
                        .with_hint(format!(
                            "an equation's right side holds products, sums, `-` and the elementwise functions {}",
                            ELEMENTWISE.join(", ")
                        )),
                );
                // Its indices still count as written, so that the left side's
                // are not reported missing as well.
                self.note_indices(expr, indices);
            }
            _ => {
                self.infer(expr);
            }
        }
    }

    /// An indexed operand: a tensor (or relation) and its written indices.
    fn operand<'e>(
        &mut self,
        base: &'e Expr,
        written: &[&'e Expr],
        span: Span,
        indices: &mut Indices<'e>,
    ) {
        let relation = match &base.kind {
            ExprKind::Var(name, _)
            | ExprKind::Call {
                callee: tl_syntax::ast::Ident { name, .. },
                ..
            } if self.lookup(name).is_none() => self.decls().logic.relation(name),
            _ => None,
        };
        let ty = match (&base.kind, relation) {
            (ExprKind::Var(name, _), _) if indices.defining == Some(name.as_str()) => {
                Ty::any_tensor()
            }
            (_, Some(r)) => self.relation_type(r),
            _ => self.infer(base),
        };
        let dims = match &ty {
            Ty::Tensor(t) => t.dims.clone(),
            Ty::Unknown => None,
            other => {
                self.report(Diagnostic::error(
                    format!("cannot index {other} in an equation"),
                    base.span,
                ));
                return;
            }
        };
        let dims = match dims {
            Some(dims) if dims.len() != written.len() => {
                self.report(Diagnostic::error(
                    crate::equation::rank_mismatch(&ty.to_string(), dims.len(), written.len()),
                    span,
                ));
                // The indices still count as written, sizes unknown.
                None
            }
            dims => dims,
        };
        for (axis, arg) in written.iter().enumerate() {
            let dim = dims
                .as_ref()
                .map_or(StaticDim::Unknown, |d| d[axis].clone());
            match self.position(arg, relation, axis) {
                Position::Index(name) => self.size_index(name, dim, arg.span, indices),
                Position::Element => {}
                Position::At => {
                    self.int_operand(arg);
                }
            }
        }
    }

    /// What `arg` is at this position: an int expression (a variable), an
    /// element of a domain, or an index variable.
    fn position<'e>(&self, arg: &'e Expr, relation: Option<usize>, axis: usize) -> Position<'e> {
        let ExprKind::Var(name, _) = &arg.kind else {
            return Position::At;
        };
        if self.lookup(name).is_some() {
            return Position::At;
        }
        match self.decls().logic.element_index(relation, axis, name) {
            Some(_) => Position::Element,
            None => Position::Index(name),
        }
    }

    /// Records an index's size, or reports a size that disagrees.
    fn size_index(&mut self, name: &str, dim: StaticDim, span: Span, indices: &mut Indices) {
        let Some((known, _)) = indices.sizes.get(name).cloned() else {
            indices.sizes.insert(name.to_string(), (dim, span));
            return;
        };
        let differ = match (&known, &dim) {
            (StaticDim::Known(a), StaticDim::Known(b)) => a != b,
            (StaticDim::Symbol(a), StaticDim::Symbol(b)) => a != b,
            _ => false,
        };
        if differ {
            self.report(Diagnostic::error(
                format!(
                    "index `{name}` is {} here, but {} where it was first used",
                    dim_text(&dim),
                    dim_text(&known)
                ),
                span,
            ));
        } else if known == StaticDim::Unknown {
            indices.sizes.insert(name.to_string(), (dim, span));
        }
    }

    /// Records the index variables written anywhere in `expr`, sizes unknown.
    fn note_indices(&self, expr: &Expr, indices: &mut Indices) {
        match &expr.kind {
            ExprKind::Index {
                base,
                indices: args,
            } => {
                for arg in args {
                    if let IndexArg::Expr(e) = arg {
                        if let ExprKind::Var(name, _) = &e.kind {
                            if self.lookup(name).is_none() {
                                (indices.sizes.entry(name.clone()))
                                    .or_insert((StaticDim::Unknown, e.span));
                            }
                        }
                    }
                }
                self.note_indices(base, indices);
            }
            ExprKind::Binary { lhs, rhs, .. } => {
                self.note_indices(lhs, indices);
                self.note_indices(rhs, indices);
            }
            ExprKind::Unary { operand, .. } => self.note_indices(operand, indices),
            ExprKind::Call { args, .. } => args.iter().for_each(|a| self.note_indices(a, indices)),
            _ => {}
        }
    }

    /// Whether `name(...)` in an equation is a relation written as an atom.
    fn is_relation_atom(&self, name: &str) -> bool {
        self.decls().logic.relation(name).is_some() && !self.decls().functions.contains_key(name)
    }

    /// Whether an index variable appears anywhere in `expr`.
    fn has_index_variable(&self, expr: &Expr) -> bool {
        let is_bound = |n: &str| self.lookup(n).is_some();
        crate::equation::mentions_free_index(expr, &is_bound)
    }
}

fn dim_text(dim: &StaticDim) -> String {
    match dim {
        StaticDim::Known(n) => n.to_string(),
        StaticDim::Symbol(s) => format!("`{s}`"),
        StaticDim::Unknown => "?".to_string(),
    }
}
