//! What builtins return. Tensor constructors with literal shapes and element
//! types, reshapes, transposes, products and elementwise functions get a full
//! tensor type; every other builtin gets the result type its documented
//! signature names (`len(x) -> int`), read from the builtin table at run time
//! so the checker follows the table as it grows.

use tl_syntax::ast::{BinaryOp, Expr, ExprKind};
use tl_syntax::{DType, Span};

use super::body::Body;
use super::tensor_ops;
use super::ty::{StaticDim, TensorTy, Ty, HANDLE_TYPES};
use crate::builtins::Builtin;

/// Builtins whose result has the shape and element type of their first argument.
const ELEMENTWISE: &[&str] = &[
    "softmax",
    "log_softmax",
    "silu",
    "gelu",
    "relu",
    "sigmoid",
    "step",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "sin",
    "cos",
    "neg",
    "square",
];

/// Builtins whose result has the shape of their first argument.
const SAME_SHAPE: &[&str] = &["rms_norm", "layer_norm", "rope"];

/// Tensor constructors whose first argument is the shape.
const FROM_SHAPE: &[&str] = &["zeros", "ones", "full", "rand", "randn", "empty"];

/// Builtins that move a tensor's elements around without converting them.
const SAME_DTYPE: &[&str] = &["permute", "squeeze", "unsqueeze", "slice", "flatten"];

impl Body<'_, '_> {
    /// The result type of a builtin call whose arity is right.
    pub fn builtin_result(
        &mut self,
        builtin: &Builtin,
        args: &[&Expr],
        tys: &[Ty],
        span: Span,
    ) -> Ty {
        let first = match tys.first() {
            Some(Ty::Tensor(t)) => Some(t),
            _ => None,
        };
        let name = builtin.name;
        let rest = args.get(1..).unwrap_or(&[]);
        let inferred = match (name, first) {
            ("matmul", _) if tys.len() == 2 => {
                return self.binary(BinaryOp::MatMul, &tys[0], &tys[1], span)
            }
            ("linear", Some(x)) => match tys.get(1) {
                Some(Ty::Tensor(w)) => Some(self.linear(x, w, span)),
                _ => None,
            },
            (_, Some(x)) if ELEMENTWISE.contains(&name) => Some(TensorTy {
                dtype: x.dtype.filter(|d| d.is_float()),
                dims: x.dims.clone(),
            }),
            (_, Some(x)) if SAME_SHAPE.contains(&name) => Some(TensorTy {
                dtype: None,
                dims: x.dims.clone(),
            }),
            (_, Some(x)) if SAME_DTYPE.contains(&name) => Some(TensorTy {
                dtype: x.dtype,
                dims: None,
            }),
            ("reshape" | "broadcast_to", x) => Some(TensorTy {
                dtype: x.and_then(|x| x.dtype),
                dims: args.get(1).and_then(|shape| self.literal_shape(shape)),
            }),
            ("transpose", Some(x)) => Some(TensorTy {
                dtype: x.dtype,
                dims: transposed(x.dims.as_deref(), rest),
            }),
            ("to_dtype", x) => Some(TensorTy {
                dtype: literal_dtype(rest),
                dims: x.and_then(|x| x.dims.clone()),
            }),
            _ if FROM_SHAPE.contains(&name) => Some(TensorTy {
                dtype: requested_dtype(builtin, args).unwrap_or_else(|| default_dtype(builtin)),
                dims: args.first().and_then(|shape| self.literal_shape(shape)),
            }),
            ("eye", _) => Some(TensorTy {
                dtype: requested_dtype(builtin, args).unwrap_or_else(|| default_dtype(builtin)),
                dims: args.first().map(|n| vec![self.dim_of(n); 2]),
            }),
            ("tensor", _) => args.first().map(|data| TensorTy {
                dtype: requested_dtype(builtin, args).unwrap_or_else(|| match tys.first() {
                    Some(Ty::Tensor(t)) => t.dtype,
                    _ => literal_data_dtype(data),
                }),
                dims: match tys.first() {
                    Some(Ty::Tensor(t)) => t.dims.clone(),
                    _ => literal_data_shape(data),
                },
            }),
            ("arange", _) => Some(TensorTy {
                dtype: literal_dtype(args),
                dims: Some(vec![StaticDim::Unknown]),
            }),
            _ => None,
        };
        match inferred {
            Some(t) => Ty::Tensor(t),
            None => documented_result(builtin.signature),
        }
    }

