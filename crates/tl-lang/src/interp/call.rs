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
    #[inline]
    pub(crate) fn call_named<A: CallArgs + ?Sized>(
        &mut self,
        callee: &Ident,
        function: Resolved,
        args: &A,
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
            true => self.prepare_template(args.format_string(), &mut evaluated.values),
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
    pub(crate) fn eval_args<A: CallArgs + ?Sized>(&mut self, args: &A) -> Flow<ArgValues> {
        let mut evaluated = self.spare_args.pop().unwrap_or_default();
        for i in 0..args.count() {
            match args.eval(self, i) {
                Ok(value) => evaluated.values.push(value),
                Err(error) => {
                    self.recycle(evaluated);
                    return Err(error);
                }
            }
            evaluated.spans.push(args.span(i));
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
    pub(crate) fn call_function<A: CallArgs + ?Sized>(
        &mut self,
        function: &Rc<Function>,
        receiver: Option<Value>,
        args: &A,
        span: Span,
    ) -> Flow<Value> {
        let base = self.stack.len();
        let with_self = receiver.is_some();
        if let Some(receiver) = receiver {
            self.stack.push(Some(receiver));
        }
        let result = match self.push_args(args) {
            Ok(()) => self.enter(function, base, with_self, args, span),
            Err(error) => Err(error),
        };
        self.stack.truncate(base);
        result
    }

    /// Evaluates the arguments onto the stack, left to right.
    fn push_args<A: CallArgs + ?Sized>(&mut self, args: &A) -> Flow<()> {
        for i in 0..args.count() {
            let value = args.eval(self, i)?;
            self.stack.push(Some(value));
        }
        Ok(())
    }

    /// Runs a function whose receiver and arguments are on the stack from
    /// `base`: checks them, makes the frame, runs the body, checks the result.
    /// What a call of plain values needs is inline; conversions, named
    /// dimensions and errors are apart, off the path of every call.
    fn enter<A: CallArgs + ?Sized>(
        &mut self,
        function: &Rc<Function>,
        base: usize,
        with_self: bool,
        args: &A,
        span: Span,
    ) -> Flow<Value> {
        let first_param = usize::from(with_self);
        let params = function.decl.params.get(first_param..).unwrap_or_default();
        if args.count() != params.len() {
            let error = CallError::Arity {
                given: args.count(),
                expected: params.len(),
            };
            return Err(call_error(function, error, span));
        }
        self.check_interrupt(span)?;
        if self.depth >= MAX_CALL_DEPTH {
            return Err(call_error(function, CallError::Depth, span));
        }
        let exact = params.iter().enumerate().all(|(i, param)| {
            match (&param.ty, self.stack.get(base + first_param + i)) {
                (None, _) => true,
                (Some(ty), Some(Some(value))) => types::is_exactly(value, ty),
                (Some(_), _) => false,
            }
        });
        let frame_end = base + function.layout.len();
        if self.stack.len() < frame_end {
            self.stack.resize(frame_end, None);
        }
        let mut dims = None;
        if !exact || !function.dims.is_empty() {
            dims = self.bind_parameters(function, base, first_param, args, span)?;
        }
        let frame = Frame {
            base,
            layout: Rc::clone(&function.layout),
        };
        let saved = std::mem::replace(&mut self.frame, frame);
        self.depth += 1;
        let result = function.body.run(self);
        self.depth -= 1;
        self.frame = saved;
        // The plain result is handed on as it came: values are returned
        // through memory, and each copy of one is paid on every call.
        let exact = match (&result, &function.decl.return_type) {
            (Ok(value), Some(ty)) => types::is_exactly(value, ty),
            (Ok(_), None) => true,
            (Err(_), _) => false,
        };
        if exact {
            return result;
        }
        self.finish_call(function, result, dims, span)
    }

    /// A call's result that is not a plain value of its declared type: a
    /// `return`, an error, or a value to convert.
    #[inline(never)]
    fn finish_call(
        &mut self,
        function: &Function,
        result: Flow<Value>,
        dims: Option<HashMap<String, usize>>,
        span: Span,
    ) -> Flow<Value> {
        let value = match result {
            Ok(v) => v,
            Err(Unwind::Jump) => self.landed().map_err(Unwind::Error)?,
            Err(Unwind::Error(error)) => return Err(with_call(function, error, span)),
        };
        match &function.decl.return_type {
            Some(ty) if !types::is_exactly(&value, ty) => {
                convert_result(function, value, ty, dims, span)
            }
            _ => Ok(value),
        }
    }

    /// Converts the arguments to their parameters' types and gives the
    /// named dimensions of the signature their sizes, as ints in the body:
    /// `fn f(x: float32[n, d])` can use `n` and `d` (a parameter of the same
    /// name wins).
    #[inline(never)]
    fn bind_parameters<A: CallArgs + ?Sized>(
        &mut self,
        function: &Function,
        base: usize,
        first_param: usize,
        args: &A,
        span: Span,
    ) -> Flow<Option<HashMap<String, usize>>> {
        let decl = &function.decl;
        let params = decl.params.get(first_param..).unwrap_or_default();
        // Made only for a signature with a tensor or list in it.
        let mut dims = None;
        self.coerce_arguments(decl, params, base + first_param, args, span, &mut dims)?;
        for (name, slot) in &function.dims {
            let place = self.stack.get_mut(base + *slot as usize);
            let size = dims
                .as_ref()
                .and_then(|d: &HashMap<String, usize>| d.get(name));
            if let (Some(size), Some(place)) = (size, place) {
                *place = Some(Value::Int(*size as i64));
            }
        }
        Ok(dims)
    }

    /// Checks and converts the arguments in their slots (from `first`)
    /// against the parameters' written types, binding named dimensions.
    fn coerce_arguments<A: CallArgs + ?Sized>(
        &mut self,
        decl: &FnDecl,
        params: &[Param],
        first: usize,
        args: &A,
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
                let mut e = e.or_at(if i < args.count() { args.span(i) } else { span });
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

/// A call's arguments, evaluated one at a time into the callee's frame:
/// the written expressions (the tree walker) or their compiled closures.
pub(crate) trait CallArgs {
    fn count(&self) -> usize;
    fn eval(&self, interp: &mut Interpreter, i: usize) -> Flow<Value>;
    /// Where argument `i` was written, for errors about it.
    fn span(&self, i: usize) -> Span;
    /// The first argument's expression when it may be a format string.
    fn format_string(&self) -> Option<&Expr>;
}

impl CallArgs for [Expr] {
    fn count(&self) -> usize {
        self.len()
    }

    fn eval(&self, interp: &mut Interpreter, i: usize) -> Flow<Value> {
        match self.get(i) {
            Some(arg) => interp.eval(arg),
            None => Err(LangError::internal("an argument past the call's last").into()),
        }
    }

    fn span(&self, i: usize) -> Span {
        self.get(i).map(|arg| arg.span).unwrap_or_default()
    }

    fn format_string(&self) -> Option<&Expr> {
        self.first()
    }
}

/// Evaluated arguments and where each was written.
#[derive(Default)]
pub(crate) struct ArgValues {
    pub values: Vec<Value>,
    pub spans: Vec<Span>,
}

/// Why a call could not start.
enum CallError {
    Arity { given: usize, expected: usize },
    Depth,
}

#[cold]
fn call_error(function: &Function, error: CallError, span: Span) -> Unwind {
    let decl = &function.decl;
    match error {
        CallError::Arity { given, expected } => {
            arity_error(&decl.name.name, expected, expected, given, span).into()
        }
        CallError::Depth => LangError::at(
            format!("calls nested more than {MAX_CALL_DEPTH} deep"),
            span,
        )
        .with_hint("is the recursion missing a base case?")
        .into(),
    }
}

/// An error out of a function's body, with the call in its trace.
#[cold]
fn with_call(function: &Function, mut error: Box<LangError>, span: Span) -> Unwind {
    error.trace.push((function.decl.name.name.clone(), span));
    Unwind::Error(error)
}

/// The result converted to the declared return type.
#[cold]
fn convert_result(
    function: &Function,
    value: Value,
    ty: &tl_syntax::ast::TypeExpr,
    dims: Option<HashMap<String, usize>>,
    span: Span,
) -> Flow<Value> {
    let mut dims = dims.unwrap_or_default();
    Ok(types::coerce(value, ty, &mut dims).map_err(|e| {
        let mut e = e.or_at(span);
        e.message = format!("the result of `{}`: {}", function.decl.name.name, e.message);
        e
    })?)
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
