//! Calling functions: user functions (typed parameters checked, a fresh frame),
//! builtins (arity checked, errors pointed at the call), and struct literals.

use std::collections::HashMap;
use std::rc::Rc;

use tl_syntax::ast::{Expr, ExprKind, FnDecl, Ident};
use tl_syntax::Span;

use super::{types, DeclaredType, Flow, Interpreter, Scope, Unwind, MAX_CALL_DEPTH};
use crate::builtins::{self, Args, Builtin, Gradient};
use crate::error::LangError;
use crate::learning;
use crate::value::Value;

impl Interpreter {
    /// `name(args)`: a user function, else a builtin.
    pub(crate) fn call_named(&mut self, callee: &Ident, args: &[Expr], span: Span) -> Flow<Value> {
        if let Some(decl) = self.functions.get(&callee.name).cloned() {
            let (values, spans) = self.eval_args(args)?;
            return self.call_function(&decl, None, values, &spans, span);
        }
        let Some(builtin) = builtins::find(&callee.name) else {
            return Err(self.unknown_name(&callee.name, callee.span).into());
        };
        let (mut values, spans) = self.eval_args(args)?;
        if is_formatting(&callee.name) {
            self.prepare_template(args.first(), &mut values)?;
        }
        self.call_builtin(builtin, &values, &spans, span)
    }

    /// Evaluates arguments left to right, keeping where each was written.
    pub(crate) fn eval_args(&mut self, args: &[Expr]) -> Flow<(Vec<Value>, Vec<Span>)> {
        let values = args
            .iter()
            .map(|a| self.eval(a))
            .collect::<Flow<Vec<_>>>()?;
        Ok((values, args.iter().map(|a| a.span).collect()))
    }

    /// Only a string literal is a format string. `print("{x}")` fills the
    /// literal's named placeholders from the variables in scope, leaving `{}`
    /// placeholders to the arguments; a string computed at run time (a model's
    /// reply, a line read from input) has its braces escaped so that it prints
    /// verbatim.
    pub(crate) fn prepare_template(
        &mut self,
        first: Option<&Expr>,
        values: &mut [Value],
    ) -> Flow<()> {
        match (first, values.first()) {
            (
                Some(Expr {
                    kind: ExprKind::Str(template),
                    span,
                }),
                _,
            ) => {
                let filled =
                    super::format::fill_named(template, |name| self.lookup(name, *span).ok())
                        .map_err(|e| e.or_at(*span))?;
                values[0] = Value::str(filled);
            }
            (_, Some(Value::Str(text))) => {
                values[0] = Value::str(super::format::escape_braces(text));
            }
            _ => {}
        }
        Ok(())
    }

    /// Calls a builtin with evaluated arguments.
    pub(crate) fn call_builtin(
        &mut self,
        builtin: &Builtin,
        values: &[Value],
        spans: &[Span],
        span: Span,
    ) -> Flow<Value> {
        if values.len() < builtin.min_args || values.len() > builtin.max_args {
            return Err(arity_error(
                builtin.name,
                builtin.min_args,
                builtin.max_args,
                values.len(),
                span,
            )
            .with_hint(format!("its signature is `{}`", builtin.signature))
            .into());
        }
        let args = Args {
            name: builtin.name,
            values,
            spans,
            call: span,
        };
        // Only where a gradient comes in is there one to lose: the check
        // costs nothing on the path without learnable tensors.
        let differentiated = builtin.gradient == Gradient::Differentiable
            && values.iter().any(learning::value_tracks);
        let out = (builtin.call)(&mut self.ctx, &args).map_err(|e| e.or_at(span))?;
        if differentiated && lost_gradient(&out) {
            return Err(LangError::internal(format!(
                "`{}` dropped the gradient of a learnable argument",
                builtin.name
            ))
            .or_at(span)
            .into());
        }
        Ok(out)
    }

