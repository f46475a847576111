//! The generation loop: prefill the prompt, then sample, stream and feed back one
//! token at a time until an end-of-generation token, a stop string, the end of
//! the sampler's grammar, the token limit, a full context, or the caller says
//! stop.
//!
//! The prefill's logits give the first token (the last prompt token is never run
//! twice), and text is streamed through an incremental detokenizer so no broken
//! UTF-8 ever reaches the caller.

use std::time::{Duration, Instant};

use tl_tokenizer::{StreamDecoder, Tokenizer};

use crate::backend::{Backend, Picked, Wanted};
use crate::error::{Error, Result};
use crate::sampler::{Sampler, SamplingParams};
use crate::session::Session;
use crate::stop_strings::StopStringMatcher;

/// Limits and stop conditions of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationConfig {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Strings that end the output (not included in it).
    pub stop_strings: Vec<String>,
    /// Prompt tokens per forward pass during prefill (0: the whole prompt at once).
    pub prefill_chunk_tokens: usize,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig {
            max_tokens: 512,
            stop_strings: Vec::new(),
            prefill_chunk_tokens: 0,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// `max_tokens` were generated.
    MaxTokens,
    /// A stop string appeared.
    StopString,
    /// The context has no room for another token.
    ContextFull,
    /// The caller asked to stop.
    Cancelled,
    /// The output is complete under the request's grammar or JSON schema:
    /// nothing but the end may follow.
    GrammarComplete,
}

/// Timings and counts of one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerationStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually run (the rest were reused from the cache).
    pub prefilled_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time to run the prompt and pick the first token.
    pub prefill_time: Duration,
    /// Time spent generating after the first token.
    pub decode_time: Duration,
}

impl GenerationStats {
    /// Prompt tokens per second during prefill.
    pub fn prefill_tokens_per_second(&self) -> f64 {
        per_second(self.prefilled_tokens, self.prefill_time)
    }

    /// Generated tokens per second after the first.
    pub fn decode_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens.saturating_sub(1), self.decode_time)
    }
}

fn per_second(count: usize, time: Duration) -> f64 {
    if time.is_zero() {
        0.0
    } else {
        count as f64 / time.as_secs_f64()
    }
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated text (stop string excluded).
    pub text: String,
    /// The generated token ids (the end-of-generation token excluded).
    pub tokens: Vec<u32>,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Counts and timings.
    pub stats: GenerationStats,
}

/// Everything generation reads, borrowed from the caller.
pub struct Generator<'a> {
    /// The model.
    pub model: &'a Backend,
    /// Its tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// Limits and stops.
    pub config: &'a GenerationConfig,
}

impl Generator<'_> {
    /// Generates a continuation of `prompt` in `session`, calling `on_text` with
    /// each piece of text as it becomes final; `on_text` returns `false` to stop.
    pub fn generate(
        &self,
        session: &mut Session,
        prompt: &[u32],
        sampler: &mut Sampler,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation> {
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            prefilled_tokens: prompt.len() - session.reusable_prefix(prompt),
            ..Default::default()
        };
        let started = Instant::now();
        let mut keep_going = true;
        let mut output = TextOutput::new(self.config);
        let mut emit = |text: &str, keep_going: &mut bool| {
            if !text.is_empty() {
                *keep_going &= on_text(text);
            }
        };
        let Some(logits) = session.prefill(
            self.model,
            prompt,
            self.config.prefill_chunk_tokens,
            &mut || keep_going,
        )?
        else {
            return Ok(output.into_generation(StopReason::Cancelled, stats));
        };
        let mut next = sampler.sample(&logits, session.tokens())?;
        stats.prefill_time = started.elapsed();
        let decode_started = Instant::now();
        loop {
            let accepted = output.accept(self.tokenizer, next);
            emit(&accepted.text, &mut keep_going);
            let reason = match accepted.stop {
                Some(StopReason::MaxTokens) | None if !keep_going => Some(StopReason::Cancelled),
                // Complete on its last allowed token: the answer is whole.
                Some(StopReason::MaxTokens) | None if sampler.constraint_complete() => {
                    Some(StopReason::GrammarComplete)
                }
                None if session.tokens().len() >= session.capacity() => {
                    Some(StopReason::ContextFull)
                }
                stop => stop,
            };
            if let Some(reason) = reason {
                stats.generated_tokens = output.generated_tokens(reason);
                stats.decode_time = decode_started.elapsed();
                let rest = output.finish(reason);
                emit(&rest, &mut keep_going);
                return Ok(output.into_generation(reason, stats));
            }
            next = step_sampled(session, self.model, sampler, next)?;
        }
    }
}

