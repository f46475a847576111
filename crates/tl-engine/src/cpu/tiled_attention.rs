//! llama.cpp's tiled CPU flash attention (`ggml_compute_forward_flash_attn_ext_tiled`),
//! which it takes for passes of 64 or more query rows (long prompts),
//! reproduced bit for bit. Per query row and tile of 64 positions:
//!
//! - scores: the f32 query against the keys widened from f16, each score one
//!   chain of fused multiply-adds over the head's dimensions from 0 (its
//!   `simd_gemm`), then times the scale; positions after the row's own are
//!   masked to −∞, and a tile with no visible position is skipped;
//! - the tile's maximum; where it raises the running maximum, the output and
//!   the sum are scaled by libm's `expf(old − new)`;
//! - weights `ggml_v_expf(score − max)` ([`super::vector_exp`]), summed 8 at a
//!   time (f32, ggml's `hsum` order) into an f64 total that is added to the
//!   f32 running sum;
//! - the output: for each of its elements, one chain of fused multiply-adds
//!   over the tile's positions, continuing from the previous tiles.
//!
//! At the end the output is scaled by `1 / sum`. Each row's numbers depend
//! only on the row, so any grouping of rows gives the same bits; rows are
//! grouped so that each tile's keys are transposed and widened once for all of
//! them, which makes the scores and the output updates 8-wide vector work.

use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;

/// Positions per key/value tile (ggml's `GGML_FA_TILE_KV`).
pub const TILE: usize = 64;

/// One query row of a head: its query, its position (it sees positions
/// `first..=position`) and where its output goes.
pub struct QueryRow<'a> {
    pub query: &'a [f32],
    /// The first position the row sees (0 unless it attends over a window).
    pub first: usize,
    pub position: usize,
    pub out: &'a mut [f32],
}

