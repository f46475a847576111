//! Activations quantized to Q8_K, as llama.cpp's CPU backend does before a
//! product with K-quant weights (`quantize_row_q8_K_ref`, which its x86 build
//! uses as is): per super-block of 256 values one f32 scale `d = 1/iscale`,
//! `iscale = −127/max` for the value `max` of largest magnitude (the first
//! one), quants rounded half to even and capped at 127, and the sum of each
//! 16 quants.

use super::SUPER_BLOCK_VALUES;
use crate::cpu::parallel;

/// One super-block of quantized activations.
#[derive(Clone, Copy)]
pub(crate) struct Q8KBlock {
    pub quants: [i8; SUPER_BLOCK_VALUES],
    /// The scale, kept in f32 (Q8_K does not round it to f16).
    pub d: f32,
    /// Sums of each run of 16 quants.
    pub sums16: [i16; 16],
}

impl Default for Q8KBlock {
    fn default() -> Self {
        Q8KBlock {
            quants: [0; SUPER_BLOCK_VALUES],
            d: 0.0,
            sums16: [0; 16],
        }
    }
}

/// An `m × k` activation matrix in Q8_K, reused across calls.
#[derive(Default)]
pub(crate) struct SuperBlockActivations {
    blocks: Vec<Q8KBlock>,
    blocks_per_row: usize,
}

/// Below this many super-blocks quantizing on one thread is cheaper than
/// waking others.
const PARALLEL_MIN_BLOCKS: usize = 256;

impl SuperBlockActivations {
    /// Quantizes `x` (`rows × cols`, row-major, `cols` a multiple of 256).
    pub fn quantize(&mut self, x: &[f32], cols: usize, threads: usize) {
        self.blocks_per_row = cols / SUPER_BLOCK_VALUES;
        let (values, _) = x.as_chunks::<SUPER_BLOCK_VALUES>();
        self.blocks.resize(values.len(), Q8KBlock::default());
        let parts = if values.len() >= PARALLEL_MIN_BLOCKS {
            threads.max(1)
        } else {
            1
        };
        let per_part = values.len().div_ceil(parts).max(1);
        let chunks = values
            .chunks(per_part)
            .zip(self.blocks.chunks_mut(per_part));
        parallel::for_each(chunks, threads, |(values, blocks)| {
            for (x, block) in values.iter().zip(blocks) {
                quantize_block(x, block);
            }
        });
    }

    /// Activation row `i`, one entry per super-block.
    pub fn row(&self, i: usize) -> &[Q8KBlock] {
        &self.blocks[i * self.blocks_per_row..(i + 1) * self.blocks_per_row]
    }
}

/// `quantize_row_q8_K_ref` for one super-block.
pub(crate) fn quantize_block(x: &[f32; SUPER_BLOCK_VALUES], out: &mut Q8KBlock) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        // llama.cpp leaves the sums as they were: with d = 0 they never count.
        *out = Q8KBlock::default();
        return;
    }
    let iscale = -127.0 / max;
    for (q, &v) in out.quants.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (sum, run) in out.sums16.iter_mut().zip(out.quants.as_chunks::<16>().0) {
        *sum = run.iter().map(|&q| i16::from(q)).sum();
    }
    out.d = 1.0 / iscale;
}

/// ggml's `nearest_int`: round half to even, through the f32 bit pattern of
/// `v + 1.5·2²³`; exact for |v| < 2²², which `iscale · v` (at most 127 in
/// magnitude, or NaN) respects.
fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        for (v, want) in [
            (0.5, 0),
            (1.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (126.6, 127),
            (-127.0, -127),
        ] {
            assert_eq!(nearest_int(v), want, "{v}");
        }
    }

    #[test]
    fn the_first_largest_magnitude_sets_the_sign() {
        let mut x = [0.0f32; SUPER_BLOCK_VALUES];
        x[3] = -2.0;
        x[7] = 2.0;
        x[9] = 1.0;
        let mut block = Q8KBlock::default();
        quantize_block(&x, &mut block);
        // iscale = −127 / −2 = 63.5: 1.0 · 63.5 rounds to even, 64.
        assert_eq!(block.quants[3], -127);
        assert_eq!(block.quants[7], 127);
        assert_eq!(block.quants[9], 64);
        assert_eq!(block.d, 1.0 / 63.5);
        assert_eq!(block.sums16[0], 64);
        x[3] = 2.0;
        x[7] = -2.0;
        quantize_block(&x, &mut block);
        assert_eq!((block.quants[3], block.quants[9]), (-127, -64));
        assert_eq!(block.d, -1.0 / 63.5);
    }
}
