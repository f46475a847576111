//! Weight rows unpacked once per tile of rows so that every activation group of a
//! batch reuses them: 32 bytes a block ready for `maddubs`, next to the sign
//! source for signed types, and the scales as f32. Block-major (`[block][row]`),
//! so a kernel walks one sequential stream. The buffers are per thread and reused.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::simd::{f16_to_f32, raw_quants, store_u8x32};
use crate::cpu::blocks::WeightBlock;
use crate::cpu::weight_type::BLOCK_VALUES;

/// How the quantized values are laid out for the kernel that will read them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// First what `maddubs` multiplies: Q4_1's nibbles, or the absolute values of
    /// signed weights (Q4_0 minus its offset, Q8_0), then those signed weights.
    VecDot,
    /// First Q4_0's raw nibbles (0..=15), for the 8-row kernel.
    RawNibbles,
}

/// Prepared rows of one tile.
#[derive(Default)]
pub(super) struct PreparedRows {
    rows: usize,
    weights: Vec<[[u8; BLOCK_VALUES]; 2]>,
    scales: Vec<f32>,
    mins: Vec<f32>,
}

thread_local! {
    static PREPARED: RefCell<PreparedRows> = RefCell::default();
}

/// Runs `f` with this thread's prepared-rows buffer (a fresh one if it is in use).
pub(super) fn with_buffer<T>(f: impl FnOnce(&mut PreparedRows) -> T) -> T {
    PREPARED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(&mut buffer),
        Err(_) => f(&mut PreparedRows::default()),
    })
}

impl PreparedRows {
    /// Prepares `rows` (all of equal length) for kernels of `layout`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn fill<B: WeightBlock>(&mut self, rows: &[&[B]], layout: Layout) {
        let blocks = rows.first().map_or(0, |row| row.len());
        self.fill_with(rows.len(), blocks, |r, b| &rows[r][b], layout);
    }

    /// Prepares the rows of a tile (block-major, as [`Self::weights`]).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn fill_tile<B: WeightBlock, const R: usize>(
        &mut self,
        tile: &[[B; R]],
        layout: Layout,
    ) {
        self.fill_with(R, tile.len(), |r, b| &tile[b][r], layout);
    }

    /// Prepares `rows` rows of `blocks` blocks, block `b` of row `r` being
    /// `block_at(r, b)`.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn fill_with<'a, B: WeightBlock + 'a>(
        &mut self,
        rows: usize,
        blocks: usize,
        block_at: impl Fn(usize, usize) -> &'a B,
        layout: Layout,
    ) {
        let len = blocks * rows;
        self.rows = rows;
        self.weights.resize(len, [[0; BLOCK_VALUES]; 2]);
        self.scales.resize(len, 0.0);
        self.mins.resize(len, 0.0);
        for r in 0..rows {
            for b in 0..blocks {
                let block = block_at(r, b);
                let at = b * self.rows + r;
                let raw = raw_quants(block);
                let signed_type = !B::HAS_MIN && layout == Layout::VecDot;
                if signed_type {
                    let signed = if B::OFFSET != 0 {
                        _mm256_sub_epi8(raw, _mm256_set1_epi8(B::OFFSET))
                    } else {
                        raw
                    };
                    let [unsigned, signs] = &mut self.weights[at];
                    store_u8x32(unsigned, _mm256_sign_epi8(signed, signed));
                    store_u8x32(signs, signed);
                } else {
                    store_u8x32(&mut self.weights[at][0], raw);
                }
                self.scales[at] = f16_to_f32(block.scale_bits());
                self.mins[at] = f16_to_f32(block.min_bits());
            }
        }
    }

    /// `[block][row]` weights: what `maddubs` multiplies as unsigned, then (VecDot
    /// layout of Q4_0/Q8_0) the signed weights whose signs go on the activations.
    pub(super) fn weights(&self) -> &[[[u8; BLOCK_VALUES]; 2]] {
        &self.weights
    }

    /// `[block][row]` scales `d`.
    pub(super) fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// `[block][row]` Q4_1 minimums `m`.
    pub(super) fn mins(&self) -> &[f32] {
        &self.mins
    }
}
