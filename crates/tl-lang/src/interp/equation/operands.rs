//! Evaluating an equation's operands: the tensor each names, checked
//! against its indices (one per dimension, one size per label), with the
//! positions fixed by a variable or a domain element selected away.

use tl_syntax::Span;

use super::super::{Flow, Interpreter};
use super::algebra::Indexed;
use super::plan::{Base, Label, Operand, Position};
use crate::equation;
use crate::error::{LangError, Result};
use crate::tensor::Tensor;
use crate::value::Value;

/// Each label's size while an equation runs, with where it was first
/// sized, and the labels' names for messages.
pub(super) struct Sizes<'p> {
    known: Vec<Option<(usize, Span)>>,
    names: &'p [String],
}

impl<'p> Sizes<'p> {
    pub fn new(names: &'p [String]) -> Self {
        Sizes {
            known: vec![None; names.len()],
            names,
        }
    }

    pub fn get(&self, label: Label) -> Option<usize> {
        self.known
            .get(label)
            .copied()
            .flatten()
            .map(|(size, _)| size)
    }

    /// Records the sizes of an operand's labels, or fails where one disagrees.
    fn record(&mut self, dims: &[usize], positions: &[Position]) -> Result<()> {
        for (&size, position) in dims.iter().zip(positions) {
            let Position::Label(label, span) = position else {
                continue;
            };
            let Some(slot) = self.known.get_mut(*label) else {
                return Err(LangError::internal("a label outside its equation"));
            };
            let (known, _) = *slot.get_or_insert((size, *span));
            if known != size {
                let name = &self.names[*label];
                return Err(LangError::at(
                    format!("index `{name}` is {size} here, but {known} where it was first used"),
                    *span,
                ));
            }
        }
        Ok(())
    }
}

impl Interpreter {
    /// The operand's tensor, its labels sized, its fixed positions selected.
    pub(super) fn operand_value<'p>(
        &mut self,
        op: &'p Operand,
        sizes: &mut Sizes,
    ) -> Flow<Indexed<'p>> {
        let t = self.operand_tensor(op)?;
        sizes.record(&t.dims(), &op.positions)?;
        Ok(Indexed::Tensor(
            self.select_fixed(t, &op.positions)?,
            &op.labels,
        ))
    }

    /// The tensor the operand names, checked to have one index per dimension.
    pub(super) fn operand_tensor(&mut self, op: &Operand) -> Flow<Tensor> {
        let value = match &op.base {
            Base::Value(base) => self.eval(base)?,
            Base::Relation(name) => self.lookup(name, op.span)?,
        };
        let Value::Tensor(t) = value else {
            let span = match &op.base {
                Base::Value(base) => base.span,
                Base::Relation(_) => op.span,
            };
            return Err(LangError::at(
                format!("cannot index {} in an equation", value.type_name()),
                span,
            )
            .into());
        };
        let rank = t.dims().len();
        if op.positions.len() != rank {
            let message = equation::rank_mismatch(&t.type_string(), rank, op.positions.len());
            return Err(LangError::at(message, op.span).into());
        }
        Ok(t)
    }

    /// Records the sizes of an operand's labels (a recursive equation's
    /// start, whose operands are not contracted yet).
    pub(super) fn size_operand(&mut self, op: &Operand, sizes: &mut Sizes) -> Flow<Tensor> {
        let t = self.operand_tensor(op)?;
        sizes.record(&t.dims(), &op.positions)?;
        Ok(t)
    }

    /// The operand with its fixed positions selected away.
    fn select_fixed(&mut self, t: Tensor, positions: &[Position]) -> Flow<Tensor> {
        if positions.iter().all(|p| matches!(p, Position::Label(..))) {
            return Ok(t);
        }
        let mut t = t.to_dense()?;
        let mut axis = 0;
        for position in positions {
            let at = match position {
                Position::Label(..) => {
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
        Ok(Tensor::Dense(t))
    }
}
