//! Indexing: `x[i, a:b, :]` on tensors, `xs[i]` and `xs[a:b]` on lists, `s[i]`
//! and `s[a:b]` on strings (by character), and assignment through an index.
//!
//! Negative indices count from the end. Unlike Python, a range never clamps:
//! an end past the size, or a start after the end, is an error, because in
//! tensor code a silently short slice is a shape bug found much later.

use std::cell::RefCell;
use std::ops::Range;

use candle_core::Tensor as CandleTensor;

use crate::error::{LangError, Result};
use crate::ops::dtype::{cast, literal_as};
use crate::ops::shapes::{broadcasts_to, format_shape};
use crate::tensor::{lang_dtype, GpuValue, OwnedDense, Tensor};
use crate::value::Value;

/// One index inside `[...]`, evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexValue {
    /// `i`: one position; the dimension goes away.
    At(i64),
    /// `a:b`, `a:`, `:b`: positions `a` up to (not including) `b`.
    Range(Option<i64>, Option<i64>),
    /// `:`: the whole dimension.
    Full,
}

/// `base[indices]`.
pub fn index(base: &Value, indices: &[IndexValue]) -> Result<Value> {
    match base {
        Value::Tensor(t) => match t.as_gpu().map(|g| gpu_row(g, indices)).transpose()? {
            Some(Some(row)) => Ok(row),
            _ => index_tensor(t, indices).map(Value::tensor),
        },
        Value::List(items) => {
            let items = items.borrow();
            let axis = format!("a list of length {}", items.len());
            Ok(match single(indices, "list")? {
                IndexValue::At(i) => items[resolve_index(i, items.len(), &axis)?].clone(),
                other => Value::list(items[span(other, items.len(), &axis)?].to_vec()),
            })
        }
        Value::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            let axis = format!("a string of length {}", chars.len());
            Ok(match single(indices, "string")? {
                IndexValue::At(i) => {
                    Value::str(chars[resolve_index(i, chars.len(), &axis)?].to_string())
                }
                other => Value::str(
                    chars[span(other, chars.len(), &axis)?]
                        .iter()
                        .collect::<String>(),
                ),
            })
        }
        other => Err(LangError::user(format!(
            "cannot index {}",
            other.type_name()
        ))),
    }
}

/// `base[indices] = value`. A tensor is immutable, so this returns a new tensor
/// with the region replaced (`value` broadcast to the region and converted to the
/// tensor's element type); a list is changed in place and returned.
pub fn assign_index(base: &Value, indices: &[IndexValue], value: &Value) -> Result<Value> {
    match base {
        Value::Tensor(t) => assign_tensor(t, indices, value),
        Value::List(items) => {
            assign_list(items, indices, value)?;
            Ok(base.clone())
        }
        Value::Str(_) => Err(
            LangError::user("cannot assign into a string: strings are immutable")
                .with_hint("build a new string, e.g. `s[0:2] + \"x\" + s[3:]`"),
        ),
        other => Err(LangError::user(format!(
            "cannot assign through an index into {}",
            other.type_name()
        ))),
    }
}

/// Resolves a possibly negative index against a size; `axis` names what is
/// indexed ("dimension 0 of size 3") for the error.
pub fn resolve_index(i: i64, size: usize, axis: &str) -> Result<usize> {
    let resolved = if i < 0 { i + size as i64 } else { i };
    if (0..size as i64).contains(&resolved) {
        Ok(resolved as usize)
    } else {
        Err(LangError::user(format!(
            "index {i} is out of range for {axis}"
        )))
    }
}

/// Resolves `start:end` (each possibly negative or left out) against a size.
pub fn resolve_range(
    start: Option<i64>,
    end: Option<i64>,
    size: usize,
    axis: &str,
) -> Result<Range<usize>> {
    let bound = |b: i64, which: &str| {
        let resolved = if b < 0 { b + size as i64 } else { b };
        if (0..=size as i64).contains(&resolved) {
            Ok(resolved as usize)
        } else {
            Err(LangError::user(format!(
                "range {which} {b} is out of range for {axis}"
            )))
        }
    };
    let from = start.map_or(Ok(0), |s| bound(s, "start"))?;
    let to = end.map_or(Ok(size), |e| bound(e, "end"))?;
    if from > to {
        let written = |b: Option<i64>| b.map_or(String::new(), |b| b.to_string());
        return Err(LangError::user(format!(
            "range {}:{} starts after it ends, for {axis}",
            written(start),
            written(end)
        )));
    }
    Ok(from..to)
}

/// "dimension 1 of size 3".
fn dim_axis(dim: usize, size: usize) -> String {
    format!("dimension {dim} of size {size}")
}

/// The positions a range or `:` covers.
fn span(index: IndexValue, size: usize, axis: &str) -> Result<Range<usize>> {
    match index {
        IndexValue::At(i) => resolve_index(i, size, axis).map(|i| i..i + 1),
        IndexValue::Range(start, end) => resolve_range(start, end, size, axis),
        IndexValue::Full => Ok(0..size),
    }
}

fn single(indices: &[IndexValue], what: &str) -> Result<IndexValue> {
    match indices {
        [one] => Ok(*one),
        _ => Err(LangError::user(format!(
            "a {what} takes one index, found {}",
            indices.len()
        ))),
    }
}

