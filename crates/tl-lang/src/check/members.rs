//! `receiver.method(args)` and `base.field`. The interpreter looks a method up
//! in the struct's `impl`, then among the methods of lists, strings and engine
//! handles, then falls back to the builtin of that name with the receiver as
//! first argument. The checker follows the same order where the receiver's type
//! is known, and keeps quiet about receivers whose methods it does not model
//! (lists, strings, handles) or whose type it does not know.

use tl_syntax::ast::{Expr, Ident};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;
use super::ty::Ty;
use crate::builtins;

impl Body<'_, '_> {
    /// `receiver.method(args)`.
    pub fn method_call(
        &mut self,
        receiver: &Expr,
        method: &Ident,
        args: &[Expr],
        span: Span,
    ) -> Ty {
        let receiver_ty = self.infer(receiver);
        let arg_tys: Vec<Ty> = args.iter().map(|a| self.infer(a)).collect();
        if let Ty::Struct(name) = &receiver_ty {
            let key = (name.as_str(), method.name.as_str());
            if let Some(decl) = self.decls().methods.get(&key).copied() {
                if decl.params.first().is_none_or(|p| p.name.name != "self") {
                    self.report(
                        Diagnostic::error(
                            format!("`{name}::{}` does not take `self`", method.name),
                            method.span,
                        )
                        .with_hint("make `self` its first parameter"),
                    );
                    return Ty::Unknown;
                }
                return self.call_function(decl, &decl.params[1..], args, &arg_tys, span);
            }
        }
        let models_methods = matches!(
            receiver_ty,
            Ty::Struct(_) | Ty::Tensor(_) | Ty::Int | Ty::Float | Ty::Bool | Ty::None
        );
        if !models_methods {
            return Ty::Unknown;
        }
        let Some(builtin) = builtins::find(&method.name) else {
            let what = match &receiver_ty {
                Ty::Struct(name) => format!("`{name}`"),
                other => other.to_string(),
            };
            let error = Diagnostic::error(
                format!("{what} has no method `{}`", method.name),
                method.span,
            );
            let hint = self.method_hint(&receiver_ty, &method.name);
            self.report(match hint {
                Some(hint) => error.with_hint(hint),
                None => error,
            });
            return Ty::Unknown;
        };
        let mut all_args = vec![receiver];
        all_args.extend(args);
        let mut all_tys = vec![receiver_ty];
        all_tys.extend(arg_tys);
        self.call_builtin(builtin, &all_args, &all_tys, span)
    }

    fn method_hint(&self, receiver: &Ty, method: &str) -> Option<String> {
        let Ty::Struct(name) = receiver else {
            return None;
        };
        let decls = self.decls();
        let methods = decls
            .methods
            .keys()
            .filter(|(target, _)| target == name)
            .map(|(_, m)| *m);
        if let Some(close) = crate::suggest::closest(method, methods) {
            return Some(format!("did you mean `{close}`?"));
        }
        let is_field = decls
            .structs
            .get(name.as_str())
            .is_some_and(|s| s.fields.iter().any(|f| f.name.name == method));
        if is_field {
            return Some(format!(
                "`{method}` is a field: read it with `.{method}` without parentheses"
            ));
        }
        Some(format!("add it to `impl {name} {{ ... }}`"))
    }

    /// The type of `base.field` for a base of type `base`.
    pub fn field_of(&mut self, base: &Ty, field: &Ident) -> Ty {
        let name = field.name.as_str();
        match base {
            Ty::Struct(s) => {
                let Some(decl) = self.decls().structs.get(s.as_str()).copied() else {
                    return Ty::Unknown;
                };
                if let Some(declared) = decl.fields.iter().find(|f| f.name.name == name) {
                    let key = (s.clone(), name.to_string());
                    if self.pass.unknown.fields.contains(&key) {
                        return Ty::Unknown;
                    }
                    return self.decls().ty_of_unbound(&declared.ty);
                }
                let known: Vec<&str> = decl.fields.iter().map(|f| f.name.name.as_str()).collect();
                let error = Diagnostic::error(format!("`{s}` has no field `{name}`"), field.span);
                let hint = match crate::suggest::closest(name, known.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("its fields are: {}", known.join(", ")),
                };
                self.report(error.with_hint(hint));
                Ty::Unknown
            }
            Ty::Tensor(_) => match name {
                "shape" => Ty::List(Some(Box::new(Ty::Int))),
                "dtype" => Ty::Str,
                "rank" => Ty::Int,
                _ => {
                    self.report(
                        Diagnostic::error(format!("{base} has no field `{name}`"), field.span)
                            .with_hint("tensors have the fields `shape`, `dtype` and `rank`"),
                    );
                    Ty::Unknown
                }
            },
            Ty::Handle(h) if h == "Model" && name == "path" => Ty::Str,
            Ty::Int | Ty::Float | Ty::Bool | Ty::Str | Ty::None | Ty::List(_) => {
                let error = Diagnostic::error(format!("{base} has no field `{name}`"), field.span);
                self.report(if builtins::find(name).is_some() {
                    error.with_hint(format!("to call a method, write `.{name}(...)`"))
                } else {
                    error
                });
                Ty::Unknown
            }
            _ => Ty::Unknown,
        }
    }
}
