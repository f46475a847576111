//! `receiver.method(args)` and `base.field`. Methods are looked up in order: the
//! struct's `impl`, the methods of lists, strings and engine handles, and then
//! any builtin, called with the receiver as its first argument — so
//! `x.softmax(-1)` is `softmax(x, -1)`.

use tl_syntax::ast::{Expr, Ident};
use tl_syntax::Span;

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
        let (values, spans) = self.eval_args(args)?;
        if let Value::Struct(s) = &target {
            let key = (s.borrow().name.clone(), method.name.clone());
            if let Some(decl) = self.methods.get(&key).cloned() {
                if decl.params.first().is_none_or(|p| p.name.name != "self") {
                    return Err(LangError::at(
                        format!("`{}::{}` does not take `self`", key.0, key.1),
                        method.span,
                    )
                    .with_hint("make `self` its first parameter")
                    .into());
                }
                return self.call_function(&decl, Some(target.clone()), values, &spans, span);
            }
        }
        let call = native::MethodCall {
            method: &method.name,
            args: &values,
            spans: &spans,
            span,
        };
        if let Some(result) = native::call(&mut self.ctx, &target, &call) {
            return Ok(result.map_err(|e| e.or_at(span))?);
        }
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
