//! The one table mapping the weights of the llama architecture (and of Qwen3,
//! llama plus per-head query/key norms, Qwen2, llama plus query/key/value
//! biases, and Gemma 3, Qwen3 plus norms after attention and the MLP) to GGUF
//! tensor names, as llama.cpp's converter writes them, and to
//! the shapes a configuration gives them.

use crate::model::config::ModelConfig;

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
    /// Qwen2: the biases of the query, key and value projections.
    QueryBias,
    KeyBias,
    ValueBias,
    /// Gemma: the RMS norm weights of the attention's and the MLP's
    /// outputs.
    AttentionPostNorm,
    FeedForwardNorm,
    Gate,
    Up,
    Down,
    FeedForwardPostNorm,
}

impl BlockTensor {
    /// Every tensor of a block, in file order.
    pub const ALL: [BlockTensor; 16] = [
        Self::AttentionNorm,
        Self::Query,
        Self::QueryBias,
        Self::Key,
        Self::KeyBias,
        Self::Value,
        Self::ValueBias,
        Self::AttentionOutput,
        Self::QueryNorm,
        Self::KeyNorm,
        Self::AttentionPostNorm,
        Self::FeedForwardNorm,
        Self::Gate,
        Self::Up,
        Self::Down,
        Self::FeedForwardPostNorm,
    ];

    /// The tensor's row-major shape (`[rows, cols]` for a matrix) in a model of
    /// configuration `c`, or `None` when its architecture has no such tensor.
    pub fn shape(self, c: &ModelConfig) -> Option<Vec<usize>> {
        let hidden = c.embedding_length;
        let ffn = c.feed_forward_length;
        let (q_width, kv_width) = (c.query_width(), c.key_value_width());
        Some(match self {
            Self::AttentionNorm | Self::FeedForwardNorm => vec![hidden],
            Self::AttentionPostNorm | Self::FeedForwardPostNorm if c.post_norms => vec![hidden],
            Self::AttentionPostNorm | Self::FeedForwardPostNorm => return None,
            Self::Query => vec![q_width, hidden],
            Self::Key | Self::Value => vec![kv_width, hidden],
            Self::AttentionOutput => vec![hidden, q_width],
            Self::QueryNorm | Self::KeyNorm if c.qk_norm => vec![c.head_dim],
            Self::QueryNorm | Self::KeyNorm => return None,
            Self::QueryBias if c.qkv_bias => vec![q_width],
            Self::KeyBias | Self::ValueBias if c.qkv_bias => vec![kv_width],
            Self::QueryBias | Self::KeyBias | Self::ValueBias => return None,
            Self::Gate | Self::Up => vec![ffn, hidden],
            Self::Down => vec![hidden, ffn],
        })
    }

    /// The GGUF name of this tensor in block `block`.
    pub fn name(self, block: usize) -> String {
        let suffix = match self {
            Self::QueryBias => return format!("blk.{block}.attn_q.bias"),
            Self::KeyBias => return format!("blk.{block}.attn_k.bias"),
            Self::ValueBias => return format!("blk.{block}.attn_v.bias"),
            Self::AttentionNorm => "attn_norm",
            Self::Query => "attn_q",
            Self::Key => "attn_k",
            Self::Value => "attn_v",
            Self::AttentionOutput => "attn_output",
            Self::QueryNorm => "attn_q_norm",
            Self::KeyNorm => "attn_k_norm",
            Self::FeedForwardNorm => "ffn_norm",
            Self::AttentionPostNorm => "post_attention_norm",
            Self::FeedForwardPostNorm => "post_ffw_norm",
            Self::Gate => "ffn_gate",
            Self::Up => "ffn_up",
            Self::Down => "ffn_down",
        };
        format!("blk.{block}.{suffix}.weight")
    }
}

/// The block a tensor name belongs to (`blk.{block}.…`), if it names one.
pub fn block_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("blk.")?;
    let (block, _) = rest.split_once('.')?;
    block.parse().ok()
}
