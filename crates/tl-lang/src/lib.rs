//! The TensorLogic language: values, the static checker, the interpreter and the
//! builtins. `tl-syntax` parses; this crate checks and runs.

pub mod builtins;
pub mod check;
pub mod convert;
pub mod display;
pub mod equation;
pub mod error;
pub mod gpu;
pub mod handles;
pub mod tensor;
pub mod value;

pub use error::{ErrorKind, LangError, Result};
pub use tensor::Tensor;
pub use value::Value;
pub mod indexing;
pub mod interp;
pub mod learning;
pub mod loader;
pub mod logic;
pub mod ops;
pub mod suggest;
