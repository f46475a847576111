//! Deterministic pseudo-random test inputs for the model's numeric kernels (an
//! xorshift stream, so tests need no RNG crate and every run sees the same values).

/// `n` values uniform in `[-1, 1)`, the same for the same seed.
pub fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `n` values uniform in `[-gain, gain)`, rounded to f16 (keys and values of
/// a KV cache).
pub fn pseudo_random_f16(n: usize, seed: u32, gain: f32) -> Vec<half::f16> {
    pseudo_random(n, seed)
        .into_iter()
        .map(|v| half::f16::from_f32(v * gain))
        .collect()
}
