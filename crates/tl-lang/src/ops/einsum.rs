//! `einsum` in explicit mode (`"ij,jk->ik"`), over any number of operands.
//!
//! The plan: take diagonals for letters repeated within an operand (`ii`), sum
//! away letters that appear in one operand only and not in the output, and then
//! contract the operands two at a time, always the pair whose product is
//! cheapest (the product of the sizes of their letters), so `A[i, j] B[j, k]
//! v[k]` multiplies the matrix by the vector first. Each pairwise step folds
//! the letters into three groups — batch (both operands and what is still
//! needed), contracted (both operands, not needed), and free (one operand) —
//! so it is one batched matmul. That keeps attention-style patterns
//! (`bhqd,bhkd->bhqk`) as fast as `@`.
//!
//! Element types: floats are summed in their type (half precision in f32);
//! ints in f64 (exact below 2^53) and converted back; bools as bools, where
//! a sum is "any" and a product "and", which makes a bool einsum a relational
//! join ("there exists" over the summed letters), run by `join`'s kernel on
//! bit-packed rows.

use std::collections::HashMap;

use candle_core::{DType as CandleDType, Tensor as CandleTensor};

use super::shapes::checked_numel;
use super::type_of;
use crate::error::{LangError, Result};

/// A parsed spec: one list of letters per operand, and the output's letters.
#[derive(Debug, PartialEq)]
struct Spec {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
}

/// An operand on its way through the plan, with the letters naming its dimensions.
type Term = (CandleTensor, Vec<char>);

/// Evaluates `spec` over `operands` (tensors of one element type).
pub fn einsum(spec: &str, operands: &[CandleTensor]) -> Result<CandleTensor> {
    let parsed = parse(spec, operands.len())?;
    let dtype = common_dtype(operands)?;
    let sizes = letter_sizes(&parsed, operands)?;
    // Every intermediate result the cheapest-pair order makes is at most the
    // size of the output or of an operand; the output is checked here.
    let output_shape: Vec<usize> = (parsed.output.iter())
        .map(|c| sizes.get(c).copied().unwrap_or(1))
        .collect();
    checked_numel(&output_shape).map_err(|e| LangError {
        message: format!("einsum \"{spec}\": the result's {}", e.message),
        ..e
    })?;
    let work = working_dtype(dtype);
    let mut terms = Vec::new();
    for (i, (letters, t)) in parsed.inputs.iter().zip(operands).enumerate() {
        let (t, letters) = take_diagonals(t.to_dtype(work)?, letters.clone())?;
        let others: Vec<char> = parsed
            .inputs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, l)| l.iter().copied())
            .collect();
        let keep = |c: char| parsed.output.contains(&c) || others.contains(&c);
        terms.push(sum_out(t, letters, keep)?);
    }
    let (t, letters) = contract_all(terms, &parsed.output, &sizes)?;
    let out = permute_to(&t, &letters, &parsed.output)?;
    Ok(out.to_dtype(dtype)?)
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

/// Contracts the terms pairwise, cheapest pair first, down to one.
fn contract_all(
    mut terms: Vec<Term>,
    output: &[char],
    sizes: &HashMap<char, usize>,
) -> Result<Term> {
    while terms.len() > 1 {
        let (i, j) = cheapest_pair(&terms, sizes);
        let b = terms.remove(j);
        let a = terms.remove(i);
        let still_needed: Vec<char> = (output.iter().copied())
            .chain(terms.iter().flat_map(|(_, l)| l.iter().copied()))
            .collect();
        terms.push(contract(a, b, &still_needed)?);
    }
    terms
        .pop()
        .ok_or_else(|| LangError::internal("einsum without operands"))
}

