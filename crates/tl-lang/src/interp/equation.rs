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

use std::collections::HashMap;

use candle_core::{DType as CandleDType, Tensor as CandleTensor};
use tl_syntax::ast::{BinaryOp, Expr, ExprKind, IndexArg};
use tl_syntax::Span;

use super::{Flow, Interpreter};
use crate::equation::{self, EquationRef, ELEMENTWISE};
use crate::error::{LangError, Result};
use crate::ops::{self, einsum, type_of};
use crate::value::Value;

/// Rounds a recursive equation may take to stop changing.
const MAX_FIXPOINT_ROUNDS: usize = 100_000;

/// A part of an equation's right side, evaluated.
enum Indexed {
    /// A number, or a tensor without indices.
    Scalar(Value),
    /// A tensor whose dimensions are named by index variables.
    Tensor(CandleTensor, Vec<String>),
}

/// Each index variable's size, with where it was first sized.
type Sizes = HashMap<String, (usize, Span)>;

/// One position of an indexed operand.
enum Position<'e> {
    /// An index variable.
    Label(&'e str, Span),
    /// A fixed position: an int expression.
    At(&'e Expr),
    /// A fixed position: an element of the relation column's domain.
    Element(u32),
}

impl Interpreter {
    /// Runs an equation: binds its tensor as a global (file level) or as a
    /// local of the running body.
    pub(crate) fn run_equation(&mut self, eq: &EquationRef, global: bool) -> Flow<()> {
        let value = match eq.is_recursive() {
            true => self.solve_recursive(eq, global)?,
            false => self.equation_value(eq)?,
        };
        self.bind_equation(eq, value, global);
        Ok(())
    }

    fn bind_equation(&mut self, eq: &EquationRef, value: Value, global: bool) {
        match global {
            true => {
                self.globals.insert(eq.name.to_string(), value);
            }
            false => self.declare(eq.name, value),
        }
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
    fn solve_recursive(&mut self, eq: &EquationRef, global: bool) -> Flow<Value> {
        let mut current = self.recursive_start(eq)?;
        for _ in 0..MAX_FIXPOINT_ROUNDS {
            self.check_interrupt(eq.span)?;
            self.bind_equation(eq, current.clone(), global);
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
            if !matches!(&base.kind, ExprKind::Var(n) if n == skip) {
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
            ExprKind::Call { callee, args }
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

    /// The base and indices of an indexed operand: `X[i, j]`, `(A + B)[i]`,
    /// or a relation written as an atom, `R(x, y)`.
    fn operand_parts<'e>(&self, expr: &'e Expr) -> Option<(&'e Expr, OperandArgs<'e>)> {
        match &expr.kind {
            ExprKind::Index { base, indices } => Some((base, OperandArgs::Index(indices))),
            ExprKind::Call { callee, args }
                if self
                    .logic
                    .as_ref()
                    .is_some_and(|l| l.program.relation(&callee.name).is_some())
                    && !self.functions.contains_key(&callee.name) =>
            {
                Some((expr, OperandArgs::Atom(&callee.name, args)))
            }
            _ => None,
        }
    }

    /// The operand's tensor and what each of its positions is.
    fn operand_tensor<'e>(
        &mut self,
        base: &'e Expr,
        args: OperandArgs<'e>,
        span: Span,
    ) -> Flow<(CandleTensor, Vec<Position<'e>>)> {
        let (value, written): (Value, Vec<&'e Expr>) = match args {
            OperandArgs::Index(indices) => {
                let written = indices
                    .iter()
                    .map(|a| match a {
                        IndexArg::Expr(e) => Ok(e),
                        IndexArg::Full(s) => Err(LangError::at("an equation names each index", *s)
                            .with_hint("write an index variable, as in `X[i, j]`")),
                    })
                    .collect::<Result<Vec<_>>>()?;
                (self.eval(base)?, written)
            }
            OperandArgs::Atom(name, args) => (self.lookup(name, span)?, args.iter().collect()),
        };
        let Value::Tensor(t) = value else {
            return Err(LangError::at(
                format!("cannot index {} in an equation", value.type_name()),
                base.span,
            )
            .into());
        };
        let t = t.to_dense()?;
        if written.len() != t.rank() {
            return Err(LangError::at(
                equation::rank_mismatch(&type_of(&t), t.rank(), written.len()),
                span,
            )
            .into());
        }
        let relation = self.relation_of(base, args);
        let positions = written
            .iter()
            .enumerate()
            .map(|(axis, e)| self.position(e, relation, axis))
            .collect();
        Ok((t, positions))
    }

    /// The relation an operand's base names, unless a variable shadows it.
    fn relation_of(&self, base: &Expr, args: OperandArgs) -> Option<usize> {
        let name = match (args, &base.kind) {
            (OperandArgs::Atom(name, _), _) => name,
            (_, ExprKind::Var(name)) => name.as_str(),
            _ => return None,
        };
        if self.is_variable(name) {
            return None;
        }
        self.logic.as_ref()?.program.relation(name)
    }

    fn position<'e>(&self, e: &'e Expr, relation: Option<usize>, axis: usize) -> Position<'e> {
        let ExprKind::Var(name) = &e.kind else {
            return Position::At(e);
        };
        let element = relation.and_then(|r| {
            let program = &self.logic.as_ref()?.program;
            program.element_of(*program.relations[r].domains.get(axis)?, name)
        });
        match element {
            Some(p) => Position::Element(p),
            None if self.is_variable(name) => Position::At(e),
            None => Position::Label(name, e.span),
        }
    }

    /// Records each index variable's size, or fails where a size disagrees.
    fn label_sizes(
        &self,
        t: &CandleTensor,
        positions: &[Position],
        sizes: &mut Sizes,
    ) -> Result<()> {
        for (&size, position) in t.dims().iter().zip(positions) {
            let Position::Label(name, span) = position else {
                continue;
            };
            let (known, _) = *sizes.entry(name.to_string()).or_insert((size, *span));
            if known != size {
                return Err(LangError::at(
                    format!("index `{name}` is {size} here, but {known} where it was first used"),
                    *span,
                ));
            }
        }
        Ok(())
    }

    /// The operand with its fixed positions selected away.
    fn select_fixed(&mut self, mut t: CandleTensor, positions: &[Position]) -> Flow<Indexed> {
        let mut labels = Vec::new();
        let mut axis = 0;
        for position in positions {
            let at = match position {
                Position::Label(name, _) => {
                    labels.push(name.to_string());
                    axis += 1;
                    continue;
                }
                Position::Element(p) => *p as i64,
                Position::At(e) => self.eval_int(e)?,
            };
            let n = t.dims()[axis] as i64;
            let i = if at < 0 { at + n } else { at };
            if !(0..n).contains(&i) {
                return Err(LangError::user(format!(
                    "index {at} is out of range for a dimension of size {n}"
                ))
                .into());
            }
            t = t
                .narrow(axis, i as usize, 1)
                .and_then(|t| t.squeeze(axis))
                .map_err(LangError::from)?;
        }
        Ok(Indexed::Tensor(t, labels))
    }

    /// The index variables in `expr`, in order of first appearance.
    fn labels_in(&self, expr: &Expr) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_labels(expr, &mut out);
        out
    }

    fn collect_labels(&self, expr: &Expr, out: &mut Vec<String>) {
        if let Some((base, args)) = self.operand_parts(expr) {
            let relation = self.relation_of(base, args);
            let written: Vec<&Expr> = match args {
                OperandArgs::Index(indices) => indices
                    .iter()
                    .filter_map(|a| match a {
                        IndexArg::Expr(e) => Some(e),
                        IndexArg::Full(_) => None,
                    })
                    .collect(),
                OperandArgs::Atom(_, args) => args.iter().collect(),
            };
            for (axis, e) in written.into_iter().enumerate() {
                if let Position::Label(name, _) = self.position(e, relation, axis) {
                    if !out.iter().any(|l| l == name) {
                        out.push(name.to_string());
                    }
                }
            }
            if let OperandArgs::Index(_) = args {
                self.collect_labels(base, out);
            }
            return;
        }
        match &expr.kind {
            ExprKind::Binary { lhs, rhs, .. } => {
                self.collect_labels(lhs, out);
                self.collect_labels(rhs, out);
            }
            ExprKind::Unary { operand, .. } => self.collect_labels(operand, out),
            ExprKind::Call { args, .. } => args.iter().for_each(|a| self.collect_labels(a, out)),
            _ => {}
        }
    }

    /// Whether `name` is a variable of the running frame or a global.
    pub(crate) fn is_variable(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains_key(name)) || self.globals.contains_key(name)
    }
}

