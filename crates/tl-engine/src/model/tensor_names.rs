//! The one table mapping the llama architecture's weights to GGUF tensor names, as
//! llama.cpp's converter writes them.

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
            Self::FeedForwardNorm => "ffn_norm",
            Self::Gate => "ffn_gate",
            Self::Up => "ffn_up",
            Self::Down => "ffn_down",
        };
        format!("blk.{block}.{suffix}.weight")
    }
}
