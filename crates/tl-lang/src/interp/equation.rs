//! Running index equations. An equation is planned once (`plan.rs`: which
//! names are indices, the terms, their einsum specs) and its plan evaluated
//! bottom-up into tensors whose dimensions are named by labels
//! ([`Indexed`]):
//!
//! - a *term* (a maximal product, `A[i, j] B[j] / 2.0`) contracts its indexed
//!   factors (`contract.rs`), summing every index that is neither on the left
//!   nor in a factor of an enclosing product (so `A[i, j] (B[j] + C[j])` sums
//!   over `j` once, outside), then applies its number factors;
//! - `+` and `-` line the terms' indices up and broadcast;
//! - an elementwise function (`relu`, `sigmoid(x, T)`, `step`, ...) applies
//!   to its indexed argument, after that argument's own sums.
//!
//! Bools are relations' 0/1 tensors: a product of bools is a join (`einsum`
//! on bools is "there exists"), `+` of bools is "or"; next to numbers they
//! count as 0 and 1. A recursive equation is iterated from zeros until it
//! no longer changes.

mod algebra;
mod build;
mod contract;
mod operands;
mod plan;

use std::cell::RefCell;
use std::rc::Rc;

use candle_core::Tensor as CandleTensor;
use tl_syntax::ast::{Expr, Resolved};
use tl_syntax::{DType, Span};

use super::{Flow, Interpreter};
use crate::equation::EquationRef;
use crate::error::LangError;
use crate::ops;
use crate::tensor::candle_dtype;
use crate::value::Value;
use algebra::{add, aligned, map, reciprocal, scale, Indexed};
use operands::Sizes;
use plan::{Node, Part, Plan, Term};

/// Where an equation's tensor goes: a global (file level), or in a body the
/// variable of its name, or else a new local in the slot `declares`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Binding {
    Global,
    Body { declares: Resolved },
}

/// Rounds a recursive equation may take to stop changing.
const MAX_FIXPOINT_ROUNDS: usize = 100_000;

/// A body's equation as compiled: the assignment, and its plan once made,
/// kept for the next run.
pub(crate) struct EquationSite {
    target: Expr,
    value: Expr,
    declares: Resolved,
    span: Span,
    plan: RefCell<Option<Rc<Plan>>>,
}

impl EquationSite {
    pub fn new(target: &Expr, value: &Expr, declares: Resolved, span: Span) -> Self {
        EquationSite {
            target: target.clone(),
            value: value.clone(),
            declares,
            span,
            plan: RefCell::new(None),
        }
    }
}

impl Interpreter {
    /// Runs an equation: binds its tensor as a global (file level) or as a
    /// local of the running body.
    pub(crate) fn run_equation(&mut self, eq: &EquationRef, binding: Binding) -> Flow<()> {
        let plan = self.plan_equation(eq)?;
        self.run_plan(&plan, binding)
    }

    /// Runs a compiled body's equation with the plan made on its first run,
    /// unless definitions since then may have changed what its names are.
    pub(crate) fn run_equation_site(&mut self, site: &EquationSite) -> Flow<()> {
        let kept = site.plan.borrow().clone();
        let plan = match kept {
            Some(plan) if plan.made_at == self.definitions => plan,
            _ => match self.equation_of(&site.target, &site.value, site.span) {
                Some(Ok(eq)) => {
                    let plan = Rc::new(self.plan_equation(&eq)?);
                    *site.plan.borrow_mut() = Some(plan.clone());
                    plan
                }
                Some(Err(error)) => return Err(error.into()),
                // Seen as an equation where it was resolved, as a plain
                // assignment where it runs: the assignment it is.
                None => {
                    let value = self.eval(&site.value)?;
                    return self.assign(&site.target, value);
                }
            },
        };
        let declares = site.declares;
        self.run_plan(&plan, Binding::Body { declares })
    }

    fn run_plan(&mut self, plan: &Plan, binding: Binding) -> Flow<()> {
        let value = match plan.recursive {
            true => self.solve_recursive(plan, binding)?,
            false => self.plan_value(plan)?,
        };
        self.bind_equation(plan, value, binding)
    }

    /// At file level, defines the global; in a body, sets the variable if
    /// there is one (as `=` would, so an equation in a loop updates what the
    /// loop's code after it sees), else declares it here.
    fn bind_equation(&mut self, plan: &Plan, value: Value, binding: Binding) -> Flow<()> {
        match binding {
            Binding::Global => self.set_global(&plan.name, value),
            Binding::Body { .. } if self.is_variable(&plan.name) => {
                let unresolved = Resolved::Unresolved;
                self.set_variable(&plan.name, unresolved, value, plan.name_span)?;
            }
            Binding::Body { declares } => self.declare(declares, value)?,
        }
        Ok(())
    }

    /// The left side's tensor: the right side with its dimensions put in
    /// the left side's order.
    fn plan_value(&mut self, plan: &Plan) -> Flow<Value> {
        let mut sizes = Sizes::new(&plan.names);
        let (t, labels) = match self.node(&plan.root, &mut sizes)? {
            Indexed::Scalar(value) => return Ok(value),
            Indexed::Tensor(t, labels) => (t, labels),
        };
        let left: Vec<usize> = plan.left.iter().map(|(l, _)| *l).collect();
        if labels == left.as_slice() {
            return Ok(Value::Tensor(t));
        }
        let t = aligned(&t, labels, &left)
            .and_then(|t| Ok(t.contiguous()?))
            .map_err(|e| e.or_at(plan.span))?;
        Ok(Value::tensor(t))
    }

