//! Perplexity the way llama.cpp's `llama-perplexity` computes it, so the two can be
//! compared number for number: the text is tokenized once and cut into consecutive
//! windows of `window` tokens (a tail shorter than a window is dropped); each window
//! is evaluated from an empty cache, with BOS replacing its first token when the
//! model adds BOS; only the second half of each window is scored, each token given
//! everything before it in the window.

use crate::backend::{Backend, Wanted};
use crate::error::{Error, Result};
use crate::memory;

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
    check_window(window)?;
    let windows = tokens.len() / window;
    if windows == 0 {
        return Err(Error::InvalidRequest(format!(
            "the text has {} tokens, fewer than one window of {window}; use a smaller context",
            tokens.len()
        )));
    }
    check_logits_memory(window, model.config().vocab_size)?;
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

/// Errors unless a window of `window` tokens scores at least one: the second
/// half of a window, less its last token (whose target is in the next
/// window), must hold a token, so windows start at 3 tokens. Callers can
/// check before loading a model.
pub fn check_window(window: usize) -> Result<()> {
    if window / 2 >= window.saturating_sub(1) {
        return Err(Error::InvalidRequest(format!(
            "a window of {window} tokens scores nothing: perplexity needs windows of at least 3 tokens"
        )));
    }
    Ok(())
}

/// Errors unless the logits of every row of a window (`window × vocab` f32
/// values, which a pass returns at once) fit in memory.
fn check_logits_memory(window: usize, vocab: usize) -> Result<()> {
    let bytes = (window as u64)
        .checked_mul(vocab as u64)
        .and_then(|n| n.checked_mul(size_of::<f32>() as u64));
    let bytes = bytes.ok_or_else(|| {
        Error::Memory(format!(
            "the logits of a window of {window} tokens over {vocab} are too large"
        ))
    })?;
    memory::check_available(
        &format!("a window of {window} tokens"),
        &[("its logits", bytes)],
    )
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
    use super::{check_window, negative_log_likelihood};

    #[test]
    fn windows_that_score_nothing_are_refused() {
        for window in [0, 1, 2] {
            assert!(check_window(window).is_err(), "window {window}");
        }
        assert!(check_window(3).is_ok());
        assert!(check_window(usize::MAX).is_ok());
    }

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
