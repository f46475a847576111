//! The filters that shrink the candidate set before the draw: top-k on
//! logits, then top-p and min-p on softmax probabilities.
//!
//! Cost for a vocabulary of n tokens: top-k is one O(n) pass that keeps at most
//! 2k tokens (`select_nth_unstable` on those); top-p sorts only the prefix it needs, growing it
//! geometrically, so a peaked distribution costs O(n) and the worst case
//! O(n log n); min-p is one O(n) pass.

use super::candidates::{
    by_logit_descending, by_prob_descending, collect_usable, total_prob, Candidate,
};

/// How many candidates top-p sorts first; most distributions reach the mass
/// within this prefix, and it grows by [`PREFIX_GROWTH`] when they do not.
const INITIAL_SORTED_PREFIX: usize = 256;
const PREFIX_GROWTH: usize = 4;

/// Fills `candidates` with the `k` usable tokens of `logits` that have the
/// highest logits, the lowest ids winning ties (0 = every usable token, in
/// vocabulary order). With k > 0 the survivors come out most likely first
/// ([`by_logit_descending`]), the order the GPU's sampler
/// (`tl_cuda::ops::sample`) puts its candidates in too.
///
/// One pass over the vocabulary: tokens are buffered while they beat the
/// current k-th best logit, and the buffer is cut back to `k` whenever it
/// reaches `2k`, so the vocabulary is never copied whole.
pub fn collect_top_k(logits: &[f32], k: usize, candidates: &mut Vec<Candidate>) {
    if k == 0 {
        collect_usable(logits, candidates);
        return;
    }
    candidates.clear();
    let compact_at = k.saturating_mul(2);
    // `-inf` to start with also keeps NaN and masked tokens out.
    let mut threshold = f32::NEG_INFINITY;
    for (&logit, token) in logits.iter().zip(0u32..) {
        // Strict `>`: a later token equal to the k-th best has a higher id
        // than every kept token of that logit, so it loses the tie.
        if logit > threshold {
            candidates.push(Candidate::new(token, logit));
            if candidates.len() >= compact_at {
                threshold = keep_best(candidates, k);
            }
        }
    }
    if candidates.len() > k {
        keep_best(candidates, k);
    }
    candidates.sort_unstable_by(by_logit_descending);
}

/// Cuts `candidates` (more than `k >= 1` of them) down to the best `k`;
/// returns the logit of the k-th best.
fn keep_best(candidates: &mut Vec<Candidate>, k: usize) -> f32 {
    candidates.select_nth_unstable_by(k - 1, by_logit_descending);
    candidates.truncate(k);
    candidates[k - 1].logit
}

/// Keeps the smallest most-likely-first prefix whose probability mass reaches
/// `top_p` of the total (at least one token). Needs [`super::candidates::softmax`]
/// to have run; leaves the survivors sorted by probability.
pub fn top_p(candidates: &mut Vec<Candidate>, top_p: f32) {
    if top_p >= 1.0 || candidates.is_empty() {
        return;
    }
    let target_mass = f64::from(top_p) * total_prob(candidates);
    let mut sorted = 0;
    let mut cumulative = 0.0f64;
    while sorted < candidates.len() {
        let prefix = next_prefix_len(sorted, candidates.len());
        sort_next_most_likely(&mut candidates[sorted..], prefix - sorted);
        let newly_sorted = &candidates[sorted..prefix];
        if let Some(offset) = reach_mass(newly_sorted, &mut cumulative, target_mass) {
            candidates.truncate(sorted + offset + 1);
            return;
        }
        sorted = prefix;
    }
    // Rounding kept the sum just below the target: everything stays.
}

/// How far the sorted prefix grows next: geometrically, so that peaked
/// distributions sort a few hundred tokens and flat ones O(log n) rounds.
fn next_prefix_len(sorted: usize, len: usize) -> usize {
    sorted
        .saturating_mul(PREFIX_GROWTH)
        .max(INITIAL_SORTED_PREFIX)
        .min(len)
}

/// Adds the sorted `candidates` to `cumulative` one by one; returns the index
/// of the one that brings it to `target_mass`, if any does.
fn reach_mass(candidates: &[Candidate], cumulative: &mut f64, target_mass: f64) -> Option<usize> {
    candidates.iter().position(|candidate| {
        *cumulative += f64::from(candidate.prob);
        *cumulative >= target_mass
    })
}

/// Moves the `count` most likely of `candidates` to the front, sorted; the
/// rest stay behind them in no particular order.
fn sort_next_most_likely(candidates: &mut [Candidate], count: usize) {
    if count < candidates.len() {
        candidates.select_nth_unstable_by(count - 1, by_prob_descending);
    }
    candidates[..count].sort_unstable_by(by_prob_descending);
}

