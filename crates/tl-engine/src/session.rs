//! A sequence being generated: its KV cache plus the tokens the cache holds, so a
//! new prompt that extends the old one (the next turn of a chat) only runs the new
//! tokens through the model.

use crate::backend::{Backend, Picked, SequenceCache, SequenceStep, Wanted};
use crate::error::{Error, Result};

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

    /// One step of the model for several sessions at once (see
    /// [`Backend::step`]): `tokens[i]` (the next token, or a prompt chunk) is
    /// appended to `sessions[i]`, which gets what `wants[i]` asks for. On
    /// failure no session changes: a failed pass may have written some
    /// layers, so every session is cut back to what it held.
    pub fn advance(
        model: &Backend,
        sessions: &mut [&mut Session],
        tokens: &[&[u32]],
        wants: &[Wanted<'_>],
    ) -> Result<Vec<Picked>> {
        if tokens.len() != sessions.len() || wants.len() != sessions.len() {
            return Err(Error::InvalidRequest(format!(
                "a step of {} sessions with {} token lists and {} wants",
                sessions.len(),
                tokens.len(),
                wants.len()
            )));
        }
        let lengths: Vec<usize> = sessions.iter().map(|s| s.tokens.len()).collect();
        let mut steps: Vec<SequenceStep<'_, '_>> = sessions
            .iter_mut()
            .zip(tokens)
            .zip(wants)
            .map(|((session, tokens), &want)| SequenceStep {
                tokens,
                cache: &mut session.cache,
                want,
            })
            .collect();
        let result = model.step(&mut steps);
        drop(steps);
        match result {
            Ok(picked) => {
                for (session, tokens) in sessions.iter_mut().zip(tokens) {
                    session.tokens.extend_from_slice(tokens);
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

    /// [`Session::advance`] for this session alone.
    pub fn advance_one(
        &mut self,
        model: &Backend,
        tokens: &[u32],
        want: Wanted<'_>,
    ) -> Result<Picked> {
        let mut picked = Self::advance(model, &mut [self], &[tokens], &[want])?;
        picked
            .pop()
            .ok_or_else(|| Error::InvalidRequest("a step gave nothing back".into()))
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

    /// Appends `tokens` (a prompt chunk, or one token) and returns the logits
    /// that follow the last of them.
    pub fn feed(&mut self, model: &Backend, tokens: &[u32]) -> Result<Vec<f32>> {
        self.advance_one(model, tokens, Wanted::Logits)?.into_row()
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
