//! The vocabulary of a synthetic model: `tokenizer.*` metadata copied from another
//! GGUF file, or a made-up SentencePiece-style one (`tokenizer.ggml.model =
//! "llama"`) of any size, laid out as llama.cpp expects: `<unk>`, `<s>`, `</s>`,
//! the 256 byte tokens, then filler pieces with descending scores.

use tl_gguf::{Array, GgufFile, Value};

use crate::error::{Error, Result};

/// Token types (`llama_token_type`).
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// `<unk>`, `<s>`, `</s>` and `<0x00>`..`<0xFF>`.
pub const FIXED_TOKENS: usize = 3 + 256;

/// SentencePiece's escaped space.
const SPACE: char = '\u{2581}';

/// A vocabulary: its metadata entries and its size.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    entries: Vec<(String, Value)>,
    token_count: usize,
}

impl Vocabulary {
    /// Every `tokenizer.*` key of `file`, which must hold a token list.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let tokens = file
            .get_string_array("tokenizer.ggml.tokens")?
            .ok_or_else(|| {
                Error::InvalidRequest(
                    "the vocabulary file has no token list (tokenizer.ggml.tokens)".into(),
                )
            })?;
        if tokens.is_empty() {
            return Err(Error::InvalidRequest(
                "the vocabulary file's token list is empty".into(),
            ));
        }
        let entries = file
            .metadata()
            .iter()
            .filter(|(key, _)| key.starts_with("tokenizer."))
            .cloned()
            .collect();
        Ok(Self {
            entries,
            token_count: tokens.len(),
        })
    }

    /// A made-up SPM vocabulary of `size` tokens (at least the 259 fixed ones).
    pub fn synthetic(size: usize) -> Result<Self> {
        if size < FIXED_TOKENS {
            return Err(Error::InvalidRequest(format!(
                "a synthetic vocabulary needs at least {FIXED_TOKENS} tokens, not {size}"
            )));
        }
        let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
        let mut types = vec![UNKNOWN, CONTROL, CONTROL];
        tokens.extend((0..=255u8).map(|byte| format!("<0x{byte:02X}>")));
        types.resize(FIXED_TOKENS, BYTE);
        tokens.extend(filler_pieces().take(size - FIXED_TOKENS));
        types.resize(size, NORMAL);
        // Earlier pieces win merges, as in a trained vocabulary; fixed tokens score 0.
        let scores = (0..size)
            .map(|id| -(id.saturating_sub(FIXED_TOKENS - 1) as f32))
            .collect();
        let entries = vec![
            string("tokenizer.ggml.model", "llama"),
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(Array::String(tokens.into())),
            ),
            (
                "tokenizer.ggml.scores".into(),
                Value::Array(Array::F32(scores)),
            ),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(Array::I32(types)),
            ),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
            ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
            ("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)),
            ("tokenizer.ggml.add_bos_token".into(), Value::Bool(true)),
            ("tokenizer.ggml.add_eos_token".into(), Value::Bool(false)),
        ];
        Ok(Self {
            entries,
            token_count: size,
        })
    }

    /// Number of tokens.
    pub fn token_count(&self) -> usize {
        self.token_count
    }

    /// The `tokenizer.*` metadata entries.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// About how many bytes the entries take in a GGUF header.
    pub fn encoded_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|(key, value)| 8 + key.len() as u64 + 4 + value_bytes(value))
            .sum()
    }

    pub(crate) fn into_entries(self) -> Vec<(String, Value)> {
        self.entries
    }
}

/// Encoded size of a value, its type tag not included.
fn value_bytes(value: &Value) -> u64 {
    match value {
        Value::String(text) => 8 + text.len() as u64,
        Value::Array(Array::String(items)) => {
            12 + items.iter().map(|s| 8 + s.len() as u64).sum::<u64>()
        }
        // Nested arrays are not in any vocabulary; their elements count as headers.
        Value::Array(array) => 12 + array.len() as u64 * array.element_type().min_encoded_bytes(),
        scalar => scalar.value_type().min_encoded_bytes(),
    }
}

fn string(key: &str, value: &str) -> (String, Value) {
    (key.into(), Value::String(value.into()))
}

/// Distinct pieces, endless: `▁`, each printable ASCII character alone and after
/// `▁`, then lowercase strings of length 2, 3, ... alone and after `▁`.
fn filler_pieces() -> impl Iterator<Item = String> {
    let printable = ('!'..='~').map(String::from);
    let singles = printable
        .clone()
        .chain(printable.map(|c| format!("{SPACE}{c}")));
    let words = (2u32..).flat_map(|len| {
        (0..26u64.pow(len)).flat_map(move |index| {
            let word = lowercase_word(index, len);
            [format!("{SPACE}{word}"), word]
        })
    });
    std::iter::once(SPACE.to_string())
        .chain(singles)
        .chain(words)
}

/// The `index`-th lowercase word of `len` letters in alphabetical order.
fn lowercase_word(mut index: u64, len: u32) -> String {
    let mut letters = vec![b'a'; len as usize];
    for letter in letters.iter_mut().rev() {
        *letter = b'a' + (index % 26) as u8;
        index /= 26;
    }
    String::from_utf8_lossy(&letters).into_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn filler_pieces_are_distinct() {
        let pieces: Vec<String> = filler_pieces().take(151_936).collect();
        let distinct: HashSet<&String> = pieces.iter().collect();
        assert_eq!(distinct.len(), pieces.len());
        assert_eq!(pieces[0], "\u{2581}");
        assert!(pieces.contains(&"\u{2581}he".to_string()));
    }

    #[test]
    fn too_small_a_vocabulary_is_refused() {
        let message = Vocabulary::synthetic(100).unwrap_err().to_string();
        assert!(message.contains("at least 259"), "{message}");
    }

    #[test]
    fn synthetic_arrays_have_the_requested_length() {
        let vocab = Vocabulary::synthetic(512).unwrap();
        assert_eq!(vocab.token_count(), 512);
        for (key, value) in vocab.entries() {
            if let Value::Array(array) = value {
                assert_eq!(array.len(), 512, "{key}");
            }
        }
    }
}
