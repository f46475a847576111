//! The K-quant super-block layouts of GGUF (256 values each), taken apart
//! into what the dot products multiply: the unsigned stored quants in value
//! order with the offset the type subtracts from them (Q3_K 4, Q6_K 32), a
//! scale and a minimum for each run of 16 values (the types with 32-value
//! sub-blocks repeat theirs), and the f16 factors.

use super::SUPER_BLOCK_VALUES;
use crate::cpu::blocks::f16_to_f32;

/// One weight super-block unpacked.
pub(crate) struct Unpacked {
    /// The stored quants; value `i` multiplies its scale by `quants[i] − offset`.
    pub quants: [u8; SUPER_BLOCK_VALUES],
    pub offset: i16,
    /// The scale of each run of 16 values.
    pub scales: [i16; 16],
    /// The minimum of each run of 16 values (zero for Q3_K and Q6_K).
    pub mins: [i16; 16],
    pub d: f32,
    pub dmin: f32,
}

impl Default for Unpacked {
    fn default() -> Self {
        Unpacked {
            quants: [0; SUPER_BLOCK_VALUES],
            offset: 0,
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
    let qs = &block[16..80];
    [out.scales, out.mins] = q2_k_scales(block);
    for (half, qs) in out.quants.chunks_exact_mut(128).zip(qs.chunks_exact(32)) {
        for (k, chunk) in half.chunks_exact_mut(32).enumerate() {
            for (q, &byte) in chunk.iter_mut().zip(qs) {
                *q = (byte >> (2 * k)) & 3;
            }
        }
    }
    out.offset = 0;
    out.d = half(block, 80);
    out.dmin = half(block, 82);
}

/// Q2_K's 16 run scales and minimums: the low and high nibbles of its
/// first 16 bytes.
fn q2_k_scales(block: &[u8; 84]) -> [[i16; 16]; 2] {
    let (mut scales, mut mins) = ([0i16; 16], [0i16; 16]);
    for (i, &s) in block[..16].iter().enumerate() {
        scales[i] = i16::from(s & 0x0f);
        mins[i] = i16::from(s >> 4);
    }
    [scales, mins]
}

/// Q3_K's 16 run scales from its 12 bytes of 6-bit scales (stored + 32).
fn q3_k_scales(block: &[u8; 110]) -> [i16; 16] {
    let s = &block[96..108];
    let mut scales = [0i16; 16];
    for i in 0..4 {
        let top = |shift: u32| i16::from((s[8 + i] >> shift) & 3) << 4;
        scales[i] = (i16::from(s[i] & 0x0f) | top(0)) - 32;
        scales[4 + i] = (i16::from(s[4 + i] & 0x0f) | top(2)) - 32;
        scales[8 + i] = (i16::from(s[i] >> 4) | top(4)) - 32;
        scales[12 + i] = (i16::from(s[4 + i] >> 4) | top(6)) - 32;
    }
    scales
}

/// Q3_K (110 bytes): 32 bytes of high bits, 64 of 2-bit quants, 12 of 6-bit
/// scales (stored + 32), `f16 d`. Value `128j + 32k + i` is bits `2k..2k+2` of
/// byte `32j + i`, plus 4 when bit `4j + k` of high byte `i` is set (then 4
/// is subtracted).
pub(crate) fn unpack_q3_k(block: &[u8; 110], out: &mut Unpacked) {
    let (high, rest) = block.split_at(32);
    let qs = &rest[..64];
    out.scales = q3_k_scales(block);
    out.mins = [0; 16];
    for (j, (half, qs)) in out
        .quants
        .chunks_exact_mut(128)
        .zip(qs.chunks_exact(32))
        .enumerate()
    {
        for (k, chunk) in half.chunks_exact_mut(32).enumerate() {
            let bit = 4 * j + k;
            for ((q, &byte), &high) in chunk.iter_mut().zip(qs).zip(high) {
                let low = (byte >> (2 * k)) & 3;
                let set = (high >> bit) & 1;
                *q = low + 4 * set;
            }
        }
    }
    out.offset = 4;
    out.d = half(block, 108);
    out.dmin = 0.0;
}

/// The 6-bit scales and minimums of Q4_K and Q5_K (`get_scale_min_k4`), one
/// per 32 values: `[scales, mins]`.
pub(crate) fn k4_scales(s: &[u8]) -> [[u8; 8]; 2] {
    // Four sub-blocks at a time, in 32-bit words, as ggml's kernels do:
    // scales 0..4 and mins 0..4 are the low 6 bits of words 0 and 1;
    // scales and mins 4..8 take the nibbles of word 2 and the top 2 bits of
    // words 0 and 1.
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let (low6, low4, low2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    let scales = [w0 & low6, (w2 & low4) | (((w0 >> 6) & low2) << 4)];
    let mins = [w1 & low6, ((w2 >> 4) & low4) | (((w1 >> 6) & low2) << 4)];
    let bytes = |pair: [u32; 2]| {
        let [a, b] = pair.map(u32::to_le_bytes);
        [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
    };
    [bytes(scales), bytes(mins)]
}

/// [`k4_scales`], each stored for both runs of 16 of its sub-block.
fn unpack_k4_scales(s: &[u8], out: &mut Unpacked) {
    let [scales, mins] = k4_scales(s);
    for j in 0..8 {
        out.scales[2 * j..2 * j + 2].fill(i16::from(scales[j]));
        out.mins[2 * j..2 * j + 2].fill(i16::from(mins[j]));
    }
}

/// A super-block's `d` and `dmin` (0 for the types without minimums), read
/// where its layout keeps them.
pub(crate) fn factors<const N: usize>(block: &[u8; N]) -> (f32, f32) {
    match N {
        84 => (half(block, 80), half(block, 82)),
        110 => (half(block, 108), 0.0),
        144 | 176 => (half(block, 0), half(block, 2)),
        210 => (half(block, 208), 0.0),
        _ => unreachable!("no K-quant super-block has {N} bytes"),
    }
}

/// Q4_K (144 bytes): `f16 d`, `f16 dmin`, 12 bytes of scales, 128 of nibbles.
/// Value `64j + i` is the low nibble of byte `32j + i`, `64j + 32 + i` its
/// high nibble.
pub(crate) fn unpack_q4_k(block: &[u8; 144], out: &mut Unpacked) {
    unpack_k4_scales(&block[4..16], out);
    let qs = &block[16..];
    for (group, qs) in out.quants.chunks_exact_mut(64).zip(qs.chunks_exact(32)) {
        let (low, high) = group.split_at_mut(32);
        for ((low, high), &byte) in low.iter_mut().zip(high).zip(qs) {
            *low = byte & 0x0f;
            *high = byte >> 4;
        }
    }
    out.offset = 0;
    out.d = half(block, 0);
    out.dmin = half(block, 2);
}

/// Q5_K (176 bytes): Q4_K's header and scales, 32 bytes of fifth bits, 128
/// of nibbles; the fifth bit of value `64j + 32h + i` is bit `2j + h` of byte
/// `i`.
pub(crate) fn unpack_q5_k(block: &[u8; 176], out: &mut Unpacked) {
    unpack_k4_scales(&block[4..16], out);
    let (high, qs) = block[16..].split_at(32);
    for (j, (group, qs)) in out
        .quants
        .chunks_exact_mut(64)
        .zip(qs.chunks_exact(32))
        .enumerate()
    {
        let (low, high_half) = group.split_at_mut(32);
        let pairs = low.iter_mut().zip(high_half).zip(qs).zip(high);
        for (((low, high_half), &byte), &fifths) in pairs {
            *low = (byte & 0x0f) | (((fifths >> (2 * j)) & 1) << 4);
            *high_half = (byte >> 4) | (((fifths >> (2 * j + 1)) & 1) << 4);
        }
    }
    out.offset = 0;
    out.d = half(block, 0);
    out.dmin = half(block, 2);
}

/// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of 2-bit high parts, 16
/// signed scales, `f16 d`. Value `128j + 32k + i` takes the low or high
/// nibble (k ≥ 2) of byte `64j + 32(k % 2) + i` and bits `2k..2k+2` of high
/// byte `32j + i` (then 32 is subtracted).
pub(crate) fn unpack_q6_k(block: &[u8; 210], out: &mut Unpacked) {
    let (low, rest) = block.split_at(128);
    let (high, rest) = rest.split_at(64);
    for (scale, &s) in out.scales.iter_mut().zip(&rest[..16]) {
        *scale = i16::from(s as i8);
    }
    out.mins = [0; 16];
    let halves = out
        .quants
        .chunks_exact_mut(128)
        .zip(low.chunks_exact(64))
        .zip(high.chunks_exact(32));
    for ((half, low), high) in halves {
        let (first, second) = low.split_at(32);
        let (c0, rest) = half.split_at_mut(32);
        let (c1, rest) = rest.split_at_mut(32);
        let (c2, c3) = rest.split_at_mut(32);
        for i in 0..32 {
            let top = high[i];
            c0[i] = (first[i] & 0x0f) | ((top & 3) << 4);
            c1[i] = (second[i] & 0x0f) | (((top >> 2) & 3) << 4);
            c2[i] = (first[i] >> 4) | (((top >> 4) & 3) << 4);
            c3[i] = (second[i] >> 4) | (((top >> 6) & 3) << 4);
        }
    }
    out.offset = 32;
    out.d = half(block, 208);
    out.dmin = 0.0;
}
