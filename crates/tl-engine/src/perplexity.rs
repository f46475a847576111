//! Perplexity the way llama.cpp's `llama-perplexity` computes it, so the two can be
//! compared number for number: the text is tokenized once and cut into consecutive
//! windows of `window` tokens (a tail shorter than a window is dropped); each window
//! is evaluated from an empty cache, with BOS replacing its first token when the
//! model adds BOS; only the second half of each window is scored, each token given
//! everything before it in the window.

use crate::backend::{Backend, Wanted};
use crate::error::{Error, Result};

/// The outcome of a perplexity run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerplexityReport {
    /// Windows evaluated.
    pub windows: usize,
    /// Tokens scored.
    pub scored_tokens: usize,
    /// Sum of the negative log-likelihoods of the scored tokens (nats).
    pub negative_log_likelihood: f64,
}

impl PerplexityReport {
    /// `exp(mean negative log-likelihood)`.
    pub fn perplexity(&self) -> f64 {
        if self.scored_tokens == 0 {
            return f64::NAN;
        }
        (self.negative_log_likelihood / self.scored_tokens as f64).exp()
    }
}

/// Scores `tokens` in windows of `window` tokens. `bos`, when the model adds BOS,
/// replaces each window's first token. `on_window(done, total, report_so_far)` is
/// called after each window.
pub fn perplexity(
    model: &Backend,
    tokens: &[u32],
    window: usize,
    bos: Option<u32>,
    on_window: &mut dyn FnMut(usize, usize, &PerplexityReport),
) -> Result<PerplexityReport> {
    if window < 2 {
        return Err(Error::InvalidRequest(format!(
            "a window of {window} tokens scores nothing"
        )));
    }
    let windows = tokens.len() / window;
    if windows == 0 {
        return Err(Error::InvalidRequest(format!(
            "the text has {} tokens, fewer than one window of {window}; use a smaller context",
            tokens.len()
        )));
    }
    let mut cache = model.new_cache(window)?;
    let mut report = PerplexityReport {
        windows: 0,
        scored_tokens: 0,
        negative_log_likelihood: 0.0,
    };
    let first_scored = window / 2;
    for (index, chunk) in tokens.chunks_exact(window).enumerate() {
        let mut input = chunk.to_vec();
        if let Some(bos) = bos {
            input[0] = bos;
        }
        cache.truncate(0);
        let logits = model
            .step_one(&input, &mut cache, Wanted::EveryRow)?
            .into_row()?;
        let vocab = logits.len() / window;
        for position in first_scored..window - 1 {
            // The original tokens are the targets, even where BOS replaced one.
            report.negative_log_likelihood += negative_log_likelihood(
                &logits[position * vocab..(position + 1) * vocab],
                chunk[position + 1],
            );
            report.scored_tokens += 1;
        }
        report.windows = index + 1;
        on_window(index + 1, windows, &report);
    }
    Ok(report)
}

/// `-log softmax(logits)[target]`, computed stably in f64.
fn negative_log_likelihood(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let log_sum = max + sum.ln();
    log_sum - logits[target as usize] as f64
}

#[cfg(test)]
mod tests {
    use super::negative_log_likelihood;

    #[test]
    fn uniform_logits_give_log_vocab() {
        let nll = negative_log_likelihood(&[0.0; 4], 2);
        assert!((nll - 4f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn confident_correct_logit_gives_small_loss() {
        let nll = negative_log_likelihood(&[100.0, 0.0, 0.0], 0);
        assert!(nll < 1e-30_f64.max(1e-40) + 1e-10);
    }
}
