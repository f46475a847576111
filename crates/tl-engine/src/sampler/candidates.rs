//! The working set of the sampling chain: one entry per token still in the
//! running, carrying its logit and, once softmax has run, its probability.

use std::cmp::Ordering;

/// One token still eligible to be sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub token: u32,
    pub logit: f32,
    /// Unnormalised probability, filled by [`softmax`]; 0 before.
    pub prob: f32,
}

impl Candidate {
    pub fn new(token: u32, logit: f32) -> Self {
        Self {
            token,
            logit,
            prob: 0.0,
        }
    }
}

/// Refills `candidates` with every usable token of `logits`, reusing the
/// buffer's capacity so that steady-state sampling does not allocate.
///
/// NaN logits carry no information and `-inf` is how callers mask tokens out,
/// so neither becomes a candidate (`logit > -inf` is false for both).
pub fn collect_usable(logits: &[f32], candidates: &mut Vec<Candidate>) {
    candidates.clear();
    candidates.extend(
        logits
            .iter()
            .zip(0u32..)
            .filter(|(&logit, _)| logit > f32::NEG_INFINITY)
            .map(|(&logit, token)| Candidate::new(token, logit)),
    );
}

/// The token with the highest usable logit, the lowest id among equals;
/// `None` when every logit is NaN or `-inf`.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<u32> = None;
    let mut best_logit = f32::NEG_INFINITY;
    for (&logit, token) in logits.iter().zip(0u32..) {
        // Strict `>`: NaN never wins and earlier tokens keep ties.
        if logit > best_logit {
            best_logit = logit;
            best = Some(token);
        }
    }
    best
}

/// Total order "more likely first": higher logit first, ties broken by the
/// lower token id so that every filter is deterministic.
pub fn by_logit_descending(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.token.cmp(&b.token))
}

/// Same order as [`by_logit_descending`] but on probabilities.
pub fn by_prob_descending(a: &Candidate, b: &Candidate) -> Ordering {
    b.prob.total_cmp(&a.prob).then(a.token.cmp(&b.token))
}

/// Sets `prob = exp((logit - max) / temperature)`: unnormalised, since every
/// later step only needs ratios or a running sum. Subtracting the maximum keeps
/// `exp` from overflowing; a `+inf` logit takes all the mass.
///
/// `temperature` must be > 0 and the candidates free of NaN / `-inf`.
pub fn softmax(candidates: &mut [Candidate], temperature: f32) {
    let max_logit = candidates
        .iter()
        .map(|c| c.logit)
        .fold(f32::NEG_INFINITY, f32::max);
    if max_logit == f32::INFINITY {
        for c in candidates.iter_mut() {
            c.prob = if c.logit == f32::INFINITY { 1.0 } else { 0.0 };
        }
        return;
    }
    for c in candidates.iter_mut() {
        // exp in f64, rounded once to f32: nearly always the correctly rounded
        // result, so the GPU's sampler (which does the same) gets the same bits.
        c.prob = f64::from((c.logit - max_logit) / temperature).exp() as f32;
    }
}

/// Sum of the candidates' probabilities, accumulated in f64 so that 150k
/// small terms do not lose precision.
pub fn total_prob(candidates: &[Candidate]) -> f64 {
    candidates.iter().map(|c| f64::from(c.prob)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(logits: &[f32]) -> Vec<Candidate> {
        let mut out = Vec::new();
        collect_usable(logits, &mut out);
        out
    }

    #[test]
    fn argmax_prefers_lowest_index_on_ties() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), Some(1));
    }

    #[test]
    fn argmax_skips_nan_and_reports_nothing_usable() {
        assert_eq!(argmax(&[f32::NAN, -1.0, f32::NAN]), Some(1));
        assert_eq!(argmax(&[f32::NAN, f32::NEG_INFINITY]), None);
        assert_eq!(argmax(&[]), None);
    }

    #[test]
    fn collect_usable_drops_nan_and_masked_tokens() {
        let c = candidates(&[f32::NAN, 1.0, f32::NEG_INFINITY, f32::INFINITY]);
        let tokens: Vec<u32> = c.iter().map(|c| c.token).collect();
        assert_eq!(tokens, vec![1, 3]);
    }

    #[test]
    fn softmax_matches_closed_form() {
        let mut c = candidates(&[0.0, 1.0, 2.0]);
        softmax(&mut c, 1.0);
        let total = total_prob(&c) as f32;
        let want = [1.0, 1f32.exp(), 2f32.exp()];
        let want_total: f32 = want.iter().sum();
        for (got, want) in c.iter().zip(want) {
            assert!((got.prob / total - want / want_total).abs() < 1e-6);
        }
    }

    #[test]
    fn softmax_gives_infinite_logits_all_the_mass() {
        let mut c = candidates(&[5.0, f32::INFINITY, 1.0]);
        softmax(&mut c, 0.7);
        let probs: Vec<f32> = c.iter().map(|c| c.prob).collect();
        assert_eq!(probs, vec![0.0, 1.0, 0.0]);
    }
}
