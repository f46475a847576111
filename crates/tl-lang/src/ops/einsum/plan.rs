//! The plan of an einsum for operands of given shapes (see the parent
//! module's comment): what each operand loses before the products (its
//! diagonals, the letters only it has), then the pairwise products, cheapest
//! first, each described by the permutations and sizes that make it one
//! batched matrix product or one broadcast multiply. It looks at sizes only,
//! never at values, so a caller that evaluates the same spec over tensors of
//! the same shapes again (an index equation in a loop) plans once and runs
//! the plan each time, on the CPU or on a GPU.

use std::collections::HashMap;

use super::Spec;
use crate::error::{LangError, Result};
use crate::ops::shapes::{checked_numel, format_shape};

/// What happens to one operand before the products.
#[derive(Debug, Clone)]
pub struct Prepare {
    /// Its letters as written; when one repeats, the diagonal over it is
    /// taken first.
    pub letters: Vec<char>,
    pub has_diagonals: bool,
    /// The axes (after the diagonals) summed away: letters that no other
    /// operand and not the output have.
    pub summed: Vec<usize>,
}

/// One pairwise product: terms `first` and `second` (first < second) of
/// the running list are taken out and their product appended.
#[derive(Debug, Clone)]
pub struct Step {
    pub first: usize,
    pub second: usize,
    pub product: Product,
    /// The product's dimensions.
    pub dims: Vec<usize>,
}

/// Two terms multiplied: each permuted (none: already in order) and seen as
/// a stack of `batches` matrices, `[batches, m, k]` times `[batches, k, n]`;
/// with `k` = 0 letters in common (nothing summed) it is a broadcast
/// multiply, `[batches, m, 1]` by `[batches, 1, n]`.
#[derive(Debug, Clone)]
pub struct Product {
    pub a_order: Option<Vec<usize>>,
    pub b_order: Option<Vec<usize>>,
    pub batches: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Whether letters are summed (a matrix product), else a broadcast
    /// multiply (`k` is then 1).
    pub sums: bool,
}

/// An einsum planned for operands of given shapes.
#[derive(Debug, Clone)]
pub struct Contraction {
    /// The shapes it was planned for.
    pub shapes: Vec<Vec<usize>>,
    pub prepare: Vec<Prepare>,
    pub steps: Vec<Step>,
    /// The last term's dimensions put in the output's order (none: they are).
    pub output_order: Option<Vec<usize>>,
    pub output_dims: Vec<usize>,
}

/// A term on its way through the plan: the letters naming its dimensions.
#[derive(Clone)]
struct Planned {
    letters: Vec<char>,
    dims: Vec<usize>,
}

impl Contraction {
    /// Plans `spec` for operands of `shapes`: checks each operand's rank
    /// against its letters, that a letter has one size, and that the result
    /// is not too large.
    pub fn plan(spec: &Spec, shapes: &[Vec<usize>], text: &str) -> Result<Contraction> {
        let sizes = letter_sizes(spec, shapes)?;
        let output_dims: Vec<usize> = (spec.output.iter())
            .map(|c| sizes.get(c).copied().unwrap_or(1))
            .collect();
        // Every intermediate result the cheapest-pair order makes is at most
        // the size of the output or of an operand; the output is checked here.
        checked_numel(&output_dims).map_err(|e| LangError {
            message: format!("einsum \"{text}\": the result's {}", e.message),
            ..e
        })?;
        let mut prepare = Vec::new();
        let mut terms = Vec::new();
        for (i, (letters, dims)) in spec.inputs.iter().zip(shapes).enumerate() {
            let (letters_after, dims_after) = diagonal_letters(letters, dims);
            let others: Vec<char> = (spec.inputs.iter().enumerate())
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, l)| l.iter().copied())
                .collect();
            let keep = |c: char| spec.output.contains(&c) || others.contains(&c);
            let summed = (0..letters_after.len())
                .filter(|&a| !keep(letters_after[a]))
                .collect();
            let kept: Vec<usize> = (0..letters_after.len())
                .filter(|&a| keep(letters_after[a]))
                .collect();
            prepare.push(Prepare {
                letters: letters.clone(),
                has_diagonals: letters_after.len() != letters.len(),
                summed,
            });
            terms.push(Planned {
                letters: kept.iter().map(|&a| letters_after[a]).collect(),
                dims: kept.iter().map(|&a| dims_after[a]).collect(),
            });
        }
        let mut steps = Vec::new();
        while terms.len() > 1 {
            let (first, second) = cheapest_pair(&terms, &sizes);
            let b = terms.remove(second);
            let a = terms.remove(first);
            let still_needed: Vec<char> = (spec.output.iter().copied())
                .chain(terms.iter().flat_map(|t| t.letters.iter().copied()))
                .collect();
            let (product, term) = pair(&a, &b, &still_needed, &sizes)?;
            steps.push(Step {
                first,
                second,
                product,
                dims: term.dims.clone(),
            });
            terms.push(term);
        }
        let last = terms
            .pop()
            .ok_or_else(|| LangError::internal("einsum without operands"))?;
        Ok(Contraction {
            shapes: shapes.to_vec(),
            prepare,
            steps,
            output_order: order(&last.letters, &spec.output)?,
            output_dims,
        })
    }

    /// Whether the plan was made for operands of these shapes.
    pub fn fits(&self, shapes: &[Vec<usize>]) -> bool {
        self.shapes == shapes
    }
}

