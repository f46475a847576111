//! Running index equations. The right side is evaluated bottom-up into
//! tensors whose dimensions are named by index variables ([`Indexed`]):
//!
//! - a *term* (a maximal product, `A[i, j] B[j] / 2.0`) contracts its indexed
//!   factors with `einsum`, summing every index that is neither on the left
//!   nor in a factor of an enclosing product (so `A[i, j] (B[j] + C[j])` sums
//!   over `j` once, outside), then applies its number factors;
//! - `+` and `-` line the terms' indices up and broadcast;
//! - an elementwise function (`relu`, `sigmoid(x, T)`, `step`, ...) applies
//!   to its indexed argument, after that argument's own sums.
//!
//! Bools are relations' 0/1 tensors: a product of bools is a join (`einsum`
//! on bools is "there exists"), `+` of bools is "or"; next to numbers they
//! count as 0 and 1. A recursive equation is iterated from zeros until it no
//! longer changes.

mod algebra;
mod operands;

use std::collections::HashMap;

use candle_core::{DType as CandleDType, Tensor as CandleTensor};
use tl_syntax::ast::{BinaryOp, Expr, ExprKind, Resolved};
use tl_syntax::Span;

use super::{Flow, Interpreter};
use crate::equation::{self, EquationRef, ELEMENTWISE};
use crate::error::LangError;
use crate::ops;
use crate::value::Value;
use algebra::{add, contract, map, reciprocal, scale, Indexed};

/// Where an equation's tensor goes: a global (file level), or in a body the
/// variable of its name, or else a new local in the slot `declares`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Binding {
    Global,
    Body { declares: Resolved },
}

/// Rounds a recursive equation may take to stop changing.
const MAX_FIXPOINT_ROUNDS: usize = 100_000;

/// Each index variable's size, with where it was first sized.
type Sizes = HashMap<String, (usize, Span)>;

impl Interpreter {
    /// Runs an equation: binds its tensor as a global (file level) or as a
    /// local of the running body.
    pub(crate) fn run_equation(&mut self, eq: &EquationRef, binding: Binding) -> Flow<()> {
        let value = match eq.is_recursive() {
            true => self.solve_recursive(eq, binding)?,
            false => self.equation_value(eq)?,
        };
        self.bind_equation(eq, value, binding)
    }

    /// At file level, defines the global; in a body, sets the variable if
    /// there is one (as `=` would, so an equation in a loop updates what the
    /// loop's code after it sees), else declares it here.
    fn bind_equation(&mut self, eq: &EquationRef, value: Value, binding: Binding) -> Flow<()> {
        match binding {
            Binding::Global => {
                self.globals.insert(eq.name.to_string(), value);
            }
            Binding::Body { .. } if self.is_variable(eq.name) => {
                let unresolved = Resolved::Unresolved;
                self.set_variable(eq.name, unresolved, value, eq.name_span)?;
            }
            Binding::Body { declares } => self.declare(declares, value)?,
        }
        Ok(())
    }

    /// The left side's tensor: the right side with its dimensions put in
    /// the left side's order.
    fn equation_value(&mut self, eq: &EquationRef) -> Flow<Value> {
        let left = eq.indices();
        for (i, (name, span)) in left.iter().enumerate() {
            if left[..i].iter().any(|(n, _)| n == name) {
                return Err(LangError::at(
                    format!("index `{name}` appears twice on the left side"),
                    *span,
                )
                .with_hint("a diagonal is read on the right side, as in `D[i] = W[i, i]`")
                .into());
            }
        }
        let keep: Vec<String> = left.iter().map(|(n, _)| n.to_string()).collect();
        let (t, labels) = match self.indexed(eq.value, &keep, &mut Sizes::new())? {
            Indexed::Scalar(value) => match left.first() {
                None => return Ok(value),
                Some((name, span)) => return Err(only_on_left(name, *span).into()),
            },
            Indexed::Tensor(t, labels) => (t, labels),
        };
        if let Some((name, span)) = left.iter().find(|(n, _)| !labels.iter().any(|l| l == n)) {
            return Err(only_on_left(name, *span).into());
        }
        let order: Vec<usize> = (keep.iter())
            .filter_map(|k| labels.iter().position(|l| l == k))
            .collect();
        let t = t
            .permute(order)
            .and_then(|t| t.contiguous())
            .map_err(LangError::from)?;
        Ok(Value::tensor(t))
    }

