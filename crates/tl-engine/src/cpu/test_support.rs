//! Test helpers: a seeded generator, llama.cpp's reference weight quantizers
//! (`quantize_row_*_ref` in ggml-quants.c) for realistic weights, dequantization,
//! and an f64 matmul with the error bound expected of 8-bit activations.

use half::f16;

use super::blocks::WeightBlock;
use super::weight_type::{WeightType, BLOCK_VALUES};

/// SplitMix64: small, seeded, good enough for test data.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Roughly normal (sum of uniforms), scaled.
    pub fn normal(&mut self, scale: f32) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() * scale * 0.87
    }

    /// `len` activations: mostly small values with occasional outliers, like a
    /// transformer's hidden state.
    pub fn activations(&mut self, len: usize) -> Vec<f32> {
        (0..len)
            .map(|_| {
                let outlier = self.next_u64().is_multiple_of(64);
                self.normal(if outlier { 20.0 } else { 1.0 })
            })
            .collect()
    }
}

/// Quantizes `values` (rows of a multiple of 32) with llama.cpp's reference
/// quantizer for `ty`.
pub(crate) fn quantize_weights(ty: WeightType, values: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() / BLOCK_VALUES * ty.block_bytes());
    for block in values.chunks_exact(BLOCK_VALUES) {
        match ty {
            WeightType::Q4_0 => quantize_q4_0(block, &mut bytes),
            WeightType::Q4_1 => quantize_q4_1(block, &mut bytes),
            WeightType::Q5_0 => quantize_q5_0(block, &mut bytes),
            WeightType::Q5_1 => quantize_q5_1(block, &mut bytes),
            WeightType::Q8_0 => quantize_q8_0(block, &mut bytes),
            other => unimplemented!("no test quantizer for {other}"),
        }
    }
    bytes
}

fn quantize_q4_0(x: &[f32], out: &mut Vec<u8>) {
    let max = x
        .iter()
        .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend(f16::from_f32(d).to_le_bytes());
    for j in 0..16 {
        let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        out.push(q(x[j]) | (q(x[j + 16]) << 4));
    }
}

fn quantize_q4_1(x: &[f32], out: &mut Vec<u8>) {
    let min = x.iter().fold(f32::MAX, |m, &v| m.min(v));
    let max = x.iter().fold(-f32::MAX, |m, &v| m.max(v));
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend(f16::from_f32(d).to_le_bytes());
    out.extend(f16::from_f32(min).to_le_bytes());
    for j in 0..16 {
        let q = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
        out.push(q(x[j]) | (q(x[j + 16]) << 4));
    }
}

/// Packs 32 five-bit quants: 4 bytes of fifth bits, then the nibbles.
fn push_five_bits(q: [u8; 32], out: &mut Vec<u8>) {
    let high = (0..32).fold(0u32, |h, j| h | (u32::from(q[j] >> 4) << j));
    out.extend(high.to_le_bytes());
    out.extend((0..16).map(|j| (q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4)));
}

fn quantize_q5_0(x: &[f32], out: &mut Vec<u8>) {
    let max = x
        .iter()
        .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend(f16::from_f32(d).to_le_bytes());
    push_five_bits(
        std::array::from_fn(|j| ((x[j] * id + 16.5) as i8).min(31) as u8),
        out,
    );
}

fn quantize_q5_1(x: &[f32], out: &mut Vec<u8>) {
    let min = x.iter().fold(f32::MAX, |m, &v| m.min(v));
    let max = x.iter().fold(-f32::MAX, |m, &v| m.max(v));
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend(f16::from_f32(d).to_le_bytes());
    out.extend(f16::from_f32(min).to_le_bytes());
    push_five_bits(
        std::array::from_fn(|j| ((x[j] - min) * id + 0.5) as u8),
        out,
    );
}

fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend(f16::from_f32(d).to_le_bytes());
    out.extend(x.iter().map(|&v| (v * id).round() as i8 as u8));
}

/// Random but valid blocks: every nibble/byte value, scales of both signs, Q4_1
/// minimums, and some Q8_0 values of −128 (which quantizers never produce).
pub(crate) fn random_blocks(ty: WeightType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(blocks * ty.block_bytes());
    for _ in 0..blocks {
        let scale = rng.uniform() * 0.05;
        bytes.extend(f16::from_f32(scale).to_le_bytes());
        let has_min = matches!(ty, WeightType::Q4_1 | WeightType::Q5_1);
        if has_min {
            bytes.extend(f16::from_f32(rng.uniform() * 0.5).to_le_bytes());
        }
        let header_bytes = if has_min { 4 } else { 2 };
        bytes.extend((0..ty.block_bytes() - header_bytes).map(|_| rng.next_u64() as u8));
    }
    bytes
}

