//! A term's tensors contracted by the einsum its plan holds, planned for
//! the operands' sizes on the term's first run and kept while they stay
//! the same.

use super::super::Interpreter;
use super::algebra::{common_dtype, dense_as};
use super::plan::Term;
use crate::error::Result;
use crate::tensor::Tensor;

impl Interpreter {
    /// The product of a term's tensors, summed as its spec says.
    pub(super) fn contract(&mut self, term: &Term, tensors: &[Tensor]) -> Result<Tensor> {
        let dtype = common_dtype(tensors.iter())?;
        let shapes: Vec<Vec<usize>> = tensors.iter().map(Tensor::dims).collect();
        let plan = term.contraction(&shapes)?;
        let operands = (tensors.iter())
            .map(|t| dense_as(t, dtype))
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::Dense(plan.run(&operands)?))
    }
}