    /// Iterates a recursive equation from zeros to a fixpoint.
    fn solve_recursive(&mut self, eq: &EquationRef, binding: Binding) -> Flow<Value> {
        let mut current = self.recursive_start(eq)?;
        for _ in 0..MAX_FIXPOINT_ROUNDS {
            self.check_interrupt(eq.span)?;
            self.bind_equation(eq, current.clone(), binding)?;
            let next = self.equation_value(eq)?;
            if ops::values_equal(&next, &current).map_err(|e| e.or_at(eq.span))? {
                return Ok(next);
            }
            current = next;
        }
        Err(LangError::at(
            format!(
                "`{}` did not stop changing after {MAX_FIXPOINT_ROUNDS} rounds",
                eq.name
            ),
            eq.span,
        )
        .with_hint(
            "a recursive equation must reach a fixpoint, as one over bools or with `step` does",
        )
        .into())
    }

    /// Zeros of the left side's shape, in the type of the right side's other
    /// operands (bool when they all are).
    fn recursive_start(&mut self, eq: &EquationRef) -> Flow<Value> {
        let mut sizes = Sizes::new();
        let mut dtype = None;
        self.size_operands(eq.value, eq.name, &mut sizes, &mut dtype)?;
        let mut dims = Vec::new();
        for (name, span) in eq.indices() {
            match sizes.get(name) {
                Some((size, _)) => dims.push(*size),
                None => {
                    return Err(LangError::at(
                        format!("cannot tell the size of index `{name}`: no other operand has it"),
                        span,
                    )
                    .into())
                }
            }
        }
        let dtype = dtype.unwrap_or(CandleDType::U8);
        let zeros =
            CandleTensor::zeros(dims, dtype, &candle_core::Device::Cpu).map_err(LangError::from)?;
        Ok(Value::tensor(zeros))
    }

    /// Sizes the index variables of every operand but `skip` (the tensor a
    /// recursive equation defines), and finds their element type.
    fn size_operands(
        &mut self,
        expr: &Expr,
        skip: &str,
        sizes: &mut Sizes,
        dtype: &mut Option<CandleDType>,
    ) -> Flow<()> {
        if let Some((base, args)) = self.operand_parts(expr) {
            if !matches!(&base.kind, ExprKind::Var(n, _) if n == skip) {
                let (t, positions) = self.operand_tensor(base, args, expr.span)?;
                self.label_sizes(&t, &positions, sizes)?;
                if t.dtype() != CandleDType::U8 && dtype.is_none() {
                    *dtype = Some(t.dtype());
                }
            }
            return Ok(());
        }
        match &expr.kind {
            ExprKind::Binary { lhs, rhs, .. } => {
                self.size_operands(lhs, skip, sizes, dtype)?;
                self.size_operands(rhs, skip, sizes, dtype)
            }
            ExprKind::Unary { operand, .. } => self.size_operands(operand, skip, sizes, dtype),
            ExprKind::Call { args, .. } => args
                .iter()
                .try_for_each(|a| self.size_operands(a, skip, sizes, dtype)),
            _ => Ok(()),
        }
    }

