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

/// Plain f64 softmax attention of one head's `query` over `keys` and
/// `values` (`[position][dim]`), the reference the attention kernels are
/// checked against.
pub fn softmax_attention_f64(query: &[f32], keys: &[f32], values: &[f32], scale: f64) -> Vec<f64> {
    let dim = query.len();
    let scores: Vec<f64> = keys
        .chunks(dim)
        .map(|k| {
            k.iter()
                .zip(query)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
                * scale
        })
        .collect();
    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut out = vec![0.0; dim];
    for (v, w) in values.chunks(dim).zip(&weights) {
        for (o, &x) in out.iter_mut().zip(v) {
            *o += x as f64 * w / total;
        }
    }
    out
}
