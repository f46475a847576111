//! Calling functions: user functions (typed parameters checked, a fresh frame),
//! builtins (arity checked, errors pointed at the call), and struct literals.

use std::collections::HashMap;
use std::rc::Rc;

use tl_syntax::ast::{Expr, ExprKind, FnDecl, Ident, Param, Resolved};
use tl_syntax::Span;

use super::resolve::Function;
use super::{types, Flow, Frame, Interpreter, Unwind, MAX_CALL_DEPTH};
use crate::builtins::{self, Args, Builtin, Gradient};
use crate::error::LangError;
use crate::learning;
use crate::value::Value;

impl Interpreter {
    /// `name(args)`: a user function, else a builtin.
    pub(crate) fn call_named(
        &mut self,
        callee: &Ident,
        function: Resolved,
        args: &[Expr],
        span: Span,
    ) -> Flow<Value> {
        let index = match function {
            Resolved::At(index) => Some(index),
            // Defined after the caller was resolved (in the REPL).
            Resolved::Unresolved => self.functions.get(&callee.name).copied(),
        };
        if let Some(function) = index.and_then(|i| self.function_table.get(i as usize)) {
            let function = Rc::clone(function);
            return self.call_function(&function, None, args, span);
        }
        let Some(builtin) = builtins::find(&callee.name) else {
            return Err(self.unknown_name(&callee.name, callee.span).into());
        };
        let mut evaluated = self.eval_args(args)?;
        let result = match is_formatting(&callee.name) {
            true => self.prepare_template(args.first(), &mut evaluated.values),
            false => Ok(()),
        };
        let result = result
            .and_then(|()| self.call_builtin(builtin, &evaluated.values, &evaluated.spans, span));
        self.recycle(evaluated);
        result
    }

    /// Evaluates arguments left to right, keeping where each was written,
    /// into buffers that [`Self::recycle`] takes back: a builtin or method
    /// call in a loop allocates nothing for its arguments.
    pub(crate) fn eval_args(&mut self, args: &[Expr]) -> Flow<ArgValues> {
        let mut evaluated = self.spare_args.pop().unwrap_or_default();
        for arg in args {
            match self.eval(arg) {
                Ok(value) => evaluated.values.push(value),
                Err(error) => {
                    self.recycle(evaluated);
                    return Err(error);
                }
            }
            evaluated.spans.push(arg.span);
        }
        Ok(evaluated)
    }

    /// Takes back the buffers of [`Self::eval_args`], emptied.
    pub(crate) fn recycle(&mut self, mut evaluated: ArgValues) {
        evaluated.values.clear();
        evaluated.spans.clear();
        self.spare_args.push(evaluated);
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
    /// caller has checked that the method's first parameter is `self`). The
    /// receiver and the arguments go straight into the slots of the new
    /// frame, on top of the stack.
    pub(crate) fn call_function(
        &mut self,
        function: &Rc<Function>,
        receiver: Option<Value>,
        args: &[Expr],
        span: Span,
    ) -> Flow<Value> {
        let base = self.stack.len();
        let with_self = receiver.is_some();
        if let Some(receiver) = receiver {
            self.stack.push(Some(receiver));
        }
        let mut result = Ok(Value::None);
        for arg in args {
            match self.eval(arg) {
                Ok(value) => self.stack.push(Some(value)),
                Err(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = self.enter(function, base, with_self, args, span);
        }
        self.stack.truncate(base);
        result
    }

    /// Runs a function whose receiver and arguments are on the stack from
    /// `base`: checks them, makes the frame, runs the body, checks the result.
    fn enter(
        &mut self,
        function: &Rc<Function>,
        base: usize,
        with_self: bool,
        args: &[Expr],
        span: Span,
    ) -> Flow<Value> {
        let decl = &function.decl;
        let first_param = usize::from(with_self);
        let params = decl.params.get(first_param..).unwrap_or_default();
        if args.len() != params.len() {
            let arity = params.len();
            let error = arity_error(&decl.name.name, arity, arity, args.len(), span);
            return Err(error.into());
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
        // Made only for a signature with a tensor or list in it.
        let mut dims = None;
        self.coerce_arguments(decl, params, base + first_param, args, span, &mut dims)?;
        self.stack.resize(base + function.layout.len(), None);
        // Named dimensions of the signature are ints in the body: `fn f(x: float32[n, d])`
        // can use `n` and `d` (a parameter of the same name wins).
        for (name, slot) in &function.dims {
            let place = self.stack.get_mut(base + *slot as usize);
            let size = dims
                .as_ref()
                .and_then(|d: &HashMap<String, usize>| d.get(name));
            if let (Some(size), Some(place)) = (size, place) {
                *place = Some(Value::Int(*size as i64));
            }
        }
        let frame = Frame {
            base,
            layout: Rc::clone(&function.layout),
        };
        let saved = std::mem::replace(&mut self.frame, frame);
        self.depth += 1;
        let result = self.eval_block(&decl.body);
        self.depth -= 1;
        self.frame = saved;
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
            Some(ty) if !types::is_exactly(&value, ty) => {
                let dims = dims.get_or_insert_with(HashMap::new);
                Ok(types::coerce(value, ty, dims).map_err(|e| {
                    let mut e = e.or_at(span);
                    e.message = format!("the result of `{}`: {}", decl.name.name, e.message);
                    e
                })?)
            }
            _ => Ok(value),
        }
    }

    /// Checks and converts the arguments in their slots (from `first`)
    /// against the parameters' written types, binding named dimensions.
    fn coerce_arguments(
        &mut self,
        decl: &FnDecl,
        params: &[Param],
        first: usize,
        args: &[Expr],
        span: Span,
        dims: &mut Option<HashMap<String, usize>>,
    ) -> Flow<()> {
        for (i, param) in params.iter().enumerate() {
            let Some(ty) = &param.ty else {
                continue;
            };
            if let Some(Some(value)) = self.stack.get(first + i) {
                if types::is_exactly(value, ty) {
                    continue;
                }
            }
            let Some(place) = self.stack.get_mut(first + i) else {
                return Err(LangError::internal("an argument left its slot").into());
            };
            let Some(value) = place.take() else {
                return Err(LangError::internal("an argument left its slot").into());
            };
            let dims = dims.get_or_insert_with(HashMap::new);
            let value = types::coerce(value, ty, dims).map_err(|e| {
                let mut e = e.or_at(args.get(i).map_or(span, |a| a.span));
                e.message = format!(
                    "argument `{}` of `{}`: {}",
                    param.name.name, decl.name.name, e.message
                );
                e
            })?;
            if let Some(place) = self.stack.get_mut(first + i) {
                *place = Some(value);
            }
        }
        Ok(())
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

/// Evaluated arguments and where each was written.
#[derive(Default)]
pub(crate) struct ArgValues {
    pub values: Vec<Value>,
    pub spans: Vec<Span>,
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