/// The letters and sizes of an operand once its diagonals are taken: each
/// repeated letter's two axes become one, last (see `take_diagonals`).
pub fn diagonal_letters(letters: &[char], dims: &[usize]) -> (Vec<char>, Vec<usize>) {
    let (mut letters, mut dims) = (letters.to_vec(), dims.to_vec());
    while let Some((p, q)) = repeated(&letters) {
        let (c, n) = (letters[p], dims[p]);
        let rest: Vec<usize> = (0..letters.len()).filter(|&i| i != p && i != q).collect();
        letters = rest.iter().map(|&i| letters[i]).chain([c]).collect();
        dims = rest.iter().map(|&i| dims[i]).chain([n]).collect();
    }
    (letters, dims)
}

/// The first letter written twice: its two positions.
pub fn repeated(letters: &[char]) -> Option<(usize, usize)> {
    letters.iter().enumerate().find_map(|(p, c)| {
        letters[p + 1..]
            .iter()
            .position(|d| d == c)
            .map(|offset| (p, p + 1 + offset))
    })
}

/// Checks each operand's rank against its letters and that a letter has one size.
fn letter_sizes(spec: &Spec, shapes: &[Vec<usize>]) -> Result<HashMap<char, usize>> {
    let mut sizes = HashMap::new();
    for (letters, dims) in spec.inputs.iter().zip(shapes) {
        if letters.len() != dims.len() {
            let written: String = letters.iter().collect();
            return Err(LangError::user(format!(
                "einsum operand \"{written}\" has {} letters, but a tensor of shape {} has {} dimensions",
                letters.len(),
                format_shape(dims),
                dims.len()
            )));
        }
        for (&c, &size) in letters.iter().zip(dims) {
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

/// The pair `(i, j)`, `i < j`, whose product touches the fewest elements.
fn cheapest_pair(terms: &[Planned], sizes: &HashMap<char, usize>) -> (usize, usize) {
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
            let c = cost(&terms[i].letters, &terms[j].letters);
            if c < best.2 {
                best = (i, j, c);
            }
        }
    }
    (best.0, best.1)
}

/// The letters of two terms, by role.
struct Groups {
    /// In both terms and still needed.
    batch: Vec<char>,
    /// In both terms, not needed: summed over.
    summed: Vec<char>,
    /// In one term only (and so still needed).
    free_a: Vec<char>,
    free_b: Vec<char>,
}

impl Groups {
    fn of(la: &[char], lb: &[char], needed: &[char]) -> Self {
        let pick = |from: &[char], keep: &dyn Fn(&char) -> bool| -> Vec<char> {
            from.iter().copied().filter(|c| keep(c)).collect()
        };
        Groups {
            batch: pick(la, &|c| lb.contains(c) && needed.contains(c)),
            summed: pick(la, &|c| lb.contains(c) && !needed.contains(c)),
            free_a: pick(la, &|c| !lb.contains(c)),
            free_b: pick(lb, &|c| !la.contains(c)),
        }
    }
}

/// The product of two terms summed over their shared letters that are not
/// still needed, and the term it gives: letters batch, free of a, free of b.
fn pair(
    a: &Planned,
    b: &Planned,
    needed: &[char],
    sizes: &HashMap<char, usize>,
) -> Result<(Product, Planned)> {
    let g = Groups::of(&a.letters, &b.letters, needed);
    let size = |letters: &[char]| -> Vec<usize> {
        (letters.iter())
            .map(|c| sizes.get(c).copied().unwrap_or(1))
            .collect()
    };
    let count = |letters: &[char]| size(letters).iter().product::<usize>();
    let a_letters = [&g.batch[..], &g.free_a, &g.summed].concat();
    let b_letters = [&g.batch[..], &g.summed, &g.free_b].concat();
    let letters = [&g.batch[..], &g.free_a, &g.free_b].concat();
    let product = Product {
        a_order: order(&a.letters, &a_letters)?,
        b_order: order(&b.letters, &b_letters)?,
        batches: count(&g.batch),
        m: count(&g.free_a),
        k: count(&g.summed),
        n: count(&g.free_b),
        sums: !g.summed.is_empty(),
    };
    let dims = size(&letters);
    Ok((product, Planned { letters, dims }))
}

/// The permutation that puts dimensions named `from` in the order `to`;
/// none when they already are.
fn order(from: &[char], to: &[char]) -> Result<Option<Vec<usize>>> {
    let order = to
        .iter()
        .map(|c| from.iter().position(|d| d == c))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| LangError::internal("einsum lost track of a letter"))?;
    let identity = order.iter().enumerate().all(|(i, &p)| i == p);
    Ok((!identity).then_some(order))
}

#[cfg(test)]
pub(super) fn cheapest_pair_of(
    letters: &[Vec<char>],
    sizes: &HashMap<char, usize>,
) -> (usize, usize) {
    let terms: Vec<Planned> = (letters.iter())
        .map(|l| Planned {
            letters: l.clone(),
            dims: Vec::new(),
        })
        .collect();
    cheapest_pair(&terms, sizes)
}
