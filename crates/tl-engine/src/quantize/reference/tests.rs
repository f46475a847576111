//! The quantizers against blocks computed by hand, and round trips through
//! candle's dequantizer (an independent reading of the same layouts).

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType};
use candle_core::Device;

use super::*;

const ONE_F16: [u8; 2] = [0x00, 0x3c];

/// A block of zeros with the given values at the given positions.
fn block_with(values: &[(usize, f32)]) -> [f32; BLOCK_VALUES] {
    let mut block = [0.0; BLOCK_VALUES];
    for &(j, v) in values {
        block[j] = v;
    }
    block
}

#[test]
fn q8_0_scales_by_the_largest_magnitude_and_rounds_half_away_from_zero() {
    // amax = 127 gives d = 1 exactly, so every quant is round(x).
    let x = block_with(&[
        (0, 127.0),
        (1, -63.5),
        (2, 0.5),
        (3, -0.5),
        (4, 2.4),
        (31, -127.0),
    ]);
    let block = quantize_q8_0(&x);
    assert_eq!(block[..2], ONE_F16);
    let quants: Vec<i8> = block[2..].iter().map(|&b| b as i8).collect();
    assert_eq!(quants[..5], [127, -64, 1, -1, 2]);
    assert!(quants[5..31].iter().all(|&q| q == 0));
    assert_eq!(quants[31], -127);
}

#[test]
fn q8_0_of_zeros_is_zero() {
    assert_eq!(quantize_q8_0(&[0.0; BLOCK_VALUES]), [0; 34]);
}

#[test]
fn q4_0_takes_the_sign_of_the_largest_magnitude() {
    // max = -8 (largest magnitude, negative) gives d = 1: q = min(15, trunc(x + 8.5)).
    let x = block_with(&[
        (0, -8.0),
        (1, 7.0),
        (2, 7.9),
        (3, -0.5),
        (16, 0.49),
        (17, -3.0),
    ]);
    let block = quantize_q4_0(&x);
    assert_eq!(block[..2], ONE_F16);
    let nibble = |j: usize| match j {
        0..16 => block[2 + j] & 0x0f,
        _ => block[2 + j - 16] >> 4,
    };
    let levels: Vec<u8> = (0..BLOCK_VALUES).map(nibble).collect();
    assert_eq!(levels[..4], [0, 15, 15, 8]);
    assert_eq!(levels[16..18], [8, 5]);
    // Zeros sit at trunc(8.5) = 8.
    assert!(levels[4..16].iter().chain(&levels[18..]).all(|&q| q == 8));
    assert_eq!(block[2], 0x80, "value 0 low nibble, value 16 high nibble");

    // A positive extreme makes d negative: x = 16 gives d = -2 and level 0.
    let block = quantize_q4_0(&block_with(&[(5, 16.0), (6, -16.0)]));
    assert_eq!(block[..2], f16::from_f32(-2.0).to_le_bytes());
    assert_eq!((block[2 + 5] & 0x0f, block[2 + 6] & 0x0f), (0, 15));
}

#[test]
fn q4_1_spans_min_to_max_in_fifteen_steps() {
    // min = -1, max = 14 give d = 1 and m = -1: q = min(15, trunc(x + 1 + 0.5)).
    let mut x = [-1.0f32; BLOCK_VALUES];
    x[1] = 14.0;
    x[2] = 0.4;
    x[17] = 5.1;
    x[18] = 0.5; // 1.5 + 0.5 = 2.0 exactly
    let block = quantize_q4_1(&x);
    assert_eq!(block[..2], ONE_F16);
    assert_eq!(block[2..4], f16::from_f32(-1.0).to_le_bytes());
    let qs = &block[4..];
    assert_eq!(qs[0], 0x00);
    assert_eq!(qs[1], 0x6f, "value 1 → 15 low, value 17 → 6 high");
    assert_eq!(qs[2], 0x21, "value 2 → 1 low, value 18 → 2 high");
}

