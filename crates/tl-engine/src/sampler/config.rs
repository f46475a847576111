//! The sampling settings a request carries, with the defaults llama.cpp users
//! expect and the checks that keep the sampler free of NaN arithmetic.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How to pick the next token from a row of logits.
///
/// Every filter has an "off" value so that one struct describes greedy
/// decoding, plain temperature sampling and the full llama.cpp chain alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerConfig {
    /// Softmax temperature; `<= 0.0` means greedy argmax (ties: lowest index).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p`; 1.0 = off.
    pub top_p: f32,
    /// Keep tokens with `p >= min_p * p_max`; 0.0 = off.
    pub min_p: f32,
    /// llama.cpp repetition penalty (`logit > 0 ? logit / penalty : logit * penalty`),
    /// once per distinct token in the window; 1.0 = off.
    pub repeat_penalty: f32,
    /// How many of the most recent history tokens the three penalties look at; 0 = none.
    pub repeat_last_n: usize,
    /// Subtracted once from the logit of every distinct token in the window; 0.0 = off.
    pub presence_penalty: f32,
    /// Subtracted `count` times from the logit of every token in the window; 0.0 = off.
    pub frequency_penalty: f32,
    /// Seed of the sampler's random stream.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: 42,
        }
    }
}

impl SamplerConfig {
    /// Deterministic argmax decoding with every filter and penalty off.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: 0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: 42,
        }
    }

    /// Rejects settings that would make the arithmetic meaningless (NaN,
    /// negative temperature, probabilities outside their range).
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return invalid(format!(
                "temperature must be a finite number >= 0 (0 = greedy), got {}",
                self.temperature
            ));
        }
        // 0 keeps only the most likely token, as in llama.cpp and OpenAI's API.
        if !(0.0..=1.0).contains(&self.top_p) {
            return invalid(format!(
                "top_p must be in [0, 1] (1 = off), got {}",
                self.top_p
            ));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return invalid(format!(
                "min_p must be in [0, 1] (0 = off), got {}",
                self.min_p
            ));
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return invalid(format!(
                "repeat_penalty must be a finite number > 0 (1 = off), got {}",
                self.repeat_penalty
            ));
        }
        if !self.presence_penalty.is_finite() {
            return invalid(format!(
                "presence_penalty must be finite, got {}",
                self.presence_penalty
            ));
        }
        if !self.frequency_penalty.is_finite() {
            return invalid(format!(
                "frequency_penalty must be finite, got {}",
                self.frequency_penalty
            ));
        }
        Ok(())
    }

    /// Whether decoding is plain argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Whether the next token is the argmax of the raw logits (greedy with no
    /// penalty), so a backend may pick it without handing the logits over.
    pub fn is_plain_argmax(&self) -> bool {
        self.is_greedy()
            && (self.repeat_penalty == 1.0 || self.repeat_last_n == 0)
            && self.presence_penalty == 0.0
            && self.frequency_penalty == 0.0
    }
}

fn invalid(message: String) -> Result<()> {
    Err(Error::InvalidRequest(format!("sampler: {message}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejects(config: SamplerConfig, needle: &str) {
        match config.validate() {
            Err(Error::InvalidRequest(message)) => {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}")
            }
            other => panic!("expected InvalidRequest mentioning {needle}, got {other:?}"),
        }
    }

    #[test]
    fn defaults_and_greedy_are_valid() {
        SamplerConfig::default().validate().unwrap();
        SamplerConfig::greedy().validate().unwrap();
        assert!(SamplerConfig::greedy().is_greedy());
        assert!(!SamplerConfig::default().is_greedy());
    }

    #[test]
    fn validate_rejects_out_of_range_settings() {
        let base = SamplerConfig::default();
        rejects(
            SamplerConfig {
                temperature: f32::NAN,
                ..base.clone()
            },
            "temperature",
        );
        rejects(
            SamplerConfig {
                temperature: -0.5,
                ..base.clone()
            },
            "temperature",
        );
        rejects(
            SamplerConfig {
                top_p: -0.1,
                ..base.clone()
            },
            "top_p",
        );
        rejects(
            SamplerConfig {
                top_p: 1.5,
                ..base.clone()
            },
            "top_p",
        );
        rejects(
            SamplerConfig {
                top_p: f32::NAN,
                ..base.clone()
            },
            "top_p",
        );
        rejects(
            SamplerConfig {
                min_p: -0.1,
                ..base.clone()
            },
            "min_p",
        );
        rejects(
            SamplerConfig {
                min_p: 1.1,
                ..base.clone()
            },
            "min_p",
        );
        rejects(
            SamplerConfig {
                repeat_penalty: 0.0,
                ..base.clone()
            },
            "repeat_penalty",
        );
        rejects(
            SamplerConfig {
                repeat_penalty: -1.0,
                ..base.clone()
            },
            "repeat_penalty",
        );
        rejects(
            SamplerConfig {
                presence_penalty: f32::NAN,
                ..base.clone()
            },
            "presence_penalty",
        );
        rejects(
            SamplerConfig {
                frequency_penalty: f32::INFINITY,
                ..base
            },
            "frequency_penalty",
        );
    }
}
