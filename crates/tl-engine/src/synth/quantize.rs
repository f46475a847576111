//! Reference quantizers with ggml's arithmetic (`quantize_row_*_ref` in
//! ggml-quants.c), so a synthetic file holds the bytes llama.cpp would write for
//! the same values: F16, and blocks of 32 values for Q8_0, Q4_0 and Q4_1.

use std::fmt;
use std::str::FromStr;

use half::f16;
use tl_gguf::GgmlType;

use crate::error::{Error, Result};

/// Values per block of the legacy quantized types.
pub const BLOCK_VALUES: usize = 32;

/// The weight types a synthetic model can use for its matrices.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthQuant {
    F16,
    Q8_0,
    Q4_0,
    Q4_1,
}

impl SynthQuant {
    /// Every type, in the order help texts list them.
    pub const ALL: [SynthQuant; 4] = [
        SynthQuant::F16,
        SynthQuant::Q8_0,
        SynthQuant::Q4_0,
        SynthQuant::Q4_1,
    ];

    /// The name on the command line and in `general.name` (`q4_0`).
    pub fn name(self) -> &'static str {
        match self {
            SynthQuant::F16 => "f16",
            SynthQuant::Q8_0 => "q8_0",
            SynthQuant::Q4_0 => "q4_0",
            SynthQuant::Q4_1 => "q4_1",
        }
    }

    /// The GGUF tensor type.
    pub fn ggml_type(self) -> GgmlType {
        match self {
            SynthQuant::F16 => GgmlType::F16,
            SynthQuant::Q8_0 => GgmlType::Q8_0,
            SynthQuant::Q4_0 => GgmlType::Q4_0,
            SynthQuant::Q4_1 => GgmlType::Q4_1,
        }
    }

    /// llama.cpp's `llama_ftype` for a file whose matrices are of this type
    /// (`general.file_type`).
    pub fn file_type(self) -> u32 {
        match self {
            SynthQuant::F16 => 1,
            SynthQuant::Q4_0 => 2,
            SynthQuant::Q4_1 => 3,
            SynthQuant::Q8_0 => 7,
        }
    }

    /// Appends `values` in this type's layout. Quantized types need a whole
    /// number of blocks; the caller sizes rows so (GGUF rows are whole blocks).
    pub fn encode(self, values: &[f32], out: &mut Vec<u8>) {
        match self {
            SynthQuant::F16 => encode_f16(values, out),
            SynthQuant::Q8_0 => encode_blocks(values, out, quantize_q8_0),
            SynthQuant::Q4_0 => encode_blocks(values, out, quantize_q4_0),
            SynthQuant::Q4_1 => encode_blocks(values, out, quantize_q4_1),
        }
    }
}

impl fmt::Display for SynthQuant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SynthQuant {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.to_ascii_lowercase();
        SynthQuant::ALL
            .into_iter()
            .find(|quant| quant.name() == wanted)
            .ok_or_else(|| {
                let known = SynthQuant::ALL.map(SynthQuant::name).join(", ");
                Error::InvalidRequest(format!("unknown weight type '{text}' (known: {known})"))
            })
    }
}

/// F32 values as little-endian bytes (norm weights).
pub fn encode_f32(values: &[f32], out: &mut Vec<u8>) {
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// Round to nearest, ties to even, like `GGML_FP32_TO_FP16`.
fn encode_f16(values: &[f32], out: &mut Vec<u8>) {
    out.extend(values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()));
}

fn encode_blocks<const N: usize>(
    values: &[f32],
    out: &mut Vec<u8>,
    quantize: fn(&[f32; BLOCK_VALUES]) -> [u8; N],
) {
    debug_assert!(values.len().is_multiple_of(BLOCK_VALUES));
    for block in values.chunks_exact(BLOCK_VALUES) {
        if let Ok(block) = <&[f32; BLOCK_VALUES]>::try_from(block) {
            out.extend_from_slice(&quantize(block));
        }
    }
}

/// `f16 d` then 32 `i8`: `d = amax / 127`, `q = round(x / d)` (half away from zero).
pub fn quantize_q8_0(x: &[f32; BLOCK_VALUES]) -> [u8; 34] {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 34];
    block[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
    for (q, &v) in block[2..].iter_mut().zip(x) {
        // `as i8` saturates; |v·id| ≤ 127 anyway.
        *q = (v * id).round() as i8 as u8;
    }
    block
}

/// `f16 d` then 16 bytes of nibbles (value `j` low, `j + 16` high): `d = max / -8`
/// where `max` is the value of largest magnitude, with its sign;
/// `q = min(15, trunc(x / d + 8.5))`.
pub fn quantize_q4_0(x: &[f32; BLOCK_VALUES]) -> [u8; 18] {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 18];
    block[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
    pack_nibbles(x, &mut block[2..], |v| (v * id + 8.5) as i8);
    block
}

/// `f16 d`, `f16 m` then 16 bytes of nibbles: `d = (max - min) / 15`, `m = min`,
/// `q = min(15, trunc((x - min) / d + 0.5))`.
pub fn quantize_q4_1(x: &[f32; BLOCK_VALUES]) -> [u8; 20] {
    let (min, max) = x
        .iter()
        .fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 20];
    block[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
    block[2..4].copy_from_slice(&f16::from_f32(min).to_le_bytes());
    pack_nibbles(x, &mut block[4..], |v| ((v - min) * id + 0.5) as i8);
    block
}

/// Packs 32 four-bit values (each `level(x)` clamped to at most 15, as ggml's
/// `MIN(15, ...)`) two to a byte.
fn pack_nibbles(x: &[f32; BLOCK_VALUES], qs: &mut [u8], level: impl Fn(f32) -> i8) {
    let nibble = |v: f32| level(v).min(15) as u8 & 0x0f;
    let (low, high) = x.split_at(BLOCK_VALUES / 2);
    for ((q, &lo), &hi) in qs.iter_mut().zip(low).zip(high) {
        *q = nibble(lo) | (nibble(hi) << 4);
    }
}

#[cfg(test)]
mod tests;
