//! Shapes and element types through tensor operators, following
//! `ops::tensor_binary` and `ops::matmul`: elementwise operators need one
//! element type and shapes that broadcast as in NumPy; `@` contracts the last
//! dimension of the left side with the second-to-last of the right (a vector
//! on either side counts as a row or a column).
//!
//! A contradiction is reported only between known facts: two different sizes,
//! or for `@`'s inner dimensions two different names of one signature. A name
//! and a size may well agree, and any name may be 1, so broadcasting compares
//! sizes only.

use tl_syntax::ast::BinaryOp;
use tl_syntax::DType;

use super::coerce::Mismatch;
use super::operators::bool_tensor;
use super::ty::{StaticDim, TensorTy, Ty};
use crate::ops::dtype::wider_dtype;
use crate::ops::phrase;

fn mismatch(message: String, hint: Option<String>) -> Mismatch {
    Mismatch { message, hint }
}

/// `lhs op rhs` where at least one side is a tensor.
pub fn binary(op: BinaryOp, lhs: &Ty, rhs: &Ty) -> Result<Ty, Mismatch> {
    use BinaryOp::*;
    let comparison = matches!(op, Eq | Ne | Lt | Le | Gt | Ge | And | Or);
    match (lhs, rhs) {
        (Ty::Tensor(a), Ty::Tensor(b)) if op == MatMul => matmul(a, b).map(Ty::Tensor),
        (Ty::Tensor(a), Ty::Tensor(b)) => {
            let what = phrase(op, &a.to_string(), &b.to_string());
            let dtype = elementwise_dtype(op, a, b, &what)?;
            let dims = match (&a.dims, &b.dims) {
                (Some(x), Some(y)) => Some(broadcast(x, y).ok_or_else(|| {
                    mismatch(format!("cannot {what}: shapes do not broadcast"), None)
                })?),
                _ => None,
            };
            Ok(Ty::tensor(
                if comparison { Some(DType::Bool) } else { dtype },
                dims,
            ))
        }
        (Ty::Tensor(_), Ty::Int | Ty::Float | Ty::Bool)
        | (Ty::Int | Ty::Float | Ty::Bool, Ty::Tensor(_))
            if op == MatMul =>
        {
            // A number becomes a 0-dimensional tensor, which `@` refuses.
            let what = phrase(op, &lhs.to_string(), &rhs.to_string());
            Err(mismatch(
                format!("cannot {what}: `@` needs at least one dimension on each side"),
                Some("use `*` to multiply by a scalar".into()),
            ))
        }
        (Ty::Tensor(t), other) | (other, Ty::Tensor(t)) => Ok(with_scalar(op, t, other)),
        _ => Ok(Ty::Unknown),
    }
}

/// A tensor next to something that is not a tensor.
fn with_scalar(op: BinaryOp, t: &TensorTy, other: &Ty) -> Ty {
    use BinaryOp::*;
    let number = matches!(other, Ty::Int | Ty::Float | Ty::Bool);
    match op {
        // `x == none` asks whether x is the tensor: a bool, not a tensor.
        Eq | Ne => match other {
            Ty::Int | Ty::Float | Ty::Bool | Ty::List(_) => bool_tensor(keep_dims(t, number)),
            Ty::Unknown => Ty::Unknown,
            _ => Ty::Bool,
        },
        Lt | Le | Gt | Ge | And | Or => bool_tensor(keep_dims(t, number)),
        MatMul => Ty::tensor(t.dtype, None),
        Add | Sub | Mul | Div | Rem => Ty::tensor(t.dtype, keep_dims(t, number)),
    }
}

/// The tensor's dimensions when the other side is a number (which broadcasts
/// to them); unknown when it may be a list or tensor of any shape.
fn keep_dims(t: &TensorTy, other_is_number: bool) -> Option<Vec<StaticDim>> {
    if other_is_number {
        t.dims.clone()
    } else {
        None
    }
}

