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
    /// The gated MLP's activation.
    pub activation: Activation,
    /// Whether the attention's and the MLP's outputs are RMS-normalised
    /// (`post_attention_norm`, `post_ffw_norm`) before they join the
    /// residual.
    pub post_norms: bool,
    /// Whether token embeddings are multiplied by `√hidden` on the way in.
    pub scaled_embedding: bool,
    /// Where the attention's `1/√d` factor is applied.
    pub attention_scale: AttentionScale,
    /// Layers in groups of this many, all but the last of each group
    /// attending over a sliding window (`{arch}.attention.sliding_window`
    /// positions, RoPE base `{arch}.rope.freq_base_swa`), when the file gives
    /// a window. `None`: every layer attends to every position.
    pub local_layer_group: Option<usize>,
    /// The chat template for files that carry none (Jinja source), instead
    /// of ChatML.
    pub chat_template: Option<&'static str>,
}

/// The activation of a gated MLP, `act(gate) · up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `silu(x) = x / (1 + e^-x)` (SwiGLU).
    Silu,
    /// GELU's tanh approximation (GeGLU), as ggml tabulates it over f16
    /// inputs.
    GeluTanh,
}

/// Where the attention's scale factor goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionScale {
    /// Every score `q·k` is multiplied by `1/√head_dim`.
    Scores,
    /// The queries are multiplied by `1/√head_dim` in f32, after RoPE and
    /// before they are rounded for attention (Gemma; its 62-block 27B model
    /// uses `1/√(hidden/heads)`, gemma_pytorch's `query_pre_attn_scalar`).
    Queries,
}

/// The traits most architectures share: a pre-norm transformer of
/// grouped-query attention with RoPE and a SwiGLU MLP.
const PLAIN: Architecture = Architecture {
    name: "",
    rope_style: RopeStyle::Adjacent,
    qk_norm: false,
    qkv_bias: false,
    activation: Activation::Silu,
    post_norms: false,
    scaled_embedding: false,
    attention_scale: AttentionScale::Scores,
    local_layer_group: None,
    chat_template: None,
};

/// Every architecture the engine runs; the fields above are what sets them
/// apart.
pub const ARCHITECTURES: &[Architecture] = &[
    // Llama 1/2/3, TinyLlama, SmolLM, Mistral.
    Architecture {
        name: "llama",
        ..PLAIN
    },
    // Qwen2 and Qwen2.5.
    Architecture {
        name: "qwen2",
        rope_style: RopeStyle::Halves,
        qkv_bias: true,
        ..PLAIN
    },
    Architecture {
        name: "qwen3",
        rope_style: RopeStyle::Halves,
        qk_norm: true,
        ..PLAIN
    },
    Architecture {
        name: "gemma3",
        rope_style: RopeStyle::Halves,
        qk_norm: true,
        activation: Activation::GeluTanh,
        post_norms: true,
        scaled_embedding: true,
        attention_scale: AttentionScale::Queries,
        local_layer_group: Some(6),
        chat_template: Some(GEMMA_TEMPLATE),
        ..PLAIN
    },
];

/// Gemma's turns (`<start_of_turn>user` / `model`) after BOS, a system
/// message joined to the first user turn, as the Gemma 3 instruction models'
/// template does.
const GEMMA_TEMPLATE: &str = "\
{{- bos_token -}}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set prefix = messages[0]['content'] + '\\n\\n' -%}{%- set turns = messages[1:] -%}
{%- else -%}{%- set prefix = '' -%}{%- set turns = messages -%}{%- endif -%}
{%- for message in turns -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{ '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}";

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
        assert_eq!(find("gemma2"), None);
    }
}

#[cfg(test)]
mod template_tests {
    use super::*;
    use crate::chat_template::{ChatMessage, ChatTemplate};

    #[test]
    fn gemma_template_joins_the_system_message_to_the_first_turn() {
        let template = ChatTemplate::new(GEMMA_TEMPLATE, "<bos>", "<eos>").unwrap();
        let messages = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi "),
            ChatMessage::new("assistant", "Hello."),
            ChatMessage::new("user", "Capital of France?"),
        ];
        let text = template.render(&messages, true).unwrap();
        assert_eq!(
            text,
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n\
             <start_of_turn>model\nHello.<end_of_turn>\n\
             <start_of_turn>user\nCapital of France?<end_of_turn>\n\
             <start_of_turn>model\n"
        );
    }
}