/// The indices of an operand: `X[...]`'s, or a relation atom's arguments.
#[derive(Clone, Copy)]
enum OperandArgs<'e> {
    Index(&'e [IndexArg]),
    Atom(&'e str, &'e [Expr]),
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

/// `1 / t` for a divisor with indices (ints and bools become float32).
fn reciprocal(t: &CandleTensor) -> Result<CandleTensor> {
    let t = match t.dtype() {
        CandleDType::F16 | CandleDType::BF16 | CandleDType::F32 | CandleDType::F64 => t.clone(),
        _ => t.to_dtype(CandleDType::F32)?,
    };
    Ok(t.recip()?)
}

/// The factors' product, summed over the indices not in `keep`.
fn contract(tensors: Vec<(CandleTensor, Vec<String>)>, keep: &[String]) -> Result<Indexed> {
    if tensors.is_empty() {
        return Ok(Indexed::Scalar(Value::Int(1)));
    }
    let dtype = common_dtype(tensors.iter().map(|(t, _)| t))?;
    let mut letters: Vec<&str> = Vec::new();
    let mut output = Vec::new();
    let mut specs = Vec::new();
    for (_, labels) in &tensors {
        let mut spec = String::new();
        for label in labels {
            let i = match letters.iter().position(|l| l == label) {
                Some(i) => i,
                None => {
                    letters.push(label);
                    if keep.contains(label) {
                        output.push(letters.len() - 1);
                    }
                    letters.len() - 1
                }
            };
            spec.push(letter(i)?);
        }
        specs.push(spec);
    }
    let out_spec: String = output.iter().map(|&i| letter(i)).collect::<Result<_>>()?;
    let spec = format!("{}->{out_spec}", specs.join(","));
    let operands = (tensors.iter())
        .map(|(t, _)| Ok(t.to_dtype(dtype)?))
        .collect::<Result<Vec<_>>>()?;
    let t = einsum::einsum(&spec, &operands)?;
    let labels = output.iter().map(|&i| letters[i].to_string()).collect();
    Ok(Indexed::Tensor(t, labels))
}

/// The `i`-th einsum letter.
fn letter(i: usize) -> Result<char> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    LETTERS
        .get(i)
        .map(|&b| b as char)
        .ok_or_else(|| LangError::user("an equation's term has more than 52 different indices"))
}

