//! What a step of the model is asked for and gives back, per sequence, and
//! the input check every backend makes: the terms the step API and both
//! backends share (the backends do not import the API above them).

use crate::error::{Error, Result};
use crate::sampler::SamplingParams;

/// Which positions' logits a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position's: `vocab` values (generation).
    Last,
    /// Every position's: `seq × vocab` values, row-major (perplexity, checks).
    All,
}

/// What one sequence of a step needs back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wanted<'a> {
    /// The most likely token after the last one.
    Argmax,
    /// A token picked by the sampler with these settings, the penalties
    /// looking at the `window` tokens (see
    /// [`crate::sampler::Sampler::device_sampling`]).
    Sample {
        params: SamplingParams,
        window: &'a [u32],
    },
    /// The row of logits after the last token.
    Logits,
    /// The rows of logits after every token (`tokens × vocab` values,
    /// row-major).
    EveryRow,
    /// The final norm's output at every token (`tokens × embedding_length`
    /// values, row-major), the output head skipped: what an embedding pools.
    HiddenStates,
}

/// What one sequence of a step got.
#[derive(Debug, Clone, PartialEq)]
pub enum Picked {
    /// The token, picked on the device (or, for [`Wanted::Argmax`], on the
    /// host from the row).
    Token(u32),
    /// Logits for the host to use or pick from (or the hidden states
    /// [`Wanted::HiddenStates`] asked for): the rows [`Wanted::Logits`]
    /// or [`Wanted::EveryRow`] asked for, or the last row when the backend
    /// cannot pick the wanted token itself (a CPU backend samples nothing;
    /// a GPU whose selection overflowed on ties; no usable logit for an
    /// argmax, where the host sampler then gives its error).
    Row(Vec<f32>),
}

impl Picked {
    /// The rows of a step that asked for them ([`Wanted::Logits`],
    /// [`Wanted::EveryRow`] or [`Wanted::HiddenStates`], which always give
    /// rows).
    pub fn into_row(self) -> Result<Vec<f32>> {
        match self {
            Picked::Row(logits) => Ok(logits),
            Picked::Token(_) => Err(Error::InvalidRequest(
                "a step asked for logits gave a token".into(),
            )),
        }
    }
}

/// Errors unless `tokens` is non-empty and every id is inside the vocabulary
/// (both backends check a pass's input this way).
pub(crate) fn check_tokens(tokens: &[u32], vocab_size: usize) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::InvalidRequest(
            "forward pass over zero tokens".into(),
        ));
    }
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab_size) {
        return Err(Error::InvalidRequest(format!(
            "token id {bad} is outside the vocabulary of {vocab_size}"
        )));
    }
    Ok(())
}

/// Checks that a cache of `capacity` positions fits a model loaded for
/// `max_positions` (its RoPE tables end there).
pub(crate) fn check_capacity(capacity: usize, max_positions: usize) -> Result<()> {
    if capacity > max_positions {
        return Err(Error::InvalidRequest(format!(
            "a cache of {capacity} positions exceeds the {max_positions} the model was loaded for"
        )));
    }
    Ok(())
}

/// Checks that `count` new positions starting at `start` fit a cache holding
/// `len` of `capacity` positions, with no gap after the cached ones (both
/// backends' caches follow this contract).
pub(crate) fn check_room(len: usize, capacity: usize, start: usize, count: usize) -> Result<()> {
    if start > len {
        return Err(Error::InvalidRequest(format!(
            "position {start} leaves a gap after the {len} cached positions"
        )));
    }
    if start + count > capacity {
        return Err(Error::InvalidRequest(format!(
            "context full: {start} cached + {count} new positions exceed the context of {capacity}"
        )));
    }
    Ok(())
}
