//! The builtin functions: one table of every builtin's name, arity, signature and
//! summary (the checker and `docs/language.md` are checked against it), and one
//! module per family.

mod args;
pub(crate) mod collection_methods;
mod context;
mod core;
mod creation;
mod engine_ops;
mod learning;
mod math;
pub mod methods;
mod model;
pub(crate) mod nn;
mod shape;
mod tensor_args;
#[cfg(test)]
pub(crate) mod test_util;

pub use args::{resolve_dim, Args};
pub use context::{Context, DefaultModel};

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::Result;
use crate::value::Value;

/// How a builtin is called.
pub type BuiltinFn = fn(&mut Context, &Args) -> Result<Value>;

/// One builtin function.
pub struct Builtin {
    pub name: &'static str,
    /// The signature as documented: `zeros(shape, dtype = "float32") -> tensor`.
    pub signature: &'static str,
    pub min_args: usize,
    /// `usize::MAX` for variadic builtins.
    pub max_args: usize,
    /// One line saying what it does.
    pub summary: &'static str,
    pub call: BuiltinFn,
    /// Whether `grad` differentiates through it (a test walks the table and
    /// checks every differentiable builtin against finite differences).
    pub gradient: Gradient,
}

/// A builtin's place in reverse-mode differentiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gradient {
    /// The gradient flows to every float tensor argument that is, or depends
    /// on, a learnable tensor.
    Differentiable,
    /// Its result is piecewise constant or not a float, for the reason
    /// given: the gradient through it is zero.
    Zero(&'static str),
    /// It makes no float tensor from float tensors (printing, shapes, new
    /// tensors, models), so there is nothing to differentiate.
    NotApplicable,
}

/// A family of builtins, as the language reference groups them.
pub struct Family {
    pub title: &'static str,
    pub builtins: &'static [Builtin],
}

/// Every family, in documentation order.
pub fn families() -> [Family; 8] {
    let family = |title, builtins| Family { title, builtins };
    [
        family(
            "Printing, conversions, assertions and the environment",
            core::TABLE,
        ),
        family("Creating tensors", creation::TABLE),
        family("Shapes", shape::TABLE),
        family("Math", math::TABLE),
        family("Neural-network operations", nn::TABLE),
        family(
            "Transformer layers (on the engine's kernels)",
            engine_ops::TABLE,
        ),
        family("Models, tokenizers and sampling", model::TABLE),
        family("Learning", learning::TABLE),
    ]
}

/// Every builtin.
pub fn all() -> impl Iterator<Item = &'static Builtin> {
    families().into_iter().flat_map(|f| f.builtins)
}

/// The builtin of that name (a map built once: calls look builtins up often).
pub fn find(name: &str) -> Option<&'static Builtin> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static Builtin>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| all().map(|b| (b.name, b)).collect())
        .get(name)
        .copied()
}

/// The reference section of `docs/language.md`: each family's builtins with
/// their signatures and summaries (kept current by a test).
pub fn reference_markdown() -> String {
    let mut out = String::new();
    for family in families() {
        out.push_str(&format!("### {}\n\n", family.title));
        for builtin in family.builtins {
            let gradient = match builtin.gradient {
                Gradient::Differentiable => " Differentiable.".to_string(),
                Gradient::Zero(why) => format!(" Gradient zero ({why})."),
                Gradient::NotApplicable => String::new(),
            };
            out.push_str(&format!(
                "- `{}` — {}{gradient}\n",
                builtin.signature, builtin.summary
            ));
        }
        out.push('\n');
    }
    out
}
