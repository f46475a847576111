//! A weight matrix `[out_features, in_features]` applied as `y = x · Wᵀ` to rows
//! of f32 activations. Quantized weights stay in their GGUF block layout.

use candle_core::quantized::QMatMul;
use candle_core::{Device, Module, Tensor};

use crate::error::Result;

/// A weight matrix ready to multiply.
pub struct Linear {
    weights: QMatMul,
    out_features: usize,
    in_features: usize,
}

impl Linear {
    pub fn new(weights: QMatMul, out_features: usize, in_features: usize) -> Self {
        Linear {
            weights,
            out_features,
            in_features,
        }
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// `out[rows × out_features] = x[rows × in_features] · Wᵀ`.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        let rows = x.len() / self.in_features;
        let input = Tensor::from_slice(x, (rows, self.in_features), &Device::Cpu)?;
        let result = self
            .weights
            .forward(&input)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        out.copy_from_slice(&result);
        Ok(())
    }
}
