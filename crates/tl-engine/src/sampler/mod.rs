//! Token sampling: turns one row of logits into the next token id.
//!
//! The chain follows candle-transformers' `LogitsProcessor` (seeded, argmax at
//! temperature 0) with llama.cpp's penalties and truncation filters, in this
//! order:
//!
//! penalties → (temperature <= 0: argmax) → top-k → softmax with temperature
//! → top-p → min-p → renormalise → seeded draw.
//!
//! Each step lives in its own module. The [`Sampler`] keeps its buffers (the
//! [`Candidate`] set, a penalised copy of the logits) between calls, so
//! steady-state sampling does not allocate; with top-k set, only about 2k
//! candidates are ever materialised, whatever the vocabulary size. The random stream comes from our own xoshiro256** ([`rng`]):
//! a seed gives the same tokens on every run, platform and crate version.

mod candidates;
mod config;
mod draw;
mod penalties;
pub mod rng;
mod truncation;

pub use candidates::{argmax, Candidate};
pub use config::SamplerConfig;
pub use penalties::{apply_penalties, penalize_logit, penalty_window, Penalties};

use crate::{Error, Result};
use rng::Xoshiro256StarStar;

/// Picks tokens according to a [`SamplerConfig`]; owns the random stream of
/// one sequence.
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplerConfig,
    rng: Xoshiro256StarStar,
    /// Reused for every call: the tokens still in the running.
    candidates: Vec<Candidate>,
    /// Reused copy of the logits, written only when a penalty applies.
    penalized_logits: Vec<f32>,
    /// Reused by the penalties to count the tokens of the window.
    penalty_scratch: Vec<u32>,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Self {
        let rng = Xoshiro256StarStar::from_seed(config.seed);
        Self {
            config,
            rng,
            candidates: Vec::new(),
            penalized_logits: Vec::new(),
            penalty_scratch: Vec::new(),
        }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Restarts the random stream as if the sampler had been built with `seed`.
    pub fn reseed(&mut self, seed: u64) {
        self.config.seed = seed;
        self.rng = Xoshiro256StarStar::from_seed(seed);
    }

    /// Picks the next token. `history` is every token so far in the sequence
    /// (prompt + generated); penalties look at its last `repeat_last_n`
    /// entries. Never panics: an invalid config, empty `logits` or logits that
    /// are all NaN / `-inf` give [`Error::InvalidRequest`].
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32> {
        self.config.validate()?;
        check_vocabulary_size(logits)?;
        let Self {
            config,
            rng,
            candidates,
            penalized_logits,
            penalty_scratch,
        } = self;
        let logits = penalize(logits, history, config, penalized_logits, penalty_scratch);
        let token = if config.is_greedy() {
            candidates::argmax(logits)
        } else {
            truncate_and_draw(logits, config, candidates, rng)
        };
        token.ok_or_else(no_usable_logits)
    }
}

/// The largest top-k for which [`Sampler::device_top_k`] offers the GPU path.
pub const MAX_DEVICE_TOP_K: usize = 256;

impl Sampler {
    /// `Some(k)` when this sampler's choice depends only on the `k` highest
    /// logits (after penalties), so a GPU may select candidates and send back a
    /// few pairs instead of the whole row: sampling (not greedy) with top-k in
    /// `1..=MAX_DEVICE_TOP_K`. See [`Sampler::sample_top_candidates`] for what
    /// the device must send when penalties apply.
    pub fn device_top_k(&self) -> Option<usize> {
        let config = &self.config;
        let k = config.top_k;
        (!config.is_greedy() && (1..=MAX_DEVICE_TOP_K).contains(&k)).then_some(k)
    }

