//! Rotary position embeddings computed the way llama.cpp's CPU backend computes
//! them, so positions rotate by bit-identical angles: the per-pair frequency is
//! reached by repeated f32 multiplication by `base^(-2/dims)` (not `powf` per pair),
//! and pairs are adjacent elements (GGML's "normal" RoPE, which llama-architecture
//! GGUF files are converted for).

use crate::error::{Error, Result};

/// Precomputed cos/sin of every position's angle for each pair of head dimensions.
pub struct RopeTable {
    /// `[position][pair]` interleaved as (cos, sin).
    cos_sin: Vec<(f32, f32)>,
    pairs: usize,
    /// The first position the table holds.
    first: usize,
    max_positions: usize,
}

impl RopeTable {
    /// Tables for positions `0..max_positions`. `freq_factors`, when present,
    /// divide each pair's angle (Llama 3.1-style long-context scaling).
    pub fn new(
        head_dim: usize,
        base: f32,
        freq_factors: Option<&[f32]>,
        max_positions: usize,
    ) -> Result<Self> {
        Self::for_positions(head_dim, base, freq_factors, 0, max_positions)
    }

    /// The table of the model `loader` reads (with its `rope_freqs` factors
    /// when the file has them), for positions `0..max_positions`.
    pub fn for_model(
        loader: &mut crate::model::weights::WeightLoader,
        config: &crate::model::config::ModelConfig,
        max_positions: usize,
    ) -> Result<Self> {
        use crate::model::tensor_names::ROPE_FREQS;
        let freq_factors = if loader.has(ROPE_FREQS) {
            Some(loader.vector(ROPE_FREQS, config.head_dim / 2)?)
        } else {
            None
        };
        Self::new(
            config.head_dim,
            config.rope_freq_base,
            freq_factors.as_deref(),
            max_positions,
        )
    }

    /// A table for positions `first..first + count` only (the language's `rope`
    /// builtin rotates a few rows at a time at arbitrary positions).
    pub fn for_positions(
        head_dim: usize,
        base: f32,
        freq_factors: Option<&[f32]>,
        first: usize,
        count: usize,
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
        let theta_scale = base.powf(-2.0 / head_dim as f32);
        let mut cos_sin = Vec::with_capacity(count * pairs);
        for position in first..first + count {
            let mut theta = position as f32;
            for pair in 0..pairs {
                let factor = freq_factors.map_or(1.0, |f| f[pair]);
                let angle = theta / factor;
                cos_sin.push((angle.cos(), angle.sin()));
                theta *= theta_scale;
            }
        }
        Ok(RopeTable {
            cos_sin,
            pairs,
            first,
            max_positions: first + count,
        })
    }

    /// One past the last position the table holds.
    /// The table as `[position][pair]` of (cos, sin), flattened: what the GPU
    /// backend uploads, so both backends rotate by the same values.
    pub fn cos_sin_flat(&self) -> Vec<f32> {
        self.cos_sin.iter().flat_map(|&(c, s)| [c, s]).collect()
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Rotates every head of one row (`heads × head_dim` values) in place, for the
    /// token at `position`.
    pub fn rotate(&self, row: &mut [f32], position: usize) {
        let at = position - self.first;
        let table = &self.cos_sin[at * self.pairs..(at + 1) * self.pairs];
        for head in row.chunks_exact_mut(self.pairs * 2) {
            for (pair, &(cos, sin)) in head.chunks_exact_mut(2).zip(table) {
                let (x0, x1) = (pair[0], pair[1]);
                pair[0] = x0.mul_add(cos, -(x1 * sin));
                pair[1] = x0.mul_add(sin, x1 * cos);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_identity() {
        let table = RopeTable::new(4, 10_000.0, None, 2).unwrap();
        let mut row = [1.0, 2.0, 3.0, 4.0];
        table.rotate(&mut row, 0);
        assert_eq!(row, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn first_pair_rotates_by_the_position_in_radians() {
        let table = RopeTable::new(4, 10_000.0, None, 3).unwrap();
        let mut row = [1.0, 0.0, 1.0, 0.0];
        table.rotate(&mut row, 2);
        assert!((row[0] - 2f32.cos()).abs() < 1e-6 && (row[1] - 2f32.sin()).abs() < 1e-6);
        // The second pair turns slower: base^(-2/4) = 0.01 radians per position.
        assert!((row[3] - 0.02f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn rotation_preserves_length() {
        let table = RopeTable::new(8, 100_000.0, None, 50).unwrap();
        let mut row = [0.3, -1.2, 0.5, 2.0, -0.7, 0.1, 1.5, -0.4];
        let before: f32 = row.iter().map(|x| x * x).sum();
        table.rotate(&mut row, 37);
        let after: f32 = row.iter().map(|x| x * x).sum();
        assert!((before - after).abs() < 1e-5);
    }

    #[test]
    fn wrong_factor_count_is_an_error() {
        assert!(RopeTable::new(8, 10_000.0, Some(&[1.0; 3]), 4).is_err());
    }
}