/// The element type both sides share (where known), or why they differ.
fn common_dtype(a: &TensorTy, b: &TensorTy, what: &str) -> Result<Option<DType>, Mismatch> {
    if let (Some(x), Some(y)) = (a.dtype, b.dtype) {
        if x != y {
            let target = wider_dtype(x, y).keyword();
            return Err(mismatch(
                format!("cannot {what}: element types differ"),
                Some(format!("convert one side with to_dtype(x, \"{target}\")")),
            ));
        }
    }
    Ok(a.dtype.or(b.dtype))
}

/// The element type of an elementwise result, or why the sides cannot meet.
fn elementwise_dtype(
    op: BinaryOp,
    a: &TensorTy,
    b: &TensorTy,
    what: &str,
) -> Result<Option<DType>, Mismatch> {
    let dtype = common_dtype(a, b, what)?;
    let arithmetic = matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
    );
    if arithmetic && dtype == Some(DType::Bool) {
        return Err(mismatch(
            format!("cannot {what}: arithmetic needs numbers, not bools"),
            Some("convert with to_dtype(x, \"int64\")".into()),
        ));
    }
    Ok(dtype)
}

/// NumPy broadcasting of two shapes aligned at the last dimension; `None` when
/// two known sizes, neither 1, differ.
pub fn broadcast(a: &[StaticDim], b: &[StaticDim]) -> Option<Vec<StaticDim>> {
    let rank = a.len().max(b.len());
    let at = |s: &[StaticDim], i: usize| {
        let pad = rank - s.len();
        if i < pad {
            None
        } else {
            Some(s[i - pad].clone())
        }
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (Some(x), None) | (None, Some(x)) => Some(x),
            (Some(x), Some(y)) => broadcast_dim(x, y),
            (None, None) => Some(StaticDim::Unknown),
        })
        .collect()
}

fn broadcast_dim(x: StaticDim, y: StaticDim) -> Option<StaticDim> {
    use StaticDim::Known;
    Some(match (x, y) {
        (Known(p), Known(q)) if p != q && p != 1 && q != 1 => return None,
        (Known(1), other) | (other, Known(1)) => other,
        // If it works at all, the size is the known one.
        (Known(p), _) | (_, Known(p)) => Known(p),
        (x, y) if x == y => x,
        _ => StaticDim::Unknown,
    })
}

/// Whether two sizes are known to differ: two numbers, or two names of one
/// signature (which the program declared as separate sizes).
fn differ(x: &StaticDim, y: &StaticDim) -> bool {
    match (x, y) {
        (StaticDim::Known(p), StaticDim::Known(q)) => p != q,
        (StaticDim::Symbol(p), StaticDim::Symbol(q)) => p != q,
        _ => false,
    }
}

/// `a @ b`.
pub fn matmul(a: &TensorTy, b: &TensorTy) -> Result<TensorTy, Mismatch> {
    let what = format!("multiply {a} @ {b}");
    if a.rank() == Some(0) || b.rank() == Some(0) {
        return Err(mismatch(
            format!("cannot {what}: `@` needs at least one dimension on each side"),
            Some("use `*` to multiply by a scalar".into()),
        ));
    }
    if a.dtype.is_some_and(|d| !d.is_float()) || b.dtype.is_some_and(|d| !d.is_float()) {
        return Err(mismatch(
            format!("cannot {what}: `@` needs float tensors"),
            Some("convert with to_dtype(x, \"float32\")".into()),
        ));
    }
    let dtype = common_dtype(a, b, &what)?;
    let (Some(l), Some(r)) = (&a.dims, &b.dims) else {
        return Ok(TensorTy { dtype, dims: None });
    };
    let inner_l = &l[l.len() - 1];
    let inner_r = if r.len() == 1 { &r[0] } else { &r[r.len() - 2] };
    if differ(inner_l, inner_r) {
        let hint = match inner_l {
            StaticDim::Symbol(_) => format!(
                "`{inner_l}` and `{inner_r}` are different names; use one name if they are one size"
            ),
            _ => "transpose one side, or check the weight's shape".into(),
        };
        return Err(mismatch(
            format!("cannot {what}: inner dimensions {inner_l} and {inner_r} differ"),
            Some(hint),
        ));
    }
    let batch_l = &l[..l.len().saturating_sub(2)];
    let batch_r = &r[..r.len().saturating_sub(2)];
    let Some(mut dims) = broadcast(batch_l, batch_r) else {
        return Err(mismatch(
            format!(
                "cannot {what}: batch dimensions {} and {} do not broadcast",
                shape_string(batch_l),
                shape_string(batch_r)
            ),
            None,
        ));
    };
    if l.len() >= 2 {
        dims.push(l[l.len() - 2].clone());
    }
    if r.len() >= 2 {
        dims.push(r[r.len() - 1].clone());
    }
    Ok(TensorTy {
        dtype,
        dims: Some(dims),
    })
}