    /// An indexed expression, summed over the index variables not in `keep`.
    fn indexed(&mut self, expr: &Expr, keep: &[String], sizes: &mut Sizes) -> Flow<Indexed> {
        match &expr.kind {
            ExprKind::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub),
                lhs,
                rhs,
            } => {
                let l = self.indexed(lhs, keep, sizes)?;
                let r = self.indexed(rhs, keep, sizes)?;
                Ok(add(*op, l, r).map_err(|e| e.or_at(expr.span))?)
            }
            ExprKind::Unary { op, operand } => {
                let inner = self.indexed(operand, keep, sizes)?;
                Ok(map(inner, |v| ops::unary(*op, v)).map_err(|e| e.or_at(expr.span))?)
            }
            ExprKind::Call { callee, args, .. }
                if ELEMENTWISE.contains(&callee.name.as_str())
                    && !self.functions.contains_key(&callee.name)
                    && args.first().is_some_and(|a| !self.labels_in(a).is_empty()) =>
            {
                self.elementwise(&callee.name, args, keep, sizes, expr.span)
            }
            _ if self.labels_in(expr).is_empty() => self.unindexed(expr),
            ExprKind::Binary {
                op: BinaryOp::Mul | BinaryOp::Div,
                ..
            } => self.term(expr, keep, sizes),
            _ if self.operand_parts(expr).is_some() => self.term(expr, keep, sizes),
            _ => Err(not_in_equations(expr.span).into()),
        }
    }

    /// A part without index variables: a number or a 0-d tensor.
    fn unindexed(&mut self, expr: &Expr) -> Flow<Indexed> {
        match self.eval(expr)? {
            value @ (Value::Int(_) | Value::Float(_) | Value::Bool(_)) => {
                Ok(Indexed::Scalar(value))
            }
            Value::Tensor(t) if t.dims().is_empty() => Ok(Indexed::Scalar(Value::Tensor(t))),
            other => Err(LangError::at(
                format!(
                    "an equation's operand must be indexed, found {}",
                    other.type_name()
                ),
                expr.span,
            )
            .with_hint("name its dimensions, as in `X[i, j]`")
            .into()),
        }
    }

    /// A term: its factors multiplied and summed over what is not kept.
    fn term(&mut self, expr: &Expr, keep: &[String], sizes: &mut Sizes) -> Flow<Indexed> {
        let factors = equation::factors(expr);
        let labels: Vec<Vec<String>> = factors.iter().map(|(f, _)| self.labels_in(f)).collect();
        let mut tensors = Vec::new();
        let mut numbers = Vec::new();
        for (i, &(factor, divides)) in factors.iter().enumerate() {
            let part = match self.operand_parts(factor) {
                Some((base, args)) => {
                    let (t, positions) = self.operand_tensor(base, args, factor.span)?;
                    self.label_sizes(&t, &positions, sizes)?;
                    self.select_fixed(t, &positions)?
                }
                None => {
                    let mut inner_keep = keep.to_vec();
                    let siblings = labels.iter().enumerate().filter(|(j, _)| *j != i);
                    inner_keep.extend(siblings.flat_map(|(_, l)| l.iter().cloned()));
                    self.indexed(factor, &inner_keep, sizes)?
                }
            };
            match part {
                Indexed::Scalar(v) => numbers.push((v, divides)),
                Indexed::Tensor(t, l) if divides => {
                    tensors.push((reciprocal(&t).map_err(|e| e.or_at(factor.span))?, l))
                }
                Indexed::Tensor(t, l) => tensors.push((t, l)),
            }
        }
        let mut result = contract(tensors, keep).map_err(|e| e.or_at(expr.span))?;
        for (number, divides) in numbers {
            let op = if divides {
                BinaryOp::Div
            } else {
                BinaryOp::Mul
            };
            result = scale(op, result, &number).map_err(|e| e.or_at(expr.span))?;
        }
        Ok(result)
    }

    /// `f(indexed, more...)` for an elementwise builtin `f`.
    fn elementwise(
        &mut self,
        name: &str,
        args: &[Expr],
        keep: &[String],
        sizes: &mut Sizes,
        span: Span,
    ) -> Flow<Indexed> {
        let (labels, first) = match self.indexed(&args[0], keep, sizes)? {
            Indexed::Scalar(v) => (None, v),
            Indexed::Tensor(t, labels) => (Some(labels), Value::tensor(t)),
        };
        let mut values = vec![first];
        let mut spans = vec![args[0].span];
        for arg in &args[1..] {
            values.push(self.eval(arg)?);
            spans.push(arg.span);
        }
        let builtin = crate::builtins::find(name)
            .ok_or_else(|| LangError::internal(format!("no builtin `{name}` for an equation")))?;
        let out = self.call_builtin(builtin, &values, &spans, span)?;
        match (labels, out) {
            (Some(labels), Value::Tensor(t)) => Ok(Indexed::Tensor(t.to_dense()?, labels)),
            (_, out) => Ok(Indexed::Scalar(out)),
        }
    }
}

fn not_in_equations(span: Span) -> LangError {
    LangError::at("this cannot take indexed operands in an equation", span).with_hint(format!(
        "an equation's right side holds products, sums, `-` and the elementwise functions {}",
        ELEMENTWISE.join(", ")
    ))
}

fn only_on_left(name: &str, span: Span) -> LangError {
    LangError::at(format!("index `{name}` is only on the left side"), span)
        .with_hint("every index of the left side must appear on the right side")
}
