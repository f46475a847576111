//! `einsum` in explicit mode (`"ij,jk->ik"`), over any number of operands.
//!
//! The plan ([`Contraction`]): take diagonals for letters repeated within an
//! operand (`ii`), sum away letters that appear in one operand only and not in
//! the output, and then contract the operands two at a time, always the pair
//! whose product is cheapest (the product of the sizes of their letters), so
//! `A[i, j] B[j, k] v[k]` multiplies the matrix by the vector first. Each
//! pairwise step folds the letters into three groups — batch (both operands
//! and what is still needed), contracted (both operands, not needed), and
//! free (one operand) — so it is one batched matmul. That keeps
//! attention-style patterns (`bhqd,bhkd->bhqk`) as fast as `@`. The plan
//! depends on the operands' shapes only, so it can be made once and run
//! again, here on the CPU or, for float32, on a GPU (`gpu.rs`).
//!
//! Element types: floats are summed in their type (half precision in f32;
//! float32 products off the gradient's tape on the engine's `matmul_f32`,
//! each element one fused chain over the summed letters in order);
//! ints in f64 (exact below 2^53) and converted back; bools as bools, where
//! a sum is "any" and a product "and", which makes a bool einsum a relational
//! join ("there exists" over the summed letters), run by `join`'s kernel on
//! bit-packed rows.

use candle_core::{DType as CandleDType, Tensor as CandleTensor};

use super::matmul::engine_product;
use super::type_of;
use crate::error::{LangError, Result};

pub use plan::Contraction;
use plan::{repeated, Product};

/// A parsed spec: one list of letters per operand, and the output's letters.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub inputs: Vec<Vec<char>>,
    pub output: Vec<char>,
}

/// Evaluates `spec` over `operands` (tensors of one element type).
pub fn einsum(spec: &str, operands: &[CandleTensor]) -> Result<CandleTensor> {
    let parsed = parse(spec, operands.len())?;
    common_dtype(operands)?;
    for (letters, t) in parsed.inputs.iter().zip(operands) {
        if letters.len() != t.rank() {
            let written: String = letters.iter().collect();
            return Err(LangError::user(format!(
                "einsum operand \"{written}\" has {} letters, but {} has {} dimensions",
                letters.len(),
                type_of(t),
                t.rank()
            )));
        }
    }
    let shapes: Vec<Vec<usize>> = operands.iter().map(|t| t.dims().to_vec()).collect();
    Contraction::plan(&parsed, &shapes, spec)?.run(operands)
}

impl Contraction {
    /// Runs the plan on the CPU over `operands`, which must have the shapes
    /// it was made for and one element type.
    pub fn run(&self, operands: &[CandleTensor]) -> Result<CandleTensor> {
        let dtype = common_dtype(operands)?;
        let work = working_dtype(dtype);
        let mut terms = Vec::with_capacity(operands.len());
        for (prepare, t) in self.prepare.iter().zip(operands) {
            let mut t = t.to_dtype(work)?;
            if prepare.has_diagonals {
                t = take_diagonals(t, prepare.letters.clone())?;
            }
            terms.push(sum_axes(t, &prepare.summed)?);
        }
        for step in &self.steps {
            let b = terms.remove(step.second);
            let a = terms.remove(step.first);
            terms.push(multiply(&step.product, &a, &b)?.reshape(step.dims.as_slice())?);
        }
        let last = terms
            .pop()
            .ok_or_else(|| LangError::internal("einsum without operands"))?;
        let out = match &self.output_order {
            Some(order) => last.permute(order.as_slice())?,
            None => last,
        };
        Ok(out.to_dtype(dtype)?)
    }
}

/// One pairwise product on the CPU, as `[batches, m, n]`.
fn multiply(p: &Product, a: &CandleTensor, b: &CandleTensor) -> Result<CandleTensor> {
    let permuted = |t: &CandleTensor, order: &Option<Vec<usize>>| match order {
        Some(order) => t.permute(order.as_slice()),
        None => Ok(t.clone()),
    };
    let (a, b) = (permuted(a, &p.a_order)?, permuted(b, &p.b_order)?);
    if !p.sums {
        // Nothing to sum (outer and elementwise products): a broadcast
        // multiply, not a batch of 1×1 matmuls.
        let a = a.reshape((p.batches, p.m, 1))?;
        let b = b.reshape((p.batches, 1, p.n))?;
        return Ok(a.broadcast_mul(&b)?);
    }
    let a = a.reshape((p.batches, p.m, p.k))?;
    let b = b.reshape((p.batches, p.k, p.n))?;
    // The gradient's tape records candle's own operations only.
    let on_tape = a.track_op() || b.track_op();
    Ok(match a.dtype() {
        CandleDType::U8 => join::bool_matmul(&a, &b)?,
        CandleDType::F32 if !on_tape => engine_product(&a, &b, [p.batches, p.m, p.k, p.n])?,
        CandleDType::F64 if !on_tape && is_small(p) => loop_matmul::<f64>(&a, &b, p)?,
        _ => a.matmul(&b)?,
    })
}

/// Products of at most this many multiply-adds are summed by a plain loop:
/// candle's matmul hands even a 4×4 product to its thread pool, which costs
/// tens of microseconds a product on a busy machine (an equation in a loop).
const SMALL_PRODUCT: usize = 4096;

fn is_small(p: &Product) -> bool {
    let work = [p.batches, p.m, p.k, p.n]
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n));
    work.is_some_and(|w| w <= SMALL_PRODUCT) && p.k > 0
}

