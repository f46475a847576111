//! The model shapes `tl model synth` can build: real models' hyperparameters
//! (TinyLlama, SmolLM2, Qwen3-0.6B, Llama-3-8B) plus a tiny one of each
//! architecture for tests.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The architecture written as `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    /// Llama with biases on the query, key and value projections.
    Qwen2,
    /// Llama with per-head RMS norms on queries and keys and a free head width.
    Qwen3,
    /// Qwen3 with GeGLU, norms after attention and the MLP, scaled
    /// embeddings and sliding-window layers.
    Gemma3,
}

impl Architecture {
    /// Every architecture, in the order help texts list them.
    pub const ALL: [Architecture; 4] = [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
        Architecture::Gemma3,
    ];

    /// The GGUF name (`llama`, `qwen3`), also the prefix of the hyperparameter keys.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Gemma3 => "gemma3",
        }
    }

    /// The engine's row for this architecture, which says what its blocks hold.
    fn traits(self) -> Option<&'static crate::model::arch::Architecture> {
        crate::model::arch::find(self.name())
    }

    /// Whether blocks carry `attn_q_norm` / `attn_k_norm` weights.
    pub fn has_qk_norm(self) -> bool {
        self.traits().is_some_and(|t| t.qk_norm)
    }

    /// Whether blocks carry `attn_q.bias`, `attn_k.bias` and `attn_v.bias`.
    pub fn has_qkv_bias(self) -> bool {
        self.traits().is_some_and(|t| t.qkv_bias)
    }

    /// Whether blocks carry `post_attention_norm` and `post_ffw_norm`.
    pub fn has_post_norms(self) -> bool {
        self.traits().is_some_and(|t| t.post_norms)
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Architecture {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Architecture::ALL
            .into_iter()
            .find(|arch| arch.name() == text)
            .ok_or_else(|| unknown("architecture", text, Architecture::ALL.map(|a| a.name())))
    }
}

/// A named shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeName {
    /// 2 blocks of width 64: loads and runs in milliseconds, for tests.
    Tiny,
    /// The same size as Qwen3 (heads of 32, queries twice the hidden width).
    TinyQwen3,
    /// A tiny Qwen2 (query, key and value biases), heads of 32.
    TinyQwen2,
    /// A tiny Gemma 3: heads of 32, a window of 32 positions on every other
    /// layer.
    TinyGemma3,
    /// 2 blocks of width 256, so every matrix row is whole K-quant super-blocks.
    TinyWide,
    TinyLlama,
    SmolLm2,
    Qwen3_0_6B,
    Llama8B,
    Gemma3_270M,
}

impl ShapeName {
    /// Every shape, in the order help texts list them.
    pub const ALL: [ShapeName; 10] = [
        ShapeName::Tiny,
        ShapeName::TinyQwen3,
        ShapeName::TinyQwen2,
        ShapeName::TinyGemma3,
        ShapeName::TinyWide,
        ShapeName::TinyLlama,
        ShapeName::SmolLm2,
        ShapeName::Qwen3_0_6B,
        ShapeName::Llama8B,
        ShapeName::Gemma3_270M,
    ];

    /// The name on the command line and in `general.name`.
    pub fn name(self) -> &'static str {
        match self {
            ShapeName::Tiny => "tiny",
            ShapeName::TinyQwen3 => "tiny-qwen3",
            ShapeName::TinyQwen2 => "tiny-qwen2",
            ShapeName::TinyGemma3 => "tiny-gemma3",
            ShapeName::TinyWide => "tiny-wide",
            ShapeName::TinyLlama => "tinyllama",
            ShapeName::SmolLm2 => "smollm2",
            ShapeName::Qwen3_0_6B => "qwen3-0.6b",
            ShapeName::Llama8B => "llama-8b",
            ShapeName::Gemma3_270M => "gemma3-270m",
        }
    }

    /// Whether this is one of the test shapes, whose vocabulary is whatever
    /// size the `--vocab` file has.
    pub fn is_tiny(self) -> bool {
        matches!(
            self,
            ShapeName::Tiny
                | ShapeName::TinyQwen3
                | ShapeName::TinyQwen2
                | ShapeName::TinyGemma3
                | ShapeName::TinyWide
        )
    }

    /// The hyperparameters of this shape.
    pub fn shape(self) -> Shape {
        let llama = |block_count, hidden, ffn, heads, kv_heads, vocab_size| Shape {
            name: self,
            architecture: Architecture::Llama,
            block_count,
            embedding_length: hidden,
            feed_forward_length: ffn,
            head_count: heads,
            head_count_kv: kv_heads,
            head_dim: hidden / heads,
            vocab_size,
            rope_freq_base: 10_000.0,
            rms_norm_eps: 1e-5,
            context_length: 2048,
            tied_embeddings: false,
            sliding_window: None,
        };
        match self {
            ShapeName::Tiny => Shape {
                context_length: 256,
                ..llama(2, 64, 128, 4, 2, 512)
            },
            ShapeName::TinyQwen3 => Shape {
                architecture: Architecture::Qwen3,
                head_dim: 32,
                rope_freq_base: 1_000_000.0,
                rms_norm_eps: 1e-6,
                context_length: 256,
                tied_embeddings: true,
                ..llama(2, 64, 128, 4, 2, 512)
            },
            // Heads of 32, the narrowest the CUDA attention takes.
            ShapeName::TinyQwen2 => Shape {
                architecture: Architecture::Qwen2,
                rope_freq_base: 1_000_000.0,
                rms_norm_eps: 1e-6,
                context_length: 256,
                tied_embeddings: true,
                ..llama(2, 128, 256, 4, 2, 512)
            },
            ShapeName::TinyGemma3 => Shape {
                architecture: Architecture::Gemma3,
                head_dim: 32,
                rope_freq_base: 1_000_000.0,
                rms_norm_eps: 1e-6,
                context_length: 256,
                tied_embeddings: true,
                sliding_window: Some(SlidingWindow {
                    size: 32,
                    period: 2,
                }),
                ..llama(2, 128, 256, 4, 1, 512)
            },
            ShapeName::TinyWide => Shape {
                context_length: 256,
                ..llama(2, 256, 512, 4, 2, 512)
            },
            ShapeName::TinyLlama => llama(22, 2048, 5632, 32, 4, 32_000),
            ShapeName::SmolLm2 => Shape {
                rope_freq_base: 100_000.0,
                context_length: 8192,
                tied_embeddings: true,
                ..llama(30, 576, 1536, 9, 3, 49_152)
            },
            ShapeName::Qwen3_0_6B => Shape {
                architecture: Architecture::Qwen3,
                head_dim: 128,
                rope_freq_base: 1_000_000.0,
                rms_norm_eps: 1e-6,
                context_length: 40_960,
                tied_embeddings: true,
                ..llama(28, 1024, 3072, 16, 8, 151_936)
            },
            ShapeName::Llama8B => Shape {
                rope_freq_base: 500_000.0,
                context_length: 8192,
                ..llama(32, 4096, 14_336, 32, 8, 128_256)
            },
            ShapeName::Gemma3_270M => Shape {
                architecture: Architecture::Gemma3,
                head_dim: 256,
                rope_freq_base: 1_000_000.0,
                rms_norm_eps: 1e-6,
                context_length: 32_768,
                tied_embeddings: true,
                sliding_window: Some(SlidingWindow {
                    size: 512,
                    period: 6,
                }),
                ..llama(18, 640, 2048, 4, 1, 262_144)
            },
        }
    }
}