    fn linear(&mut self, x: &TensorTy, w: &TensorTy, span: Span) -> TensorTy {
        tensor_ops::linear(x, w).unwrap_or_else(|m| {
            self.report_mismatch(m, span, None);
            TensorTy {
                dtype: None,
                dims: None,
            }
        })
    }

    /// The dimensions of a shape written as a list literal (`[n, 4]`): ints
    /// and size-naming variables give their size, anything else (`-1` too,
    /// which a reshape infers) an unknown one.
    fn literal_shape(&self, shape: &Expr) -> Option<Vec<StaticDim>> {
        let ExprKind::List(items) = &shape.kind else {
            return None;
        };
        Some(items.iter().map(|item| self.dim_of(item)).collect())
    }
}

/// The dimensions after `transpose(x, dim0 = -2, dim1 = -1)`.
fn transposed(dims: Option<&[StaticDim]>, axes: &[&Expr]) -> Option<Vec<StaticDim>> {
    let mut dims = dims?.to_vec();
    let rank = dims.len();
    let last = rank.checked_sub(1)?;
    let (d0, d1) = match axes {
        [] => (rank.checked_sub(2)?, last),
        [a] => (axis(a, rank)?, last),
        [a, b] => (axis(a, rank)?, axis(b, rank)?),
        _ => return None,
    };
    dims.swap(d0, d1);
    Some(dims)
}

/// A literal dimension index (negative counts from the end), within `rank`.
fn axis(e: &Expr, rank: usize) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let i = match &e.kind {
        ExprKind::Int(i) => *i,
        ExprKind::Unary {
            op: tl_syntax::ast::UnaryOp::Neg,
            operand,
        } => match operand.kind {
            ExprKind::Int(i) => -i,
            _ => return None,
        },
        _ => return None,
    };
    let resolved = if i < 0 { i + rank } else { i };
    usize::try_from(resolved)
        .ok()
        .filter(|&a| (a as i64) < rank)
}

/// The shape of nested list literals (`[[1, 2], [3, 4]]` is [2, 2]), probed
/// along the first elements as the interpreter does; a number is 0-d.
fn literal_data_shape(data: &Expr) -> Option<Vec<StaticDim>> {
    let mut dims = Vec::new();
    let mut probe = data;
    loop {
        match &probe.kind {
            ExprKind::List(items) => {
                dims.push(StaticDim::Known(items.len()));
                match items.first() {
                    Some(first) => probe = first,
                    None => return Some(dims),
                }
            }
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => return Some(dims),
            _ => return None,
        }
    }
}

/// The element type nested literals make: int64 when every element is an int
/// literal, float32 when they are number literals with a float among them.
fn literal_data_dtype(data: &Expr) -> Option<DType> {
    /// Which kinds of literal the leaves are, as the interpreter reads them.
    #[derive(Default)]
    struct Leaves {
        ints: bool,
        floats: bool,
        bools: bool,
        others: bool,
    }
    fn visit(e: &Expr, seen: &mut Leaves) {
        match &e.kind {
            ExprKind::List(items) => items.iter().for_each(|i| visit(i, seen)),
            ExprKind::Int(_) => seen.ints = true,
            ExprKind::Float(_) => seen.floats = true,
            ExprKind::Bool(_) => seen.bools = true,
            _ => seen.others = true,
        }
    }
    let mut seen = Leaves::default();
    visit(data, &mut seen);
    match seen {
        Leaves { others: true, .. } => None,
        Leaves {
            bools: true,
            ints: false,
            floats: false,
            ..
        } => Some(DType::Bool),
        Leaves {
            floats: false,
            bools: false,
            ..
        } => Some(DType::I64),
        _ => Some(DType::F32),
    }
}