/// Keeps candidates whose probability is at least `min_p` times the largest
/// one (0 = keep all). The most likely token always survives.
pub fn min_p(candidates: &mut Vec<Candidate>, min_p: f32) {
    if min_p <= 0.0 {
        return;
    }
    let max_prob = candidates.iter().map(|c| c.prob).fold(0.0f32, f32::max);
    let threshold = min_p * max_prob;
    candidates.retain(|c| c.prob >= threshold);
}

#[cfg(test)]
mod tests {
    use super::super::candidates::softmax;
    use super::*;

    fn with_probs(logits: &[f32]) -> Vec<Candidate> {
        let mut candidates = Vec::new();
        collect_usable(logits, &mut candidates);
        softmax(&mut candidates, 1.0);
        candidates
    }

    fn top_k_tokens(logits: &[f32], k: usize) -> Vec<u32> {
        let mut candidates = Vec::new();
        collect_top_k(logits, k, &mut candidates);
        sorted_tokens(&candidates)
    }

    fn sorted_tokens(candidates: &[Candidate]) -> Vec<u32> {
        let mut tokens: Vec<u32> = candidates.iter().map(|c| c.token).collect();
        tokens.sort_unstable();
        tokens
    }

    #[test]
    fn top_k_keeps_the_highest_logits() {
        assert_eq!(top_k_tokens(&[0.1, 5.0, 3.0, 4.0, -1.0], 2), vec![1, 3]);
    }

    #[test]
    fn top_k_breaks_ties_by_lowest_token() {
        assert_eq!(top_k_tokens(&[1.0, 2.0, 2.0, 2.0], 2), vec![1, 2]);
        // Ties that straddle a compaction of the buffer.
        let logits = [2.0, 2.0, 1.0, 2.0, 2.0, 2.0, 3.0, 2.0];
        assert_eq!(top_k_tokens(&logits, 3), vec![0, 1, 6]);
    }

    #[test]
    fn top_k_zero_or_large_keeps_every_usable_token() {
        let logits = [1.0, f32::NAN, 3.0, f32::NEG_INFINITY];
        assert_eq!(top_k_tokens(&logits, 0), vec![0, 2]);
        assert_eq!(top_k_tokens(&logits, 10), vec![0, 2]);
    }

    #[test]
    fn top_k_matches_a_full_sort_on_a_large_row() {
        let logits: Vec<f32> = (0..10_000u32).map(|i| ((i * 7919) % 1013) as f32).collect();
        let mut order: Vec<u32> = (0..10_000).collect();
        order.sort_by(|&a, &b| {
            logits[b as usize]
                .total_cmp(&logits[a as usize])
                .then(a.cmp(&b))
        });
        let mut want = order[..40].to_vec();
        want.sort_unstable();
        assert_eq!(top_k_tokens(&logits, 40), want);
    }

    #[test]
    fn top_p_keeps_smallest_prefix_reaching_the_mass() {
        // Probabilities 0.5, 0.25, 0.125, 0.125 (logits are log2-spaced).
        let ln2 = std::f32::consts::LN_2;
        let logits = [2.0 * ln2, ln2, 0.0, 0.0];
        let mut c = with_probs(&logits);
        top_p(&mut c, 0.7);
        assert_eq!(sorted_tokens(&c), vec![0, 1]);
        let mut c = with_probs(&logits);
        top_p(&mut c, 0.5);
        assert_eq!(sorted_tokens(&c), vec![0]);
        let mut c = with_probs(&logits);
        top_p(&mut c, 0.8);
        assert_eq!(sorted_tokens(&c), vec![0, 1, 2]);
    }

    #[test]
    fn top_p_grows_its_sorted_prefix_for_flat_distributions() {
        let logits = vec![0.0f32; 5_000];
        let mut c = with_probs(&logits);
        top_p(&mut c, 0.5);
        assert_eq!(c.len(), 2_500);
        // Equal probabilities: the lowest token ids win.
        assert_eq!(sorted_tokens(&c), (0..2_500).collect::<Vec<u32>>());
    }

    #[test]
    fn min_p_drops_tokens_below_the_scaled_maximum() {
        // Probabilities proportional to 1, 0.5, 0.25, 0.125.
        let ln2 = std::f32::consts::LN_2;
        let mut c = with_probs(&[3.0 * ln2, 2.0 * ln2, ln2, 0.0]);
        min_p(&mut c, 0.3);
        assert_eq!(sorted_tokens(&c), vec![0, 1]);
    }

    #[test]
    fn min_p_zero_keeps_everything() {
        let mut c = with_probs(&[3.0, 2.0, -10.0]);
        min_p(&mut c, 0.0);
        assert_eq!(c.len(), 3);
    }
}
