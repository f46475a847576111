//! The model schedule, written once: the stages of a forward pass in order,
//! for every architecture and backend. A backend implements [`Stages`] on a
//! *pass* (its buffers, the rows being run and the caches they write) and
//! [`run`] calls the stages; which kernels a stage launches (a GEMV for a
//! decode step, a GEMM for a long prompt, fused or not) is the backend's
//! business, and what differs between architectures is read from the
//! [`ModelConfig`](crate::model::ModelConfig)'s table-given traits.
//!
//! A lone decode step is a pass of one row, a batched step a pass of one row
//! for each sequence, a prompt chunk a pass of one sequence's rows. A pass
//! ends in the output head (logits) or, for embeddings, in the final norm
//! (see [`Head`]).

use crate::error::Result;

/// The stages of a forward pass over rows of activations (the residual
/// stream), each in place on the pass's buffers.
pub trait Stages {
    /// The rows' token embeddings into the residual stream.
    fn embed(&mut self) -> Result<()>;
    /// Block `layer`'s attention input: the residual normalised, projected to
    /// queries, keys and values, each head made ready for attention (q/k
    /// norms, RoPE), and the keys and values written to the rows' caches.
    fn attention_input(&mut self, layer: usize) -> Result<()>;
    /// Each row's queries against its sequence's cached keys and values, up to
    /// and including its own position.
    fn attention(&mut self, layer: usize) -> Result<()>;
    /// The attention's output projection, added to the residual.
    fn attention_output(&mut self, layer: usize) -> Result<()>;
    /// Drops the rows whose logits the pass does not return, before the last
    /// block's MLP (as llama.cpp does: its MLP then runs on those rows
    /// alone, and a K-quant product rounds by how many rows it has).
    fn keep_logit_rows(&mut self) -> Result<()>;
    /// The MLP: the residual normalised, the gated activation, the down
    /// projection added to the residual.
    fn feed_forward(&mut self, layer: usize) -> Result<()>;
    /// The final norm and the output head, for the rows kept.
    fn logits(&mut self) -> Result<()>;
    /// The final norm alone, for the rows kept: the hidden states an
    /// embedding pools, without the output head's product.
    fn hidden_states(&mut self) -> Result<()>;
}

/// What a pass gives back after its last block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Logits over the vocabulary: the final norm and the output head.
    Logits,
    /// The final norm's output, the output head skipped (embeddings).
    HiddenStates,
}

/// Runs one forward pass of `layers` blocks, ending as `head` says.
pub fn run(pass: &mut impl Stages, layers: usize, head: Head) -> Result<()> {
    pass.embed()?;
    for layer in 0..layers {
        pass.attention_input(layer)?;
        pass.attention(layer)?;
        pass.attention_output(layer)?;
        if layer + 1 == layers {
            pass.keep_logit_rows()?;
        }
        pass.feed_forward(layer)?;
    }
    match head {
        Head::Logits => pass.logits(),
        Head::HiddenStates => pass.hidden_states(),
    }
}
