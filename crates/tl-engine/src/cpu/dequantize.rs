//! Weight blocks back to f32 with ggml's arithmetic (`dequantize_row_*` in
//! ggml-quants.c, built without FMA contraction): what `llama-quantize`
//! starts from when it requantizes a quantized file.

use super::blocks::{f16_to_f32, WeightBlock};
use super::kquants::{unpack, Unpacked, SUPER_BLOCK_VALUES};
use super::weight_type::WeightType;

/// Appends the values of `bytes`, whole blocks of `ty`, to `out`.
pub(crate) fn dequantize(ty: WeightType, bytes: &[u8], out: &mut Vec<f32>) {
    match ty {
        WeightType::Q4_0 => legacy::<18>(bytes, out),
        WeightType::Q4_1 => legacy::<20>(bytes, out),
        WeightType::Q5_0 => legacy::<22>(bytes, out),
        WeightType::Q5_1 => legacy::<24>(bytes, out),
        WeightType::Q8_0 => legacy::<34>(bytes, out),
        _ => super_blocks(ty, bytes, out),
    }
}

/// `q·d` (`q·d + m` with a minimum): ggml writes the int first, converted.
fn legacy<const N: usize>(bytes: &[u8], out: &mut Vec<f32>)
where
    [u8; N]: WeightBlock,
{
    let (blocks, _) = bytes.as_chunks::<N>();
    for block in blocks {
        let d = f16_to_f32(block.scale_bits());
        let m = f16_to_f32(block.min_bits());
        out.extend((0..32).map(|j| {
            let v = block.value(j) as f32 * d;
            if <[u8; N]>::HAS_MIN {
                v + m
            } else {
                v
            }
        }));
    }
}

/// `(d·scale)·(q − offset)`, then `− dmin·min` for the types with minimums.
fn super_blocks(ty: WeightType, bytes: &[u8], out: &mut Vec<f32>) {
    let has_mins = matches!(ty, WeightType::Q2_K | WeightType::Q4_K | WeightType::Q5_K);
    let mut block = Unpacked::default();
    for bytes in bytes.chunks_exact(ty.block_bytes()) {
        unpack(ty, bytes, &mut block);
        for (run, quants) in block.quants.chunks_exact(16).enumerate() {
            let scale = block.d * f32::from(block.scales[run]);
            let min = block.dmin * f32::from(block.mins[run]);
            out.extend(quants.iter().map(|&q| {
                let v = scale * f32::from(i16::from(q) - block.offset);
                if has_mins {
                    v - min
                } else {
                    v
                }
            }));
        }
    }
    debug_assert!(out.len().is_multiple_of(SUPER_BLOCK_VALUES));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random blocks with finite f16 factors.
    fn random_blocks(ty: WeightType, count: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut bytes: Vec<u8> = (0..count * ty.block_bytes())
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        // Clear each f16's top exponent bit so none is infinite or NaN.
        for block in bytes.chunks_exact_mut(ty.block_bytes()) {
            let factors: &[usize] = match ty.block_bytes() {
                84 => &[81, 83],
                110 => &[109],
                144 | 176 => &[1, 3],
                210 => &[209],
                20 | 24 => &[1, 3],
                _ => &[1],
            };
            for &at in factors {
                block[at] &= 0xbf;
            }
        }
        bytes
    }

    /// candle's dequantizer: an independent reading of the same layouts
    /// (its products may round in another order, so within a few ulps).
    fn candle_values(ty: WeightType, bytes: &[u8]) -> Vec<f32> {
        use candle_core::quantized::ggml_file::qtensor_from_ggml;
        let dtype = crate::cpu::bench::candle_dtype(ty);
        let n = bytes.len() / ty.block_bytes() * ty.block_values();
        let device = candle_core::Device::Cpu;
        let tensor = qtensor_from_ggml(dtype, bytes, vec![n], &device).unwrap();
        tensor
            .dequantize(&device)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    }

    #[test]
    fn values_match_an_independent_reading_of_every_layout() {
        use WeightType::*;
        for ty in [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K] {
            let bytes = random_blocks(ty, 3, 7);
            let mut ours = Vec::new();
            dequantize(ty, &bytes, &mut ours);
            let theirs = candle_values(ty, &bytes);
            assert_eq!(ours.len(), theirs.len(), "{ty}");
            for (i, (&v, &c)) in ours.iter().zip(&theirs).enumerate() {
                let tolerance = 4.0 * f32::EPSILON * (v.abs() + c.abs()) + 1e-30;
                assert!((v - c).abs() <= tolerance, "{ty} value {i}: {v} vs {c}");
            }
        }
    }
}