/// The element type named by a string literal among the arguments.
fn literal_dtype(args: &[&Expr]) -> Option<DType> {
    args.iter().find_map(|arg| match &arg.kind {
        ExprKind::Str(s) => dtype_keyword(s),
        _ => None,
    })
}

fn dtype_keyword(word: &str) -> Option<DType> {
    match word {
        "bool" => Some(DType::Bool),
        other => DType::from_keyword(other),
    }
}

/// The element type a call asks for through its `dtype` parameter:
/// `Some(Some(t))` for a literal, `Some(None)` for any other value, and `None`
/// when the argument is left out.
fn requested_dtype(builtin: &Builtin, args: &[&Expr]) -> Option<Option<DType>> {
    let position = parameter_names(builtin.signature).position(|p| p == "dtype")?;
    let arg = args.get(position)?;
    Some(match &arg.kind {
        ExprKind::Str(s) => dtype_keyword(s),
        _ => None,
    })
}

/// The names of a signature's parameters: `zeros(shape, dtype = "float32")`
/// has `shape` and `dtype`.
fn parameter_names(signature: &str) -> impl Iterator<Item = &str> {
    let params = signature
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(params, _)| params);
    params
        .split(',')
        .map(|p| p.split_once('=').map_or(p, |(name, _)| name).trim())
}

/// The element type a constructor makes when none is given, as its signature
/// documents it: `zeros(shape, dtype = "float32")`.
fn default_dtype(builtin: &Builtin) -> Option<DType> {
    let (_, rest) = builtin.signature.split_once("dtype = \"")?;
    let (word, _) = rest.split_once('"')?;
    dtype_keyword(word)
}

/// The result type a signature documents after `->`; unknown for a union
/// (`string | none`) or anything unfamiliar.
pub fn documented_result(signature: &str) -> Ty {
    let Some((_, result)) = signature.rsplit_once("->") else {
        return Ty::Unknown;
    };
    match result.trim() {
        "int" => Ty::Int,
        "float" => Ty::Float,
        "bool" => Ty::Bool,
        "string" => Ty::Str,
        "tensor" => Ty::any_tensor(),
        "list" => Ty::List(None),
        "list[int]" => Ty::List(Some(Box::new(Ty::Int))),
        "list[float]" => Ty::List(Some(Box::new(Ty::Float))),
        "list[string]" => Ty::List(Some(Box::new(Ty::Str))),
        handle if HANDLE_TYPES.contains(&handle) => Ty::Handle(handle.to_string()),
        _ => Ty::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tl_syntax::Span;

    fn int(i: i64) -> Expr {
        Expr {
            kind: ExprKind::Int(i),
            span: Span::default(),
        }
    }

    #[test]
    fn signatures_name_result_types() {
        assert_eq!(documented_result("len(x) -> int"), Ty::Int);
        assert_eq!(
            documented_result("load_model(path) -> Model"),
            Ty::Handle("Model".into())
        );
        assert_eq!(
            documented_result("tokenize(m, t) -> list[int]"),
            Ty::List(Some(Box::new(Ty::Int)))
        );
        assert_eq!(documented_result("env(name) -> string | none"), Ty::Unknown);
        assert_eq!(
            documented_result("print(format_or_value, args...)"),
            Ty::Unknown
        );
    }

    #[test]
    fn transpose_swaps_named_axes() {
        use StaticDim::Known;
        let dims = [Known(2), Known(3), Known(4)];
        let (zero, two) = (int(0), int(2));
        assert_eq!(
            transposed(Some(&dims), &[&zero, &two]),
            Some(vec![Known(4), Known(3), Known(2)])
        );
        assert_eq!(
            transposed(Some(&dims[1..]), &[]),
            Some(vec![Known(4), Known(3)])
        );
        // The last two by default, or one given dimension with the last.
        assert_eq!(
            transposed(Some(&dims), &[]),
            Some(vec![Known(2), Known(4), Known(3)])
        );
        assert_eq!(
            transposed(Some(&dims), &[&zero]),
            Some(vec![Known(4), Known(3), Known(2)])
        );
        assert_eq!(transposed(Some(&dims[2..]), &[]), None);
        let far = int(7);
        assert_eq!(transposed(Some(&dims), &[&zero, &far]), None);
    }
}