/// `linear(x, weight)`: `x[..., in]` times a weight `[out, in]` gives
/// `[..., out]`. Quantized weights make float32 results, so the element type
/// is known only when both sides are float32.
pub fn linear(x: &TensorTy, w: &TensorTy) -> Result<TensorTy, Mismatch> {
    let f32 = Some(DType::F32);
    let dtype = if x.dtype == f32 && w.dtype == f32 {
        f32
    } else {
        None
    };
    let Some(w_dims) = &w.dims else {
        return Ok(TensorTy { dtype, dims: None });
    };
    let [out_features, in_features] = &w_dims[..] else {
        return Err(mismatch(
            format!("linear: the weight must be a matrix [out, in], found {w}"),
            None,
        ));
    };
    let Some(x_dims) = &x.dims else {
        return Ok(TensorTy { dtype, dims: None });
    };
    let Some(last) = x_dims.last() else {
        return Err(mismatch(
            format!("linear: x is {x}, which has no features to multiply"),
            None,
        ));
    };
    if differ(last, in_features) {
        return Err(mismatch(
            format!("linear: x is {x} but the weight {w} takes {in_features} input features"),
            Some("the weight is [out, in]: x's last dimension must be `in`".into()),
        ));
    }
    let mut dims = x_dims.clone();
    if let Some(last) = dims.last_mut() {
        *last = out_features.clone();
    }
    Ok(TensorTy {
        dtype,
        dims: Some(dims),
    })
}

