//! Calls and struct literals: which function a name calls (the program's own
//! first, then the builtins, as the interpreter looks them up), how many
//! arguments it takes, whether each argument can have its parameter's type, and
//! the type of the result with the signature's dimension names bound from the
//! arguments.

use std::collections::HashSet;

use tl_syntax::ast::{Expr, FnDecl, Ident, Param};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;
use super::coerce::{contradiction, DimBindings, Mismatch};
use super::ty::{StaticDim, TensorTy, Ty};
use super::written::written_string;
use crate::builtins::{self, Builtin};
use crate::error::arity_message;

impl Body<'_, '_> {
    /// `name(args)`.
    pub fn call(&mut self, callee: &Ident, args: &[Expr], span: Span) -> Ty {
        let arg_tys: Vec<Ty> = args.iter().map(|a| self.infer(a)).collect();
        if let Some(decl) = self.decls().functions.get(callee.name.as_str()).copied() {
            return self.call_function(decl, &decl.params, args, &arg_tys, span);
        }
        if let Some(builtin) = builtins::find(&callee.name) {
            let args: Vec<&Expr> = args.iter().collect();
            return self.call_builtin(builtin, &args, &arg_tys, span);
        }
        let error = Diagnostic::error(format!("unknown function `{}`", callee.name), callee.span);
        let names = self
            .decls()
            .functions
            .keys()
            .copied()
            .chain(builtins::all().map(|b| b.name));
        self.report(match crate::suggest::closest(&callee.name, names) {
            Some(close) => error.with_hint(format!("did you mean `{close}`?")),
            None => error,
        });
        Ty::Unknown
    }

    /// A call of a user function (or a method, whose `self` is not in `params`).
    pub fn call_function(
        &mut self,
        decl: &FnDecl,
        params: &[Param],
        args: &[Expr],
        arg_tys: &[Ty],
        span: Span,
    ) -> Ty {
        if params.len() != args.len() {
            self.report(
                Diagnostic::error(
                    arity_message(&decl.name.name, params.len(), params.len(), args.len()),
                    span,
                )
                .with_hint(format!("its signature is `{}`", signature(decl))),
            );
        }
        let mut bound = DimBindings::new();
        for ((param, arg), ty) in params.iter().zip(args).zip(arg_tys) {
            let Some(written) = &param.ty else { continue };
            if let Some(m) = contradiction(ty, written, &mut bound) {
                let context = format!("argument `{}` of `{}`", param.name.name, decl.name.name);
                self.report_mismatch(m, arg.span, Some(&context));
            }
        }
        match &decl.return_type {
            Some(ret) => self.decls().ty_of(ret, &|name| {
                bound.get(name).cloned().unwrap_or(StaticDim::Unknown)
            }),
            None => Ty::Unknown,
        }
    }

    /// A call of a builtin with its arguments (the receiver first, for a method
    /// that falls back to a builtin).
    pub fn call_builtin(
        &mut self,
        builtin: &Builtin,
        args: &[&Expr],
        arg_tys: &[Ty],
        span: Span,
    ) -> Ty {
        let given = args.len();
        if given < builtin.min_args || given > builtin.max_args {
            self.report(
                Diagnostic::error(
                    arity_message(builtin.name, builtin.min_args, builtin.max_args, given),
                    span,
                )
                .with_hint(format!("its signature is `{}`", builtin.signature)),
            );
            return Ty::Unknown;
        }
        if matches!(builtin.name, "print" | "write" | "format") {
            self.check_format_call(args);
        }
        if builtin.name == "grad" {
            self.check_loss(args[0], &arg_tys[0]);
        }
        self.builtin_result(builtin, args, arg_tys, span)
    }

    /// `grad`'s loss must have one element: a shape known to have more is
    /// reported before the program runs.
    fn check_loss(&mut self, loss: &Expr, ty: &Ty) {
        let Ty::Tensor(TensorTy {
            dims: Some(dims), ..
        }) = ty
        else {
            return;
        };
        let known_larger = dims
            .iter()
            .any(|d| matches!(d, StaticDim::Known(n) if *n != 1));
        if known_larger {
            self.report(
                Diagnostic::error(
                    format!("grad needs a loss of one element, found {ty}"),
                    loss.span,
                )
                .with_hint("reduce it to one number first, e.g. `sum(x)` or `mean(x)`"),
            );
        }
    }

    /// `Name { field: value, ... }`: a declared struct, every field once.
    pub fn struct_literal(&mut self, name: &Ident, fields: &[(Ident, Expr)], span: Span) -> Ty {
        let values: Vec<Ty> = fields.iter().map(|(_, e)| self.infer(e)).collect();
        let Some(decl) = self.decls().structs.get(name.name.as_str()).copied() else {
            let error = Diagnostic::error(format!("unknown struct `{}`", name.name), name.span);
            let error = self.decls().with_struct_suggestion(error, &name.name);
            self.report(error);
            return Ty::Unknown;
        };
        let mut given = HashSet::new();
        // Named dimensions bind across the fields, as at run time.
        let mut bound = DimBindings::new();
        for ((field, expr), ty) in fields.iter().zip(&values) {
            let Some(declared) = decl.fields.iter().find(|f| f.name.name == field.name) else {
                let error = Diagnostic::error(
                    format!("struct `{}` has no field `{}`", name.name, field.name),
                    field.span,
                );
                let names = decl.fields.iter().map(|f| f.name.name.as_str());
                self.report(match crate::suggest::closest(&field.name, names) {
                    Some(close) => error.with_hint(format!("did you mean `{close}`?")),
                    None => error,
                });
                continue;
            };
            if !given.insert(field.name.as_str()) {
                self.report(Diagnostic::error(
                    format!("field `{}` given twice", field.name),
                    field.span,
                ));
                continue;
            }
            if let Some(m) = contradiction(ty, &declared.ty, &mut bound) {
                let context = format!("field `{}` of `{}`", field.name, name.name);
                self.report_mismatch(m, expr.span, Some(&context));
            }
        }
        let missing: Vec<String> = decl
            .fields
            .iter()
            .filter(|f| !given.contains(f.name.name.as_str()))
            .map(|f| format!("`{}`", f.name.name))
            .collect();
        if !missing.is_empty() {
            let (noun, verb) = if missing.len() == 1 {
                ("field", "is")
            } else {
                ("fields", "are")
            };
            self.report(Diagnostic::error(
                format!(
                    "{noun} {} of `{}` {verb} missing",
                    missing.join(", "),
                    name.name
                ),
                span,
            ));
        }
        Ty::Struct(name.name.clone())
    }

    /// Reports a value that cannot have its written type, at the value.
    pub fn report_mismatch(&mut self, m: Mismatch, span: Span, context: Option<&str>) {
        let message = match context {
            Some(context) => format!("{context}: {}", m.message),
            None => m.message,
        };
        let error = Diagnostic::error(message, span);
        self.report(match m.hint {
            Some(hint) => error.with_hint(hint),
            None => error,
        });
    }
}

/// A function's signature as written: `fn f(a: float32[n], b) -> int`.
fn signature(decl: &FnDecl) -> String {
    let params: Vec<String> = decl
        .params
        .iter()
        .map(|p| match &p.ty {
            Some(ty) => format!("{}: {}", p.name.name, written_string(ty)),
            None => p.name.name.clone(),
        })
        .collect();
    let result = match &decl.return_type {
        Some(ty) => format!(" -> {}", written_string(ty)),
        None => String::new(),
    };
    format!("fn {}({}){result}", decl.name.name, params.join(", "))
}
