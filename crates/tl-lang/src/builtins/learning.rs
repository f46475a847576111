//! Learning builtins: `learnable`, `grad`, `sgd`, `adam`, and the optimizer's
//! `step` method (the machinery is in `learning.rs`).

use std::cell::RefCell;
use std::rc::Rc;

use candle_core::Tensor as CandleTensor;

use super::methods::expect_args;
use super::tensor_args::{at_arg, float_arg};
use super::{Args, Builtin, Context, Gradient};
use crate::error::Result;
use crate::handles::Handle;
use crate::learning::{self, Adam, Optimizer, Rule};
use crate::value::Value;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "learnable",
        signature: "learnable(x) -> tensor",
        min_args: 1,
        max_args: 1,
        summary: "A learnable copy of x (ints become float32): a parameter that `grad` and the optimizers differentiate by. A variable or field holding one stays learnable when assigned.",
        call: learnable,
        gradient: Gradient::Zero("a new parameter: gradients stop there"),
    },
    Builtin {
        name: "grad",
        signature: "grad(loss, params) -> tensor | list",
        min_args: 2,
        max_args: 2,
        summary: "The gradient of `loss` (a float tensor of one element) with respect to a learnable tensor, or the list of gradients for a list of them, by reverse-mode differentiation; zeros for a parameter the loss does not depend on.",
        call: grad,
        gradient: Gradient::Zero("gradients are constants: no second derivatives"),
    },
    Builtin {
        name: "sgd",
        signature: "sgd(params, lr) -> Optimizer",
        min_args: 2,
        max_args: 2,
        summary: "Gradient descent over a list of learnable tensors: `opt.step(loss)` moves each parameter by -lr · its gradient, in place.",
        call: sgd,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "adam",
        signature: "adam(params, lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8) -> Optimizer",
        min_args: 1,
        max_args: 5,
        summary: "Adam over a list of learnable tensors (bias-corrected moments): `opt.step(loss)` updates each parameter in place.",
        call: adam,
        gradient: Gradient::NotApplicable,
    },
];

fn learnable(_: &mut Context, args: &Args) -> Result<Value> {
    let x = float_arg(args, 0)?;
    Ok(Value::tensor(
        learning::learnable(&x).map_err(at_arg(args, 0))?,
    ))
}

fn grad(_: &mut Context, args: &Args) -> Result<Value> {
    let (params, listed) = parameters(args, 1)?;
    let grads = learning::gradients(args.value(0)?, &params).map_err(at_arg(args, 0))?;
    let mut values: Vec<Value> = grads.into_iter().map(Value::tensor).collect();
    match listed {
        true => Ok(Value::list(values)),
        false => values
            .pop()
            .ok_or_else(|| args.error(1, "grad needs a parameter")),
    }
}

fn sgd(_: &mut Context, args: &Args) -> Result<Value> {
    let lr = positive(args, 1, None)?;
    optimizer(args, Rule::Sgd { lr })
}

fn adam(_: &mut Context, args: &Args) -> Result<Value> {
    let adam = Adam {
        lr: positive(args, 1, Some(1e-3))?,
        beta1: fraction(args, 2, 0.9)?,
        beta2: fraction(args, 3, 0.999)?,
        eps: positive(args, 4, Some(1e-8))?,
    };
    optimizer(args, Rule::Adam(adam))
}

fn optimizer(args: &Args, rule: Rule) -> Result<Value> {
    let (params, _) = parameters(args, 0)?;
    let optimizer = Optimizer::new(&params, rule).map_err(at_arg(args, 0))?;
    Ok(Value::Handle(Handle::Optimizer(Rc::new(RefCell::new(
        optimizer,
    )))))
}

/// Argument `i`: one learnable tensor, or a list of them (and whether it
/// was a list).
fn parameters(args: &Args, i: usize) -> Result<(Vec<CandleTensor>, bool)> {
    match args.value(i)? {
        Value::List(items) => {
            let items = items.borrow();
            let params = items.iter().enumerate().map(|(k, item)| {
                learning::parameter(item).map_err(|e| {
                    let message = format!("item {k} of the list: {}", e.message);
                    crate::error::LangError { message, ..e }
                        .or_at(super::tensor_args::span(args, i))
                })
            });
            Ok((params.collect::<Result<_>>()?, true))
        }
        value => Ok((
            vec![learning::parameter(value).map_err(at_arg(args, i))?],
            false,
        )),
    }
}

/// Optional argument `i`, a number above 0.
fn positive(args: &Args, i: usize, default: Option<f64>) -> Result<f64> {
    let value = match (args.opt_float(i)?, default) {
        (Some(v), _) | (None, Some(v)) => v,
        (None, None) => args.float(i)?,
    };
    if value > 0.0 && value.is_finite() {
        return Ok(value);
    }
    Err(args.error(
        i,
        format!("{} needs a number above 0 here, found {value}", args.name),
    ))
}

/// Optional argument `i`, a number in [0, 1).
fn fraction(args: &Args, i: usize, default: f64) -> Result<f64> {
    let value = args.opt_float(i)?.unwrap_or(default);
    if (0.0..1.0).contains(&value) {
        return Ok(value);
    }
    Err(args.error(
        i,
        format!("{} needs a number in [0, 1) here, found {value}", args.name),
    ))
}

/// The methods of an optimizer: `opt.step(loss)`.
pub(super) fn optimizer_method(
    optimizer: &RefCell<Optimizer>,
    args: &Args,
) -> Option<Result<Value>> {
    match args.name {
        "step" => Some(expect_args(args, 1, 1).and_then(|_| {
            let mut optimizer = optimizer.borrow_mut();
            optimizer.step(args.value(0)?).map_err(at_arg(args, 0))?;
            Ok(Value::None)
        })),
        _ => None,
    }
}