fn loop_matmul<T: candle_core::WithDType>(
    a: &CandleTensor,
    b: &CandleTensor,
    p: &Product,
) -> Result<CandleTensor> {
    let (a, b) = (
        a.flatten_all()?.to_vec1::<T>()?,
        b.flatten_all()?.to_vec1::<T>()?,
    );
    let mut out = Vec::with_capacity(p.batches * p.m * p.n);
    for batch in 0..p.batches {
        let a = &a[batch * p.m * p.k..(batch + 1) * p.m * p.k];
        let b = &b[batch * p.k * p.n..(batch + 1) * p.k * p.n];
        for row in a.chunks_exact(p.k) {
            for col in 0..p.n {
                let terms = row.iter().zip(b[col..].iter().step_by(p.n));
                out.push(terms.fold(T::from_f64(0.0), |sum, (&x, &y)| sum + x * y));
            }
        }
    }
    let device = &candle_core::Device::Cpu;
    Ok(CandleTensor::from_vec(out, (p.batches, p.m, p.n), device)?)
}

/// The type sums are done in: see the module comment.
fn working_dtype(dtype: CandleDType) -> CandleDType {
    match dtype {
        CandleDType::F16 | CandleDType::BF16 => CandleDType::F32,
        CandleDType::I64 | CandleDType::I32 | CandleDType::U32 | CandleDType::I16 => {
            CandleDType::F64
        }
        other => other,
    }
}

/// Checks a spec's syntax for `operand_count` operands, before any tensor is
/// looked at (so a caller can point a bad spec out as such).
pub fn check_spec(spec: &str, operand_count: usize) -> Result<()> {
    parse(spec, operand_count).map(|_| ())
}

fn parse(spec: &str, operand_count: usize) -> Result<Spec> {
    let compact: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = |why: &str| LangError::user(format!("bad einsum spec \"{spec}\": {why}"));
    if compact.contains("...") {
        return Err(bad("`...` is not supported; name every dimension"));
    }
    let Some((inputs, output)) = compact.split_once("->") else {
        return Err(bad(
            "it needs an explicit output after `->`, like \"ij,jk->ik\"",
        ));
    };
    let letters = |part: &str| -> Result<Vec<char>> {
        match part.chars().find(|c| !c.is_ascii_alphabetic()) {
            Some(c) => Err(bad(&format!("`{c}` is not a letter"))),
            None => Ok(part.chars().collect()),
        }
    };
    let inputs: Vec<Vec<char>> = inputs.split(',').map(letters).collect::<Result<_>>()?;
    let output = letters(output)?;
    if inputs.len() != operand_count {
        return Err(bad(&format!(
            "it names {} operands, but {operand_count} were given",
            inputs.len()
        )));
    }
    for (i, c) in output.iter().enumerate() {
        if output[..i].contains(c) {
            return Err(bad(&format!("`{c}` appears twice in the output")));
        }
        if !inputs.iter().any(|l| l.contains(c)) {
            return Err(bad(&format!("output letter `{c}` is in no operand")));
        }
    }
    Ok(Spec { inputs, output })
}

/// The element type all operands share.
fn common_dtype(operands: &[CandleTensor]) -> Result<CandleDType> {
    let first = operands
        .first()
        .ok_or_else(|| LangError::user("einsum needs at least one operand"))?;
    for t in operands {
        if t.dtype() != first.dtype() {
            return Err(LangError::user(format!(
                "einsum operands {} and {} have different element types",
                type_of(first),
                type_of(t)
            ))
            .with_hint("convert one with to_dtype(x, \"float32\")"));
        }
    }
    Ok(first.dtype())
}

/// Replaces each letter repeated within one operand by the diagonal over it
/// (its two axes become one, last: see `plan::diagonal_letters`).
fn take_diagonals(mut t: CandleTensor, mut letters: Vec<char>) -> Result<CandleTensor> {
    while let Some((p, q)) = repeated(&letters) {
        let c = letters[p];
        let n = t.dims()[p];
        let rest: Vec<usize> = (0..letters.len()).filter(|&i| i != p && i != q).collect();
        let order: Vec<usize> = rest.iter().copied().chain([p, q]).collect();
        let mut shape: Vec<usize> = rest.iter().map(|&i| t.dims()[i]).collect();
        let block = super::shapes::checked_numel(&[n, n])?;
        shape.push(block);
        let flat = t.permute(order)?.reshape(shape)?;
        // Element (k, k) of an n×n block sits at k·(n+1) once the block is flat.
        let diagonal = CandleTensor::arange_step(0i64, block as i64, (n + 1) as i64, t.device())?;
        t = flat.index_select(&diagonal, flat.rank() - 1)?;
        letters = rest.iter().map(|&i| letters[i]).chain([c]).collect();
    }
    Ok(t)
}

/// Sums over `axes` (a bool sum is "any").
fn sum_axes(t: CandleTensor, axes: &[usize]) -> Result<CandleTensor> {
    if axes.is_empty() {
        return Ok(t);
    }
    if t.dtype() != CandleDType::U8 {
        return Ok(t.sum(axes)?);
    }
    // The largest of 0 and 1 (0 over nothing).
    let mut t = t;
    for &dim in axes.iter().rev() {
        t = match t.dims()[dim] {
            0 => {
                let mut shape = t.dims().to_vec();
                shape.remove(dim);
                CandleTensor::zeros(shape, CandleDType::U8, t.device())?
            }
            _ => t.max(dim)?,
        };
    }
    Ok(t)
}

pub mod gpu;
mod join;
mod plan;
#[cfg(test)]
mod tests;
