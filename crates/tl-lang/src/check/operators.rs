//! Operators on static types, following `ops`: ints stay ints, a float makes a
//! float, strings and lists add and repeat, and a tensor on either side makes
//! the operation elementwise (see `tensor_ops`). Combinations the interpreter
//! refuses are reported; a side of unknown type makes the result unknown.

use tl_syntax::ast::{BinaryOp, UnaryOp};
use tl_syntax::{Diagnostic, Span};

use super::body::Body;
use super::tensor_ops;
use super::ty::{TensorTy, Ty};
use crate::ops::phrase;

impl Body<'_, '_> {
    /// The type of `op operand`.
    pub fn unary(&mut self, op: UnaryOp, operand: &Ty, span: Span) -> Ty {
        match (op, operand) {
            (UnaryOp::Neg, Ty::Int | Ty::Float | Ty::Tensor(_)) => operand.clone(),
            (UnaryOp::Not, Ty::Bool | Ty::Tensor(_)) => operand.clone(),
            (_, Ty::Unknown) => Ty::Unknown,
            (UnaryOp::Neg, other) => {
                self.report(Diagnostic::error(format!("cannot negate {other}"), span));
                Ty::Unknown
            }
            (UnaryOp::Not, other) => {
                self.report(Diagnostic::error(
                    format!("`!` needs a bool or a bool tensor, found {other}"),
                    span,
                ));
                Ty::Unknown
            }
        }
    }

    /// The type of `lhs op rhs`; `span` is the whole expression.
    pub fn binary(&mut self, op: BinaryOp, lhs: &Ty, rhs: &Ty, span: Span) -> Ty {
        if matches!(lhs, Ty::Tensor(_)) || matches!(rhs, Ty::Tensor(_)) {
            return match tensor_ops::binary(op, lhs, rhs) {
                Ok(ty) => ty,
                Err(m) => {
                    let error = Diagnostic::error(m.message, span);
                    self.report(match m.hint {
                        Some(hint) => error.with_hint(hint),
                        None => error,
                    });
                    Ty::Unknown
                }
            };
        }
        if !lhs.is_known() || !rhs.is_known() {
            return Ty::Unknown;
        }
        match scalar(op, lhs, rhs) {
            Some(ty) => ty,
            None => {
                let error = Diagnostic::error(
                    format!("cannot {}", phrase(op, &lhs.to_string(), &rhs.to_string())),
                    span,
                );
                self.report(match scalar_hint(op, lhs, rhs) {
                    Some(hint) => error.with_hint(hint),
                    None => error,
                });
                Ty::Unknown
            }
        }
    }
}

/// `lhs op rhs` for two known types, neither a tensor; `None` if the
/// interpreter refuses the combination.
fn scalar(op: BinaryOp, lhs: &Ty, rhs: &Ty) -> Option<Ty> {
    use BinaryOp::*;
    Some(match (op, lhs, rhs) {
        (Eq | Ne, _, _) => Ty::Bool,
        (Add | Sub | Mul | Div | Rem, Ty::Int, Ty::Int) => Ty::Int,
        (Add | Sub | Mul | Div | Rem, l, r) if l.is_number() && r.is_number() => Ty::Float,
        (Add, Ty::Str, Ty::Str) => Ty::Str,
        (Add, Ty::List(_), Ty::List(_)) => lhs.join(rhs),
        (Mul, Ty::List(_) | Ty::Str, Ty::Int) => lhs.clone(),
        (Mul, Ty::Int, Ty::List(_) | Ty::Str) => rhs.clone(),
        (Lt | Le | Gt | Ge, l, r) if l.is_number() && r.is_number() => Ty::Bool,
        (Lt | Le | Gt | Ge, Ty::Str, Ty::Str) => Ty::Bool,
        (And | Or, Ty::Bool, Ty::Bool) => Ty::Bool,
        // `false && x` never looks at `x`, so only the left side can be wrong.
        (And | Or, Ty::Bool, _) => Ty::Unknown,
        _ => return None,
    })
}

fn scalar_hint(op: BinaryOp, lhs: &Ty, rhs: &Ty) -> Option<&'static str> {
    match op {
        BinaryOp::MatMul => Some("`@` multiplies tensors; use `*` for numbers"),
        BinaryOp::And | BinaryOp::Or => Some("`&&` and `||` need bools"),
        BinaryOp::Add
            if (*lhs == Ty::Str && rhs.is_number()) || (lhs.is_number() && *rhs == Ty::Str) =>
        {
            Some("convert the number with `str(x)`, or use `format(\"{}{}\", a, b)`")
        }
        _ => None,
    }
}

/// A tensor type with the element type of a comparison's result.
pub fn bool_tensor(dims: Option<Vec<super::ty::StaticDim>>) -> Ty {
    Ty::Tensor(TensorTy {
        dtype: Some(tl_syntax::DType::Bool),
        dims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_widen_to_float_and_strings_repeat() {
        assert_eq!(scalar(BinaryOp::Add, &Ty::Int, &Ty::Int), Some(Ty::Int));
        assert_eq!(scalar(BinaryOp::Div, &Ty::Int, &Ty::Float), Some(Ty::Float));
        assert_eq!(scalar(BinaryOp::Mul, &Ty::Str, &Ty::Int), Some(Ty::Str));
        assert_eq!(scalar(BinaryOp::Lt, &Ty::Float, &Ty::Int), Some(Ty::Bool));
    }

    #[test]
    fn refused_combinations() {
        assert_eq!(scalar(BinaryOp::Add, &Ty::Str, &Ty::Int), None);
        assert_eq!(scalar(BinaryOp::Mul, &Ty::Str, &Ty::Float), None);
        assert_eq!(scalar(BinaryOp::MatMul, &Ty::Int, &Ty::Int), None);
        assert_eq!(scalar(BinaryOp::Lt, &Ty::Str, &Ty::Int), None);
        assert_eq!(scalar(BinaryOp::And, &Ty::Int, &Ty::Bool), None);
        // The right side of `&&` may never run.
        assert_eq!(
            scalar(BinaryOp::And, &Ty::Bool, &Ty::Int),
            Some(Ty::Unknown)
        );
    }
}