/// The type factors or terms are combined in: bools count as 0/1 next to
/// numbers; numbers of different types do not mix.
fn common_dtype<'a>(tensors: impl Iterator<Item = &'a CandleTensor>) -> Result<CandleDType> {
    let mut found: Option<&CandleTensor> = None;
    for t in tensors {
        match found {
            _ if t.dtype() == CandleDType::U8 => {}
            Some(f) if f.dtype() != t.dtype() => {
                return Err(LangError::user(format!(
                    "cannot combine {} and {} in an equation",
                    type_of(f),
                    type_of(t)
                ))
                .with_hint("convert one with to_dtype(x, \"float32\")"))
            }
            _ => found = Some(t),
        }
    }
    Ok(found.map_or(CandleDType::U8, |t| t.dtype()))
}

/// `result * number` or `result / number`.
fn scale(op: BinaryOp, result: Indexed, number: &Value) -> Result<Indexed> {
    match result {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(ops::binary(op, &v, number)?)),
        Indexed::Tensor(t, labels) => {
            let t = if t.dtype() == CandleDType::U8 {
                t.to_dtype(CandleDType::F32)?
            } else {
                t
            };
            let out = ops::binary(op, &Value::tensor(t), number)?;
            Ok(Indexed::Tensor(dense(out)?, labels))
        }
    }
}

