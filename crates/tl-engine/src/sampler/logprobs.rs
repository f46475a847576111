//! Log-probabilities of a step's tokens, as OpenAI's and Ollama's `logprobs`
//! report them: `log_softmax` of the step's logits as the model gave them,
//! before any penalty, grammar mask or temperature. The sum runs over the
//! whole vocabulary in token order in f64, so the same logits (the CPU's and
//! the GPU's are the same bits) give the same numbers.

/// The most alternatives a request may ask for (OpenAI's bound).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// One token and its log-probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f64,
}

/// The picked token's log-probability and the step's most likely tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLogprobs {
    pub picked: TokenLogprob,
    /// The `top` most likely tokens, most likely first (the lower id first
    /// among equals).
    pub top: Vec<TokenLogprob>,
}

/// `log_softmax` of `logits` at `picked` and at the `top` most likely tokens.
/// Tokens whose logit is NaN or `-inf` have log-probability `-inf` and are
/// never among the top.
pub fn step_logprobs(logits: &[f32], picked: u32, top: usize) -> StepLogprobs {
    let log_norm = log_normaliser(logits);
    let logprob = |token: u32| {
        let logit = logits
            .get(token as usize)
            .copied()
            .unwrap_or(f32::NEG_INFINITY);
        if logit > f32::NEG_INFINITY {
            f64::from(logit) - log_norm
        } else {
            f64::NEG_INFINITY
        }
    };
    StepLogprobs {
        picked: TokenLogprob {
            token: picked,
            logprob: logprob(picked),
        },
        top: most_likely(logits, top.min(MAX_TOP_LOGPROBS))
            .into_iter()
            .map(|token| TokenLogprob {
                token,
                logprob: logprob(token),
            })
            .collect(),
    }
}

/// `max + ln Σ exp(logit − max)` over the usable logits, in f64.
fn log_normaliser(logits: &[f32]) -> f64 {
    let usable = || logits.iter().filter(|l| **l > f32::NEG_INFINITY);
    let max = usable().fold(f64::NEG_INFINITY, |m, &l| m.max(f64::from(l)));
    if max == f64::NEG_INFINITY {
        return f64::INFINITY;
    }
    let sum: f64 = usable().map(|&l| (f64::from(l) - max).exp()).sum();
    max + sum.ln()
}

/// The `count` tokens of highest usable logit, highest first, the lower id
/// first among equals (one pass, keeping a sorted list of `count`).
fn most_likely(logits: &[f32], count: usize) -> Vec<u32> {
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(count + 1);
    if count == 0 {
        return Vec::new();
    }
    let usable = logits
        .iter()
        .zip(0u32..)
        .filter(|(l, _)| **l > f32::NEG_INFINITY);
    for (&logit, token) in usable {
        if best.len() == count && logit <= best[count - 1].0 {
            continue;
        }
        let at = best.partition_point(|&(l, _)| l >= logit);
        best.insert(at, (logit, token));
        best.truncate(count);
    }
    best.into_iter().map(|(_, token)| token).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_log_softmax_of_the_raw_logits() {
        let logits = [1.0f32, 3.0, 2.0, f32::NEG_INFINITY, 3.0];
        let step = step_logprobs(&logits, 2, 3);
        let total: f64 = [1.0f64, 3.0, 2.0, 3.0].iter().map(|l| l.exp()).sum();
        assert!((step.picked.logprob - (2.0 - total.ln())).abs() < 1e-12);
        // Ties keep the lower id first.
        let tokens: Vec<u32> = step.top.iter().map(|t| t.token).collect();
        assert_eq!(tokens, [1, 4, 2]);
        let probability: f64 = logits
            .iter()
            .zip(0u32..)
            .map(|(_, t)| step_logprobs(&logits, t, 0).picked.logprob.exp())
            .sum();
        assert!((probability - 1.0).abs() < 1e-12);
        assert_eq!(
            step_logprobs(&logits, 3, 0).picked.logprob,
            f64::NEG_INFINITY
        );
    }

    #[test]
    fn top_is_bounded_and_skips_unusable_logits() {
        let logits: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let step = step_logprobs(&logits, 0, 50);
        assert_eq!(step.top.len(), MAX_TOP_LOGPROBS);
        assert_eq!(step.top[0].token, 99);
        let masked = [f32::NAN, f32::NEG_INFINITY, 0.5];
        let step = step_logprobs(&masked, 2, 5);
        assert_eq!(step.top.len(), 1);
        assert_eq!(step.picked.logprob, 0.0);
    }
}
