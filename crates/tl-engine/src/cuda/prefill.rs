//! Buffers for a batch of prompt tokens, sized once for the largest batch and
//! shared by every sequence of the model (all work is on one stream, so batches
//! never overlap).

use tl_cuda::{Buffer, Gpu};

use crate::cuda::weights::BlockWeights;
use crate::error::Result;
use crate::model::config::ModelConfig;

/// `[row][feature]` buffers for up to `rows` prompt tokens.
pub struct PrefillBuffers {
    pub ids: Buffer<u32>,
    pub start: Buffer<i32>,
    pub x: Buffer<f32>,
    /// The input of the GEMM being run, in f16 (for the MLP's down projection,
    /// written by SwiGLU itself).
    pub gemm_input: Buffer<u16>,
    pub qkv: Buffer<f32>,
    pub attention: Buffer<f32>,
    pub gate_up: Buffer<f32>,
    /// One weight matrix dequantized to f16 for the GEMM (when no f16 copies
    /// are kept).
    pub weights: Buffer<u16>,
    /// Logits of one row.
    pub logits: Buffer<f32>,
}

/// Values of each prefill buffer for `rows` rows, `weights` being the
/// largest matrix that is dequantized per GEMM (0 when every matrix keeps an
/// f16 copy).
struct Lengths {
    x: usize,
    gemm_input: usize,
    qkv: usize,
    attention: usize,
    gate_up: usize,
    weights: usize,
    logits: usize,
}

impl Lengths {
    fn of(c: &ModelConfig, rows: usize, weights: usize) -> Self {
        let q_width = c.query_width();
        let widest_input = c.embedding_length.max(q_width).max(c.feed_forward_length);
        Lengths {
            x: rows * c.embedding_length,
            gemm_input: rows * widest_input,
            qkv: rows * super::cache::qkv_buffer_width(c),
            attention: rows * q_width,
            gate_up: rows * 2 * c.feed_forward_length,
            weights,
            logits: c.vocab_size,
        }
    }
}

/// Bytes of the prefill buffers for `rows` rows, with the largest block
/// matrix dequantized per GEMM (as when the device has no room for f16
/// copies): what [`PrefillBuffers::new`] allocates at most.
pub fn prefill_bytes(c: &ModelConfig, rows: usize) -> u64 {
    let (hidden, q_width) = (c.embedding_length, c.query_width());
    let largest = [
        (q_width + 2 * c.key_value_width()) * hidden,
        hidden * q_width,
        2 * c.feed_forward_length * hidden,
        hidden * c.feed_forward_length,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    let l = Lengths::of(c, rows, largest);
    let floats = l.x + l.qkv + l.attention + l.gate_up + l.logits;
    let halves = l.gemm_input + l.weights;
    (floats as u64 * 4) + (halves as u64 * 2) + (rows as u64 + 1) * 4
}

impl PrefillBuffers {
    pub fn new(gpu: &Gpu, c: &ModelConfig, rows: usize, block: &BlockWeights) -> Result<Self> {
        let largest = block
            .matrices()
            .filter(|m| m.f16_values().is_none())
            .map(|m| m.rows() * m.cols())
            .max()
            .unwrap_or(0);
        let l = Lengths::of(c, rows, largest);
        Ok(PrefillBuffers {
            ids: Buffer::zeros(gpu, rows)?,
            start: Buffer::zeros(gpu, 1)?,
            x: Buffer::zeros(gpu, l.x)?,
            gemm_input: Buffer::zeros(gpu, l.gemm_input)?,
            qkv: Buffer::zeros(gpu, l.qkv)?,
            attention: Buffer::zeros(gpu, l.attention)?,
            gate_up: Buffer::zeros(gpu, l.gate_up)?,
            weights: Buffer::zeros(gpu, l.weights)?,
            logits: Buffer::zeros(gpu, l.logits)?,
        })
    }
}
