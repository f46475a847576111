//! The metadata of a synthetic model: `general.*` and the architecture's
//! hyperparameters under the keys llama.cpp's converter writes (and
//! [`ModelConfig::from_gguf`](crate::model::ModelConfig::from_gguf) reads).

use tl_gguf::Value;

use crate::quantize::FileType;
use crate::synth::shape::{Architecture, Shape};

/// `GGML_QNT_VERSION`: the block layouts of the current quantized types.
const QUANTIZATION_VERSION: u32 = 2;

/// `general.name` of a synthetic model: `synthetic tinyllama q4_0`.
pub fn model_name(shape: &Shape, quant: FileType) -> String {
    format!("synthetic {} {quant}", shape.name)
}

/// Every key but the tokenizer's, in the converter's order.
pub fn model_metadata(shape: &Shape, quant: FileType) -> Vec<(String, Value)> {
    let arch = shape.architecture;
    let key = |name: &str| format!("{arch}.{name}");
    let count = |n: usize| Value::U32(u32::try_from(n).unwrap_or(u32::MAX));
    let mut entries = vec![
        (
            "general.architecture".into(),
            Value::String(arch.name().into()),
        ),
        (
            "general.name".into(),
            Value::String(model_name(shape, quant)),
        ),
        ("general.file_type".into(), Value::U32(quant.file_type())),
        (
            "general.quantization_version".into(),
            Value::U32(QUANTIZATION_VERSION),
        ),
        (key("context_length"), count(shape.context_length)),
        (key("embedding_length"), count(shape.embedding_length)),
        (key("block_count"), count(shape.block_count)),
        (key("feed_forward_length"), count(shape.feed_forward_length)),
        (key("attention.head_count"), count(shape.head_count)),
        (key("attention.head_count_kv"), count(shape.head_count_kv)),
        (key("rope.freq_base"), Value::F32(shape.rope_freq_base)),
        (
            key("attention.layer_norm_rms_epsilon"),
            Value::F32(shape.rms_norm_eps),
        ),
    ];
    match arch {
        Architecture::Llama => entries.extend([
            (key("rope.dimension_count"), count(shape.head_dim)),
            (key("vocab_size"), count(shape.vocab_size)),
        ]),
        // Qwen2's converter writes only the common keys.
        Architecture::Qwen2 => {}
        // The head width is free of the hidden width, so it is spelled out.
        Architecture::Qwen3 | Architecture::Gemma3 => entries.extend([
            (key("attention.key_length"), count(shape.head_dim)),
            (key("attention.value_length"), count(shape.head_dim)),
        ]),
    }
    if let Some(window) = shape.sliding_window {
        entries.extend([
            (key("attention.sliding_window"), count(window.size)),
            (
                key("attention.sliding_window_pattern"),
                count(window.period),
            ),
        ]);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::shape::ShapeName;

    fn get<'a>(entries: &'a [(String, Value)], key: &str) -> &'a Value {
        &entries.iter().find(|(k, _)| k == key).unwrap().1
    }

    #[test]
    fn qwen3_spells_out_its_head_width() {
        let entries = model_metadata(&ShapeName::Qwen3_0_6B.shape(), FileType::Q8_0);
        assert_eq!(
            get(&entries, "general.architecture"),
            &Value::String("qwen3".into())
        );
        assert_eq!(
            get(&entries, "qwen3.attention.key_length"),
            &Value::U32(128)
        );
        assert_eq!(get(&entries, "qwen3.context_length"), &Value::U32(40_960));
        assert_eq!(get(&entries, "general.file_type"), &Value::U32(7));
        assert_eq!(
            get(&entries, "general.name"),
            &Value::String("synthetic qwen3-0.6b q8_0".into())
        );
    }
}
