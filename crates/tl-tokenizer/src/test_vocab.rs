//! Small in-memory GGUF vocabularies for unit tests.
//!
//! Writes just the metadata section of a GGUF v3 file, so tests can build
//! well-formed and deliberately broken vocabularies without files on disk.

use tl_gguf::GgufFile;

use crate::byte_encoding::byte_to_char;

/// A metadata value, in the few types tokenizer keys use.
#[derive(Debug, Clone)]
pub(crate) enum MetaValue {
    U32(u32),
    Bool(bool),
    Str(String),
    Strings(Vec<String>),
    F32s(Vec<f32>),
    I32s(Vec<i32>),
}

/// Metadata entries in file order; a later `set` of the same key replaces it.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetaBuilder {
    entries: Vec<(String, MetaValue)>,
}

impl MetaBuilder {
    pub(crate) fn set(mut self, key: &str, value: MetaValue) -> Self {
        self.entries.retain(|(k, _)| k != key);
        self.entries.push((key.to_string(), value));
        self
    }

    pub(crate) fn remove(mut self, key: &str) -> Self {
        self.entries.retain(|(k, _)| k != key);
        self
    }

    pub(crate) fn build(&self) -> GgufFile {
        GgufFile::from_bytes(self.to_bytes()).expect("test GGUF bytes are well-formed")
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for (key, value) in &self.entries {
            write_string(&mut out, key);
            write_value(&mut out, value);
        }
        out
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_array_header(out: &mut Vec<u8>, element_type: u32, len: usize) {
    out.extend_from_slice(&9u32.to_le_bytes());
    out.extend_from_slice(&element_type.to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

fn write_value(out: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U32(v) => {
            out.extend_from_slice(&4u32.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
        MetaValue::Bool(v) => {
            out.extend_from_slice(&7u32.to_le_bytes());
            out.push(u8::from(*v));
        }
        MetaValue::Str(s) => {
            out.extend_from_slice(&8u32.to_le_bytes());
            write_string(out, s);
        }
        MetaValue::Strings(items) => {
            write_array_header(out, 8, items.len());
            for item in items {
                write_string(out, item);
            }
        }
        MetaValue::F32s(items) => {
            write_array_header(out, 6, items.len());
            for item in items {
                out.extend_from_slice(&item.to_le_bytes());
            }
        }
        MetaValue::I32s(items) => {
            write_array_header(out, 5, items.len());
            for item in items {
                out.extend_from_slice(&item.to_le_bytes());
            }
        }
    }
}

fn strings(items: &[String]) -> MetaValue {
    MetaValue::Strings(items.to_vec())
}

/// An SPM vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens (ids 3..=258),
/// then `words` with descending scores, then `<|im_start|>`/`<|im_end|>` (control).
pub(crate) fn spm_vocab(words: &[&str]) -> MetaBuilder {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        types.push(6);
    }
    for word in words {
        tokens.push(word.to_string());
        types.push(1);
    }
    for control in ["<|im_start|>", "<|im_end|>"] {
        tokens.push(control.to_string());
        types.push(3);
    }
    let scores = (0..tokens.len()).map(|i| -(i as f32)).collect();
    MetaBuilder::default()
        .set("tokenizer.ggml.model", MetaValue::Str("llama".into()))
        .set("tokenizer.ggml.tokens", strings(&tokens))
        .set("tokenizer.ggml.scores", MetaValue::F32s(scores))
        .set("tokenizer.ggml.token_type", MetaValue::I32s(types))
        .set("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
        .set("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
}

/// A byte-level BPE vocabulary: the 256 byte characters (id = byte), then the
/// merge results of `merges`, then `<|im_start|>`/`<|im_end|>` (control).
pub(crate) fn bpe_vocab(merges: &[(&str, &str)]) -> MetaBuilder {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    let mut merge_lines = Vec::new();
    for (left, right) in merges {
        tokens.push(format!("{left}{right}"));
        merge_lines.push(format!("{left} {right}"));
    }
    tokens.push("<|im_start|>".into());
    tokens.push("<|im_end|>".into());
    let mut types = vec![1; tokens.len()];
    let control_count = 2;
    let first_control = types.len() - control_count;
    types[first_control..].fill(3);
    let im_end = tokens.len() as u32 - 1;
    MetaBuilder::default()
        .set("tokenizer.ggml.model", MetaValue::Str("gpt2".into()))
        .set("tokenizer.ggml.pre", MetaValue::Str("smollm".into()))
        .set("tokenizer.ggml.tokens", strings(&tokens))
        .set("tokenizer.ggml.token_type", MetaValue::I32s(types))
        .set("tokenizer.ggml.merges", strings(&merge_lines))
        .set("tokenizer.ggml.bos_token_id", MetaValue::U32(im_end - 1))
        .set("tokenizer.ggml.eos_token_id", MetaValue::U32(im_end))
}
