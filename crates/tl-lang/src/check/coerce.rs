//! Whether a value of a static type can pass the run-time check against a
//! written type (`let x: T`, a parameter, a result, a struct field). This mirrors
//! `interp::types::coerce`: ints become floats, numbers and lists become tensors
//! of the written element type, and named dimensions bind on first use and must
//! agree afterwards. Only a contradiction between known facts is reported.

use std::collections::HashMap;

use tl_syntax::ast::{Dim, TypeExpr, TypeKind};

use super::ty::{StaticDim, TensorTy, Ty};
use super::written::written_string;

/// What each named dimension of one signature (or one annotation) is bound to.
pub type DimBindings = HashMap<String, StaticDim>;

/// Why a value can never have the written type.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub message: String,
    pub hint: Option<String>,
}

/// The contradiction between `found` and `written`, or `None` when a value of
/// type `found` may pass. Binds named dimensions of `written` into `bound`.
pub fn contradiction(found: &Ty, written: &TypeExpr, bound: &mut DimBindings) -> Option<Mismatch> {
    let why = why_not(found, written, bound)?;
    let base = format!("expected {}, found {found}", written_string(written));
    Some(Mismatch {
        message: match why.detail {
            Some(detail) => format!("{base}: {detail}"),
            None => base,
        },
        hint: why.hint,
    })
}

/// What makes a mismatch: a detail said after the two types, and a hint.
#[derive(Default)]
struct Why {
    detail: Option<String>,
    hint: Option<String>,
}

fn why_not(found: &Ty, written: &TypeExpr, bound: &mut DimBindings) -> Option<Why> {
    let plain = || Some(Why::default());
    match (&written.kind, found) {
        (_, Ty::Unknown) => None,
        (TypeKind::Int, Ty::Int)
        | (TypeKind::Float, Ty::Int | Ty::Float)
        | (TypeKind::Bool, Ty::Bool)
        | (TypeKind::Str, Ty::Str)
        | (TypeKind::List(None), Ty::List(_))
        | (TypeKind::List(Some(_)), Ty::List(None)) => None,
        (TypeKind::List(Some(element)), Ty::List(Some(found_element))) => {
            why_not(found_element, element, bound).and_then(|_| plain())
        }
        (TypeKind::Named(name), _) => match found {
            Ty::Struct(s) | Ty::Handle(s) if s == name => None,
            Ty::Tensor(_) if name == "tensor" => None,
            _ => plain(),
        },
        // Numbers and lists become tensors of the written element type.
        (TypeKind::Tensor { dims, .. }, Ty::Int | Ty::Float | Ty::Bool) => {
            scalar_dims(dims.as_deref())
        }
        (TypeKind::Tensor { .. }, Ty::List(_)) => None,
        (TypeKind::Tensor { dtype, dims }, Ty::Tensor(t)) => {
            tensor_why(t, *dtype, dims.as_deref(), bound)
        }
        _ => plain(),
    }
}

/// A number becomes a 0-dimensional tensor, which a written shape must allow.
fn scalar_dims(written: Option<&[Dim]>) -> Option<Why> {
    match written {
        Some(dims) if !dims.is_empty() => Some(Why {
            detail: Some(format!(
                "a number is a tensor of 0 dimensions, not {}",
                dims.len()
            )),
            hint: None,
        }),
        _ => None,
    }
}

/// Why a tensor cannot have the written element type and shape.
fn tensor_why(
    found: &TensorTy,
    dtype: tl_syntax::DType,
    written: Option<&[Dim]>,
    bound: &mut DimBindings,
) -> Option<Why> {
    if found.dtype.is_some_and(|d| d != dtype) {
        return Some(Why {
            detail: None,
            hint: Some(format!(
                "convert it with `to_dtype(x, \"{}\")`",
                dtype.keyword()
            )),
        });
    }
    let (Some(found_dims), Some(written)) = (&found.dims, written) else {
        return None;
    };
    dims_contradiction(found_dims, written, bound).map(|detail| Why {
        detail: Some(detail),
        hint: None,
    })
}

