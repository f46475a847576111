//! The static types the checker infers: a coarse picture of what a value will be
//! at run time. Anything the checker cannot be sure of is [`Ty::Unknown`], and
//! unknown never produces a diagnostic: only known facts that contradict each
//! other do.

use std::fmt;

use tl_syntax::DType;

/// One dimension of a tensor type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticDim {
    /// A size known before the program runs (`2048`, or a literal shape).
    Known(usize),
    /// A name from the enclosing function's signature (`n` in `float32[n, d]`):
    /// one size, unknown here but the same wherever the name appears.
    Symbol(String),
    Unknown,
}

/// A tensor's element type and shape, each possibly unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorTy {
    pub dtype: Option<DType>,
    /// `None` when even the rank is unknown.
    pub dims: Option<Vec<StaticDim>>,
}

/// The static type of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Unknown,
    Int,
    Float,
    Bool,
    Str,
    None,
    /// A list, with its element type when every element is known to share one.
    List(Option<Box<Ty>>),
    /// An instance of a declared struct.
    Struct(String),
    /// An engine object: `Model`, `Cache`, `Sampler` or `Decoder`.
    Handle(String),
    Tensor(TensorTy),
}

/// The engine objects a type annotation may name.
pub const HANDLE_TYPES: [&str; 6] = [
    "Model",
    "Cache",
    "Sampler",
    "Decoder",
    "Tokenizer",
    "Optimizer",
];

/// Records the runtime builds (`model.config` is a `ModelConfig`): a type
/// annotation may name them though no `struct` declares them.
pub const RECORD_TYPES: [&str; 1] = ["ModelConfig"];

impl Ty {
    /// A tensor of unknown shape and element type.
    pub fn any_tensor() -> Ty {
        Ty::Tensor(TensorTy {
            dtype: None,
            dims: None,
        })
    }

    /// A tensor type from its parts.
    pub fn tensor(dtype: Option<DType>, dims: Option<Vec<StaticDim>>) -> Ty {
        Ty::Tensor(TensorTy { dtype, dims })
    }

    pub fn is_known(&self) -> bool {
        *self != Ty::Unknown
    }

    /// Whether the value is a number (int or float).
    pub fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// The type a value has when it may come from either of two places (the
    /// branches of an `if`, the elements of a list): what they agree on.
    pub fn join(&self, other: &Ty) -> Ty {
        match (self, other) {
            (a, b) if a == b => a.clone(),
            (Ty::Tensor(a), Ty::Tensor(b)) => Ty::Tensor(a.join(b)),
            (Ty::List(a), Ty::List(b)) => match (a, b) {
                (Some(a), Some(b)) => Ty::List(Some(Box::new(a.join(b)))).simplify_list(),
                _ => Ty::List(None),
            },
            _ => Ty::Unknown,
        }
    }

    fn simplify_list(self) -> Ty {
        match self {
            Ty::List(Some(element)) if *element == Ty::Unknown => Ty::List(None),
            other => other,
        }
    }
}

impl TensorTy {
    /// What two tensor types agree on.
    pub fn join(&self, other: &TensorTy) -> TensorTy {
        let dtype = if self.dtype == other.dtype {
            self.dtype
        } else {
            None
        };
        let dims = match (&self.dims, &other.dims) {
            (Some(a), Some(b)) if a.len() == b.len() => Some(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| {
                        if x == y {
                            x.clone()
                        } else {
                            StaticDim::Unknown
                        }
                    })
                    .collect(),
            ),
            _ => None,
        };
        TensorTy { dtype, dims }
    }

    /// The rank, when known.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(Vec::len)
    }
}

impl fmt::Display for StaticDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaticDim::Known(n) => write!(f, "{n}"),
            StaticDim::Symbol(name) => f.write_str(name),
            StaticDim::Unknown => f.write_str("?"),
        }
    }
}

/// Types print as a program writes them: `float16[?, 2048]`, `list[int]`.
impl fmt::Display for TensorTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dtype.map_or("tensor", DType::keyword))?;
        if let Some(dims) = &self.dims {
            let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
            write!(f, "[{}]", dims.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Unknown => f.write_str("a value of unknown type"),
            Ty::Int => f.write_str("int"),
            Ty::Float => f.write_str("float"),
            Ty::Bool => f.write_str("bool"),
            Ty::Str => f.write_str("string"),
            Ty::None => f.write_str("none"),
            Ty::List(None) => f.write_str("list"),
            Ty::List(Some(element)) => write!(f, "list[{element}]"),
            Ty::Struct(name) | Ty::Handle(name) => f.write_str(name),
            Ty::Tensor(t) => t.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(d: &[StaticDim]) -> Option<Vec<StaticDim>> {
        Some(d.to_vec())
    }

    #[test]
    fn tensor_types_print_as_written() {
        let t = Ty::tensor(
            Some(DType::F16),
            dims(&[
                StaticDim::Unknown,
                StaticDim::Known(2048),
                StaticDim::Symbol("d".into()),
            ]),
        );
        assert_eq!(t.to_string(), "float16[?, 2048, d]");
        assert_eq!(Ty::any_tensor().to_string(), "tensor");
        assert_eq!(Ty::List(Some(Box::new(Ty::Int))).to_string(), "list[int]");
    }

    #[test]
    fn join_keeps_what_both_sides_agree_on() {
        let a = Ty::tensor(
            Some(DType::F32),
            dims(&[StaticDim::Known(2), StaticDim::Known(3)]),
        );
        let b = Ty::tensor(
            Some(DType::F32),
            dims(&[StaticDim::Known(4), StaticDim::Known(3)]),
        );
        assert_eq!(
            a.join(&b),
            Ty::tensor(
                Some(DType::F32),
                dims(&[StaticDim::Unknown, StaticDim::Known(3)])
            )
        );
        assert_eq!(Ty::Int.join(&Ty::Float), Ty::Unknown);
        assert_eq!(Ty::Str.join(&Ty::Str), Ty::Str);
        let ints = Ty::List(Some(Box::new(Ty::Int)));
        let strs = Ty::List(Some(Box::new(Ty::Str)));
        assert_eq!(ints.join(&strs), Ty::List(None));
    }
}
