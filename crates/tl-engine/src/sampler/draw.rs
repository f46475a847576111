//! The last step of the chain: one weighted draw among the surviving
//! candidates, driven by the sampler's seeded generator.

use super::candidates::{total_prob, Candidate};
use super::rng::Xoshiro256StarStar;

/// Picks a candidate with probability proportional to its `prob`; the
/// division by the total is the "renormalise" step, folded into the draw.
/// Returns `None` only for an empty set.
pub fn draw_weighted(candidates: &[Candidate], rng: &mut Xoshiro256StarStar) -> Option<u32> {
    let total = total_prob(candidates);
    let target = rng.next_f64() * total;
    let mut cumulative = 0.0f64;
    for candidate in candidates {
        cumulative += f64::from(candidate.prob);
        if cumulative > target {
            return Some(candidate.token);
        }
    }
    // Rounding can leave `cumulative` a hair below `target`: the last
    // candidate with any mass is the right answer then.
    candidates
        .iter()
        .rev()
        .find(|c| c.prob > 0.0)
        .or(candidates.last())
        .map(|c| c.token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_picks_zero_probability_tokens() {
        let candidates = [
            Candidate {
                token: 3,
                logit: 0.0,
                prob: 0.0,
            },
            Candidate {
                token: 5,
                logit: 0.0,
                prob: 1.0,
            },
            Candidate {
                token: 9,
                logit: 0.0,
                prob: 0.0,
            },
        ];
        let mut rng = Xoshiro256StarStar::from_seed(1);
        for _ in 0..1_000 {
            assert_eq!(draw_weighted(&candidates, &mut rng), Some(5));
        }
    }

    #[test]
    fn empty_set_draws_nothing() {
        let mut rng = Xoshiro256StarStar::from_seed(1);
        assert_eq!(draw_weighted(&[], &mut rng), None);
    }
}
