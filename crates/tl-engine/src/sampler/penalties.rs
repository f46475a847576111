//! Repetition, presence and frequency penalties, with llama.cpp's semantics:
//! they look at the last `repeat_last_n` tokens of the sequence and lower the
//! logits of tokens found there before any filter runs.

use super::config::SamplerConfig;

/// The three penalties of a [`SamplerConfig`], each at its "off" value when unused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Penalties {
    /// Divides positive logits and multiplies negative ones (1.0 = off).
    pub repeat: f32,
    /// Subtracted once per distinct token in the window (0.0 = off).
    pub presence: f32,
    /// Subtracted once per occurrence in the window (0.0 = off).
    pub frequency: f32,
}

impl Penalties {
    pub fn from_config(config: &SamplerConfig) -> Self {
        Self {
            repeat: config.repeat_penalty,
            presence: config.presence_penalty,
            frequency: config.frequency_penalty,
        }
    }

    /// Whether applying the penalties would leave every logit unchanged.
    pub fn is_off(&self) -> bool {
        self.repeat == 1.0 && self.presence == 0.0 && self.frequency == 0.0
    }
}

/// The last `repeat_last_n` tokens of `history`: the only ones penalised.
pub fn penalty_window(history: &[u32], repeat_last_n: usize) -> &[u32] {
    &history[history.len().saturating_sub(repeat_last_n)..]
}

/// The penalised logit of a token seen `count` (>= 1) times in the window.
///
/// The repetition penalty divides positive logits and multiplies negative
/// ones so that it always pushes the token towards "less likely"; it applies
/// once however often the token occurs, as in llama.cpp. The frequency and
/// presence penalties are OpenAI's additive ones.
pub fn penalize_logit(logit: f32, count: u32, penalties: &Penalties) -> f32 {
    let repeated = if logit > 0.0 {
        logit / penalties.repeat
    } else {
        logit * penalties.repeat
    };
    repeated - count as f32 * penalties.frequency - penalties.presence
}

/// Applies the penalties for every distinct token of `window` to `logits`
/// (indexed by token id). Tokens outside the vocabulary are ignored. `scratch` is a reusable buffer (sorted copy of the
/// window) so that counting does not allocate once warmed up.
pub fn apply_penalties(
    logits: &mut [f32],
    window: &[u32],
    penalties: &Penalties,
    scratch: &mut Vec<u32>,
) {
    if penalties.is_off() || window.is_empty() {
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(window);
    scratch.sort_unstable();
    for run in scratch.chunk_by(|a, b| a == b) {
        let token = run[0] as usize;
        if let Some(logit) = logits.get_mut(token) {
            *logit = penalize_logit(*logit, run.len() as u32, penalties);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFF: Penalties = Penalties {
        repeat: 1.0,
        presence: 0.0,
        frequency: 0.0,
    };

    fn penalized(logits: &[f32], window: &[u32], penalties: Penalties) -> Vec<f32> {
        let mut logits = logits.to_vec();
        apply_penalties(&mut logits, window, &penalties, &mut Vec::new());
        logits
    }

    #[test]
    fn repeat_penalty_divides_positive_and_multiplies_negative_logits() {
        let p = Penalties { repeat: 2.0, ..OFF };
        assert_eq!(penalize_logit(3.0, 1, &p), 1.5);
        assert_eq!(penalize_logit(-3.0, 1, &p), -6.0);
        assert_eq!(penalize_logit(0.0, 1, &p), 0.0);
    }

    #[test]
    fn repeat_penalty_applies_once_per_distinct_token() {
        let p = Penalties { repeat: 2.0, ..OFF };
        let got = penalized(&[4.0, -1.0, 8.0, 2.0], &[0, 0, 0, 1], p);
        assert_eq!(got, vec![2.0, -2.0, 8.0, 2.0]);
    }

    #[test]
    fn presence_penalty_subtracts_once_per_distinct_token() {
        let p = Penalties {
            presence: 0.5,
            ..OFF
        };
        let got = penalized(&[1.0, 1.0, 1.0], &[2, 2, 2, 0], p);
        assert_eq!(got, vec![0.5, 1.0, 0.5]);
    }

    #[test]
    fn frequency_penalty_subtracts_per_occurrence() {
        let p = Penalties {
            frequency: 0.25,
            ..OFF
        };
        let got = penalized(&[1.0, 1.0, 1.0], &[2, 2, 2, 0], p);
        assert_eq!(got, vec![0.75, 1.0, 0.25]);
    }

    #[test]
    fn penalties_combine_like_llama_cpp() {
        let p = Penalties {
            repeat: 2.0,
            presence: 0.5,
            frequency: 0.25,
        };
        // 4 / 2 - 2 * 0.25 - 0.5
        assert_eq!(penalize_logit(4.0, 2, &p), 1.0);
    }

    #[test]
    fn out_of_vocabulary_history_is_ignored() {
        let p = Penalties {
            presence: 1.0,
            ..OFF
        };
        assert_eq!(penalized(&[1.0, 1.0], &[1, 7, u32::MAX], p), vec![1.0, 0.0]);
    }

    #[test]
    fn window_is_the_tail_of_history() {
        assert_eq!(penalty_window(&[1, 2, 3, 4], 2), &[3, 4]);
        assert_eq!(penalty_window(&[1, 2], 8), &[1, 2]);
        assert!(penalty_window(&[1, 2], 0).is_empty());
    }
}
