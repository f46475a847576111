//! Bindings: `let` with its annotation, and assignment to variables, fields
//! and indexed places. An untyped variable assigned a value of another type
//! may hold either afterwards; a struct field must keep its declared type
//! (typed variables are held to theirs at run time).

use tl_syntax::ast::{BinaryOp, Expr, ExprKind, Ident, TypeExpr};
use tl_syntax::{Diagnostic, Span};

use super::body::{Binding, Body};
use super::coerce::{contradiction, DimBindings};
use super::decls::Global;
use super::ty::{StaticDim, Ty};

impl Body<'_, '_> {
    pub fn let_stmt(&mut self, name: &Ident, written: Option<&TypeExpr>, value: &Expr) {
        let found = self.infer(value);
        let mut binding = Binding {
            dim: self.dim_of(value),
            ty: held_in_variable(found.clone(), value),
        };
        if let Some(written) = written {
            let decls = self.decls();
            let mut names_checked = Vec::new();
            decls.check_type_names(written, &mut names_checked);
            // A type that names nothing is reported once, not again as a mismatch.
            let names_known = names_checked.is_empty();
            names_checked.into_iter().for_each(|d| self.report(d));
            let mismatch = contradiction(&found, written, &mut DimBindings::new());
            if let (Some(m), true) = (mismatch, names_known) {
                self.report_mismatch(m, value.span, None);
            }
            let symbols = self.symbols.clone();
            let declared = decls.ty_of(written, &|n| {
                if symbols.contains(n) {
                    StaticDim::Symbol(n.to_string())
                } else {
                    StaticDim::Unknown
                }
            });
            binding.ty = refine(declared, &found);
        }
        if binding.ty != Ty::Int {
            binding.dim = StaticDim::Unknown;
        }
        self.declare(&name.name, binding);
    }

    pub fn assign_stmt(&mut self, target: &Expr, op: Option<BinaryOp>, value: &Expr, span: Span) {
        let value_ty = self.infer(value);
        let mut base_struct = None;
        let old = match &target.kind {
            ExprKind::Var(name, _) => match self.lookup(name) {
                Some(binding) => binding.ty,
                None => {
                    self.report(
                        Diagnostic::error(
                            format!("assignment to undeclared variable `{name}`"),
                            target.span,
                        )
                        .with_hint(format!("declare it first with `let {name} = ...;`")),
                    );
                    return;
                }
            },
            ExprKind::Field { base, field } => {
                let base_ty = self.infer(base);
                if let Ty::Struct(name) = &base_ty {
                    base_struct = Some(name.clone());
                }
                self.field_of(&base_ty, field)
            }
            ExprKind::Index { base, indices } => {
                let base_ty = self.infer(base);
                self.index_of(&base_ty, indices, target.span)
            }
            _ => {
                self.report(Diagnostic::error(
                    "cannot assign to this expression",
                    target.span,
                ));
                return;
            }
        };
        let (new_ty, dim) = match op {
            Some(op) => (self.binary(op, &old, &value_ty, span), StaticDim::Unknown),
            None => (held_in_variable(value_ty, value), self.dim_of(value)),
        };
        match &target.kind {
            ExprKind::Var(name, _) => {
                if !self.is_local(name) {
                    self.check_global_assignment(name, &new_ty, value.span);
                }
                self.assign(name, Binding { ty: new_ty, dim });
            }
            ExprKind::Field { field, .. } => {
                if let Some(struct_name) = base_struct {
                    self.check_field_assignment(&struct_name, field, &new_ty, value.span);
                    self.pass.assigned.field(&struct_name, &field.name, &new_ty);
                }
            }
            _ => {}
        }
    }
}

impl Body<'_, '_> {
    /// `global = value`: the value must fit the global tensor's declared type.
    fn check_global_assignment(&mut self, name: &str, new: &Ty, span: Span) {
        let declared = self.decls().globals.iter().rev().find_map(|g| match g {
            Global::Tensor(t) if t.name.name == name => Some(&t.ty),
            _ => None,
        });
        if let Some(m) = declared.and_then(|ty| contradiction(new, ty, &mut DimBindings::new())) {
            let context = format!("global tensor `{name}`");
            self.report_mismatch(m, span, Some(&context));
        }
    }

    /// `s.field = value`: the value must fit the field's declared type.
    fn check_field_assignment(&mut self, struct_name: &str, field: &Ident, new: &Ty, span: Span) {
        let Some(decl) = self.decls().structs.get(struct_name).copied() else {
            return;
        };
        let Some(declared) = decl.fields.iter().find(|f| f.name.name == field.name) else {
            return;
        };
        if let Some(m) = contradiction(new, &declared.ty, &mut DimBindings::new()) {
            let context = format!("field `{}` of `{struct_name}`", field.name);
            self.report_mismatch(m, span, Some(&context));
        }
    }
}

/// The type a variable keeps for a value. A list built by the program itself
/// (`[1, 2]`, `a + b`) may later get any element (`xs.push("a")`), so only
/// its being a list is kept; a declared element type (`list[Layer]`) is a
/// promise the program made, and kept.
fn held_in_variable(ty: Ty, value: &Expr) -> Ty {
    match (ty, &value.kind) {
        (Ty::List(Some(_)), ExprKind::List(_) | ExprKind::Binary { .. }) => Ty::List(None),
        (ty, _) => ty,
    }
}

/// What a variable holds after `let x: T = value`: the written type, sharpened
/// by what is known of the value (a written `?` dimension the value knows).
pub fn refine(declared: Ty, value: &Ty) -> Ty {
    match (declared, value) {
        (Ty::Unknown, value) => value.clone(),
        (Ty::Tensor(mut written), Ty::Tensor(found)) => {
            match (&mut written.dims, &found.dims) {
                (Some(dims), Some(found_dims)) if dims.len() == found_dims.len() => {
                    for (dim, found) in dims.iter_mut().zip(found_dims) {
                        if matches!(found, StaticDim::Known(_)) || *dim == StaticDim::Unknown {
                            *dim = found.clone();
                        }
                    }
                }
                (None, found_dims) => written.dims = found_dims.clone(),
                _ => {}
            }
            Ty::Tensor(written)
        }
        (declared, _) => declared,
    }
}
