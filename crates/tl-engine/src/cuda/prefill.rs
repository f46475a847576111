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

impl PrefillBuffers {
    pub fn new(gpu: &Gpu, c: &ModelConfig, rows: usize, block: &BlockWeights) -> Result<Self> {
        let q_width = c.query_width();
        let largest = block
            .matrices()
            .filter(|m| m.f16_values().is_none())
            .map(|m| m.rows() * m.cols())
            .max()
            .unwrap_or(0);
        let widest_input = c.embedding_length.max(q_width).max(c.feed_forward_length);
        Ok(PrefillBuffers {
            ids: Buffer::zeros(gpu, rows)?,
            start: Buffer::zeros(gpu, 1)?,
            x: Buffer::zeros(gpu, rows * c.embedding_length)?,
            gemm_input: Buffer::zeros(gpu, rows * widest_input)?,
            qkv: Buffer::zeros(gpu, rows * block.qkv.rows())?,
            attention: Buffer::zeros(gpu, rows * q_width)?,
            gate_up: Buffer::zeros(gpu, rows * block.gate_up.rows())?,
            weights: Buffer::zeros(gpu, largest)?,
            logits: Buffer::zeros(gpu, c.vocab_size)?,
        })
    }
}