    /// Iterates a recursive equation from zeros to a fixpoint.
    fn solve_recursive(&mut self, plan: &Plan, binding: Binding) -> Flow<Value> {
        let mut current = self.recursive_start(plan)?;
        for _ in 0..MAX_FIXPOINT_ROUNDS {
            self.check_interrupt(plan.span)?;
            self.bind_equation(plan, current.clone(), binding)?;
            let next = self.plan_value(plan)?;
            if ops::values_equal(&next, &current).map_err(|e| e.or_at(plan.span))? {
                return Ok(next);
            }
            current = next;
        }
        Err(LangError::at(
            format!(
                "`{}` did not stop changing after {MAX_FIXPOINT_ROUNDS} rounds",
                plan.name
            ),
            plan.span,
        )
        .with_hint(
            "a recursive equation must reach a fixpoint, as one over bools or with `step` does",
        )
        .into())
    }

    /// Zeros of the left side's shape, in the type of the right side's other
    /// operands (bool when they all are).
    fn recursive_start(&mut self, plan: &Plan) -> Flow<Value> {
        let mut sizes = Sizes::new(&plan.names);
        let mut dtype = DType::Bool;
        let mut operands = Vec::new();
        plan.root.operands(&mut operands);
        for op in operands.into_iter().filter(|op| !op.is_named(&plan.name)) {
            let t = self.size_operand(op, &mut sizes)?;
            if dtype == DType::Bool {
                dtype = t.dtype();
            }
        }
        let mut dims = Vec::new();
        for &(label, span) in &plan.left {
            match sizes.get(label) {
                Some(size) => dims.push(size),
                None => {
                    return Err(LangError::at(
                        format!(
                            "cannot tell the size of index `{}`: no other operand has it",
                            plan.names[label]
                        ),
                        span,
                    )
                    .into())
                }
            }
        }
        let device = &candle_core::Device::Cpu;
        let zeros =
            CandleTensor::zeros(dims, candle_dtype(dtype), device).map_err(LangError::from)?;
        Ok(Value::tensor(zeros))
    }

    /// A part of the right side, evaluated.
    fn node<'p>(&mut self, node: &'p Node, sizes: &mut Sizes) -> Flow<Indexed<'p>> {
        match node {
            Node::Constant(expr) => self.constant(expr),
            Node::Sum {
                op,
                lhs,
                rhs,
                labels,
                span,
            } => {
                let l = self.node(lhs, sizes)?;
                let r = self.node(rhs, sizes)?;
                Ok(add(*op, l, r, labels).map_err(|e| e.or_at(*span))?)
            }
            Node::Unary { op, operand, span } => {
                let inner = self.node(operand, sizes)?;
                Ok(map(inner, |v| ops::unary(*op, v)).map_err(|e| e.or_at(*span))?)
            }
            Node::Elementwise {
                builtin,
                first,
                rest,
                span,
            } => {
                let (labels, first_value) = match self.node(first, sizes)? {
                    Indexed::Scalar(v) => (None, v),
                    Indexed::Tensor(t, labels) => (Some(labels), Value::Tensor(t)),
                };
                let mut values = vec![first_value];
                let mut spans = vec![first_span(first)];
                for arg in rest {
                    values.push(self.eval(arg)?);
                    spans.push(arg.span);
                }
                let out = self.call_builtin(builtin, &values, &spans, *span)?;
                match (labels, out) {
                    (Some(labels), Value::Tensor(t)) => Ok(Indexed::Tensor(t, labels)),
                    (_, out) => Ok(Indexed::Scalar(out)),
                }
            }
            Node::Term(term) => self.term(term, sizes),
        }
    }

    /// A part without index variables: a number or a 0-d tensor.
    fn constant<'p>(&mut self, expr: &Expr) -> Flow<Indexed<'p>> {
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
    fn term<'p>(&mut self, term: &'p Term, sizes: &mut Sizes) -> Flow<Indexed<'p>> {
        let mut tensors = Vec::with_capacity(term.factors.len());
        let mut numbers = Vec::new();
        for factor in &term.factors {
            let part = match &factor.part {
                Part::Operand(op) => self.operand_value(op, sizes)?,
                Part::Node(node) => self.node(node, sizes)?,
            };
            match part {
                Indexed::Scalar(v) => numbers.push((v, factor.divides)),
                Indexed::Tensor(t, _) if factor.divides => {
                    tensors.push(reciprocal(&t).map_err(|e| e.or_at(factor.span))?)
                }
                Indexed::Tensor(t, _) => tensors.push(t),
            }
        }
        let product = self
            .contract(term, &tensors)
            .map_err(|e| e.or_at(term.span))?;
        let mut result = Indexed::Tensor(product, &term.output);
        for (number, divides) in numbers {
            let op = match divides {
                true => tl_syntax::ast::BinaryOp::Div,
                false => tl_syntax::ast::BinaryOp::Mul,
            };
            result = scale(op, result, &number).map_err(|e| e.or_at(term.span))?;
        }
        Ok(result)
    }
}

/// Where an elementwise function's first argument is written (for its
/// errors).
fn first_span(first: &Node) -> Span {
    match first {
        Node::Constant(e) => e.span,
        Node::Sum { span, .. } | Node::Unary { span, .. } | Node::Elementwise { span, .. } => *span,
        Node::Term(term) => term.span,
    }
}
