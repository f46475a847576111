//! Matrix multiplication with NumPy's rules: matrices, stacks of matrices whose
//! batch dimensions broadcast, and vectors (a vector on the left is a row, on the
//! right a column, and the added dimension is removed from the result).

use candle_core::{DType, Device, Storage, Tensor as CandleTensor};
use tl_engine::ops::{matmul_f32, MatmulShape};

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
    let mut out = match row_major_product(&lhs, &rhs)? {
        Some(out) => out.reshape(result.as_slice())?,
        // Candle's kernel takes transposed views but not arbitrary strides;
        // copying is the fallback, not the rule, so views of weights stay cheap.
        None => match lhs.broadcast_matmul(&rhs) {
            Ok(out) => out,
            Err(_) => lhs.contiguous()?.broadcast_matmul(&rhs.contiguous()?)?,
        },
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

/// `lhs · rhs` on the engine's f32 product when both are float32, off the
/// gradient's tape (which records candle's operations only), in row-major
/// order on the CPU and with the same batch dimensions: the product
/// equations use, so `W @ x` and `Y[i] = W[i, j] x[j]` give the same bits.
/// None otherwise (transposed views, broadcast batches).
fn row_major_product(lhs: &CandleTensor, rhs: &CandleTensor) -> Result<Option<CandleTensor>> {
    let (l, r) = (lhs.dims(), rhs.dims());
    let suits = lhs.dtype() == DType::F32
        && rhs.dtype() == DType::F32
        && !lhs.track_op()
        && !rhs.track_op()
        && l[..l.len() - 2] == r[..r.len() - 2]
        && row_major_on_cpu(lhs)
        && row_major_on_cpu(rhs);
    if !suits {
        return Ok(None);
    }
    let batches = l[..l.len() - 2].iter().product();
    let (m, k, n) = (l[l.len() - 2], l[l.len() - 1], r[r.len() - 1]);
    Ok(Some(engine_product(lhs, rhs, [batches, m, k, n])?))
}

fn row_major_on_cpu(t: &CandleTensor) -> bool {
    let (storage, layout) = t.storage_and_layout();
    matches!(&*storage, Storage::Cpu(_)) && layout.contiguous_offsets().is_some()
}

/// `a [batches, m, k] · b [batches, k, n]` (`sizes`), float32, on the
/// engine's product (`tl_engine::ops::matmul_f32`: each element one fused
/// chain over k in order, the same bits at any size and thread count), as
/// `[batches, m, n]`.
pub(super) fn engine_product(
    a: &CandleTensor,
    b: &CandleTensor,
    sizes: [usize; 4],
) -> Result<CandleTensor> {
    let [batches, m, k, n] = sizes;
    let mut out = vec![0.0f32; batches * m * n];
    let shape = MatmulShape { batches, m, k, n };
    with_f32_values(a, |a| {
        with_f32_values(b, |b| {
            matmul_f32(a, b, shape, rayon::current_num_threads(), &mut out)
                .map_err(|e| LangError::internal(format!("matrix product: {e}")))
        })
    })?;
    Ok(CandleTensor::from_vec(out, (batches, m, n), &Device::Cpu)?)
}

/// `f` of a float32 tensor's values in row-major order: its own storage when
/// it is contiguous on the CPU (no copy of a large operand), else a copy.
fn with_f32_values<R>(t: &CandleTensor, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    if let (Storage::Cpu(cpu), Some((start, end))) = (&*storage, layout.contiguous_offsets()) {
        return f(&cpu.as_slice::<f32>()?[start..end]);
    }
    drop(storage);
    f(&t.flatten_all()?.to_vec1::<f32>()?)
}
