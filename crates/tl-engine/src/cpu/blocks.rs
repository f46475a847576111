//! Reading one GGUF weight block: its scale, its minimum (Q4_1, Q5_1) and its
//! 32 quantized values. Blocks stay the byte arrays of the file; fields are taken
//! apart with array patterns, so nothing is cast.

/// Where a block keeps its 32 quantized values.
pub(crate) enum Quants<'a> {
    /// Two 4-bit values a byte: value `j < 16` is the low nibble of byte `j`,
    /// value `j + 16` the high nibble of the same byte.
    Nibbles(&'a [u8; 16]),
    /// Q5's: the low 4 bits as in `Nibbles`, the fifth bit of value `j` bit `j`
    /// of the little-endian `high`.
    FiveBits { low: &'a [u8; 16], high: u32 },
    /// One signed byte a value.
    Bytes(&'a [u8; 32]),
}

/// One block of a weight row, as stored in GGUF.
pub(crate) trait WeightBlock: Sync {
    /// What is subtracted from the stored unsigned quant (8 for Q4_0, 16 for
    /// Q5_0; 0 where the quant is signed, or offset by a minimum instead).
    const OFFSET: i8 = 0;

    /// Whether the block has a minimum `m` (value = d·q + m), which pairs it
    /// with Q8_1 activations and their `s` sums.
    const HAS_MIN: bool = false;

    /// The block's bytes: every layout starts with `f16 d`, then `f16 m`
    /// where the type has a minimum.
    fn bytes(&self) -> &[u8];

    /// The scale `d` as IEEE half-precision bits.
    fn scale_bits(&self) -> u16 {
        let bytes = self.bytes();
        u16::from_le_bytes([bytes[0], bytes[1]])
    }

    /// The minimum `m` as half-precision bits; 0 for types without one.
    fn min_bits(&self) -> u16 {
        let bytes = self.bytes();
        if Self::HAS_MIN {
            u16::from_le_bytes([bytes[2], bytes[3]])
        } else {
            0
        }
    }

    /// The packed quantized values.
    fn quants(&self) -> Quants<'_>;

    /// The integer the block multiplies by `d` for value `j` (the offset
    /// applied; the minimum is not part of it).
    fn value(&self, j: usize) -> i32 {
        let nibble = |q: &[u8; 16]| match j {
            0..16 => i32::from(q[j] & 0x0f),
            _ => i32::from(q[j - 16] >> 4),
        };
        let raw = match self.quants() {
            Quants::Nibbles(q) => nibble(q),
            Quants::FiveBits { low, high } => nibble(low) | (((high >> j) & 1) as i32) << 4,
            Quants::Bytes(q) => i32::from(q[j] as i8),
        };
        raw - i32::from(Self::OFFSET)
    }
}

impl WeightBlock for [u8; 18] {
    const OFFSET: i8 = 8;

    fn bytes(&self) -> &[u8] {
        self
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, qs @ ..] = self;
        Quants::Nibbles(qs)
    }
}

impl WeightBlock for [u8; 20] {
    const HAS_MIN: bool = true;

    fn bytes(&self) -> &[u8] {
        self
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, _, _, qs @ ..] = self;
        Quants::Nibbles(qs)
    }
}

/// Q5_0: `f16 d`, 4 bytes of fifth bits, 16 bytes of nibbles; value = d·(q − 16).
impl WeightBlock for [u8; 22] {
    const OFFSET: i8 = 16;

    fn bytes(&self) -> &[u8] {
        self
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, h0, h1, h2, h3, low @ ..] = self;
        Quants::FiveBits {
            low,
            high: u32::from_le_bytes([*h0, *h1, *h2, *h3]),
        }
    }
}

/// Q5_1: `f16 d`, `f16 m`, 4 bytes of fifth bits, 16 bytes of nibbles;
/// value = d·q + m.
impl WeightBlock for [u8; 24] {
    const HAS_MIN: bool = true;

    fn bytes(&self) -> &[u8] {
        self
    }

    fn quants(&self) -> Quants<'_> {
        let [_, _, _, _, h0, h1, h2, h3, low @ ..] = self;
        Quants::FiveBits {
            low,
            high: u32::from_le_bytes([*h0, *h1, *h2, *h3]),
        }
    }
}

impl WeightBlock for [u8; 34] {
    fn bytes(&self) -> &[u8] {
        self
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
