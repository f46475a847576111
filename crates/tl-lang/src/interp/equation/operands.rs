//! The operands of an equation: `X[i, j]`, `(A + B)[i]`, a relation's
//! tensor (`Parent[x, y]`, or the atom `Parent(x, y)`), and what each
//! written index is: an index variable, an int, or an element of the
//! relation column's domain.

use candle_core::Tensor as CandleTensor;
use tl_syntax::ast::{Expr, ExprKind, IndexArg};
use tl_syntax::Span;

use super::super::{Flow, Interpreter};
use super::algebra::Indexed;
use super::Sizes;
use crate::equation;
use crate::error::{LangError, Result};
use crate::ops::type_of;
use crate::value::Value;

/// One position of an indexed operand.
pub(super) enum Position<'e> {
    /// An index variable.
    Label(&'e str, Span),
    /// A fixed position: an int expression.
    At(&'e Expr),
    /// A fixed position: an element of the relation column's domain.
    Element(u32),
}

/// The indices of an operand: `X[...]`'s, or a relation atom's arguments.
#[derive(Clone, Copy)]
pub(super) enum OperandArgs<'e> {
    Index(&'e [IndexArg]),
    Atom(&'e str, &'e [Expr]),
}

impl Interpreter {
    /// The base and indices of an indexed operand: `X[i, j]`, `(A + B)[i]`,
    /// or a relation written as an atom, `R(x, y)`.
    pub(super) fn operand_parts<'e>(&self, expr: &'e Expr) -> Option<(&'e Expr, OperandArgs<'e>)> {
        match &expr.kind {
            ExprKind::Index { base, indices } => Some((base, OperandArgs::Index(indices))),
            ExprKind::Call { callee, args, .. }
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
    pub(super) fn operand_tensor<'e>(
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
            (_, ExprKind::Var(name, _)) => name.as_str(),
            _ => return None,
        };
        if self.is_variable(name) {
            return None;
        }
        self.logic.as_ref()?.program.relation(name)
    }

    /// What the index `e` at `axis` is: an int expression (a variable), an
    /// element of a domain, or an index variable.
    fn position<'e>(&self, e: &'e Expr, relation: Option<usize>, axis: usize) -> Position<'e> {
        let ExprKind::Var(name, _) = &e.kind else {
            return Position::At(e);
        };
        if self.is_variable(name) {
            return Position::At(e);
        }
        let logic = self.logic.as_ref();
        match logic.and_then(|l| l.program.element_index(relation, axis, name)) {
            Some(p) => Position::Element(p),
            None => Position::Label(name, e.span),
        }
    }

    /// Records each index variable's size, or fails where a size disagrees.
    pub(super) fn label_sizes(
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
    pub(super) fn select_fixed(
        &mut self,
        mut t: CandleTensor,
        positions: &[Position],
    ) -> Flow<Indexed> {
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
    pub(super) fn labels_in(&self, expr: &Expr) -> Vec<String> {
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
}
