//! The static type of each kind of expression, reporting what is wrong inside
//! it on the way. Calls, members and operators have files of their own.

use tl_syntax::ast::{Expr, ExprKind, IndexArg};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;
use super::ty::{StaticDim, Ty};

impl Body<'_, '_> {
    /// The static type of `expr`.
    pub fn infer(&mut self, expr: &Expr) -> Ty {
        let span = expr.span;
        match &expr.kind {
            ExprKind::Int(_) => Ty::Int,
            ExprKind::Float(_) => Ty::Float,
            ExprKind::Str(_) => Ty::Str,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::None => Ty::None,
            ExprKind::Var(name, _) => self.variable(name, span),
            ExprKind::List(items) => self.list(items),
            ExprKind::Unary { op, operand } => {
                let ty = self.infer(operand);
                self.unary(*op, &ty, span)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let (l, r) = (self.infer(lhs), self.infer(rhs));
                self.binary(*op, &l, &r, span)
            }
            ExprKind::Range { start, end } => {
                self.range_list(start.as_deref(), end.as_deref(), span)
            }
            ExprKind::Call { callee, args, .. } => self.call(callee, args, span),
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => self.method_call(receiver, method, args, span),
            ExprKind::Field { base, field } => {
                let base = self.infer(base);
                self.field_of(&base, field)
            }
            ExprKind::Index { base, indices } => {
                let base = self.infer(base);
                self.index_of(&base, indices, span)
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.condition(cond);
                let then_ty = self.block(then_branch);
                match else_branch {
                    Some(else_branch) => then_ty.join(&self.infer(else_branch)),
                    None => Ty::Unknown,
                }
            }
            ExprKind::Block(block) => self.block(block),
            ExprKind::StructLit { name, fields } => self.struct_literal(name, fields, span),
            ExprKind::Query(atom) => self.query(atom),
        }
    }

    fn variable(&mut self, name: &str, span: Span) -> Ty {
        if let Some(binding) = self.lookup(name) {
            return binding.ty;
        }
        if let Some(relation) = self.decls().logic.relation(name) {
            return self.relation_type(relation);
        }
        let error = Diagnostic::error(format!("unknown variable `{name}`"), span);
        let names = self.variable_names();
        let error = match crate::suggest::closest(name, names.into_iter()) {
            Some(close) => error.with_hint(format!("did you mean `{close}`?")),
            None if self.decls().functions.contains_key(name) => error.with_hint(format!(
                "`{name}` is a function: call it with `{name}(...)`"
            )),
            None => error,
        };
        self.report(error);
        Ty::Unknown
    }

    /// Reports an index that is a name bound nowhere (`W[i]` outside an
    /// equation), pointing to equations, where index variables live; false
    /// for any other index.
    fn unbound_index(&mut self, index: &Expr) -> bool {
        let ExprKind::Var(name, _) = &index.kind else {
            return false;
        };
        let known = self.lookup(name).is_some()
            || self.decls().logic.relation(name).is_some()
            || self.decls().functions.contains_key(name.as_str());
        if !known {
            let error = Diagnostic::error(format!("unknown variable `{name}`"), index.span)
                .with_hint(format!(
                    "index variables such as `{name}` are bound only by an equation: \
                     `Y[...] = ... W[{name}] ...;` (with no index on the left, `Y` is 0-d)"
                ));
            self.report(error);
        }
        !known
    }

    fn list(&mut self, items: &[Expr]) -> Ty {
        let mut element: Option<Ty> = None;
        for item in items {
            let ty = self.infer(item);
            element = Some(match element {
                Some(earlier) => earlier.join(&ty),
                None => ty,
            });
        }
        match element {
            Some(ty) if ty.is_known() => Ty::List(Some(Box::new(ty))),
            _ => Ty::List(None),
        }
    }

    /// A range outside `for` and `[...]`: the list of its ints.
    fn range_list(&mut self, start: Option<&Expr>, end: Option<&Expr>, span: Span) -> Ty {
        for end in [start, end].into_iter().flatten() {
            self.int_operand(end);
        }
        if start.is_none() || end.is_none() {
            self.report(
                Diagnostic::error("a range needs both ends here", span)
                    .with_hint("open ranges like `a..` are only allowed inside `[...]`"),
            );
        }
        Ty::List(Some(Box::new(Ty::Int)))
    }

    /// An expression that must be an int (a range's end, an index).
    pub fn int_operand(&mut self, expr: &Expr) -> Ty {
        let ty = self.infer(expr);
        if ty.is_known() && ty != Ty::Int {
            self.report(Diagnostic::error(
                format!("expected an int, found {ty}"),
                expr.span,
            ));
        }
        ty
    }

    /// The type of `base[indices]` for a base of type `base`.
    pub fn index_of(&mut self, base: &Ty, indices: &[IndexArg], span: Span) -> Ty {
        // What each position does to a tensor's dimension: `Some(true)` keeps
        // it (`:` or a range), `Some(false)` removes it (one int).
        let mut keeps = Vec::with_capacity(indices.len());
        for index in indices {
            keeps.push(match index {
                IndexArg::Full(_) => Some(true),
                IndexArg::Expr(Expr {
                    kind: ExprKind::Range { start, end },
                    ..
                }) => {
                    for e in [start, end].into_iter().flatten() {
                        self.int_operand(e);
                    }
                    Some(true)
                }
                IndexArg::Expr(e) if self.unbound_index(e) => None,
                IndexArg::Expr(e) => match self.int_operand(e) {
                    Ty::Int => Some(false),
                    _ => None,
                },
            });
        }
        match base {
            Ty::Tensor(t) => Ty::tensor(t.dtype, indexed_dims(t.dims.as_deref(), indices, &keeps)),
            Ty::List(element) if keeps.len() == 1 => match keeps[0] {
                Some(false) => element.as_deref().cloned().unwrap_or(Ty::Unknown),
                Some(true) => base.clone(),
                None => Ty::Unknown,
            },
            Ty::Str => Ty::Str,
            Ty::Int | Ty::Float | Ty::Bool | Ty::None | Ty::Struct(_) | Ty::Handle(_) => {
                self.report(Diagnostic::error(format!("cannot index {base}"), span));
                Ty::Unknown
            }
            _ => Ty::Unknown,
        }
    }
}

/// The dimensions left after indexing: ints remove theirs, ranges keep theirs
/// with a size unknown here, `:` keeps them as they are.
fn indexed_dims(
    dims: Option<&[StaticDim]>,
    indices: &[IndexArg],
    keeps: &[Option<bool>],
) -> Option<Vec<StaticDim>> {
    let dims = dims?;
    if keeps.len() > dims.len() {
        return None;
    }
    let mut out = Vec::with_capacity(dims.len());
    for (axis, dim) in dims.iter().enumerate() {
        match (keeps.get(axis), indices.get(axis)) {
            (None, _) => out.push(dim.clone()),
            (Some(Some(false)), _) => {}
            (Some(Some(true)), Some(IndexArg::Full(_))) => out.push(dim.clone()),
            (Some(Some(true)), _) => out.push(StaticDim::Unknown),
            (Some(None), _) => return None,
        }
    }
    Some(out)
}