/// Why known dimensions cannot match written ones; binds names as it goes.
pub fn dims_contradiction(
    found: &[StaticDim],
    written: &[Dim],
    bound: &mut DimBindings,
) -> Option<String> {
    if found.len() != written.len() {
        let plural = if found.len() == 1 { "" } else { "s" };
        return Some(format!(
            "{} dimension{plural} instead of {}",
            found.len(),
            written.len()
        ));
    }
    for (axis, (size, dim)) in found.iter().zip(written).enumerate() {
        match (dim, size) {
            (Dim::Known(expected), StaticDim::Known(actual)) if actual != expected => {
                return Some(format!("dimension {axis} is {actual}, not {expected}"));
            }
            (Dim::Named(name), _) => match bound.get(name) {
                Some(StaticDim::Known(earlier)) => {
                    if let StaticDim::Known(actual) = size {
                        if actual != earlier {
                            return Some(format!(
                                "dimension {axis} is {actual}, but `{name}` is {earlier} elsewhere"
                            ));
                        }
                    }
                }
                // Binding an unknown size first and a known one later is still
                // one size: the later fact is the better one to keep.
                Some(StaticDim::Unknown) | None => {
                    bound.insert(name.clone(), size.clone());
                }
                Some(StaticDim::Symbol(_)) => {}
            },
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tl_syntax::{DType, Span};

    fn tensor_type(dtype: DType, dims: Vec<Dim>) -> TypeExpr {
        TypeExpr {
            kind: TypeKind::Tensor {
                dtype,
                dims: Some(dims),
            },
            span: Span::default(),
        }
    }

    fn found(dtype: DType, dims: &[usize]) -> Ty {
        Ty::tensor(
            Some(dtype),
            Some(dims.iter().map(|&d| StaticDim::Known(d)).collect()),
        )
    }

    #[test]
    fn ints_become_floats_and_tensors() {
        let float = TypeExpr {
            kind: TypeKind::Float,
            span: Span::default(),
        };
        assert_eq!(
            contradiction(&Ty::Int, &float, &mut DimBindings::new()),
            None
        );
        let t = tensor_type(DType::F16, vec![]);
        assert_eq!(contradiction(&Ty::Float, &t, &mut DimBindings::new()), None);
        let message = contradiction(&Ty::Str, &float, &mut DimBindings::new()).map(|m| m.message);
        assert_eq!(message.as_deref(), Some("expected float, found string"));
    }

    #[test]
    fn known_dimensions_and_element_types_must_agree() {
        let t = tensor_type(DType::F32, vec![Dim::Known(2), Dim::Unknown]);
        let bound = &mut DimBindings::new();
        assert_eq!(contradiction(&found(DType::F32, &[2, 7]), &t, bound), None);
        let m = contradiction(&found(DType::F32, &[3, 7]), &t, bound).map(|m| m.message);
        assert_eq!(
            m.as_deref(),
            Some("expected float32[2, ?], found float32[3, 7]: dimension 0 is 3, not 2")
        );
        let m = contradiction(&found(DType::F16, &[2, 7]), &t, bound);
        assert!(m.is_some_and(|m| m.hint.is_some_and(|h| h.contains("to_dtype"))));
    }

    #[test]
    fn named_dimensions_bind_once() {
        let n = || Dim::Named("n".into());
        let t = tensor_type(DType::F32, vec![n(), n()]);
        assert_eq!(
            contradiction(&found(DType::F32, &[4, 4]), &t, &mut DimBindings::new()),
            None
        );
        let m = contradiction(&found(DType::F32, &[4, 5]), &t, &mut DimBindings::new());
        assert!(m.is_some_and(|m| m
            .message
            .ends_with("dimension 1 is 5, but `n` is 4 elsewhere")));
        let symbolic = Ty::tensor(
            Some(DType::F32),
            Some(vec![StaticDim::Symbol("a".into()); 2]),
        );
        assert_eq!(contradiction(&symbolic, &t, &mut DimBindings::new()), None);
    }
}
