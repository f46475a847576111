//! A sequence being generated: its KV cache plus the tokens the cache holds, so a
//! new prompt that extends the old one (the next turn of a chat) only runs the new
//! tokens through the model.

use crate::backend::{Backend, Picked, SequenceCache, Wanted};
use crate::error::{Error, Result};
use crate::model::Logits;
use crate::sampler::SamplingParams;

/// One sequence's state.
pub struct Session {
    cache: SequenceCache,
    tokens: Vec<u32>,
}

impl Session {
    /// An empty session with room for `capacity` tokens.
    pub fn new(model: &Backend, capacity: usize) -> Result<Self> {
        Ok(Session {
            cache: model.new_cache(capacity)?,
            tokens: Vec::with_capacity(capacity),
        })
    }

    /// The tokens whose keys and values are cached, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Tokens the session can hold.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// Bytes held by the KV cache.
    pub fn cache_bytes(&self) -> usize {
        self.cache.size_bytes()
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// One decode step for several sessions at once (see
    /// [`Backend::forward_batch`]): `tokens[i]` is appended to `sessions[i]`,
    /// which gets what `wants[i]` asks for. On failure no session changes.
    pub fn step_batch(
        model: &Backend,
        sessions: &mut [&mut Session],
        tokens: &[u32],
        wants: &[Wanted<'_>],
    ) -> Result<Vec<Picked>> {
        let lengths: Vec<usize> = sessions.iter().map(|s| s.tokens.len()).collect();
        let mut caches: Vec<&mut SequenceCache> =
            sessions.iter_mut().map(|s| &mut s.cache).collect();
        match model.forward_batch(tokens, &mut caches, wants) {
            Ok(picked) => {
                for (session, &token) in sessions.iter_mut().zip(tokens) {
                    session.tokens.push(token);
                }
                Ok(picked)
            }
            Err(e) => {
                for (session, len) in sessions.iter_mut().zip(lengths) {
                    session.truncate(len);
                }
                Err(e)
            }
        }
    }

    fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
        self.cache.truncate(len);
    }

    /// Makes the session hold exactly `prompt`, reusing the longest prefix already
    /// cached, and returns the `[vocab]` logits that follow the prompt's last token.
    /// The new tokens are run in chunks of `chunk_tokens` (0: all at once) and
    /// `keep_going` is asked between chunks, so a long prompt can be interrupted.
    pub fn prefill(
        &mut self,
        model: &Backend,
        prompt: &[u32],
        chunk_tokens: usize,
        keep_going: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Vec<f32>>> {
        let reused = self.begin(prompt)?;
        let chunk = if chunk_tokens == 0 {
            prompt.len()
        } else {
            chunk_tokens
        };
        let mut logits = None;
        for piece in prompt[reused..].chunks(chunk) {
            if !keep_going() {
                return Ok(None);
            }
            logits = Some(self.feed(model, piece)?);
        }
        Ok(logits)
    }

    /// Starts a prefill of `prompt` the caller runs itself (with [`Self::feed`],
    /// e.g. one chunk per scheduler step): checks the prompt fits, keeps the
    /// longest reusable cached prefix and returns its length, the index of the
    /// first prompt token still to run.
    pub fn begin(&mut self, prompt: &[u32]) -> Result<usize> {
        if prompt.is_empty() {
            return Err(Error::InvalidRequest("the prompt is empty".into()));
        }
        if prompt.len() > self.capacity() {
            return Err(Error::InvalidRequest(format!(
                "the prompt has {} tokens, more than the context of {}",
                prompt.len(),
                self.capacity()
            )));
        }
        let reused = self.reusable_prefix(prompt);
        self.truncate(reused);
        Ok(reused)
    }

    /// How many leading tokens of `prompt` a prefill would take from the cache
    /// instead of running them. The last prompt token always runs: its logits are
    /// the answer.
    pub fn reusable_prefix(&self, prompt: &[u32]) -> usize {
        common_prefix(&self.tokens, prompt).min(prompt.len().saturating_sub(1))
    }

    /// Appends one token and returns the logits that follow it.
    pub fn step(&mut self, model: &Backend, token: u32) -> Result<Vec<f32>> {
        self.feed(model, &[token])
    }

    /// Appends one token and returns the argmax of the logits that follow it
    /// (on a GPU only the token id crosses to the host).
    pub fn step_greedy(&mut self, model: &Backend, token: u32) -> Result<u32> {
        let start = self.tokens.len();
        match model.forward_greedy(token, start, &mut self.cache) {
            Ok(next) => {
                self.tokens.push(token);
                Ok(next)
            }
            Err(e) => {
                self.truncate(start);
                Err(e)
            }
        }
    }

    /// Appends one token and picks the next with the sampler settings
    /// `params` (on a GPU the token comes back, else the row; see
    /// [`Backend::forward_sample`]).
    pub fn step_sample(
        &mut self,
        model: &Backend,
        token: u32,
        params: &SamplingParams,
        window: &[u32],
    ) -> Result<Picked> {
        let start = self.tokens.len();
        match model.forward_sample(token, start, &mut self.cache, params, window) {
            Ok(picked) => {
                self.tokens.push(token);
                Ok(picked)
            }
            Err(e) => {
                self.truncate(start);
                Err(e)
            }
        }
    }

    /// Appends `tokens` (a prompt chunk) and returns the logits that follow the
    /// last of them.
    pub fn feed(&mut self, model: &Backend, tokens: &[u32]) -> Result<Vec<f32>> {
        let start = self.tokens.len();
        let logits = model.forward(tokens, start, &mut self.cache, Logits::Last);
        match logits {
            Ok(logits) => {
                self.tokens.extend_from_slice(tokens);
                Ok(logits)
            }
            Err(e) => {
                // A failed pass may have written some layers: drop those positions.
                self.truncate(start);
                Err(e)
            }
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::common_prefix;

    #[test]
    fn common_prefix_counts_shared_head() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
    }
}