    /// The tokens of `history` whose logits the penalties change (empty when
    /// no penalty applies).
    pub fn penalized_tokens<'h>(&self, history: &'h [u32]) -> &'h [u32] {
        if Penalties::from_config(&self.config).is_off() {
            return &[];
        }
        penalty_window(history, self.config.repeat_last_n)
    }

    /// Picks the next token from part of the row: `top` holds at least the
    /// best `k + window.len()` usable (token, logit) pairs of the row before
    /// penalties (in any order; more is fine), and `window_logits[i]` the logit
    /// of `window[i]` (NaN for a token outside the vocabulary), where `k` is
    /// [`Sampler::device_top_k`] and `window` is
    /// [`Sampler::penalized_tokens`]. Gives the token [`Sampler::sample`]
    /// gives from the whole row: penalties only touch window tokens, so the
    /// best k after them are among those pairs and the window.
    pub fn sample_top_candidates(
        &mut self,
        top: &[(u32, f32)],
        window: &[u32],
        window_logits: &[f32],
    ) -> Result<u32> {
        self.config.validate()?;
        if window.len() != window_logits.len() {
            return Err(Error::InvalidRequest(format!(
                "sampler: {} window tokens but {} window logits",
                window.len(),
                window_logits.len()
            )));
        }
        let Self {
            config,
            rng,
            candidates,
            ..
        } = self;
        let penalties = Penalties::from_config(config);
        // The window's tokens in token order, each with its logit and count.
        let mut seen: Vec<(u32, f32)> = window
            .iter()
            .copied()
            .zip(window_logits.iter().copied())
            .collect();
        seen.sort_unstable_by_key(|&(token, _)| token);
        let in_window = |token: u32| seen.binary_search_by_key(&token, |&(t, _)| t).is_ok();
        // Every pair outside the window keeps its logit; the window's tokens
        // are penalised as `sample` penalises them.
        candidates.clear();
        candidates.extend(
            top.iter()
                .filter(|(token, logit)| *logit > f32::NEG_INFINITY && !in_window(*token))
                .map(|&(token, logit)| Candidate::new(token, logit)),
        );
        for run in seen.chunk_by(|a, b| a.0 == b.0) {
            let (token, logit) = run[0];
            let logit = penalize_logit(logit, run.len() as u32, &penalties);
            if logit > f32::NEG_INFINITY {
                candidates.push(Candidate::new(token, logit));
            }
        }
        candidates.sort_unstable_by(candidates::by_logit_descending);
        candidates.truncate(config.top_k.max(1));
        let token = if config.is_greedy() {
            candidates.first().map(|c| c.token)
        } else {
            draw_from(candidates, config, rng)
        };
        token.ok_or_else(no_usable_logits)
    }
}

fn check_vocabulary_size(logits: &[f32]) -> Result<()> {
    if logits.is_empty() {
        return Err(Error::InvalidRequest(
            "sampler: logits are empty (vocabulary of size 0)".into(),
        ));
    }
    if u32::try_from(logits.len()).is_err() {
        return Err(Error::InvalidRequest(format!(
            "sampler: {} logits do not fit u32 token ids",
            logits.len()
        )));
    }
    Ok(())
}

/// The logits with the penalties applied: `logits` itself when no penalty
/// would change anything, otherwise a penalised copy kept in `buffer`.
fn penalize<'a>(
    logits: &'a [f32],
    history: &[u32],
    config: &SamplerConfig,
    buffer: &'a mut Vec<f32>,
    scratch: &mut Vec<u32>,
) -> &'a [f32] {
    let penalties = Penalties::from_config(config);
    let window = penalty_window(history, config.repeat_last_n);
    if penalties.is_off() || window.is_empty() {
        return logits;
    }
    buffer.clear();
    buffer.extend_from_slice(logits);
    apply_penalties(buffer, window, &penalties, scratch);
    buffer
}

/// The stochastic part of the chain; `None` when no token is usable.
fn truncate_and_draw(
    logits: &[f32],
    config: &SamplerConfig,
    candidates: &mut Vec<Candidate>,
    rng: &mut Xoshiro256StarStar,
) -> Option<u32> {
    truncation::collect_top_k(logits, config.top_k, candidates);
    draw_from(candidates, config, rng)
}

/// Softmax, top-p, min-p and the draw over candidates already cut to top-k.
fn draw_from(
    candidates: &mut Vec<Candidate>,
    config: &SamplerConfig,
    rng: &mut Xoshiro256StarStar,
) -> Option<u32> {
    candidates::softmax(candidates, config.temperature);
    truncation::top_p(candidates, config.top_p);
    truncation::min_p(candidates, config.min_p);
    draw::draw_weighted(candidates, rng)
}

fn no_usable_logits() -> Error {
    Error::InvalidRequest("sampler: every logit is NaN or -inf; no token can be sampled".into())
}

#[cfg(test)]
mod tests;