/// Attention of `rows` (all of one head, each `head_dim` wide) over `keys`
/// and `values` (`[position][head_dim]`, f16, at least up to the last row's
/// position).
pub fn attend_tiled(rows: &mut [QueryRow<'_>], keys: &[f16], values: &[f16], scale: f32) {
    let Some(end) = rows.iter().map(|row| row.position + 1).max() else {
        return;
    };
    let dim = rows[0].query.len();
    let mut states: Vec<RowState> = rows.iter().map(|_| RowState::new(dim)).collect();
    let mut tile = Tile::new(dim);
    // Tiles before every row's window are not even loaded (a windowed layer
    // of a long context reads its window, not the whole cache).
    let start = rows.iter().map(|row| row.first).min().unwrap_or(0) / TILE * TILE;
    for first in (start..end).step_by(TILE) {
        let len = TILE.min(end - first);
        let positions = first * dim..(first + len) * dim;
        tile.load(&keys[positions.clone()], &values[positions], len);
        for (row, state) in rows.iter().zip(&mut states) {
            // A tile wholly outside the row's positions is skipped, as
            // ggml skips a tile whose mask is all −∞.
            if first <= row.position && row.first < first + TILE {
                let visible = row.first.saturating_sub(first)..(row.position + 1 - first).min(TILE);
                state.step(row.query, &tile, visible, scale);
            }
        }
    }
    for (row, state) in rows.iter_mut().zip(&states) {
        state.finish(row.out);
    }
}

/// One tile's keys, transposed (`[dimension][position]`) so scores of 8
/// positions come from one vector, and its values (`[position][dimension]`),
/// both widened to f32.
struct Tile {
    keys: Vec<[f32; TILE]>,
    values: Vec<f32>,
    dim: usize,
}

impl Tile {
    fn new(dim: usize) -> Self {
        Tile {
            keys: vec![[0.0; TILE]; dim],
            values: vec![0.0; TILE * dim],
            dim,
        }
    }

    /// Widens `len` positions of keys and values; the rest of the tile keeps
    /// whatever it held (those positions are masked).
    fn load(&mut self, keys: &[f16], values: &[f16], len: usize) {
        for (position, key) in keys.chunks_exact(self.dim).enumerate() {
            for (column, k) in self.keys.iter_mut().zip(key) {
                column[position] = k.to_f32();
            }
        }
        values.convert_to_f32_slice(&mut self.values[..len * self.dim]);
    }
}

/// A query row's running maximum, sum and (unnormalised) output.
struct RowState {
    max: f32,
    sum: f32,
    out: Vec<f32>,
}

impl RowState {
    fn new(dim: usize) -> Self {
        RowState {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            out: vec![0.0; dim],
        }
    }

    /// Takes in the `visible` positions of `tile`: the others are masked,
    /// weighing exactly 0.
    fn step(&mut self, query: &[f32], tile: &Tile, visible: Range<usize>, scale: f32) {
        let mut scores = kernels::scores(query, &tile.keys);
        for (position, score) in scores.iter_mut().enumerate() {
            *score = if visible.contains(&position) {
                *score * scale
            } else {
                f32::NEG_INFINITY
            };
        }
        // ggml's `MAX(a, b)`: `a > b ? a : b`.
        let tile_max = scores
            .iter()
            .fold(f32::NEG_INFINITY, |m, &s| if m > s { m } else { s });
        if tile_max == f32::NEG_INFINITY {
            return;
        }
        let max = self.max.max(tile_max);
        if max > self.max {
            let factor = (self.max - max).exp();
            for o in &mut self.out {
                *o *= factor;
            }
            self.sum *= factor;
        }
        self.max = max;
        let total = kernels::weights_and_sum(&mut scores, max);
        self.sum = (f64::from(self.sum) + total) as f32;
        kernels::accumulate(&mut self.out, &scores[..visible.end], &tile.values);
    }

    fn finish(&self, out: &mut [f32]) {
        let inverse = if self.sum == 0.0 { 0.0 } else { 1.0 / self.sum };
        for (o, &a) in out.iter_mut().zip(&self.out) {
            *o = a * inverse;
        }
    }
}

#[cfg(not(x86_simd))]
use scalar as kernels;
#[cfg(x86_simd)]
use simd as kernels;

/// The three vector steps in plain arithmetic, in the vector code's order.
mod scalar {
    // The reference for SIMD builds, where only the tests call it.
    #![cfg_attr(x86_simd, allow(dead_code))]

    use super::TILE;
    use crate::cpu::vector_exp::exp_lane;

    /// Each position's score: one fused chain over the dimensions from 0.
    pub fn scores(query: &[f32], keys: &[[f32; TILE]]) -> [f32; TILE] {
        let mut scores = [0.0f32; TILE];
        for (q, column) in query.iter().zip(keys) {
            for (s, k) in scores.iter_mut().zip(column) {
                *s = q.mul_add(*k, *s);
            }
        }
        scores
    }

    /// Replaces each score by its weight `exp(score − max)` and returns
    /// their sum: 8 at a time in f32 (ggml's `hsum` pairing), those sums
    /// added in f64.
    pub fn weights_and_sum(scores: &mut [f32; TILE], max: f32) -> f64 {
        let mut total = 0.0f64;
        for eight in scores.chunks_exact_mut(8) {
            for s in eight.iter_mut() {
                *s = exp_lane(*s - max);
            }
            let a: [f32; 4] = std::array::from_fn(|i| eight[i] + eight[i + 4]);
            total += f64::from((a[0] + a[2]) + (a[1] + a[3]));
        }
        total
    }

    /// `out[d] = fma(weights[p], values[p][d], out[d])` for the positions in
    /// order.
    pub fn accumulate(out: &mut [f32], weights: &[f32], values: &[f32]) {
        accumulate_columns(out, weights, values, out.len());
    }

    /// [`accumulate`] into the first columns of rows `row_width` wide that
    /// start at `values[0]` (so a slice of rows from any column works).
    pub fn accumulate_columns(out: &mut [f32], weights: &[f32], values: &[f32], row_width: usize) {
        for (&w, value) in weights.iter().zip(values.chunks(row_width)) {
            for (o, &v) in out.iter_mut().zip(value) {
                *o = w.mul_add(v, *o);
            }
        }
    }
}

#[cfg(x86_simd)]
mod simd {
    use std::arch::x86_64::*;

    use super::TILE;
    use crate::cpu::vector_exp::exp8;

    const LANES: usize = 8;
    const VECTORS: usize = TILE / LANES;

    pub fn scores(query: &[f32], keys: &[[f32; TILE]]) -> [f32; TILE] {
        // SAFETY: loads read 8 floats at multiples of 8 below TILE within one
        // tile column, stores write 8 at multiples of 8 within `scores`;
        // AVX2 and FMA are enabled at build time (this module's cfg).
        unsafe {
            let mut acc = [_mm256_setzero_ps(); VECTORS];
            for (&q, column) in query.iter().zip(keys) {
                let q = _mm256_set1_ps(q);
                for (v, acc) in acc.iter_mut().enumerate() {
                    let k = _mm256_loadu_ps(column.as_ptr().add(v * LANES));
                    *acc = _mm256_fmadd_ps(q, k, *acc);
                }
            }
            let mut scores = [0.0f32; TILE];
            for (v, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(scores.as_mut_ptr().add(v * LANES), *acc);
            }
            scores
        }
    }

    pub fn weights_and_sum(scores: &mut [f32; TILE], max: f32) -> f64 {
        let mut total = 0.0f64;
        // SAFETY: loads and stores of 8 floats at multiples of 8 below TILE
        // within `scores`; AVX2 and FMA are enabled at build time.
        unsafe {
            let max = _mm256_set1_ps(max);
            for v in 0..VECTORS {
                let at = scores.as_mut_ptr().add(v * LANES);
                let weights = exp8(_mm256_sub_ps(_mm256_loadu_ps(at), max));
                _mm256_storeu_ps(at, weights);
                let halves = _mm_add_ps(
                    _mm256_extractf128_ps::<1>(weights),
                    _mm256_castps256_ps128(weights),
                );
                let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
                let sum = _mm_add_ss(pairs, _mm_movehdup_ps(pairs));
                total += f64::from(_mm_cvtss_f32(sum));
            }
        }
        total
    }

    pub fn accumulate(out: &mut [f32], weights: &[f32], values: &[f32]) {
        let dim = out.len();
        let whole = dim - dim % (LANES * VECTORS);
        // Up to 64 elements of the output stay in registers over the positions.
        for start in (0..whole).step_by(LANES * VECTORS) {
            // SAFETY: loads and stores of 8 floats within `out[start..start +
            // 64]` and within row p of `values` (`dim` floats from `p * dim`,
            // `p < weights.len()`), which the caller sized; AVX2 and FMA are
            // enabled at build time.
            unsafe {
                let mut acc: [__m256; VECTORS] =
                    std::array::from_fn(|v| _mm256_loadu_ps(out.as_ptr().add(start + v * LANES)));
                for (p, &w) in weights.iter().enumerate() {
                    let w = _mm256_set1_ps(w);
                    let row = values[p * dim + start..p * dim + start + LANES * VECTORS].as_ptr();
                    for (v, acc) in acc.iter_mut().enumerate() {
                        *acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(row.add(v * LANES)), *acc);
                    }
                }
                for (v, acc) in acc.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(start + v * LANES), *acc);
                }
            }
        }
        // Columns past the last 64: row p's start at `values[p * dim + whole]`.
        super::scalar::accumulate_columns(&mut out[whole..], weights, &values[whole..], dim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_values::{pseudo_random, pseudo_random_f16};

    #[test]
    fn vector_steps_equal_the_scalar_ones() {
        for dim in [64, 128, 80] {
            let query = pseudo_random(dim, 1);
            let keys: Vec<[f32; TILE]> = (0..dim)
                .map(|d| std::array::from_fn(|p| pseudo_random(1, (d * TILE + p) as u32)[0]))
                .collect();
            let scores = kernels::scores(&query, &keys);
            assert_eq!(scores, scalar::scores(&query, &keys), "dim {dim}");
            let (mut a, mut b) = (scores, scores);
            a[5] = f32::NEG_INFINITY;
            b[5] = f32::NEG_INFINITY;
            let total = kernels::weights_and_sum(&mut a, 0.5);
            assert_eq!(total, scalar::weights_and_sum(&mut b, 0.5), "dim {dim}");
            assert_eq!(a, b, "dim {dim}");
            assert_eq!(a[5], 0.0);
            let values = pseudo_random(TILE * dim, 3);
            let (mut x, mut y) = (pseudo_random(dim, 4), pseudo_random(dim, 4));
            kernels::accumulate(&mut x, &a[..50], &values);
            scalar::accumulate(&mut y, &a[..50], &values);
            assert_eq!(x, y, "dim {dim}");
        }
    }

    /// Rows grouped together give the bits each gives alone, whatever its
    /// position inside a tile.
    #[test]
    fn grouped_rows_give_the_bits_of_each_row_alone() {
        let (dim, positions) = (64, 200);
        let keys = pseudo_random_f16(positions * dim, 5, 3.0);
        let values = pseudo_random_f16(positions * dim, 6, 1.0);
        let queries = pseudo_random(positions * dim, 7);
        let scale = 0.125;
        let chosen = [0, 1, 63, 64, 65, 130, 199];
        let mut together = vec![vec![0.0f32; dim]; chosen.len()];
        let mut rows: Vec<QueryRow<'_>> = together
            .iter_mut()
            .zip(chosen)
            .map(|(out, position)| QueryRow {
                query: &queries[position * dim..(position + 1) * dim],
                first: 0,
                position,
                out,
            })
            .collect();
        attend_tiled(&mut rows, &keys, &values, scale);
        for (out, position) in together.iter().zip(chosen) {
            let mut alone = vec![f32::NAN; dim];
            let mut row = [QueryRow {
                query: &queries[position * dim..(position + 1) * dim],
                first: 0,
                position,
                out: &mut alone,
            }];
            attend_tiled(&mut row, &keys, &values, scale);
            assert_eq!(&alone, out, "position {position}");
        }
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use crate::cpu::test_values::{pseudo_random, pseudo_random_f16, softmax_attention_f64};

    /// The f64 softmax attention of `query` over positions `first..=last`.
    fn reference(
        query: &[f32],
        (keys, values): (&[f16], &[f16]),
        (first, last): (usize, usize),
        scale: f64,
    ) -> Vec<f64> {
        let dim = query.len();
        let widen = |v: &[f16]| {
            v[first * dim..(last + 1) * dim]
                .iter()
                .map(|x| x.to_f32())
                .collect::<Vec<_>>()
        };
        softmax_attention_f64(query, &widen(keys), &widen(values), scale)
    }

    /// Rows with windows see only their window, and grouped rows (whose
    /// windows start in different tiles) give the bits each gives alone.
    #[test]
    fn windowed_rows_see_only_their_window() {
        let (dim, positions, window) = (64, 300, 100);
        let keys = pseudo_random_f16(positions * dim, 21, 3.0);
        let values = pseudo_random_f16(positions * dim, 22, 1.0);
        let queries = pseudo_random(positions * dim, 23);
        let chosen = [0, 50, 99, 100, 163, 250, 299];
        let first = |position: usize| (position + 1).saturating_sub(window);
        let query = |position: usize| &queries[position * dim..(position + 1) * dim];
        let mut together = vec![vec![0.0f32; dim]; chosen.len()];
        let mut rows: Vec<QueryRow<'_>> = together
            .iter_mut()
            .zip(chosen)
            .map(|(out, position)| QueryRow {
                query: query(position),
                first: first(position),
                position,
                out,
            })
            .collect();
        attend_tiled(&mut rows, &keys, &values, 0.125);
        for (out, position) in together.iter().zip(chosen) {
            let mut alone = vec![f32::NAN; dim];
            let mut row = [QueryRow {
                query: query(position),
                first: first(position),
                position,
                out: &mut alone,
            }];
            attend_tiled(&mut row, &keys, &values, 0.125);
            assert_eq!(&alone, out, "position {position}");
            let window = (first(position), position);
            let expected = reference(query(position), (&keys, &values), window, 0.125);
            for (o, e) in out.iter().zip(&expected) {
                assert!(
                    (*o as f64 - e).abs() < 3e-3,
                    "position {position}: {o} vs {e}"
                );
            }
        }
    }
}