impl fmt::Display for ShapeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ShapeName {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        ShapeName::ALL
            .into_iter()
            .find(|shape| shape.name() == text)
            .ok_or_else(|| unknown("shape", text, ShapeName::ALL.map(|s| s.name())))
    }
}

/// The hyperparameters of a synthetic model.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub name: ShapeName,
    pub architecture: Architecture,
    pub block_count: usize,
    /// Width of the residual stream.
    pub embedding_length: usize,
    pub feed_forward_length: usize,
    pub head_count: usize,
    pub head_count_kv: usize,
    /// Width of one head; `head_count * head_dim` may differ from the hidden
    /// width (Qwen3-0.6B: 16 × 128 = 2048 against 1024).
    pub head_dim: usize,
    pub vocab_size: usize,
    pub rope_freq_base: f32,
    pub rms_norm_eps: f32,
    pub context_length: usize,
    /// No `output.weight`: the output head reuses the token embedding.
    pub tied_embeddings: bool,
    /// Windowed layers, for architectures that have them.
    pub sliding_window: Option<SlidingWindow>,
}

/// A sliding window of `size` positions on all but the last layer of every
/// `period` layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    pub size: usize,
    pub period: usize,
}

impl Shape {
    /// Width of the concatenated query heads.
    pub fn query_width(&self) -> usize {
        self.head_count * self.head_dim
    }

    /// Width of the concatenated key (or value) heads.
    pub fn key_value_width(&self) -> usize {
        self.head_count_kv * self.head_dim
    }
}

fn unknown<const N: usize>(what: &str, text: &str, known: [&str; N]) -> Error {
    Error::InvalidRequest(format!(
        "unknown {what} '{text}' (known: {})",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for shape in ShapeName::ALL {
            assert_eq!(shape.name().parse::<ShapeName>().ok(), Some(shape));
            assert_eq!(shape.shape().name, shape);
        }
        for arch in Architecture::ALL {
            assert_eq!(arch.name().parse::<Architecture>().ok(), Some(arch));
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let message = "gpt-5".parse::<ShapeName>().unwrap_err().to_string();
        assert!(message.contains("unknown shape 'gpt-5'"), "{message}");
        assert!(message.contains("qwen3-0.6b"), "{message}");
        let message = "mamba".parse::<Architecture>().unwrap_err().to_string();
        assert!(message.contains("llama, qwen2, qwen3, gemma3"), "{message}");
    }

    #[test]
    fn real_shapes_have_their_published_widths() {
        let qwen = ShapeName::Qwen3_0_6B.shape();
        assert_eq!((qwen.query_width(), qwen.key_value_width()), (2048, 1024));
        assert!(qwen.architecture.has_qk_norm() && qwen.tied_embeddings);
        let tinyllama = ShapeName::TinyLlama.shape();
        assert_eq!((tinyllama.head_dim, tinyllama.key_value_width()), (64, 256));
        assert!(!tinyllama.tied_embeddings);
        let llama = ShapeName::Llama8B.shape();
        assert_eq!((llama.head_dim, llama.key_value_width()), (128, 1024));
        let smol = ShapeName::SmolLm2.shape();
        assert_eq!((smol.head_dim, smol.vocab_size), (64, 49_152));
    }
}
