//! What differs between the architectures the engine runs, as data: one row
//! per `general.architecture` value. The model schedule and both backends
//! read these traits (through [`ModelConfig`](crate::model::ModelConfig)) and
//! never an architecture's name, so adding an architecture is a row here,
//! plus kernels only for a trait no row had before.

use crate::model::rope::RopeStyle;

/// The traits of one architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Architecture {
    /// The `general.architecture` value of its GGUF files.
    pub name: &'static str,
    /// Which elements of a head RoPE pairs (how the converter laid out the
    /// query and key rows).
    pub rope_style: RopeStyle,
    /// Whether each query and key head is RMS-normalised with its own weight
    /// vector (`attn_q_norm` / `attn_k_norm`) before RoPE.
    pub qk_norm: bool,
    /// Whether the query, key and value projections add a bias vector
    /// (`attn_q.bias`, `attn_k.bias`, `attn_v.bias`) before RoPE.
    pub qkv_bias: bool,
}

/// Every architecture the engine runs. Each is a pre-norm transformer of
/// grouped-query attention with RoPE and a SwiGLU MLP; the fields above are
/// what sets them apart.
pub const ARCHITECTURES: &[Architecture] = &[
    // Llama 1/2/3, TinyLlama, SmolLM, Mistral.
    Architecture {
        name: "llama",
        rope_style: RopeStyle::Adjacent,
        qk_norm: false,
        qkv_bias: false,
    },
    // Qwen2 and Qwen2.5.
    Architecture {
        name: "qwen2",
        rope_style: RopeStyle::Halves,
        qk_norm: false,
        qkv_bias: true,
    },
    Architecture {
        name: "qwen3",
        rope_style: RopeStyle::Halves,
        qk_norm: true,
        qkv_bias: false,
    },
];

/// The row for a `general.architecture` value.
pub fn find(name: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|a| a.name == name)
}

/// The names of every supported architecture, for error messages.
pub fn names() -> Vec<&'static str> {
    ARCHITECTURES.iter().map(|a| a.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for a in ARCHITECTURES {
            assert_eq!(find(a.name), Some(a));
        }
        let mut all = names();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), ARCHITECTURES.len());
        assert_eq!(find("gemma3"), None);
    }
}
