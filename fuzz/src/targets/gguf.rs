//! `gguf`: a GGUF file from a stranger, as `tl` opens a model: the reader
//! (framing, counts, offsets, alignment), every accessor on what it accepted,
//! the model configuration read from the metadata, and, when that is valid,
//! the weights loaded on the CPU. Each stage that refuses the file ends the
//! run with its error as the signature.

use std::path::Path;

use tl_engine::{Backend, DeviceChoice, GpuOptions, ModelConfig};
use tl_gguf::{GgmlType, GgufFile, GgufWriter, TensorData, Value};

use super::Runner;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::normalize;

/// Positions the CPU backend's caches are made for: enough to allocate
/// everything a model needs, little enough to stay cheap.
const LOAD_POSITIONS: usize = 8;

/// Metadata keys the reader, the engine and the tokenizer look up.
pub(super) const MODEL_KEYS: &[&str] = &[
    "general.architecture",
    "general.alignment",
    "general.name",
    "general.file_type",
    "llama.block_count",
    "llama.context_length",
    "llama.embedding_length",
    "llama.feed_forward_length",
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.attention.key_length",
    "llama.attention.value_length",
    "llama.attention.layer_norm_rms_epsilon",
    "llama.rope.dimension_count",
    "llama.rope.freq_base",
    "llama.vocab_size",
    "qwen3.block_count",
    "qwen3.context_length",
    "qwen3.embedding_length",
    "qwen3.feed_forward_length",
    "qwen3.attention.head_count",
    "qwen3.attention.head_count_kv",
    "qwen3.attention.key_length",
    "qwen3.attention.layer_norm_rms_epsilon",
    "qwen3.rope.dimension_count",
    "qwen3.rope.freq_base",
    "qwen3.vocab_size",
    "tokenizer.chat_template",
];

pub(super) const TOKENIZER_KEYS: &[&str] = &[
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.add_space_prefix",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.mask_token_id",
    "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id",
    "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.prefix_token_id",
    "tokenizer.chat_template",
    "general.name",
];

/// Values worth trying for string keys: architecture, tokenizer model and
/// pre-tokenizer names, special tokens, and odd text.
pub(super) const STRINGS: &[&str] = &[
    "llama",
    "qwen3",
    "qwen2",
    "gemma3",
    "gpt2",
    "bert",
    "default",
    "llama-bpe",
    "llama3",
    "qwen2",
    "deepseek-llm",
    "deepseek-v3",
    "falcon",
    "starcoder",
    "smollm",
    "chatglm-bpe",
    "bloom",
    "viking",
    "command-r",
    "phi3",
    "Phi-3",
    "<s>",
    "</s>",
    "<unk>",
    "<pad>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<0x0A>",
    "<0xFF>",
    "<0xZZ>",
    "<0x",
    "▁",
    "▁▁",
    "Ġ",
    "ĠĠ",
    "Ċ",
    "a",
    "ab",
    " ",
    "\u{0}",
    "\u{fffd}",
    "\u{1f600}",
    "{{ messages[0]['content'] }}",
    "{% for m in messages %}{{ m.content }}{% endfor %}",
];

pub(super) const TENSOR_NAMES: &[&str] = &[
    "token_embd.weight",
    "output_norm.weight",
    "output.weight",
    "rope_freqs.weight",
    "blk.0.attn_norm.weight",
    "blk.0.attn_q.weight",
    "blk.0.attn_k.weight",
    "blk.0.attn_v.weight",
    "blk.0.attn_output.weight",
    "blk.0.attn_q_norm.weight",
    "blk.0.attn_k_norm.weight",
    "blk.0.ffn_norm.weight",
    "blk.0.ffn_gate.weight",
    "blk.0.ffn_up.weight",
    "blk.0.ffn_down.weight",
    "blk.1.attn_q.weight",
    "blk.1.ffn_down.weight",
];

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut seeds = vec![seeds::read(&seeds::tiny_model(repo))?];
    for path in seeds::vocab_files(repo)? {
        seeds.extend(seeds::shrink_vocab(&seeds::read(&path)?, 300));
    }
    seeds.extend(synthetic_files()?);
    Ok(seeds)
}

pub fn dictionary() -> (Shape, Dictionary) {
    let mut keys = MODEL_KEYS.to_vec();
    keys.extend_from_slice(TOKENIZER_KEYS);
    let dictionary = Dictionary {
        keys,
        strings: STRINGS.to_vec(),
        tensor_names: TENSOR_NAMES.to_vec(),
        ..Dictionary::default()
    };
    (Shape::Gguf, dictionary)
}

