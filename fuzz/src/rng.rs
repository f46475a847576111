//! A small seeded random number generator (SplitMix64): a campaign started with
//! the same `--seed` makes the same inputs, which is what lets a run be repeated.

/// SplitMix64: one 64-bit state, good enough statistics for choosing mutations.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0, so callers need no guard).
    pub fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            return 0;
        }
        (self.next_u64() % bound as u64) as usize
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high.saturating_sub(low) + 1)
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// A random element, or `None` for an empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }

    /// Small numbers far more often than large ones: lengths, counts and
    /// repetitions that stay cheap most of the time but sometimes are not.
    pub fn skewed(&mut self, max: usize) -> usize {
        let bits = self.below(usize::BITS as usize);
        let cap = if bits >= 63 {
            usize::MAX
        } else {
            (1usize << bits) - 1
        };
        self.below(cap.min(max).saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_numbers() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
    }

    #[test]
    fn bounds_hold() {
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
            assert!((3..=5).contains(&rng.between(3, 5)));
            assert!(rng.skewed(100) <= 100);
        }
        assert_eq!(rng.below(0), 0);
    }
}