/// The weights the bytes stand for, in f64.
pub(crate) fn dequantize(ty: WeightType, bytes: &[u8]) -> Vec<f64> {
    match ty {
        WeightType::Q4_0 => dequantize_blocks::<18>(bytes),
        WeightType::Q4_1 => dequantize_blocks::<20>(bytes),
        WeightType::Q5_0 => dequantize_blocks::<22>(bytes),
        WeightType::Q5_1 => dequantize_blocks::<24>(bytes),
        WeightType::Q8_0 => dequantize_blocks::<34>(bytes),
        other => unimplemented!("no test dequantizer for {other}"),
    }
}

fn dequantize_blocks<const N: usize>(bytes: &[u8]) -> Vec<f64>
where
    [u8; N]: WeightBlock,
{
    let half = |bits: u16| f64::from(f16::from_bits(bits).to_f32());
    bytes
        .as_chunks::<N>()
        .0
        .iter()
        .flat_map(|block| {
            let (d, m) = (half(block.scale_bits()), half(block.min_bits()));
            (0..BLOCK_VALUES).map(move |j| d * f64::from(block.value(j)) + m)
        })
        .collect()
}

/// Each block's minimum `m` (0 for types without one).
fn block_mins(ty: WeightType, bytes: &[u8]) -> Vec<f64> {
    let has_min = matches!(ty, WeightType::Q4_1 | WeightType::Q5_1);
    bytes
        .chunks_exact(ty.block_bytes())
        .map(|block| match has_min {
            true => f64::from(f16::from_le_bytes([block[2], block[3]]).to_f32()),
            false => 0.0,
        })
        .collect()
}

/// `x · Wᵀ` in f64, with for each output the error allowed by quantizing the
/// activations to 8 bits (half a step per value, f16 scales) plus f32 rounding.
pub(crate) fn reference_matmul(
    ty: WeightType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    m: usize,
) -> (Vec<f64>, Vec<f64>) {
    let w = dequantize(ty, bytes);
    let mins = block_mins(ty, bytes);
    let blocks_per_row = cols / BLOCK_VALUES;
    let mut out = vec![0.0; m * rows];
    let mut tolerance = vec![0.0; m * rows];
    for a in 0..m {
        let x_row = &x[a * cols..(a + 1) * cols];
        for r in 0..rows {
            let w_row = &w[r * cols..(r + 1) * cols];
            let (mut sum, mut bound) = (0.0, 0.0);
            let row_mins = &mins[r * blocks_per_row..(r + 1) * blocks_per_row];
            let blocks = w_row.chunks(BLOCK_VALUES).zip(x_row.chunks(BLOCK_VALUES));
            for ((wb, xb), min) in blocks.zip(row_mins) {
                let amax = xb.iter().fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
                let magnitude: f64 = wb
                    .iter()
                    .zip(xb)
                    .map(|(w, &x)| (w * f64::from(x)).abs())
                    .sum();
                let weight_sum: f64 = wb.iter().map(|w| w.abs()).sum();
                sum += wb
                    .iter()
                    .zip(xb)
                    .map(|(w, &x)| w * f64::from(x))
                    .sum::<f64>();
                // Rounding: ≤ half a step (amax/254) per value; f16 scales: 2^-11
                // relative, on the products and on Q4_1's s = d·Σq (|Σq| ≤ 32·127).
                bound += weight_sum * amax / 254.0 * 1.01 + magnitude * 1e-3;
                bound += min.abs() * amax * 32.0 / 1024.0;
            }
            out[a * rows + r] = sum;
            tolerance[a * rows + r] = bound + 1e-5;
        }
    }
    (out, tolerance)
}

/// Random K-quant super-blocks (no test quantizer exists for them): random
/// quants and scales, small f16 factors where the layout keeps them.
pub(crate) fn random_super_blocks(ty: WeightType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let factors: &[usize] = match ty {
        WeightType::Q2_K => &[80, 82],
        WeightType::Q3_K => &[108],
        WeightType::Q4_K | WeightType::Q5_K => &[0, 2],
        WeightType::Q6_K => &[208],
        other => unreachable!("{other} is not a K-quant"),
    };
    let mut bytes: Vec<u8> = (0..blocks * ty.block_bytes())
        .map(|_| rng.next_u64() as u8)
        .collect();
    for block in bytes.chunks_exact_mut(ty.block_bytes()) {
        for &at in factors {
            let factor = half::f16::from_f32(rng.uniform() * 0.01);
            block[at..at + 2].copy_from_slice(&factor.to_le_bytes());
        }
    }
    bytes
}
