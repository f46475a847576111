//! Written types (`float32[n, d]`, `list[Layer]`, `Model`) as static types, as
//! text for messages, and checked for names that declare nothing.
//!
//! A named dimension means something only within one signature, so the caller
//! says what each name stands for: a symbol of the function being checked, a
//! size bound from a call's arguments, or nothing known.

use tl_syntax::ast::{Dim, TypeExpr, TypeKind};
use tl_syntax::Diagnostic;

use super::decls::Declarations;
use super::ty::{StaticDim, Ty, HANDLE_TYPES, RECORD_TYPES};

impl Declarations<'_> {
    /// The static type of a written type; `named` says what a named dimension is.
    pub fn ty_of(&self, ty: &TypeExpr, named: &dyn Fn(&str) -> StaticDim) -> Ty {
        match &ty.kind {
            TypeKind::Int => Ty::Int,
            TypeKind::Float => Ty::Float,
            TypeKind::Bool => Ty::Bool,
            TypeKind::Str => Ty::Str,
            TypeKind::List(None) => Ty::List(None),
            TypeKind::List(Some(element)) => match self.ty_of(element, named) {
                Ty::Unknown => Ty::List(None),
                known => Ty::List(Some(Box::new(known))),
            },
            TypeKind::Named(name) if name == "tensor" => Ty::any_tensor(),
            TypeKind::Named(name) if HANDLE_TYPES.contains(&name.as_str()) => {
                Ty::Handle(name.clone())
            }
            TypeKind::Named(name) if self.structs.contains_key(name.as_str()) => {
                Ty::Struct(name.clone())
            }
            // An undeclared name (reported elsewhere) or a runtime record.
            TypeKind::Named(_) => Ty::Unknown,
            TypeKind::Tensor { dtype, dims } => Ty::tensor(
                Some(*dtype),
                dims.as_ref().map(|dims| {
                    dims.iter()
                        .map(|d| match d {
                            Dim::Known(n) => StaticDim::Known(*n),
                            Dim::Named(name) => named(name),
                            Dim::Unknown => StaticDim::Unknown,
                        })
                        .collect()
                }),
            ),
        }
    }

    /// The static type of a written type whose dimension names stand for nothing
    /// known (struct fields, global tensors: each value binds them afresh).
    pub fn ty_of_unbound(&self, ty: &TypeExpr) -> Ty {
        self.ty_of(ty, &|_| StaticDim::Unknown)
    }

    /// Reports names in a written type that are neither a struct nor an engine type.
    pub fn check_type_names(&self, ty: &TypeExpr, out: &mut Vec<Diagnostic>) {
        match &ty.kind {
            TypeKind::List(Some(element)) => self.check_type_names(element, out),
            TypeKind::Named(name)
                if name != "tensor"
                    && !HANDLE_TYPES.contains(&name.as_str())
                    && !RECORD_TYPES.contains(&name.as_str())
                    && !self.structs.contains_key(name.as_str()) =>
            {
                let error = Diagnostic::error(format!("unknown type `{name}`"), ty.span);
                out.push(self.with_struct_suggestion(error, name));
            }
            _ => {}
        }
    }
}

/// A written type as text, as the program wrote it: `float16[?, 2048]`.
pub use tl_syntax::dump::type_to_string as written_string;

/// The dimension names a written type uses, in order of appearance.
pub fn dim_names(ty: &TypeExpr) -> Vec<&str> {
    match &ty.kind {
        TypeKind::Tensor {
            dims: Some(dims), ..
        } => dims
            .iter()
            .filter_map(|d| match d {
                Dim::Named(name) => Some(name.as_str()),
                _ => None,
            })
            .collect(),
        TypeKind::List(Some(element)) => dim_names(element),
        _ => Vec::new(),
    }
}
