//! Rotary position embeddings computed the way llama.cpp's CPU backend computes
//! them, so positions rotate by bit-identical angles: the per-pair frequency is
//! reached by repeated f32 multiplication by `base^(-2/dims)` (not `powf` per pair).
//! Which elements form a pair depends on the architecture (see [`RopeStyle`]).

use crate::error::{Error, Result};
use crate::memory;

/// Which two elements of a head RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pair `i` is elements `2i` and `2i + 1`: GGML's "normal" RoPE, which
    /// llama-architecture GGUF files are converted for (their query and key
    /// rows are permuted to it).
    Adjacent,
    /// Pair `i` is elements `i` and `i + head_dim/2`: GGML's "NeoX" RoPE, the
    /// Hugging Face layout that Qwen2/3 GGUF files keep.
    Halves,
}

/// Precomputed cos/sin of every position's angle for each pair of head dimensions.
pub struct RopeTable {
    /// `[position][pair]` interleaved as (cos, sin).
    cos_sin: Vec<(f32, f32)>,
    pairs: usize,
    /// The first position the table holds.
    first: usize,
    max_positions: usize,
    style: RopeStyle,
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
        let table = Self::new(
            config.head_dim,
            config.rope_freq_base,
            freq_factors.as_deref(),
            max_positions,
        )?;
        Ok(table.with_style(config.rope_style))
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
        let end = first.checked_add(count).ok_or_else(|| {
            Error::InvalidRequest(format!("RoPE positions {first} + {count} overflow"))
        })?;
        let len = count.checked_mul(pairs).ok_or_else(|| {
            Error::Memory(format!("a RoPE table of {count} positions is too large"))
        })?;
        let mut cos_sin = memory::reserved_vec(len, "RoPE table")?;
        for position in first..end {
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
            max_positions: end,
            style: RopeStyle::Adjacent,
        })
    }

    /// The same angles, pairing elements as `style` says (the default is
    /// [`RopeStyle::Adjacent`]).
    pub fn with_style(self, style: RopeStyle) -> Self {
        RopeTable { style, ..self }
    }

    /// The table as `[position][pair]` of (cos, sin), flattened: what the GPU
    /// backend uploads, so both backends rotate by the same values.
    pub fn cos_sin_flat(&self) -> Vec<f32> {
        self.cos_sin.iter().flat_map(|&(c, s)| [c, s]).collect()
    }

    /// Positions `start..start + count` of the table as [`cos_sin_flat`] lays
    /// them out (for a program's rows on the GPU).
    ///
    /// [`cos_sin_flat`]: RopeTable::cos_sin_flat
    pub fn cos_sin_rows(&self, start: usize, count: usize) -> Result<Vec<f32>> {
        let end = start.saturating_add(count);
        if start < self.first || end > self.max_positions {
            return Err(Error::InvalidRequest(format!(
                "positions {start}..{end} are outside the RoPE table's {}..{}",
                self.first, self.max_positions
            )));
        }
        let rows =
            &self.cos_sin[(start - self.first) * self.pairs..(end - self.first) * self.pairs];
        Ok(rows.iter().flat_map(|&(c, s)| [c, s]).collect())
    }

    /// How elements pair up.
    pub fn style(&self) -> RopeStyle {
        self.style
    }

    /// One past the last position the table holds.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Rotates every head of one row (`heads × head_dim` values) in place, for the
    /// token at `position`.
    pub fn rotate(&self, row: &mut [f32], position: usize) {
        let at = position - self.first;
        let table = &self.cos_sin[at * self.pairs..(at + 1) * self.pairs];
        for head in row.chunks_exact_mut(self.pairs * 2) {
            match self.style {
                RopeStyle::Adjacent => {
                    for (pair, &angle) in head.chunks_exact_mut(2).zip(table) {
                        let (x0, x1) = rotate_pair(pair[0], pair[1], angle);
                        (pair[0], pair[1]) = (x0, x1);
                    }
                }
                RopeStyle::Halves => {
                    let (first, second) = head.split_at_mut(self.pairs);
                    for ((a, b), &angle) in first.iter_mut().zip(second).zip(table) {
                        (*a, *b) = rotate_pair(*a, *b, angle);
                    }
                }
            }
        }
    }
}

/// The RoPE tables of a model's layers: one for every layer, and a second
/// for windowed layers when they have their own base frequency.
pub struct LayerRopes {
    global: RopeTable,
    /// The windowed layers' table, and which layers those are.
    local: Option<(RopeTable, Vec<bool>)>,
}

impl LayerRopes {
    /// The tables of the model `loader` reads, for positions
    /// `0..max_positions`.
    pub fn for_model(
        loader: &mut crate::model::weights::WeightLoader,
        config: &crate::model::config::ModelConfig,
        max_positions: usize,
    ) -> Result<Self> {
        let global = RopeTable::for_model(loader, config, max_positions)?;
        let local = match &config.sliding_window {
            Some(window) => {
                let table =
                    RopeTable::new(config.head_dim, window.rope_freq_base, None, max_positions)?;
                Some((table.with_style(config.rope_style), window.local.clone()))
            }
            None => None,
        };
        Ok(LayerRopes { global, local })
    }

    /// The table `layer` rotates by.
    pub fn for_layer(&self, layer: usize) -> &RopeTable {
        match &self.local {
            Some((table, local)) if local[layer] => table,
            _ => &self.global,
        }
    }

    /// Which of [`tables`](Self::tables) `layer` rotates by.
    pub fn index_of(&self, layer: usize) -> usize {
        match &self.local {
            Some((_, local)) if local[layer] => 1,
            _ => 0,
        }
    }

    /// Every distinct table: the global one first.
    pub fn tables(&self) -> impl Iterator<Item = &RopeTable> {
        std::iter::once(&self.global).chain(self.local.as_ref().map(|(table, _)| table))
    }

    /// One past the last position the tables hold.
    pub fn max_positions(&self) -> usize {
        self.global.max_positions()
    }
}

/// One pair turned by the angle whose (cos, sin) is given, with llama.cpp's
/// rounding (its compiled loop fuses the first product into the sum).
fn rotate_pair(x0: f32, x1: f32, (cos, sin): (f32, f32)) -> (f32, f32) {
    (x0.mul_add(cos, -(x1 * sin)), x0.mul_add(sin, x1 * cos))
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
    fn halves_pair_each_element_with_the_one_half_a_head_later() {
        let adjacent = RopeTable::new(4, 10_000.0, None, 3).unwrap();
        let halves = RopeTable::new(4, 10_000.0, None, 3)
            .unwrap()
            .with_style(RopeStyle::Halves);
        // [a, b, c, d] in halves style is [a, c, b, d] in adjacent style.
        let mut h = [0.3, -1.2, 0.5, 2.0, 1.0, 0.0, 0.0, 1.0];
        let mut a = [0.3, 0.5, -1.2, 2.0, 1.0, 0.0, 0.0, 1.0];
        halves.rotate(&mut h, 2);
        adjacent.rotate(&mut a, 2);
        assert_eq!([h[0], h[2], h[1], h[3]], a[..4]);
        assert_eq!([h[4], h[6], h[5], h[7]], a[4..]);
    }

    #[test]
    fn wrong_factor_count_is_an_error() {
        assert!(RopeTable::new(8, 10_000.0, Some(&[1.0; 3]), 4).is_err());
    }
}