#[test]
fn f16_rounds_to_nearest_even() {
    let mut out = Vec::new();
    let half_step = 1.0 / 2048.0;
    encode(
        GgmlType::F16,
        &[-2.0, 1.0 + half_step, 1.0 + 3.0 * half_step],
        &mut out,
    );
    // Both are ties between two f16 neighbours; each goes to the even mantissa.
    assert_eq!(out, [0x00, 0xc0, 0x00, 0x3c, 0x02, 0x3c]);
}

#[test]
fn names_parse_case_insensitively() {
    use crate::quantize::FileType;
    assert_eq!("Q4_K_M".parse::<FileType>().ok(), Some(FileType::Q4_K_M));
    let message = "q5_k".parse::<FileType>().unwrap_err().to_string();
    assert!(message.contains("f16, q8_0, q4_0, q4_1"), "{message}");
}

/// Values like the synthetic weights' (std 0.02) with an outlier per few blocks.
fn sample_values(n: usize) -> Vec<f32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            if i % 97 == 0 {
                unit * 0.2
            } else {
                unit * 0.04
            }
        })
        .collect()
}

/// The types [`encode`] writes, but F32.
const TYPES: [GgmlType; 9] = [
    GgmlType::F16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn dequantize(ty: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let dtype = match ty {
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        other => unreachable!("{other}"),
    };
    let tensor = qtensor_from_ggml(dtype, bytes, vec![n], &Device::Cpu).unwrap();
    tensor
        .dequantize(&Device::Cpu)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

/// The most a value of a block may move: half a step of the scale (a whole
/// step for Q4_0, whose positive end is clamped at level 15), plus what
/// rounding the scale and minimum to f16 adds over up to 16 steps. The
/// K-quants round their sub-block scales to 6 or 8 bits as well, so a
/// value may land a whole step of the super-block's largest scale away.
fn error_bound(ty: GgmlType, block: &[f32]) -> f32 {
    let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (lo, hi) = block
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let f16_step = 1.0 / 1024.0;
    match ty {
        // Half a step, which below 2⁻¹⁴ is the subnormals' fixed 2⁻²⁴.
        GgmlType::F16 => (amax * f16_step / 2.0).max(2.0f32.powi(-25)),
        GgmlType::Q8_0 => amax / 127.0 * (0.5 + 128.0 * f16_step),
        GgmlType::Q4_0 => amax / 8.0 * (1.0 + 16.0 * f16_step),
        GgmlType::Q5_0 => amax / 16.0 * (1.0 + 32.0 * f16_step),
        GgmlType::Q4_1 => (hi - lo) / 15.0 * (0.5 + 16.0 * f16_step) + lo.abs() * f16_step,
        GgmlType::Q5_1 => (hi - lo) / 31.0 * (0.5 + 32.0 * f16_step) + lo.abs() * f16_step,
        GgmlType::Q4_K => (hi - lo.min(0.0)) / 15.0,
        GgmlType::Q5_K => (hi - lo.min(0.0)) / 31.0,
        GgmlType::Q6_K => amax / 32.0,
        other => unreachable!("{other}"),
    }
}

#[test]
fn every_type_round_trips_through_candle_within_its_step() {
    let n = 8 * SUPER_BLOCK_VALUES;
    let values = sample_values(n);
    for ty in TYPES {
        let mut bytes = Vec::new();
        encode(ty, &values, &mut bytes);
        assert_eq!(bytes.len() as u64, ty.bytes_for(n as u64).unwrap());
        let restored = dequantize(ty, &bytes, n);
        let block = ty.block_elements() as usize;
        for (b, (original, back)) in values.chunks(block).zip(restored.chunks(block)).enumerate() {
            let bound = error_bound(ty, original);
            for (j, (x, y)) in original.iter().zip(back).enumerate() {
                assert!(
                    (x - y).abs() <= bound,
                    "{ty} block {b} value {j}: {x} came back as {y} (bound {bound})"
                );
            }
        }
    }
}
