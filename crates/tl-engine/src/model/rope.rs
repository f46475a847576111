//! Rotary position embeddings: cos/sin tables computed once at load for every
//! position the model will be asked about, applied to adjacent element pairs
//! (GGML's "normal" RoPE, which llama-architecture GGUF files are converted for).

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

/// Precomputed cos/sin of `position * frequency` for each pair of head dimensions.
pub struct RopeTable {
    cos: Tensor,
    sin: Tensor,
    max_positions: usize,
}

impl RopeTable {
    /// Tables for positions `0..max_positions`. `freq_factors`, when present,
    /// divide each pair's frequency (Llama 3.1-style long-context scaling).
    pub fn new(
        head_dim: usize,
        base: f32,
        freq_factors: Option<&[f32]>,
        max_positions: usize,
        device: &Device,
    ) -> Result<Self> {
        let pairs = head_dim / 2;
        if let Some(factors) = freq_factors {
            if factors.len() != pairs {
                return Err(Error::InvalidModel(format!(
                    "rope_freqs has {} factors, expected {pairs}",
                    factors.len()
                )));
            }
        }
        let frequencies: Vec<f32> = (0..pairs)
            .map(|i| {
                let f = 1.0 / base.powf(2.0 * i as f32 / head_dim as f32);
                f / freq_factors.map_or(1.0, |factors| factors[i])
            })
            .collect();
        let mut cos = Vec::with_capacity(max_positions * pairs);
        let mut sin = Vec::with_capacity(max_positions * pairs);
        for position in 0..max_positions {
            for &f in &frequencies {
                let angle = position as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        Ok(RopeTable {
            cos: Tensor::from_vec(cos, (max_positions, pairs), device)?.to_dtype(DType::F32)?,
            sin: Tensor::from_vec(sin, (max_positions, pairs), device)?.to_dtype(DType::F32)?,
            max_positions,
        })
    }

    /// Positions the tables cover.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Rotates `x` (`[batch, heads, seq, head_dim]`, contiguous) whose first row is
    /// at position `start`.
    pub fn apply(&self, x: &Tensor, start: usize) -> Result<Tensor> {
        let seq = x.dim(2)?;
        let cos = self.cos.narrow(0, start, seq)?;
        let sin = self.sin.narrow(0, start, seq)?;
        Ok(candle_nn::rotary_emb::rope_i(x, &cos, &sin)?)
    }
}
