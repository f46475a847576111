//! Byte-level mutations, blind to structure: bit flips, random and boundary
//! values (as 1, 2, 4 or 8 bytes, either endianness: counts and offsets in a
//! binary header), insertions, deletions, duplications, and splices with
//! another input. `region` is where positions are chosen (a GGUF file's
//! header, where bytes mean something, rather than its tensor data).

use std::ops::Range;

use crate::rng::Rng;

/// Values at the edges of the integer types, and small ones.
const BOUNDARIES: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    12,
    13,
    16,
    32,
    64,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    u64::MAX - 1,
];

/// Applies one random byte mutation to `data`, positions drawn from `region`
/// (clamped to the data).
pub fn mutate(data: &mut Vec<u8>, other: &[u8], region: Range<usize>, rng: &mut Rng) {
    let end = region.end.min(data.len());
    let start = region.start.min(end);
    match rng.below(9) {
        0 => flip_bit(data, start..end, rng),
        1 => set_random_byte(data, start..end, rng),
        2 | 3 => set_boundary(data, start..end, rng),
        4 => insert_random(data, start..end, rng),
        5 => delete_range(data, start..end, rng),
        6 => duplicate_range(data, start..end, rng),
        7 => splice(data, other, start..end, rng),
        _ => add_small(data, start..end, rng),
    }
}

fn position(region: &Range<usize>, rng: &mut Rng) -> usize {
    region.start + rng.below(region.len())
}

fn flip_bit(data: &mut [u8], region: Range<usize>, rng: &mut Rng) {
    if region.is_empty() {
        return;
    }
    let at = position(&region, rng);
    data[at] ^= 1 << rng.below(8);
}

fn set_random_byte(data: &mut [u8], region: Range<usize>, rng: &mut Rng) {
    if region.is_empty() {
        return;
    }
    let at = position(&region, rng);
    data[at] = rng.byte();
}

/// Overwrites 1, 2, 4 or 8 bytes with a boundary value, possibly negated.
fn set_boundary(data: &mut [u8], region: Range<usize>, rng: &mut Rng) {
    let width = [1usize, 2, 4, 8][rng.below(4)];
    if region.len() < width {
        return;
    }
    let at = region.start + rng.below(region.len() - width + 1);
    let mut value = *rng.pick(BOUNDARIES).unwrap_or(&0);
    if rng.one_in(4) {
        value = value.wrapping_neg();
    }
    let bytes = if rng.one_in(4) {
        value.to_be_bytes()[8 - width..].to_vec()
    } else {
        value.to_le_bytes()[..width].to_vec()
    };
    data[at..at + width].copy_from_slice(&bytes);
}

/// Adds or subtracts a little from a little-endian `u32` (a count or a length
/// off by a few is what checks miss).
fn add_small(data: &mut [u8], region: Range<usize>, rng: &mut Rng) {
    if region.len() < 4 {
        return;
    }
    let at = region.start + rng.below(region.len() - 3);
    let mut word = [0u8; 4];
    word.copy_from_slice(&data[at..at + 4]);
    let delta = rng.between(1, 16) as u32;
    let value = if rng.one_in(2) {
        u32::from_le_bytes(word).wrapping_add(delta)
    } else {
        u32::from_le_bytes(word).wrapping_sub(delta)
    };
    data[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn insert_random(data: &mut Vec<u8>, region: Range<usize>, rng: &mut Rng) {
    let at = region.start + rng.below(region.len() + 1);
    let len = 1 + rng.skewed(64);
    let fill = rng.one_in(2).then(|| rng.byte());
    let bytes: Vec<u8> = (0..len)
        .map(|_| fill.unwrap_or_else(|| rng.byte()))
        .collect();
    data.splice(at..at, bytes);
}

fn delete_range(data: &mut Vec<u8>, region: Range<usize>, rng: &mut Rng) {
    if region.is_empty() {
        return;
    }
    let at = position(&region, rng);
    let len = (1 + rng.skewed(region.end - at)).min(region.end - at);
    data.drain(at..at + len);
}

fn duplicate_range(data: &mut Vec<u8>, region: Range<usize>, rng: &mut Rng) {
    if region.is_empty() {
        return;
    }
    let at = position(&region, rng);
    let len = (1 + rng.skewed(region.end - at)).min(region.end - at);
    let copy = data[at..at + len].to_vec();
    let times = 1 + rng.skewed(8);
    for _ in 0..times {
        data.splice(at..at, copy.iter().copied());
    }
}

/// Inserts a piece of another input, or replaces the tail with one.
fn splice(data: &mut Vec<u8>, other: &[u8], region: Range<usize>, rng: &mut Rng) {
    if other.is_empty() {
        return;
    }
    let from = rng.below(other.len());
    let len = (1 + rng.skewed(other.len() - from)).min(other.len() - from);
    let piece = &other[from..from + len];
    let at = region.start + rng.below(region.len() + 1);
    if rng.one_in(3) {
        data.truncate(at);
        data.extend_from_slice(&other[from..]);
    } else {
        data.splice(at..at, piece.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_in_bounds() {
        let mut rng = Rng::new(3);
        for round in 0..5000 {
            let mut data: Vec<u8> = (0..(round % 40) as u8).collect();
            let len = data.len();
            mutate(&mut data, b"other input", 0..len, &mut rng);
            mutate(&mut data, b"", 2..7, &mut rng);
        }
    }
}