/// Feeds `token` to `session` and samples the token that follows it, asking the
/// device for as little as the sampler needs: plain argmax is taken on the
/// device, and so is every pick top-k bounds (the whole sampler runs there);
/// only a token id comes back then. Anything else gets the whole row.
pub fn step_sampled(
    session: &mut Session,
    model: &Backend,
    sampler: &mut Sampler,
    token: u32,
) -> Result<u32> {
    let mut picked = step_batch_sampled(&mut [session], model, &mut [sampler], &[token])?;
    picked
        .pop()
        .ok_or_else(|| Error::InvalidRequest("a step gave nothing back".into()))?
}

/// The token of a step's [`Picked`]: the device's pick (moving the sampler's
/// random stream past the draw it used) or the host sampler's from the row.
pub fn finish_pick(sampler: &mut Sampler, picked: Picked, history: &[u32]) -> Result<u32> {
    match picked {
        Picked::Token(token) => {
            sampler.accept_device_token();
            Ok(token)
        }
        Picked::Row(logits) => sampler.sample(&logits, history),
    }
}

/// [`step_sampled`] for several sessions in one batched pass: `tokens[i]` is
/// fed to `sessions[i]` and the token after it sampled with `samplers[i]`,
/// each exactly as a lone [`step_sampled`] would. The outer error is the
/// pass's (no session changed); the inner ones are each sampler's.
pub fn step_batch_sampled(
    sessions: &mut [&mut Session],
    model: &Backend,
    samplers: &mut [&mut Sampler],
    tokens: &[u32],
) -> Result<Vec<Result<u32>>> {
    // Only a sampler the device runs needs its penalties' window.
    let windows: Vec<Vec<u32>> = sessions
        .iter()
        .zip(samplers.iter())
        .zip(tokens)
        .map(|((session, sampler), &token)| match wanted_kind(sampler) {
            WantedKind::Sample(_) => penalty_window(session, sampler, token),
            _ => Vec::new(),
        })
        .collect();
    let wants: Vec<Wanted<'_>> = samplers
        .iter()
        .zip(&windows)
        .map(|(sampler, window)| match wanted_kind(sampler) {
            WantedKind::Argmax => Wanted::Argmax,
            WantedKind::Sample(params) => Wanted::Sample { params, window },
            WantedKind::Logits => Wanted::Logits,
        })
        .collect();
    let token_lists: Vec<&[u32]> = tokens.iter().map(std::slice::from_ref).collect();
    let picked = if model.is_cpu() {
        Session::advance(model, sessions, &token_lists, &wants)?
    } else {
        with_masks_ahead(samplers, || {
            Session::advance(model, sessions, &token_lists, &wants)
        })?
    };
    Ok(picked
        .into_iter()
        .zip(sessions.iter())
        .zip(samplers.iter_mut())
        .map(|((picked, session), sampler)| finish_pick(sampler, picked, session.tokens()))
        .collect())
}

/// Runs `step` while another thread computes the constrained samplers'
/// next masks, so that on a GPU the mask costs no time of its own: the
/// host thread would only wait for the device meanwhile. (On the CPU the
/// step takes every core, so there is nothing to overlap.)
fn with_masks_ahead<T>(samplers: &mut [&mut Sampler], step: impl FnOnce() -> T) -> T {
    let mut constrained: Vec<&mut Sampler> = samplers
        .iter_mut()
        .map(|sampler| &mut **sampler)
        .filter(|sampler| sampler.is_constrained())
        .collect();
    if constrained.is_empty() {
        return step();
    }
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for sampler in constrained.iter_mut() {
                sampler.prepare_constraint_mask();
            }
        });
        step()
    })
}

