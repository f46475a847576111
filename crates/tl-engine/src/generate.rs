//! The generation loop: prefill the prompt, then sample, stream and feed back one
//! token at a time until an end-of-generation token, a stop string, the token
//! limit, a full context, or the caller says stop.
//!
//! The prefill's logits give the first token (the last prompt token is never run
//! twice), and text is streamed through an incremental detokenizer so no broken
//! UTF-8 ever reaches the caller.

use std::time::{Duration, Instant};

use tl_tokenizer::{StreamDecoder, Tokenizer};

use crate::backend::{Backend, TopLogits};
use crate::error::Result;
use crate::sampler::Sampler;
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
        let mut run = Run::new(self, on_text);
        let Some(mut logits) = session.prefill(
            self.model,
            prompt,
            self.config.prefill_chunk_tokens,
            &mut || run.keep_going,
        )?
        else {
            return Ok(run.finish(StopReason::Cancelled, stats));
        };
        let mut decode_started = None;
        // Plain argmax can be taken on the device, so only a token id comes
        // back; a sampler that needs only the top k gets k pairs.
        let device_argmax = sampler.config().is_plain_argmax();
        let device_top_k = sampler.device_top_k();
        let mut picked = None;
        loop {
            let next = match picked.take() {
                Some(token) => token,
                None => sampler.sample(&logits, session.tokens())?,
            };
            if decode_started.is_none() {
                stats.prefill_time = started.elapsed();
                decode_started = Some(Instant::now());
            }
            if let Some(reason) = run.accept(next) {
                stats.generated_tokens =
                    run.tokens.len() + usize::from(reason == StopReason::EndOfGeneration);
                stats.decode_time = decode_started.map_or(Duration::ZERO, |t| t.elapsed());
                return Ok(run.finish(reason, stats));
            }
            if session.tokens().len() >= session.capacity() {
                stats.generated_tokens = run.tokens.len();
                stats.decode_time = decode_started.map_or(Duration::ZERO, |t| t.elapsed());
                return Ok(run.finish(StopReason::ContextFull, stats));
            }
            if device_argmax {
                picked = Some(session.step_greedy(self.model, next)?);
            } else if let Some(k) = device_top_k {
                // The tokens the penalties will look at once `next` is in
                // (only the recent tail of the history matters).
                let tokens = session.tokens();
                let tail = tokens.len().saturating_sub(sampler.config().repeat_last_n);
                let mut recent = tokens[tail..].to_vec();
                recent.push(next);
                let window = sampler.penalized_tokens(&recent).to_vec();
                match session.step_top_k(self.model, next, k, &window)? {
                    TopLogits::Pairs { top, window_logits } => {
                        picked =
                            Some(sampler.sample_top_candidates(&top, &window, &window_logits)?)
                    }
                    TopLogits::Row(row) => logits = row,
                }
            } else {
                logits = session.step(self.model, next)?;
            }
        }
    }
}

/// The state of one generation between tokens.
struct Run<'g, 'f> {
    generator: &'g Generator<'g>,
    on_text: &'f mut dyn FnMut(&str) -> bool,
    decoder: StreamDecoder,
    stops: StopStringMatcher,
    tokens: Vec<u32>,
    text: String,
    keep_going: bool,
}

impl<'g, 'f> Run<'g, 'f> {
    fn new(generator: &'g Generator<'g>, on_text: &'f mut dyn FnMut(&str) -> bool) -> Self {
        Run {
            generator,
            on_text,
            decoder: StreamDecoder::new(true),
            stops: StopStringMatcher::new(&generator.config.stop_strings),
            tokens: Vec::new(),
            text: String::new(),
            keep_going: true,
        }
    }

    /// Takes a sampled token; returns why to stop, if generation is over.
    fn accept(&mut self, token: u32) -> Option<StopReason> {
        if self.generator.tokenizer.is_end_of_generation(token) {
            return Some(StopReason::EndOfGeneration);
        }
        self.tokens.push(token);
        let piece = self.decoder.push(self.generator.tokenizer, token);
        let scan = self.stops.push(&piece);
        self.emit(&scan.emit);
        if scan.stopped {
            return Some(StopReason::StopString);
        }
        if !self.keep_going {
            return Some(StopReason::Cancelled);
        }
        if self.tokens.len() >= self.generator.config.max_tokens {
            return Some(StopReason::MaxTokens);
        }
        None
    }

    fn emit(&mut self, text: &str) {
        if !text.is_empty() {
            self.text.push_str(text);
            self.keep_going &= (self.on_text)(text);
        }
    }

    fn finish(mut self, stop_reason: StopReason, stats: GenerationStats) -> Generation {
        if stop_reason != StopReason::StopString {
            let rest = std::mem::replace(&mut self.decoder, StreamDecoder::new(true)).finish();
            let scan = self.stops.push(&rest);
            self.emit(&scan.emit);
            if !scan.stopped {
                let held = self.stops.finish();
                self.emit(&held);
            }
        }
        Generation {
            text: self.text,
            tokens: self.tokens,
            stop_reason,
            stats,
        }
    }
}
