//! The one table mapping the weights of the llama architecture (and of Qwen3,
//! llama plus per-head query/key norms) to GGUF tensor names, as llama.cpp's
//! converter writes them.

/// Token embedding table `[vocab, hidden]`.
pub const TOKEN_EMBEDDING: &str = "token_embd.weight";
/// Final RMS norm weight.
pub const OUTPUT_NORM: &str = "output_norm.weight";
/// Output projection; absent when tied to the embedding table.
pub const OUTPUT: &str = "output.weight";
/// Per-dimension RoPE frequency factors (Llama 3.1 long-context scaling).
pub const ROPE_FREQS: &str = "rope_freqs.weight";

/// The weights of one transformer block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTensor {
    AttentionNorm,
    Query,
    Key,
    Value,
    AttentionOutput,
    /// Qwen3: the RMS norm weight of every query head (`head_dim` values).
    QueryNorm,
    /// Qwen3: the same for every key head.
    KeyNorm,
    FeedForwardNorm,
    Gate,
    Up,
    Down,
}

impl BlockTensor {
    /// The GGUF name of this tensor in block `block`.
    pub fn name(self, block: usize) -> String {
        let suffix = match self {
            Self::AttentionNorm => "attn_norm",
            Self::Query => "attn_q",
            Self::Key => "attn_k",
            Self::Value => "attn_v",
            Self::AttentionOutput => "attn_output",
            Self::QueryNorm => "attn_q_norm",
            Self::KeyNorm => "attn_k_norm",
            Self::FeedForwardNorm => "ffn_norm",
            Self::Gate => "ffn_gate",
            Self::Up => "ffn_up",
            Self::Down => "ffn_down",
        };
        format!("blk.{block}.{suffix}.weight")
    }
}
