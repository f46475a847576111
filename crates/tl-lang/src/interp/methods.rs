//! `receiver.method(args)` and `base.field`. Methods are looked up in order: the
//! struct's `impl`, the methods of lists, strings and engine handles, and then
//! any builtin, called with the receiver as its first argument — so
//! `x.softmax(-1)` is `softmax(x, -1)`.

use tl_syntax::ast::{Expr, Ident};
use tl_syntax::Span;

use std::rc::Rc;

use super::call::{ArgValues, CallArgs};
use super::resolve::Function;
use super::{Flow, Interpreter};
use crate::builtins::{self, methods as native};
use crate::error::LangError;
use crate::value::Value;

impl Interpreter {
    pub(crate) fn call_method(
        &mut self,
        receiver: &Expr,
        method: &Ident,
        args: &[Expr],
        span: Span,
    ) -> Flow<Value> {
        let target = self.eval(receiver)?;
        self.call_method_on(target, receiver, method, args, span)
    }

    /// `receiver.method(args)` with the receiver evaluated to `target`
    /// (`receiver` itself is read only for its span and as a format string).
    pub(crate) fn call_method_on<A: CallArgs + ?Sized>(
        &mut self,
        target: Value,
        receiver: &Expr,
        method: &Ident,
        args: &A,
        span: Span,
    ) -> Flow<Value> {
        if let Some(function) = self.struct_method(&target, &method.name) {
            let decl = &function.decl;
            if decl.params.first().is_none_or(|p| p.name.name != "self") {
                return Err(LangError::at(
                    format!(
                        "`{}::{}` does not take `self`",
                        target.type_name(),
                        method.name
                    ),
                    method.span,
                )
                .with_hint("make `self` its first parameter")
                .into());
            }
            return self.call_function(&function, Some(target), args, span);
        }
        let evaluated = self.eval_args(args)?;
        let call = native::MethodCall {
            method: &method.name,
            args: &evaluated.values,
            spans: &evaluated.spans,
            span,
        };
        let native = native::call(&mut self.ctx, &target, &call);
        let ArgValues { values, spans } = match native {
            Some(result) => {
                self.recycle(evaluated);
                return Ok(result.map_err(|e| e.or_at(span))?);
            }
            None => evaluated,
        };
        if let Some(builtin) = builtins::find(&method.name) {
            let mut all_values = Vec::with_capacity(values.len() + 1);
            all_values.push(target);
            all_values.extend(values);
            if super::call::is_formatting(&method.name) {
                self.prepare_template(Some(receiver), &mut all_values)?;
            }
            let mut all_spans = vec![receiver.span];
            all_spans.extend(spans);
            return self.call_builtin(builtin, &all_values, &all_spans, span);
        }
        Err(LangError::at(
            format!("{} has no method `{}`", target.type_name(), method.name),
            method.span,
        )
        .into())
    }

    /// The method `name` of the struct's `impl`, when `target` is a struct
    /// that has one.
    fn struct_method(&self, target: &Value, name: &str) -> Option<Rc<Function>> {
        let Value::Struct(s) = target else {
            return None;
        };
        let methods = self.methods.get(&s.borrow().name)?;
        methods.get(name).cloned()
    }

    /// `base.field`.
    pub(crate) fn field(&self, base: &Value, field: &str, span: Span) -> Flow<Value> {
        if let Value::Struct(s) = base {
            let s = s.borrow();
            return match s.get(field) {
                Some(value) => Ok(value.clone()),
                None => {
                    let known: Vec<&str> = s.fields.iter().map(|(n, _)| n.as_str()).collect();
                    Err(
                        LangError::at(format!("`{}` has no field `{field}`", s.name), span)
                            .with_hint(format!("its fields are: {}", known.join(", ")))
                            .into(),
                    )
                }
            };
        }
        native::field(base, field).ok_or_else(|| {
            LangError::at(format!("{} has no field `{field}`", base.type_name()), span).into()
        })
    }
}