fn shape_string(dims: &[StaticDim]) -> String {
    let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use StaticDim::{Known, Symbol, Unknown};

    fn t(dtype: DType, dims: &[StaticDim]) -> TensorTy {
        TensorTy {
            dtype: Some(dtype),
            dims: Some(dims.to_vec()),
        }
    }

    fn sym(name: &str) -> StaticDim {
        Symbol(name.into())
    }

    #[test]
    fn matmul_inner_dimensions_must_agree() {
        let a = t(DType::F16, &[Unknown, Known(2048)]);
        let b = t(DType::F16, &[Known(1024), Unknown]);
        let error = matmul(&a, &b).unwrap_err();
        assert_eq!(
            error.message,
            "cannot multiply float16[?, 2048] @ float16[1024, ?]: inner dimensions 2048 and 1024 differ"
        );
        let b = t(DType::F16, &[Known(2048), Known(7)]);
        assert_eq!(matmul(&a, &b).unwrap().dims, Some(vec![Unknown, Known(7)]));
    }

    #[test]
    fn matmul_binds_names_and_handles_vectors() {
        let a = t(DType::F32, &[sym("n"), sym("d")]);
        let b = t(DType::F32, &[sym("d"), sym("m")]);
        assert_eq!(matmul(&a, &b).unwrap().dims, Some(vec![sym("n"), sym("m")]));
        let v = t(DType::F32, &[sym("d")]);
        assert_eq!(matmul(&a, &v).unwrap().dims, Some(vec![sym("n")]));
        assert_eq!(matmul(&v, &b).unwrap().dims, Some(vec![sym("m")]));
        let k = t(DType::F32, &[sym("k"), sym("m")]);
        assert!(matmul(&a, &k).is_err());
        // A name may be any size, a number among them.
        let five = t(DType::F32, &[Known(5), Known(3)]);
        assert!(matmul(&a, &five).is_ok());
    }

    #[test]
    fn matmul_refuses_scalars_ints_and_mixed_types() {
        let scalar = t(DType::F32, &[]);
        let m = t(DType::F32, &[Known(2), Known(2)]);
        assert!(matmul(&scalar, &m)
            .unwrap_err()
            .message
            .contains("at least one dimension"));
        let ints = t(DType::I64, &[Known(2), Known(2)]);
        assert!(matmul(&ints, &m)
            .unwrap_err()
            .message
            .contains("float tensors"));
        let halves = t(DType::F16, &[Known(2), Known(2)]);
        assert!(matmul(&halves, &m)
            .unwrap_err()
            .message
            .contains("element types differ"));
    }

    #[test]
    fn batch_dimensions_broadcast() {
        let a = t(DType::F32, &[Known(4), Known(2), Known(3)]);
        let b = t(DType::F32, &[Known(3), Known(5)]);
        assert_eq!(
            matmul(&a, &b).unwrap().dims,
            Some(vec![Known(4), Known(2), Known(5)])
        );
        let c = t(DType::F32, &[Known(6), Known(3), Known(5)]);
        assert!(matmul(&a, &c)
            .unwrap_err()
            .message
            .contains("batch dimensions [4] and [6]"));
    }

    #[test]
    fn broadcasting_compares_only_sizes() {
        assert_eq!(
            broadcast(&[Known(2), Known(3)], &[Known(3)]),
            Some(vec![Known(2), Known(3)])
        );
        assert_eq!(
            broadcast(&[Known(2), Known(1)], &[Known(5)]),
            Some(vec![Known(2), Known(5)])
        );
        assert_eq!(broadcast(&[Known(2), Known(3)], &[Known(4)]), None);
        assert_eq!(broadcast(&[sym("n")], &[sym("m")]), Some(vec![Unknown]));
        assert_eq!(broadcast(&[sym("n")], &[Known(4)]), Some(vec![Known(4)]));
        assert_eq!(broadcast(&[sym("n")], &[sym("n")]), Some(vec![sym("n")]));
    }

    #[test]
    fn elementwise_needs_one_element_type() {
        let a = Ty::Tensor(t(DType::F16, &[Known(2)]));
        let b = Ty::Tensor(t(DType::F32, &[Known(2)]));
        let error = binary(BinaryOp::Add, &a, &b).unwrap_err();
        assert_eq!(
            error.message,
            "cannot add float16[2] and float32[2]: element types differ"
        );
        let lt = binary(BinaryOp::Lt, &a, &Ty::Float).unwrap();
        assert_eq!(lt, Ty::Tensor(t(DType::Bool, &[Known(2)])));
        assert_eq!(binary(BinaryOp::Eq, &a, &Ty::None).unwrap(), Ty::Bool);
    }

    #[test]
    fn linear_maps_the_last_dimension() {
        let x = t(DType::F32, &[sym("n"), sym("d")]);
        let w = t(DType::F32, &[Known(8), sym("d")]);
        assert_eq!(linear(&x, &w).unwrap().dims, Some(vec![sym("n"), Known(8)]));
        let w = t(DType::F32, &[Known(8), Known(4)]);
        assert!(linear(&x, &w).is_ok());
        let x = t(DType::F32, &[Known(2), Known(3)]);
        assert!(linear(&x, &w).is_err());
    }
}
