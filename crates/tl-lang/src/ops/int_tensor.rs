//! Arithmetic on integer tensors, element by element with overflow and division
//! by zero reported as errors. Candle's integer kernels use plain `+` and `/`,
//! which panic (debug builds) or wrap (release) on exactly these inputs, so the
//! language does integer tensor arithmetic itself: integer tensors are small
//! (token ids, positions, counters), and correctness matters more than speed.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_syntax::ast::BinaryOp;

use crate::error::{LangError, Result};

/// `a op b` for integer tensors of one element type, broadcast to `shape`.
/// `phrase` says what was attempted, for errors ("add int64[2] and int64[2]").
pub fn arithmetic(
    op: BinaryOp,
    a: &CandleTensor,
    b: &CandleTensor,
    shape: &[usize],
    phrase: &str,
) -> Result<CandleTensor> {
    let checked: fn(i64, i64) -> Option<i64> = match op {
        BinaryOp::Add => i64::checked_add,
        BinaryOp::Sub => i64::checked_sub,
        BinaryOp::Mul => i64::checked_mul,
        BinaryOp::Div => i64::checked_div,
        BinaryOp::Rem => i64::checked_rem,
        other => {
            return Err(LangError::internal(format!(
                "integer arithmetic called for `{}`",
                other.symbol()
            )))
        }
    };
    let dtype = a.dtype();
    let lhs = elements(&a.broadcast_as(shape)?)?;
    let rhs = elements(&b.broadcast_as(shape)?)?;
    let divides = matches!(op, BinaryOp::Div | BinaryOp::Rem);
    let mut out = Vec::with_capacity(lhs.len());
    for (&x, &y) in lhs.iter().zip(&rhs) {
        if divides && y == 0 {
            return Err(LangError::user(format!(
                "cannot {phrase}: division by zero"
            )));
        }
        match checked(x, y).filter(|v| fits(*v, dtype)) {
            Some(v) => out.push(v),
            None => return Err(overflow(phrase, dtype)),
        }
    }
    from_elements(out, shape, dtype)
}

/// Applies `f` to every element; `None` from `f` is an overflow.
pub fn map(t: &CandleTensor, f: fn(i64) -> Option<i64>, phrase: &str) -> Result<CandleTensor> {
    let dtype = t.dtype();
    let out = elements(t)?
        .into_iter()
        .map(|x| f(x).filter(|v| fits(*v, dtype)))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| overflow(phrase, dtype))?;
    from_elements(out, t.dims(), dtype)
}

/// The sum over `dims` as int64, failing on overflow.
pub fn sum(t: &CandleTensor, dims: &[usize], keepdim: bool) -> Result<CandleTensor> {
    let rank = t.rank();
    let kept: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).collect();
    let order: Vec<usize> = kept.iter().chain(dims).copied().collect();
    let moved = t.permute(order)?;
    let inner: usize = dims.iter().map(|&d| t.dims()[d]).product();
    let values = elements(&moved)?;
    let mut out = Vec::new();
    if inner == 0 {
        // Every row is empty (and `chunks` refuses a zero size): each sums to 0.
        out.resize(kept.iter().map(|&d| t.dims()[d]).product(), 0);
    } else {
        for row in values.chunks(inner) {
            let total = row
                .iter()
                .try_fold(0i64, |acc, &x| acc.checked_add(x))
                .ok_or_else(|| overflow("sum the tensor", CandleDType::I64))?;
            out.push(total);
        }
    }
    let shape: Vec<usize> = (0..rank)
        .filter_map(|d| match (dims.contains(&d), keepdim) {
            (false, _) => Some(t.dims()[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    from_elements(out, &shape, CandleDType::I64)
}

fn elements(t: &CandleTensor) -> Result<Vec<i64>> {
    Ok(t.to_dtype(CandleDType::I64)?
        .flatten_all()?
        .to_vec1::<i64>()?)
}

fn from_elements(values: Vec<i64>, shape: &[usize], dtype: CandleDType) -> Result<CandleTensor> {
    Ok(CandleTensor::from_vec(values, shape, &Device::Cpu)?.to_dtype(dtype)?)
}

fn fits(v: i64, dtype: CandleDType) -> bool {
    match dtype {
        CandleDType::I32 => i32::try_from(v).is_ok(),
        _ => true,
    }
}

fn overflow(phrase: &str, dtype: CandleDType) -> LangError {
    let name = crate::tensor::lang_dtype(dtype).keyword();
    LangError::user(format!("cannot {phrase}: the result overflows {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64], shape: &[usize]) -> CandleTensor {
        CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor")
    }

    #[test]
    fn arithmetic_broadcasts_and_truncates() -> Result<()> {
        let a = ints(&[7, -7, 9, 10], &[2, 2]);
        let b = ints(&[2, 3], &[2]);
        let q = arithmetic(BinaryOp::Div, &a, &b, &[2, 2], "divide")?;
        assert_eq!(elements(&q)?, vec![3, -2, 4, 3]);
        let r = arithmetic(BinaryOp::Rem, &a, &b, &[2, 2], "divide")?;
        assert_eq!(elements(&r)?, vec![1, -1, 1, 1]);
        Ok(())
    }

    #[test]
    fn overflow_and_zero_division_are_errors() {
        let a = ints(&[i64::MAX], &[1]);
        let one = ints(&[1], &[1]);
        let zero = ints(&[0], &[1]);
        let err = arithmetic(BinaryOp::Add, &a, &one, &[1], "add x and y").err();
        assert_eq!(
            err.map(|e| e.message),
            Some("cannot add x and y: the result overflows int64".to_string())
        );
        let err = arithmetic(BinaryOp::Div, &one, &zero, &[1], "divide x by y").err();
        assert!(err.is_some_and(|e| e.message.ends_with("division by zero")));
        let small = ints(&[i32::MAX as i64], &[1])
            .to_dtype(CandleDType::I32)
            .expect("i32");
        let one32 = one.to_dtype(CandleDType::I32).expect("i32");
        assert!(arithmetic(BinaryOp::Add, &small, &one32, &[1], "add").is_err());
    }

    #[test]
    fn sums_over_chosen_dims() -> Result<()> {
        let t = ints(&[1, 2, 3, 4, 5, 6], &[2, 3]);
        assert_eq!(elements(&sum(&t, &[1], false)?)?, vec![6, 15]);
        assert_eq!(sum(&t, &[0], true)?.dims(), &[1, 3]);
        assert_eq!(elements(&sum(&t, &[0, 1], false)?)?, vec![21]);
        let empty = ints(&[], &[2, 0]);
        assert_eq!(elements(&sum(&empty, &[1], false)?)?, vec![0, 0]);
        assert!(sum(&ints(&[i64::MAX, 1], &[2]), &[0], false).is_err());
        Ok(())
    }

    #[test]
    fn map_reports_overflow() {
        let t = ints(&[i64::MIN], &[1]);
        assert!(map(&t, i64::checked_neg, "negate").is_err());
    }
}