fn check_count(t: &CandleTensor, indices: &[IndexValue]) -> Result<()> {
    if indices.len() > t.rank() {
        return Err(LangError::user(format!(
            "too many indices: {} has {} dimensions, found {} indices",
            crate::ops::type_of(t),
            t.rank(),
            indices.len()
        )));
    }
    Ok(())
}

/// `x[i]` of a GPU tensor: row i, still on the GPU (other indexing reads the
/// tensor back).
fn gpu_row(g: &GpuValue, indices: &[IndexValue]) -> Result<Option<Value>> {
    let ([IndexValue::At(i)], Some(&count)) = (indices, g.tensor.dims().first()) else {
        return Ok(None);
    };
    let row = g
        .tensor
        .index_first(resolve_index(*i, count, &dim_axis(0, count))?)?;
    Ok(Some(Value::Tensor(GpuValue::tensor(&g.ops, row))))
}

fn index_tensor(t: &Tensor, indices: &[IndexValue]) -> Result<CandleTensor> {
    let mut out = t.to_dense()?;
    check_count(&out, indices)?;
    let dims = out.dims().to_vec();
    let mut removed = Vec::new();
    for (d, index) in indices.iter().enumerate() {
        let range = span(*index, dims[d], &dim_axis(d, dims[d]))?;
        if matches!(index, IndexValue::At(_)) {
            removed.push(d);
        }
        if range.len() != dims[d] {
            out = out.narrow(d, range.start, range.len())?;
        }
    }
    // Squeezing keeps the view a view; from the back so positions stay valid.
    for d in removed.into_iter().rev() {
        out = out.squeeze(d)?;
    }
    Ok(out)
}

/// `x[i, j, ...] = v` of one number into a tensor whose storage nothing else
/// shares, written in place (copy-on-write: the first store copies, the ones
/// after it do not). False when the store must take the general path: a
/// region, a shared tensor, a tensor value, or anything to report as an error.
pub fn store_element_in_place(
    owned: &OwnedDense,
    indices: &[IndexValue],
    value: &Value,
) -> Result<bool> {
    let Some(tensor) = owned.exclusive() else {
        return Ok(false);
    };
    let dims = tensor.dims();
    if indices.len() != dims.len() || matches!(value, Value::Tensor(_)) {
        return Ok(false);
    }
    let mut offset = 0;
    for (&index, &size) in indices.iter().zip(dims) {
        let IndexValue::At(i) = index else {
            return Ok(false);
        };
        let Ok(i) = resolve_index(i, size, "") else {
            return Ok(false);
        };
        offset = offset * size + i;
    }
    let Ok(source) = literal_as(value, lang_dtype(tensor.dtype())) else {
        return Ok(false);
    };
    tensor
        .flatten_all()?
        .slice_set(&source.reshape(1)?, 0, offset)?;
    Ok(true)
}

fn assign_tensor(t: &Tensor, indices: &[IndexValue], value: &Value) -> Result<Value> {
    let base = t.to_dense()?;
    check_count(&base, indices)?;
    let dims = base.dims().to_vec();
    let mut ranges = Vec::with_capacity(dims.len());
    let mut region = Vec::new();
    for (d, &size) in dims.iter().enumerate() {
        let index = indices.get(d).copied().unwrap_or(IndexValue::Full);
        let range = span(index, size, &dim_axis(d, size))?;
        if !matches!(index, IndexValue::At(_)) {
            region.push(range.len());
        }
        ranges.push(range);
    }
    let dtype = lang_dtype(base.dtype());
    let source = match value {
        Value::Tensor(v) => cast(&v.to_dense()?, dtype)?,
        other => literal_as(other, dtype).map_err(|e| LangError {
            message: format!(
                "cannot assign {} into {}: {}",
                other.type_name(),
                t.type_string(),
                e.message
            ),
            ..e
        })?,
    };
    if !broadcasts_to(source.dims(), &region) {
        return Err(LangError::user(format!(
            "cannot assign {} to a region of shape {}: shapes do not broadcast",
            value.type_name(),
            format_shape(&region)
        )));
    }
    if region.contains(&0) {
        return Ok(Value::Tensor(t.clone()));
    }
    let with_ones: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
    let source = source.broadcast_as(region)?.reshape(with_ones)?;
    // A new tensor with storage of its own: later element stores may write it
    // in place.
    let stored = base.slice_assign(&ranges, &source)?;
    Ok(Value::Tensor(Tensor::Owned(std::rc::Rc::new(
        OwnedDense::new(stored),
    ))))
}

fn assign_list(items: &RefCell<Vec<Value>>, indices: &[IndexValue], value: &Value) -> Result<()> {
    let index = single(indices, "list")?;
    // Copy the new items out first: `xs[0:2] = xs` reads the list it writes.
    let replacement = match (index, value) {
        (IndexValue::At(_), _) => None,
        (_, Value::List(new)) => Some(new.borrow().clone()),
        (_, other) => {
            return Err(LangError::user(format!(
                "cannot assign {} to a list range: it needs a list",
                other.type_name()
            )))
        }
    };
    let mut items = items
        .try_borrow_mut()
        .map_err(|_| LangError::internal("a list was borrowed while being assigned to"))?;
    let axis = format!("a list of length {}", items.len());
    match replacement {
        None => {
            let IndexValue::At(i) = index else {
                return Err(LangError::internal("list assignment lost its index"));
            };
            let i = resolve_index(i, items.len(), &axis)?;
            items[i] = value.clone();
        }
        Some(new) => {
            let range = span(index, items.len(), &axis)?;
            items.splice(range, new);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
