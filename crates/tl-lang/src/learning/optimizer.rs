//! Optimizers: `sgd(params, lr)` and `adam(params, lr, ...)` hold learnable
//! tensors and, on each `step(loss)`, differentiate the loss and write new
//! values into the parameters' storage in place, so every variable holding
//! a parameter sees them (as in PyTorch).

use candle_core::{Tensor as CandleTensor, Var};

use super::gradients;
use crate::error::Result;
use crate::value::Value;

/// How a step turns gradients into new values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// p ← p − lr·g.
    Sgd {
        lr: f64,
    },
    Adam(Adam),
}

/// Adam (Kingma and Ba, 2015), with bias-corrected moments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

/// Parameters and the state their rule keeps between steps.
#[derive(Debug)]
pub struct Optimizer {
    params: Vec<Var>,
    rule: Rule,
    /// Adam's first and second moments, one pair per parameter.
    moments: Vec<(CandleTensor, CandleTensor)>,
    steps: u64,
}

impl Optimizer {
    /// An optimizer over `params`, learnable tensors (checked by the caller).
    pub fn new(params: &[CandleTensor], rule: Rule) -> Result<Self> {
        let moments = match rule {
            Rule::Sgd { .. } => Vec::new(),
            Rule::Adam(_) => params
                .iter()
                .map(|p| Ok((p.zeros_like()?, p.zeros_like()?)))
                .collect::<Result<_>>()?,
        };
        Ok(Optimizer {
            params: params
                .iter()
                .map(Var::from_tensor)
                .collect::<candle_core::Result<_>>()?,
            rule,
            moments,
            steps: 0,
        })
    }

    /// Differentiates `loss` and moves every parameter one step against its
    /// gradient.
    pub fn step(&mut self, loss: &Value) -> Result<()> {
        let tensors: Vec<CandleTensor> =
            self.params.iter().map(|v| v.as_tensor().clone()).collect();
        let grads = gradients(loss, &tensors)?;
        self.steps += 1;
        for (i, grad) in grads.iter().enumerate() {
            let update = match self.rule {
                Rule::Sgd { lr } => grad.affine(lr, 0.0)?,
                Rule::Adam(adam) => self.adam_update(i, grad, adam)?,
            };
            let param = &self.params[i];
            param.set(&param.as_detached_tensor().sub(&update)?)?;
        }
        Ok(())
    }

    /// Adam's step for parameter `i`, updating its moments.
    fn adam_update(&mut self, i: usize, grad: &CandleTensor, adam: Adam) -> Result<CandleTensor> {
        let Adam {
            lr,
            beta1,
            beta2,
            eps,
        } = adam;
        let (m, v) = &self.moments[i];
        let m = (m.affine(beta1, 0.0)? + grad.affine(1.0 - beta1, 0.0)?)?;
        let v = (v.affine(beta2, 0.0)? + grad.sqr()?.affine(1.0 - beta2, 0.0)?)?;
        // The moments start at zero: dividing by 1 - βᵗ removes that bias.
        let t = self.steps.min(i32::MAX as u64) as i32;
        let m_hat = m.affine(1.0 / (1.0 - beta1.powi(t)), 0.0)?;
        let v_hat = v.affine(1.0 / (1.0 - beta2.powi(t)), 0.0)?;
        let update = m_hat
            .div(&v_hat.sqrt()?.affine(1.0, eps)?)?
            .affine(lr, 0.0)?;
        self.moments[i] = (m, v);
        Ok(update)
    }
}