/// The pair `(i, j)`, `i < j`, whose product touches the fewest elements.
fn cheapest_pair(terms: &[Term], sizes: &HashMap<char, usize>) -> (usize, usize) {
    let cost = |a: &[char], b: &[char]| -> u128 {
        let mut letters: Vec<char> = a.iter().chain(b).copied().collect();
        letters.sort_unstable();
        letters.dedup();
        (letters.iter())
            .map(|c| sizes.get(c).copied().unwrap_or(1) as u128)
            .fold(1u128, |acc, n| acc.saturating_mul(n))
    };
    let mut best = (0, 1, u128::MAX);
    for i in 0..terms.len() {
        for j in i + 1..terms.len() {
            let c = cost(&terms[i].1, &terms[j].1);
            if c < best.2 {
                best = (i, j, c);
            }
        }
    }
    (best.0, best.1)
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

/// Checks each operand's rank against its letters and that a letter has one size.
fn letter_sizes(spec: &Spec, operands: &[CandleTensor]) -> Result<HashMap<char, usize>> {
    let mut sizes = HashMap::new();
    for (letters, t) in spec.inputs.iter().zip(operands) {
        if letters.len() != t.rank() {
            let written: String = letters.iter().collect();
            return Err(LangError::user(format!(
                "einsum operand \"{written}\" has {} letters, but {} has {} dimensions",
                letters.len(),
                type_of(t),
                t.rank()
            )));
        }
        for (&c, &size) in letters.iter().zip(t.dims()) {
            let known = *sizes.entry(c).or_insert(size);
            if known != size {
                return Err(LangError::user(format!(
                    "einsum letter `{c}` is {known} in one place and {size} in another"
                )));
            }
        }
    }
    Ok(sizes)
}

/// Replaces each letter repeated within one operand by the diagonal over it.
fn take_diagonals(
    mut t: CandleTensor,
    mut letters: Vec<char>,
) -> Result<(CandleTensor, Vec<char>)> {
    while let Some((p, q)) = repeated(&letters) {
        let c = letters[p];
        let n = t.dims()[p];
        let rest: Vec<usize> = (0..letters.len()).filter(|&i| i != p && i != q).collect();
        let order: Vec<usize> = rest.iter().copied().chain([p, q]).collect();
        let mut shape: Vec<usize> = rest.iter().map(|&i| t.dims()[i]).collect();
        let block = checked_numel(&[n, n])?;
        shape.push(block);
        let flat = t.permute(order)?.reshape(shape)?;
        // Element (k, k) of an n×n block sits at k·(n+1) once the block is flat.
        let diagonal = CandleTensor::arange_step(0i64, block as i64, (n + 1) as i64, t.device())?;
        t = flat.index_select(&diagonal, flat.rank() - 1)?;
        letters = rest.iter().map(|&i| letters[i]).chain([c]).collect();
    }
    Ok((t, letters))
}

fn repeated(letters: &[char]) -> Option<(usize, usize)> {
    letters.iter().enumerate().find_map(|(p, c)| {
        letters[p + 1..]
            .iter()
            .position(|d| d == c)
            .map(|offset| (p, p + 1 + offset))
    })
}

/// Sums over the letters `keep` rejects.
fn sum_out(
    t: CandleTensor,
    letters: Vec<char>,
    keep: impl Fn(char) -> bool,
) -> Result<(CandleTensor, Vec<char>)> {
    let summed: Vec<usize> = (0..letters.len()).filter(|&i| !keep(letters[i])).collect();
    if summed.is_empty() {
        return Ok((t, letters));
    }
    let kept = letters.into_iter().filter(|&c| keep(c)).collect();
    if t.dtype() != CandleDType::U8 {
        return Ok((t.sum(summed)?, kept));
    }
    // A sum of bools is "any": the largest of 0 and 1 (0 over nothing).
    let mut t = t;
    for &dim in summed.iter().rev() {
        t = match t.dims()[dim] {
            0 => {
                let mut shape = t.dims().to_vec();
                shape.remove(dim);
                CandleTensor::zeros(shape, CandleDType::U8, t.device())?
            }
            _ => t.max(dim)?,
        };
    }
    Ok((t, kept))
}

/// The letters of two terms, by role.
struct Groups {
    /// In both terms and the output.
    batch: Vec<char>,
    /// In both terms, not the output: summed over.
    summed: Vec<char>,
    /// In one term only (and so in the output).
    free_a: Vec<char>,
    free_b: Vec<char>,
}

impl Groups {
    fn of(la: &[char], lb: &[char], output: &[char]) -> Self {
        let pick = |from: &[char], keep: &dyn Fn(&char) -> bool| -> Vec<char> {
            from.iter().copied().filter(|c| keep(c)).collect()
        };
        Groups {
            batch: pick(la, &|c| lb.contains(c) && output.contains(c)),
            summed: pick(la, &|c| lb.contains(c) && !output.contains(c)),
            free_a: pick(la, &|c| !lb.contains(c)),
            free_b: pick(lb, &|c| !la.contains(c)),
        }
    }
}

/// The sizes of `letters` in a term whose dimensions are named `named`.
fn sizes(t: &CandleTensor, named: &[char], letters: &[char]) -> Vec<usize> {
    letters
        .iter()
        .map(|c| named.iter().position(|d| d == c).map_or(1, |i| t.dims()[i]))
        .collect()
}

/// The product of two terms summed over their shared letters not in `output`
/// (the letters still needed),
/// as one batched matmul: a[batch, m, k] @ b[batch, k, n].
fn contract((a, la): Term, (b, lb): Term, output: &[char]) -> Result<Term> {
    let g = Groups::of(&la, &lb, output);
    if g.summed.is_empty() {
        return broadcast_product((a, la), (b, lb), &g);
    }
    let batch = sizes(&a, &la, &g.batch);
    let (free_a, free_b) = (sizes(&a, &la, &g.free_a), sizes(&b, &lb, &g.free_b));
    let count = |dims: &[usize]| dims.iter().product::<usize>();
    let (nb, m, k, n) = (
        count(&batch),
        count(&free_a),
        count(&sizes(&a, &la, &g.summed)),
        count(&free_b),
    );
    let a_order = [&g.batch[..], &g.free_a, &g.summed].concat();
    let b_order = [&g.batch[..], &g.summed, &g.free_b].concat();
    let a3 = permute_to(&a, &la, &a_order)?.reshape((nb, m, k))?;
    let b3 = permute_to(&b, &lb, &b_order)?.reshape((nb, k, n))?;
    let shape = [batch, free_a, free_b].concat();
    let letters = [&g.batch[..], &g.free_a, &g.free_b].concat();
    let product = match a3.dtype() {
        CandleDType::U8 => join::bool_matmul(&a3, &b3)?,
        _ => a3.matmul(&b3)?,
    };
    Ok((product.reshape(shape)?, letters))
}

/// Two terms with nothing to sum (outer and elementwise products): a broadcast
/// multiply, not a batch of 1×1 matmuls.
fn broadcast_product(
    (a, la): (CandleTensor, Vec<char>),
    (b, lb): (CandleTensor, Vec<char>),
    g: &Groups,
) -> Result<(CandleTensor, Vec<char>)> {
    let ones = |n: usize| vec![1usize; n];
    let batch = sizes(&a, &la, &g.batch);
    let a_shape = [
        batch.clone(),
        sizes(&a, &la, &g.free_a),
        ones(g.free_b.len()),
    ]
    .concat();
    let b_shape = [batch, ones(g.free_a.len()), sizes(&b, &lb, &g.free_b)].concat();
    let a = permute_to(&a, &la, &[&g.batch[..], &g.free_a].concat())?.reshape(a_shape)?;
    let b = permute_to(&b, &lb, &[&g.batch[..], &g.free_b].concat())?.reshape(b_shape)?;
    let letters = [&g.batch[..], &g.free_a, &g.free_b].concat();
    Ok((a.broadcast_mul(&b)?, letters))
}

/// `t`, whose dimensions are named by `from`, with them reordered as `to`.
fn permute_to(t: &CandleTensor, from: &[char], to: &[char]) -> Result<CandleTensor> {
    let order = to
        .iter()
        .map(|c| from.iter().position(|d| d == c))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| LangError::internal("einsum lost track of a letter"))?;
    if order.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t.clone());
    }
    Ok(t.permute(order)?)
}

mod join;
#[cfg(test)]
mod tests;
