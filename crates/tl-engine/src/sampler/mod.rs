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
//! candidates are ever materialised, whatever the vocabulary size. The random
//! stream comes from our own xoshiro256** ([`rng`]): a seed gives the same
//! tokens on every run, platform and crate version.
//!
//! A [`Constraint`] (a grammar or JSON schema) masks the logits after the
//! penalties and before the rest of the chain, and moves on with each pick;
//! a constrained sampler always takes the whole row to the host, since the
//! mask is computed there.
//!
//! A GPU runs the same chain itself (`tl_cuda::ops::sample`, given
//! [`Sampler::device_sampling`]), following this code operation for
//! operation, so both pick the same token from the same logits.

mod candidates;
mod config;
mod device;
mod draw;
mod logprobs;
mod penalties;
pub mod rng;
mod truncation;

pub use candidates::{argmax, Candidate};
pub use config::SamplerConfig;
pub use device::{SamplingParams, MAX_DEVICE_TOP_K};
pub use logprobs::{step_logprobs, StepLogprobs, TokenLogprob, MAX_TOP_LOGPROBS};
pub use penalties::{apply_penalties, penalize_logit, penalty_window, Penalties};

use crate::constraint::Constraint;
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
    /// What the output must follow, if anything.
    constraint: Option<Constraint>,
    /// How many alternatives each pick reports with its log-probability,
    /// when they are asked for.
    logprobs: Option<usize>,
    /// The last pick's log-probabilities (when asked for).
    last_logprobs: Option<StepLogprobs>,
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
            constraint: None,
            logprobs: None,
            last_logprobs: None,
        }
    }

    /// This sampler, reporting each pick's log-probability and those of the
    /// `top` most likely tokens ([`Sampler::take_logprobs`]); `None` reports
    /// nothing. Reporting needs the step's whole row on the host.
    pub fn with_logprobs(mut self, top: Option<usize>) -> Self {
        self.logprobs = top.map(|top| top.min(MAX_TOP_LOGPROBS));
        self
    }

    /// The log-probabilities of the last pick, when they were asked for.
    pub fn take_logprobs(&mut self) -> Option<StepLogprobs> {
        self.last_logprobs.take()
    }

    /// This sampler, picking only tokens `constraint` allows.
    pub fn with_constraint(mut self, constraint: Option<Constraint>) -> Self {
        self.constraint = constraint;
        self
    }

    /// Whether the output is complete under the sampler's constraint:
    /// generation should stop (never true without a constraint).
    pub fn constraint_complete(&self) -> bool {
        self.constraint.as_ref().is_some_and(|c| c.is_complete())
    }

    /// Computes the constraint's next mask ahead of [`Sampler::sample`] (see
    /// [`Constraint::prepare_mask`]); nothing without a constraint.
    pub fn prepare_constraint_mask(&mut self) {
        if let Some(constraint) = self.constraint.as_mut() {
            constraint.prepare_mask();
        }
    }

    /// Whether the sampler follows a constraint.
    pub fn is_constrained(&self) -> bool {
        self.constraint.is_some()
    }

    /// Whether the next pick is the best logit as is, which a backend can
    /// take without the row (no penalty, no constraint, no log-probabilities).
    pub fn is_plain_argmax(&self) -> bool {
        self.config.is_plain_argmax() && self.needs_no_row()
    }

    /// Whether nothing but the pick itself is needed from the step: no
    /// constraint's mask and no log-probabilities, which the host computes.
    fn needs_no_row(&self) -> bool {
        self.constraint.is_none() && self.logprobs.is_none()
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
    /// are all NaN / `-inf` give [`Error::InvalidRequest`]; a constraint that
    /// fails or allows nothing gives [`Error::Grammar`].
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32> {
        self.config.validate()?;
        check_vocabulary_size(logits)?;
        let Self {
            config,
            rng,
            candidates,
            penalized_logits,
            penalty_scratch,
            constraint,
            logprobs,
            last_logprobs,
        } = self;
        let raw_logits = logits;
        let logits = match constraint.as_mut() {
            Some(constraint) => {
                let masked =
                    penalized_copy(logits, history, config, penalized_logits, penalty_scratch);
                constraint.mask_logits(masked)?;
                masked
            }
            None => penalize(logits, history, config, penalized_logits, penalty_scratch),
        };
        let token = if config.is_greedy() {
            candidates::argmax(logits)
        } else {
            truncate_and_draw(logits, config, candidates, rng)
        };
        let token = token.ok_or_else(no_usable_logits)?;
        if let Some(constraint) = constraint.as_mut() {
            constraint.accept(token)?;
        }
        *last_logprobs = logprobs.map(|top| step_logprobs(raw_logits, token, top));
        Ok(token)
    }
}

impl Sampler {
    /// The settings a GPU needs to make this sampler's next pick itself
    /// (`tl_cuda::ops::sample`), when it can: valid settings, no constraint
    /// (its mask is the host's) nor log-probabilities, and either
    /// greedy (the best token after the penalties) or a draw with top-k in
    /// `1..=MAX_DEVICE_TOP_K`. Its `draw` is the one [`Sampler::sample`] would
    /// use next; once the device has picked, call
    /// [`Sampler::accept_device_token`]. The device also needs the tokens of
    /// [`Sampler::penalized_tokens`].
    pub fn device_sampling(&self) -> Option<SamplingParams> {
        if !self.needs_no_row() {
            return None;
        }
        let config = &self.config;
        config.validate().ok()?;
        let greedy = config.is_greedy();
        let top_k = if greedy { 1 } else { config.top_k };
        if !(1..=MAX_DEVICE_TOP_K).contains(&top_k) {
            return None;
        }
        Some(SamplingParams {
            top_k,
            greedy,
            temperature: config.temperature,
            top_p: config.top_p,
            min_p: config.min_p,
            repeat_penalty: config.repeat_penalty,
            presence_penalty: config.presence_penalty,
            frequency_penalty: config.frequency_penalty,
            // A peek: the stream moves on only when the device's pick is used.
            draw: if greedy {
                0.0
            } else {
                self.rng.clone().next_f64()
            },
        })
    }

    /// Moves the random stream past the draw [`Sampler::device_sampling`]
    /// handed out, as [`Sampler::sample`] would have: once per token the
    /// device picked.
    pub fn accept_device_token(&mut self) {
        if !self.config.is_greedy() {
            self.rng.next_f64();
        }
    }

    /// The tokens of `history` whose logits the penalties change (empty when
    /// no penalty applies).
    pub fn penalized_tokens<'h>(&self, history: &'h [u32]) -> &'h [u32] {
        if Penalties::from_config(&self.config).is_off() {
            return &[];
        }
        penalty_window(history, self.config.repeat_last_n)
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

/// A copy of the logits in `buffer`, penalised when a penalty applies: the
/// row a constraint may then mask.
fn penalized_copy<'a>(
    logits: &[f32],
    history: &[u32],
    config: &SamplerConfig,
    buffer: &'a mut Vec<f32>,
    scratch: &mut Vec<u32>,
) -> &'a mut [f32] {
    buffer.clear();
    buffer.extend_from_slice(logits);
    let penalties = Penalties::from_config(config);
    let window = penalty_window(history, config.repeat_last_n);
    if !penalties.is_off() && !window.is_empty() {
        apply_penalties(buffer, window, &penalties, scratch);
    }
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
