//! Matrix multiplication with NumPy's rules: matrices, stacks of matrices whose
//! batch dimensions broadcast, and vectors (a vector on the left is a row, on the
//! right a column, and the added dimension is removed from the result).

use candle_core::Tensor as CandleTensor;

use super::shapes::{broadcast_shapes, checked_numel, format_shape};
use super::{dtype_mismatch, type_of};
use crate::error::{LangError, Result};
use crate::tensor::lang_dtype;

/// `a @ b`.
pub fn matmul(a: &CandleTensor, b: &CandleTensor) -> Result<CandleTensor> {
    let phrase = format!("multiply {} @ {}", type_of(a), type_of(b));
    check_operands(a, b, &phrase)?;
    let lhs = if a.rank() == 1 {
        a.unsqueeze(0)?
    } else {
        a.clone()
    };
    let rhs = if b.rank() == 1 {
        b.unsqueeze(1)?
    } else {
        b.clone()
    };
    let (l, r) = (lhs.dims(), rhs.dims());
    let (inner_l, inner_r) = (l[l.len() - 1], r[r.len() - 2]);
    if inner_l != inner_r {
        return Err(LangError::user(format!(
            "cannot {phrase}: inner dimensions {inner_l} and {inner_r} differ"
        )));
    }
    let (batch_l, batch_r) = (&l[..l.len() - 2], &r[..r.len() - 2]);
    let Some(mut result) = broadcast_shapes(batch_l, batch_r) else {
        return Err(LangError::user(format!(
            "cannot {phrase}: batch dimensions {} and {} do not broadcast",
            format_shape(batch_l),
            format_shape(batch_r)
        )));
    };
    result.extend([l[l.len() - 2], r[r.len() - 1]]);
    checked_numel(&result).map_err(|e| LangError {
        message: format!("cannot {phrase}: the result's {}", e.message),
        ..e
    })?;
    // Candle's kernel takes transposed views but not arbitrary strides; copying
    // is the fallback, not the rule, so views of weights stay cheap.
    let mut out = match lhs.broadcast_matmul(&rhs) {
        Ok(out) => out,
        Err(_) => lhs.contiguous()?.broadcast_matmul(&rhs.contiguous()?)?,
    };
    if b.rank() == 1 {
        out = out.squeeze(out.rank() - 1)?;
    }
    if a.rank() == 1 {
        out = out.squeeze(out.rank().saturating_sub(if b.rank() == 1 { 1 } else { 2 }))?;
    }
    Ok(out)
}

fn check_operands(a: &CandleTensor, b: &CandleTensor, phrase: &str) -> Result<()> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(LangError::user(format!(
            "cannot {phrase}: `@` needs at least one dimension on each side"
        ))
        .with_hint("use `*` to multiply by a scalar"));
    }
    let (da, db) = (lang_dtype(a.dtype()), lang_dtype(b.dtype()));
    if !da.is_float() || !db.is_float() {
        return Err(
            LangError::user(format!("cannot {phrase}: `@` needs float tensors"))
                .with_hint("convert with to_dtype(x, \"float32\")"),
        );
    }
    if a.dtype() != b.dtype() {
        return Err(dtype_mismatch(phrase, da, db));
    }
    Ok(())
}
