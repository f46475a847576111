//! The K-quant super-block layouts of GGUF (256 values each), taken apart
//! into what the dot products multiply: the integer quants in value order
//! (unsigned where a minimum is subtracted apart: Q2_K, Q4_K, Q5_K; signed
//! for Q3_K and Q6_K), a scale and a minimum for each run of 16 values (the
//! types with 32-value sub-blocks repeat theirs), and the f16 factors.

use super::SUPER_BLOCK_VALUES;
use crate::cpu::blocks::f16_to_f32;

/// One weight super-block unpacked.
pub(crate) struct Unpacked {
    pub quants: [i8; SUPER_BLOCK_VALUES],
    /// The scale of each run of 16 values.
    pub scales: [i32; 16],
    /// The minimum of each run of 16 values (zero for Q3_K and Q6_K).
    pub mins: [i32; 16],
    pub d: f32,
    pub dmin: f32,
}

impl Default for Unpacked {
    fn default() -> Self {
        Unpacked {
            quants: [0; SUPER_BLOCK_VALUES],
            scales: [0; 16],
            mins: [0; 16],
            d: 0.0,
            dmin: 0.0,
        }
    }
}

fn half(bytes: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

/// Q2_K (84 bytes): 16 bytes of 4-bit scale and minimum pairs, 64 bytes of
/// 2-bit quants, `f16 d`, `f16 dmin`. Value `128j + 32k + i` is bits `2k..2k+2`
/// of byte `32j + i`.
pub(crate) fn unpack_q2_k(block: &[u8; 84], out: &mut Unpacked) {
    let (scales, rest) = block.split_at(16);
    let qs = &rest[..64];
    for (i, &s) in scales.iter().enumerate() {
        out.scales[i] = i32::from(s & 0x0f);
        out.mins[i] = i32::from(s >> 4);
    }
    for (position, q) in out.quants.iter_mut().enumerate() {
        let (j, k, i) = (position / 128, position % 128 / 32, position % 32);
        *q = ((qs[32 * j + i] >> (2 * k)) & 3) as i8;
    }
    out.d = half(block, 80);
    out.dmin = half(block, 82);
}

/// Q3_K (110 bytes): 32 bytes of high bits, 64 of 2-bit quants, 12 of 6-bit
/// scales (stored + 32), `f16 d`. Value `128j + 32k + i` is bits `2k..2k+2` of
/// byte `32j + i`, minus 4 unless bit `4j + k` of high byte `i` is set.
pub(crate) fn unpack_q3_k(block: &[u8; 110], out: &mut Unpacked) {
    let (high, rest) = block.split_at(32);
    let (qs, rest) = rest.split_at(64);
    let s = &rest[..12];
    for i in 0..4 {
        let top = |shift: u32| i32::from((s[8 + i] >> shift) & 3) << 4;
        out.scales[i] = (i32::from(s[i] & 0x0f) | top(0)) - 32;
        out.scales[4 + i] = (i32::from(s[4 + i] & 0x0f) | top(2)) - 32;
        out.scales[8 + i] = (i32::from(s[i] >> 4) | top(4)) - 32;
        out.scales[12 + i] = (i32::from(s[4 + i] >> 4) | top(6)) - 32;
    }
    out.mins = [0; 16];
    for (position, q) in out.quants.iter_mut().enumerate() {
        let (j, k, i) = (position / 128, position % 128 / 32, position % 32);
        let low = (qs[32 * j + i] >> (2 * k)) & 3;
        let set = (high[i] >> (4 * j + k)) & 1 == 1;
        *q = low as i8 - if set { 0 } else { 4 };
    }
    out.d = half(block, 108);
    out.dmin = 0.0;
}

/// The 6-bit scales and minimums of Q4_K and Q5_K (`get_scale_min_k4`), one
/// per 32 values, each stored for both of its runs of 16.
fn unpack_k4_scales(s: &[u8], out: &mut Unpacked) {
    for j in 0..8 {
        let (scale, min) = if j < 4 {
            (s[j] & 63, s[j + 4] & 63)
        } else {
            (
                (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
                (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
            )
        };
        out.scales[2 * j..2 * j + 2].fill(i32::from(scale));
        out.mins[2 * j..2 * j + 2].fill(i32::from(min));
    }
}

/// Q4_K (144 bytes): `f16 d`, `f16 dmin`, 12 bytes of scales, 128 of nibbles.
/// Value `64j + i` is the low nibble of byte `32j + i`, `64j + 32 + i` its
/// high nibble.
pub(crate) fn unpack_q4_k(block: &[u8; 144], out: &mut Unpacked) {
    unpack_k4_scales(&block[4..16], out);
    let qs = &block[16..];
    for (position, q) in out.quants.iter_mut().enumerate() {
        let (j, high, i) = (position / 64, position % 64 >= 32, position % 32);
        let byte = qs[32 * j + i];
        *q = if high { byte >> 4 } else { byte & 0x0f } as i8;
    }
    out.d = half(block, 0);
    out.dmin = half(block, 2);
}

/// Q5_K (176 bytes): Q4_K's header and scales, 32 bytes of fifth bits, 128
/// of nibbles; the fifth bit of value `64j + 32h + i` is bit `2j + h` of byte
/// `i`.
pub(crate) fn unpack_q5_k(block: &[u8; 176], out: &mut Unpacked) {
    unpack_k4_scales(&block[4..16], out);
    let (high, qs) = block[16..].split_at(32);
    for (position, q) in out.quants.iter_mut().enumerate() {
        let (j, h, i) = (position / 64, position % 64 / 32, position % 32);
        let byte = qs[32 * j + i];
        let low = if h == 1 { byte >> 4 } else { byte & 0x0f };
        let fifth = (high[i] >> (2 * j + h)) & 1;
        *q = (low | (fifth << 4)) as i8;
    }
    out.d = half(block, 0);
    out.dmin = half(block, 2);
}

/// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of 2-bit high parts, 16
/// signed scales, `f16 d`. Value `128j + 32k + i` takes the low or high
/// nibble (k ≥ 2) of byte `64j + 32(k % 2) + i` and bits `2k..2k+2` of high
/// byte `32j + i`, minus 32.
pub(crate) fn unpack_q6_k(block: &[u8; 210], out: &mut Unpacked) {
    let (low, rest) = block.split_at(128);
    let (high, rest) = rest.split_at(64);
    for (scale, &s) in out.scales.iter_mut().zip(&rest[..16]) {
        *scale = i32::from(s as i8);
    }
    out.mins = [0; 16];
    for (position, q) in out.quants.iter_mut().enumerate() {
        let (j, k, i) = (position / 128, position % 128 / 32, position % 32);
        let byte = low[64 * j + 32 * (k % 2) + i];
        let nibble = if k >= 2 { byte >> 4 } else { byte & 0x0f };
        let top = (high[32 * j + i] >> (2 * k)) & 3;
        *q = (nibble | (top << 4)) as i8 - 32;
    }
    out.d = half(block, 208);
    out.dmin = 0.0;
}
