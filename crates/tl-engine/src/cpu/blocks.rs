//! Reading one GGUF weight block: its scale, its minimum (Q4_1) and its 32
//! quantized values. Blocks stay the byte arrays of the file; fields are taken
//! apart with array patterns, so nothing is cast.

use super::weight_type::WeightType;

/// Where a block keeps its 32 quantized values.
pub(crate) enum Quants<'a> {
    /// Two 4-bit values a byte: value `j < 16` is the low nibble of byte `j`,
    /// value `j + 16` the high nibble of the same byte.
    Nibbles(&'a [u8; 16]),
    /// One signed byte a value.
    Bytes(&'a [u8; 32]),
}

/// One block of a weight row, as stored in GGUF.
pub(crate) trait WeightBlock: Sync {
    /// The weight type this block layout belongs to.
    const TYPE: WeightType;

    /// The scale `d` as IEEE half-precision bits.
    fn scale_bits(&self) -> u16;

    /// The minimum `m` (Q4_1) as half-precision bits; 0 for the other types.
    fn min_bits(&self) -> u16;

    /// The packed quantized values.
    fn quants(&self) -> Quants<'_>;

    /// The integer the block multiplies by `d` for value `j` (the offset of 8 of
    /// Q4_0 applied; Q4_1's `m` is not part of it).
    fn value(&self, j: usize) -> i32 {
        let raw = match self.quants() {
            Quants::Nibbles(q) if j < 16 => i32::from(q[j] & 0x0f),
            Quants::Nibbles(q) => i32::from(q[j - 16] >> 4),
            Quants::Bytes(q) => i32::from(q[j] as i8),
        };
        match Self::TYPE {
            WeightType::Q4_0 => raw - 8,
            WeightType::Q4_1 | WeightType::Q8_0 => raw,
        }
    }
}

impl WeightBlock for [u8; 18] {
    const TYPE: WeightType = WeightType::Q4_0;

    fn scale_bits(&self) -> u16 {
        let [d0, d1, ..] = *self;
        u16::from_le_bytes([d0, d1])
    }

    fn min_bits(&self) -> u16 {
        0
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, qs @ ..] = self;
        Quants::Nibbles(qs)
    }
}

impl WeightBlock for [u8; 20] {
    const TYPE: WeightType = WeightType::Q4_1;

    fn scale_bits(&self) -> u16 {
        let [d0, d1, ..] = *self;
        u16::from_le_bytes([d0, d1])
    }

    fn min_bits(&self) -> u16 {
        let [_, _, m0, m1, ..] = *self;
        u16::from_le_bytes([m0, m1])
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, _, _, qs @ ..] = self;
        Quants::Nibbles(qs)
    }
}

impl WeightBlock for [u8; 34] {
    const TYPE: WeightType = WeightType::Q8_0;

    fn scale_bits(&self) -> u16 {
        let [d0, d1, ..] = *self;
        u16::from_le_bytes([d0, d1])
    }

    fn min_bits(&self) -> u16 {
        0
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, qs @ ..] = self;
        Quants::Bytes(qs)
    }
}

/// Half-precision bits to f32 (exact, like `GGML_CPU_FP16_TO_FP32`).
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// f32 rounded to the nearest half (ties to even, like F16C's `_cvtss_sh(x, 0)`
/// behind `GGML_CPU_FP32_TO_FP16`), returned as f32.
pub(crate) fn round_to_f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}
