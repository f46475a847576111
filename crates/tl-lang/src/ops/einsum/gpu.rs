//! A [`Contraction`] run on a GPU through the engine's public ops, for
//! float32 operands: each pairwise product is one cuBLAS batched matrix
//! product (a broadcast multiply is one whose inner size is 1), a letter only
//! one operand has is summed by a product with ones, and permutations are
//! axis swaps. A plan with diagonals (`ii`) runs on the CPU instead.
//! Results agree with the CPU's to rounding: cuBLAS sums in its own order.

use tl_engine::ops::{GpuOps, GpuTensor};

use super::plan::{Contraction, Product};
use crate::error::{LangError, Result};

impl Contraction {
    /// Whether the GPU can run the plan (it has no diagonal to take).
    pub fn runs_on_gpu(&self) -> bool {
        !self.prepare.iter().any(|p| p.has_diagonals)
    }

    /// Runs the plan on the GPU of `ops` over float32 `operands` there,
    /// which must have the shapes it was made for.
    pub fn run_on_gpu(&self, ops: &GpuOps, operands: Vec<GpuTensor>) -> Result<GpuTensor> {
        if !self.runs_on_gpu() {
            return Err(LangError::internal("a diagonal einsum sent to the GPU"));
        }
        let mut terms = Vec::with_capacity(operands.len());
        for (prepare, t) in self.prepare.iter().zip(operands) {
            terms.push(sum_axes(ops, t, &prepare.summed)?);
        }
        for step in &self.steps {
            let b = terms.remove(step.second);
            let a = terms.remove(step.first);
            terms.push(multiply(ops, &step.product, &a, &b)?.reshape(step.dims.clone())?);
        }
        let last = terms
            .pop()
            .ok_or_else(|| LangError::internal("einsum without operands"))?;
        let out = match &self.output_order {
            Some(order) => permute(ops, last, order)?,
            None => last,
        };
        Ok(out.reshape(self.output_dims.clone())?)
    }
}

/// One pairwise product on the GPU, as `[batches, m, n]`.
fn multiply(ops: &GpuOps, p: &Product, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor> {
    let permuted = |t: &GpuTensor, order: &Option<Vec<usize>>| match order {
        Some(order) => permute(ops, t.clone(), order),
        None => Ok(t.clone()),
    };
    let a = permuted(a, &p.a_order)?.reshape(vec![p.batches, p.m, p.k])?;
    let b = permuted(b, &p.b_order)?.reshape(vec![p.batches, p.k, p.n])?;
    Ok(ops.matmul(&a, &b)?)
}

/// `t` summed over `axes`: the kept axes first, then a product with a
/// vector of ones over the summed ones.
fn sum_axes(ops: &GpuOps, t: GpuTensor, axes: &[usize]) -> Result<GpuTensor> {
    if axes.is_empty() {
        return Ok(t);
    }
    let dims = t.dims().to_vec();
    let kept: Vec<usize> = (0..dims.len()).filter(|a| !axes.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let (rows, summed): (usize, usize) = (
        kept.iter().map(|&a| dims[a]).product(),
        axes.iter().map(|&a| dims[a]).product(),
    );
    let t = permute(ops, t, &order)?.reshape(vec![1, rows, summed])?;
    let ones = ops.upload(&vec![1.0; summed], vec![1, summed, 1])?;
    let out = ops.matmul(&t, &ones)?;
    Ok(out.reshape(kept.iter().map(|&a| dims[a]).collect())?)
}

/// `t`'s axes put in `order` (axis `order[p]` becomes axis `p`), by swaps of
/// two axes at a time.
fn permute(ops: &GpuOps, mut t: GpuTensor, order: &[usize]) -> Result<GpuTensor> {
    // Which original axis sits at each position now.
    let mut at: Vec<usize> = (0..order.len()).collect();
    for (p, &wanted) in order.iter().enumerate() {
        let Some(q) = at.iter().position(|&a| a == wanted) else {
            return Err(LangError::internal("a permutation without that axis"));
        };
        if q != p {
            t = ops.transpose(&t, p, q)?;
            at.swap(p, q);
        }
    }
    Ok(t)
}