/// What a step asks the backend for on `sampler`'s behalf.
enum WantedKind {
    Argmax,
    Sample(SamplingParams),
    Logits,
}

fn wanted_kind(sampler: &Sampler) -> WantedKind {
    if sampler.is_plain_argmax() {
        WantedKind::Argmax
    } else if let Some(params) = sampler.device_sampling() {
        WantedKind::Sample(params)
    } else {
        WantedKind::Logits
    }
}

/// The tokens `sampler`'s penalties will look at once `token` is appended to
/// `session` (only the recent tail of the history matters).
fn penalty_window(session: &Session, sampler: &Sampler, token: u32) -> Vec<u32> {
    let tokens = session.tokens();
    let tail = tokens.len().saturating_sub(sampler.config().repeat_last_n);
    let mut recent = tokens[tail..].to_vec();
    recent.push(token);
    sampler.penalized_tokens(&recent).to_vec()
}

/// The text side of one generation: turns sampled tokens into final text
/// (valid UTF-8, stop strings held back and cut) and decides when to stop.
/// It owns no model state, so a scheduler can keep one per sequence.
pub struct TextOutput {
    decoder: StreamDecoder,
    stops: StopStringMatcher,
    max_tokens: usize,
    tokens: Vec<u32>,
    text: String,
}

/// What one accepted token gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// Text that became final (may be empty).
    pub text: String,
    /// Why generation ends here, if it does.
    pub stop: Option<StopReason>,
}

impl TextOutput {
    pub fn new(config: &GenerationConfig) -> Self {
        TextOutput {
            decoder: StreamDecoder::new(true),
            stops: StopStringMatcher::new(&config.stop_strings),
            max_tokens: config.max_tokens,
            tokens: Vec::new(),
            text: String::new(),
        }
    }

    /// Takes a sampled token.
    pub fn accept(&mut self, tokenizer: &Tokenizer, token: u32) -> Accepted {
        if self.max_tokens == 0 {
            // Asked for nothing: the first token is not taken.
            return Accepted {
                text: String::new(),
                stop: Some(StopReason::MaxTokens),
            };
        }
        if tokenizer.is_end_of_generation(token) {
            return Accepted {
                text: String::new(),
                stop: Some(StopReason::EndOfGeneration),
            };
        }
        self.tokens.push(token);
        let piece = self.decoder.push(tokenizer, token);
        let scan = self.stops.push(&piece);
        self.text.push_str(&scan.emit);
        let stop = if scan.stopped {
            Some(StopReason::StopString)
        } else if self.tokens.len() >= self.max_tokens {
            Some(StopReason::MaxTokens)
        } else {
            None
        };
        Accepted {
            text: scan.emit,
            stop,
        }
    }

    /// The generated tokens so far (end-of-generation tokens excluded).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Tokens generated when stopping for `reason` (the end-of-generation
    /// token counts: the model produced it).
    pub fn generated_tokens(&self, reason: StopReason) -> usize {
        self.tokens.len() + usize::from(reason == StopReason::EndOfGeneration)
    }

    /// Ends the stream: the text still held back (a partial UTF-8 character or a
    /// prefix of a stop string), unless it stopped on a stop string.
    pub fn finish(&mut self, reason: StopReason) -> String {
        if reason == StopReason::StopString {
            return String::new();
        }
        let rest = std::mem::replace(&mut self.decoder, StreamDecoder::new(true)).finish();
        let scan = self.stops.push(&rest);
        let mut tail = scan.emit;
        if !scan.stopped {
            tail.push_str(&self.stops.finish());
        }
        self.text.push_str(&tail);
        tail
    }

    fn into_generation(self, stop_reason: StopReason, stats: GenerationStats) -> Generation {
        Generation {
            text: self.text,
            tokens: self.tokens,
            stop_reason,
            stats,
        }
    }
}