/// A function applied to the value, keeping the indices.
fn map(x: Indexed, f: impl Fn(&Value) -> Result<Value>) -> Result<Indexed> {
    match x {
        Indexed::Scalar(v) => Ok(Indexed::Scalar(f(&v)?)),
        Indexed::Tensor(t, labels) => Ok(Indexed::Tensor(dense(f(&Value::tensor(t))?)?, labels)),
    }
}

fn dense(value: Value) -> Result<CandleTensor> {
    match value {
        Value::Tensor(t) => t.to_dense(),
        other => Err(LangError::internal(format!(
            "an equation's tensor became {}",
            other.type_name()
        ))),
    }
}

/// `l + r` or `l - r`, the indices lined up (a missing one broadcasts).
fn add(op: BinaryOp, l: Indexed, r: Indexed) -> Result<Indexed> {
    let ((lt, ll), (rt, rl)) = match (l, r) {
        (Indexed::Scalar(a), Indexed::Scalar(b)) => {
            return Ok(Indexed::Scalar(ops::binary(op, &a, &b)?))
        }
        (Indexed::Tensor(t, labels), Indexed::Scalar(s)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                dense(ops::binary(op, &Value::tensor(t), &s)?)?,
                labels,
            ));
        }
        (Indexed::Scalar(s), Indexed::Tensor(t, labels)) => {
            let t = numeric(t, &s)?;
            return Ok(Indexed::Tensor(
                dense(ops::binary(op, &s, &Value::tensor(t))?)?,
                labels,
            ));
        }
        (Indexed::Tensor(a, la), Indexed::Tensor(b, lb)) => ((a, la), (b, lb)),
    };
    let mut labels = ll.clone();
    labels.extend(rl.iter().filter(|l| !ll.contains(l)).cloned());
    let (a, b) = (aligned(&lt, &ll, &labels)?, aligned(&rt, &rl, &labels)?);
    let both_bool = a.dtype() == CandleDType::U8 && b.dtype() == CandleDType::U8;
    let out = match (both_bool, op) {
        // On relations, `+` is "or".
        (true, BinaryOp::Add) => a.broadcast_maximum(&b)?,
        (true, _) => {
            return Err(
                LangError::user("cannot subtract bool tensors in an equation")
                    .with_hint("use a rule with a negated atom, or convert to numbers"),
            )
        }
        _ => {
            let dtype = common_dtype([&a, &b].into_iter())?;
            let (a, b) = (a.to_dtype(dtype)?, b.to_dtype(dtype)?);
            dense(ops::binary(op, &Value::tensor(a), &Value::tensor(b))?)?
        }
    };
    Ok(Indexed::Tensor(out, labels))
}

/// A bool tensor as float32 when it meets a number.
fn numeric(t: CandleTensor, other: &Value) -> Result<CandleTensor> {
    let is_number = matches!(other, Value::Int(_) | Value::Float(_));
    Ok(match (t.dtype(), is_number) {
        (CandleDType::U8, true) => t.to_dtype(CandleDType::F32)?,
        _ => t,
    })
}

/// `t` (dimensions named `from`) permuted into the order of `to`, with a
/// size-1 dimension for each name of `to` it lacks.
fn aligned(t: &CandleTensor, from: &[String], to: &[String]) -> Result<CandleTensor> {
    let order: Vec<usize> = (to.iter())
        .filter_map(|l| from.iter().position(|f| f == l))
        .collect();
    let permuted = t.permute(order)?;
    let shape: Vec<usize> = (to.iter())
        .map(|l| from.iter().position(|f| f == l).map_or(1, |i| t.dims()[i]))
        .collect();
    Ok(permuted.reshape(shape)?)
}