/// Small files written for the fuzzer: every value type, nested arrays,
/// tensors of every element type, version 2, another alignment, nothing.
fn synthetic_files() -> anyhow::Result<Vec<Vec<u8>>> {
    let mut every_type = GgufWriter::new(3);
    every_type
        .set_metadata("u8", Value::U8(1))
        .set_metadata("i8", Value::I8(-1))
        .set_metadata("u16", Value::U16(2))
        .set_metadata("i16", Value::I16(-2))
        .set_metadata("u32", Value::U32(3))
        .set_metadata("i32", Value::I32(-3))
        .set_metadata("f32", Value::F32(0.5))
        .set_metadata("bool", Value::Bool(true))
        .set_metadata("string", Value::String("text".into()))
        .set_metadata("u64", Value::U64(4))
        .set_metadata("i64", Value::I64(-4))
        .set_metadata("f64", Value::F64(0.25))
        .set_metadata(
            "nested",
            Value::Array(tl_gguf::Array::Array(vec![
                tl_gguf::Array::U32(vec![1, 2]),
                tl_gguf::Array::String(["a"].into_iter().collect()),
            ])),
        );
    let mut tensors = GgufWriter::new(2);
    tensors.set_metadata("general.alignment", Value::U32(64));
    for ty in GgmlType::ALL {
        let dims = vec![ty.block_elements(), 2];
        let size = ty.bytes_for(dims.iter().product()).unwrap_or(0) as usize;
        tensors.add_tensor(
            format!("t.{}", ty.name()),
            dims,
            ty,
            TensorData::Bytes(vec![0x3c; size]),
        )?;
    }
    Ok(vec![
        every_type.to_bytes()?,
        tensors.to_bytes()?,
        GgufWriter::new(3).to_bytes()?,
    ])
}

pub struct GgufRunner;

impl Runner for GgufRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let file = match GgufFile::from_bytes(input.to_vec()) {
            Ok(file) => file,
            Err(e) => return reader_signature(&e),
        };
        let shape = exercise_accessors(&file);
        let config = match ModelConfig::from_gguf(&file) {
            Ok(config) => config,
            Err(e) => return format!("{shape}; config: {}", normalize(&e.to_string())),
        };
        let load = Backend::load(
            &file,
            LOAD_POSITIONS,
            DeviceChoice::Cpu,
            &GpuOptions::default(),
        );
        match load {
            Ok(_) => format!("{shape}; {} loaded", config.architecture),
            Err(e) => format!("{shape}; load: {}", normalize(&e.to_string())),
        }
    }
}

/// The reader's error without the key or tensor name it quotes: those are
/// the file's own bytes, quote marks included, so no blanking of quoted text
/// gets rid of them. What is left is where the reader was ("malformed GGUF
/// at byte #: metadata") and what it found (the text after the last colon).
pub(super) fn reader_signature(error: &tl_gguf::Error) -> String {
    let message = error.to_string();
    let Some((head, _)) = message.split_once('\'') else {
        return format!("reader: {}", normalize(&message));
    };
    let tail = message.rsplit_once(": ").map_or("", |(_, tail)| tail);
    format!("reader: {} … {}", normalize(head), normalize(tail))
}

/// Calls every accessor on what the reader accepted and checks the reader's
/// promises (every tensor's data lies inside the file, at an aligned offset);
/// returns a coarse description of the file (finer ones, such as counts,
/// would make nearly every mutant look new).
fn exercise_accessors(file: &GgufFile) -> String {
    for (key, value) in file.metadata() {
        let _ = (value.to_string(), value.type_description());
        let _ = (file.get_str(key), file.get_u64(key), file.get_i64(key));
        let _ = (
            file.get_f64(key),
            file.get_bool(key),
            file.get_string_array(key),
        );
        if let Value::Array(array) = value {
            let _ = array.to_i64_vec();
        }
    }
    for info in file.tensors() {
        let data = file.tensor_data(&info.name).unwrap_or_default();
        assert_eq!(data.len() as u64, info.size_bytes, "tensor {}", info.name);
        assert_eq!(
            (file.data_offset() + info.offset) % file.alignment(),
            0,
            "tensor {} is not aligned",
            info.name
        );
        let _ = (info.shape(), info.element_count(), info.ggml_type.name());
    }
    let tensors = if file.tensors().is_empty() {
        "no tensors"
    } else {
        "tensors"
    };
    format!("v{} {tensors}", file.version())
}
