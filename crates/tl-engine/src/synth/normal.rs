//! Seeded normal draws for synthetic weights, and the seeds of each piece of
//! work: every chunk of every tensor gets its own stream, derived from the file's
//! seed, the tensor's name and the chunk's index, so the bytes depend on the seed
//! alone and not on how many threads drew them.

use std::f32::consts::TAU;

use crate::sampler::rng::Xoshiro256StarStar;

/// Resolution of the two uniforms taken from each 64-bit draw.
const UNIFORM_BITS: u32 = 24;

/// Fills `out` with draws from normal(0, `std`): Box–Muller in f32 over
/// xoshiro256**, both uniforms of a pair cut from one 64-bit draw. With 24-bit
/// uniforms the tails stop at 5.8 standard deviations, which random weights do
/// not miss, and the draws cost half what f64 arithmetic does.
pub fn fill_normal(seed: u64, std: f32, out: &mut [f32]) {
    let mut rng = Xoshiro256StarStar::from_seed(seed);
    let scale = 1.0 / (1u32 << UNIFORM_BITS) as f32;
    let mask = (1u64 << UNIFORM_BITS) - 1;
    for pair in out.chunks_mut(2) {
        let bits = rng.next_u64();
        // In (0, 1], so the logarithm is finite; and in [0, 1).
        let u1 = ((bits >> (64 - UNIFORM_BITS)) + 1) as f32 * scale;
        let u2 = (bits & mask) as f32 * scale;
        let radius = (-2.0 * u1.ln()).sqrt() * std;
        let (sin, cos) = (TAU * u2).sin_cos();
        pair[0] = radius * cos;
        if let Some(second) = pair.get_mut(1) {
            *second = radius * sin;
        }
    }
}

/// The seed of chunk `chunk` of tensor `name` in a file synthesized from `seed`.
pub fn chunk_seed(seed: u64, name: &str, chunk: u64) -> u64 {
    mix(mix(seed ^ mix(name_hash(name))) ^ chunk)
}

/// FNV-1a: a fixed, platform-independent hash of a tensor name.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64's finalizer after a golden-ratio step: neighbouring inputs give
/// unrelated outputs.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_have_the_requested_moments() {
        let mut values = vec![0.0; 100_001];
        fill_normal(3, 0.02, &mut values);
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = values
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!(mean.abs() < 2e-4, "mean {mean}");
        assert!((var.sqrt() - 0.02).abs() < 2e-4, "std {}", var.sqrt());
        assert!(values.iter().all(|v| v.is_finite() && v.abs() < 0.2));
    }

    #[test]
    fn equal_seeds_give_equal_draws() {
        let draw = |seed| {
            let mut v = vec![0.0; 33];
            fill_normal(seed, 1.0, &mut v);
            v
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn chunk_seeds_differ_by_tensor_chunk_and_seed() {
        let base = chunk_seed(0, "blk.0.attn_q.weight", 0);
        assert_ne!(base, chunk_seed(0, "blk.0.attn_k.weight", 0));
        assert_ne!(base, chunk_seed(0, "blk.0.attn_q.weight", 1));
        assert_ne!(base, chunk_seed(1, "blk.0.attn_q.weight", 0));
        assert_eq!(base, chunk_seed(0, "blk.0.attn_q.weight", 0));
    }
}