    /// Calls a user function, or a method with `receiver` bound to `self` (the
    /// caller has checked that the method's first parameter is `self`).
    pub(crate) fn call_function(
        &mut self,
        decl: &Rc<FnDecl>,
        receiver: Option<Value>,
        mut values: Vec<Value>,
        spans: &[Span],
        span: Span,
    ) -> Flow<Value> {
        let mut frame = Scope::default();
        let first_param = match receiver {
            Some(receiver) => {
                frame.vars.insert("self".to_string(), receiver);
                1
            }
            None => 0,
        };
        let params = &decl.params[first_param..];
        if values.len() != params.len() {
            return Err(arity_error(
                &decl.name.name,
                params.len(),
                params.len(),
                values.len(),
                span,
            )
            .into());
        }
        self.check_interrupt(span)?;
        if self.depth >= MAX_CALL_DEPTH {
            return Err(LangError::at(
                format!("calls nested more than {MAX_CALL_DEPTH} deep"),
                span,
            )
            .with_hint("is the recursion missing a base case?")
            .into());
        }
        let mut dims = HashMap::new();
        for (i, (param, value)) in params.iter().zip(values.drain(..)).enumerate() {
            let value = match &param.ty {
                Some(ty) => types::coerce(value, ty, &mut dims).map_err(|e| {
                    let mut e = e.or_at(spans.get(i).copied().unwrap_or(span));
                    e.message = format!(
                        "argument `{}` of `{}`: {}",
                        param.name.name, decl.name.name, e.message
                    );
                    e
                })?,
                None => value,
            };
            if param.ty.is_some() {
                let declared = DeclaredType::Param(Rc::clone(decl), first_param + i);
                frame.types.insert(param.name.name.clone(), declared);
            }
            frame.vars.insert(param.name.name.clone(), value);
        }
        // Named dimensions of the signature are ints in the body: `fn f(x: float32[n, d])`
        // can use `n` and `d` (a parameter of the same name wins).
        for (name, size) in &dims {
            frame
                .vars
                .entry(name.clone())
                .or_insert(Value::Int(*size as i64));
        }
        let saved = std::mem::replace(&mut self.scopes, vec![frame]);
        self.depth += 1;
        let result = self.eval_block(&decl.body);
        self.depth -= 1;
        self.scopes = saved;
        let value = match result {
            Ok(v) | Err(Unwind::Return(v)) => v,
            Err(Unwind::Break(s)) => {
                return Err(LangError::at("`break` outside of a loop", s).into())
            }
            Err(Unwind::Continue(s)) => {
                return Err(LangError::at("`continue` outside of a loop", s).into())
            }
            Err(Unwind::Error(mut error)) => {
                error.trace.push((decl.name.name.clone(), span));
                return Err(Unwind::Error(error));
            }
        };
        match &decl.return_type {
            Some(ty) => Ok(types::coerce(value, ty, &mut dims).map_err(|e| {
                let mut e = e.or_at(span);
                e.message = format!("the result of `{}`: {}", decl.name.name, e.message);
                e
            })?),
            None => Ok(value),
        }
    }

    /// `Name { field: value, ... }`: every declared field exactly once.
    pub(crate) fn construct(
        &mut self,
        name: &Ident,
        fields: &[(Ident, Expr)],
        span: Span,
    ) -> Flow<Value> {
        let Some(decl) = self.structs.get(&name.name).cloned() else {
            return Err(self.unknown_name(&name.name, name.span).into());
        };
        let mut values = Vec::with_capacity(decl.fields.len());
        // Named dimensions bind across the fields: `w: float32[i, o]` and
        // `b: float32[o]` agree on `o`.
        let mut dims = HashMap::new();
        for (field, expr) in fields {
            let Some(declared) = decl.fields.iter().find(|f| f.name.name == field.name) else {
                return Err(LangError::at(
                    format!("struct `{}` has no field `{}`", name.name, field.name),
                    field.span,
                )
                .into());
            };
            if values
                .iter()
                .any(|(n, _): &(String, Value)| *n == field.name)
            {
                return Err(LangError::at(
                    format!("field `{}` given twice", field.name),
                    field.span,
                )
                .into());
            }
            let value = self.eval(expr)?;
            let value = types::coerce(value, &declared.ty, &mut dims).map_err(|e| {
                let mut e = e.or_at(expr.span);
                e.message = format!("field `{}` of `{}`: {}", field.name, name.name, e.message);
                e
            })?;
            values.push((field.name.clone(), value));
        }
        if let Some(missing) = decl
            .fields
            .iter()
            .find(|f| !values.iter().any(|(n, _)| *n == f.name.name))
        {
            return Err(LangError::at(
                format!(
                    "field `{}` of `{}` is missing",
                    missing.name.name, name.name
                ),
                span,
            )
            .into());
        }
        // Fields keep their declared order, whatever order they were written in.
        values.sort_by_key(|(n, _)| decl.fields.iter().position(|f| f.name.name == *n));
        Ok(Value::record(&name.name, values))
    }
}

/// Whether a differentiable builtin's result is a float tensor off the
/// gradient's graph (a list of results, as `split` gives, is not looked into).
fn lost_gradient(out: &Value) -> bool {
    matches!(out, Value::Tensor(t) if t.dtype().is_float() && !t.tracks_gradient())
}

fn arity_error(name: &str, min: usize, max: usize, given: usize, span: Span) -> LangError {
    LangError::at(crate::error::arity_message(name, min, max, given), span)
}

/// Whether the builtin `name` takes a format string as its first argument.
pub(crate) fn is_formatting(name: &str) -> bool {
    matches!(name, "print" | "write" | "format")
}
